"""The teacher's word states as a stored stage (``focusflow.training.teacher``): computed once for what one distilling
LAPT reads (its training texts, chosen for its step count, and its held-out texts), read by its every epoch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from focusflow.config import PipelineConfig, PrecisionName
from focusflow.corpus.split import SplitOutput
from focusflow.pipeline.family_defaults import with_family_defaults
from focusflow.pipeline.registry import RunHints, Stage, StageRun, StageSettings, register

TEACHER_STAGE = "teacher"


class TeacherSettings(StageSettings):
    """What the stored states depend on: the cut of each text, the held-out texts read, the layers, the precision,
    and how many tokens the distillation reads (``steps`` × ``batch_size`` × ``seq_len``; a minutes budget's steps
    come from its plan, the ``budget`` input)."""

    seq_len: int
    eval_sequences: int
    batch_size: int
    steps: int | None = None  # None: the budget input's planned steps
    layers: list[int] | None = None  # None: the distillation's default for the source's depth
    precision: PrecisionName = "auto"

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        lapt = with_family_defaults(cfg).lapt
        return cls(seq_len=lapt.seq_len, eval_sequences=lapt.eval_sequences, batch_size=lapt.batch_size,
                   steps=None if lapt.needs_plan else lapt.total_steps, layers=lapt.distill_layers,
                   precision=lapt.precision)


def _teacher(run: StageRun) -> Mapping[str, Any]:
    """Read the texts the distillation will read with the source once."""
    from focusflow.pipeline.lapt_stage import BUDGET_STAGE, planned_input
    from focusflow.training.teacher import store_teacher_states

    s: TeacherSettings = run.settings
    plan = planned_input(run, s.steps is None, "lapt.minutes", BUDGET_STAGE, "model and split",
                         "the teacher's states are stored for the steps it plans")
    steps = plan.steps if plan is not None else s.steps
    split = run.input("split", SplitOutput)
    return store_teacher_states(run.inputs["source"], run.inputs["model"], split.train, split.heldout, run.out,
                                steps=steps, batch_size=s.batch_size, seq_len=s.seq_len,
                                eval_sequences=s.eval_sequences, layers=s.layers, precision=s.precision,
                                progress=run.progress)


# version 2: the states of the texts one distillation reads (chosen for its steps, counted in its model's tokens), not
# of the whole corpus
TEACHER = register(Stage(TEACHER_STAGE, 2, ("source", "split", "model"), _teacher,
                         "the source model's word states at the distillation's layers for the texts one distilling "
                         "LAPT reads, stored once", optional=("budget",), uses_model=True, settings=TeacherSettings,
                         hints=RunHints(timeout_s=24 * 3600, gpu=True)))
