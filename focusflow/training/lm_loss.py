"""The language-model losses LAPT trains, as one module: MLM with the vocabulary projection computed only at masked
positions, or causal LM. Returns the summed loss and the number of predicted tokens, so that
gradient accumulation and DDP can normalize by the whole effective batch.

Why masked positions only: the MLM head (dense + LayerNorm + |V|-wide decoder) is applied row by
row, so running it on the ~15% of rows that carry a label gives the same loss while skipping
85% of the decoder's FLOPs, which dominate at 50k-250k vocabularies.
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F
from torch import nn

from focusflow.models.lm_stats import IGNORE_INDEX
from focusflow.models.loading import lm_head

log = logging.getLogger(__name__)

def head_modules(model: nn.Module) -> list[nn.Module]:
    """Input embeddings, output embeddings and the MLM head: what stage one of two-stage LAPT trains."""
    modules = [model.get_input_embeddings()]
    output = model.get_output_embeddings()
    if output is not None:
        modules.append(output)
    head = lm_head(model)
    if head is not None and head is not output:
        modules.append(head)
    return modules


class LossModel(nn.Module):
    """Wraps a Hugging Face LM: ``forward(input_ids, labels) -> (loss_sum, n_predicted)``.

    ``labels`` are MLM labels (-100 off-mask) for ``mlm``; ignored for ``clm`` (next-token targets
    are the inputs shifted by one). Sequences are packed, so there is no padding and no attention mask.
    """

    def __init__(self, model: nn.Module, lm_loss: str, masked_only: bool = True):
        super().__init__()
        self.model = model
        self.lm_loss = lm_loss
        self.body = model.base_model
        self.head = lm_head(model) if lm_loss == "mlm" else model.get_output_embeddings()
        self.masked_only = masked_only and self.head is not None
        if lm_loss == "mlm" and masked_only and self.head is None:
            log.warning("no row-wise MLM head found on %s: projecting every position", type(model).__name__)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None,
                positions: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``positions`` (optional): flat indices of the labelled tokens, computed by the loader so the
        accelerator never waits on a data-dependent ``nonzero``."""
        if self.lm_loss == "clm":
            hidden = self.body(input_ids=input_ids).last_hidden_state[:, :-1]
            logits = self.head(hidden)
            targets = input_ids[:, 1:]
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), reduction="sum")
            return loss, torch.tensor(targets.numel(), device=input_ids.device)
        flat_labels = labels.reshape(-1)
        if self.masked_only:
            hidden = self.body(input_ids=input_ids).last_hidden_state
            if positions is None:
                positions = (flat_labels != IGNORE_INDEX).nonzero().squeeze(1)
            logits = self.head(hidden.reshape(-1, hidden.shape[-1]).index_select(0, positions))
            targets = flat_labels.index_select(0, positions)
        else:
            logits = self.model(input_ids=input_ids).logits.reshape(-1, self.model.config.vocab_size)
            targets = flat_labels
        loss = F.cross_entropy(logits.float(), targets, ignore_index=IGNORE_INDEX, reduction="sum")
        return loss, (targets != IGNORE_INDEX).sum()
