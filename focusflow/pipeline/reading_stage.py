"""How much of the evaluation tasks' text a model whose vocabulary comes from the source's (a pruned or extended one)
cuts as the source does, as a stored stage: tokenizers only, so it never runs with (or keys) the fine-tunings."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from pydantic import Field

from focusflow.config import PipelineConfig
from focusflow.evaluation.records import ReadingRecord
from focusflow.pipeline.registry import Stage, StageRun, StageSettings, register
from focusflow.storage.atomic import atomic_write

READING_STAGE, READING_FILE = "reading", "reading.json"


class ReadingSettings(StageSettings):
    """The tasks whose text is read (their data counted by content, as the downstream stage counts it)."""

    tasks: list[str]
    data: str | None = None
    versions: dict[str, int] | None = None  # what the tasks' data means, where that changed (sources.TASK_VERSIONS)
    split_seed: int = 0
    data_root: str | None = Field(None, alias="_data_root")

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        from focusflow.pipeline.evaluation_stages import data_fingerprint, data_versions

        evaluation = cfg.evaluation
        return cls(tasks=sorted(evaluation.tasks), data=data_fingerprint(evaluation.tasks, evaluation.data_root),
                   split_seed=evaluation.split_seed, data_root=evaluation.data_root, **data_versions(evaluation.tasks))


def _reading(run: StageRun) -> Mapping[str, Any]:
    from transformers import AutoTokenizer

    from focusflow.evaluation.downstream.texts import evaluation_texts
    from focusflow.tokenizer.metrics import segmentation_agreement

    s: ReadingSettings = run.settings
    source = AutoTokenizer.from_pretrained(str(run.inputs["source"]))
    model = AutoTokenizer.from_pretrained(str(run.inputs["model"]))
    root = Path(s.data_root) if s.data_root else None
    tasks = {task: segmentation_agreement(source, model, evaluation_texts([task], root, s.split_seed,
                                                                          ("train", "dev", "test")))
             for task in s.tasks}
    atomic_write(run.out / READING_FILE, json.dumps(tasks, indent=2, sort_keys=True))
    return {"tasks": tasks}


READING = register(Stage(READING_STAGE, 1, ("source", "model"), _reading,
                         "how much of the evaluation tasks' text a pruned or extended vocabulary cuts as the source "
                         "does (tokenizers only)", settings=ReadingSettings, record=ReadingRecord))
