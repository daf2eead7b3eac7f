"""Exact and near-duplicate removal as a stored stage (``focusflow.corpus.deduplicate``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from focusflow.config import DedupSpec
from focusflow.corpus.io import DOCUMENTS
from focusflow.pipeline.registry import SectionSettings, Stage, StageRun, register


class DedupSettings(SectionSettings):
    dedup: DedupSpec


def _dedup(run: StageRun) -> Mapping[str, Any]:
    """Before the split (and decontamination), so that no held-out document has a near-twin left in train."""
    from focusflow.corpus import deduplicate

    s: DedupSettings = run.settings
    return deduplicate(run.inputs["corpus"] / DOCUMENTS, s.dedup, run.out)


DEDUP = register(Stage("dedup", 1, ("corpus",), _dedup, "exact and near-duplicate removal",
                        work=("input_bytes", "bytes"), settings=DedupSettings))
