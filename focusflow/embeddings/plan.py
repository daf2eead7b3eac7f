"""A transfer plan: how every target row is built from source rows, applied to any per-token matrix.

Every method (FOCUS and the baselines) produces the same thing: a sparse row-stochastic matrix
``T`` (target x source, CSR) plus masks for rows drawn at random or set to the source mean. The
same plan is applied to the input embeddings, untied output embeddings and the MLM decoder bias,
so heads get "the same weights" by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from focusflow.methods import Fate

# Rare-token fallbacks give a row a meaning, not a frequency: a 1-D per-token matrix (the MLM output bias, a unigram
# prior) keeps the paper's N(mean, std) draw for these rows, as it was below minCount (a combination of frequent
# anchors or pieces would give a rare token a frequent token's prior and raise the LM loss).
RARE_FATES = tuple(fate for fate in Fate if fate.rare_fallback)


@dataclass
class TransferPlan:
    n_target: int
    n_source: int
    indptr: np.ndarray          # int64, n_target + 1
    indices: np.ndarray         # int64 source ids
    weights: np.ndarray         # float32
    random_rows: np.ndarray     # bool, n_target: N(mean, std) per column, seeded
    mean_rows: np.ndarray       # bool, n_target: column mean of the source matrix
    fate: np.ndarray            # object, n_target: a Fate per row
    source_id: np.ndarray = field(default=None)      # int64, copied source id or -1
    support: np.ndarray = field(default=None)        # int64, entries combined (0 for copies)
    prior_rows: np.ndarray = field(default=None)     # bool, n_target: drawn like random_rows in 1-D matrices

    def __post_init__(self) -> None:
        if self.source_id is None:
            self.source_id = np.full(self.n_target, -1, np.int64)
        if self.support is None:
            self.support = np.zeros(self.n_target, np.int64)
        if self.prior_rows is None:
            self.prior_rows = np.zeros(self.n_target, bool)

    def apply(self, matrix: np.ndarray, seed: int = 0) -> np.ndarray:
        """Target rows for a source matrix (``n_source x d``, or a 1-D bias whose ``prior_rows`` are drawn), float32.

        One ``embedding_bag`` over the CSR plan writes every row once (rows without entries come out 0 and are
        then set to the mean or drawn); its memory is the output plus the plan, nothing per entry and column.
        """
        vector = matrix.ndim == 1
        source = torch.from_numpy(np.ascontiguousarray(matrix.reshape(len(matrix), -1), dtype=np.float32))
        if source.shape[0] != self.n_source:
            raise ValueError(f"plan expects {self.n_source} source rows, matrix has {source.shape[0]}")
        out = torch.nn.functional.embedding_bag(
            torch.from_numpy(self.indices), source, torch.from_numpy(self.indptr), mode="sum",
            per_sample_weights=torch.from_numpy(self.weights), include_last_offset=True)
        drawn = self.random_rows | self.prior_rows if vector else self.random_rows
        if self.mean_rows.any() or drawn.any():
            mean, std = (torch.from_numpy(values.astype(np.float32)) for values in column_mean_std(source))
            out[torch.from_numpy(self.mean_rows)] = mean
            rows = torch.from_numpy(np.flatnonzero(drawn))
            if len(rows):
                generator = torch.Generator().manual_seed(seed)
                noise = torch.randn(len(rows), len(mean), generator=generator)
                out[rows] = noise.mul_(std).add_(mean)
        result = out.numpy()
        return result.reshape(-1) if vector else result


def column_mean_std(matrix: torch.Tensor, chunk_rows: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Per-column mean and (n-1) std in float64, in one pass of BLAS products over float32 chunks.

    ``torch.std_mean(dim=0)`` on a 250k x 768 matrix is a slow strided reduction (seconds); here each
    chunk contributes ``d.T @ 1`` and ``(d**2).T @ 1`` with ``d = rows - first row`` (the shift keeps
    ``E[d^2] - E[d]^2`` free of cancellation when the columns have a large offset), computed in one
    reused buffer small enough to stay in cache (fresh 50 MB temporaries cost more in page faults than the
    arithmetic, and 1024 x 768 floats stay in L2/L3: half the time of 16k-row chunks at 250k x 768).
    """
    n = len(matrix)
    shift = matrix[0].clone()
    rows = min(chunk_rows, n)
    ones = torch.ones(rows, dtype=torch.float32)
    buffer = torch.empty(rows, matrix.shape[1], dtype=torch.float32)
    total = torch.zeros(matrix.shape[1], dtype=torch.float64)
    squares = torch.zeros(matrix.shape[1], dtype=torch.float64)
    for start in range(0, n, rows):
        chunk = matrix[start:start + rows]
        deltas = torch.sub(chunk, shift, out=buffer[:len(chunk)])
        total += deltas.T.mv(ones[:len(chunk)]).double()
        squares += deltas.square_().T.mv(ones[:len(chunk)]).double()
    mean_delta = total / n
    variance = (squares - n * mean_delta**2) / max(n - 1, 1)
    mean = (mean_delta + shift.double()).numpy()
    std = variance.clamp(min=0).sqrt().numpy() if n > 1 else np.zeros_like(mean)
    return mean, std


