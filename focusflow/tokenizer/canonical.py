"""Canonical token forms: compare tokens across tokenizer families by bytes + word-start flag.

A token's canonical form is ``(data, word_start)`` where ``data`` is the exact byte string the
token stands for (without its word-boundary marker) and ``word_start`` says whether it begins a
word. This makes SentencePiece ``▁kitabu``, byte-level BPE ``Ġkitabu`` and WordPiece ``kitabu``
equal, and ``##bu`` / ``bu`` (continuations) equal. Byte-level tokens that are partial UTF-8
(``Ã`` = byte 0xC3) stay bytes and equal SentencePiece's ``<0xC3>``; nothing goes through
``decode()`` (which turns partial UTF-8 into U+FFFD and loses the word-start marker).
"""

from __future__ import annotations

import gc
import json
import re
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from itertools import repeat
from typing import Any, Literal, NamedTuple

import numpy as np

from focusflow.errors import InputError

Scheme = Literal["sentencepiece", "byte_level", "wordpiece", "plain"]
Kind = Literal["regular", "byte", "special"]

# Roles special tokens are matched by; cls/bos and sep/eos are the same role across families.
ROLE_OF_ATTRIBUTE = {"cls_token": "start", "bos_token": "start", "sep_token": "end", "eos_token": "end",
                     "pad_token": "pad", "unk_token": "unk", "mask_token": "mask"}


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (byte-level BPE vocabularies use it)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    codes = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    return {byte: chr(code) for byte, code in zip(printable, codes, strict=False)}


@lru_cache(maxsize=1)
def unicode_to_bytes() -> dict[str, int]:
    return {char: byte for byte, char in bytes_to_unicode().items()}


class CanonicalToken(NamedTuple):
    """One vocabulary entry in a family-independent form (a named tuple: vocabularies hold 10^5 of them)."""

    id: int
    token: str
    data: bytes
    word_start: bool
    kind: Kind = "regular"
    role: str | None = None

    @property
    def key(self) -> tuple[bytes, bool]:
        return (self.data, self.word_start)

    @property
    def text(self) -> str | None:
        """The token's text, or None when its bytes are not valid UTF-8 (partial characters)."""
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError:
            return None


_LETTER = re.compile(r"[^\W\d_]")


def is_symbolic(text: str | None) -> bool:
    """Made only of digits, punctuation, symbols or whitespace (Unicode categories N, P, S, Z)."""
    if text is None or _LETTER.search(text):
        return False
    return all(char.isspace() or unicodedata.category(char)[0] in "NPSZ" for char in text)


def fuzzy_key(token: CanonicalToken) -> str | None:
    """Case- and word-start-insensitive key, defined only for symbolic tokens. A whitespace token's key is the kinds
    of space it holds (its word-start marker a space): seven spaces find the source's space, ``\n\n\n`` its line
    end; an empty key for all of them gave each the vector of the source's first whitespace token (a tab)."""
    text = token.text
    if not is_symbolic(text):
        return None
    if not text.strip():
        return "".join(dict.fromkeys(" " * token.word_start + text))
    return "".join(text.split()).casefold()


def _types(node: Any) -> set[str]:
    """Every ``type`` value in a tokenizer.json sub-tree (pre-tokenizers/decoders may be Sequences)."""
    found: set[str] = set()
    if isinstance(node, dict):
        if isinstance(node.get("type"), str):
            found.add(node["type"])
        for value in node.values():
            found |= _types(value)
    elif isinstance(node, list):
        for value in node:
            found |= _types(value)
    return found


def _metaspace_char(spec: dict[str, Any]) -> str:
    for part in ("pre_tokenizer", "decoder", "normalizer"):
        text = json.dumps(spec.get(part))
        match = re.search(r'"replacement": "((?:\\.|[^"\\])+)"', text)
        if match:
            return json.loads(f'"{match.group(1)}"')
        if '"content": "\\u2581"' in text or '"content": "▁"' in text:
            return "▁"
    return "▁"


def scheme_spec(tokenizer: Any) -> dict[str, Any]:
    """The parts of tokenizer.json that decide the token spelling, without serializing the vocabulary."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise InputError(f"{type(tokenizer).__name__} is not a fast tokenizer; load it with AutoTokenizer (use_fast=True)")
    spec: dict[str, Any] = {}
    for part in ("pre_tokenizer", "decoder", "normalizer"):
        component = getattr(backend, part)
        spec[part] = json.loads(component.__getstate__()) if component is not None else None
    model = backend.model
    spec["model"] = {"type": type(model).__name__, "byte_fallback": getattr(model, "byte_fallback", False),
                     "continuing_subword_prefix": getattr(model, "continuing_subword_prefix", None)}
    spec["added_tokens"] = [{"id": i} for i in getattr(tokenizer, "added_tokens_decoder", {})]
    return spec


def backend_spec(tokenizer: Any) -> dict[str, Any]:
    """The tokenizer.json of a fast tokenizer as a dict."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise InputError(f"{type(tokenizer).__name__} is not a fast tokenizer; load it with AutoTokenizer (use_fast=True)")
    return json.loads(backend.to_str())


