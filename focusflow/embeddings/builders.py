"""The plan builders: one function per row of :data:`focusflow.methods.INIT_METHODS`, named by the row's ``builder``.

``build_plan`` looks the row's builder up here by name and calls it; a row whose builder is missing fails
there, naming the row, instead of falling through to another method. Each builder decides the fate of every
target row in a :class:`PlanBuilder` from the same :class:`PlanInputs` and returns the details it found
(FOCUS: its anchors and top weights) for the report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import numpy as np

from focusflow.config import DEFAULT_RARE_TOKENS, RareTokens
from focusflow.embeddings import baselines
from focusflow.embeddings.auxiliary import AuxVectors
from focusflow.embeddings.focus import sparsemax_similarity_weights
from focusflow.embeddings.overlap import Overlap
from focusflow.embeddings.plan import PlanBuilder
from focusflow.errors import InputError
from focusflow.methods import Fate
from focusflow.tokenizer.canonical import CanonicalToken


@dataclass(frozen=True)
class PlanInputs:
    """What every builder may read: both vocabularies, their overlap, and the method's inputs and options."""

    source_tokenizer: Any
    source_forms: list[CanonicalToken]
    target_forms: list[CanonicalToken]
    overlap: Overlap
    is_special: np.ndarray  # bool per target row
    unmatched: np.ndarray   # target rows the overlap does not copy
    aux: AuxVectors | None
    seed: int
    chunk_rows: int
    topk: int
    options: dict[str, Any]

    @property
    def unmatched_regular(self) -> np.ndarray:
        """The unmatched rows that are not special tokens: what a baseline builds from source pieces."""
        return self.unmatched[~self.is_special[self.unmatched]]


#: A builder: fills the plan, returns the method's details for the report (empty for most).
PlanMethod = Callable[[PlanBuilder, PlanInputs], dict[str, Any]]
COPIED_BY_KIND = {"exact": Fate.COPIED_EXACT, "fuzzy": Fate.COPIED_FUZZY, "special": Fate.COPIED_SPECIAL}


def _copy_overlap(plan: PlanBuilder, overlap: Overlap) -> None:
    fates = np.asarray([COPIED_BY_KIND[kind] for kind in overlap.kinds], dtype=object)
    plan.copy(overlap.target_ids, overlap.source_ids, fates)


def _copy_specials(plan: PlanBuilder, overlap: Overlap) -> np.ndarray:
    """Copy only the overlap's special tokens; returns the mask of the rows they took."""
    specials = overlap.kinds == "special"
    plan.copy(overlap.target_ids[specials], overlap.source_ids[specials], Fate.COPIED_SPECIAL)
    taken = np.zeros(plan.n_target, bool)
    taken[overlap.target_ids[specials]] = True
    return taken


def focus_plan(plan: PlanBuilder, inputs: PlanInputs) -> dict[str, Any]:
    """FOCUS (and its symbolic-overlap ablation, whose row matches a smaller overlap): overlap copied, new rows
    combined over the anchors, rare rows by ``rare_tokens``'s fallback."""
    _copy_overlap(plan, inputs.overlap)
    return _focus_rows(plan, inputs, inputs.options.get("rare_tokens", DEFAULT_RARE_TOKENS))


def random_plan(plan: PlanBuilder, inputs: PlanInputs) -> dict[str, Any]:
    """Specials copied, every other row a random row of the source matrix (Zoph et al. 2016)."""
    baselines.random_rows(plan, np.flatnonzero(~_copy_specials(plan, inputs.overlap)), inputs.seed)
    return {}


def mean_plan(plan: PlanBuilder, inputs: PlanInputs) -> dict[str, Any]:
    """Overlap copied, every other row the source mean."""
    _copy_overlap(plan, inputs.overlap)
    plan.mean(inputs.unmatched)
    return {}


def fvt_plan(plan: PlanBuilder, inputs: PlanInputs) -> dict[str, Any]:
    """Overlap copied, other rows the mean of the token's source pieces (FVT)."""
    _copy_overlap(plan, inputs.overlap)
    _unspelled(plan, inputs, baselines.fvt_rows(plan, inputs.unmatched_regular, inputs.target_forms,
                                                inputs.source_tokenizer))
    return {}


def avg_eg_plan(plan: PlanBuilder, inputs: PlanInputs) -> dict[str, Any]:
    """Overlap copied, other rows the mean of source sub- and super-words (AVG-EG)."""
    _copy_overlap(plan, inputs.overlap)
    baselines.avg_eg_rows(plan, inputs.unmatched_regular, inputs.target_forms, inputs.source_forms)
    return {}


