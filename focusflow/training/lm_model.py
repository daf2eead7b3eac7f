"""The language model LAPT and distillation train: loaded in float32 with its head required and the training dropout
set, so neither trains from a random head (:func:`require_head`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from torch import nn

from focusflow.errors import InputError
from focusflow.models.loading import describe_source, model_class, require_weights

log = logging.getLogger(__name__)

#: The LAPT settings a resume may change (budget, checkpoints, evaluation, speed), for every objective's run.
LAPT_RESUMABLE_CHANGES = frozenset({"steps", "samples", "tokens", "minutes", "checkpoint_every", "checkpoint_steps",
                                    "checkpoint_minutes", "budget_probe_steps", "keep_last", "eval_every", "log_every",
                                    "prefetch", "eval_sequences", "compile"})


def load_model(folder: Path, attn_implementation: str, dropout: float | None = None) -> tuple[nn.Module, str]:
    """The LM of an HF folder in float32 and the LM loss LAPT trains it with; a folder without the trained head that
    loss needs is refused (:func:`require_head`): LAPT never starts from a random head. ``dropout`` (None: the model's
    own) replaces the model's hidden and attention dropout while it trains; its config keeps its own values, so the
    saved model fine-tunes as its source would."""
    require_weights(folder)
    info = describe_source(folder)
    if info.lm_loss is None:  # a bare encoder, from its config alone: refused before transformers loads (and warns)
        require_head(folder, info, ())
    auto = model_class(info, add_head=True)
    overrides = dropout_settings(folder, dropout)
    try:
        model, loading = auto.from_pretrained(folder, dtype=torch.float32, attn_implementation=attn_implementation,
                                              output_loading_info=True, **overrides)
    except (ValueError, ImportError) as exc:
        if attn_implementation == "eager":
            raise
        log.warning("attention %r unavailable for %s (%s); using eager", attn_implementation, info.model_type, exc)
        model, loading = auto.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager",
                                              output_loading_info=True, **overrides)
    require_head(folder, info, loading.get("missing_keys") or ())
    if overrides:  # the modules were built with the training dropout; the config says the model's own again
        from transformers import AutoConfig

        own = AutoConfig.from_pretrained(folder)
        for name in overrides:
            setattr(model.config, name, getattr(own, name))
    return model, info.trained_lm_loss


# a config's dropout probabilities of the body (not a task head's: those come with fine-tuning)
_DROPOUT_SUFFIXES = ("dropout", "dropout_prob", "_pdrop")
_HEAD_DROPOUTS = frozenset({"classifier_dropout", "summary_first_dropout", "pooler_dropout"})


def dropout_settings(folder: Path, dropout: float | None) -> dict[str, float]:
    """The config values that set the body's dropout to ``dropout`` (none when None or the model has none)."""
    if dropout is None:
        return {}
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(folder).to_dict()
    return {name: float(dropout) for name, value in config.items()
            if name.endswith(_DROPOUT_SUFFIXES) and name not in _HEAD_DROPOUTS
            and isinstance(value, (int, float)) and not isinstance(value, bool)}


def require_head(folder: Path, info: Any, missing: Any, name: str | None = None) -> None:
    """An error naming the fix when the model's head was not in its weights (a bare encoder, or weights without
    the head's): trained from random values, its first minutes undo what the initialization gave. ``name``: the
    model as the user gave it (default: the folder)."""
    absent = sorted(str(name) for name in missing)
    if info.lm_loss is not None and not absent:
        return
    what = (f"is a bare {info.architecture} without an {info.trained_lm_loss.upper()} head"
            if info.lm_loss is None
            else f"lacks its {info.trained_lm_loss.upper()} head's weights ({', '.join(absent[:3])}"
                 f"{f' and {len(absent) - 3} more' if len(absent) > 3 else ''})")
    raise InputError(f"model {name or folder} {what}: LAPT would start from a random head. Give its source a trained head "
                     "(focusflow source SOURCE --head-train CORPUS, as the flows' source stage does) and initialize "
                     "the model from that source again")
