"""Exact sparsemax (Martins & Astudillo 2016) that sorts only the top of each row.

FOCUS's rows have 10^4-10^5 columns but supports of tens to hundreds of entries, so a top-k
partial sort is enough: with the k largest values, the support size k* found is exact whenever
k* < k (the support condition ``1 + j z_(j) > sum_{i<=j} z_(i)`` is monotone in j, so it failed at
j = k*+1 <= k). Rows where the support may reach past k are redone with 4x the k, up to a full sort.
"""

from __future__ import annotations

import torch


def sparsemax_topk(scores: torch.Tensor, k: int = 64) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sparsemax of each row of a 2-D tensor, returned sparsely.

    Returns ``(weights, indices, support)``: ``weights``/``indices`` are ``rows x K`` (K >= every
    row's support; entries beyond a row's support have weight 0), ``support`` the support sizes.
    """
    if scores.dim() != 2:
        raise ValueError(f"sparsemax_topk expects a 2-D tensor, got shape {tuple(scores.shape)}")
    rows, columns = scores.shape
    if columns == 0:
        raise ValueError("sparsemax over zero columns is undefined (no anchors)")
    width = max(1, min(k, columns))
    values, indices = scores.topk(width, dim=1, sorted=True)
    cumulative = values.cumsum(dim=1)
    ranks = torch.arange(1, width + 1, dtype=scores.dtype, device=scores.device)
    support = (1 + ranks * values > cumulative).sum(dim=1)
    unfinished = (support >= width) & (width < columns)
    if bool(unfinished.any()):
        redo = unfinished.nonzero().squeeze(1)
        sub_weights, sub_indices, sub_support = sparsemax_topk(scores[redo], min(columns, width * 4))
        wide = sub_weights.shape[1]
        pad = wide - width
        weights = torch.zeros(rows, wide, dtype=scores.dtype, device=scores.device)
        all_indices = torch.nn.functional.pad(indices, (0, pad))
        tau = (cumulative.gather(1, (support - 1).clamp(min=0).unsqueeze(1)) - 1) / support.clamp(min=1).unsqueeze(1)
        weights[:, :width] = (values - tau).clamp(min=0)
        weights[redo] = sub_weights
        all_indices[redo] = sub_indices
        support = support.clone()
        support[redo] = sub_support
        return weights, all_indices, support
    tau = (cumulative.gather(1, (support - 1).unsqueeze(1)) - 1) / support.unsqueeze(1)
    return (values - tau).clamp(min=0), indices, support


def sparsemax(scores: torch.Tensor, dim: int = -1, k: int = 64) -> torch.Tensor:
    """Dense sparsemax along ``dim`` (same result as ``entmax.sparsemax``), computed via top-k."""
    moved = scores.movedim(dim, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    weights, indices, _ = sparsemax_topk(flat, k)
    dense = torch.zeros_like(flat).scatter_add_(1, indices, weights)  # padding repeats index 0 with weight 0
    return dense.reshape(moved.shape).movedim(-1, dim)
