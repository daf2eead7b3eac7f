"""The word-state distance shared by LAPT's distillation and the align refinement's ``loss: layers``."""

from __future__ import annotations

import pytest
import torch

from focusflow.training.state_loss import default_layers, distillation_loss


def test_the_loss_is_zero_for_equal_states_and_each_layer_counts_alike_whatever_its_scale():
    torch.manual_seed(0)
    teacher = [torch.randn(10, 8), 100 * torch.randn(10, 8)]
    assert float(distillation_loss([t.clone() for t in teacher], teacher)) == 0.0
    off = [t + 0.1 * t.std() * torch.randn_like(t) for t in teacher]
    per_layer = [float(distillation_loss([o], [t])) for o, t in zip(off, teacher, strict=True)]
    assert per_layer[0] == pytest.approx(per_layer[1], rel=0.5)  # normalized by the teacher's energy
    sentences = torch.tensor([0] * 5 + [1] * 5)
    assert float(distillation_loss(off, teacher, sentences, 2, sentence_weight=1.0)) > sum(per_layer)
    assert default_layers(12) == (4, 8, 12) and default_layers(2) == (1, 2)