class PlanBuilder:
    """Accumulates per-row decisions, then freezes them into a CSR :class:`TransferPlan`."""

    def __init__(self, n_target: int, n_source: int) -> None:
        self.n_target, self.n_source = n_target, n_source
        self.fate = np.full(n_target, Fate.RANDOM, dtype=object)
        self.source_id = np.full(n_target, -1, np.int64)
        self.support = np.zeros(n_target, np.int64)
        self._rows: list[np.ndarray] = []
        self._cols: list[np.ndarray] = []
        self._vals: list[np.ndarray] = []
        self.mean_rows = np.zeros(n_target, bool)

    def copy(self, target_ids: np.ndarray, source_ids: np.ndarray, fates: np.ndarray | Fate) -> None:
        target_ids = np.asarray(target_ids, np.int64)
        self._add(target_ids, np.asarray(source_ids, np.int64), np.ones(len(target_ids), np.float32))
        self.fate[target_ids] = fates
        self.source_id[target_ids] = source_ids
        self.support[target_ids] = 0

    def combine(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, fate: Fate = Fate.COMBINED) -> None:
        """Weighted combinations: triplets (target row, source id, weight)."""
        rows = np.asarray(rows, np.int64)
        self._add(rows, np.asarray(cols, np.int64), np.asarray(vals, np.float32))
        unique, counts = np.unique(rows, return_counts=True)
        self.fate[unique] = fate
        self.support[unique] = counts

    def mean(self, target_ids: np.ndarray) -> None:
        self.mean_rows[target_ids] = True
        self.fate[target_ids] = Fate.MEAN

    def _add(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray) -> None:
        self._rows.append(rows)
        self._cols.append(cols)
        self._vals.append(vals)

    def build(self) -> TransferPlan:
        rows = np.concatenate(self._rows) if self._rows else np.zeros(0, np.int64)
        cols = np.concatenate(self._cols) if self._cols else np.zeros(0, np.int64)
        vals = np.concatenate(self._vals) if self._vals else np.zeros(0, np.float32)
        order = np.argsort(rows, kind="stable")
        counts = np.bincount(rows, minlength=self.n_target)
        indptr = np.zeros(self.n_target + 1, np.int64)
        np.cumsum(counts, out=indptr[1:])
        random_rows = (counts == 0) & ~self.mean_rows
        self.fate[random_rows] = Fate.RANDOM
        return TransferPlan(self.n_target, self.n_source, indptr, cols[order], vals[order].astype(np.float32),
                            random_rows, self.mean_rows.copy(), self.fate, self.source_id, self.support,
                            np.isin(self.fate, RARE_FATES))
