"""Exact and near-duplicate removal (MinHash + LSH) at document and/or line level, streaming.

Pass 1 reads the corpus in byte-range shards (one process each, ``DedupSpec.workers``) and
keeps only per-unit fingerprints: a 64-bit hash of the normalized text and a ``num_perm``
uint32 MinHash signature, i.e. memory grows with the signature index, never with the text.
Then, all vectorized: exact duplicates are every repeat of a normalized hash; near-duplicate
candidates are units sharing an LSH band, verified by their estimated Jaccard similarity
(≥ threshold) and grouped by connected components; the first unit of each group is kept.
Pass 2 streams the corpus again and writes what is kept (document level copies the JSON lines
untouched).
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from focusflow.config import DedupSpec
from focusflow.corpus.io import DOCUMENTS, STATS, TEXT_FIELD, write_stats, write_texts
from focusflow.corpus.minhash import U64, _mix, exact_hash, signatures
from focusflow.errors import InputError
from focusflow.storage.atomic import atomic_path

log = logging.getLogger(__name__)
SHARD_BYTES = 32 << 20  # one task per 32 MB of corpus
BATCH_BYTES = 2 << 20  # vectorized in batches of ~2 MB of text (bounded temporary memory)
KEEP, EXACT, NEAR, SHORT = 0, 1, 2, 3


@dataclass
class Fingerprints:
    """Per-unit fingerprints of one shard: exact hashes, signatures, and (line level) unit → document."""

    exact: np.ndarray  # uint64 (n,)
    signature: np.ndarray  # uint32 (n, num_perm)
    eligible: np.ndarray  # bool (n,): may be removed (line level: long enough)
    document: np.ndarray  # int64 (n,): index of the document within the shard
    documents: int


# --------------------------------------------------------------------------- LSH parameters

@lru_cache(maxsize=64)
def lsh_parameters(threshold: float, num_perm: int) -> tuple[int, int]:
    """(bands, rows) minimizing 0.1 · false-positive + 0.9 · false-negative area of the LSH S-curve.

    datasketch weighs both equally; here every candidate pair is verified by its estimated
    Jaccard, so a false positive costs only a comparison while a false negative is a missed
    duplicate: the curve is shifted to catch ~87-92% of pairs right at the threshold.
    """
    grid = np.linspace(0.0, 1.0, 201)
    best, best_error = (1, num_perm), float("inf")
    for bands in range(1, num_perm + 1):
        rows = num_perm // bands
        probability = 1.0 - (1.0 - grid ** rows) ** bands
        below = grid <= threshold
        false_positive = np.trapezoid(probability[below], grid[below]) if below.sum() > 1 else 0.0
        false_negative = np.trapezoid(1.0 - probability[~below], grid[~below]) if (~below).sum() > 1 else 0.0
        error = 0.1 * false_positive + 0.9 * false_negative
        if error < best_error - 1e-12:
            best, best_error = (bands, rows), error
    return best


def band_hashes(signature: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """(n, bands) uint64: one hash per band of ``rows`` signature values."""
    n = signature.shape[0]
    out = np.empty((n, bands), dtype=U64)
    multipliers = (np.arange(1, rows + 1, dtype=U64) * U64(0x9E3779B97F4A7C15)) | U64(1)
    for band in range(bands):
        block = signature[:, band * rows:(band + 1) * rows].astype(U64)
        acc = (block * multipliers).sum(axis=1, dtype=U64) + U64(band)
        out[:, band] = _mix(acc)
    return out


# --------------------------------------------------------------------------- duplicate finding

def find_duplicates(exact: np.ndarray, signature: np.ndarray, eligible: np.ndarray, spec: DedupSpec) -> np.ndarray:
    """Status per unit (KEEP, EXACT, NEAR, SHORT=not eligible, kept); the earliest unit of a group survives."""
    n = exact.size
    status = np.full(n, KEEP, dtype=np.int8)
    status[~eligible] = SHORT
    candidates = np.flatnonzero(eligible)
    if spec.exact and candidates.size:
        _, first = np.unique(exact[candidates], return_index=True)
        repeat = np.ones(candidates.size, dtype=bool)
        repeat[first] = False
        status[candidates[repeat]] = EXACT
    if spec.near:
        alive = np.flatnonzero(status == KEEP)
        has_shingles = signature[alive].min(axis=1) != np.uint32(0xFFFFFFFF)
        alive = alive[has_shingles]
        status[_near_duplicates(alive, signature, spec)] = NEAR
    return status


def _near_duplicates(units: np.ndarray, signature: np.ndarray, spec: DedupSpec) -> np.ndarray:
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    if units.size < 2:
        return np.empty(0, dtype=np.int64)
    num_perm = signature.shape[1]
    bands, rows = (spec.bands, num_perm // spec.bands) if spec.bands else lsh_parameters(spec.threshold, num_perm)
    if rows < 1:
        raise InputError(f"dedup.bands={spec.bands} exceeds num_perm={num_perm}")
    sig = signature[units]
    keys = band_hashes(sig, bands, rows)
    sources, targets = [], []
    for band in range(bands):
        order = np.argsort(keys[:, band], kind="stable")
        sorted_keys = keys[order, band]
        new_group = np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]
        group_first = order[np.flatnonzero(new_group)[np.cumsum(new_group) - 1]]  # earliest member (stable sort)
        linked = order != group_first
        if linked.any():
            sources.append(order[linked])
            targets.append(group_first[linked])
    if not sources:
        return np.empty(0, dtype=np.int64)
    a = np.concatenate(sources)
    b = np.concatenate(targets)
    pairs = np.unique(np.minimum(a, b).astype(np.int64) * units.size + np.maximum(a, b))
    a, b = pairs // units.size, pairs % units.size
    similar = np.empty(a.size, dtype=bool)
    for start in range(0, a.size, 1 << 16):  # chunked: (chunk, num_perm) comparisons
        stop = start + (1 << 16)
        similar[start:stop] = (sig[a[start:stop]] == sig[b[start:stop]]).mean(axis=1) >= spec.threshold
    a, b = a[similar], b[similar]
    graph = coo_matrix((np.ones(a.size, dtype=np.int8), (a, b)), shape=(units.size, units.size))
    _, component = connected_components(graph, directed=False)
    first_of_component = np.full(component.max() + 1, units.size, dtype=np.int64)
    np.minimum.at(first_of_component, component, np.arange(units.size))
    duplicate = first_of_component[component] != np.arange(units.size)
    return units[duplicate]


# --------------------------------------------------------------------------- pass 1: fingerprints

def _shard_ranges(path: Path, shard_bytes: int) -> list[tuple[int, int]]:
    """Byte ranges that start at line starts and cover the file."""
    size = path.stat().st_size
    cuts = [0]
    with open(path, "rb") as handle:
        while cuts[-1] + shard_bytes < size:
            handle.seek(cuts[-1] + shard_bytes)
            handle.readline()
            position = handle.tell()
            if position >= size:
                break
            cuts.append(position)
    cuts.append(size)
    return list(zip(cuts[:-1], cuts[1:], strict=False))


def _read_range(path: str, start: int, stop: int) -> Iterator[str]:
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read(stop - start)
    for line in data.split(b"\n"):
        if line.strip():
            yield json.loads(line)[TEXT_FIELD]


def _units(text: str, level: str) -> list[str]:
    if level == "document":
        return [text]
    return [line for line in text.split("\n") if line.strip()]


def fingerprint_shard(path: str, start: int, stop: int, level: str, spec_json: str) -> Fingerprints:
    """Fingerprints of the documents (or lines) in ``path[start:stop]``; runs in a worker process."""
    spec = DedupSpec.model_validate_json(spec_json)
    exact_parts, signature_parts, eligible_parts, document_parts = [], [], [], []
    batch: list[str] = []
    batch_documents: list[int] = []
    size = 0
    documents = 0

    def flush() -> None:
        exact_parts.append(np.fromiter((exact_hash(u) for u in batch), dtype=U64, count=len(batch)))
        signature_parts.append(signatures(batch, spec.num_perm, spec.shingles, spec.shingle_size, spec.seed))
        lengths = np.fromiter((len(u) for u in batch), dtype=np.int64, count=len(batch))
        eligible_parts.append(lengths >= (spec.min_line_chars if level == "line" else 0))
        document_parts.append(np.asarray(batch_documents, dtype=np.int64))

    for text in _read_range(path, start, stop):
        for unit in _units(text, level):
            batch.append(unit)
            batch_documents.append(documents)
            size += len(unit)
        documents += 1
        if size >= BATCH_BYTES:
            flush()
            batch, batch_documents, size = [], [], 0
    if batch or not exact_parts:
        flush()
    return Fingerprints(np.concatenate(exact_parts), np.concatenate(signature_parts),
                        np.concatenate(eligible_parts), np.concatenate(document_parts), documents)


def _fingerprints(path: Path, spec: DedupSpec, level: str) -> list[Fingerprints]:
    shards = _shard_ranges(path, SHARD_BYTES)
    workers = min(spec.workers or os.cpu_count() or 1, len(shards))
    spec_json = spec.model_dump_json()
    args = [(str(path), start, stop, level, spec_json) for start, stop in shards]
    if workers <= 1:
        return [fingerprint_shard(*a) for a in args]
    context = multiprocessing.get_context("spawn")  # safe when the caller has threads (torch, Prefect)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = [pool.submit(fingerprint_shard, *a) for a in args]
        return [future.result() for future in futures]


# --------------------------------------------------------------------------- the stage

def deduplicate(documents: Path, spec: DedupSpec, out_dir: Path) -> dict:
    """Write ``documents`` without exact/near duplicates to ``out_dir/documents.jsonl``; returns stats.

    ``spec.level``: ``document`` removes whole documents, ``line`` removes repeated lines
    (boilerplate, repeated verses) inside documents and drops documents left empty, ``both``
    does documents first, then lines.
    """
    source = Path(documents)
    if not source.is_file():
        raise FileNotFoundError(f"documents file {source} does not exist; run the corpus stage first")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    stats: dict = {"input_bytes": source.stat().st_size}
    if spec.level in ("document", "both"):
        target = out / DOCUMENTS if spec.level == "document" else out / ".documents.doclevel.jsonl"
        stats["document"] = _deduplicate_documents(source, spec, target)
        source = target
    if spec.level in ("line", "both"):
        stats["line"] = _deduplicate_lines(source, spec, out / DOCUMENTS)
        if spec.level == "both":
            source.unlink()
    first = stats.get("document") or stats["line"]
    last = stats.get("line") or stats["document"]
    stats.update(documents_in=first["documents_in"], documents_out=last["documents_out"],
                 output_bytes=(out / DOCUMENTS).stat().st_size,
                 seconds=round(time.perf_counter() - started, 3))
    write_stats(out / STATS, stats)
    log.info("dedup: %d → %d documents in %.1f s", stats["documents_in"], stats["documents_out"], stats["seconds"])
    return stats


def _combine(parts: list[Fingerprints]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    offsets = np.cumsum([0] + [p.documents for p in parts])
    exact = np.concatenate([p.exact for p in parts])
    signature = np.concatenate([p.signature for p in parts])
    eligible = np.concatenate([p.eligible for p in parts])
    document = np.concatenate([p.document + offset for p, offset in zip(parts, offsets[:-1], strict=False)])
    return exact, signature, eligible, document


def _counts(status: np.ndarray) -> dict:
    return {"exact_duplicates": int((status == EXACT).sum()), "near_duplicates": int((status == NEAR).sum())}


def _deduplicate_documents(source: Path, spec: DedupSpec, target: Path) -> dict:
    parts = _fingerprints(source, spec, "document")
    exact, signature, eligible, _ = _combine(parts)
    status = find_duplicates(exact, signature, eligible, spec)
    keep = status != EXACT
    keep &= status != NEAR
    kept = 0
    with atomic_path(target) as temporary, open(source, "rb") as reader, open(temporary, "wb") as writer:
        index = 0
        for line in reader:
            if not line.strip():
                continue
            if keep[index]:
                writer.write(line if line.endswith(b"\n") else line + b"\n")
                kept += 1
            index += 1
    return {"documents_in": int(status.size), "documents_out": kept, **_counts(status),
            "signature_index_mb": round(signature.nbytes / 1e6, 2)}


def _deduplicate_lines(source: Path, spec: DedupSpec, target: Path) -> dict:
    parts = _fingerprints(source, spec, "line")
    exact, signature, eligible, _ = _combine(parts)
    status = find_duplicates(exact, signature, eligible, spec)
    keep = (status != EXACT) & (status != NEAR)
    counter = {"documents_in": 0, "emptied": 0}

    def rebuilt() -> Iterator[str]:
        index = 0
        for line in open(source, "rb"):
            if not line.strip():
                continue
            counter["documents_in"] += 1
            units = _units(json.loads(line)[TEXT_FIELD], "line")
            kept_units = [u for u, k in zip(units, keep[index:index + len(units)], strict=False) if k]
            index += len(units)
            if kept_units:
                yield "\n".join(kept_units)
            else:
                counter["emptied"] += 1

    written = write_texts(target, rebuilt())
    return {"documents_in": counter["documents_in"], "documents_out": written, "lines_in": int(status.size),
            "lines_out": int(keep.sum()), "documents_emptied": counter["emptied"], **_counts(status),
            "signature_index_mb": round(signature.nbytes / 1e6, 2)}
