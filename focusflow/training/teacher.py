"""The teacher's word states, computed once for the texts a distillation reads and read at its every epoch.

A distillation (``lapt.objective: distill``) trains a student to give, for each word both tokenizations cover, the
hidden states the source model gives it at a few layers. The source is frozen, so its states for a training text are
the same at every epoch and for every student: computing them at every step spent about 40% of a step on a forward
pass whose result never changes (e5-small on Shona, 2 CPU cores). :func:`compute_teacher_states` reads every text
once with the source's tokenizer (cut at ``seq_len`` tokens, as the distillation cuts it), pools the states of each
word the source covers completely, and writes them as ``.npy`` arrays (memory-mapped when read: a corpus's states can
be larger than memory); :class:`TeacherStates` hands a batch the rows of the words it shares with its student.
The held-out texts the distillation evaluates on are read the same way, so a run never loads the teacher model.

Only the texts a run reads are stored (:func:`select_distillation_texts`): a distillation of ``steps`` steps reads
about ``steps × batch_size × seq_len`` of its tokens, and a corpus can be far larger than that (the states take ~200×
the bytes of the text they describe: 1.5 GB for Swahili's 6.8 MB). The texts are chosen by their hash, not as a prefix
(a corpus's file holds its sources one after another), and the distillation reads exactly those.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from focusflow.errors import InputError, TrainingDivergedError
from focusflow.logs import ProgressBar
from focusflow.models.lm_stats import layer_count, length_batches, pad_rows, padding_id
from focusflow.models.loading import describe_config, load_source
from focusflow.precision import resolve_precision
from focusflow.training.distributed import compute_device
from focusflow.training.wordpool import covered_words, flat_word_index, pool_words, token_words, word_span_array

INDEX_FILE = "teacher.json"
SELECTED_FILE = "train-selected.npy"  # which training texts (indices among the non-empty ones) the states are of
SPLITS = ("train", "heldout")
_SELECTION_SEED = 0
#: an encoder's word states are stored in float16 (half the bytes; their values lie far inside its range), a decoder's
#: in float32 (its residual stream can hold values in the thousands, where float16 loses digits or overflows)
ENCODER_DTYPE, DECODER_DTYPE = np.float16, np.float32
_TOKENIZE_CHUNK = 1000
_TOKENS_PER_BATCH = 8192


def _layer_file(split: str, layer: int) -> str:
    return f"{split}-layer{layer:02d}.npy"


def compute_teacher_states(source_dir: Path, texts: dict[str, Sequence[str]], seq_len: int, layers: Sequence[int],
                           precision: str, out_dir: Path, progress: bool = False,
                           selected: np.ndarray | None = None) -> dict[str, Any]:
    """Pool the source's states at ``layers`` for every word of every text it covers; write them to ``out_dir``.

    ``texts``: per split (``train``, ``heldout``), the texts as the distillation reads them (in its order);
    ``selected``: which of the corpus's training texts ``texts["train"]`` are (None: all of them), stored beside."""
    model, tokenizer, _ = load_source(Path(source_dir), with_head=False)
    pad_id = padding_id(tokenizer)
    device = compute_device()
    body = model.to(device).eval().requires_grad_(False)
    pool = "mean" if describe_config(body.config).is_encoder else "last"
    resolved = resolve_precision(precision, device)
    out_dir.mkdir(parents=True, exist_ok=True)
    counts: dict[str, Any] = {}
    dtype = ENCODER_DTYPE if pool == "mean" else DECODER_DTYPE
    for split, split_texts in texts.items():
        ids, words, covered = _source_words(tokenizer, list(split_texts), seq_len)
        n_words = np.asarray([len(c) for c in covered], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(n_words)]).astype(np.int64)
        arrays = {layer: np.lib.format.open_memmap(out_dir / _layer_file(split, layer), mode="w+",
                                                   dtype=dtype, shape=(int(offsets[-1]), body.config.hidden_size))
                  for layer in layers}
        batches = length_batches(np.asarray([len(row) for row in ids], dtype=np.int64), _TOKENS_PER_BATCH)
        with ProgressBar(f"teacher states ({split})", len(split_texts), show_loss=False) if progress else \
                _NoBar() as bar:
            done = 0
            for batch in batches:
                _pool_batch(body, ids, words, n_words, batch, layers, pool, resolved, arrays, offsets, device, pad_id)
                done += len(batch)
                bar.update(done)
        for array in arrays.values():
            array.flush()
        np.save(out_dir / f"{split}-offsets.npy", offsets)
        np.save(out_dir / f"{split}-spans.npy", np.concatenate(covered).astype(np.int64) if covered else
                np.zeros(0, np.int64))
        counts[split] = {"texts": len(split_texts), "words": int(offsets[-1]),
                         "tokens": int(sum(len(row) for row in ids)), "digest": texts_digest(split_texts)}
    if selected is not None:
        np.save(out_dir / SELECTED_FILE, np.asarray(selected, dtype=np.int64))
        counts["train"]["selected"] = True
    index = {"layers": list(layers), "pool": pool, "seq_len": seq_len, "hidden": body.config.hidden_size,
             "dtype": np.dtype(dtype).name, "splits": counts}
    (out_dir / INDEX_FILE).write_text(json.dumps(index, indent=2), encoding="utf-8")
    return index


