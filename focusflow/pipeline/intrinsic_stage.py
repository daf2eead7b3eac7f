"""Intrinsic evaluation as a stored stage: a model's held-out LM loss and fidelity against its tokenizer's
reference, a decoder's continuations (``focusflow.evaluation.intrinsic``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from focusflow.evaluation.records import IntrinsicRecord
from focusflow.pipeline.reference_stage import HeldoutSettings
from focusflow.pipeline.registry import Stage, StageRun, register


def _intrinsic(run: StageRun) -> Mapping[str, Any]:
    from focusflow.evaluation.intrinsic import evaluate_against_reference

    s: HeldoutSettings = run.settings
    return evaluate_against_reference(run.inputs["model"], run.inputs["reference"], run.out, seed=s.seed,
                                      precision=s.precision)


# version 3: a decoder's metrics add greedy continuations of held-out prompts (an encoder's are unchanged)
# version 4: fidelity and retrieval beside their chance level and after removing the mean direction
# version 5: the tokens per word of the model's own tokenizer on the held-out sentences (a pruned model's is its own)
# version 6: a decoder is scored on the reference's dev half and its text of another domain too; its generation speed
# is a measurement (the manifest's), no longer in metrics.json
INTRINSIC = register(Stage("intrinsic", 6, ("model", "reference"), _intrinsic,
                           "held-out LM loss and fidelity against a reference; a decoder's continuations",
                           uses_model=True,
                           work=("n_sentences", "sentences"), settings=HeldoutSettings, record=IntrinsicRecord))
