"""Training data for LAPT: token ids pre-tokenized once into a memory-mapped ``.npy``, packed into
fixed-length sequences without padding, and a deterministic sample order.

Why this shape: tokenizing once (in Rust, batched) and memory-mapping the result makes every
later epoch, resume and DDP rank read the same ids at zero cost; packing consecutive documents
into ``seq_len`` blocks wastes no compute on padding (the ``run_mlm.py`` ``group_texts`` scheme).
The order of blocks is a pure function of ``(seed, epoch)``, so the data position of a run is
one integer (samples consumed) and resuming needs no loader state.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from focusflow.corpus.io import read_texts
from focusflow.errors import InputError
from focusflow.storage.atomic import atomic_path, atomic_write, sha256_file

log = logging.getLogger(__name__)

IDS_FORMAT = 1
_DOCS_PER_BATCH = 1000


def tokenizer_digest(tokenizer) -> str:
    """Identity of a tokenizer's behaviour: its serialized ``tokenizer.json`` (fast tokenizers)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    text = backend.to_str() if backend is not None else json.dumps(tokenizer.get_vocab(), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def ids_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= np.iinfo(np.uint16).max + 1 else np.dtype(np.uint32)


def _document_ids(tokenizer, texts: list[str]) -> list[list[int]]:
    """Each document with the model's own special tokens, ending in a separator (EOS/SEP) so packed
    documents stay delimited; decoder tokenizers that add no EOS get one appended."""
    encoded = tokenizer(texts, add_special_tokens=True, return_attention_mask=False,
                        return_token_type_ids=False, verbose=False)["input_ids"]
    end = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    if end is None:
        return encoded
    return [ids if ids and ids[-1] == end else [*ids, end] for ids in encoded]


def _flatten(documents: list[list[int]], dtype: np.dtype) -> np.ndarray:
    count = sum(map(len, documents))
    return np.fromiter(itertools.chain.from_iterable(documents), dtype=dtype, count=count)


def pretokenize(corpus: Path, tokenizer, out_file: Path, progress: bool = False) -> dict:
    """Tokenize a corpus jsonl file once into a flat ``.npy`` of token ids (written atomically).

    Reuses ``out_file`` when its sidecar ``.json`` says it was built from the same corpus bytes
    and tokenizer. Returns the sidecar: documents, tokens, dtype and the input digests.
    """
    corpus, out_file = Path(corpus), Path(out_file)
    if not corpus.is_file():
        raise FileNotFoundError(f"corpus file {corpus} does not exist (expected focusflow corpus .jsonl)")
    meta_file = out_file.with_suffix(".json")
    expected = {"format": IDS_FORMAT, "corpus_sha256": sha256_file(corpus), "tokenizer_sha256": tokenizer_digest(tokenizer)}
    if out_file.is_file() and meta_file.is_file():
        meta = json.loads(meta_file.read_text())
        if all(meta.get(k) == v for k, v in expected.items()):
            return meta
    dtype = ids_dtype(len(tokenizer))
    out_file.parent.mkdir(parents=True, exist_ok=True)
    raw = out_file.with_name(f".{out_file.name}.raw-{os.getpid()}")
    documents = tokens = 0
    with open(raw, "wb") as handle:
        batch: list[str] = []
        for text in read_texts(corpus):
            batch.append(text)
            if len(batch) == _DOCS_PER_BATCH:
                chunk = _flatten(_document_ids(tokenizer, batch), dtype)
                handle.write(chunk.tobytes())
                documents, tokens, batch = documents + len(batch), tokens + chunk.size, []
                if progress and documents % (50 * _DOCS_PER_BATCH) == 0:
                    log.info("tokenized %d documents (%d tokens) of %s", documents, tokens, corpus.name)
        if batch:
            chunk = _flatten(_document_ids(tokenizer, batch), dtype)
            handle.write(chunk.tobytes())
            documents, tokens = documents + len(batch), tokens + chunk.size
    with atomic_path(out_file) as temporary:
        array = np.lib.format.open_memmap(temporary, mode="w+", dtype=dtype, shape=(tokens,))
        if tokens:
            array[:] = np.memmap(raw, dtype=dtype, mode="r", shape=(tokens,))
        array.flush()
        del array
    raw.unlink()
    meta = {**expected, "documents": documents, "tokens": int(tokens), "dtype": dtype.name}
    atomic_write(meta_file, json.dumps(meta, indent=2))
    return meta


class PackedSequences:
    """A flat id array viewed as ``n`` blocks of ``seq_len`` tokens (the tail shorter than one block is dropped)."""

    def __init__(self, ids_file: Path, seq_len: int):
        self.ids = np.load(ids_file, mmap_mode="r")
        self.seq_len = seq_len
        self.n = len(self.ids) // seq_len

    def __len__(self) -> int:
        return self.n

    def blocks(self, indices: np.ndarray) -> np.ndarray:
        """Rows of token ids (int64) for block indices."""
        starts = np.asarray(indices, dtype=np.int64)[:, None] * self.seq_len
        return np.asarray(self.ids[starts + np.arange(self.seq_len)], dtype=np.int64)


class SampleOrder:
    """Global sample ``i`` → block index: a fresh seeded permutation per epoch, computed on demand."""

    def __init__(self, n_blocks: int, seed: int):
        if n_blocks <= 0:
            raise InputError("no training sequences: the corpus has fewer tokens than one sequence (lower seq_len "
                             "or give more text)")
        self.n_blocks, self.seed = n_blocks, seed
        self._cache: dict[int, np.ndarray] = {}

    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch not in self._cache:
            if len(self._cache) > 2:
                self._cache.clear()
            self._cache[epoch] = np.random.default_rng([self.seed, epoch]).permutation(self.n_blocks)
        return self._cache[epoch]

    def blocks_for(self, samples: np.ndarray) -> np.ndarray:
        samples = np.asarray(samples, dtype=np.int64)
        epochs, positions = np.divmod(samples, self.n_blocks)
        out = np.empty_like(samples)
        for epoch in np.unique(epochs):
            chosen = epochs == epoch
            out[chosen] = self._permutation(int(epoch))[positions[chosen]]
        return out


def iter_sample_ranges(start_sample: int, steps: int, batch_size: int, world_size: int, rank: int,
                       micro_batch_size: int) -> Iterator[list[np.ndarray]]:
    """For each optimizer step: this rank's micro-batches of global sample indices.

    The global batch ``[s, s + batch_size)`` is split into contiguous per-rank shares, then
    into micro-batches; samples are indexed globally so masking and order do not depend on
    the world size or the micro-batch size.
    """
    per_rank = batch_size // world_size
    sample = start_sample
    for _ in range(steps):
        mine = np.arange(sample + rank * per_rank, sample + (rank + 1) * per_rank, dtype=np.int64)
        yield [mine[i:i + micro_batch_size] for i in range(0, per_rank, micro_batch_size)]
        sample += batch_size
