"""The method table is the dispatch: each row of ``focusflow.methods.INIT_METHODS`` names the builder of its plan,
``build_plan`` calls that builder and no other, and a row without one fails instead of running FOCUS."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from focusflow.embeddings import build_plan, builders, compute_overlap
from focusflow.embeddings.transfer import plan_method
from focusflow.errors import InputError
from focusflow.methods import INIT_METHODS, InitMethodSpec
from tests.tiny_models import sample_texts, train_tokenizer


@pytest.fixture(scope="module")
def tokenizers():
    return (train_tokenizer("xlmr", sample_texts(200, seed=0), vocab_size=200),
            train_tokenizer("xlmr", sample_texts(200, seed=1), vocab_size=150))


def test_every_row_names_a_builder_and_every_builder_has_its_row():
    """The builders are exactly the functions the rows name: no row without its builder, no builder left over."""
    public = {name for name, value in vars(builders).items() if inspect.isfunction(value)
              and value.__module__ == builders.__name__ and not name.startswith("_")}
    assert {spec.builder for spec in INIT_METHODS.values()} == {f"{builders.__name__}.{name}" for name in public}
    for name, spec in INIT_METHODS.items():
        assert plan_method(name) is getattr(builders, spec.builder.rpartition(".")[2])


@pytest.mark.parametrize("method", list(INIT_METHODS))
def test_each_row_dispatches_to_its_own_builder(monkeypatch, tokenizers, method):
    calls: list[tuple[str, str]] = []
    for spec in INIT_METHODS.values():
        def spy(plan, inputs, name=spec.builder):
            calls.append((name, inputs.overlap.kinds.dtype.kind))
            return {"built_by": name}
        monkeypatch.setattr(builders, spec.builder.rpartition(".")[2], spy)
    plan, details = build_plan(*tokenizers, method)
    assert [name for name, _ in calls] == [INIT_METHODS[method].builder] and details["built_by"] == calls[0][0]
    assert np.all(plan.fate == "random")  # the spy built nothing: every row is left to the plan's default


def test_the_row_chooses_the_overlap_its_builder_copies(monkeypatch, tokenizers):
    """``focus`` and ``focus-symbolic`` share FOCUS's builder; each row names the overlap it is given."""
    seen = {}
    monkeypatch.setattr(builders, "focus_plan", lambda plan, inputs: seen.setdefault(len(seen), inputs.overlap) and {})
    for method in ("focus", "focus-symbolic"):
        build_plan(*tokenizers, method)
    for (_, overlap), match in zip(sorted(seen.items()), ("full", "symbolic"), strict=True):
        assert np.array_equal(overlap.target_ids, compute_overlap(*tokenizers, match).target_ids)
    assert len(seen[1]) < len(seen[0])


def test_a_row_without_its_builder_fails_instead_of_running_another(monkeypatch, tokenizers):
    with pytest.raises(TypeError):
        InitMethodSpec("lexicon", "from a lexicon")  # a row must name its builder
    missing = InitMethodSpec("lexicon", "from a lexicon", "focusflow.embeddings.builders.lexicon_plan")
    monkeypatch.setitem(INIT_METHODS, "lexicon", missing)
    with pytest.raises(InputError, match="'lexicon' names the builder 'focusflow.embeddings.builders.lexicon_plan'"):
        build_plan(*tokenizers, "lexicon")
    not_a_builder = InitMethodSpec("lexicon", "from a lexicon", "focusflow.embeddings.builders.PlanInputs")
    monkeypatch.setitem(INIT_METHODS, "lexicon", not_a_builder)
    # a name there, but not a builder
    with pytest.raises(InputError, match="names the builder 'focusflow.embeddings.builders.PlanInputs'"):
        build_plan(*tokenizers, "lexicon")


def test_rows_no_source_piece_spells_get_the_source_mean_for_a_decoder_else_a_draw():
    """A byte-level target's bytes that a SentencePiece source cannot spell (0xF5-0xFF are no text) are drawn at
    random by default (the paper's rare-token rule); ``unspelled: mean`` (what a decoder run sets: a tied output row
    drawn at random won greedy decoding on SmolLM2) gives them the source's mean row instead."""
    import torch

    from focusflow.embeddings import transfer_embeddings
    from focusflow.methods import Fate

    source = train_tokenizer("xlmr", sample_texts(200, seed=0), vocab_size=200)
    target = train_tokenizer("gpt2", sample_texts(200, seed=1), vocab_size=400)
    matrix = torch.randn(len(source), 8, generator=torch.Generator().manual_seed(0)).numpy() + 3.0
    drawn = transfer_embeddings(source, target, matrix, "fvt")
    unspelled = np.flatnonzero(drawn.plan.fate == Fate.RANDOM)
    assert len(unspelled) > 0
    meaned = transfer_embeddings(source, target, matrix, "fvt", unspelled="mean")
    assert not (meaned.plan.fate == Fate.RANDOM).any() and (meaned.plan.fate[unspelled] == Fate.MEAN).all()
    np.testing.assert_allclose(meaned.matrices["embeddings"][unspelled],
                               np.broadcast_to(matrix.mean(axis=0), (len(unspelled), 8)), rtol=1e-5)
    others = np.setdiff1d(np.arange(len(target)), unspelled)
    np.testing.assert_array_equal(meaned.matrices["embeddings"][others], drawn.matrices["embeddings"][others])
