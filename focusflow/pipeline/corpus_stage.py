"""The raw corpus as a stored stage: streamed from its source, cleaned and budgeted (``focusflow.corpus``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from focusflow.config import CleaningSpec, CorpusSpec, PipelineConfig
from focusflow.corpus.record import CorpusRecord
from focusflow.pipeline.registry import RunHints, Stage, StageRun, StageSettings, default_key_params, register

#: How a corpus is read, in the key of the corpora whose reading changed (2, 29 Nov 2026: a corpus's own variant
#: code names its files, where zh-Hant read zh-Hans and hi-Latn read hi before; local copies leave out what the
#: corpus's own loaders leave out: OSCAR's flagged records, mC4's validation shards). The demo corpus and a hub
#: corpus's base languages read as before and keep their keys.
READER_VERSION = 2
#: How local files are read (3, 29 Nov 2026: a folder's dot-named files, README and licence are left out, a linked
#: copy is read once, a text file's lone CR ends a line, a zstd file cut short is refused).
LOCAL_READER_VERSION = 3


class CorpusSettings(StageSettings):
    language: str
    corpus: CorpusSpec
    cleaning: CleaningSpec

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        return cls(language=cfg.language, corpus=cfg.corpus, cleaning=cfg.cleaning)


def _corpus_key(params: Mapping[str, Any]) -> dict[str, Any]:
    """The settings, the cleaner's version, and for local files what they hold (``sources.files_fingerprint``): the
    paths alone would find the corpus of a file since rewritten, or of another project's ``data/corpus.txt`` (they
    stay in the key: a run's configuration is rebuilt from its artifacts' parameters); a language-ID model by its
    content too."""
    from focusflow.corpus.cleaning import CLEANING_VERSION, require_langid_model
    from focusflow.corpus.sources import files_fingerprint, resolve_paths

    key = default_key_params(params) | {"cleaner": CLEANING_VERSION}  # every corpus's text comes from the cleaner
    corpus = params.get("corpus") or {}
    source = corpus.get("source")
    langid = (params.get("cleaning") or {}).get("langid_model")
    if langid:  # the model that chose the documents, by its content: a newer lid.bin at the same path is another
        require_langid_model(langid)
        key["langid_model"] = files_fingerprint([langid])  # beside its path, which a rebuilt configuration needs
    if source == "local":
        key["reader"] = LOCAL_READER_VERSION
        key["files"] = files_fingerprint(resolve_paths(list(corpus.get("paths") or [])))
    elif _variant_code(str(source), str(params.get("language", ""))):
        key["reader"] = READER_VERSION
    return key


def _variant_code(corpus: str, language: str) -> bool:
    """Whether ``language`` is a hub corpus's own variant code (a file its base language does not name)."""
    from focusflow.corpus.languages import CORPUS_LANGUAGES, LanguageError, corpus_language, normalize_language

    if corpus not in CORPUS_LANGUAGES:
        return False
    try:
        return corpus_language(corpus, language) != corpus_language(corpus, normalize_language(language))
    except LanguageError:
        return False


def _corpus(run: StageRun) -> Mapping[str, Any]:
    from focusflow.corpus import collect_corpus

    s: CorpusSettings = run.settings
    return collect_corpus(s.corpus, s.cleaning, s.language, run.out)


# the corpus reads from the network (retried on transient errors); a dead mirror can hang a download,
# so its timeout reports one (Prefect cannot interrupt a blocking call in a worker thread)
CORPUS = register(Stage("corpus", 1, (), _corpus, "stream, clean and budget the raw corpus",
                         work=("bytes", "bytes"), settings=CorpusSettings,
                         hints=RunHints(retries=2, retry_delays_s=(10, 60), timeout_s=6 * 3600), record=CorpusRecord,
                         key_params=_corpus_key))
