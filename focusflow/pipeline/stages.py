"""The corpus, vocabulary, model and intrinsic-evaluation stages, registered in the one registry.

Each build is a thin call into the core with the stage's typed settings (``run.settings``) and its
input folders; each row says what the stage reads, how it is keyed and how a runner should run it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from pydantic import Field

from focusflow.config import (
    AlignSpec,
    CleaningSpec,
    CorpusSpec,
    DedupSpec,
    FastTextSpec,
    PipelineConfig,
    PrecisionName,
    SplitSpec,
    TokenizerSpec,
)
from focusflow.pipeline.registry import RunHints, Stage, StageRun, StageSettings, register


class CorpusSettings(StageSettings):
    language: str
    corpus: CorpusSpec
    cleaning: CleaningSpec

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        return cls(language=cfg.language, corpus=cfg.corpus, cleaning=cfg.cleaning)


class DedupSettings(StageSettings):
    dedup: DedupSpec

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        return cls(dedup=cfg.dedup)


class DecontaminationSettings(StageSettings):
    tasks: list[str]
    data: str | None = None  # the fingerprint of the evaluation files read (the key's view of data_root)
    split_seed: int = 0
    window: int
    data_root: str | None = Field(None, alias="_data_root")

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        """Evaluation data counts by the content of the files it reads; the folder is only where to read them."""
        from focusflow.pipeline.evaluation_stages import data_fingerprint

        root = cfg.evaluation.data_root
        return cls(tasks=sorted(cfg.evaluation.tasks), data=data_fingerprint(cfg.evaluation.tasks, root),
                   split_seed=cfg.evaluation.split_seed, window=cfg.dedup.decontamination_window, data_root=root)


class SplitSettings(StageSettings):
    split: SplitSpec

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        return cls(split=cfg.split)


class SourceSettings(StageSettings):
    source_model: str
    fingerprint: str | None = None  # a local folder counts by content
    options: dict[str, Any] = Field(default_factory=dict)  # prepare_source's options (head_spec)
    location: str | None = Field(None, alias="_location")
    cache_dir: str | None = Field(None, alias="_cache_dir")

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        return cls.for_model(cfg.source_model, **({"head_spec": cfg.source_head} if cfg.source_head else {}))

    @classmethod
    def for_model(cls, spec: str, **options: Any) -> Self:
        """A model identified by content where it is a local folder: moving it keeps the key, editing it changes
        the key; its path travels as the runtime-only ``_location``."""
        from focusflow.storage.fingerprint import folder_fingerprint

        folder = Path(spec).expanduser()
        if folder.is_dir():
            return cls(source_model="local", fingerprint=folder_fingerprint(folder), location=str(folder.resolve()),
                       options=options)
        return cls(source_model=spec, options=options)


class TokenizerSettings(StageSettings):
    tokenizer: TokenizerSpec

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        return cls(tokenizer=cfg.tokenizer)


class FastTextSettings(StageSettings):
    fasttext: FastTextSpec

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        return cls(fasttext=cfg.fasttext)


class InitSettings(StageSettings):
    method: str
    mode: str
    seed: int = 0
    options: dict[str, Any] = Field(default_factory=dict)  # the method's options (extend_top_n, rare_tokens)

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, *, method: str, mode: str | None = None, **variant: Any) -> Self:
        """``method``: the base method (``focus`` of ``focus+align``); only the options it reads join its key.
        ``mode``: a candidate's own (``prune`` beside the methods), else the run's ``init.mode``."""
        from focusflow.methods import init_method

        mode = mode or cfg.init.mode
        options: dict[str, Any] = {"extend_top_n": cfg.init.extend_top_n} if mode == "extend" else {}
        if init_method(method).needs_aux_vectors:  # only FOCUS has rare tokens; other methods keep their keys
            options["rare_tokens"] = cfg.init.rare_tokens
        return cls(method=method, mode=mode, seed=cfg.init.seed, options=options)


class AlignSettings(StageSettings):
    align: AlignSpec
    work_root: str | None = Field(None, alias="_work_root")

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        return cls(align=cfg.init.refine)


class HeldoutSettings(StageSettings):
    """The reference and intrinsic stages: the same for every model, so that their numbers compare."""

    max_sentences: int
    seed: int = 0
    precision: PrecisionName = "auto"

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        return cls(max_sentences=cfg.evaluation.heldout_sentences, seed=cfg.split.seed,
                   precision=cfg.evaluation.precision)


def _corpus(run: StageRun) -> Mapping[str, Any]:
    from focusflow.corpus import collect_corpus

    s: CorpusSettings = run.settings
    return collect_corpus(s.corpus, s.cleaning, s.language, run.out)


def _dedup(run: StageRun) -> Mapping[str, Any]:
    from focusflow.corpus import deduplicate

    s: DedupSettings = run.settings
    return deduplicate(run.inputs["corpus"] / "documents.jsonl", s.dedup, run.out)


def _decontaminate(run: StageRun) -> Mapping[str, Any]:
    from focusflow.corpus.decontaminate import decontaminate
    from focusflow.evaluation.downstream.texts import evaluation_texts

    s: DecontaminationSettings = run.settings
    texts = evaluation_texts(s.tasks, Path(s.data_root) if s.data_root else None, s.split_seed)
    return decontaminate(run.inputs["dedup"] / "documents.jsonl", texts, run.out, window=s.window,
                         stride=max(1, s.window // 2))


def _split(run: StageRun) -> Mapping[str, Any]:
    from focusflow.corpus import split_corpus

    s: SplitSettings = run.settings
    return split_corpus(run.inputs["dedup"] / "documents.jsonl", s.split, run.out)


def _source(run: StageRun) -> Mapping[str, Any]:
    from focusflow.training import prepare_source

    s: SourceSettings = run.settings
    head_train = run.inputs["split"] / "train.jsonl" if "split" in run.inputs else None
    return prepare_source(s.location or s.source_model, run.out, head_train=head_train, cache_dir=s.cache_dir,
                          **s.options)


def _tokenizer(run: StageRun) -> Mapping[str, Any]:
    from focusflow.tokenizer import train_tokenizer

    s: TokenizerSettings = run.settings
    split = run.inputs["split"]
    heldout = split / "heldout.jsonl"
    return train_tokenizer(split / "train.jsonl", s.tokenizer, run.out,
                           source_tokenizer=run.inputs["source"] if "source" in run.inputs else None,
                           heldout=heldout if heldout.is_file() else None)


def _fasttext(run: StageRun) -> Mapping[str, Any]:
    from focusflow.embeddings import train_aux_embeddings

    s: FastTextSettings = run.settings
    return train_aux_embeddings(run.inputs["tokenizer"], run.inputs["split"] / "train.jsonl", s.fasttext, run.out)


def _init(run: StageRun) -> Mapping[str, Any]:
    """Prune mode needs no tokenizer; methods without an auxiliary space need no fastText; WECHSEL reads
    its aligned vectors and dictionary from the ``wechsel`` input (``source.bin``, ``target.bin``,
    ``dictionary.tsv``)."""
    from focusflow.embeddings import initialize_model

    s: InitSettings = run.settings
    given = run.inputs
    options = dict(s.options)
    if "split" in given:
        options["train"] = given["split"] / "train.jsonl"
    if "wechsel" in given:
        options.update(wechsel_source_vectors=given["wechsel"] / "source.bin",
                       wechsel_target_vectors=given["wechsel"] / "target.bin",
                       wechsel_dictionary=given["wechsel"] / "dictionary.tsv")
    return initialize_model(given["source"], given["tokenizer"] if "tokenizer" in given else None, run.out,
                            method=s.method, mode=s.mode,
                            aux_dir=given["fasttext"] if "fasttext" in given else None, seed=s.seed, **options)


def _align(run: StageRun) -> Mapping[str, Any]:
    """Refine an initialized model (rows not copied exactly) against the source model on the train split.

    The work folder is keyed by the artifact key, so a killed run resumes from its last checkpoint;
    the held-out split is never read (the alignment loss is monitored on texts held back from train).
    """
    import json
    import shutil

    from focusflow.embeddings.api import TOTALS_FILE
    from focusflow.pipeline.lapt_stage import default_work_root, store_training_record
    from focusflow.training import align_embeddings

    s: AlignSettings = run.settings
    work = Path(s.work_root or default_work_root()) / "align" / run.key
    summary = align_embeddings(run.inputs["model"], run.inputs["source"], run.inputs["split"] / "train.jsonl", work,
                               s.align, resume=True, progress=run.progress)
    shutil.copytree(work / "final", run.out, dirs_exist_ok=True)
    record = store_training_record(work, run.out)
    run.after_commit.append(lambda: shutil.rmtree(work, ignore_errors=True))
    totals_file = run.inputs["model"] / TOTALS_FILE
    totals = json.loads(totals_file.read_text(encoding="utf-8")) if totals_file.is_file() else {}
    # the row fates of the initialization it refined stay visible in comparisons
    return {**{k: v for k, v in totals.items() if not isinstance(v, (dict, list))}, "align": {**summary, **record}}


def _reference(run: StageRun) -> Mapping[str, Any]:
    """Held-out sentences for one tokenizer and the source's embeddings of them, shared by its models."""
    from focusflow.evaluation.intrinsic import build_reference

    s: HeldoutSettings = run.settings
    return build_reference(run.inputs["source"], run.inputs["split"] / "heldout.jsonl", run.out,
                           tokenizer_dir=run.inputs["tokenizer"] if "tokenizer" in run.inputs else None,
                           max_sentences=s.max_sentences, seed=s.seed, precision=s.precision)