def _source_words(tokenizer: Any, texts: list[str], seq_len: int) -> tuple[list[np.ndarray], list[np.ndarray],
                                                                           list[np.ndarray]]:
    """Each text's source ids (cut at ``seq_len``), each token's word among those the cut covers completely, and
    which words those are; read in chunks (a corpus's encodings are not held all at once)."""
    ids, words, covered = [], [], []
    for start in range(0, len(texts), _TOKENIZE_CHUNK):
        chunk = texts[start:start + _TOKENIZE_CHUNK]
        encoded = tokenizer(chunk, add_special_tokens=True, truncation=True, max_length=seq_len,
                            return_offsets_mapping=True, return_attention_mask=False, return_token_type_ids=False,
                            verbose=False)
        for text, row, offsets in zip(chunk, encoded["input_ids"], encoded["offset_mapping"], strict=True):
            spans = word_span_array(text)
            token_word = token_words(np.asarray(offsets, dtype=np.int64).reshape(-1, 2), spans)
            kept = covered_words(spans, offsets, token_word)
            compact = np.where(kept, np.cumsum(kept) - 1, -1)
            ids.append(np.asarray(row, dtype=np.int64))
            words.append(np.where(token_word >= 0, compact[np.maximum(token_word, 0)], -1))
            covered.append(np.flatnonzero(kept))
    return ids, words, covered


def _pool_batch(body: torch.nn.Module, ids: list[np.ndarray], words: list[np.ndarray], n_words: np.ndarray,
                batch: np.ndarray, layers: Sequence[int], pool: str, precision: Any, arrays: dict[int, np.ndarray],
                offsets: np.ndarray, device: torch.device, pad_id: int) -> None:
    batch = [int(i) for i in batch if n_words[i] > 0]
    if not batch:
        return
    padded, mask = pad_rows([ids[i] for i in batch], pad_id)
    positions, segments, _ = flat_word_index([words[i] for i in batch], n_words[batch], padded.shape[1])
    total = int(n_words[batch].sum())
    with torch.inference_mode(), precision.autocast():
        hidden = body(input_ids=torch.from_numpy(padded).to(device), attention_mask=torch.from_numpy(mask).to(device),
                      output_hidden_states=True, use_cache=False).hidden_states
        pooled = {layer: pool_words(hidden[layer], torch.from_numpy(positions).to(device),
                                    torch.from_numpy(segments).to(device), total, pool).float().cpu().numpy()
                  for layer in layers}
    for layer, states in pooled.items():  # as stored: no value may be lost to the stored type's range
        stored = states.astype(arrays[layer].dtype)
        if not np.isfinite(stored).all():
            raise TrainingDivergedError(f"the teacher's word states at layer {layer} are not finite as stored "
                                        f"({stored.dtype}): the source model's states overflow it")
        pooled[layer] = stored
    start = 0
    for index in batch:
        count = int(n_words[index])
        for layer, states in pooled.items():
            arrays[layer][offsets[index]:offsets[index] + count] = states[start:start + count]
        start += count


def select_distillation_texts(texts: Sequence[str], tokenizer: Any, seq_len: int, tokens: int) -> np.ndarray | None:
    """The training texts a distillation that reads ``tokens`` of the student's tokens needs (each text cut at
    ``seq_len``, as the distillation cuts it): taken in the order of their content hash (a uniform sample whatever
    the order of the corpus's sources) until their tokens reach ``tokens``; their indices, ascending. None when the
    corpus holds no more than that (every text is read)."""
    import xxhash

    order = np.argsort(np.fromiter((xxhash.xxh64_intdigest(text.encode("utf-8"), seed=_SELECTION_SEED)
                                    for text in texts), dtype=np.uint64, count=len(texts)), kind="stable")
    total = 0
    for start in range(0, len(order), _TOKENIZE_CHUNK):
        chunk = order[start:start + _TOKENIZE_CHUNK]
        encoded = tokenizer([texts[i] for i in chunk], add_special_tokens=True, truncation=True, max_length=seq_len,
                            return_attention_mask=False, return_token_type_ids=False, verbose=False)["input_ids"]
        running = total + np.cumsum([len(row) for row in encoded])
        reached = np.flatnonzero(running >= tokens)
        if len(reached):
            return np.sort(order[:start + int(reached[0]) + 1]).astype(np.int64)
        total = int(running[-1])
    return None


def texts_digest(texts: Sequence[str]) -> str:
    """What identifies the texts stored states are of (their content and order): a run reading others is refused."""
    import xxhash

    digest = xxhash.xxh64(seed=_SELECTION_SEED)
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()


def selected_texts(texts: Sequence[str], selected: np.ndarray | None) -> list[str]:
    """The training texts the stored states are of, in their corpus order (all of them for ``None``)."""
    if selected is None:
        return list(texts)
    if len(selected) and int(selected[-1]) >= len(texts):
        raise InputError(f"the stored teacher states were selected from a larger corpus ({int(selected[-1]) + 1}+ "
                         f"texts, this split has {len(texts)}): compute them for this split")
    return [texts[int(i)] for i in selected]


