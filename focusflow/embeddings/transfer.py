"""``transfer_embeddings``: source matrices + tokenizers -> target matrices + per-token report."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pandas as pd

from focusflow.config import DEFAULT_RARE_TOKENS, RareTokens
from focusflow.embeddings import baselines
from focusflow.embeddings.auxiliary import AuxVectors
from focusflow.embeddings.focus import sparsemax_similarity_weights
from focusflow.embeddings.overlap import Overlap, compute_overlap
from focusflow.embeddings.plan import PlanBuilder, TransferPlan
from focusflow.errors import InputError
from focusflow.methods import METHOD_NAMES, SHARE_GROUPS, Fate, init_method
from focusflow.tokenizer.canonical import CanonicalToken, canonical_vocab

log = logging.getLogger(__name__)
METHODS = METHOD_NAMES  # the rows of focusflow.methods.INIT_METHODS


@dataclass
class TransferResult:
    """Target matrices (same keys as the source ``matrices``), the plan, the per-token report and totals."""

    matrices: dict[str, np.ndarray]
    plan: TransferPlan
    report: pd.DataFrame
    totals: dict[str, Any]

    @property
    def embeddings(self) -> np.ndarray:
        return self.matrices["embeddings"]


def _copy_overlap(builder: PlanBuilder, overlap: Overlap) -> None:
    fates = np.asarray([Fate(f"copied_{kind}") for kind in overlap.kinds], dtype=object)
    builder.copy(overlap.target_ids, overlap.source_ids, fates)


def build_plan(source_tokenizer: Any, target_tokenizer: Any, method: str, *, aux: AuxVectors | None = None,
               overlap: Overlap | None = None, seed: int = 0, chunk_rows: int = 2048, topk: int = 256,
               source_forms: list[CanonicalToken] | None = None, target_forms: list[CanonicalToken] | None = None,
               **options: Any) -> tuple[TransferPlan, dict[str, Any]]:
    """Decide every target row's fate for ``method``; returns the plan and method-specific details."""
    init_method(method)  # a ValueError naming the choices for an unknown method
    source_forms = source_forms or canonical_vocab(source_tokenizer)
    target_forms = target_forms or canonical_vocab(target_tokenizer)
    if overlap is None:
        overlap = compute_overlap(source_tokenizer, target_tokenizer, "symbolic" if method == "focus-symbolic" else "full",
                                  source_forms, target_forms)
    n_target, n_source = len(target_forms), len(source_forms)
    builder = PlanBuilder(n_target, n_source)
    details: dict[str, Any] = {"overlap": overlap}
    is_special = np.fromiter((f.kind == "special" for f in target_forms), bool, n_target)
    matched = np.zeros(n_target, bool)
    matched[overlap.target_ids] = True
    rest = np.flatnonzero(~matched)
    if method == "random":
        specials = overlap.kinds == "special"
        builder.copy(overlap.target_ids[specials], overlap.source_ids[specials], Fate.COPIED_SPECIAL)
        special_copied = np.zeros(n_target, bool)
        special_copied[overlap.target_ids[specials]] = True
        baselines.random_rows(builder, np.flatnonzero(~special_copied), seed)
    elif method == "wechsel":
        specials = overlap.kinds == "special"
        builder.copy(overlap.target_ids[specials], overlap.source_ids[specials], Fate.COPIED_SPECIAL)
        taken = np.zeros(n_target, bool)
        taken[overlap.target_ids[specials]] = True
        missing = [name for name in ("wechsel_source_vectors", "wechsel_target_vectors") if not options.get(name)]
        if missing:
            raise InputError(f"method 'wechsel' needs {', '.join(missing)} (fastText .bin word vectors of the source and "
                             f"target languages) and optionally wechsel_dictionary (TSV word pairs); nothing is downloaded")
        baselines.wechsel_rows(builder, np.flatnonzero(~taken & ~is_special), target_forms, source_forms,
                               Path(options["wechsel_source_vectors"]), Path(options["wechsel_target_vectors"]),
                               options.get("wechsel_dictionary"), k=int(options.get("wechsel_k", 10)),
                               temperature=float(options.get("wechsel_temperature", 0.1)))
    else:
        _copy_overlap(builder, overlap)
        if method == "mean":
            builder.mean(rest)
        elif method == "fvt":
            baselines.fvt_rows(builder, rest[~is_special[rest]], target_forms, source_tokenizer)
        elif method == "avg-eg":
            baselines.avg_eg_rows(builder, rest[~is_special[rest]], target_forms, source_forms)
        else:  # focus, focus-symbolic
            _focus_rows(builder, details, aux, overlap, rest, is_special, target_forms, source_tokenizer,
                        options.get("rare_tokens", DEFAULT_RARE_TOKENS), chunk_rows, topk)
    return builder.build(), details


