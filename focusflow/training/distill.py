"""LAPT by distillation: the specialized model learns to read the language as its source already reads it.

MLM is a slow teacher for a new tokenizer: every step predicts 15% of the tokens from scratch. The source model is
at hand and reads the same text with its own tokenizer, so the specialized model (the student, body trainable) is
trained to give, for every word both tokenizations cover, the hidden states the source (the teacher, frozen) gives
it, at several layers (a third, two thirds and all of the depth by default) and for the sentence as a whole
(``lapt.objective: distill``); ``mlm+distill`` adds the model's own masked-LM loss on the same texts.

:func:`distillation_loss` is the one loss (issue 39 shares it with the decoder refinement): per layer, the squared
distance of word vectors divided by the teacher's mean squared norm at that layer, so every layer counts alike
whatever the scale of its states. The word alignment is ``training.wordpool``'s (align's), the loop, checkpoints,
resume, budget and divergence checks are ``TrainingRun``'s: the objective differs, nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from focusflow.config import LaptSpec
from focusflow.errors import InputError
from focusflow.models.lm_stats import Masker, layer_count, length_batches, pad_rows, padding_id
from focusflow.models.loading import describe_config, load_source
from focusflow.training.align import (
    AlignBatch,
    collate_pairs,
    tokenize_pairs,
)
from focusflow.training.data import SampleOrder
from focusflow.training.flops import body_flops_per_token
from focusflow.training.lm_model import LAPT_RESUMABLE_CHANGES, load_model
from focusflow.training.loader import Prefetcher
from focusflow.training.monitor import loss_summary
from focusflow.training.optimization import decay_groups
from focusflow.training.recipe import RunRecipe, RunTotals, Trainable, TrainingStage
from focusflow.training.state_loss import default_layers, distillation_loss, layer_states
from focusflow.training.teacher import TeacherStates, distillation_texts, selected_texts, texts_digest

TEXTS_FILE = "distill_texts.json"  # in each checkpoint: the digests of the texts the run reads


def refuse_unused_settings(spec: Any, lm_loss: str) -> None:
    """A distillation trains every parameter in one stage, and its LM term is a masked LM's: ``lapt.lora``,
    ``embeddings_only_fraction`` and a decoder's ``mlm+distill`` were silently ignored (a run keyed and named as
    LoRA or two-stage was a full fine-tune; a decoder's ``+mlm+distill`` learned no LM term)."""
    unused = [name for name, used in (("lapt.lora", spec.lora),
                                      ("lapt.embeddings_only_fraction", spec.embeddings_only_fraction > 0)) if used]
    if unused:
        raise InputError(f"{' and '.join(unused)} apply to lapt.objective=mlm; a distillation ({spec.objective}, "
                         "auto for an encoder) trains every parameter in one stage: set lapt.objective=mlm, or unset "
                         "them")
    if "mlm" in spec.objective.split("+") and lm_loss != "mlm":
        raise InputError(f"lapt.objective={spec.objective} adds a masked-LM term, which a causal decoder has not: use "
                         "distill, or mlm (its own causal LM)")


