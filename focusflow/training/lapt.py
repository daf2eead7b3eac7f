"""``run_lapt``: language-adaptive pretraining of an initialized model on the target corpus (MLM for encoders,
causal LM for decoders), optionally two-stage (embeddings and head first) and with LoRA adapters.

The recipe follows the FOCUS paper (Table 5): AdamW (0.9, 0.999, eps 1e-8), no weight decay, peak lr 5e-5, linear
warmup over 10% of the budget then constant (cosine/linear selectable), clipping 1.0, effective batch 128 by
gradient accumulation, sequences of 256 packed tokens. The loop, checkpoints and resume are
:class:`~focusflow.training.loop.TrainingRun`'s.
"""

from __future__ import annotations

import copy
import json
import logging
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from focusflow.config import LaptSpec
from focusflow.errors import InputError
from focusflow.methods import AUTO_OBJECTIVE, LAPT_OBJECTIVES, family_objective
from focusflow.models.lm_stats import EVAL_STREAM, Masker
from focusflow.models.loading import (
    require_vocabulary_fits,
    usable_positions,
)
from focusflow.models.model_type import source_is_decoder
from focusflow.tokenizer.source_ids import named_function
from focusflow.training import checkpoint as ckpt
from focusflow.training.data import PackedSequences, SampleOrder, iter_sample_ranges, pretokenize
from focusflow.training.flops import flops_per_token, mfu
from focusflow.training.lm_loss import LossModel, head_modules
from focusflow.training.lm_model import LAPT_RESUMABLE_CHANGES, load_model
from focusflow.training.loader import MicroBatch, Prefetcher, make_micro_batch
from focusflow.training.loop import TrainingRun
from focusflow.training.monitor import loss_summary
from focusflow.training.optimization import decay_groups
from focusflow.training.recipe import RunRecipe, RunTotals, Trainable, TrainingStage

log = logging.getLogger(__name__)

LORA_STATE = "trainable.safetensors"  # under a checkpoint's trainer/: adapters and trained weights of a LoRA run


