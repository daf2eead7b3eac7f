"""Tiny models and a pseudo-language corpus split for the LAPT tests (built once per session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from focusflow.corpus.io import write_texts
from tests.tiny_models import sample_texts, save_tiny


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Tiny models gain nothing from threads, and on a shared CPU spinning OpenMP threads cost a lot."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def lapt_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("lapt-corpus")
    texts = sample_texts(900, seed=3)
    write_texts(folder / "train.jsonl", texts[:800])
    write_texts(folder / "heldout.jsonl", texts[800:])
    return folder / "train.jsonl", folder / "heldout.jsonl"


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory: pytest.TempPathFactory):
    """family -> HF folder of a tiny model whose tokenizer was trained on the same pseudo-language."""
    root = tmp_path_factory.mktemp("lapt-models")
    built: dict[str, Path] = {}

    def get(family: str) -> Path:
        if family not in built:
            built[family] = save_tiny(family, root / family, sample_texts(900, seed=3))
        return built[family]

    return get
