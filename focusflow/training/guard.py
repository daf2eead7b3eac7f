"""The measure a refinement is kept by: the model's own language-model loss on a dev slice of texts it does not
train on (the next-token loss for a decoder, the MLM loss under fixed masks for an encoder).

A refinement optimizes a proxy (align: word-pooled hidden states against the source's). Its own loss can fall while
what it exists for, predicting text, gets worse (issue 39: a held-back language whose bits per byte rose by 0.29
while the alignment loss fell by a third). So the run measures the language model at its start and at every
evaluation, and keeps the best state, its start included (``training.loop.TrainingRun.selection``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from focusflow.models.lm_stats import Masker, length_batches, pad_rows
from focusflow.precision import Precision

_BATCH_TOKENS = 4096


class LanguageModelDev:
    """``__call__(model) -> mean loss per predicted token`` on fixed texts (encoded and masked once)."""

    def __init__(self, tokenizer: Any, texts: Sequence[str], lm_loss: str, max_length: int,
                 precision: Precision, device: torch.device, seed: int = 0) -> None:
        self.lm_loss, self.precision, self.device = lm_loss, precision, device
        encoded = tokenizer(list(texts), add_special_tokens=True, truncation=True, max_length=max_length,
                            return_attention_mask=False, return_token_type_ids=False, verbose=False)["input_ids"]
        rows = [np.asarray(ids, dtype=np.int64) for ids in encoded if len(ids) > 1]
        self.pad_id = next((int(c) for c in (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id)
                            if c is not None), 0)
        if lm_loss == "mlm":
            masker = Masker.for_tokenizer(tokenizer, seed=seed)
            masked = [masker.mask(ids, masker.special[ids], np.random.default_rng([seed, i])) for i, ids in enumerate(rows)]
            self.inputs = [m[0] for m in masked]
            self.targets = [np.where(m[1], ids, -100) for m, ids in zip(masked, rows, strict=True)]
        else:
            self.inputs, self.targets = rows, rows
        self.predicted = int(sum(int((t != -100).sum()) if lm_loss == "mlm" else len(t) - 1 for t in self.targets))
        self.batches = length_batches(np.array([len(r) for r in self.inputs]), _BATCH_TOKENS)

    def __len__(self) -> int:
        return len(self.inputs)

    @torch.no_grad()
    def __call__(self, model: nn.Module) -> float:
        was_training = model.training
        model.eval()
        total = 0.0
        for batch in self.batches:
            ids, mask = pad_rows([self.inputs[i] for i in batch], self.pad_id)
            targets, _ = pad_rows([self.targets[i] for i in batch], -100)
            ids, mask, targets = (torch.from_numpy(a).to(self.device) for a in (ids, mask, targets))
            with self.precision.autocast():
                logits = model(input_ids=ids, attention_mask=mask).logits
            if self.lm_loss == "clm":
                logits, targets = logits[:, :-1], torch.where(mask[:, 1:].bool(), targets[:, 1:], -100)
            total += float(F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                           ignore_index=-100, reduction="sum"))
        model.train(was_training)
        return total / max(self.predicted, 1)


__all__ = ["LanguageModelDev"]