def wechsel_plan(plan: PlanBuilder, inputs: PlanInputs) -> dict[str, Any]:
    """Specials copied, every other regular row from its most similar source tokens in the user's aligned
    word-vector space (WECHSEL); nothing is downloaded."""
    taken = _copy_specials(plan, inputs.overlap)
    options = inputs.options
    missing = [name for name in ("wechsel_source_vectors", "wechsel_target_vectors") if not options.get(name)]
    if missing:
        raise InputError(f"method 'wechsel' needs {', '.join(missing)} (fastText .bin word vectors of the source and "
                         f"target languages) and optionally wechsel_dictionary (TSV word pairs); nothing is downloaded")
    baselines.wechsel_rows(plan, np.flatnonzero(~taken & ~inputs.is_special), inputs.target_forms,
                           inputs.source_forms, Path(options["wechsel_source_vectors"]),
                           Path(options["wechsel_target_vectors"]), options.get("wechsel_dictionary"),
                           k=int(options.get("wechsel_k", 10)),
                           temperature=float(options.get("wechsel_temperature", 0.1)))
    return {}


def _focus_rows(plan: PlanBuilder, inputs: PlanInputs, rare_tokens: str) -> dict[str, Any]:
    """FOCUS's combinations for the new rows with a fastText vector, then ``rare_tokens``'s fallback for the rest.

    Anchors are overlap tokens with an in-vocabulary vector, specials excluded (fastText's '</s>' is its
    line-break marker, not the tokenizer's eos; deepfocus never matches specials, so its anchors agree).
    Rare rows get their subword vector combined over the same anchors in a separate pass, so the
    in-vocabulary rows are the same for every fallback; what is left is FVT's mean of pieces, else random.
    """
    aux, overlap, rest, is_special = inputs.aux, inputs.overlap, inputs.unmatched, inputs.is_special
    if aux is None:
        raise InputError("FOCUS needs auxiliary vectors (train_aux_embeddings or a fastText .bin)")
    if rare_tokens not in get_args(RareTokens):
        raise InputError(f"unknown rare_tokens {rare_tokens!r}; choose one of {', '.join(get_args(RareTokens))}")
    tokens = [form.token for form in inputs.target_forms]
    aux_rows = aux.lookup(tokens)
    anchor_mask = (aux_rows[overlap.target_ids] >= 0) & (overlap.kinds != "special")
    anchor_targets = overlap.target_ids[anchor_mask]
    anchor_sources = overlap.source_ids[anchor_mask]
    anchors = aux.vectors[aux_rows[anchor_targets]]
    new_rows = rest[aux_rows[rest] >= 0]
    details: dict[str, Any] = {"anchor_targets": anchor_targets, "anchor_sources": anchor_sources,
                               "new_rows": new_rows}
    rare = rest[(aux_rows[rest] < 0) & ~is_special[rest]]
    passes = [(new_rows, aux_rows, Fate.COMBINED)]
    if rare_tokens == "subword":
        subword_rows = aux.lookup(tokens, subwords=True)
        passes.append((rare[subword_rows[rare] >= 0], subword_rows, Fate.COMBINED_SUBWORD))
        rare = rare[subword_rows[rare] < 0]
    tops = []
    for rows, vector_rows, fate in passes:
        if len(rows):
            weights = sparsemax_similarity_weights(aux.vectors[vector_rows[rows]], anchors,
                                                   chunk_rows=inputs.chunk_rows, k=inputs.topk)
            plan.combine(rows[weights.rows], anchor_sources[weights.cols], weights.vals, fate)
            top = np.where(weights.top_cols >= 0, anchor_sources[np.maximum(weights.top_cols, 0)], -1)
            tops.append((rows, top, weights.top_vals))
    if tops:
        details.update(top_rows=np.concatenate([t[0] for t in tops]), top_sources=np.concatenate([t[1] for t in tops]),
                       top_weights=np.concatenate([t[2] for t in tops]))
    if rare_tokens != "random":
        _unspelled(plan, inputs, baselines.fvt_rows(plan, rare, inputs.target_forms, inputs.source_tokenizer,
                                                    fate=Fate.FVT))
    return details


def _unspelled(plan: PlanBuilder, inputs: PlanInputs, rows: np.ndarray) -> None:
    """Rows no source piece spells (a byte the source lacks: SmolLM2 has no 0x06 or 0xF5-0xFF) are drawn at random,
    unless ``unspelled: mean`` (a decoder's, ``pipeline.init_stage``) gives them the source's mean row: a tied output
    row drawn at random wins greedy decoding over every real token, the mean row never does."""
    if inputs.options.get("unspelled", "random") == "mean":
        plan.mean(rows)