class LaptRecipe(RunRecipe):
    """One LAPT run's recipe: packed pre-tokenized sequences, MLM or CLM, two-stage and LoRA."""

    name = "LAPT"
    resumable_changes = LAPT_RESUMABLE_CHANGES

    def __init__(self, model_dir: Path, train: Path, heldout: Path, spec: LaptSpec, out_dir: Path, progress: bool):
        from transformers import AutoTokenizer

        super().__init__(spec, out_dir, progress)
        self.model_dir = Path(model_dir)
        self.total_steps = spec.total_steps
        if spec.needs_plan:
            raise InputError("a minutes budget is fixed as steps first (training.lapt_budget.plan_lapt_budget, the "
                             "lapt-budget stage); pass training.lapt_budget.planned_spec(spec, plan)")
        if self.total_steps <= 0:
            raise InputError("the LAPT budget is zero: set lapt.steps, lapt.samples, lapt.tokens or lapt.minutes")
        per_step = self.dist.world_size * spec.micro_batch_size
        if spec.batch_size % per_step:
            raise InputError(f"lapt.batch_size={spec.batch_size} must be a multiple of world_size × micro_batch_size "
                             f"= {self.dist.world_size} × {spec.micro_batch_size}; adjust micro_batch_size")
        self.accumulation = spec.batch_size // per_step
        self.require_model_folders(self.model_dir)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)

        # Data: rank 0 tokenizes once into memory-mapped arrays, the others wait and map them.
        data_dir = self.out_dir / "data"
        if self.dist.main:
            self.train_meta = pretokenize(Path(train), self.tokenizer, data_dir / "train_ids.npy", progress)
            pretokenize(Path(heldout), self.tokenizer, data_dir / "heldout_ids.npy", progress)
        self.dist.barrier()
        if not self.dist.main:
            self.train_meta = json.loads((data_dir / "train_ids.json").read_text())
        self.train_data = PackedSequences(data_dir / "train_ids.npy", spec.seq_len)
        self.heldout_data = PackedSequences(data_dir / "heldout_ids.npy", spec.seq_len)
        if len(self.heldout_data) == 0:
            raise InputError(f"held-out corpus {heldout} has fewer than seq_len={spec.seq_len} tokens; give more "
                             "held-out text or lower lapt.seq_len")
        self.order = SampleOrder(len(self.train_data), spec.seed)

    def build(self) -> Trainable:
        spec = self.spec
        source = self.checkpoint if (self.checkpoint is not None and not spec.lora) else self.model_dir
        model, lm_loss = load_model(source, spec.attn_implementation, spec.dropout)
        limit = usable_positions(model.config)
        if limit is not None and spec.seq_len > limit:
            raise InputError(f"lapt.seq_len={spec.seq_len} exceeds the model's {limit} positions; lower it")
        require_vocabulary_fits(model, self.tokenizer, self.model_dir)
        if lm_loss == "mlm":
            self.masker = Masker.for_tokenizer(self.tokenizer, spec.mlm_probability, spec.whole_word_masking, spec.seed)
        else:
            self.masker = None
        head = frozenset(id(p) for m in head_modules(model) for p in m.parameters())
        full = self._add_lora(model, head) if spec.lora else frozenset(id(p) for p in model.parameters())
        parameters = [p for p in model.parameters() if id(p) in full | head]
        self.stage1_steps = round(spec.embeddings_only_fraction * self.total_steps)
        model.to(self.dist.device)
        model.train()
        loss_model = LossModel(model, lm_loss, spec.masked_only_projection)
        flops = flops_per_token(model, spec.seq_len, lm_loss, loss_model.masked_only, spec.mlm_probability)
        return Trainable(model, self.tokenizer, loss_model, parameters, decay_groups(parameters, spec.weight_decay),
                         (TrainingStage("embeddings", 0, head), TrainingStage("full", self.stage1_steps, full)),
                         lm_loss, flops)

    # ---------------------------------------------------------------- LoRA
    def _add_lora(self, model: nn.Module, head: frozenset[int]) -> frozenset[int]:
        """Inject LoRA adapters into ``model`` in place; the parameters the full stage trains (adapters, plus
        embeddings and head with ``lora_train_embeddings``)."""
        from peft import LoraConfig, get_peft_model

        spec = self.spec
        lora = LoraConfig(r=spec.lora_rank, lora_alpha=spec.lora_alpha, lora_dropout=spec.lora_dropout,
                          target_modules=spec.lora_target_modules, bias="none")
        self.peft_model = get_peft_model(model, lora)
        adapters = frozenset(id(p) for n, p in model.named_parameters() if "lora_" in n)
        return adapters | head if spec.lora_train_embeddings else adapters

    def write_model(self, folder: Path) -> None:
        if not self.spec.lora:
            return super().write_model(folder)
        merged = copy.deepcopy(self.peft_model).merge_and_unload()  # a plain model: readers need no peft
        merged.save_pretrained(folder)
        del merged
        self.tokenizer.save_pretrained(folder)

    def write_extras(self, folder: Path) -> None:
        """A LoRA checkpoint's HF folder holds merged weights: keep the adapters and trained weights apart."""
        if not self.spec.lora:
            return
        from safetensors.torch import save_file

        (folder / ckpt.TRAINER_DIR).mkdir(exist_ok=True)
        trained = set().union(*(stage.parameters for stage in self.trainable.stages))
        tensors = {n: p.detach().cpu().contiguous() for n, p in self.hf_model.named_parameters() if id(p) in trained}
        save_file(tensors, folder / ckpt.TRAINER_DIR / LORA_STATE)

    def restore_extras(self, folder: Path) -> None:
        if not self.spec.lora:
            return
        from safetensors.torch import load_file

        trained = load_file(folder / ckpt.TRAINER_DIR / LORA_STATE)
        missing = set(trained) - {n for n, _ in self.hf_model.named_parameters()}
        if missing:
            raise InputError(f"checkpoint {folder} does not match the LoRA model: {sorted(missing)[:3]}")
        self.hf_model.load_state_dict(trained, strict=False)

    # ---------------------------------------------------------------- data
    def step_batches(self, start_step: int) -> Iterator[list[MicroBatch]]:
        spec, pin = self.spec, self.dist.device.type == "cuda"
        ranges = iter_sample_ranges(start_step * spec.batch_size, self.total_steps - start_step, spec.batch_size,
                                    self.dist.world_size, self.dist.rank, spec.micro_batch_size)

        def produce(micro_ranges: list[np.ndarray]) -> list[MicroBatch]:
            return [make_micro_batch(self.train_data.blocks(self.order.blocks_for(s)), s, self.masker, pin)
                    for s in micro_ranges]

        return Prefetcher(ranges, produce, depth=spec.prefetch)

    # ---------------------------------------------------------------- evaluation
    @torch.no_grad()
    def evaluate(self) -> float:
        """Mean held-out loss per predicted token on a fixed, evenly spaced set of held-out sequences."""
        spec = self.spec
        count = min(spec.eval_sequences, len(self.heldout_data))
        blocks = np.linspace(0, len(self.heldout_data) - 1, count).round().astype(np.int64)
        mine = blocks[self.dist.rank::self.dist.world_size]
        self.hf_model.eval()
        total = torch.zeros((), dtype=torch.float64, device=self.dist.device)
        predicted = 0
        for start in range(0, len(mine), spec.micro_batch_size):
            chosen = mine[start:start + spec.micro_batch_size]
            ids = self.heldout_data.blocks(chosen)
            if self.masker is not None:
                inputs, labels = self.masker(ids, chosen, stream=EVAL_STREAM)
                labels_t = torch.from_numpy(labels).to(self.dist.device)
            else:
                inputs, labels_t = ids, None
            with self.precision.autocast():
                loss, n = self.loss_model(torch.from_numpy(inputs).to(self.dist.device), labels_t)
            total += loss.double()
            predicted += int(n)
        self.hf_model.train()
        loss_sum, n = self.dist.sum([float(total), float(predicted)])
        return loss_sum / max(n, 1.0)

    def micro_loss(self, module: nn.Module, mb: MicroBatch) -> torch.Tensor:
        device = self.dist.device
        input_ids = mb.input_ids.to(device, non_blocking=True)
        labels = mb.labels.to(device, non_blocking=True) if mb.labels is not None else None
        positions = mb.positions.to(device, non_blocking=True) if mb.positions is not None else None
        loss_sum, _ = module(input_ids, labels, positions)
        return loss_sum

    def step_size(self, micro_batches: list[MicroBatch]) -> tuple[int, int]:
        return self.spec.batch_size, self.spec.batch_size * self.spec.seq_len

    def summary(self, totals: RunTotals) -> dict[str, Any]:
        spec, state, trainable = self.spec, totals.state, self.trainable
        speed = totals.tokens_per_s
        return {
            "objective": spec.objective, "lm_loss": trainable.loss, "steps": state["step"], "samples": state["samples"],
            "tokens": state["tokens"], "epochs": state["samples"] / len(self.train_data),
            "train_sequences": len(self.train_data), "train_corpus_tokens": self.train_meta["tokens"],
            **loss_summary(state["history"]),
            "tokens_per_s": speed, "flops_per_token": trainable.flops_per_token,
            "mfu": mfu(speed, trainable.flops_per_token, totals.peak_flops) if speed else None,
            "device": str(self.dist.device),
            "world_size": self.dist.world_size, "precision": self.precision.name,
            "parameters": sum(p.numel() for p in self.hf_model.parameters()),
            "trainable_parameters": sum(p.numel() for p in trainable.parameters), "lora": spec.lora,
            "two_stage_embedding_steps": self.stage1_steps, "resumed_from": totals.resumed_from,
            "train_seconds_this_session": round(totals.train_time, 3), "work_seconds": totals.work_seconds,
            "final_dir": str(self.out_dir / "final"),
            "peak_gpu_memory_bytes": (torch.cuda.max_memory_allocated(self.dist.device)
                                      if self.dist.device.type == "cuda" else None),
        }


