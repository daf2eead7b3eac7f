"""Dropping corpus lines that overlap evaluation dev/test text, as a stored stage keyed by the evaluation data's
content (``focusflow.corpus.decontaminate``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from pydantic import Field

from focusflow.config import PipelineConfig
from focusflow.corpus.io import DOCUMENTS
from focusflow.pipeline.registry import Stage, StageRun, StageSettings, register


class DecontaminationSettings(StageSettings):
    tasks: list[str]
    data: str | None = None  # the fingerprint of the evaluation files read (the key's view of data_root)
    versions: dict[str, int] | None = None  # what the tasks' data means, where that changed (sources.TASK_VERSIONS)
    split_seed: int = 0
    window: int
    data_root: str | None = Field(None, alias="_data_root")

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        """Evaluation data counts by the content of the files it reads; the folder is only where to read them."""
        from focusflow.pipeline.evaluation_stages import data_fingerprint, data_versions

        root = cfg.evaluation.data_root
        return cls(tasks=sorted(cfg.evaluation.tasks), data=data_fingerprint(cfg.evaluation.tasks, root),
                   split_seed=cfg.evaluation.split_seed, window=cfg.dedup.decontamination_window, data_root=root,
                   **data_versions(cfg.evaluation.tasks))


def _decontaminate(run: StageRun) -> Mapping[str, Any]:
    from focusflow.corpus.decontaminate import decontaminate
    from focusflow.evaluation.downstream.texts import evaluation_texts

    s: DecontaminationSettings = run.settings
    texts = evaluation_texts(s.tasks, Path(s.data_root) if s.data_root else None, s.split_seed)
    return decontaminate(run.inputs["dedup"] / DOCUMENTS, texts, run.out, window=s.window,
                         stride=max(1, s.window // 2))


# version 2: the key's ``data`` is the fingerprint of the task folders it reads (see evaluation_stages)
# version 3: text compared in one Unicode form (NFKC), so decomposed evaluation text is found in the corpus
DECONTAMINATE = register(Stage("decontaminate", 3, ("dedup",), _decontaminate,
                               "drop lines that overlap evaluation dev/test text", settings=DecontaminationSettings))
