"""Aligning an initialized model's new embedding rows to the source model, as a stored, resumable stage
(``focusflow.training.align_embeddings``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import Field

from focusflow.config import AlignSpec, PipelineConfig
from focusflow.corpus.split import SplitOutput
from focusflow.pipeline.registry import Stage, StageRun, StageSettings, register


class AlignSettings(StageSettings):
    align: AlignSpec
    work_root: str | None = Field(None, alias="_work_root")

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        return cls(align=cfg.init.refine)


def _align(run: StageRun) -> Mapping[str, Any]:
    """Refine an initialized model (rows not copied exactly) against the source model on the train split.

    The work folder is keyed by the artifact key, so a killed run resumes from its last checkpoint;
    the held-out split is never read (the alignment loss is monitored on texts held back from train).
    """
    import json
    import shutil

    from focusflow.embeddings.api import TOTALS_FILE
    from focusflow.training import align_embeddings
    from focusflow.training.work import store_finished_run

    s: AlignSettings = run.settings
    work = run.work  # <work root>/align/<key>, claimed for this run
    summary = align_embeddings(run.inputs["model"], run.inputs["source"], run.input("split", SplitOutput).train, work,
                               s.align, resume=True, progress=run.progress)
    record = store_finished_run(work, run.out)
    run.after_commit.append(lambda: shutil.rmtree(work, ignore_errors=True))
    totals_file = run.inputs["model"] / TOTALS_FILE
    totals = json.loads(totals_file.read_text(encoding="utf-8")) if totals_file.is_file() else {}
    # the row fates of the initialization it refined stay visible in comparisons
    return {**{k: v for k, v in totals.items() if not isinstance(v, (dict, list))}, "align": {**summary, **record}}


# version 2: the best state by the language model's dev loss is kept, the start included (align.keep_best)
ALIGN = register(Stage("align", 2, ("model", "source", "split"), _align,
                      "align the new embedding rows to the source model's word-pooled hidden states", uses_model=True,
                      work=("align.tokens", "tokens"), work_folder=True, settings=AlignSettings))
