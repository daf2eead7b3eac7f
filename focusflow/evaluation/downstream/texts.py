"""The running text inside evaluation examples, for keeping it out of training corpora."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from focusflow.evaluation.downstream.datasets import Example, NerExample, NliExample, QaExample
from focusflow.evaluation.downstream.sources import resolve_task


def example_texts(example: Example) -> list[str]:
    """A sentence (NER), premise and hypothesis (NLI), context and question (QA)."""
    if isinstance(example, NerExample):
        return [" ".join(example.words)]
    if isinstance(example, NliExample):
        return [example.premise, example.hypothesis]
    if isinstance(example, QaExample):
        return [example.context, example.question]
    raise TypeError(f"not an evaluation example: {type(example).__name__}")


def evaluation_texts(tasks: Iterable[str], data_root: Path | None = None, split_seed: int = 0,
                     splits: tuple[str, ...] = ("dev", "test")) -> Iterator[str]:
    """Every text of the given splits of every task (the data a model must not have trained on)."""
    for task in tasks:
        data = resolve_task(task, data_root, split_seed)
        for split in splits:
            for example in getattr(data, split):
                yield from example_texts(example)
