"""The teacher's word states as a stored stage (``focusflow.training.teacher``): computed once per corpus and source,
read by every distilling LAPT of the run (each method's, each candidate's) and by its budget's timed steps."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from focusflow.config import PipelineConfig, PrecisionName
from focusflow.corpus.split import SplitOutput
from focusflow.pipeline.registry import RunHints, Stage, StageRun, StageSettings, register

TEACHER_STAGE = "teacher"


class TeacherSettings(StageSettings):
    """What the stored states depend on: the cut of each text, the held-out texts read, the layers, the precision."""

    seq_len: int
    eval_sequences: int
    layers: list[int] | None = None  # None: the distillation's default for the source's depth
    precision: PrecisionName = "auto"

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        lapt = cfg.lapt
        return cls(seq_len=lapt.seq_len, eval_sequences=lapt.eval_sequences, layers=lapt.distill_layers,
                   precision=lapt.precision)


def _teacher(run: StageRun) -> Mapping[str, Any]:
    """Read every training text (and the held-out texts a distillation evaluates on) with the source once."""
    from transformers import AutoConfig

    from focusflow.training.align import layer_count
    from focusflow.training.state_loss import default_layers
    from focusflow.training.teacher import compute_teacher_states, distillation_texts

    s: TeacherSettings = run.settings
    split = run.input("split", SplitOutput)
    layers = s.layers or list(default_layers(layer_count(AutoConfig.from_pretrained(run.inputs["source"]))))
    texts = distillation_texts(split.train, split.heldout, s.eval_sequences)
    return compute_teacher_states(run.inputs["source"], texts, s.seq_len, layers, s.precision, run.out,
                                  progress=run.progress)


TEACHER = register(Stage(TEACHER_STAGE, 1, ("source", "split"), _teacher,
                         "the source model's word states at the distillation's layers for every training text, "
                         "stored once", uses_model=True, settings=TeacherSettings,
                         hints=RunHints(timeout_s=24 * 3600, gpu=True)))
