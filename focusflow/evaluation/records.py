"""The records of the evaluation stages (intrinsic, downstream, the report) and the report's named inputs
(``storage.records``: read them, never the metadata dict)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Self

from pydantic import AliasChoices, Field

from focusflow.storage.records import StageRecord


def finite_or_none(value: Any) -> float | None:
    """A measurement, or None where there is none (None, NaN, infinite: a broken score decides nothing)."""
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


@dataclass(frozen=True)
class ReportInput:
    """One input of the report: its kind (``stage``, ``init``, ``reference``, ``intrinsic``, ``lapt``,
    ``downstream``) and its name (a stage, a model, a reference). Stored as the input's name ``<kind>:<name>``."""

    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> Self:
        kind, _, name = text.partition(":")
        return cls(kind, name)


class IntrinsicRecord(StageRecord):
    """The intrinsic stage's measurements of one model on held-out text (its other metrics are kept as given)."""

    stages = ("intrinsic",)
    n_params: int | None = None
    vocab_size: int | None = None
    n_sentences: int | None = None
    tokens_per_word: float | None = None
    # the LM loss its head scores (mlm, clm; none for a bare encoder); stored as "objective" before 29 Nov 2026
    lm_loss: str | None = Field(None, validation_alias=AliasChoices("lm_loss", "objective"))
    continuations: list[dict[str, Any]] = []  # a decoder's greedy continuations of held-out prompts
    bits_per_byte: float | None = None
    unigram_bits_per_byte: float | None = None  # the same held-out bytes under the tokenizer's token frequencies
    dev_bits_per_byte: float | None = None  # a decoder's, on the reference's dev half (what a choice looks at)
    ood_bits_per_byte: float | None = None  # a decoder's, on text of another domain of the language
    ood_dev_bits_per_byte: float | None = None  # on the third of that text a choice looks at (never the scored part)
    generated_bytes_per_s: float | None = None  # a decoder's greedy generation on the machine that measured it


class DownstreamRecord(StageRecord):
    """The downstream stage: its results table, one row per task and metric (mean, std, seeds)."""

    stages = ("downstream",)
    results: list[dict[str, Any]] = []
    # what each run measured or found on the machine that ran it (seconds, speed, where its data came from: the
    # ``provenance`` of its splits), kept out of the artifact's files
    measured: list[dict[str, Any]] = []


class ReadingRecord(StageRecord):
    """The reading stage: per task, the share of its texts and of their words a pruned or extended vocabulary cuts as
    the source's does."""

    stages = ("reading",)
    tasks: dict[str, dict[str, float | int | None]] = {}


class ReportRecord(StageRecord):
    """The report: the model the run ships (``pipeline.product``), why, and every candidate beside the source."""

    stages = ("report",)
    product: str | None = None
    product_reason: str | None = None
    candidates: list[dict[str, Any]] = []
    artifacts: dict[str, str] = {}  # each input's name (``ReportInput``) -> its artifact URI
