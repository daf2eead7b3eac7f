"""Embedding initialization (FOCUS and the baselines, in any mode) as a stored stage
(``focusflow.embeddings.initialize_model``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import Field

from focusflow.config import PipelineConfig
from focusflow.corpus.split import SplitOutput
from focusflow.embeddings.modes import EXTEND_RULE
from focusflow.embeddings.reading import READING_RULE
from focusflow.pipeline.family_defaults import is_decoder_source
from focusflow.pipeline.registry import Stage, StageRun, StageSettings, register
from focusflow.training.records import ModelRecord


class InitSettings(StageSettings):
    method: str
    mode: str
    seed: int = 0
    options: dict[str, Any] = Field(default_factory=dict)  # the method's options (extend_top_n, rare_tokens)

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, *, method: str, mode: str | None = None, reserve: int = 0,
                    **variant: Any) -> Self:
        """``method``: the base method (``focus`` of ``focus+align``); only the options it reads join its key.
        ``mode``: a candidate's own (``prune`` beside the methods), else the run's ``init.mode``. ``reserve``: rows a
        pruned source leaves free within its budget for what a candidate adds to it (prune+extend's new tokens)."""
        from focusflow.methods import init_method

        mode = mode or cfg.init.mode
        # which new tokens it adds (embeddings.api.EXTEND_RULE): a new rule, a new key
        options: dict[str, Any] = {"extend_top_n": cfg.init.extend_top_n, "extend_rule": EXTEND_RULE} \
            if mode == "extend" else {}
        if mode == "prune":
            options["prune_budget"] = cfg.init.prune_budget
            options["reading_rule"] = READING_RULE  # which pieces beyond the corpus's it keeps: a new rule, a new key
            if reserve:
                options["prune_reserve"] = reserve
        spec = init_method(method)
        if spec.needs_aux_vectors:  # only FOCUS has rare tokens; other methods keep their keys
            options["rare_tokens"] = cfg.init.rare_tokens
        spells = spec.spells_with_source_pieces and not (spec.needs_aux_vectors and cfg.init.rare_tokens == "random")
        if spells and is_decoder_source(cfg.source_model):
            options["unspelled"] = "mean"  # embeddings.builders._unspelled: a decoder's greedy decoding, kept sane
        return cls(method=method, mode=mode, seed=cfg.init.seed, options=options)


#: The ``wechsel`` input's folder (the user's aligned word vectors and dictionary): init's option per file.
WECHSEL_FILES = {"wechsel_source_vectors": "source.bin", "wechsel_target_vectors": "target.bin",
                 "wechsel_dictionary": "dictionary.tsv"}


def _init(run: StageRun) -> Mapping[str, Any]:
    """Prune mode needs no tokenizer; methods without an auxiliary space need no fastText; WECHSEL reads
    its aligned vectors and dictionary from the ``wechsel`` input (``source.bin``, ``target.bin``,
    ``dictionary.tsv``)."""
    from focusflow.embeddings import initialize_model

    s: InitSettings = run.settings
    given = run.inputs
    options = dict(s.options)
    if "split" in given:
        options["train"] = run.input("split", SplitOutput).train
    if "wechsel" in given:
        options.update({option: given["wechsel"] / name for option, name in WECHSEL_FILES.items()})
    return initialize_model(given["source"], given["tokenizer"] if "tokenizer" in given else None, run.out,
                            method=s.method, mode=s.mode,
                            aux_dir=given["fasttext"] if "fasttext" in given else None, seed=s.seed, **options)


INIT = register(Stage("init", 1, ("source",), _init, "embedding initialization",
                      optional=("tokenizer", "fasttext", "split", "wechsel"), uses_model=True,
                      work=("target_vocab_size", "rows"), settings=InitSettings, record=ModelRecord))
