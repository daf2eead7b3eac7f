"""Vectorized MinHash signatures for whole batches of documents (numpy, no per-shingle Python).

A batch is joined into one UTF-8 byte array. Words are hashed with a polynomial rolling hash
computed from prefix sums (mod 2^64, so numpy's wrapping uint64 arithmetic is the modulus),
shingles combine k consecutive word hashes, and the signature is a *one-permutation* MinHash
with optimal densification (Shrivastava 2017): one hash per shingle picks a bin and a
value, each bin keeps its minimum, and empty bins borrow from the next filled bin. Its
collision probability per bin is the Jaccard similarity, like classic MinHash, at the cost of
one hash per shingle instead of ``num_perm``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import xxhash

from focusflow.languages import UNSPACED, words

U64 = np.uint64
EMPTY = np.uint32(0xFFFFFFFF)
_BASE = 0x100000001B3  # odd multiplier of the rolling hash
_BASE_INV = pow(_BASE, -1, 1 << 64)


# Bytes that separate words: ASCII controls, space and ASCII punctuation (so "word," == "word").
_SEPARATOR = np.zeros(256, dtype=bool)
_SEPARATOR[:33] = True
_SEPARATOR[[ord(c) for c in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"]] = True


def simplify(text: str) -> str:
    """Lowercase (punctuation is handled on bytes: ASCII punctuation separates words)."""
    return text.lower()


def _spaced(text: str) -> str:
    """Text with a space between the letters of a script written without spaces (Thai, Chinese …), so that word
    shingles are shingles of letters there, not one shingle per line: letter by letter, one inserted letter shifts
    no shingle boundary (units of several letters would move every one after it)."""
    return " ".join(words(text, letters_per_word=1)) if UNSPACED.search(text) else text


def exact_hash(text: str) -> int:
    """Hash of the normalized text: case and whitespace differences do not count."""
    return xxhash.xxh3_64_intdigest(" ".join(text.lower().split()).encode("utf-8"))


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer, in place on a uint64 array (good avalanche for the polynomial hashes)."""
    x ^= x >> U64(30)
    x *= U64(0xBF58476D1CE4E5B9)
    x ^= x >> U64(27)
    x *= U64(0x94D049BB133111EB)
    x ^= x >> U64(31)
    return x


@lru_cache(maxsize=4)
def _powers(length: int) -> tuple[np.ndarray, np.ndarray]:
    """BASE^i and BASE^-i mod 2^64 for i < length (cached: batches reuse them)."""
    forward = np.cumprod(np.full(length, _BASE, dtype=U64))
    forward[1:] = forward[:-1].copy()
    forward[0] = 1
    inverse = np.cumprod(np.full(length, _BASE_INV, dtype=U64))
    inverse[1:] = inverse[:-1].copy()
    inverse[0] = 1
    return forward, inverse


def _pow_arrays(length: int) -> tuple[np.ndarray, np.ndarray]:
    size = 1 << max(16, (length - 1).bit_length())  # round up so the cache is hit across batches
    forward, inverse = _powers(size)
    return forward[:length], inverse[:length]


