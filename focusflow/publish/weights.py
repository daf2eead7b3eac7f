"""Whether a model is fit to publish: its stored weight check, or the same check made on its files.

LAPT and align record the check of every checkpoint and final model (``weights_check`` in the manifest:
``models.weights``); a model without one (an initialization, an import, an artifact older than the check) is
checked here against the nearest model it came from: its initialization, else the source model its lineage names
(``Lineage.source_model``: the source stage's, the folder a stage command was given, the source a published folder's
``lineage.json`` names), tensor by tensor; only a model nothing names a start for is held to the absolute bound.
The card says which (:func:`compared_with`).
"""

from __future__ import annotations

from typing import Any

from focusflow.errors import InputError
from focusflow.models.weights import RMS_ABSOLUTE_LIMIT, RMS_GROWTH_LIMIT, WeightCheck, check_weights, folder_rms
from focusflow.publish.lineage import Lineage
from focusflow.storage import Artifact, ArtifactStore, shorten_key
from focusflow.training.records import ModelRecord

# The ancestors a model's weights started from, nearest first (then the source model the lineage names).
_STARTS = ("lapt", "align", "init")


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
    """The model's stored check, else the check of its files against the nearest ancestor model, else against the
    source model its lineage names; with none of them, against the absolute bound. A model without safetensors
    weights is refused: nothing of it would be published, and a check of no tensors passes."""
    require_safetensors(lineage.model)
    stored = stored_weight_check(lineage.model)
    if stored is not None:
        return stored
    starts = [(role, lineage.ancestors.get(role)) for role in _STARTS] + [("source", lineage.source_model)]
    start = next(((role, a) for role, a in starts if a is not None and a.content_hash != lineage.model.content_hash),
                 None)
    current = folder_rms(store.fetch(lineage.model))
    if start is None:
        return check_weights(current, None)
    role, artifact = start
    return check_weights(current, folder_rms(store.fetch(artifact)), against=role,
                         reference=f"{artifact.stage}/{shorten_key(artifact.key)}")


#: Weights as pickles (``torch.save``): never read back from a store, never published.
PICKLED_WEIGHTS = (".bin", ".pt", ".pth", ".ckpt")


def require_safetensors(model: Artifact) -> None:
    """Refuse a model folder whose weights are not safetensors files (a ``pytorch_model.bin``), naming the fix."""
    top = [name for name in model.files if "/" not in name]
    if any(name.endswith(".safetensors") for name in top):
        return
    pickled = [name for name in top if name.endswith(PICKLED_WEIGHTS)]
    found = (f"its weights are pickles ({', '.join(pickled[:3])}), which focusflow neither reads from a store nor "
             "publishes: save the model again with save_pretrained() (safetensors by default), or convert them"
             if pickled else f"it has no weights file (it holds {', '.join(sorted(top)[:6]) or 'no files'})")
    raise InputError(f"{model.stage} model {model.uri} has no safetensors weights: {found}")


def compared_with(check: WeightCheck) -> str:
    """What the check held the weights against, in words (for the card)."""
    if check.against == "start":
        return f"the start of its training run (each tensor's RMS within {RMS_GROWTH_LIMIT:g}x)"
    if check.against == "absolute":
        return (f"the absolute bound (RMS at most {RMS_ABSOLUTE_LIMIT:g}): the store names no model it started from, "
                "so a blow-up short of that bound goes unseen")
    reference = f" (`{check.reference}`)" if check.reference else ""
    lacking = (f"; {check.uncompared} tensor(s) the {check.against} model lacks were held to the absolute bound "
               f"({RMS_ABSOLUTE_LIMIT:g}) instead" if check.uncompared else "")
    return f"the {check.against} model{reference}, each tensor's RMS within {RMS_GROWTH_LIMIT:g}x of its own{lacking}"


def require_sound_weights(check: WeightCheck, model: Artifact, force: bool) -> None:
    """Refuse a model that failed its check, unless ``force`` (then the card says it failed)."""
    if not check.passed and not force:
        against = f" against {check.reference}" if check.reference else ""
        raise InputError(f"{model.stage} model {model.uri} failed focusflow's weight check{against} ({check.problem}): "
                         "it was not published. Publish it anyway with --force, and its card will say so")


__all__ = ["PICKLED_WEIGHTS", "compared_with", "require_safetensors", "require_sound_weights", "stored_weight_check",
           "weight_check"]
