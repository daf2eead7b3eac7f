"""The deterministic held-out split by document hash, as a stored stage (``focusflow.corpus.split_corpus``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from focusflow.config import SplitSpec
from focusflow.corpus.io import DOCUMENTS
from focusflow.pipeline.registry import SectionSettings, Stage, StageRun, register


class SplitSettings(SectionSettings):
    split: SplitSpec


def _split(run: StageRun) -> Mapping[str, Any]:
    from focusflow.corpus import split_corpus

    s: SplitSettings = run.settings
    return split_corpus(run.inputs["dedup"] / DOCUMENTS, s.split, run.out)


SPLIT = register(Stage("split", 1, ("dedup",), _split, "deterministic held-out split by document hash",
                        work=("documents", "documents"), settings=SplitSettings))
