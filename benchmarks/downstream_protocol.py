"""The CPU fine-tuning protocols the benchmarks share: NER (measured in downstream_smoke.py's docstring) and
SIB-200 topic classification (measured in sib200_methods.py's docstring).

One place for the settings (each a :class:`focusflow.config.DownstreamSettings`, the object ``focusflow
evaluate`` and the downstream stage build), their command-line options and the call into
``evaluate_models``, so that every benchmark that reports a downstream score fine-tunes the same way.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from focusflow.config import DownstreamSettings


def cpu_preset(kind: str, dataset: str) -> DownstreamSettings:
    """The library's ``cpu`` protocol for one task (``evaluation.downstream.presets``: the one place of these
    values, which ``focusflow evaluate --protocol cpu`` and ``evaluation.protocol: cpu`` use too), 2 threads."""
    from focusflow.evaluation.downstream.presets import with_protocol

    return with_protocol(DownstreamSettings(protocol="cpu", threads=2), kind, dataset)


# 90 steps (3 epochs × 480 sentences in batches of 16): WikiANN learns on 2 cores in 2-2.5 minutes per run.
CPU_PROTOCOL = cpu_preset("ner", "wikiann")
# MasakhaNER (14% of words in entities) stays at the all-O plateau at that budget: 300 steps at lr 2e-4 leave it.
MASAKHANER_PROTOCOL = cpu_preset("ner", "masakhaner2")
# SIB-200: all 701 training sentences (the same in every language) in batches of 16, 64 sub-tokens (a FLORES sentence
# is 20-60), the whole test set (204), the input embeddings at 10x the learning rate (RESULTS-finetune-recipe.md), and
# trained until the dev score (99 sentences) stops rising: up to 12 epochs, dev every half epoch, stopped after 6
# evaluations without a new best (issue 44: the earlier 3 epochs = 132 steps ended before the models converged).
SIB200_PROTOCOL = cpu_preset("cls", "sib200")


def masakhaner_task(language: str) -> str:
    """The MasakhaNER 2.0 task name for an ISO 639-1 or 639-3 code (``sw`` → ``ner:masakhaner2:swa``)."""
    from focusflow.evaluation.downstream.sources import iso3

    return f"ner:masakhaner2:{iso3(language)}"


def sib200_task(language: str) -> str:
    """The SIB-200 task for any code the task parser accepts (``sw``, ``swa``, ``swh_Latn``)."""
    return f"cls:sib200:{language}"


def add_protocol_arguments(parser: argparse.ArgumentParser, defaults: DownstreamSettings) -> None:
    """``--epochs``, ``--max-train-samples``, … with ``defaults`` (one of the protocols above)."""
    parser.add_argument("--epochs", type=float, default=defaults.epochs)
    parser.add_argument("--max-train-samples", type=int, default=defaults.max_train_samples)
    parser.add_argument("--max-eval-samples", type=int, default=defaults.max_eval_samples)
    parser.add_argument("--max-test-samples", type=int, default=defaults.max_test_samples)
    parser.add_argument("--eval-every", type=float, default=defaults.eval_every_fraction)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--max-length", type=int, default=defaults.max_length,
                        help="sub-tokens per input (NER: words past it are predicted O)")
    parser.add_argument("--lr", type=float, default=defaults.lr, help="0 = each task's default")
    parser.add_argument("--threads", type=int, default=defaults.threads, help="torch CPU threads")
    parser.set_defaults(protocol=defaults.protocol)  # the preset's name travels with its values (the report names it)
    parser.add_argument("--embedding-lr-scale", type=float, default=defaults.embedding_lr_scale,
                        help="multiply the input embeddings' learning rate (default 1)")
    parser.add_argument("--patience", type=int, default=defaults.patience,
                        help="stop after this many dev evaluations without a new best (--epochs is then a maximum)")


def protocol_from_args(args: argparse.Namespace) -> DownstreamSettings:
    """The settings parsed by :func:`add_protocol_arguments` (validated: a bad value is one error line)."""
    from focusflow.config import downstream_settings

    return downstream_settings(epochs=args.epochs, max_train_samples=args.max_train_samples,
                               max_eval_samples=args.max_eval_samples, max_test_samples=args.max_test_samples,
                               eval_every_fraction=args.eval_every, batch_size=args.batch_size,
                               max_length=args.max_length, lr=args.lr or None, threads=args.threads,
                               embedding_lr_scale=args.embedding_lr_scale, protocol=getattr(args, "protocol", None),
                               patience=args.patience)


def with_run(protocol: DownstreamSettings, seeds: int | list[int], data_root: Path | None) -> DownstreamSettings:
    """The protocol with this run's seeds and data folder."""
    return DownstreamSettings.model_validate(protocol.model_dump() | {"seeds": seeds, "data_root": data_root})


def evaluate_protocol(models: dict[str, Path | str], tasks: list[str], out: Path, seeds: int | list[int],
                      data_root: Path | None, protocol: DownstreamSettings):
    """Every model on every task with ``protocol``; the ``results.csv`` table of ``evaluate_models``."""
    from focusflow.evaluation.downstream import evaluate_models

    return evaluate_models(models, tasks, out, with_run(protocol, seeds, data_root))