def _intrinsic(run: StageRun) -> Mapping[str, Any]:
    from focusflow.evaluation.intrinsic import evaluate_against_reference

    s: HeldoutSettings = run.settings
    return evaluate_against_reference(run.inputs["model"], run.inputs["reference"], run.out, seed=s.seed,
                                      precision=s.precision)


# corpus and source read from the network (retried on transient errors); a dead mirror can hang a download,
# so their timeouts report one (Prefect cannot interrupt a blocking call in a worker thread)
CORPUS = register(Stage("corpus", 1, (), _corpus, "stream, clean and budget the raw corpus",
                         work=("bytes", "bytes"), settings=CorpusSettings,
                         hints=RunHints(retries=2, retry_delays_s=(10, 60), timeout_s=6 * 3600)))
DEDUP = register(Stage("dedup", 1, ("corpus",), _dedup, "exact and near-duplicate removal",
                        work=("input_bytes", "bytes"), settings=DedupSettings))
# version 2: the key's ``data`` is the fingerprint of the task folders it reads (see evaluation_stages)
DECONTAMINATE = register(Stage("decontaminate", 2, ("dedup",), _decontaminate,
                               "drop lines that overlap evaluation dev/test text", settings=DecontaminationSettings))
SPLIT = register(Stage("split", 1, ("dedup",), _split, "deterministic held-out split by document hash",
                        work=("documents", "documents"), settings=SplitSettings))
