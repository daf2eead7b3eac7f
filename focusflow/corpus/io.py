"""The corpus file format every stage reads: JSON Lines, one ``{"text": ...}`` document per line.

A document may contain newlines (JSON escapes them), so documents survive intact; stages
that need one line per document (fastText, SentencePiece) flatten with ``one_line``.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from focusflow.errors import InputError
from focusflow.storage.atomic import atomic_path, atomic_write

TEXT_FIELD = "text"


def read_texts(path: str | os.PathLike[str], limit: int | None = None) -> Iterator[str]:
    """Documents of a corpus file, in order: ``.jsonl`` (``{"text": ...}`` per line) or plain ``.txt`` (one
    document per non-empty line), either optionally ``.gz``."""
    file = Path(path)
    opener = gzip.open if file.suffix == ".gz" else open
    plain = file.name.endswith((".txt", ".txt.gz"))
    with opener(file, "rt", encoding="utf-8") as handle:
        for count, line in enumerate(handle):
            if limit is not None and count >= limit:
                return
            if not line.strip():
                continue
            if plain:
                yield line.rstrip("\r\n")
                continue
            try:
                yield json.loads(line)[TEXT_FIELD]
            except (json.JSONDecodeError, KeyError, TypeError):
                raise InputError(f"{file}:{count + 1}: expected JSON Lines with a {TEXT_FIELD!r} field per line "
                                 f"(or name a plain-text corpus *.txt: one document per line)") from None


def write_texts(path: str | os.PathLike[str], texts: Iterable[str]) -> int:
    """Write documents atomically (temporary name, then rename); returns how many were written."""
    count = 0
    with atomic_path(path) as temporary, open(temporary, "w", encoding="utf-8") as handle:
        for text in texts:
            handle.write(json.dumps({TEXT_FIELD: text}, ensure_ascii=False))
            handle.write("\n")
            count += 1
    return count


def one_line(text: str) -> str:
    """A document as a single line (newlines and tabs become spaces)."""
    return " ".join(text.split())


# Stats keys that differ between two runs on the same inputs (wall-clock timings, hosts, the local paths
# that inputs were read from). They stay in the stats a stage returns (the store keeps those in the
# manifest's metadata, outside the content hash) and never reach the files a stage writes, so the same
# inputs give byte-identical artifacts and the same keys.
VOLATILE_KEYS = frozenset({"seconds", "seconds_prepare", "seconds_train", "host", "hostname", "source_path"})


def stable_stats(stats: object) -> object:
    """``stats`` without the volatile keys, at any depth: the deterministic part that goes into files."""
    if isinstance(stats, dict):
        return {k: stable_stats(v) for k, v in stats.items() if k not in VOLATILE_KEYS}
    if isinstance(stats, list):
        return [stable_stats(v) for v in stats]
    return stats


def write_stats(path: str | os.PathLike[str], stats: dict) -> None:
    """Write a stage's stats file: its deterministic part only (see ``VOLATILE_KEYS``)."""
    write_json(path, stable_stats(stats))


def write_json(path: str | os.PathLike[str], data: object) -> None:
    """Write a JSON file atomically (stats, manifests)."""
    atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def read_documents(path: str | os.PathLike[str], limit: int | None = None) -> list[str]:
    """Non-empty documents of a corpus ``.jsonl``/``.jsonl.gz`` or the stripped non-empty lines of any other text file.

    What model-side stages accept as text (held-out sets, MLM-head training text): a corpus
    file or a plain file a user wrote.
    """
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"text file {file} does not exist")
    if file.name.endswith((".jsonl", ".jsonl.gz")):
        return [t for t in read_texts(file, limit=limit) if t.strip()]
    texts: list[str] = []
    with open(file, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            line = line.strip()
            if line:
                texts.append(line)
                if limit is not None and len(texts) >= limit:
                    break
    return texts
