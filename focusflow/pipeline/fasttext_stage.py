"""Token-level auxiliary embeddings (fastText on the tokenized train split) as a stored stage
(``focusflow.embeddings.train_aux_embeddings``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from focusflow.config import FastTextSpec
from focusflow.corpus.split import SplitOutput
from focusflow.embeddings.record import FastTextRecord
from focusflow.pipeline.registry import SectionSettings, Stage, StageRun, register


class FastTextSettings(SectionSettings):
    fasttext: FastTextSpec


def _fasttext(run: StageRun) -> Mapping[str, Any]:
    from focusflow.embeddings import train_aux_embeddings

    s: FastTextSettings = run.settings
    return train_aux_embeddings(run.inputs["tokenizer"], run.input("split", SplitOutput).train, s.fasttext, run.out)


FASTTEXT = register(Stage("fasttext", 3, ("tokenizer", "split"), _fasttext, "token-level auxiliary embeddings",
                           work=("tokens", "tokens"), settings=FastTextSettings, record=FastTextRecord))
