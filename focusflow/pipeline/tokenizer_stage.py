"""The target-language tokenizer, trained on the train split, as a stored stage (``focusflow.tokenizer``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from focusflow.config import TokenizerSpec
from focusflow.corpus.split import SplitOutput
from focusflow.pipeline.registry import SectionSettings, Stage, StageRun, register
from focusflow.tokenizer.record import TokenizerRecord


class TokenizerSettings(SectionSettings):
    tokenizer: TokenizerSpec


def _tokenizer(run: StageRun) -> Mapping[str, Any]:
    from focusflow.tokenizer import train_tokenizer

    s: TokenizerSettings = run.settings
    split = run.input("split", SplitOutput)
    heldout = split.heldout
    return train_tokenizer(split.train, s.tokenizer, run.out,
                           source_tokenizer=run.inputs["source"] if "source" in run.inputs else None,
                           heldout=heldout if heldout.is_file() else None)


# version 3 (29 Nov 2026): a new tokenizer composes its input (NFC) before the source's normalizer
TOKENIZER = register(Stage("tokenizer", 3, ("split",), _tokenizer, "language tokenizer from the train split",
                           optional=("source",), work=("training_chars", "chars"), settings=TokenizerSettings,
                           record=TokenizerRecord))
