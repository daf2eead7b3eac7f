"""``transfer_embeddings``: source matrices + tokenizers -> target matrices + per-token report."""

from __future__ import annotations

import inspect
import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from focusflow.embeddings.auxiliary import AuxVectors
from focusflow.embeddings.builders import PlanInputs, PlanMethod
from focusflow.embeddings.overlap import Overlap, compute_overlap
from focusflow.embeddings.plan import PlanBuilder, TransferPlan
from focusflow.errors import InputError
from focusflow.methods import METHOD_NAMES, SHARE_GROUPS, Fate, init_method
from focusflow.tokenizer.canonical import CanonicalToken, canonical_vocab
from focusflow.tokenizer.source_ids import named_function

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


def plan_method(method: str) -> PlanMethod:
    """The builder the method's row names; an error naming the row when there is no such builder, so a row
    never falls through to another method."""
    spec = init_method(method)  # a ValueError naming the choices for an unknown method
    try:
        found = named_function(spec.builder)
    except (AttributeError, ImportError):
        found = None
    if not inspect.isfunction(found):
        raise InputError(f"method {method!r} names the builder {spec.builder!r}, which focusflow.embeddings.builders "
                         "does not define: add it beside the row")
    return found


def build_plan(source_tokenizer: Any, target_tokenizer: Any, method: str, *, aux: AuxVectors | None = None,
               overlap: Overlap | None = None, seed: int = 0, chunk_rows: int = 2048, topk: int = 256,
               source_forms: list[CanonicalToken] | None = None, target_forms: list[CanonicalToken] | None = None,
               **options: Any) -> tuple[TransferPlan, dict[str, Any]]:
    """Decide every target row's fate for ``method`` (its row's builder); returns the plan and method-specific
    details."""
    build = plan_method(method)
    source_forms = source_forms or canonical_vocab(source_tokenizer)
    target_forms = target_forms or canonical_vocab(target_tokenizer)
    if overlap is None:
        overlap = compute_overlap(source_tokenizer, target_tokenizer, init_method(method).overlap, source_forms,
                                  target_forms)
    n_target, n_source = len(target_forms), len(source_forms)
    is_special = np.fromiter((f.kind == "special" for f in target_forms), bool, n_target)
    matched = np.zeros(n_target, bool)
    matched[overlap.target_ids] = True
    inputs = PlanInputs(source_tokenizer, source_forms, target_forms, overlap, is_special, np.flatnonzero(~matched),
                        aux, seed, chunk_rows, topk, options)
    plan = PlanBuilder(n_target, n_source)
    details: dict[str, Any] = {"overlap": overlap, **build(plan, inputs)}
    return plan.build(), details


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
