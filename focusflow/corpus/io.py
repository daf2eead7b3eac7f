"""The corpus file format every stage reads: JSON Lines, one ``{"text": ...}`` document per line.

A document may contain newlines (JSON escapes them), so documents survive intact; stages
that need one line per document (fastText, SentencePiece) flatten with ``one_line``.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import lzma
import os
import re
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from focusflow.errors import InputError
from focusflow.storage.atomic import atomic_path, atomic_write

log = logging.getLogger(__name__)
TEXT_FIELD = "text"
# The corpus, dedup and decontaminate stages' one file, and every corpus stage's statistics.
DOCUMENTS, STATS = "documents.jsonl", "stats.json"
# A text file with more of its bytes invalid UTF-8 or control characters than this is refused: it is binary
# data or another encoding (UTF-16, Latin-1), and decoding it anyway would turn it into garbage documents.
MAX_NOT_TEXT_SHARE = 0.01
CHECK_AFTER_BYTES = 64 * 1024  # judge a long file early, a short one at its end
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")  # C0 controls and DEL; tab, newlines and form feeds are text
_REPLACEMENT = "\ufffd"
_REPLACEMENT_BYTES = _REPLACEMENT.encode("utf-8")
# Compressed corpus files by suffix, and the decompressor each is read with.
COMPRESSIONS = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd", ".xz": "xz", ".bz2": "bz2"}


# Corpus file formats by suffix (case-insensitive, before a compression's suffix).
FORMATS = {".txt": "txt", ".text": "txt", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".parquet": "parquet"}


def format_of(name: str) -> tuple[str | None, str | None]:
    """``'a.jsonl.zst'`` → ``('jsonl', 'zstd')``, ``'A.TXT'`` → ``('txt', None)``; unknown formats →
    ``(None, ...)``."""
    lower = uncompressed_name(name).lower()
    return next((kind for suffix, kind in FORMATS.items() if lower.endswith(suffix)), None), compression_of(name)


def uncompressed_name(name: str) -> str:
    """``'train.TSV.gz'`` -> ``'train.TSV'``: the name a compressed file's content would have; others as they are."""
    lower = name.lower()
    return next((name[:-len(suffix)] for suffix in COMPRESSIONS if lower.endswith(suffix)), name)


def compression_of(name: str) -> str | None:
    """``'a.jsonl.zst'`` -> ``'zstd'``; ``None`` for a file that is not compressed."""
    lower = name.lower()
    return next((kind for suffix, kind in COMPRESSIONS.items() if lower.endswith(suffix)), None)


def _decompression_errors() -> tuple[type[BaseException], ...]:
    """What the decompressors raise for data that is corrupt, cut short or not theirs: gzip, bz2 and xz end a
    truncated stream with EOFError; gzip says BadGzipFile (an OSError) or zlib.error, bz2 a bare OSError."""
    from zstandard import ZstdError

    return EOFError, zlib.error, lzma.LZMAError, ZstdError, OSError


def unreadable_compressed(name: str, error: BaseException) -> InputError | None:
    """The one-line error for a compressed file ``name`` its decompressor failed on, or ``None`` when
    ``error`` is something else (an OSError of the disk or the network keeps its own type)."""
    kind = compression_of(name)
    if kind is None:
        return None
    if isinstance(error, OSError) and not (isinstance(error, gzip.BadGzipFile)
                                           or (kind == "bz2" and type(error) is OSError and error.errno is None)):
        return None
    suffix = next(suffix for suffix in COMPRESSIONS if name.lower().endswith(suffix))
    if isinstance(error, EOFError):
        problem = f"is truncated: its {kind} data ends before the end of the stream (a download or copy cut short)"
    else:
        problem = f"is corrupt or not {kind} data ({type(error).__name__}: {error})"
    return InputError(f"{name} {problem}; download or compress it again, or leave it out (a file that is not "
                      f"compressed must not end in {suffix})")


@contextmanager
def decompressing(name: str) -> Iterator[None]:
    """Reading file ``name``: a decompressor's error (corrupt, cut short, not its format) becomes a one-line
    InputError naming the file; any other error stays as it is."""
    try:
        yield
    except _decompression_errors() as exc:
        problem = unreadable_compressed(name, exc)
        if problem is None:
            raise
        raise problem from exc


