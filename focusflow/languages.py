"""Language codes: the one check of what a user may name as a language, for the configuration and the corpus.

``focusflow config --language zz`` and ``focusflow corpus --language zz`` must agree, so both call
:func:`normalize_language` (the configuration at validation time, the corpus stage when it reads text).
"""

from __future__ import annotations

import re
import unicodedata

import langcodes

from focusflow.errors import FocusflowError

# Individual languages filed under their macrolanguage's code by the corpora.
_MACROLANGUAGE = {"swh": "sw", "swc": "sw", "arb": "ar", "cmn": "zh", "pes": "fa", "zsm": "ms", "nob": "no", "nb": "no",
                  "ekk": "et", "lvs": "lv", "khk": "mn", "plt": "mg", "azj": "az", "uzn": "uz", "npi": "ne"}


class LanguageError(FocusflowError, ValueError):
    """The language code is unknown, or the chosen corpus does not have that language."""


def normalize_language(code: str) -> str:
    """``'SWA'``, ``'sw'``, ``'sw_KE'`` → ``'sw'``: the shortest standard tag; raises on unknown codes."""
    raw = code.strip().replace("_", "-")
    try:
        language = langcodes.Language.get(raw)
    except (langcodes.tag_parser.LanguageTagError, ValueError) as exc:
        raise LanguageError(f"{code!r} is not a language code; use an ISO 639-1/3 code such as 'sw' or 'hau'") from exc
    if not language.language or not language.is_valid():
        raise LanguageError(f"{code!r} is not a known ISO 639 language code; use e.g. 'sw', 'ha', 'ny' or 'nya'")
    base = langcodes.standardize_tag(language.language)
    return _MACROLANGUAGE.get(base, base)


# --------------------------------------------------------------------------- words of any script

# Scripts written without spaces between words: ideographic ones, where one character is a unit of meaning (Han, the
# kana), and alphabetic ones whose words run together (Thai, Lao, Tibetan, Myanmar, Khmer, Tai Tham, New Tai Lue,
# Javanese, Balinese); their combining marks lie in their own blocks.
_IDEOGRAPHIC_RANGES = ("\u3005-\u3007\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
                       "\U00020000-\U0002fa1f")
_RUN_TOGETHER_RANGES = ("\u0e00-\u0eff\u0f00-\u0fff\u1000-\u109f\u1780-\u17ff\u1980-\u19ff\u1a20-\u1aaf\u1b00-\u1b7f"
                        "\ua980-\ua9ff\uaa60-\uaa7f")
#: Text of a script written without spaces between words (a run of it)
UNSPACED = re.compile(f"[{_IDEOGRAPHIC_RANGES}{_RUN_TOGETHER_RANGES}]+")
_IDEOGRAPHIC = re.compile(f"[{_IDEOGRAPHIC_RANGES}]")
# Khmer, Burmese and Lao text may mark its words with zero-width spaces; Ethiopic text (Amharic, Tigrinya, Ge'ez)
# may divide its words with its own word space ፡ instead of a space
_TOKEN = re.compile(r"[^\s\u200b\u1361]+")
_ZERO_WIDTH_SPACE = "\u200b"
_ETHIOPIC_WORDSPACE = "\u1361"
#: A run of text written without spaces counts one word per character of an ideographic script (the unit Chinese
#: and Japanese are measured in) and one per this many characters (with their marks) of the others (Thai, Khmer …
#: words are a few letters long): a language-independent stand-in for a dictionary segmenter, so that thresholds
#: in words (a document's, a held-out sentence's, a prompt's) and "per word" rates mean something for them.
LETTERS_PER_WORD = 4
#: Where zero-width spaces mark a text's words, a token between them this long or shorter is a word; a longer one is a
#: run the marks did not cut (a Chinese sentence with one stray zero-width space is not one word).
MARKED_WORD_LETTERS = 16


def word_spans(text: str, letters_per_word: int = LETTERS_PER_WORD) -> list[tuple[int, int]]:
    """The (start, end) character spans of the words of ``text``: its tokens between whitespace (and zero-width
    spaces, Ethiopic word spaces), where a token holding text of a script written without spaces is cut into units
    (``letters_per_word`` letters with their marks; an ideographic character alone), unless the text marks its words
    with zero-width spaces; for text written with spaces exactly its whitespace-separated tokens."""
    spans: list[tuple[int, int]] = []
    marked = _ZERO_WIDTH_SPACE in text  # its words may be marked: a token of word length is a word
    for token in _TOKEN.finditer(text):
        if (marked and token.end() - token.start() <= MARKED_WORD_LETTERS) or not UNSPACED.search(token.group()):
            spans.append(token.span())
            continue
        position = token.start()
        for run in UNSPACED.finditer(token.group()):
            start, end = token.start() + run.start(), token.start() + run.end()
            if start > position:  # Latin, digits or punctuation before the run: one word
                spans.append((position, start))
            spans.extend(_units(text, start, end, letters_per_word))
            position = end
        if position < token.end():
            spans.append((position, token.end()))
    return spans


def _units(text: str, start: int, end: int, letters_per_word: int) -> list[tuple[int, int]]:
    """The units of one run of unspaced script: a letter with the marks after it is a cluster; an ideographic
    cluster is a unit, other clusters are grouped ``letters_per_word`` at a time."""
    clusters: list[tuple[int, int, bool]] = []
    for index in range(start, end):
        if clusters and unicodedata.category(text[index]).startswith("M"):
            first, _, ideographic = clusters[-1]
            clusters[-1] = (first, index + 1, ideographic)
        else:
            clusters.append((index, index + 1, bool(_IDEOGRAPHIC.match(text[index]))))
    units: list[tuple[int, int]] = []
    group: list[tuple[int, int, bool]] = []
    for cluster in clusters:
        if cluster[2] or (group and len(group) == letters_per_word):
            if group:
                units.append((group[0][0], group[-1][1]))
            group = []
        if cluster[2]:
            units.append(cluster[:2])
        else:
            group.append(cluster)
    if group:
        units.append((group[0][0], group[-1][1]))
    return units


def words(text: str, letters_per_word: int = LETTERS_PER_WORD) -> list[str]:
    """The words of ``text`` (:func:`word_spans`): ``text.split()`` for text written with spaces."""
    return [text[start:end] for start, end in word_spans(text, letters_per_word)]


def whitespace_words(text: str) -> bool:
    """Whether ``text``'s words are exactly its whitespace-separated tokens (:func:`word_spans` finds no others):
    the fast path of everything that counts words."""
    return text.isascii() or not (UNSPACED.search(text) or _ZERO_WIDTH_SPACE in text or _ETHIOPIC_WORDSPACE in text)


def word_count(text: str) -> int:
    """How many words ``text`` holds (:func:`word_spans`), whatever its script."""
    return len(text.split()) if whitespace_words(text) else len(word_spans(text))
