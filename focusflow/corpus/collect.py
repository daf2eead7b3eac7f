"""The corpus stage: read a source, clean it, stop at the budget, write ``documents.jsonl`` + ``stats.json``."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

from focusflow.config import CleaningSpec, CorpusSpec
from focusflow.corpus.cleaning import Cleaner
from focusflow.corpus.io import DOCUMENTS, STATS, TextCheck, decoding_stats, write_stats, write_texts
from focusflow.corpus.languages import normalize_language
from focusflow.corpus.sources import iter_source
from focusflow.errors import InputError

log = logging.getLogger(__name__)


# what to do about the most common reason documents were dropped: the setting that reason names
_ADVICE = {"too_short": "relax cleaning.min_chars", "too_long": "raise cleaning.max_chars or split the text into "
           "lines (one document per line)", "too_few_words": "relax cleaning.min_words",
           "mostly_non_letters": "raise cleaning.max_non_letter_fraction", "wrong_language": "check the language "
           "code against the text (or lower cleaning.langid_threshold)", "empty": "check the text field"}


def cleaning_advice(removed: dict[str, int]) -> str:
    """The fix for the reason that dropped the most documents (a huge single line is too long, not too short)."""
    reason = max(removed, key=removed.get)
    return _ADVICE.get(reason, "check the language, the text field and the cleaning settings")


def collect_corpus(spec: CorpusSpec, cleaning: CleaningSpec, language: str, out_dir: Path) -> dict:
    """Write the cleaned documents of ``spec``'s source for ``language`` to ``out_dir/documents.jsonl``.

    Stops once ``max_documents`` documents or ``max_bytes`` UTF-8 bytes of cleaned text are kept.
    Returns (and writes to ``stats.json``) what was read, kept and removed by each filter.
    """
    out = Path(out_dir)
    code = normalize_language(language)
    started = time.perf_counter()
    checks: list[TextCheck] = []
    # the code as given: a corpus's own variant (zh-Hant, hi-Latn, my_zaw) names its files, not the base language
    documents = iter_source(spec, language, checks)  # fails now on a bad language, path or unreachable dataset
    cleaner = Cleaner(cleaning, language=code)
    budget = {"kept_bytes": 0, "kept_chars": 0, "stopped_by": None}

    def kept() -> Iterator[str]:
        for raw in documents:
            text = cleaner.clean(raw)
            if text is None:
                continue
            size = len(text.encode("utf-8"))
            if spec.max_bytes is not None and budget["kept_bytes"] + size > spec.max_bytes and budget["kept_bytes"]:
                budget["stopped_by"] = "max_bytes"
                cleaner.kept -= 1
                return
            budget["kept_bytes"] += size
            budget["kept_chars"] += len(text)
            yield text
            if cleaner.kept % 50_000 == 0:
                log.info("corpus: %d documents, %.1f MB kept", cleaner.kept, budget["kept_bytes"] / 1e6)
            if spec.max_documents is not None and cleaner.kept >= spec.max_documents:
                budget["stopped_by"] = "max_documents"
                return

    count = write_texts(out / DOCUMENTS, kept())
    stats = {
        "source": spec.source,
        "language": code,
        "documents": count,
        "bytes": budget["kept_bytes"],
        "chars": budget["kept_chars"],
        "stopped_by": budget["stopped_by"],
        "cleaning": cleaner.stats(),
        **({"decoding": decoding_stats(checks)} if checks else {}),
        "seconds": round(time.perf_counter() - started, 3),
    }
    if count == 0:
        removed = cleaner.stats()["removed"]
        if not removed:  # nothing was read at all: cleaning is not the cause
            where = f" ({', '.join(spec.paths)})" if spec.paths else ""
            raise InputError(f"the {spec.source} corpus{where} has no documents: check the files and the text field")
        raise InputError(f"no document of {spec.source} survived cleaning ({removed}); {cleaning_advice(removed)}")
    write_stats(out / STATS, stats)
    log.info("corpus: wrote %d documents (%.1f MB) to %s", count, stats["bytes"] / 1e6, out / DOCUMENTS)
    return stats
