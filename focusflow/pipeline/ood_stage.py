"""Text of the language from another domain than the corpus, as a stored stage: the evaluation tasks' sentences, or
a text file the user names (``evaluation.ood_text``). Every model, the source's included, is scored on it beside the
held-out split, so a report can say which gain survives a change of domain."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import Field

from focusflow.config import PipelineConfig
from focusflow.pipeline.registry import Stage, StageRun, StageSettings, register
from focusflow.storage.records import StageRecord

OOD_STAGE, OOD_FILE = "ood-text", "texts.jsonl"


class OodSettings(StageSettings):
    """The evaluation tasks (their data counted by content, as the downstream stage counts it) or a file (its
    content hash)."""

    tasks: list[str] = []
    data: str | None = None
    file: str | None = None  # the sha256 of the user's text file
    versions: dict[str, int] | None = None  # what the tasks' data means, where that changed (sources.TASK_VERSIONS)
    split_seed: int = 0
    data_root: str | None = Field(None, alias="_data_root")
    path: str | None = Field(None, alias="_path")

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        from focusflow.pipeline.evaluation_stages import data_fingerprint, data_versions
        from focusflow.storage.atomic import sha256_file

        evaluation = cfg.evaluation
        if evaluation.ood_text:
            path = Path(evaluation.ood_text).expanduser()
            return cls(file=sha256_file(path), path=str(path))
        root = evaluation.data_root
        return cls(tasks=sorted(evaluation.tasks), data=data_fingerprint(evaluation.tasks, root),
                   split_seed=evaluation.split_seed, data_root=root, **data_versions(evaluation.tasks))


def wanted(cfg: PipelineConfig) -> bool:
    """Whether a run has text of another domain to score its models on."""
    return bool(cfg.evaluation.ood_text or cfg.evaluation.tasks)


def _ood(run: StageRun) -> Mapping[str, Any]:
    from focusflow.corpus.io import read_texts, write_texts
    from focusflow.evaluation.downstream.texts import evaluation_texts

    s: OodSettings = run.settings
    if s.path:
        texts = [text for text in read_texts(Path(s.path)) if text.strip()]
    else:
        texts = list(dict.fromkeys(evaluation_texts(s.tasks, Path(s.data_root) if s.data_root else None,
                                                    s.split_seed, ("test",))))
    write_texts(run.out / OOD_FILE, texts)
    return {"texts": len(texts), "from": s.path or ", ".join(s.tasks), "kind": "file" if s.path else "tasks"}


class OodRecord(StageRecord):
    """Where the other domain's text came from: ``file`` (a user's) or ``tasks`` (their test sentences)."""

    stages: ClassVar[tuple[str, ...]] = (OOD_STAGE,)
    texts: int | None = None
    kind: str | None = None  # absent before version 2: read as the tasks' (never for a choice)

    @property
    def for_choice(self) -> bool:
        """Whether a part of this text may decide a product: a user's file may; the tasks' test sentences never (the
        downstream verdicts decide a run with tasks, and test text must not choose for them)."""
        return self.kind == "file"


# version 2: the record says where the text came from (a user's file or the tasks' test sentences)
OOD = register(Stage(OOD_STAGE, 2, (), _ood, "text of the language from another domain (the evaluation tasks' test "
                     "sentences, or evaluation.ood_text): every model is scored on it too", settings=OodSettings,
                     record=OodRecord))
