"""FOCUS weights: sparsemax over cosine similarities in the auxiliary space, in float32 chunks."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from focusflow.embeddings.sparsemax import sparsemax_topk
from focusflow.errors import InputError

log = logging.getLogger(__name__)


@dataclass
class SparseWeights:
    """Triplets (new row, anchor column, weight) in row order, plus each row's support size."""

    rows: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    support: np.ndarray
    top_cols: np.ndarray   # new x 3, anchor columns of the largest weights (-1 padding)
    top_vals: np.ndarray   # new x 3


def _unit_rows(vectors: np.ndarray) -> torch.Tensor:
    matrix = torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float32))
    norms = matrix.norm(dim=1, keepdim=True)
    return matrix / norms.clamp(min=1e-12)


def sparsemax_similarity_weights(new_vectors: np.ndarray, anchor_vectors: np.ndarray, chunk_rows: int = 2048,
                                 k: int = 256, top: int = 3) -> SparseWeights:
    """For each new vector: sparsemax(cosine(new, anchors)); exact, with k adapted to the supports seen."""
    if len(anchor_vectors) == 0:
        raise InputError("FOCUS needs at least one overlapping token with an auxiliary vector (no anchors found); "
                         "check that the fastText model was trained on text tokenized with the target tokenizer")
    anchors = _unit_rows(anchor_vectors)
    new = _unit_rows(new_vectors)
    n_new = len(new)
    rows, cols, vals = [], [], []
    support = np.zeros(n_new, np.int64)
    top_cols = np.full((n_new, top), -1, np.int64)
    top_vals = np.zeros((n_new, top), np.float32)
    width = k
    for start in range(0, n_new, chunk_rows):
        stop = min(start + chunk_rows, n_new)
        scores = new[start:stop] @ anchors.T
        weights, indices, sizes = sparsemax_topk(scores, width)
        # next chunk: start from a k comfortably above this chunk's largest support (fewer redo passes)
        width = int(min(len(anchors), max(k, 2 ** int(np.ceil(np.log2(int(sizes.max()) * 1.25 + 1))))))
        nonzero = weights > 0
        local_rows = nonzero.nonzero()[:, 0]
        rows.append((local_rows + start).numpy())
        cols.append(indices[nonzero].numpy())
        vals.append(weights[nonzero].numpy())
        support[start:stop] = sizes.numpy()
        keep = min(top, weights.shape[1])
        top_cols[start:stop, :keep] = torch.where(weights[:, :keep] > 0, indices[:, :keep], -1).numpy()
        top_vals[start:stop, :keep] = weights[:, :keep].numpy()
    return SparseWeights(np.concatenate(rows).astype(np.int64), np.concatenate(cols).astype(np.int64),
                         np.concatenate(vals).astype(np.float32), support, top_cols, top_vals)
