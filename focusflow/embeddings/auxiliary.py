"""The auxiliary embedding space of FOCUS: token-level fastText on target-tokenized text.

Training writes an open-format copy of the model that initialization reads (and, with
``FastTextSpec.keep_binary``, fastText's own ``fasttext.bin`` for users; no stage reads it):
``vectors.safetensors`` (``vectors``: float32 words x dim, fastText's ``get_word_vector``, i.e. the
word vector averaged with its character n-grams; ``in_vocabulary``: uint8 flag per row) and
``tokens.json`` (the words, same order). Rows flagged 0 are *subword vectors*: target tokens below
fastText's minCount, composed from their character n-grams alone at training time, so that
initialization can give rare tokens a vector without the ``.bin``. Copies written before the flag
existed read as all in-vocabulary. Tokens are looked up by dict; nothing is unpickled.

fastText splits on whitespace, so target tokens that contain whitespace characters cannot be
represented: they are left out of the training text and end up initialized as rare tokens.
fastText is only deterministic with ``threads=1`` (Hogwild updates otherwise).
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save_file

from focusflow.config import FastTextSpec
from focusflow.corpus.io import one_line, read_texts
from focusflow.errors import InputError
from focusflow.stopping import call_stoppable
from focusflow.storage.atomic import atomic_path, atomic_write

log = logging.getLogger(__name__)
VECTORS_FILE = "vectors.safetensors"
TOKENS_FILE = "tokens.json"
BIN_FILE = "fasttext.bin"


@dataclass
class AuxVectors:
    """Auxiliary vectors keyed by token string; ``in_vocabulary`` is False for subword-composed rows."""

    tokens: list[str]
    vectors: np.ndarray
    index: dict[str, int]
    in_vocabulary: np.ndarray

    @classmethod
    def from_arrays(cls, tokens: list[str], vectors: np.ndarray, in_vocabulary: np.ndarray | None = None) -> AuxVectors:
        if len(tokens) != len(vectors):
            raise ValueError(f"{len(tokens)} tokens but {len(vectors)} vectors")
        flags = np.ones(len(tokens), bool) if in_vocabulary is None else np.asarray(in_vocabulary, bool)
        if len(flags) != len(tokens):
            raise ValueError(f"{len(tokens)} tokens but {len(flags)} in_vocabulary flags")
        return cls(list(tokens), np.ascontiguousarray(vectors, dtype=np.float32), {t: i for i, t in enumerate(tokens)},
                   flags)

    def lookup(self, tokens: list[str], subwords: bool = False) -> np.ndarray:
        """Row index of each token, -1 when absent or its vector is all zeros (a 'rare' token).

        Subword-composed rows count only with ``subwords=True`` (the paper's FOCUS sees fastText's vocabulary).
        """
        rows = np.fromiter(map(self.index.get, tokens, repeat(-1)), dtype=np.int64, count=len(tokens))
        usable = np.any(self.vectors != 0, axis=1) & (self.in_vocabulary | subwords)
        found = rows >= 0
        rows[found] = np.where(usable[rows[found]], rows[found], -1)
        return rows


def export_vectors(model: Any, out_dir: Path, target_tokens: Iterable[str] = ()) -> AuxVectors:
    """Write the open-format copy of a loaded fastText model: every dictionary word, then a subword vector
    (character n-grams only) for each of ``target_tokens`` outside the dictionary that fastText could spell."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    words = list(model.get_words(on_unicode_error="replace"))
    known = set(words)
    unseen = [token for token in dict.fromkeys(target_tokens)
              if token and token not in known and not any(c.isspace() for c in token)]
    tokens = words + unseen
    vectors = np.stack([model.get_word_vector(token) for token in tokens]).astype(np.float32) if tokens else \
        np.zeros((0, model.get_dimension()), np.float32)
    in_vocabulary = np.arange(len(tokens)) < len(words)
    with atomic_path(out_dir / VECTORS_FILE) as temporary:
        save_file({"vectors": vectors, "in_vocabulary": in_vocabulary.astype(np.uint8)}, str(temporary))
    atomic_write(out_dir / TOKENS_FILE, json.dumps(tokens, ensure_ascii=False))
    return AuxVectors.from_arrays(tokens, vectors, in_vocabulary)


