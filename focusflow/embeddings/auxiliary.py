"""The auxiliary embedding space of FOCUS: token-level fastText on target-tokenized text.

Training writes ``fasttext.bin`` (for users) and an open-format copy that initialization reads:
``vectors.safetensors`` (``vectors``: float32 words x dim, fastText's ``get_word_vector``, i.e. the
word vector averaged with its character n-grams) and ``tokens.json`` (the words, same order).
Tokens are looked up by dict; nothing is unpickled.

fastText splits on whitespace, so target tokens that contain whitespace characters cannot be
represented: they are left out of the training text and end up initialized as rare tokens.
fastText is only deterministic with ``threads=1`` (Hogwild updates otherwise).
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save_file

from focusflow.config import FastTextSpec
from focusflow.corpus.io import one_line, read_texts
from focusflow.errors import InputError
from focusflow.storage.atomic import atomic_path, atomic_write

log = logging.getLogger(__name__)
VECTORS_FILE = "vectors.safetensors"
TOKENS_FILE = "tokens.json"
BIN_FILE = "fasttext.bin"


@dataclass
class AuxVectors:
    """Auxiliary vectors keyed by token string."""

    tokens: list[str]
    vectors: np.ndarray
    index: dict[str, int]

    @classmethod
    def from_arrays(cls, tokens: list[str], vectors: np.ndarray) -> AuxVectors:
        if len(tokens) != len(vectors):
            raise ValueError(f"{len(tokens)} tokens but {len(vectors)} vectors")
        return cls(list(tokens), np.ascontiguousarray(vectors, dtype=np.float32), {t: i for i, t in enumerate(tokens)})

    def lookup(self, tokens: list[str]) -> np.ndarray:
        """Row index of each token, -1 when absent or its vector is all zeros (a 'rare' token)."""
        rows = np.fromiter(map(self.index.get, tokens, repeat(-1)), dtype=np.int64, count=len(tokens))
        zero = ~np.any(self.vectors != 0, axis=1)
        found = rows >= 0
        rows[found] = np.where(zero[rows[found]], -1, rows[found])
        return rows


def export_vectors(model: Any, out_dir: Path) -> AuxVectors:
    """Write the open-format copy of a loaded fastText model (every dictionary word)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    words = list(model.get_words(on_unicode_error="replace"))
    vectors = np.stack([model.get_word_vector(word) for word in words]).astype(np.float32) if words else \
        np.zeros((0, model.get_dimension()), np.float32)
    with atomic_path(out_dir / VECTORS_FILE) as temporary:
        save_file({"vectors": vectors}, str(temporary))
    atomic_write(out_dir / TOKENS_FILE, json.dumps(words, ensure_ascii=False))
    return AuxVectors.from_arrays(words, vectors)


def load_fasttext_bin(bin_path: Path, out_dir: Path) -> dict[str, Any]:
    """Use a user's fastText ``.bin`` (tokens must be spelled as the target tokenizer spells them)."""
    import fasttext

    if not Path(bin_path).is_file():
        raise FileNotFoundError(f"fastText model {bin_path} does not exist")
    model = fasttext.load_model(str(bin_path))
    aux = export_vectors(model, Path(out_dir))
    return {"words": len(aux.tokens), "dim": int(aux.vectors.shape[1])}


def load_aux_vectors(aux_dir: Path) -> AuxVectors:
    """Read ``vectors.safetensors`` + ``tokens.json`` written by :func:`train_aux_embeddings`."""
    aux_dir = Path(aux_dir)
    vectors_path, tokens_path = aux_dir / VECTORS_FILE, aux_dir / TOKENS_FILE
    if not vectors_path.is_file() or not tokens_path.is_file():
        raise FileNotFoundError(f"{aux_dir} has no {VECTORS_FILE}/{TOKENS_FILE}; run train_aux_embeddings "
                                f"(focusflow init --corpus ...) or load_fasttext_bin first")
    tokens = json.loads(tokens_path.read_text(encoding="utf-8"))
    return AuxVectors.from_arrays(tokens, load_file(str(vectors_path))["vectors"])


def pretokenize_lines(tokenizer: Any, texts: Iterator[str], batch_size: int = 1000) -> Iterator[str]:
    """Each document as one line of space-separated target tokens (whitespace-containing tokens dropped)."""
    backend = tokenizer.backend_tokenizer
    batch: list[str] = []

    def flush() -> Iterator[str]:
        for encoding in backend.encode_batch(batch, add_special_tokens=False):
            tokens = [token for token in encoding.tokens if token and not any(c.isspace() for c in token)]
            if tokens:
                yield " ".join(tokens)

    for text in texts:
        batch.append(one_line(text))
        if len(batch) >= batch_size:
            yield from flush()
            batch = []
    if batch:
        yield from flush()


def train_aux_embeddings(tokenizer_dir: Path, train: Path, spec: FastTextSpec, out_dir: Path) -> dict[str, Any]:
    """Train token-level fastText on ``train`` (corpus jsonl) pre-tokenized with the target tokenizer."""
    import fasttext
    from transformers import AutoTokenizer

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    started = time.perf_counter()
    lines = tokens = 0
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", dir=out_dir, delete=False) as handle:
        text_path = Path(handle.name)
        for line in pretokenize_lines(tokenizer, read_texts(train)):
            handle.write(line + "\n")
            lines += 1
            tokens += line.count(" ") + 1
    try:
        if lines == 0:
            raise InputError(f"{train} has no text to train fastText on")
        log.info("training fastText (%s, dim %d, %d epochs) on %d lines / %d tokens", spec.model, spec.dim,
                 spec.epochs, lines, tokens)
        model = fasttext.train_unsupervised(
            str(text_path), model=spec.model, dim=spec.dim, epoch=spec.epochs, minCount=spec.min_count,
            neg=spec.neg, ws=spec.window, minn=spec.minn, maxn=spec.maxn, lr=spec.lr, thread=spec.threads,
            verbose=0)  # fastText's unsupervised API takes no seed (fixed internally); threads=1 is reproducible
    finally:
        text_path.unlink(missing_ok=True)
    with atomic_path(out_dir / BIN_FILE) as temporary:
        model.save_model(str(temporary))
    aux = export_vectors(model, out_dir)
    vocab = tokenizer.get_vocab()
    covered = sum(1 for token in vocab if token in aux.index)
    return {"lines": lines, "tokens": tokens, "words": len(aux.tokens), "dim": spec.dim,
            "target_vocab_coverage": covered / max(1, len(vocab)), "seconds": round(time.perf_counter() - started, 2)}