SOURCE = register(Stage("source", 1, (), _source,
                        "source model folder; an MLM head is trained on the train split when it has none",
                        optional=("split",), uses_model=True, settings=SourceSettings,
                        hints=RunHints(retries=2, retry_delays_s=(10, 60), timeout_s=3 * 3600)))
TOKENIZER = register(Stage("tokenizer", 2, ("split",), _tokenizer, "language tokenizer from the train split",
                           optional=("source",), work=("training_chars", "chars"), settings=TokenizerSettings))
FASTTEXT = register(Stage("fasttext", 3, ("tokenizer", "split"), _fasttext, "token-level auxiliary embeddings",
                           work=("tokens", "tokens"), settings=FastTextSettings))
INIT = register(Stage("init", 1, ("source",), _init, "embedding initialization",
                      optional=("tokenizer", "fasttext", "split", "wechsel"), uses_model=True,
                      work=("target_vocab_size", "rows"), settings=InitSettings))
# version 2: the best state by the language model's dev loss is kept, the start included (align.keep_best)
ALIGN = register(Stage("align", 2, ("model", "source", "split"), _align,
                      "align the new embedding rows to the source model's word-pooled hidden states", uses_model=True,
                      work=("align.tokens", "tokens"), settings=AlignSettings))
REFERENCE = register(Stage("reference", 1, ("source", "split"), _reference,
                           "held-out sentences for one tokenizer and the source model's embeddings of them",
                           optional=("tokenizer",), uses_model=True, work=("n_sentences", "sentences"),
                           settings=HeldoutSettings))
# version 3: a decoder's metrics add greedy continuations of held-out prompts (an encoder's are unchanged)
# version 4: fidelity and retrieval beside their chance level and after removing the mean direction
# version 5: the tokens per word of the model's own tokenizer on the held-out sentences (a pruned model's is its own)
INTRINSIC = register(Stage("intrinsic", 5, ("model", "reference"), _intrinsic,
                           "held-out LM loss and fidelity against a reference; a decoder's continuations",
                           uses_model=True,
                           work=("n_sentences", "sentences"), settings=HeldoutSettings))
