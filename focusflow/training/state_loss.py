"""The distance between a student's word states and a teacher's, at several layers: the one loss that LAPT's
distillation (``training.distill``) and the align refinement (``loss: layers``, ``training.align``) minimize.

Per layer, the squared distance of word vectors divided by the teacher's mean squared norm at that layer, so every
layer counts alike whatever the scale of its states."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from focusflow.training.wordpool import pool_words, segment_mean


def default_layers(depth: int) -> tuple[int, ...]:
    """A third, two thirds and all of the depth (4, 8, 12 of 12 layers)."""
    return tuple(sorted({max(1, round(depth * k / 3)) for k in (1, 2, 3)}))


def distillation_loss(student: Sequence[torch.Tensor], teacher: Sequence[torch.Tensor],
                      word_sentence: torch.Tensor | None = None, n_texts: int = 0,
                      sentence_weight: float = 0.0) -> torch.Tensor:
    """Summed over words (divide by the word count for a mean): for each layer's ``[n_words, hidden]`` pair, the
    squared distance of the student's word vectors to the teacher's over the teacher's mean squared norm; plus, with
    ``sentence_weight``, the same between sentence vectors (their words' mean at the last layer), scaled to words."""
    loss = torch.zeros((), device=student[0].device)
    for mine, theirs in zip(student, teacher, strict=True):
        theirs = theirs.float()
        energy = theirs.pow(2).sum(-1).mean().clamp_min(1e-6)
        loss = loss + (mine.float() - theirs).pow(2).sum(-1).sum() / energy
    if sentence_weight and word_sentence is not None:
        mine, theirs = (segment_mean(v[-1].float(), word_sentence, n_texts) for v in (student, teacher))
        energy = theirs.pow(2).sum(-1).mean().clamp_min(1e-6)
        loss = loss + sentence_weight * (mine - theirs).pow(2).sum(-1).mean() / energy * len(student[0])
    return loss


def layer_states(body: nn.Module, ids: torch.Tensor, mask: torch.Tensor, layers: Sequence[int],
                 positions: torch.Tensor, segments: torch.Tensor, n_words: int, pool: str) -> list[torch.Tensor]:
    """The body's states after each of ``layers`` layers, pooled per word."""
    hidden = body(input_ids=ids, attention_mask=mask, output_hidden_states=True, use_cache=False).hidden_states
    return [pool_words(hidden[layer], positions, segments, n_words, pool) for layer in layers]