def with_objective_resolved(spec: LaptSpec, model_dir: Path) -> LaptSpec:
    """``spec`` with ``objective: auto`` as the model's family trains (a library call's: the flows resolve it before
    keying, ``pipeline.family_defaults``)."""
    if spec.objective != AUTO_OBJECTIVE:
        return spec
    decoder = bool(source_is_decoder(str(model_dir)))
    return spec.model_copy(update={"objective": family_objective(spec.objective, decoder)})


def lapt_run(model_dir: Path, train: Path, heldout: Path, spec: LaptSpec, out_dir: Path, resume: bool,
             on_checkpoint: Callable[[Path, int, dict], None] | None, progress: bool,
             source_dir: Path | None = None, teacher_dir: Path | None = None) -> TrainingRun:
    """The run of ``spec.objective``: the loop handed its row's recipe (``methods.LAPT_OBJECTIVES``): ``LaptRecipe``
    (the model's own LM loss) or ``training.distill.DistillRecipe`` (``teacher_dir``: the teacher's stored word
    states, ``training.teacher``; without, it computes them)."""
    auto = spec.objective == AUTO_OBJECTIVE
    spec = with_objective_resolved(spec, model_dir)
    row = LAPT_OBJECTIVES[spec.objective]
    recipe_class = named_function(row.recipe)
    if not row.teacher:
        recipe = recipe_class(model_dir, train, heldout, spec, out_dir, progress)
    elif source_dir is None:
        chosen = " (auto: an encoder distills)" if auto else ""
        raise InputError(f"lapt.objective={spec.objective}{chosen} needs the source model as teacher (the flows pass "
                         "it; focusflow lapt --source SOURCE), or set lapt.objective=mlm for the model's own loss")
    else:
        recipe = recipe_class(model_dir, source_dir, train, heldout, spec, out_dir, progress, teacher_dir)
    return TrainingRun(recipe, resume, on_checkpoint)