class DistillRecipe(RunRecipe):
    """LAPT with ``lapt.objective`` ``distill`` or ``mlm+distill`` (one process; the loop is ``TrainingRun``'s)."""

    name = "LAPT"
    resumable_changes = LAPT_RESUMABLE_CHANGES

    def __init__(self, model_dir: Path, source_dir: Path, train: Path, heldout: Path, spec: LaptSpec, out_dir: Path,
                 progress: bool, teacher_dir: Path | None = None):
        from transformers import AutoTokenizer

        super().__init__(spec, out_dir, progress)
        self.require_one_process("lapt.objective=distill")
        if spec.minutes:
            raise InputError("a minutes budget is fixed as steps first (the lapt-budget stage)")
        self.total_steps = spec.total_steps
        if self.total_steps <= 0:
            raise InputError("the LAPT budget is zero: set lapt.steps, lapt.samples, lapt.tokens or lapt.minutes")
        self.model_dir, self.source_dir = Path(model_dir), Path(source_dir)
        self.require_model_folders(self.model_dir, self.source_dir)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        source_tokenizer = AutoTokenizer.from_pretrained(self.source_dir)
        self.pad_ids = (padding_id(source_tokenizer), padding_id(self.tokenizer))
        read = distillation_texts(train, heldout, spec.eval_sequences)
        texts, held = read["train"], read["heldout"]
        self.stored_teacher = TeacherStates(teacher_dir) if teacher_dir is not None else None
        if self.stored_teacher is not None:  # it read the texts the run needs: the run reads those, and only those
            texts = selected_texts(texts, self.stored_teacher.selected())
        self.text_digests = {"train": texts_digest(texts), "heldout": texts_digest(held)}
        if self.stored_teacher is not None:
            for split, split_texts in (("train", texts), ("heldout", held)):
                self.stored_teacher.check_texts(split, len(split_texts), self.text_digests[split])
        if not texts or not held:
            raise InputError(f"lapt.objective={spec.objective} needs training and held-out texts ({train}, {heldout})")
        self.train_texts = tokenize_pairs(texts, source_tokenizer, self.tokenizer, spec.seq_len,
                                          progress=f"{self.name}: reading the training texts" if progress else None)
        heldout_texts = tokenize_pairs(held, source_tokenizer, self.tokenizer, spec.seq_len)
        budget = spec.batch_size * spec.seq_len  # student tokens per step, as a packed MLM step has
        self.batches = self._batches(self.train_texts, budget)
        if not self.batches:
            raise InputError(f"no word of {train} is covered by both tokenizers")
        self.heldout_batches = [self._with_teacher(collate_pairs(heldout_texts, indices, -(i + 1), self.pad_ids),
                                                   "heldout", heldout_texts, indices)
                                for i, indices in enumerate(self._batches(heldout_texts, budget))]
        self.order = SampleOrder(len(self.batches), spec.seed)
        self.out_dir.mkdir(parents=True, exist_ok=True)

    def _with_teacher(self, batch: AlignBatch, split: str, texts: Any, indices: np.ndarray) -> AlignBatch:
        """The batch with its teacher states read from the stored ones (none stored: the teacher computes them)."""
        if self.stored_teacher is not None:
            rows = self.stored_teacher.rows(split, indices, [texts.spans[i] for i in indices])
            batch.teacher = self.stored_teacher.gather(split, rows)
        return batch

    @staticmethod
    def _batches(texts: Any, budget: int) -> list[np.ndarray]:
        with_words = np.flatnonzero(texts.n_words > 0)
        lengths = np.asarray([len(texts.target_ids[i]) for i in with_words], dtype=np.int64)
        return [with_words[b] for b in length_batches(lengths, budget)]

    # ---------------------------------------------------------------- model
    def build(self) -> Trainable:
        spec, device = self.spec, self.dist.device
        source = self.checkpoint if self.checkpoint is not None else self.model_dir
        model, lm_loss = load_model(source, spec.attn_implementation, spec.dropout)
        depth = layer_count(model.config)
        self.layers = tuple(spec.distill_layers or default_layers(depth))
        self.pool = "last" if not describe_config(model.config).is_encoder else "mean"
        if self.stored_teacher is None:  # read at every step; with stored states the teacher model is never loaded
            teacher, _, _ = load_source(self.source_dir, with_head=False)
            self.teacher_body = teacher.to(device).eval().requires_grad_(False)
            teacher_depth = layer_count(teacher.config)
        else:
            from transformers import AutoConfig

            teacher_depth = layer_count(AutoConfig.from_pretrained(self.source_dir))
            if self.stored_teacher.seq_len not in (None, spec.seq_len):
                raise InputError(f"the stored teacher states were computed at {self.stored_teacher.seq_len} tokens a "
                                 f"text; this distillation reads {spec.seq_len}: compute them with its settings")
            if (self.stored_teacher.layers, self.stored_teacher.pool) != (self.layers, self.pool):
                raise InputError(f"the stored teacher states hold layers {list(self.stored_teacher.layers)} pooled "
                                 f"by {self.stored_teacher.pool}; this distillation reads {list(self.layers)} by "
                                 f"{self.pool}: compute them with its settings")
        if teacher_depth != depth:
            raise InputError(f"the source model has {teacher_depth} layers, the model {depth}: "
                             "distillation needs the model initialized from this source")
        if max(self.layers) > depth:
            raise InputError(f"lapt.distill_layers {list(self.layers)} exceed the model's {depth} layers")
        refuse_unused_settings(spec, lm_loss)
        self.masker = (Masker.for_tokenizer(self.tokenizer, spec.mlm_probability, spec.whole_word_masking, spec.seed)
                       if "mlm" in spec.objective.split("+") else None)
        self.lm_loss = lm_loss
        model.to(device).train()
        parameters = list(model.parameters())
        flops = body_flops_per_token(model, spec.seq_len)  # the student's training; the teacher reads on top
        everything = frozenset(id(p) for p in parameters)
        return Trainable(model, self.tokenizer, model, parameters, decay_groups(parameters, spec.weight_decay),
                         (TrainingStage("full", 0, everything),), spec.objective, flops)

    # ---------------------------------------------------------------- the loss
    def step_batches(self, start_step: int) -> Iterator[list[AlignBatch]]:
        def produce(step: int) -> list[AlignBatch]:
            index = int(self.order.blocks_for(np.asarray([step]))[0])
            indices = self.batches[index]
            batch = collate_pairs(self.train_texts, indices, index, self.pad_ids)
            batch.step = step
            return [self._with_teacher(batch, "train", self.train_texts, indices)]

        return Prefetcher(iter(range(start_step, self.total_steps)), produce)

    def _teacher(self, batch: AlignBatch) -> list[torch.Tensor]:
        if batch.teacher is not None:
            return [states.to(self.dist.device) for states in batch.teacher]
        side = batch.source.to(self.dist.device)
        with torch.no_grad():
            return layer_states(self.teacher_body, side.ids, side.mask, self.layers, side.positions, side.segments,
                                batch.predicted, self.pool)

    def _distill(self, model: nn.Module, batch: AlignBatch) -> torch.Tensor:
        side = batch.target.to(self.dist.device)
        student = layer_states(model.base_model, side.ids, side.mask, self.layers, side.positions, side.segments,
                               batch.predicted, self.pool)
        return distillation_loss(student, self._teacher(batch), batch.word_sentence.to(self.dist.device),
                                 batch.n_texts, self.spec.distill_sentence_weight)

    def _mlm(self, model: nn.Module, batch: AlignBatch) -> torch.Tensor:
        """The mean masked-LM loss on the batch's own texts (fixed masks from the step, like LAPT's)."""
        # a training batch's masks change with the step (its texts come back every epoch), a held-out batch's stay
        draw = [self.spec.seed, abs(batch.key), int(batch.key < 0)] + ([batch.step] if batch.step is not None else [])
        rng = np.random.default_rng(draw)
        rows = [ids for ids in batch.target.ids.numpy()]
        lengths = batch.target.mask.sum(1).tolist()
        inputs, labels = [], []
        for ids, length in zip(rows, lengths, strict=True):
            masked, selected = self.masker.mask(ids[:length], self.masker.special[ids[:length]], rng)
            inputs.append(masked)
            labels.append(np.where(selected, ids[:length], -100))
        ids, mask = pad_rows(inputs, self.pad_ids[1])
        targets, _ = pad_rows(labels, -100)
        device = self.dist.device
        logits = model(input_ids=torch.from_numpy(ids).to(device),
                       attention_mask=torch.from_numpy(mask).to(device)).logits
        return nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                                           torch.from_numpy(targets).to(device).reshape(-1), ignore_index=-100)

    def micro_loss(self, module: nn.Module, batch: AlignBatch) -> torch.Tensor:
        """The batch's mean loss × its words (the loop divides a step's sum by its words)."""
        loss = self._distill(module, batch) / max(batch.predicted, 1)
        if self.masker is not None:
            loss = loss + self.spec.distill_mlm_weight * self._mlm(module, batch)
        return loss * batch.predicted

    def step_size(self, micro_batches: list[AlignBatch]) -> tuple[int, int]:
        return sum(b.n_texts for b in micro_batches), sum(b.tokens for b in micro_batches)

    @torch.no_grad()
    def evaluate(self) -> float:
        """The distillation loss per word on the held-out texts (the MLM term too, for ``mlm+distill``)."""
        self.hf_model.eval()
        total, words = 0.0, 0
        for batch in self.heldout_batches:
            with self.precision.autocast():
                total += float(self.micro_loss(self.hf_model, batch))
            words += batch.predicted
        self.hf_model.train()
        return total / max(words, 1)

    def write_extras(self, folder: Path) -> None:
        """Which texts the run reads (a resumed run must read the same: its batches are a function of them)."""
        (folder / TEXTS_FILE).write_text(json.dumps(self.text_digests), encoding="utf-8")

    def restore_extras(self, folder: Path) -> None:
        if (folder / TEXTS_FILE).is_file() and json.loads((folder / TEXTS_FILE).read_text(encoding="utf-8")) != \
                self.text_digests:
            raise InputError(f"{self.out_dir} holds a distillation of other texts (another corpus, or teacher "
                             "states selected for another step count); use a new out_dir or resume=False")

    def summary(self, totals: RunTotals) -> dict[str, Any]:
        state, speed = totals.state, totals.tokens_per_s
        return {"objective": self.spec.objective, "lm_loss": self.lm_loss, "layers": list(self.layers),
                "pool": self.pool, "steps": state["step"], "samples": state["samples"], "tokens": state["tokens"],
                "epochs": state["step"] / len(self.batches), "train_texts": len(self.train_texts),
                **loss_summary(state["history"]), "tokens_per_s": speed, "device": str(self.dist.device),
                "world_size": 1, "precision": self.precision.name,
                "parameters": sum(p.numel() for p in self.hf_model.parameters()), "resumed_from": totals.resumed_from,
                "teacher": "stored states" if self.stored_teacher is not None else "computed every step",
                "train_seconds_this_session": round(totals.train_time, 3), "work_seconds": totals.work_seconds,
                "final_dir": str(self.out_dir / "final")}


__all__ = ["DistillRecipe", "default_layers", "distillation_loss", "layer_states"]