def _focus_rows(builder: PlanBuilder, details: dict[str, Any], aux: AuxVectors | None, overlap: Overlap,
                rest: np.ndarray, is_special: np.ndarray, target_forms: list[CanonicalToken], source_tokenizer: Any,
                rare_tokens: str, chunk_rows: int, topk: int) -> None:
    """FOCUS's combinations for the new rows with a fastText vector, then ``rare_tokens``'s fallback for the rest.

    Anchors are overlap tokens with an in-vocabulary vector, specials excluded (fastText's '</s>' is its
    line-break marker, not the tokenizer's eos; deepfocus never matches specials, so its anchors agree).
    Rare rows get their subword vector combined over the same anchors in a separate pass, so the
    in-vocabulary rows are the same for every fallback; what is left is FVT's mean of pieces, else random.
    """
    if aux is None:
        raise InputError("FOCUS needs auxiliary vectors (train_aux_embeddings or a fastText .bin)")
    if rare_tokens not in get_args(RareTokens):
        raise InputError(f"unknown rare_tokens {rare_tokens!r}; choose one of {', '.join(get_args(RareTokens))}")
    tokens = [form.token for form in target_forms]
    aux_rows = aux.lookup(tokens)
    anchor_mask = (aux_rows[overlap.target_ids] >= 0) & (overlap.kinds != "special")
    anchor_targets = overlap.target_ids[anchor_mask]
    anchor_sources = overlap.source_ids[anchor_mask]
    anchors = aux.vectors[aux_rows[anchor_targets]]
    new_rows = rest[aux_rows[rest] >= 0]
    details.update(anchor_targets=anchor_targets, anchor_sources=anchor_sources, new_rows=new_rows)
    rare = rest[(aux_rows[rest] < 0) & ~is_special[rest]]
    passes = [(new_rows, aux_rows, Fate.COMBINED)]
    if rare_tokens == "subword":
        subword_rows = aux.lookup(tokens, subwords=True)
        passes.append((rare[subword_rows[rare] >= 0], subword_rows, Fate.COMBINED_SUBWORD))
        rare = rare[subword_rows[rare] < 0]
    tops = []
    for rows, vector_rows, fate in passes:
        if len(rows):
            weights = sparsemax_similarity_weights(aux.vectors[vector_rows[rows]], anchors, chunk_rows=chunk_rows, k=topk)
            builder.combine(rows[weights.rows], anchor_sources[weights.cols], weights.vals, fate)
            top = np.where(weights.top_cols >= 0, anchor_sources[np.maximum(weights.top_cols, 0)], -1)
            tops.append((rows, top, weights.top_vals))
    if tops:
        details.update(top_rows=np.concatenate([t[0] for t in tops]), top_sources=np.concatenate([t[1] for t in tops]),
                       top_weights=np.concatenate([t[2] for t in tops]))
    if rare_tokens != "random":
        baselines.fvt_rows(builder, rare, target_forms, source_tokenizer, fate=Fate.FVT)


