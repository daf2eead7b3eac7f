"""Document cleaning: Unicode normalization, control characters, whitespace, length and noise filters.

Each filter counts what it removed, so a user can see why a corpus shrank. Language ID is
optional (a fastText model such as lid.176 or GlotLID, given by path).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field

from focusflow.config import CleaningSpec
from focusflow.languages import word_count

#: How the cleaner treats text, in every corpus's key (2, 29 Nov 2026: the controls that end a line in Unicode end
#: one, where they were deleted and glued the words beside them; NEL is the "…" it almost always was; Ethiopic's
#: word space divides words).
CLEANING_VERSION = 2
# Characters that end a line besides CR and LF (str.splitlines' set but NEL): Word's manual line break (VT),
# pdftotext's page break (FF), the file/group/record separators and Unicode's line and paragraph separators.
_LINE_END = re.compile("\r\n?|[\x0b\x0c\x1c-\x1e\u2028\u2029]")
# NEL (U+0085) in UTF-8 text is nearly always a cp1252 "…" (byte 0x85) decoded as Latin-1: "sana\x85 lakini"
_MISREAD_ELLIPSIS = "\x85"
# The other C0/C1 controls except tab, DEL, BOM and the Unicode replacement character. Format characters such as
# ZWJ/ZWNJ (needed by Indic and Arabic scripts) are kept.
_CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f\ufeff\ufffd]")
_HORIZONTAL_SPACE = re.compile(r"[^\S\n]+")
_LETTER = re.compile(r"[^\W\d_]")
_MARK_CATEGORIES = ("Mn", "Mc", "Me")


@dataclass
class Cleaner:
    """Stateful cleaner: ``clean(text)`` returns the cleaned text or ``None`` (and counts the reason)."""

    spec: CleaningSpec
    language: str | None = None
    removed: Counter = field(default_factory=Counter)
    seen: int = 0
    kept: int = 0
    modified: int = 0
    _langid: object | None = None

    def __post_init__(self) -> None:
        if self.spec.langid_model:
            self._langid = _load_langid(self.spec.langid_model)

    def clean(self, text: str) -> str | None:
        self.seen += 1
        cleaned = normalize_text(text, self.spec.normalize)
        if cleaned != text:
            self.modified += 1
        reason = self._rejection(cleaned)
        if reason:
            self.removed[reason] += 1
            return None
        self.kept += 1
        return cleaned

    def _rejection(self, text: str) -> str | None:
        if not text:
            return "empty"
        if len(text) < self.spec.min_chars:
            return "too_short"
        if len(text) > self.spec.max_chars:
            return "too_long"
        if self.spec.min_words and word_count(text) < self.spec.min_words:  # any script's words (languages)
            return "too_few_words"
        if non_letter_fraction(text) > self.spec.max_non_letter_fraction:
            return "mostly_non_letters"
        if self._langid is not None and not self._language_ok(text):
            return "wrong_language"
        return None

    def _language_ok(self, text: str) -> bool:
        from focusflow.corpus.languages import normalize_language

        labels, probs = self._langid.predict(" ".join(text.split()), k=1)
        label = labels[0].removeprefix("__label__").split("_")[0] if labels else ""
        try:
            same = normalize_language(label) == normalize_language(self.language or "")
        except ValueError:
            same = False
        return same and float(probs[0]) >= self.spec.langid_threshold

    def stats(self) -> dict:
        return {"documents_in": self.seen, "documents_kept": self.kept, "documents_modified": self.modified,
                "removed": dict(sorted(self.removed.items()))}


def normalize_text(text: str, form: str = "NFC") -> str:
    """Unicode form, control characters out, spaces collapsed per line, blank lines dropped, trimmed."""
    text = text.replace(_MISREAD_ELLIPSIS, "…")
    if form != "none":
        text = unicodedata.normalize(form, text)
    text = _CONTROL.sub("", _LINE_END.sub("\n", text))
    lines = (_HORIZONTAL_SPACE.sub(" ", line).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def non_letter_fraction(text: str) -> float:
    """Share of non-space characters that are neither letters nor combining marks (digits, punctuation, symbols)."""
    visible = len(text) - sum(text.count(c) for c in " \n\t")
    if visible <= 0:
        return 1.0
    letters = len(_LETTER.findall(text))
    if letters < visible:  # combining marks (Indic vowel signs, ...) count as letters
        letters += sum(1 for c in text if unicodedata.category(c) in _MARK_CATEGORIES)
    return max(0.0, 1.0 - letters / visible)


def require_langid_model(path: str) -> None:
    """The language-ID model must be a local file (fastText reads one): said at key time and at load time alike."""
    from pathlib import Path

    if not Path(path).is_file():
        raise FileNotFoundError(f"the language-ID model of cleaning.langid_model {path} not found; download "
                                "lid.176.bin or GlotLID's model.bin and set cleaning.langid_model, or unset it")


def _load_langid(path: str):
    require_langid_model(path)
    import fasttext

    return fasttext.load_model(path)
