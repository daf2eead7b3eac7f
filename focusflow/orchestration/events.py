"""The one definition of ``focusflow.checkpoint.updated``: the event the LAPT task emits for every
stored checkpoint, and what an automation matches on to evaluate it.

Imports no other orchestration module (the LAPT task imports this one) and Prefect only when emitting.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from focusflow.storage import redact_uri

if TYPE_CHECKING:
    from prefect.events import Event

CHECKPOINT_EVENT = "focusflow.checkpoint.updated"
CHECKPOINT_RESOURCE_PREFIX = "focusflow.checkpoint."
LANGUAGE_LABEL = "focusflow.language"
CHECKPOINT_URI_LABEL = "focusflow.checkpoint.uri"
#: A trigger's parameter template that reads the checkpoint URI back from the event.
CHECKPOINT_URI_TEMPLATE = "{{ event.resource['" + CHECKPOINT_URI_LABEL + "'] }}"


def checkpoint_event_resource(checkpoint_uri: str, language: str | None) -> dict[str, str]:
    """The event's resource: which checkpoint, of which language (what automations match on)."""
    uri = redact_uri(checkpoint_uri)
    return {
        "prefect.resource.id": f"{CHECKPOINT_RESOURCE_PREFIX}{uri}",
        "prefect.resource.name": uri.rsplit("/", 1)[-1],
        LANGUAGE_LABEL: language or "",
        CHECKPOINT_URI_LABEL: uri,
    }


def checkpoint_event_match(language: str) -> dict[str, str]:
    """Resource labels a trigger matches: any checkpoint of ``language``."""
    return {"prefect.resource.id": f"{CHECKPOINT_RESOURCE_PREFIX}*", LANGUAGE_LABEL: language}


def emit_checkpoint_event(checkpoint_uri: str, language: str | None, step: int,
                          metrics: Mapping[str, Any] | None = None) -> Event | None:
    """Emit the event for a stored checkpoint; scalar metrics travel in the payload.

    Returns the event, or None where Prefect emits no events (no API configured)."""
    from prefect.events import emit_event

    return emit_event(event=CHECKPOINT_EVENT, resource=checkpoint_event_resource(checkpoint_uri, language),
               payload={"step": step, "metrics": {k: v for k, v in (metrics or {}).items()
                                                  if isinstance(v, (int, float, str))}})
