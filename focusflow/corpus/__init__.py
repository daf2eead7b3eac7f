"""Target-language text: sources, cleaning, deduplication, held-out splits (no Prefect here)."""

from focusflow.corpus.collect import collect_corpus
from focusflow.corpus.dedup import deduplicate
from focusflow.corpus.languages import LanguageError, corpus_language, iso639_3, normalize_language
from focusflow.corpus.sources import CorpusSourceError, iter_source
from focusflow.corpus.split import split_corpus

__all__ = ["collect_corpus", "deduplicate", "split_corpus", "iter_source", "normalize_language", "corpus_language",
           "iso639_3", "LanguageError", "CorpusSourceError"]
