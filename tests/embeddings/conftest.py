"""Shared tiny inputs for the embedding-transfer tests (trained once per session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tiny_models import sample_texts, save_tiny, train_tokenizer


@pytest.fixture(scope="session")
def transfer_case(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from focusflow.config import FastTextSpec
    from focusflow.corpus.io import write_texts
    from focusflow.embeddings import train_aux_embeddings

    root = tmp_path_factory.mktemp("transfer")
    texts = sample_texts(800, seed=1)
    write_texts(root / "train.jsonl", texts)
    target = train_tokenizer("xlmr", texts, vocab_size=300)
    target.save_pretrained(root / "target_tok")
    stats = train_aux_embeddings(root / "target_tok", root / "train.jsonl",
                                 FastTextSpec(dim=16, min_count=2, epochs=3, threads=1, keep_binary=True), root / "aux")
    return {"root": root, "texts": texts, "target": target, "aux_dir": root / "aux", "aux_stats": stats,
            "train": root / "train.jsonl", "target_dir": root / "target_tok"}


@pytest.fixture(scope="session")
def tiny_sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sources")
    return {family: save_tiny(family, root / family) for family in ("xlmr", "bert", "gpt2", "llama")}