def store_teacher_states(source_dir: Path, model_dir: Path, train: Path, heldout: Path, out_dir: Path, *, steps: int,
                         batch_size: int, seq_len: int, eval_sequences: int, layers: Sequence[int] | None,
                         precision: str, progress: bool = False) -> dict[str, Any]:
    """The teacher's states for what a distillation of ``steps`` steps of ``batch_size × seq_len`` tokens reads: the
    training texts it needs (:func:`select_distillation_texts`, counted in ``model_dir``'s tokens) and its first
    ``eval_sequences`` held-out texts, at ``layers`` (None: the distillation's default for the source's depth). The
    teacher stage's, and a budget probe's."""
    from transformers import AutoConfig, AutoTokenizer

    from focusflow.training.state_loss import default_layers

    texts = distillation_texts(train, heldout, eval_sequences)
    selected = select_distillation_texts(texts["train"], AutoTokenizer.from_pretrained(model_dir), seq_len,
                                         steps * batch_size * seq_len)
    texts["train"] = selected_texts(texts["train"], selected)
    layers = list(layers or default_layers(layer_count(AutoConfig.from_pretrained(source_dir))))
    return compute_teacher_states(source_dir, texts, seq_len, layers, precision, out_dir, progress=progress,
                                  selected=selected)


def distillation_texts(train: Path, heldout: Path, eval_sequences: int) -> dict[str, list[str]]:
    """The texts a distillation may read, in its order: every training text, and the first ``eval_sequences``
    held-out texts it evaluates on (empty lines dropped). Stored teacher states are of a selection of the training
    texts (:func:`select_distillation_texts`) and of all these held-out texts."""
    from focusflow.corpus.io import read_texts

    return {"train": [text for text in read_texts(train) if text.strip()],
            "heldout": [text for text in read_texts(heldout, limit=eval_sequences) if text.strip()]}


class _NoBar:
    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, value: int) -> None:
        return None


class TeacherStates:
    """Stored teacher states, memory-mapped: the rows of a batch's shared words, per layer, in the batch's order."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.index = json.loads((self.folder / INDEX_FILE).read_text(encoding="utf-8"))
        self.layers = tuple(int(layer) for layer in self.index["layers"])
        self.pool = str(self.index["pool"])
        self.seq_len = int(self.index["seq_len"]) if self.index.get("seq_len") is not None else None
        self._split: dict[str, tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]] = {}
        for split in self.index["splits"]:
            self._split[split] = (np.load(self.folder / f"{split}-offsets.npy"),
                                  np.load(self.folder / f"{split}-spans.npy"),
                                  {layer: np.load(self.folder / _layer_file(split, layer), mmap_mode="r")
                                   for layer in self.layers})

    def texts(self, split: str) -> int:
        return int(self.index["splits"][split]["texts"])

    def check_texts(self, split: str, count: int, digest: str) -> None:
        """Refuse states stored for other texts than a run reads: ``count`` texts of ``digest`` (:func:`texts_digest`;
        states of older artifacts carry no digest: their count is compared)."""
        stored = self.index["splits"][split]
        if stored.get("digest", digest) != digest or stored["texts"] != count:
            raise InputError(f"the stored teacher states ({self.folder}) were computed for other {split} texts "
                             f"({stored['texts']} texts, this run reads {count}): compute them for this split")

    def selected(self) -> np.ndarray | None:
        """Which of the corpus's training texts the states are of (None: all of them, in order)."""
        return np.load(self.folder / SELECTED_FILE) if self.index["splits"]["train"].get("selected") else None

    def rows(self, split: str, text_indices: Sequence[int], shared_spans: Sequence[np.ndarray]) -> np.ndarray:
        """The stored row of every shared word of these texts, text after text (a student's words are a subset of
        the words the source covers, each stored once per text in word order)."""
        offsets, spans, _ = self._split[split]
        rows = []
        for text, shared in zip(text_indices, shared_spans, strict=True):
            stored = spans[offsets[text]:offsets[text + 1]]
            at = np.searchsorted(stored, shared)
            if len(shared) and (at.max(initial=0) >= len(stored) or not np.array_equal(stored[at], shared)):
                raise InputError(f"text {text} of {split} has words the stored teacher states do not cover: they "
                                 "were computed for other texts or another seq_len")
            rows.append(offsets[text] + at)
        return np.concatenate(rows) if rows else np.zeros(0, np.int64)

    def gather(self, split: str, rows: np.ndarray) -> list[torch.Tensor]:
        """Per layer, the float32 states of these rows."""
        _, _, arrays = self._split[split]
        return [torch.from_numpy(np.asarray(arrays[layer][rows], dtype=np.float32)) for layer in self.layers]


__all__ = ["INDEX_FILE", "TeacherStates", "compute_teacher_states", "distillation_texts", "select_distillation_texts",
           "selected_texts", "store_teacher_states", "texts_digest"]
