"""Baseline initializations, each filling a :class:`PlanBuilder` like FOCUS does.

- random: every non-special row copies a row of a random permutation of the source matrix (Zoph et al. 2016);
- mean: overlap copied, other rows the source mean (Prune-or-Retrain);
- FVT: overlap copied, other rows the mean of the source pieces of the token's text (Gee et al. 2022);
- AVG-EG: overlap copied, other rows the mean of source tokens that are sub- or super-words of it (Liu et al. 2021);
- WECHSEL: all non-special rows a softmax(sim / temperature)-weighted mean of the k most similar source
  tokens in a bilingual aligned fastText space (Minixhofer et al. 2022); vectors and dictionary come from the user.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from focusflow.embeddings.plan import PlanBuilder
from focusflow.errors import InputError
from focusflow.methods import Fate
from focusflow.tokenizer.canonical import CanonicalToken


def random_rows(builder: PlanBuilder, non_special: np.ndarray, seed: int) -> None:
    rng = np.random.default_rng(seed)
    permutation = rng.permutation(builder.n_source)
    if len(non_special) > len(permutation):
        permutation = np.concatenate([permutation, rng.integers(0, builder.n_source, len(non_special) - len(permutation))])
    builder.combine(non_special, permutation[: len(non_special)], np.ones(len(non_special), np.float32))
    builder.fate[non_special] = Fate.RANDOM


def fvt_rows(builder: PlanBuilder, rows: np.ndarray, target_forms: list[CanonicalToken], source_tokenizer: Any,
             fate: Fate = Fate.COMBINED) -> np.ndarray:
    """Mean of the source pieces of each token's text; returns the rows FVT could not decompose."""
    texts, usable = [], []
    for row in rows.tolist():
        text = target_forms[row].text
        if text:
            texts.append((" " if target_forms[row].word_start else "") + text)
            usable.append(row)
    encodings = source_tokenizer.backend_tokenizer.encode_batch(texts, add_special_tokens=False) if texts else []
    triplet_rows, cols, vals = [], [], []
    for row, encoding in zip(usable, encodings, strict=False):
        ids = encoding.ids
        if ids:
            triplet_rows.extend([row] * len(ids))
            cols.extend(ids)
            vals.extend([1.0 / len(ids)] * len(ids))
    if triplet_rows:
        builder.combine(np.asarray(triplet_rows), np.asarray(cols), np.asarray(vals, np.float32), fate)
    done = set(triplet_rows)
    return np.asarray([row for row in rows.tolist() if row not in done], np.int64)


def avg_eg_rows(builder: PlanBuilder, rows: np.ndarray, target_forms: list[CanonicalToken],
                source_forms: list[CanonicalToken], max_related: int = 64, min_sub_len: int = 2) -> None:
    """Mean of source tokens whose text is a substring (sub-word) or superstring (super-word) of the token."""
    wanted = {}
    for row in rows.tolist():
        text = target_forms[row].text
        if text and text.strip():
            wanted[row] = text.strip()
    wanted_texts = set(wanted.values())
    source_by_text: dict[str, int] = {}
    superwords: dict[str, list[int]] = {}
    for form in source_forms:
        if form.kind != "regular" or not form.text:
            continue
        text = form.text.strip()
        if not text:
            continue
        source_by_text.setdefault(text, form.id)
        if len(text) > 32:
            continue
        seen = set()
        for i in range(len(text)):
            for j in range(i + 1, len(text) + 1):
                piece = text[i:j]
                if piece != text and piece in wanted_texts and piece not in seen:
                    seen.add(piece)
                    bucket = superwords.setdefault(piece, [])
                    if len(bucket) < max_related:
                        bucket.append(form.id)
    triplet_rows, cols, vals = [], [], []
    for row, text in wanted.items():
        related = list(superwords.get(text, []))
        for i in range(len(text)):
            for j in range(i + min(min_sub_len, len(text)), len(text) + 1):
                piece = text[i:j]
                if piece != text and piece in source_by_text:
                    related.append(source_by_text[piece])
        if text in source_by_text:
            related.append(source_by_text[text])
        related = sorted(set(related))[: 2 * max_related]
        if related:
            triplet_rows.extend([row] * len(related))
            cols.extend(related)
            vals.extend([1.0 / len(related)] * len(related))
    if triplet_rows:
        builder.combine(np.asarray(triplet_rows), np.asarray(cols), np.asarray(vals, np.float32))


def _fasttext_vectors(model: Any, forms: list[CanonicalToken], rows: np.ndarray) -> np.ndarray:
    vectors = np.zeros((len(rows), model.get_dimension()), np.float32)
    for position, row in enumerate(rows.tolist()):
        text = forms[row].text
        if text and text.strip():
            vectors[position] = model.get_word_vector(text.strip())
    return vectors


def procrustes(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Orthogonal W minimizing ||target @ W - source|| (maps target vectors into the source space)."""
    u, _, vt = np.linalg.svd(target.T.astype(np.float64) @ source.astype(np.float64))
    return (u @ vt).astype(np.float32)


def wechsel_rows(builder: PlanBuilder, rows: np.ndarray, target_forms: list[CanonicalToken],
                 source_forms: list[CanonicalToken], source_vectors: Path, target_vectors: Path,
                 dictionary: Path | None, k: int = 10, temperature: float = 0.1, chunk_rows: int = 256) -> None:
    import fasttext

    for path in (source_vectors, target_vectors):
        if not Path(path).is_file():
            raise FileNotFoundError(f"WECHSEL needs fastText .bin word vectors for both languages; {path} does not exist")
    source_model = fasttext.load_model(str(source_vectors))
    target_model = fasttext.load_model(str(target_vectors))
    mapping = np.eye(target_model.get_dimension(), dtype=np.float32)
    if dictionary is not None:
        pairs = [line.rstrip("\n").split("\t")[:2] for line in Path(dictionary).read_text(encoding="utf-8").splitlines()
                 if "\t" in line]
        if len(pairs) < 2:
            raise InputError(f"dictionary {dictionary} needs tab-separated 'source<TAB>target' word pairs")
        src = np.stack([source_model.get_word_vector(a) for a, _ in pairs])
        tgt = np.stack([target_model.get_word_vector(b) for _, b in pairs])
        mapping = procrustes(src, tgt)
    source_rows = np.asarray([f.id for f in source_forms if f.kind == "regular" and f.text and f.text.strip()], np.int64)
    source_space = torch.from_numpy(_fasttext_vectors(source_model, source_forms, source_rows))
    source_space = source_space / source_space.norm(dim=1, keepdim=True).clamp(min=1e-12)
    target_space = _fasttext_vectors(target_model, target_forms, rows) @ mapping
    has_vector = np.any(target_space != 0, axis=1)
    rows, target_space = rows[has_vector], torch.from_numpy(target_space[has_vector])
    target_space = target_space / target_space.norm(dim=1, keepdim=True).clamp(min=1e-12)
    width = min(k, len(source_rows))
    for start in range(0, len(rows), chunk_rows):
        scores = target_space[start:start + chunk_rows] @ source_space.T
        values, indices = scores.topk(width, dim=1)
        weights = torch.softmax(values / temperature, dim=1)
        chunk = rows[start:start + chunk_rows]
        builder.combine(np.repeat(chunk, width), source_rows[indices.numpy().reshape(-1)], weights.numpy().reshape(-1))
