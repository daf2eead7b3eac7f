"""The running text inside evaluation examples, for keeping it out of training corpora."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from focusflow.evaluation.downstream.kinds import example_texts
from focusflow.evaluation.downstream.sources import resolve_task

__all__ = ["evaluation_texts", "example_texts"]


def evaluation_texts(tasks: Iterable[str], data_root: Path | None = None, split_seed: int = 0,
                     splits: tuple[str, ...] = ("dev", "test")) -> Iterator[str]:
    """Every text of the given splits of every task (the data a model must not have trained on)."""
    for task in tasks:
        data = resolve_task(task, data_root, split_seed)
        for split in splits:
            for example in getattr(data, split):
                yield from example_texts(example)