def load_fasttext_bin(bin_path: Path, out_dir: Path, target_tokens: Iterable[str] = ()) -> dict[str, Any]:
    """Use a user's fastText ``.bin`` (tokens must be spelled as the target tokenizer spells them);
    ``target_tokens`` (the target vocabulary) also get subword vectors where the dictionary lacks them."""
    import fasttext

    if not Path(bin_path).is_file():
        raise FileNotFoundError(f"fastText model {bin_path} does not exist")
    model = fasttext.load_model(str(bin_path))
    aux = export_vectors(model, Path(out_dir), target_tokens)
    return {"words": int(aux.in_vocabulary.sum()), "subword_vectors": int((~aux.in_vocabulary).sum()),
            "dim": int(aux.vectors.shape[1])}


def load_aux_vectors(aux_dir: Path) -> AuxVectors:
    """Read ``vectors.safetensors`` + ``tokens.json`` written by :func:`train_aux_embeddings`."""
    aux_dir = Path(aux_dir)
    vectors_path, tokens_path = aux_dir / VECTORS_FILE, aux_dir / TOKENS_FILE
    if not vectors_path.is_file() or not tokens_path.is_file():
        raise InputError(f"{aux_dir} has no {VECTORS_FILE}/{TOKENS_FILE}; run train_aux_embeddings "
                         f"(focusflow init --corpus ...) or load_fasttext_bin first")
    tokens = json.loads(tokens_path.read_text(encoding="utf-8"))
    arrays = load_file(str(vectors_path))
    return AuxVectors.from_arrays(tokens, arrays["vectors"], arrays.get("in_vocabulary"))


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


def _train_fasttext(text_path: Path, spec: FastTextSpec, out_dir: Path, target_tokens: list[str]) -> AuxVectors:
    """Train token-level fastText on a pre-tokenized file and write its open-format copy to ``out_dir`` (and its own
    ``fasttext.bin`` with ``keep_binary``); ``target_tokens`` in id order, for reproducible files."""
    import fasttext

    model = fasttext.train_unsupervised(
        str(text_path), model=spec.model, dim=spec.dim, epoch=spec.epochs, minCount=spec.min_count,
        neg=spec.neg, ws=spec.window, minn=spec.minn, maxn=spec.maxn, lr=spec.lr, thread=spec.threads,
        verbose=0)  # fastText's unsupervised API takes no seed (fixed internally); threads=1 is reproducible
    if spec.keep_binary:
        with atomic_path(out_dir / BIN_FILE) as temporary:
            model.save_model(str(temporary))
    return export_vectors(model, out_dir, target_tokens)


def train_aux_embeddings(tokenizer_dir: Path, train: Path, spec: FastTextSpec, out_dir: Path) -> dict[str, Any]:
    """Train token-level fastText on ``train`` (corpus jsonl) pre-tokenized with the target tokenizer."""
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
        # native code that never returns to Python until done: in a child process a stop can end at once
        vocab = tokenizer.get_vocab()
        aux = call_stoppable(_train_fasttext, text_path, spec, out_dir, sorted(vocab, key=vocab.__getitem__),
                             what="in fastText's training")
    finally:
        text_path.unlink(missing_ok=True)
    words = int(aux.in_vocabulary.sum())
    covered = sum(1 for token in vocab if token in aux.index and aux.in_vocabulary[aux.index[token]])
    return {"lines": lines, "tokens": tokens, "words": words, "subword_vectors": len(aux.tokens) - words, "dim": spec.dim,
            "target_vocab_coverage": covered / max(1, len(vocab)), "seconds": round(time.perf_counter() - started, 2)}
