"""Train only the embedding rows a run's training data uses: the same model, without a dense gradient over the
whole vocabulary at every step.

Fine-tuning multilingual-e5-small carries a 250,002 × 384 input embedding. Every step, autograd writes a dense
gradient of that size (mostly zeros), clipping reads it, and AdamW reads and writes it and its two moments: about a
sixth of a step on a 2-core CPU (``benchmarks/step_profile.py``). A row that no training text uses gets a zero
gradient at every step, so AdamW (without weight decay on it) never moves it; its value only matters where a dev or
test text reads it. :class:`TrainedRowsEmbedding` keeps those rows frozen, outside the optimizer, and trains a
compact table of the rows the training texts use; the forward pass is the embedding lookup it replaces.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


class TrainedRowsEmbedding(nn.Module):
    """An ``nn.Embedding`` whose rows ``trained_ids`` are a parameter (``weight``) and the rest a frozen table."""

    def __init__(self, embedding: nn.Embedding, trained_ids: torch.Tensor) -> None:
        super().__init__()
        full = embedding.weight.detach()
        # every table on the embedding's device: a model already on a GPU gets its lookups there too
        ids = torch.unique(trained_ids.to(torch.long)).to(full.device)
        self.num_embeddings, self.embedding_dim = full.shape
        self.padding_idx = embedding.padding_idx
        # frozen and not part of the state a run snapshots: it never changes
        self.register_buffer("frozen", full, persistent=False)
        self.register_buffer("slot", torch.full((self.num_embeddings,), -1, dtype=torch.long, device=full.device),
                             persistent=False)
        self.slot[ids] = torch.arange(len(ids), device=full.device)
        self.register_buffer("trained_ids", ids, persistent=False)
        self.weight = nn.Parameter(full[ids].clone())

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        frozen = nn.functional.embedding(input_ids, self.frozen, self.padding_idx)
        slot = self.slot[input_ids]
        trained = nn.functional.embedding(slot.clamp(min=0), self.weight)
        return torch.where((slot >= 0).unsqueeze(-1), trained, frozen)

    def full_weight(self) -> torch.Tensor:
        """The whole table as a plain embedding would hold it (frozen rows with the trained ones written in)."""
        merged = self.frozen.clone()
        merged[self.trained_ids] = self.weight.detach()
        return merged


def train_used_rows(model: nn.Module, token_ids: Iterable[Iterable[int]]) -> TrainedRowsEmbedding | None:
    """Give ``model`` a :class:`TrainedRowsEmbedding` over the ids of ``token_ids`` (every training sequence), in place;
    None (nothing changed) for a model without a plain input embedding."""
    get = getattr(model, "get_input_embeddings", None)
    embedding = get() if get is not None else None
    if not isinstance(embedding, nn.Embedding):
        return None
    # the padding row gets no gradient from nn.Embedding: it stays out of the trained rows, frozen as it was
    used = torch.tensor(sorted({int(i) for ids in token_ids for i in ids} - {embedding.padding_idx}), dtype=torch.long)
    replacement = TrainedRowsEmbedding(embedding, used)
    model.set_input_embeddings(replacement)
    return replacement


__all__ = ["TrainedRowsEmbedding", "train_used_rows"]
