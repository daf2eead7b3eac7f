"""``align_embeddings``: refine an initialized model's new embedding rows so that, on training text, its hidden
states at layer L pooled per word match what the source model computes for the same words with its own tokenizer
(the idea of Token Distillation, Dobler et al., and of MATT/AIM, which aligns the first third of the layers).

Why: the source model is a teacher every user already holds, and matching its contextual word representations
needs neither labels nor a GPU-scale LAPT. The transformer body is frozen; trained are the input-embedding rows
that the initialization did not copy exactly (read from its ``transfer_report.parquet``; ``trainable="all"`` or a
model without a report trains every row). Output layers keep their values: untied output embeddings and the MLM
output bias receive no gradient from this loss. Teacher word vectors are computed once per batch of texts and
kept in memory; both models run only their first L layers. The run is ``AlignRecipe`` handed to ``TrainingRun``:
the same checkpoints, resume, precision, progress bar and held-out loss as LAPT.
"""

from __future__ import annotations

import contextlib
import logging
import math
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from focusflow.config import AlignSpec
from focusflow.corpus.io import read_texts
from focusflow.embeddings.api import REPORT_FILE, TOTALS_FILE
from focusflow.errors import InputError
from focusflow.logs import ProgressBar
from focusflow.methods import AUTO_OBJECTIVE, Fate, family_refine_lr
from focusflow.models.lm_stats import layer_count, length_batches, pad_rows, padding_id
from focusflow.models.loading import describe_config, load_source, usable_positions
from focusflow.training import lapt_budget
from focusflow.training.data import SampleOrder
from focusflow.training.flops import body_flops_per_token
from focusflow.training.guard import LanguageModelDev
from focusflow.training.loader import Prefetcher
from focusflow.training.loop import TrainingRun
from focusflow.training.machine import StepClock
from focusflow.training.monitor import loss_summary
from focusflow.training.recipe import RunRecipe, RunTotals, Trainable, TrainingStage
from focusflow.training.records import BudgetPlan
from focusflow.training.state_loss import default_layers, distillation_loss, layer_states
from focusflow.training.wordpool import flat_word_index, pool_words, segment_mean, shared_words

log = logging.getLogger(__name__)

EXACT_FATES = tuple(fate for fate in Fate if fate.unchanged)  # the rows copied exactly: align leaves them
_TOKENIZE_CHUNK = 1000


# ---------------------------------------------------------------- data
@dataclass
class PairedTexts:
    """Texts tokenized by both tokenizers, with each token's shared-word index (``-1``: no word)."""

    source_ids: list[np.ndarray]
    target_ids: list[np.ndarray]
    source_words: list[np.ndarray]
    target_words: list[np.ndarray]
    n_words: np.ndarray
    spans: list[np.ndarray] | None = None  # each text's shared words as indices into its word spans

    def __len__(self) -> int:
        return len(self.n_words)


def tokenize_pairs(texts: list[str], source_tokenizer: Any, target_tokenizer: Any, max_length: int,
                   progress: str | None = None) -> PairedTexts:
    """Both tokenizations of every text (special tokens included, cut at ``max_length``) and their shared words.

    ``progress``: the name of a progress bar over the texts (reading a large corpus twice takes a minute or more)."""
    sides: list[tuple[list[np.ndarray], list[np.ndarray]]] = [([], []), ([], [])]
    with contextlib.ExitStack() as stack:
        bar = stack.enter_context(ProgressBar(progress, len(texts), show_loss=False)) if progress else None
        for start in range(0, len(texts), _TOKENIZE_CHUNK):
            chunk = texts[start:start + _TOKENIZE_CHUNK]
            for tokenizer, (ids, offsets) in zip((source_tokenizer, target_tokenizer), sides, strict=True):
                encoded = tokenizer(chunk, add_special_tokens=True, truncation=True, max_length=max_length,
                                    return_offsets_mapping=True, return_attention_mask=False,
                                    return_token_type_ids=False, verbose=False)
                ids += [np.asarray(row, dtype=np.int64) for row in encoded["input_ids"]]
                offsets += [np.asarray(row, dtype=np.int64).reshape(-1, 2) for row in encoded["offset_mapping"]]
            if bar is not None:
                bar.update(start + len(chunk))
    words = [shared_words(text, s, t) for text, s, t in zip(texts, sides[0][1], sides[1][1], strict=False)]
    return PairedTexts(sides[0][0], sides[1][0], [w.source for w in words], [w.target for w in words],
                       np.asarray([w.n_words for w in words], dtype=np.int64), [w.spans for w in words])




