from __future__ import annotations

import entmax
import pytest
import torch

from focusflow.embeddings import sparsemax, sparsemax_topk


@pytest.mark.parametrize("k", [1, 4, 64])
def test_matches_entmax_on_random_rows(k: int) -> None:
    generator = torch.Generator().manual_seed(0)
    for scale in (0.1, 1.0, 10.0):
        scores = torch.randn(64, 500, generator=generator) * scale
        expected = entmax.sparsemax(scores, dim=-1)
        assert torch.allclose(sparsemax(scores, k=k), expected, atol=1e-5)  # float32 rounding of tau at scale 10


def test_adversarial_rows() -> None:
    rows = torch.stack([
        torch.ones(300),                                       # all equal: support is the whole row
        torch.cat([torch.tensor([50.0]), torch.zeros(299)]),  # one dominant value
        torch.tensor([1.0, 1.0, 1.0] + [0.999] * 297),         # ties and near-ties at the top
        torch.tensor([0.5, 0.5] + [-1.0] * 298),              # exact tie inside the support
        torch.linspace(1, 0, 300),                             # long support forcing the fallback
    ])
    weights = sparsemax(rows, k=2)
    assert torch.allclose(weights, entmax.sparsemax(rows, dim=-1), atol=1e-6)
    assert torch.allclose(weights.sum(dim=1), torch.ones(5), atol=1e-5)
    assert torch.allclose(weights[0], torch.full((300,), 1 / 300))
    assert weights[1, 0] == 1 and weights[1, 1:].sum() == 0
    _, _, support = sparsemax_topk(rows, k=2)
    assert support.tolist()[:2] == [300, 1]


def test_dim_argument_and_errors() -> None:
    scores = torch.randn(3, 7, 5)
    assert torch.allclose(sparsemax(scores, dim=1), entmax.sparsemax(scores, dim=1), atol=1e-6)
    with pytest.raises(ValueError):
        sparsemax_topk(torch.zeros(2, 0))