def detect_scheme(spec: dict[str, Any]) -> tuple[Scheme, dict[str, Any]]:
    """Which family's token spelling a tokenizer uses, from its tokenizer.json (not from vocabulary heuristics)."""
    model = spec.get("model") or {}
    types = _types(spec.get("pre_tokenizer")) | _types(spec.get("decoder")) | _types(spec.get("normalizer"))
    byte_fallback = bool(model.get("byte_fallback")) or "ByteFallback" in types
    if "ByteLevel" in types:
        return "byte_level", {}
    if model.get("type") == "WordPiece":
        return "wordpiece", {"prefix": model.get("continuing_subword_prefix") or "##"}
    normalizer = json.dumps(spec.get("normalizer"), ensure_ascii=False)
    if "Metaspace" in types or model.get("type") == "Unigram" or "▁" in normalizer:
        return "sentencepiece", {"space": _metaspace_char(spec), "byte_fallback": byte_fallback}
    return "plain", {"byte_fallback": byte_fallback}


def special_roles(tokenizer: Any) -> dict[int, str]:
    """Special-token id -> role (start/end/pad/unk/mask, '|'-joined when several); others ``special:<content>``."""
    roles: dict[int, str] = {}
    for attribute, role in ROLE_OF_ATTRIBUTE.items():
        content = getattr(tokenizer, attribute, None)
        if content is None:
            continue
        token_id = tokenizer.convert_tokens_to_ids(str(content))
        if token_id is None:
            continue
        if token_id not in roles:
            roles[token_id] = role
        elif role not in roles[token_id].split("|"):
            roles[token_id] += "|" + role  # e.g. GPT-2's <|endoftext|> is both start and end
    for token_id in tokenizer.all_special_ids:
        roles.setdefault(token_id, "special:" + tokenizer.convert_ids_to_tokens(token_id))
    return roles


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building 10^5 small tuples (they hold no cycles, and
    the collector's generation scans triggered by so many allocations otherwise cost more than the work)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def canonical_vocab(tokenizer: Any) -> list[CanonicalToken]:
    """Canonical forms of every id ``0..len(tokenizer)-1`` (string transforms of the whole vocabulary, no decode())."""
    with gc_paused():
        return _canonical_vocab(tokenizer)


def _canonical_vocab(tokenizer: Any) -> list[CanonicalToken]:
    spec = scheme_spec(tokenizer)
    scheme, options = detect_scheme(spec)
    roles = special_roles(tokenizer)
    added = {entry["id"] for entry in spec.get("added_tokens") or []}
    n = len(tokenizer)
    # id -> token straight from the backend (None for a hole); 2-3x faster than inverting get_vocab()
    tokens: list[str | None] = list(map(tokenizer.backend_tokenizer.id_to_token, range(n)))
    forms = _canonical_regular(tokens, scheme, options)
    if None in tokens:
        for token_id in [i for i, token in enumerate(tokens) if token is None]:  # holes in the id space: never match
            forms[token_id] = CanonicalToken(token_id, "", b"\xff<hole>", False, "special", f"hole:{token_id}")
    for token_id in added:  # user-added tokens match on their literal text; byte pieces stay bytes (byte fallback
        token = tokens[token_id] if 0 <= token_id < n else None  # emits their ids even when they are also added)
        if token is not None and token_id not in roles and forms[token_id].kind != "byte":
            start = token.startswith(" ")
            forms[token_id] = CanonicalToken(token_id, token, (token[1:] if start else token).encode("utf-8"), start)
    for token_id, role in roles.items():
        token = tokens[token_id] if 0 <= token_id < n else None
        if token is not None:
            forms[token_id] = CanonicalToken(token_id, token, token.encode("utf-8"), False, "special", role)
    return forms


def field_matches(joined: str, separator: str, pattern: str) -> Iterator[tuple[int, re.Match[str]]]:
    """(field index, match) for every field of ``joined`` (split by ``separator``) that ``pattern`` matches whole.

    One regex pass over a whole vocabulary joined into one string instead of a Python loop over its tokens; the
    regex starts with the separator, so the engine jumps from field to field. ``pattern`` must not match
    ``separator``.
    """
    escaped = re.escape(separator)
    regex = re.compile(f"{escaped}(?:{pattern})(?={escaped})", re.DOTALL)
    wrapped = separator + joined + separator
    index, position = 0, 0
    for match in regex.finditer(wrapped):
        index += wrapped.count(separator, position, match.start())
        position = match.start()
        yield index, match


# Field separators for whole-vocabulary string operations: one byte in UTF-8, absent from the vocabulary.
_SEPARATORS = "\n" + "".join(chr(code) for code in range(32) if code != 10) + "\x7f"


def _unused_separator(text: str) -> str:
    """A one-byte character that does not occur in ``text`` (the vocabulary's tokens concatenated)."""
    for candidate in _SEPARATORS:
        if candidate not in text:
            return candidate
    raise InputError("the vocabulary's tokens contain every ASCII control character; canonical forms need one of "
                     "them as a separator")


def _fields(encoded: bytes, separator: str) -> tuple[np.ndarray, np.ndarray]:
    """Begin and end offsets of the fields of ``encoded`` split by a one-byte ``separator``."""
    positions = np.flatnonzero(np.frombuffer(encoded, np.uint8) == ord(separator))
    begins = np.concatenate([[0], positions + 1])
    ends = np.concatenate([positions, [len(encoded)]])
    return begins, ends


def _slices(blob: bytes, begins: np.ndarray, ends: np.ndarray) -> list[bytes]:
    return list(map(blob.__getitem__, map(slice, begins.tolist(), ends.tolist())))


def _starts_with(encoded: bytes, begins: np.ndarray, ends: np.ndarray, prefix: bytes) -> np.ndarray:
    """Which fields begin with ``prefix`` (compared byte by byte on the whole buffer)."""
    buffer = np.frombuffer(encoded + b"\0" * len(prefix), np.uint8)
    found = ends - begins >= len(prefix)
    for offset, byte in enumerate(prefix):
        found &= buffer[begins + offset] == byte
    return found


@lru_cache(maxsize=1)
def _byte_level_table() -> dict[int, int]:
    """str.translate table: GPT-2 byte-to-unicode characters back to the bytes they stand for (as code points)."""
    return {ord(char): byte for char, byte in unicode_to_bytes().items()}


def _byte_level_form(token_id: int, token: str) -> CanonicalToken:
    """One byte-level token (the rule the vectorized path follows; used for tokens outside GPT-2's alphabet)."""
    to_byte = unicode_to_bytes()
    try:
        data = bytes([to_byte[char] for char in token])
    except KeyError:  # not spelled in the byte alphabet (e.g. an added token): its literal UTF-8
        data = token.encode("utf-8")
    start = data.startswith(b" ")
    return CanonicalToken(token_id, token, data[1:] if start else data, start)


def _canonical_regular(tokens: list[str | None], scheme: Scheme, options: dict[str, Any]) -> list[CanonicalToken]:
    """Every token read as a regular token of ``scheme`` (specials and holes are fixed up by the caller).

    Whole-vocabulary string operations (join, replace/translate, encode, slice) instead of a Python loop per
    token: 250k XLM-R pieces take ~0.15 s instead of ~0.7 s.
    """
    n = len(tokens)
    present = ["" if token is None else token for token in tokens] if None in tokens else tokens
    flat = "".join(present)
    separator = _unused_separator(flat)
    joined = separator.join(present)
    fixed: dict[int, CanonicalToken] = {}
    if scheme == "byte_level":
        to_byte = unicode_to_bytes()
        outside = set(flat) - to_byte.keys()
        if outside:  # tokens with characters outside the byte alphabet keep the per-token rule
            field = f"[^{re.escape(separator)}]*"
            alphabet = "".join(re.escape(char) for char in outside)
            for index, _ in field_matches(joined, separator, f"{field}[{alphabet}]{field}"):
                fixed[index] = _byte_level_form(index, present[index])
            flat = flat.translate({ord(char): 0 for char in outside})
        raw = flat.translate(_byte_level_table()).encode("latin-1")  # one character is one byte here
        ends = np.cumsum(np.fromiter(map(len, present), np.int64, n))
        begins = np.concatenate([[0], ends[:-1]])
        starts = _starts_with(raw, begins, ends, b" ")
        datas = _slices(raw, begins + starts, ends)
    elif scheme == "wordpiece":
        prefix = options["prefix"].encode("utf-8")
        encoded = joined.encode("utf-8")
        begins, ends = _fields(encoded, separator)
        continuation = _starts_with(encoded, begins, ends, prefix) & (ends - begins > len(prefix))
        datas = _slices(encoded, begins + continuation * len(prefix), ends)
        starts = ~continuation
    else:
        space = options.get("space") if scheme == "sentencepiece" else None
        text = joined.replace(space, " ") if space else joined
        if space:
            encoded = text.encode("utf-8")
            begins, ends = _fields(encoded, separator)
            starts = _starts_with(encoded, begins, ends, b" ")
            text = (separator + text).replace(separator + " ", separator)[1:]  # one leading space off each field
        else:
            starts = np.zeros(n, bool)
        datas = text.encode("utf-8").split(separator.encode("utf-8"))
        if options.get("byte_fallback"):
            for index, match in field_matches(joined, separator, r"<0x([0-9A-Fa-f]{2})>"):
                fixed[index] = CanonicalToken(index, present[index], bytes([int(match.group(1), 16)]), False, "byte")
    forms = list(map(tuple.__new__, repeat(CanonicalToken),
                     zip(range(n), tokens, datas, starts.tolist(), repeat("regular"), repeat(None))))
    for index, form in fixed.items():
        forms[index] = form
    return forms


def token_text(form: CanonicalToken) -> str:
    """Readable text of a canonical token (partial UTF-8 shown as <0xNN> escapes), for reports and FVT."""
    text = form.text
    if text is None:
        text = "".join(f"<0x{b:02X}>" for b in form.data)
    return (" " if form.word_start else "") + text
