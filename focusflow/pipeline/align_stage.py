"""Aligning an initialized model's new embedding rows to the source model, as a stored, resumable stage
(``focusflow.training.align_embeddings``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from pydantic import Field

from focusflow.config import AlignSpec, PipelineConfig
from focusflow.corpus.split import SplitOutput
from focusflow.pipeline.family_defaults import with_family_defaults
from focusflow.pipeline.lapt_stage import budget_key_params, planned_input, write_plan
from focusflow.pipeline.registry import RunHints, Stage, StageRun, StageSettings, register
from focusflow.training.records import BudgetRecord, ModelRecord


class AlignSettings(StageSettings):
    align: AlignSpec
    work_root: str | None = Field(None, alias="_work_root")

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        return cls(align=with_family_defaults(cfg).init.refine)


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
    spec = s.align
    plan = planned_input(run, spec.needs_plan, "init.refine.minutes", ALIGN_BUDGET_STAGE, "model, source and split",
                         "the flows and focusflow init do")
    if plan is not None:
        from focusflow.training.align import planned_align_spec

        spec = planned_align_spec(spec, plan)
    work = run.work  # <work root>/align/<key>, claimed for this run
    summary = align_embeddings(run.inputs["model"], run.inputs["source"], run.input("split", SplitOutput).train, work,
                               spec, resume=True, progress=run.progress)
    record = store_finished_run(work, run.out)
    run.after_commit.append(lambda: shutil.rmtree(work, ignore_errors=True))
    totals_file = run.inputs["model"] / TOTALS_FILE
    totals = json.loads(totals_file.read_text(encoding="utf-8")) if totals_file.is_file() else {}
    # the row fates of the initialization it refined stay visible in comparisons
    return {**{k: v for k, v in totals.items() if not isinstance(v, (dict, list))}, "align": {**summary, **record}}


# version 2: the best state by the language model's dev loss is kept, the start included (align.keep_best)
ALIGN = register(Stage("align", 2, ("model", "source", "split"), _align,
                      "align the new embedding rows to the source model's word-pooled hidden states", uses_model=True,
                      optional=("budget",), work=("align.tokens", "tokens"), work_folder=True, settings=AlignSettings,
                      record=ModelRecord))


def _align_budget(run: StageRun) -> Mapping[str, Any]:
    """Time the first steps of the align run and fix its minutes budget as steps (``budget.json``)."""
    from focusflow.storage.work_folders import default_work_root
    from focusflow.training.align import plan_align_budget

    work = Path(run.settings.work_root or default_work_root()) / ALIGN_BUDGET_STAGE
    work.mkdir(parents=True, exist_ok=True)
    plan = plan_align_budget(run.inputs["model"], run.inputs["source"], run.input("split", SplitOutput).train,
                             run.settings.align, work_dir=work, progress=run.progress)
    return write_plan(run, plan, "align")


ALIGN_BUDGET_STAGE = "align-budget"
ALIGN_BUDGET = register(Stage(ALIGN_BUDGET_STAGE, 1, ("model", "source", "split"), _align_budget,
                             "an align minutes budget fixed as a step count, timed on the machine that trains",
                             key_params=budget_key_params, uses_model=True, settings=AlignSettings,
                             hints=RunHints(timeout_s=3600, gpu=True), record=BudgetRecord))