@dataclass
class SideBatch:
    """One model's padded inputs for a batch and the flat token → word index for pooling."""

    ids: torch.Tensor
    mask: torch.Tensor
    positions: torch.Tensor
    segments: torch.Tensor

    def to(self, device: torch.device) -> SideBatch:
        return SideBatch(*(t.to(device, non_blocking=True) for t in (self.ids, self.mask, self.positions, self.segments)))


@dataclass
class AlignBatch:
    key: int  # teacher-cache key: the batch index (held-out batches are negative)
    source: SideBatch
    target: SideBatch
    word_sentence: torch.Tensor  # the text of each batch word (for the sentence term)
    n_texts: int
    predicted: int  # words: the loss's normalizer
    tokens: int  # student tokens without padding
    teacher: list[torch.Tensor] | None = None  # the teacher's word states, when read from stored teacher states
    step: int | None = None  # the training step that draws it (its masks change with it); None: held out


def _side(ids: list[np.ndarray], words: list[np.ndarray], counts: np.ndarray, pad_id: int) -> tuple[SideBatch, np.ndarray]:
    padded, mask = pad_rows(ids, pad_id)
    positions, segments, sentence = flat_word_index(words, counts, padded.shape[1])
    tensors = (torch.from_numpy(a) for a in (padded, mask, positions, segments))
    return SideBatch(*tensors), sentence


def collate_pairs(texts: PairedTexts, indices: np.ndarray, key: int, pad_ids: tuple[int, int]) -> AlignBatch:
    counts = texts.n_words[indices]
    source, _ = _side([texts.source_ids[i] for i in indices], [texts.source_words[i] for i in indices], counts,
                      pad_ids[0])
    target, sentence = _side([texts.target_ids[i] for i in indices], [texts.target_words[i] for i in indices], counts,
                             pad_ids[1])
    return AlignBatch(key, source, target, torch.from_numpy(sentence), len(indices), int(counts.sum()),
                      int(sum(len(texts.target_ids[i]) for i in indices)))


# ---------------------------------------------------------------- model
def _layer_list(body: nn.Module) -> tuple[nn.Module, str]:
    """The module holding the transformer layers and the attribute name of their ``ModuleList``."""
    depth = layer_count(body.config)
    for name, module in sorted(body.named_modules(), key=lambda item: item[0].count(".")):
        if isinstance(module, nn.ModuleList) and len(module) == depth:
            parent_name, _, attribute = name.rpartition(".")
            return body.get_submodule(parent_name) if parent_name else body, attribute
    raise InputError(f"no list of {depth} layers found in {type(body).__name__}")


@contextlib.contextmanager
def first_layers(body: nn.Module, layer: int) -> Iterator[None]:
    """Run ``body`` through its first ``layer`` layers only (its final norm, if any, still applies)."""
    parent, attribute = _layer_list(body)
    layers = getattr(parent, attribute)
    setattr(parent, attribute, nn.ModuleList(list(layers)[:layer]))
    try:
        yield
    finally:
        setattr(parent, attribute, layers)


def word_states(body: nn.Module, layer: int, side: SideBatch, n_words: int, pool: str = "mean") -> torch.Tensor:
    """``[n_words, hidden]``: the body's states after ``layer`` layers, pooled per word (mean or last token)."""
    with first_layers(body, layer):
        hidden = body(input_ids=side.ids, attention_mask=side.mask, use_cache=False).last_hidden_state
    return pool_words(hidden, side.positions, side.segments, n_words, pool)


