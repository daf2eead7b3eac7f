"""The source model folder as a stored stage: resolved, converted where it needs to be, and given an MLM head
trained on the train split when it has none (``focusflow.training.prepare_source``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from pydantic import Field

from focusflow.config import PipelineConfig
from focusflow.corpus.split import SplitOutput
from focusflow.pipeline.registry import RunHints, Stage, StageRun, StageSettings, register
from focusflow.training.records import SourceRecord


class SourceSettings(StageSettings):
    source_model: str
    fingerprint: str | None = None  # a local folder counts by content
    options: dict[str, Any] = Field(default_factory=dict)  # prepare_source's options (head_spec)
    location: str | None = Field(None, alias="_location")
    cache_dir: str | None = Field(None, alias="_cache_dir")

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        return cls.for_model(cfg.source_model, **({"head_spec": cfg.source_head} if cfg.source_head else {}))

    @classmethod
    def for_model(cls, spec: str, **options: Any) -> Self:
        """A model identified by content where it is a local folder: moving it keeps the key, editing it changes
        the key; its path travels as the runtime-only ``_location``."""
        from focusflow.storage.fingerprint import folder_fingerprint

        folder = Path(spec).expanduser()
        if folder.is_dir():
            return cls(source_model="local", fingerprint=folder_fingerprint(folder), location=str(folder.resolve()),
                       options=options)
        return cls(source_model=spec, options=options)


def _source(run: StageRun) -> Mapping[str, Any]:
    from focusflow.training import prepare_source

    s: SourceSettings = run.settings
    head_train = run.input("split", SplitOutput).train if "split" in run.inputs else None
    return prepare_source(s.location or s.source_model, run.out, head_train=head_train, cache_dir=s.cache_dir,
                          **s.options)


# the source reads from the network (retried on transient errors); a dead mirror can hang a download,
# so its timeout reports one (Prefect cannot interrupt a blocking call in a worker thread)
SOURCE = register(Stage("source", 1, (), _source,
                        "source model folder; an MLM head is trained on the train split when it has none",
                        optional=("split",), uses_model=True, settings=SourceSettings,
                        hints=RunHints(retries=2, retry_delays_s=(10, 60), timeout_s=3 * 3600), record=SourceRecord))
