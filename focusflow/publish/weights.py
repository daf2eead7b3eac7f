"""Whether a model is fit to publish: its stored weight check, or the same check made on its files.

LAPT and align record the check of every checkpoint and final model (``weights_check`` in the manifest:
``models.weights``); a model without one (an initialization, an import, an artifact older than the check) is
checked here against the nearest model it came from (its initialization, else its source), tensor by tensor.
"""

from __future__ import annotations

from typing import Any

from focusflow.errors import InputError
from focusflow.models.weights import WeightCheck, check_weights, folder_rms
from focusflow.publish.lineage import Lineage
from focusflow.storage import Artifact, ArtifactStore
from focusflow.training.records import ModelRecord

# The ancestors a model's weights started from, nearest first.
_STARTS = ("lapt", "align", "init", "source")


def stored_weight_check(artifact: Artifact) -> WeightCheck | None:
    """The check a training stage recorded for ``artifact`` (LAPT and its checkpoints at the top level, align
    in its ``align`` record); None when none was recorded."""
    if artifact.stage not in ModelRecord.stages:  # an imported copy: checked on its files
        return None
    recorded: Any = ModelRecord.of(artifact).recorded_weights_check
    if not isinstance(recorded, dict) or "passed" not in recorded:
        return None
    return WeightCheck.from_dict(recorded)


def weight_check(store: ArtifactStore, lineage: Lineage) -> WeightCheck:
    """The model's stored check, else the check of its files against the nearest ancestor model (or, with none,
    against the absolute bound)."""
    stored = stored_weight_check(lineage.model)
    if stored is not None:
        return stored
    current = folder_rms(store.fetch(lineage.model))
    for role in _STARTS:
        ancestor = lineage.ancestors.get(role)
        if ancestor is not None and ancestor.key != lineage.model.key:
            return check_weights(current, folder_rms(store.fetch(ancestor)), against=f"{role} model")
    return check_weights(current, None)


def require_sound_weights(check: WeightCheck, model: Artifact, force: bool) -> None:
    """Refuse a model that failed its check, unless ``force`` (then the card says it failed)."""
    if not check.passed and not force:
        raise InputError(f"{model.stage} model {model.uri} failed focusflow's weight check ({check.problem}): it "
                         "was not published. Publish it anyway with --force, and its card will say so")


__all__ = ["require_sound_weights", "stored_weight_check", "weight_check"]