def make_report(plan: TransferPlan, details: dict[str, Any], source_forms: list[CanonicalToken],
                target_forms: list[CanonicalToken], source_offset: int = 0) -> pd.DataFrame:
    """One row per target token: fate, copied source token, support size, top anchors with weights."""
    copied = plan.source_id >= 0
    source_token = np.full(plan.n_target, None, dtype=object)
    # only the source tokens the report names (not all 250k of an XLM-R vocabulary)
    source_token[copied] = [source_forms[i].token for i in plan.source_id[copied].tolist()]
    anchors = np.full(plan.n_target, "", dtype=object)
    if "top_rows" in details:
        tops, weights = details["top_sources"], details["top_weights"]
        anchors[details["top_rows"]] = [
            " | ".join(f"{source_forms[s].token}:{w:.3f}" for s, w in zip(srcs, ws, strict=False) if s >= 0)
            for srcs, ws in zip(tops.tolist(), weights.tolist(), strict=False)]
    return pd.DataFrame({
        "target_id": np.arange(plan.n_target) + source_offset,
        "token": [form.token for form in target_forms],
        "fate": plan.fate.astype(str),
        "source_id": plan.source_id,
        "source_token": source_token,
        "support": plan.support,
        "top_anchors": anchors,
    })


def summarize(plan: TransferPlan, details: dict[str, Any], method: str) -> dict[str, Any]:
    counts = pd.Series(plan.fate).value_counts()
    combined = plan.support[plan.fate == Fate.COMBINED]
    totals: dict[str, Any] = {
        "method": method,
        "target_vocab_size": int(plan.n_target),
        "source_vocab_size": int(plan.n_source),
        **{fate.value: int(counts.get(fate, 0)) for fate in Fate},
    }
    totals["copied"] = sum(totals[fate] for fate in Fate if fate.copied)
    # shares of the target vocabulary (they add up to 1): what the comparison table shows
    totals.update({f"{group}_share": totals[group] / max(1, plan.n_target) for group in SHARE_GROUPS})
    if "anchor_targets" in details:
        totals["anchors"] = int(len(details["anchor_targets"]))
    if len(combined):
        totals["support"] = {"mean": float(combined.mean()), "median": float(np.median(combined)),
                             "p90": float(np.percentile(combined, 90)), "max": int(combined.max())}
    return totals


def transfer_embeddings(source_tokenizer: Any, target_tokenizer: Any, matrices: dict[str, np.ndarray] | np.ndarray,
                        method: str = "focus", *, aux: AuxVectors | None = None, overlap: Overlap | None = None,
                        seed: int = 0, chunk_rows: int = 2048, **options: Any) -> TransferResult:
    """New matrices for the target vocabulary.

    ``matrices`` maps names to per-source-token arrays (``embeddings`` plus e.g. ``output_embeddings``,
    ``output_bias``); a bare array means ``{"embeddings": array}``. Every matrix gets the same plan.
    """
    if not isinstance(matrices, dict):
        matrices = {"embeddings": matrices}
    started = time.perf_counter()
    source_forms = canonical_vocab(source_tokenizer)
    target_forms = canonical_vocab(target_tokenizer)
    for name, matrix in matrices.items():
        if len(matrix) != len(source_forms):
            raise InputError(f"{name} has {len(matrix)} rows but the source tokenizer has {len(source_forms)} tokens; "
                             "pass the matrix that belongs to this tokenizer")
    plan, details = build_plan(source_tokenizer, target_tokenizer, method, aux=aux, overlap=overlap, seed=seed,
                               chunk_rows=chunk_rows, source_forms=source_forms, target_forms=target_forms, **options)
    outputs = {name: plan.apply(matrix, seed=seed + index) for index, (name, matrix) in enumerate(matrices.items())}
    report = make_report(plan, details, source_forms, target_forms)
    totals = summarize(plan, details, method)
    totals["seconds"] = round(time.perf_counter() - started, 3)
    log.info("%s: %s", method, {k: v for k, v in totals.items() if k != "support"})
    return TransferResult(outputs, plan, report, totals)
