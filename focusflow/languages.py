"""Language codes: the one check of what a user may name as a language, for the configuration and the corpus.

``focusflow config --language zz`` and ``focusflow corpus --language zz`` must agree, so both call
:func:`normalize_language` (the configuration at validation time, the corpus stage when it reads text).
"""

from __future__ import annotations

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
