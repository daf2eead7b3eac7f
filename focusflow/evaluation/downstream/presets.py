"""Named fine-tuning protocols: ``paper`` (the task kinds' own defaults, the FOCUS paper's Table 6 where it states
them; for a GPU) and ``cpu`` (what the project's own benchmarks measure with on 2 CPU cores, minutes per run).

A preset fills the settings a caller left at their defaults: a ``--lr`` or ``--epochs`` given always wins (a
value given equal to the default counts as left: ``--batch-size 32`` under ``cpu`` trains with 16). The ``cpu``
values were chosen and measured in ``benchmarks/downstream_smoke.py`` (WikiANN), ``benchmarks/RESULTS-align.md``
(MasakhaNER: 300 steps leave the all-O plateau) and ``benchmarks/RESULTS-sib200.md`` /
``RESULTS-finetune-recipe.md`` (SIB-200: the input embeddings at 10x the learning rate lifts every model, the
source's too). Sentence classification trains until its dev score stops rising (issue 44): 132 steps (3 epochs) ended
before the models converged (the best dev step was in the last tenth in 13 of 15 runs), so a verdict measured how
fast a model adapts; now up to 12 epochs with a dev evaluation every half epoch, stopped after 6 evaluations (3
epochs) without a new best (``benchmarks/RESULTS-lapt-parity.md``: the source's dev score on sn plateaus after ~7
epochs). NLI and QA have no CPU protocol measured yet: they keep the paper's settings.
"""

from __future__ import annotations

from typing import Any

from focusflow.config import DownstreamSettings

PROTOCOLS = ("paper", "cpu")

_CPU_NER = {"epochs": 3.0, "max_train_samples": 480, "max_eval_samples": 100, "max_test_samples": 300,
            "eval_every_fraction": 0.2, "batch_size": 16, "max_length": 64, "lr": 5e-4}
CPU: dict[tuple[str, str | None], dict[str, Any]] = {
    ("ner", None): _CPU_NER,
    ("ner", "masakhaner2"): {**_CPU_NER, "max_train_samples": 960, "epochs": 5.0, "lr": 2e-4},
    ("ner", "masakhaner"): {**_CPU_NER, "max_train_samples": 960, "epochs": 5.0, "lr": 2e-4},  # 1.0: the same text kind
    ("cls", None): {"epochs": 12.0, "batch_size": 16, "max_length": 64, "lr": 1e-4, "eval_every_fraction": 1 / 24,
                    "embedding_lr_scale": 10.0, "patience": 6},
}


def protocol_values(protocol: str | None, kind: str, dataset: str) -> dict[str, Any]:
    """The settings preset ``protocol`` gives a task of ``kind`` from ``dataset`` ({} for ``paper``)."""
    if protocol in (None, "paper"):
        return {}
    return dict(CPU.get((kind, dataset)) or CPU.get((kind, None)) or {})


def with_protocol(settings: DownstreamSettings, kind: str, dataset: str) -> DownstreamSettings:
    """``settings`` with its protocol's values for this task wherever the caller set nothing."""
    preset = protocol_values(settings.protocol, kind, dataset)
    fields = type(settings).model_fields
    chosen = {name: value for name, value in preset.items() if getattr(settings, name) == fields[name].default}
    return settings.model_copy(update=chosen) if chosen else settings


__all__ = ["CPU", "PROTOCOLS", "protocol_values", "with_protocol"]
