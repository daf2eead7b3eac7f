"""The raw corpus as a stored stage: streamed from its source, cleaned and budgeted (``focusflow.corpus``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from focusflow.config import CleaningSpec, CorpusSpec, PipelineConfig
from focusflow.corpus.record import CorpusRecord
from focusflow.pipeline.registry import RunHints, Stage, StageRun, StageSettings, register


class CorpusSettings(StageSettings):
    language: str
    corpus: CorpusSpec
    cleaning: CleaningSpec

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        return cls(language=cfg.language, corpus=cfg.corpus, cleaning=cfg.cleaning)


def _corpus(run: StageRun) -> Mapping[str, Any]:
    from focusflow.corpus import collect_corpus

    s: CorpusSettings = run.settings
    return collect_corpus(s.corpus, s.cleaning, s.language, run.out)


# the corpus reads from the network (retried on transient errors); a dead mirror can hang a download,
# so its timeout reports one (Prefect cannot interrupt a blocking call in a worker thread)
CORPUS = register(Stage("corpus", 1, (), _corpus, "stream, clean and budget the raw corpus",
                         work=("bytes", "bytes"), settings=CorpusSettings,
                         hints=RunHints(retries=2, retry_delays_s=(10, 60), timeout_s=6 * 3600), record=CorpusRecord))