@dataclass
class TextCheck:
    """Decodes one file's bytes as UTF-8 and counts what is not text: invalid bytes (each becomes U+FFFD)
    and control characters. The one mechanism every reader of user text files goes through: a file
    whose share exceeds ``MAX_NOT_TEXT_SHARE`` is refused naming the file, a smaller share is logged
    and reported (the corpus stage's ``decoding`` stats)."""

    name: str
    bytes: int = 0
    replaced_bytes: int = 0
    control_chars: int = 0
    # the continuation bytes of valid multi-byte UTF-8 characters (counted at C speed: only whether there are any
    # matters), which tell a UTF-8 file from one in a legacy 8-bit encoding
    utf8_continuation_bytes: int = 0

    @property
    def not_text_share(self) -> float:
        return (self.replaced_bytes + self.control_chars) / max(self.bytes, 1)

    def decode(self, raw: bytes) -> str:
        self.bytes += len(raw)
        try:
            text = raw.decode("utf-8")
            self.utf8_continuation_bytes += len(raw) - len(text)
        except UnicodeDecodeError:
            text = raw.decode("utf-8", errors="replace")
            replacements = text.count(_REPLACEMENT) - raw.count(_REPLACEMENT_BYTES)
            self.replaced_bytes += len(raw) - (len(text.encode("utf-8")) - len(_REPLACEMENT_BYTES) * replacements)
            self.utf8_continuation_bytes += len(text.encode("utf-8")) - len(text) - 2 * replacements
        if _CONTROL.search(text):
            self.control_chars += len(_CONTROL.findall(text))
        if self.bytes >= CHECK_AFTER_BYTES:
            self.check()
        return text

    @property
    def legacy_encoding(self) -> bool:
        """Bytes beyond ASCII that are never valid UTF-8: a Windows-1252 or Latin-1 file (its ’ and é), whose
        few such bytes would otherwise be replaced (``ng’ombe`` read as ``ngombe``) under the refusal's share."""
        return self.replaced_bytes > 0 and self.utf8_continuation_bytes == 0

    def check(self, whole: bool = False) -> None:
        """Refuse a file that is not UTF-8 text: by its share of bytes that are not text (as it is read), or, once
        ``whole`` is read, for bytes beyond ASCII none of which is UTF-8 (a UTF-8 file may hold its first multi-byte
        character late)."""
        if self.not_text_share > MAX_NOT_TEXT_SHARE or (whole and self.legacy_encoding):
            utf16 = self.control_chars > self.replaced_bytes  # UTF-16's every other byte is a NUL
            encoding = "UTF-16" if utf16 else "CP1252"
            what = (f"{self.not_text_share:.1%} of {self.bytes} bytes read are invalid UTF-8 ({self.replaced_bytes}) "
                    f"or control characters ({self.control_chars})" if self.not_text_share > MAX_NOT_TEXT_SHARE else
                    f"none of its {self.replaced_bytes} bytes beyond ASCII is UTF-8, as in a Windows-1252 or Latin-1 "
                    "file")
            raise InputError(f"{self.name} is not UTF-8 text: {what}; convert it to UTF-8 (e.g. iconv -f {encoding} "
                             "-t UTF-8, or the encoding it was written in) or leave it out")

    def finish(self) -> None:
        """The whole file was read: refuse it, or warn about the few bytes that were replaced."""
        self.check(whole=True)
        if self.replaced_bytes or self.control_chars:
            log.warning("%s: %d invalid UTF-8 bytes replaced and %d control characters (%.3f%% of %d bytes)",
                        self.name, self.replaced_bytes, self.control_chars, 100 * self.not_text_share, self.bytes)

    def lines(self, handle: BinaryIO) -> Iterator[str]:
        """The decoded lines of a binary handle (newlines kept), checked as they are read."""
        with decompressing(self.name):
            for raw in handle:
                yield self.decode(raw)
        self.finish()


class CheckedText:
    """A text handle over a binary one that decodes through a ``TextCheck``: iteration, ``readline``, ``read``."""

    def __init__(self, handle: BinaryIO, check: TextCheck) -> None:
        self.handle, self.check = handle, check

    def __iter__(self) -> Iterator[str]:
        return self.check.lines(self.handle)

    def readline(self) -> str:
        with decompressing(self.check.name):
            raw = self.handle.readline()
        if not raw:
            self.check.finish()
        return self.check.decode(raw)

    def read(self) -> str:
        with decompressing(self.check.name):
            raw = self.handle.read()
        text = self.check.decode(raw)
        self.check.finish()
        return text


def decoding_stats(checks: Iterable[TextCheck]) -> dict[str, Any]:
    """What the corpus stage reports about its text files: bytes read, replaced, control characters, share."""
    checks = list(checks)
    total = sum(c.bytes for c in checks)
    replaced, control = sum(c.replaced_bytes for c in checks), sum(c.control_chars for c in checks)
    return {"files": len(checks), "bytes": total, "replaced_bytes": replaced, "control_chars": control,
            "not_text_share": round((replaced + control) / max(total, 1), 6)}


