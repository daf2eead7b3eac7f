"""``evaluate_checkpoint``: re-evaluate one stored checkpoint (on a schedule, or when LAPT stores one)."""

from __future__ import annotations

from typing import Any

from prefect import flow, tags
from prefect.artifacts import create_table_artifact

from focusflow.evaluation.records import DownstreamRecord, IntrinsicRecord
from focusflow.flows.common import cancelled_when_stopped, load_run_config
from focusflow.logs import configure_output
from focusflow.pipeline import params_for
from focusflow.pipeline.lapt_stage import CHECKPOINT_STAGE, LAPT_STAGE
from focusflow.storage import Artifact, ArtifactStore, StoreError, locate, redact_uri
from focusflow.storage.records import StageRecord
from focusflow.tasks import tasks_for
from focusflow.tasks.common import artifact_key_name
from focusflow.training.records import CheckpointRecord

LATEST = "latest"


def latest_checkpoint_uri(store: ArtifactStore, language: str) -> str:
    """The newest LAPT checkpoint (or final LAPT model) stored for ``language``."""
    candidates = [a for stage in (CHECKPOINT_STAGE, LAPT_STAGE) for a in store.list(stage)
                  if StageRecord.of(a).language == language]
    if not candidates:
        raise StoreError(f"no LAPT checkpoint for language {language!r} in {redact_uri(store.uri)}; "
                         "run specialize_language with a LAPT budget first (the default 30 minutes, or lapt.steps > 0)")
    return max(candidates, key=lambda a: a.created).uri


def checkpoint_artifact(address: str, language: str, store: str | None = None) -> Artifact:
    """The checkpoint ``address`` names, read as every command reads an artifact's address (``storage.locate``:
    ``<stage>/<key-prefix>`` in ``store``, a shortened checkpoint key ``<head>…-step-N``, an artifact's URI or
    folder), or with ``latest`` the newest stored for ``language``."""
    if address == LATEST:
        artifact_store = ArtifactStore(store)
        return artifact_store.resolve(latest_checkpoint_uri(artifact_store, language))
    artifact_store, stage, key = locate(address, store)
    return artifact_store.get(stage, key)


def checkpoint_label(checkpoint: Artifact) -> str:
    """``step-<n>`` for a LAPT checkpoint, ``final`` for the final LAPT model (its row name in the tables)."""
    step = _checkpoint_step(checkpoint)
    return "final" if step is None else f"step-{step}"


def _checkpoint_step(checkpoint: Artifact) -> int | None:
    """The step of a LAPT checkpoint; None for the final LAPT model (or any other artifact)."""
    return CheckpointRecord.of(checkpoint).step if checkpoint.stage == CHECKPOINT_STAGE else None


def _lineage(store: ArtifactStore, checkpoint: Artifact) -> dict[str, str]:
    lineage = dict(StageRecord.of(checkpoint).lineage)
    missing = {"source", "split"} - set(lineage)
    if missing:
        raise StoreError(f"checkpoint {redact_uri(checkpoint.uri)} does not record its {sorted(missing)}; "
                         "it was not produced by focusflow's LAPT stage")
    return lineage


@flow(name="evaluate-checkpoint", log_prints=True)
@cancelled_when_stopped
def evaluate_checkpoint(checkpoint_uri: str, language: str, suites: list[str] | None = None,
                        store: str | None = None, evaluation: dict[str, Any] | None = None) -> dict[str, Any]:
    """Held-out intrinsic metrics (suite ``intrinsic``) and downstream tasks (``ner:…``, ``nli:…``, ``qa:…``,
    ``cls:…``).

    ``checkpoint_uri`` is any address of the checkpoint (:func:`checkpoint_artifact`: its URI, ``<stage>/<key-prefix>``
    in ``store``), or ``latest``: the newest checkpoint stored for the language. ``evaluation`` overrides the run
    configuration's ``evaluation`` section (``data_root``, ``seeds``, ``epochs``, …).
    """
    configure_output()
    checkpoint = checkpoint_artifact(checkpoint_uri, language, store)
    artifact_store, uri = ArtifactStore(checkpoint.store_uri), checkpoint.uri
    lineage = _lineage(artifact_store, checkpoint)
    suites = suites or ["intrinsic"]
    # the language's default settings (plus ``evaluation`` overrides): the same held-out sentences
    # and masks as the flow's own intrinsic evaluation, so checkpoints compare with initializations
    settings = load_run_config(language, {"evaluation": evaluation} if evaluation else None)
    tasks = tasks_for(artifact_store.uri)
    label = checkpoint_label(checkpoint)
    results: dict[str, Any] = {"checkpoint": uri, "step": _checkpoint_step(checkpoint), "label": label}
    with tags(f"language:{language}", "evaluate-checkpoint"):
        if "intrinsic" in suites:
            # the run's reference for its tokenizer (a cache hit); older checkpoints: the checkpoint's own tokenizer
            reference_uri = tasks["reference"](artifact_store.uri, params_for("reference", settings),
                                               {"source": lineage["source"], "split": lineage["split"],
                                                "tokenizer": lineage.get("tokenizer", uri)}, language=language)
            intrinsic_uri = tasks["intrinsic"](artifact_store.uri, params_for("intrinsic", settings),
                                               {"model": uri, "reference": reference_uri}, language=language)
            results["intrinsic"] = IntrinsicRecord.of(artifact_store.resolve(intrinsic_uri)).shown()
        downstream_suites = [s for s in suites if s != "intrinsic"]
        if downstream_suites:
            name = label
            params = params_for("downstream", settings, name=name, tasks=downstream_suites)
            downstream_uri = tasks["downstream"](artifact_store.uri, params, {"model": uri}, language=language,
                                                 label=name)
            results["downstream"] = DownstreamRecord.of(artifact_store.resolve(downstream_uri)).results
    rows = [{"metric": k, "value": v} for k, v in (results.get("intrinsic") or {}).items()
            if isinstance(v, (int, float, str))]
    rows.insert(0, {"metric": "checkpoint", "value": redact_uri(uri)})
    create_table_artifact(table=rows, key=artifact_key_name(language, "checkpoint-eval"),
                          description=f"Evaluation of the {label.replace('-', ' ')} LAPT model ({language})")
    return results
