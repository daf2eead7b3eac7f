"""The held-out reference as a stored stage: one tokenizer's held-out sentences and the source model's embeddings
of them, which every model of that tokenizer is measured against (``focusflow.evaluation.intrinsic``).

Its settings are the intrinsic stage's too (``intrinsic_stage``): the same for every model, so that their
numbers compare."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from focusflow.config import PipelineConfig, PrecisionName
from focusflow.corpus.split import SplitOutput
from focusflow.pipeline.registry import Stage, StageRun, StageSettings, register


class HeldoutSettings(StageSettings):
    """The reference and intrinsic stages: the same for every model, so that their numbers compare."""

    max_sentences: int
    seed: int = 0
    precision: PrecisionName = "auto"

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        return cls(max_sentences=cfg.evaluation.heldout_sentences, seed=cfg.split.seed,
                   precision=cfg.evaluation.precision)


def _reference(run: StageRun) -> Mapping[str, Any]:
    """Held-out sentences for one tokenizer and the source's embeddings of them, shared by its models."""
    from focusflow.corpus.io import read_texts
    from focusflow.evaluation.intrinsic import build_reference
    from focusflow.pipeline.ood_stage import OOD_FILE, OodRecord

    s: HeldoutSettings = run.settings
    ood = list(read_texts(run.inputs["ood"] / OOD_FILE)) if "ood" in run.artifacts else None
    return build_reference(run.inputs["source"], run.input("split", SplitOutput).heldout, run.out,
                           tokenizer_dir=run.inputs["tokenizer"] if "tokenizer" in run.inputs else None,
                           max_sentences=s.max_sentences, seed=s.seed, precision=s.precision, ood_texts=ood,
                           ood_for_choice="ood" in run.artifacts and OodRecord.of(run.artifacts["ood"]).for_choice)


# version 2: beside the scored sentences, a dev half (what a choice between models looks at) and text of another
# domain (the optional ``ood`` input); version 3: the dev half is a third of the held-out lines by their hash, and it
# and the other domain's text are chosen without a tokenizer: the same text for every reference of a run; version 4:
# a user's other-domain text is split as the held-out lines are, a third of it (by hash) for a choice, never scored;
# version 5: every text is chosen without a tokenizer, to fit any in 256 tokens (the source's reference and each
# model's scored different sentences: 75 of 100 in common), and a decoder's first token is scored after its BOS
REFERENCE = register(Stage("reference", 5, ("source", "split"), _reference,
                           "held-out sentences for one tokenizer and the source model's embeddings of them",
                           optional=("tokenizer", "ood"), uses_model=True, work=("n_sentences", "sentences"),
                           settings=HeldoutSettings))