def _distance(student: torch.Tensor, teacher: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "cosine":
        return 1.0 - F.cosine_similarity(student, teacher, dim=-1)
    return (student - teacher).pow(2).mean(-1)


def alignment_loss(student: torch.Tensor, teacher: torch.Tensor, word_sentence: torch.Tensor, n_texts: int,
                   kind: str, sentence_weight: float) -> torch.Tensor:
    """Summed word distance (+ ``sentence_weight`` × mean sentence distance × words, so that dividing by the word
    count gives word mean + weight × sentence mean)."""
    teacher = teacher.float()
    loss = _distance(student, teacher, kind).sum()
    if sentence_weight:
        sentences = [segment_mean(v, word_sentence, n_texts) for v in (student, teacher)]
        loss = loss + sentence_weight * _distance(*sentences, kind).mean() * len(student)
    return loss


def next_token_kl(student: torch.Tensor, teacher: torch.Tensor, head: torch.Tensor, softcap: float | None = None,
                  chunk: int = 64) -> torch.Tensor:
    """Summed over words: KL(teacher ‖ student) of the next-token distributions that the source's output layer
    (``head``, ``[vocab, hidden]``) gives the two models' last states at each word's end. A state distance weighted by
    what the difference does to the prediction. Chunks of ``chunk`` words are recomputed in the backward pass, so a
    262k-row vocabulary never holds more than one chunk's logits."""
    from torch.utils.checkpoint import checkpoint

    def divergence(mine: torch.Tensor, theirs: torch.Tensor) -> torch.Tensor:
        logits = [(v.to(head.dtype) @ head.T).float() for v in (mine, theirs)]  # in the head's (autocast) dtype
        if softcap:  # Gemma's final logit soft-capping, as its own forward applies it
            logits = [torch.tanh(x / softcap) * softcap for x in logits]
        mine_log, theirs_log = (F.log_softmax(x, dim=-1) for x in logits)
        return F.kl_div(mine_log, theirs_log, log_target=True, reduction="sum")

    total = torch.zeros((), device=student.device)
    for start in range(0, len(student), chunk):
        part = slice(start, start + chunk)
        total = total + checkpoint(divergence, student[part], teacher[part].detach(), use_reentrant=False)
    return total


class AlignLoss(nn.Module):
    """The student's side: ``forward(inputs, word_sentence, n_texts, teacher_vectors) -> summed alignment loss``.

    ``kind`` cosine or mse compare one layer's word vectors; layers, each of ``layers`` (``state_loss``'s
    distance); kl, the last layer's through the source's output layer ``head``. ``teacher`` holds one tensor per
    layer compared."""

    def __init__(self, body: nn.Module, layers: Sequence[int], kind: str, sentence_weight: float,
                 pool: str = "mean", head: torch.Tensor | None = None, softcap: float | None = None):
        super().__init__()
        self.body, self.layers, self.kind, self.sentence_weight, self.pool = body, tuple(layers), kind, sentence_weight, pool
        self.head, self.softcap = head, softcap

    def forward(self, inputs: SideBatch, word_sentence: torch.Tensor, n_texts: int,
                teacher: Sequence[torch.Tensor]) -> torch.Tensor:
        student = states_at(self.body, self.layers, self.kind, inputs, len(teacher[0]), self.pool)
        if self.kind == "layers":
            return distillation_loss(student, teacher, word_sentence, n_texts, self.sentence_weight)
        if self.kind == "kl":
            return next_token_kl(student[0], teacher[0], self.head, self.softcap)
        return alignment_loss(student[0], teacher[0], word_sentence, n_texts, self.kind, self.sentence_weight)


def states_at(body: nn.Module, layers: Sequence[int], kind: str, side: SideBatch, n_words: int,
              pool: str) -> list[torch.Tensor]:
    """Word vectors for loss ``kind``: at each of ``layers`` from one pass's hidden states (layers, as LAPT's
    distillation and its stored teacher read them), else at the one layer by :func:`word_states` (the body cut after
    it, nothing computed above)."""
    if kind == "layers":
        return layer_states(body, side.ids, side.mask, layers, side.positions, side.segments, n_words, pool)
    return [word_states(body, layers[0], side, n_words, pool)]


def exact_rows_from_report(model_dir: Path) -> np.ndarray | None:
    """Target ids the initialization copied exactly, from its transfer report (None without one)."""
    import pandas as pd

    report = Path(model_dir) / REPORT_FILE
    if not report.is_file():
        return None
    table = pd.read_parquet(report, columns=["target_id", "fate"])
    return table.loc[table["fate"].isin(EXACT_FATES), "target_id"].to_numpy(np.int64)


# ---------------------------------------------------------------- run
class AlignRecipe(RunRecipe):
    """One alignment run's recipe (one process; the loop, checkpoints and resume are ``TrainingRun``'s): one stage, in which
    the input-embedding matrix trains (its exactly copied rows masked out of the gradient)."""

    name = "align"
    resumable_changes = frozenset({"steps", "tokens", "seconds", "checkpoint_every", "keep_last", "eval_every",
                                   "log_every"})

    def __init__(self, model_dir: Path, source_dir: Path, train_file: Path, out_dir: Path, spec: AlignSpec,
                 heldout_file: Path | None, exact_rows: np.ndarray | None, progress: bool):
        from transformers import AutoConfig, AutoTokenizer

        if spec.lr == AUTO_OBJECTIVE:  # a library call: the rate of the model's family (the pipeline resolved it)
            decoder = not describe_config(AutoConfig.from_pretrained(model_dir)).is_encoder
            spec = spec.model_copy(update={"lr": family_refine_lr(spec.lr, decoder)})
        super().__init__(spec, out_dir, progress)
        self.require_one_process("align")
        self.model_dir, self.source_dir = Path(model_dir), Path(source_dir)
        if spec.needs_plan:
            raise InputError("an align minutes budget is fixed as steps before the run: call align_embeddings, or "
                             "plan it (plan_align_budget) and pass planned_align_spec's spec")
        self.total_steps, self.time_limit_s = spec.total_steps, spec.seconds
        if self.total_steps <= 0:
            raise InputError("the align budget is zero: set steps or tokens")
        self.require_model_folders(self.model_dir, self.source_dir)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        source_tokenizer = AutoTokenizer.from_pretrained(self.source_dir)
        self.pad_ids = tuple(padding_id(t) for t in (source_tokenizer, self.tokenizer))

        extra = 0 if heldout_file is not None else spec.heldout_texts
        texts = list(read_texts(train_file, limit=spec.max_texts + extra if spec.max_texts else None))
        heldout = list(read_texts(heldout_file, limit=spec.heldout_texts)) if heldout_file is not None else []
        if heldout_file is None:
            if len(texts) <= spec.heldout_texts:
                raise InputError(f"{train_file} has {len(texts)} texts: too few to hold out {spec.heldout_texts}")
            texts, heldout = texts[:-spec.heldout_texts], texts[-spec.heldout_texts:]
        self.guard_texts = heldout  # also the dev slice of the language-model measure that keeps the best state
        self.train_texts = tokenize_pairs(texts, source_tokenizer, self.tokenizer, spec.max_length,
                                          progress=f"{self.name}: reading the training texts" if progress else None)
        heldout_texts = tokenize_pairs(heldout, source_tokenizer, self.tokenizer, spec.max_length)
        self.batches = self._batches(self.train_texts)
        if not self.batches:
            raise InputError(f"no word of {train_file} is covered by both tokenizers")
        self.heldout_batches = [collate_pairs(heldout_texts, indices, -(i + 1), self.pad_ids)
                                for i, indices in enumerate(self._batches(heldout_texts))]
        self.order = SampleOrder(len(self.batches), spec.seed)
        self.given_exact_rows = exact_rows
        self.teacher_cache: dict[int, torch.Tensor] = {}
        self.out_dir.mkdir(parents=True, exist_ok=True)

    def _batches(self, texts: PairedTexts) -> list[np.ndarray]:
        with_words = np.flatnonzero(texts.n_words > 0)
        lengths = np.asarray([len(texts.target_ids[i]) for i in with_words], dtype=np.int64)
        return [with_words[b] for b in length_batches(lengths, self.spec.batch_tokens)]

    # ---------------------------------------------------------------- model
    def build(self) -> Trainable:
        spec, device = self.spec, self.dist.device
        model, _, _ = load_source(self.checkpoint if self.checkpoint is not None else self.model_dir)
        teacher, _, _ = load_source(self.source_dir)
        self.teacher_body = teacher.base_model.to(device).eval().requires_grad_(False)
        depth = layer_count(model.config)
        if layer_count(teacher.config) != depth:
            raise InputError(f"the source model has {layer_count(teacher.config)} layers, the model {depth}: "
                             "align needs the model initialized from this source")
        decoder = not describe_config(model.config).is_encoder
        self.loss = spec.loss if spec.loss != "auto" else ("mse" if decoder else "cosine")
        head, softcap = None, None
        if self.loss == "kl":
            if not decoder:
                raise InputError("align loss=kl compares next-token distributions: it needs a decoder source; use "
                                 "cosine, mse or layers for an encoder")
            # cast once to the autocast dtype: autocast would copy Gemma's 262k-row head again for every chunk
            head = teacher.get_output_embeddings().weight.detach().to(device, self.precision.dtype or torch.float32)
            softcap = getattr(teacher.config, "final_logit_softcapping", None)
            self.layer, self.pool = depth, "last"  # the state the next token is predicted from
        else:
            self.layer = spec.layer or (depth if decoder else math.ceil(depth / 3))
            self.pool = spec.pool if spec.pool != "auto" else ("last" if decoder else "mean")
        self.layers = tuple(spec.layers or default_layers(depth)) if self.loss == "layers" else (self.layer,)
        if max(self.layers) > depth:
            raise InputError(f"align layer {max(self.layers)} exceeds the model's {depth} layers")
        for config in (model.config, teacher.config):
            limit = usable_positions(config)
            if limit is not None and spec.max_length > limit:
                raise InputError(f"align max_length={spec.max_length} exceeds the model's {limit} positions; lower it")

        embeddings = model.get_input_embeddings().weight
        self.trainable_rows, self.trainable_from = self._trainable_rows(len(embeddings))
        if not self.trainable_rows.any():
            log.warning("every embedding row of %s was copied exactly: align changes nothing", self.model_dir)
        if not self.trainable_rows.all():
            mask = torch.from_numpy(self.trainable_rows).to(device=device, dtype=embeddings.dtype)[:, None]
            embeddings.register_hook(lambda grad: grad * mask)
        model.to(device).eval()  # frozen body: no dropout, so the student's states are the model's own
        if spec.keep_best and describe_config(model.config).lm_loss is not None:
            self.guard = LanguageModelDev(self.tokenizer, self.guard_texts, "clm" if decoder else "mlm", spec.max_length,
                                          self.precision, device, spec.seed)
            self.selection = lambda: self.guard(self.hf_model)
            self.selection_name = f"dev {'next-token' if decoder else 'MLM'} loss ({len(self.guard)} texts)"
        loss_model = AlignLoss(model.base_model, self.layers, self.loss, spec.sentence_weight, self.pool, head, softcap)
        # no weight decay: it would move the frozen rows too
        # the student's states run to the aligned layer (for a sentence vector too); a text's tokens, not a padded row
        flops = body_flops_per_token(model, spec.max_length, depth if len(self.layers) > 1 else self.layer, trained=False)
        return Trainable(model, self.tokenizer, loss_model, [embeddings], [{"params": [embeddings], "weight_decay": 0.0}],
                         (TrainingStage("full", 0, frozenset({id(embeddings)})),), "align", flops)

    def _trainable_rows(self, rows: int) -> tuple[np.ndarray, str]:
        if self.spec.trainable == "all":
            return np.ones(rows, dtype=bool), "all rows (trainable='all')"
        exact, origin = self.given_exact_rows, "the given exact rows"
        if exact is None:
            exact, origin = exact_rows_from_report(self.model_dir), REPORT_FILE
        if exact is None:
            log.warning("%s has no %s: aligning all embedding rows", self.model_dir, REPORT_FILE)
            return np.ones(rows, dtype=bool), f"all rows (no {REPORT_FILE})"
        exact = np.asarray(exact)
        trainable = np.ones(rows, dtype=bool)
        trainable[np.flatnonzero(exact) if exact.dtype == bool else exact] = False
        return trainable, f"rows not copied exactly ({origin})"

    def _teacher(self, batch: AlignBatch) -> list[torch.Tensor]:
        """The source model's word vectors for a batch at each compared layer: computed on first use, then kept."""
        if batch.key not in self.teacher_cache:
            with torch.no_grad():
                vectors = states_at(self.teacher_body, self.layers, self.loss, batch.source.to(self.dist.device),
                                    batch.predicted, self.pool)
            self.teacher_cache[batch.key] = [v.to(getattr(torch, self.spec.cache_dtype)) for v in vectors]
        return self.teacher_cache[batch.key]

    # ---------------------------------------------------------------- the loss
    def step_batches(self, start_step: int) -> Iterator[list[AlignBatch]]:
        def produce(step: int) -> list[AlignBatch]:
            index = int(self.order.blocks_for(np.asarray([step]))[0])
            return [collate_pairs(self.train_texts, self.batches[index], index, self.pad_ids)]

        return Prefetcher(iter(range(start_step, self.total_steps)), produce)

    def micro_loss(self, module: nn.Module, batch: AlignBatch) -> torch.Tensor:
        device = self.dist.device
        return module(batch.target.to(device), batch.word_sentence.to(device), batch.n_texts, self._teacher(batch))

    def step_size(self, micro_batches: list[AlignBatch]) -> tuple[int, int]:
        return sum(b.n_texts for b in micro_batches), sum(b.tokens for b in micro_batches)

    @torch.no_grad()
    def evaluate(self) -> float:
        """Mean alignment loss per word on the held-out texts."""
        total, words = 0.0, 0
        for batch in self.heldout_batches:
            with self.precision.autocast():
                total += float(self.micro_loss(self.loss_model, batch))
            words += batch.predicted
        return total / max(words, 1)

    # ---------------------------------------------------------------- output
    def write_model(self, folder: Path) -> None:
        super().write_model(folder)
        for name in (REPORT_FILE, TOTALS_FILE):  # the initialization's record stays with the model
            if (self.model_dir / name).is_file():
                shutil.copy2(self.model_dir / name, folder / name)

    def summary(self, totals: RunTotals) -> dict[str, Any]:
        state = totals.state
        return {
            "layer": self.layer, "layers": list(self.layers), "pool": self.pool,
            "depth": layer_count(self.hf_model.config),
            "loss": self.loss, "steps": state["step"], "samples": state["samples"], "tokens": state["tokens"],
            "epochs": state["step"] / len(self.batches), "train_texts": len(self.train_texts),
            "batches_per_epoch": len(self.batches), "heldout_words": sum(b.predicted for b in self.heldout_batches),
            "trainable_rows": int(self.trainable_rows.sum()), "rows": len(self.trainable_rows),
            "trainable_from": self.trainable_from,
            **loss_summary(state["history"]),
            "teacher_cached_words": sum(len(v[0]) for v in self.teacher_cache.values()),
            "tokens_per_s": totals.tokens_per_s,
            "device": str(self.dist.device),
            "precision": self.precision.name,
            "resumed_from": totals.resumed_from, "train_seconds_this_session": round(totals.train_time, 3),
            "train_seconds": round(state["seconds"], 3), "work_seconds": totals.work_seconds,
            "final_dir": str(self.out_dir / "final"),
        }


def plan_align_budget(model_dir: Path, source_dir: Path, train: Path, spec: AlignSpec, *,
                      work_dir: Path | None = None, progress: bool = False) -> lapt_budget.LaptBudget:
    """Time the first steps of this align run (the teacher's pass over each batch included, as in its first epoch)
    and fix ``spec.minutes`` as steps, as :func:`plan_lapt_budget` does for LAPT."""
    if not spec.needs_plan:
        raise InputError("plan_align_budget needs a minutes budget (init.refine.minutes)")
    probe = spec.model_copy(update={"minutes": None, "steps": lapt_budget.PROBE_STEPS_CEILING, "keep_best": False})
    with tempfile.TemporaryDirectory(prefix="focusflow-align-budget-", dir=work_dir) as folder:
        run = TrainingRun(AlignRecipe(Path(model_dir), Path(source_dir), Path(train), Path(folder), probe, None,
                                      None, progress), resume=False)
        clock = StepClock(run.dist.device)
        count = spec.budget_probe_steps
        with ProgressBar("align budget: timing the first steps", count + 1) if progress else contextlib.nullcontext() as bar:
            per_step = lapt_budget.time_steps(run, 0, count, clock, bar)
    steps = lapt_budget.steps_for_minutes(spec.minutes, per_step)
    return lapt_budget.LaptBudget(minutes=spec.minutes, steps=steps, checkpoint_minutes=[], checkpoint_steps=[],
                                  seconds_per_step=per_step, stage_seconds_per_step={"full": per_step},
                                  tokens_per_step=spec.batch_tokens, probe_steps=count, clock=clock.kind)


def planned_align_spec(spec: AlignSpec, plan: BudgetPlan) -> AlignSpec:
    """``spec`` with its minutes replaced by the steps an ``align-budget`` plan of the same minutes fixed."""
    if plan.minutes != spec.minutes:
        raise InputError(f"the align-budget input plans {plan.minutes} minutes, but init.refine.minutes is "
                         f"{spec.minutes}; plan the budget with the same settings")
    return spec.model_copy(update={"minutes": None, "steps": plan.steps})


def align_embeddings(model_dir: Path, source_dir: Path, train_file: Path, out_dir: Path, spec: AlignSpec | None = None,
                     *, heldout_file: Path | None = None, exact_rows: np.ndarray | None = None, resume: bool = True,
                     on_checkpoint: Callable[[Path, int, dict], None] | None = None,
                     progress: bool = False) -> dict[str, Any]:
    """Align the embeddings of the initialized model in ``model_dir`` to the source model in ``source_dir``.

    ``train_file``: target-language training corpus (never the held-out split); the held-out loss is computed on
    ``heldout_file`` or, without one, on the last ``spec.heldout_texts`` texts of ``train_file`` (then not trained
    on). ``exact_rows`` (target ids or a boolean mask) overrides the rows the transfer report marks as copied
    exactly. ``out_dir`` receives ``final/`` (``save_pretrained`` folder of the same class as ``model_dir``, plus
    its transfer report), ``checkpoints/``, ``metrics.csv``, ``loss_curve.png`` and ``summary.json``; the summary is
    returned. With ``resume`` a run continues from the last complete checkpoint in ``out_dir``.
    """
    spec = spec or AlignSpec()
    plan = None
    if spec.needs_plan:  # a library call plans its minutes here; the pipeline stores the plan (align-budget stage)
        plan = plan_align_budget(model_dir, source_dir, train_file, spec, work_dir=Path(out_dir).parent,
                                 progress=progress)
        spec = planned_align_spec(spec, BudgetPlan(minutes=plan.minutes, steps=plan.steps, clock=plan.clock))
    recipe = AlignRecipe(Path(model_dir), Path(source_dir), Path(train_file), Path(out_dir), spec,
                         Path(heldout_file) if heldout_file is not None else None, exact_rows, progress)
    run = TrainingRun(recipe, resume, on_checkpoint)
    summary = run.train()
    return {**summary, "budget": plan.to_dict()} if plan is not None else summary
