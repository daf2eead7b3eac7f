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

TEXT_FIELD = "text"


def read_texts(path: str | os.PathLike[str], limit: int | None = None) -> Iterator[str]:
    """Documents of a corpus file (``.jsonl`` or ``.jsonl.gz``), in order."""
    file = Path(path)
    opener = gzip.open if file.suffix == ".gz" else open
    with opener(file, "rt", encoding="utf-8") as handle:
        for count, line in enumerate(handle):
            if limit is not None and count >= limit:
                return
            if line.strip():
                yield json.loads(line)[TEXT_FIELD]


def write_texts(path: str | os.PathLike[str], texts: Iterable[str]) -> int:
    """Write documents atomically (temporary name, then rename); returns how many were written."""
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    temporary = file.with_name(f".{file.name}.tmp-{os.getpid()}")
    count = 0
    with open(temporary, "w", encoding="utf-8") as handle:
        for text in texts:
            handle.write(json.dumps({TEXT_FIELD: text}, ensure_ascii=False))
            handle.write("\n")
            count += 1
    os.replace(temporary, file)
    return count


def one_line(text: str) -> str:
    """A document as a single line (newlines and tabs become spaces)."""
    return " ".join(text.split())


def write_json(path: str | os.PathLike[str], data: object) -> None:
    """Write a JSON file atomically (stats, manifests)."""
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    temporary = file.with_name(f".{file.name}.tmp-{os.getpid()}")
    temporary.write_text(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(temporary, file)