def _segment_hashes(codes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Polynomial hash of ``codes[start:end]`` for each segment, position independent."""
    forward, inverse = _pow_arrays(len(codes))
    prefix = np.empty(len(codes) + 1, dtype=U64)
    prefix[0] = 0
    np.cumsum(codes * forward, out=prefix[1:])
    return _mix((prefix[ends] - prefix[starts]) * inverse[starts])


def _shingle_multipliers(size: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, 0x5117])
    return rng.integers(1, 2**63, size=size, dtype=np.uint64) * U64(2) + U64(1)


def shingle_hashes(texts: list[str], shingles: str = "word", size: int = 5,
                   seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Hashes of all shingles of ``texts`` and the index of the text each belongs to.

    Word shingles: ``size`` consecutive words (a text with fewer words is one shingle; a script written without
    spaces is cut into its words first). Char
    shingles: ``size``-byte windows of the simplified UTF-8 text (whole text if shorter).
    """
    parts = [(simplify(text) if shingles == "char" else _spaced(simplify(text))).encode("utf-8") for text in texts]
    if shingles == "char":
        parts = [b" ".join(part.split()) for part in parts]  # whitespace runs count as one space
    lengths = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    blob = np.frombuffer(b" ".join(parts), dtype=np.uint8)
    doc_starts = np.zeros(len(parts), dtype=np.int64)
    np.cumsum(lengths[:-1] + 1, out=doc_starts[1:])
    if blob.size == 0:
        return np.empty(0, dtype=U64), np.empty(0, dtype=np.int64)
    codes = blob.astype(U64) + U64(1)

    if shingles == "char":
        return _char_shingles(codes, doc_starts, lengths, size)

    is_word = ~_SEPARATOR[blob]
    edges = np.diff(is_word.astype(np.int8), prepend=np.int8(0), append=np.int8(0))
    word_starts = np.flatnonzero(edges == 1)
    word_ends = np.flatnonzero(edges == -1)
    if word_starts.size == 0:
        return np.empty(0, dtype=U64), np.empty(0, dtype=np.int64)
    words = _segment_hashes(codes, word_starts, word_ends)
    word_doc = np.searchsorted(doc_starts, word_starts, side="right") - 1

    n_words = words.size
    multipliers = _shingle_multipliers(size, seed)
    combined = words * multipliers[0]
    for offset in range(1, min(size, n_words)):
        head = n_words - offset
        same = np.zeros(n_words, dtype=bool)
        same[:head] = word_doc[offset:] == word_doc[:head]
        term = np.zeros(n_words, dtype=U64)
        term[:head] = words[offset:] * multipliers[offset]
        combined += np.where(same, term, U64(0))
    last_doc = np.full(n_words, -1, dtype=np.int64)
    if n_words >= size:
        last_doc[: n_words - size + 1] = word_doc[size - 1:]
    full = last_doc == word_doc
    doc_first_word = np.r_[True, word_doc[1:] != word_doc[:-1]]
    words_per_doc = np.bincount(word_doc, minlength=len(parts))
    short_doc = doc_first_word & (words_per_doc[word_doc] < size)
    keep = full | short_doc
    return _mix(combined[keep] ^ U64(seed * 0x9E3779B97F4A7C15 % (1 << 64))), word_doc[keep]


def _char_shingles(codes: np.ndarray, doc_starts: np.ndarray, lengths: np.ndarray,
                   size: int) -> tuple[np.ndarray, np.ndarray]:
    windows = np.maximum(lengths - size + 1, np.minimum(lengths, 1))  # short texts: one whole-text shingle
    doc = np.repeat(np.arange(len(lengths)), windows)
    first = np.repeat(doc_starts, windows)
    within = np.arange(doc.size) - np.repeat(np.cumsum(windows) - windows, windows)
    starts = first + within
    ends = np.minimum(starts + size, np.repeat(doc_starts + lengths, windows))
    return _segment_hashes(codes, starts, ends), doc


def one_permutation_signatures(hashes: np.ndarray, doc: np.ndarray, n_docs: int, num_perm: int,
                               seed: int = 0) -> np.ndarray:
    """``(n_docs, num_perm)`` uint32 signatures from shingle hashes (one-permutation MinHash, densified)."""
    salted = _mix(hashes ^ U64(xxhash.xxh64_intdigest(str(seed).encode())))
    bins = ((salted >> U64(32)) * U64(num_perm)) >> U64(32)
    values = (salted & U64(0xFFFFFFFF)).astype(np.uint32)
    signature = np.full(n_docs * num_perm, EMPTY, dtype=np.uint32)
    np.minimum.at(signature, doc * num_perm + bins.astype(np.int64), values)
    signature = signature.reshape(n_docs, num_perm)
    _densify(signature)
    return signature


@lru_cache(maxsize=4)
def _probe_table(k: int, attempts_per_bin: int = 64) -> np.ndarray:
    """(attempts, k) bin probed at each attempt for each empty bin: a fixed pseudo-random sequence."""
    attempt = np.arange(1, attempts_per_bin * k + 1, dtype=U64)[:, None]
    bins = np.arange(k, dtype=U64)[None, :]
    return (_mix(bins * U64(0x9E3779B97F4A7C15) + attempt * U64(0xD6E8FEB86659FD93)) % U64(k)).astype(np.int64)


def _densify(signature: np.ndarray) -> None:
    """Optimal densification (Shrivastava 2017): an empty bin j copies bin ``h(j, attempt)``, the first filled one.

    The probe sequence depends only on (j, attempt), the same for every document, so two
    documents' bin j collide with probability equal to their Jaccard similarity, with the
    variance of classic MinHash even for short texts (rotation densification is much noisier).
    """
    empty = signature == EMPTY
    rows = np.flatnonzero(empty.any(axis=1) & ~empty.all(axis=1))
    if rows.size == 0:
        return
    k = signature.shape[1]
    sub = signature[rows]
    sub_empty = empty[rows]
    flat_empty = sub_empty.ravel()
    flat_values = sub.ravel()
    result = flat_values.copy()
    pending = np.flatnonzero(flat_empty)
    base = pending - pending % k  # row offset of each pending entry
    col = pending % k
    probes = _probe_table(k)
    attempt = 0
    while pending.size and attempt < probes.shape[0]:
        source = base + probes[attempt, col]
        hit = ~flat_empty[source]
        result[pending[hit]] = flat_values[source[hit]]
        miss = ~hit
        pending, base, col = pending[miss], base[miss], col[miss]
        attempt += 1
    filled_values = result.reshape(sub.shape)
    signature[rows] = filled_values


def signatures(texts: list[str], num_perm: int = 128, shingles: str = "word", size: int = 5,
               seed: int = 0) -> np.ndarray:
    """MinHash signatures of ``texts``; texts without any shingle get an all-empty row (never matched)."""
    hashes, doc = shingle_hashes(texts, shingles, size, seed)
    return one_permutation_signatures(hashes, doc, len(texts), num_perm, seed)


def jaccard(a: str, b: str, shingles: str = "word", size: int = 5) -> float:
    """Exact Jaccard similarity of two texts' shingle sets (for tests and benchmarks)."""
    ha, _ = shingle_hashes([a], shingles, size)
    hb, _ = shingle_hashes([b], shingles, size)
    sa, sb = set(ha.tolist()), set(hb.tolist())
    return len(sa & sb) / max(1, len(sa | sb))