def open_bytes(file: str, compression: str | None) -> BinaryIO:
    """A (local or remote) file's bytes, decompressed by ``compression`` (``compression_of``'s name, or None)."""
    import fsspec

    if compression == "zstd":  # fsspec's zstd reader ends a stream cut short without a word
        return io.BufferedReader(ZstdFrames(fsspec.open(file, "rb").open()), buffer_size=1 << 20)  # type: ignore
    handle = fsspec.open(file, "rb", compression=compression).open()
    # a decompressor may have no readline: buffer every one so lines can be read
    return io.BufferedReader(handle) if compression else handle  # type: ignore[return-value]


class ZstdFrames(io.RawIOBase):
    """A zstd file's frames one after another, decompressed; a stream that ends inside a frame raises EOFError, as
    gzip, xz and bz2 do (zstandard's stream reader stops there silently: a download cut short read as a shorter
    corpus, its last document cut mid-line)."""

    def __init__(self, raw: BinaryIO) -> None:
        import zstandard

        super().__init__()
        self._raw, self._new_frame = raw, zstandard.ZstdDecompressor().decompressobj
        self._frame, self._in_frame = self._new_frame(), False
        self._out, self._at = b"", 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self._at >= len(self._out):
            chunk = self._raw.read(1 << 20)
            if not chunk:
                if self._in_frame:
                    raise EOFError("the zstd stream ends inside a frame")
                return 0
            self._out, self._at = self._decompress(chunk), 0
        count = min(len(buffer), len(self._out) - self._at)
        buffer[:count] = self._out[self._at:self._at + count]
        self._at += count
        return count

    def _decompress(self, data: bytes) -> bytes:
        """What ``data`` decompresses to, across the frames it ends and begins."""
        out = []
        while data:
            out.append(self._frame.decompress(data))
            self._in_frame = True
            if not self._frame.eof:
                break
            data, self._frame, self._in_frame = self._frame.unused_data, self._new_frame(), False
        return b"".join(out)

    def close(self) -> None:
        self._raw.close()
        super().close()


_LONE_CR = re.compile(r"\r(?!\n)")


def split_lone_cr(lines: Iterable[str]) -> Iterator[str]:
    """Text lines as read at ``\\n``, with a lone ``\\r`` (old Mac line ends) ending a line too: a file written
    that way is not one document (``\\r\\n`` stays one line end)."""
    for line in lines:
        if "\r" not in line or not _LONE_CR.search(line):
            yield line
            continue
        *ended, last = _LONE_CR.split(line)
        yield from (piece + "\n" for piece in ended)
        if last:
            yield last


def _open_binary(file: Path) -> BinaryIO:
    """The file's bytes, decompressed as its suffix says (any case: ``.gz``, ``.zst``, ``.xz``, ``.bz2``)."""
    return open_bytes(str(file), compression_of(file.name))


def read_texts(path: str | os.PathLike[str], limit: int | None = None) -> Iterator[str]:
    """Documents of a corpus file, in order: JSON Lines (``.jsonl``/``.ndjson``, ``{"text": ...}`` per line) or plain
    text (``.txt``/``.text``, one document per non-empty line), either optionally ``.gz``; ``limit``: at most that
    many documents. A byte-order mark at the start is no part of the first document."""
    file = Path(path)
    plain = format_of(file.name)[0] == "txt"
    check = TextCheck(str(file))
    count = 0
    with _open_binary(file) as handle:
        lines = split_lone_cr(check.lines(handle)) if plain else check.lines(handle)
        for number, line in enumerate(lines, start=1):
            if number == 1:
                line = line.removeprefix("\ufeff")
            if not line.strip():
                continue
            if limit is not None and count >= limit:
                return
            count += 1
            if plain:
                yield line.rstrip("\r\n")
                continue
            try:
                yield json.loads(line)[TEXT_FIELD]
            except (json.JSONDecodeError, KeyError, TypeError):
                check.check()  # a file that is not text says so rather than "not JSON"
                raise InputError(f"{file}:{number}: expected JSON Lines with a {TEXT_FIELD!r} field per line "
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
    if format_of(file.name)[0] == "jsonl":
        return [t for t in read_texts(file, limit=limit) if t.strip()]
    texts: list[str] = []
    with _open_binary(file) as handle:
        for number, line in enumerate(TextCheck(str(file)).lines(handle)):
            line = (line.removeprefix("\ufeff") if number == 0 else line).strip()
            if line:
                texts.append(line)
                if limit is not None and len(texts) >= limit:
                    break
    return texts