def run_lapt(model_dir: Path, train: Path, heldout: Path, spec: LaptSpec, out_dir: Path, resume: bool = True,
             on_checkpoint: Callable[[Path, int, dict], None] | None = None, progress: bool = False,
             source_dir: Path | None = None, teacher_dir: Path | None = None) -> dict:
    """Continue pretraining ``model_dir`` on the ``train`` corpus; evaluate on ``heldout``; write into ``out_dir``.

    ``out_dir`` receives ``checkpoints/step-XXXXXXXX/`` (each a complete ``save_pretrained`` folder
    plus trainer state; ``latest`` names the last complete one), ``final/`` (model + tokenizer),
    ``metrics.csv``, ``loss_curve.png`` and ``summary.json``; the summary is returned. With
    ``resume`` a run continues from the last complete checkpoint in ``out_dir``.
    ``on_checkpoint(folder, step, metrics)`` is called on rank 0 after each checkpoint is committed.
    Under ``torchrun`` every rank calls this; rank 0 writes. ``source_dir``: the teacher of a ``distill`` objective,
    ``teacher_dir`` its stored word states.
    """
    if math.isclose(spec.embeddings_only_fraction, 1.0) and spec.lora:
        log.warning("embeddings_only_fraction=1 with LoRA: the adapters are never trained")
    run = lapt_run(model_dir, train, heldout, spec, out_dir, resume, on_checkpoint, progress, source_dir, teacher_dir)
    try:
        return run.train()
    finally:
        if run.dist.owns_group and dist.is_initialized():
            dist.destroy_process_group()
