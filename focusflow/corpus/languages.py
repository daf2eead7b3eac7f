"""Language codes: normalize ISO 639-1/3 input and map it to each web corpus's own code.

Users type ``sw``, ``swa`` or ``nya`` (``focusflow.languages`` checks and normalizes them, the configuration
too); CC100 and OSCAR name files by ISO 639-1 where one
exists, mC4 too but with a few legacy codes (``iw`` for Hebrew). The lists below are the
languages each corpus actually ships, so an unknown code fails before any download starts.
"""

from __future__ import annotations

import langcodes

from focusflow.languages import LanguageError, normalize_language

# https://data.statmt.org/cc-100/ (the files the XLM-R authors released), as statmt/cc100 lists them.
CC100_LANGUAGES = frozenset("""
af am ar as az be bg bn bn_rom br bs ca cs cy da de el en eo es et eu fa ff fi fr fy ga gd gl gn gu ha he hi
hi_rom hr ht hu hy id ig is it ja jv ka kk km kn ko ku ky la lg li ln lo lt lv mg mk ml mn mr ms my my_zaw ne nl
no ns om or pa pl ps pt qu rm ro ru sa sc sd si sk sl so sq sr ss su sv sw ta ta_rom te te_rom th tl tn tr ug uk
ur ur_rom uz vi wo xh yi yo zh-Hans zh-Hant zu
""".split())

# oscar-corpus/OSCAR-2301: one ``<code>_meta`` folder per language.
OSCAR_LANGUAGES = frozenset("""
af als am an ar arz as ast av az azb ba bar be bg bh bn bo bpy br bs bxr ca cbk ce ceb ckb cs cv cy da de diq dsb
dv el eml en eo es et eu fa fi fr frr fy ga gd gl gn gom gu gv he hi hr hsb ht hu hy ia id ie ilo io is it ja jbo jv
ka kk km kn ko krc ku kv kw ky la lb lez li lmo lo lrc lt lv mai mg mhr min mk ml mn mr mrj ms mt mwl my myv mzn
nah nap nds ne new nl nn no oc or os pa pam pl pms pnb ps pt qu rm ro ru rue sa sah scn sd sh si sk sl so sq sr su
sv sw ta te tg th tk tl tr tt tyv ug uk ur uz vec vi vls vo wa war wuu xal xmf yi yo yue zh
""".split())

# allenai/c4 ``multilingual/`` (mC4 3.1.0): ``c4-<code>.tfrecord-*.json.gz``.
MC4_LANGUAGES = frozenset("""
af am ar az be bg bg-Latn bn ca ceb co cs cy da de el el-Latn en eo es et eu fa fi fil fr fy ga gd gl gu ha haw hi
hi-Latn hmn ht hu hy id ig is it iw ja ja-Latn jv ka kk km kn ko ku ky la lb lo lt lv mg mi mk ml mn mr ms mt my ne
nl no ny pa pl ps pt ro ru ru-Latn sd si sk sl sm sn so sq sr st su sv sw ta te tg th tr uk und ur uz vi xh yi yo zh
zh-Latn zu
""".split())

CORPUS_LANGUAGES = {"cc100": CC100_LANGUAGES, "oscar": OSCAR_LANGUAGES, "mc4": MC4_LANGUAGES}
# Corpus-specific spellings of a standard code (langcodes writes Tagalog as ``fil``; CC100 names Northern Sotho ``ns``).
_CORPUS_ALIASES = {"mc4": {"he": "iw"}, "cc100": {"zh": "zh-Hans", "fil": "tl", "nso": "ns"}, "oscar": {"fil": "tl"}}


def _spelling(code: str) -> str:
    """A code as the configuration keeps it (lower case, ``-``): ``zh-Hant`` and ``my_zaw`` as ``zh-hant``, ``my-zaw``."""
    return code.strip().lower().replace("_", "-")
def iso639_3(code: str) -> str:
    """Three-letter code (``'ny'`` → ``'nya'``), e.g. for MasakhaNER folders."""
    return langcodes.Language.get(normalize_language(code)).to_alpha3()


def corpus_language(corpus: str, code: str) -> str:
    """The code ``corpus`` names ``code``'s files with; a clear error if it has no such language."""
    available = CORPUS_LANGUAGES[corpus]
    # the corpus's own codes pass through however they are spelled ('zh-Hant', 'my_zaw', 'hi-Latn', OSCAR's 'sh'):
    # normalized first, a script or variant would fall away and another file be read (Simplified for Traditional)
    verbatim = {_spelling(name): name for name in available}
    if _spelling(code) in verbatim:
        return verbatim[_spelling(code)]
    standard = normalize_language(code)
    mapped = _CORPUS_ALIASES.get(corpus, {}).get(standard, standard)
    if mapped in available:
        return mapped
    others = [name for name, langs in CORPUS_LANGUAGES.items()
              if _CORPUS_ALIASES.get(name, {}).get(standard, standard) in langs]
    hint = (f"; it is in {', '.join(others)}" if others
            else "; no hub corpus here has it: use corpus.source=local with your own files")
    raise LanguageError(f"{corpus} has no language {standard!r} (asked for {code!r}){hint}")


__all__ = ["CORPUS_LANGUAGES", "LanguageError", "corpus_language", "iso639_3", "normalize_language"]
