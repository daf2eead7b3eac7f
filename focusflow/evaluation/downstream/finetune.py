"""Fine-tuning on a task: AdamW, linear schedule with warmup, dev evaluation at a fixed fraction of the steps,
the best dev checkpoint kept in memory and restored at the end (the loop is ``training.fit``).

Batches are padded per batch (not to the maximum length), which is most of the speed on a
CPU; evaluation batches are sorted by length for the same reason. The forward passes (training
and dev evaluation) run under the spec's precision (``focusflow.precision``); weights and AdamW
state stay float32.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from focusflow.config import PrecisionName
from focusflow.errors import InputError
from focusflow.precision import resolve_precision
from focusflow.training.compile_probe import (
    CompileDecision,
    CompileSetting,
    decide_compile,
    loss_tolerance,
    uncompile,
)
from focusflow.training.embedding_rows import train_used_rows
from focusflow.training.fit import FitRecipe, fit
from focusflow.training.flops import body_flops_per_token, mfu, peak_flops
from focusflow.training.optimization import Optimization, decay_groups
from focusflow.training.schedules import WarmupSchedule

log = logging.getLogger(__name__)

Feature = dict[str, Any]  # input_ids: list[int], optional token_type_ids, and the task's label fields
SEQUENCE_FIELDS = ("input_ids", "token_type_ids", "labels")


@dataclass(frozen=True)
class FinetuneSpec:
    """Optimization settings of one run (defaults: the FOCUS paper's Table 6 protocol)."""

    lr: float = 2e-5
    epochs: float = 2.0
    batch_size: int = 32
    warmup_fraction: float = 0.1
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    eval_every_fraction: float = 0.05
    eval_batch_size: int = 64
    seed: int = 1
    precision: PrecisionName = "auto"
    embedding_lr_scale: float = 1.0  # the input embedding matrix learns at lr × this (new rows adapt faster)
    patience: int | None = None  # stop after this many dev evaluations without a new best; ``epochs`` is the maximum
    compile: CompileSetting = False  # torch.compile the body; auto: where the probe finds it pays (compile_probe)


#: A run whose best dev evaluation lies in the last tenth of the steps it trained was still improving when it ended.
CONVERGED_BEFORE = 0.9


def converged(best_step: int, steps: int) -> bool:
    """Whether a run's dev score had stopped rising: its best evaluation came before the last tenth of its steps."""
    return steps > 0 and best_step <= CONVERGED_BEFORE * steps


@dataclass
class FinetuneResult:
    total_steps: int  # the steps planned (with patience: the most it could train)
    best_step: int
    best_dev: float
    history: list[tuple[int, float]] = field(default_factory=list)
    train_seconds: float = 0.0
    eval_seconds: float = 0.0
    train_tokens: int = 0
    precision: str = "float32"  # the resolved precision's name
    flops_per_token: float | None = None  # training FLOPs per token (training.flops.body_flops_per_token)
    peak_flops: float | None = None  # what MFU is measured against: the device's peak, a CPU's calibrated ceiling
    steps: int = 0  # the steps trained (fewer than ``total_steps`` when patience stopped the run)
    compile: CompileDecision | None = None  # whether the body ran compiled, and why

    @property
    def converged(self) -> bool:
        return converged(self.best_step, self.steps)

    @property
    def tokens_per_second(self) -> float:
        return self.train_tokens / self.train_seconds if self.train_seconds > 0 else 0.0

    @property
    def mfu(self) -> float | None:
        return mfu(self.tokens_per_second, self.flops_per_token, self.peak_flops) if self.tokens_per_second else None


def collate_features(features: Sequence[Feature], pad_id: int) -> dict[str, torch.Tensor]:
    """Pad to the longest feature of the batch; labels that are sequences pad with -100."""
    width = max(len(f["input_ids"]) for f in features)
    batch: dict[str, torch.Tensor] = {}
    input_ids = np.full((len(features), width), pad_id, dtype=np.int64)
    attention = np.zeros((len(features), width), dtype=np.int64)
    for row, feature in enumerate(features):
        input_ids[row, :len(feature["input_ids"])] = feature["input_ids"]
        attention[row, :len(feature["input_ids"])] = 1
    batch["input_ids"] = torch.from_numpy(input_ids)
    batch["attention_mask"] = torch.from_numpy(attention)
    if "token_type_ids" in features[0]:
        types = np.zeros((len(features), width), dtype=np.int64)
        for row, feature in enumerate(features):
            types[row, :len(feature["token_type_ids"])] = feature["token_type_ids"]
        batch["token_type_ids"] = torch.from_numpy(types)
    if "labels" in features[0]:
        if isinstance(features[0]["labels"], list):
            labels = np.full((len(features), width), -100, dtype=np.int64)
            for row, feature in enumerate(features):
                labels[row, :len(feature["labels"])] = feature["labels"]
            batch["labels"] = torch.from_numpy(labels)
        else:
            batch["labels"] = torch.tensor([f["labels"] for f in features], dtype=torch.long)
    for name in ("start_positions", "end_positions"):
        if name in features[0]:
            batch[name] = torch.tensor([f[name] for f in features], dtype=torch.long)
    return batch


def eval_batches(features: Sequence[Feature], batch_size: int, pad_id: int
                 ) -> Iterator[tuple[list[int], dict[str, torch.Tensor]]]:
    """Length-sorted batches of the model inputs only, with the original index of every row."""
    order = sorted(range(len(features)), key=lambda i: len(features[i]["input_ids"]))
    for start in range(0, len(order), batch_size):
        indices = order[start:start + batch_size]
        batch = collate_features([{k: features[i][k] for k in ("input_ids", "token_type_ids") if k in features[i]}
                         for i in indices], pad_id)
        yield indices, batch


@torch.no_grad()
def predict_logits(model: torch.nn.Module, features: Sequence[Feature], batch_size: int, pad_id: int,
                   ) -> list[Any]:
    """Per-feature model outputs as numpy (logits, or (start, end) logits for QA), unpadded."""
    was_training = model.training
    model.eval()
    results: list[Any] = [None] * len(features)
    device = next(model.parameters()).device
    for indices, batch in eval_batches(features, batch_size, pad_id):
        output = model(**{k: v.to(device) for k, v in batch.items()})
        if hasattr(output, "start_logits") and output.start_logits is not None:
            starts, ends = output.start_logits.float().cpu().numpy(), output.end_logits.float().cpu().numpy()
            for row, index in enumerate(indices):
                n = len(features[index]["input_ids"])
                results[index] = (starts[row, :n], ends[row, :n])
        else:
            logits = output.logits.float().cpu().numpy()
            for row, index in enumerate(indices):
                results[index] = logits[row, :len(features[index]["input_ids"])] if logits.ndim == 3 else logits[row]
    model.train(was_training)
    return results


def _optimizer(model: torch.nn.Module, spec: FinetuneSpec) -> torch.optim.Optimizer:
    groups = decay_groups([p for p in model.parameters() if p.requires_grad], spec.weight_decay)
    decay = groups[0]["params"]
    embeddings = model.get_input_embeddings().weight if spec.embedding_lr_scale != 1.0 else None
    if embeddings is not None and any(p is embeddings for p in decay):  # own group, scheduled like the others
        groups[0]["params"] = [p for p in decay if p is not embeddings]
        groups.append({"params": [embeddings], "weight_decay": spec.weight_decay, "lr": spec.lr * spec.embedding_lr_scale})
    try:  # fused: one kernel over all parameters; 6x faster than the per-tensor loop for a 250k x 384 vocabulary
        return torch.optim.AdamW(groups, lr=spec.lr, fused=True)
    except (RuntimeError, ValueError):  # a device or dtype without the fused kernel
        return torch.optim.AdamW(groups, lr=spec.lr)


def finetune(model: torch.nn.Module, train_features: Sequence[Feature], evaluate_dev: Callable[[], float],
             spec: FinetuneSpec, pad_id: int,
             on_progress: Callable[[int, int, float | None], None] | None = None) -> FinetuneResult:
    """Train ``model`` in place (``training.fit``); on return it holds the weights of the best dev evaluation.

    ``evaluate_dev`` runs under the same precision as training; ``on_progress(step, total_steps, last_dev)``
    is called after every step (a caller that shows progress throttles it)."""
    if not train_features:
        raise InputError("no training features: the training split is empty after preprocessing")
    torch.manual_seed(spec.seed)
    generator = np.random.default_rng(spec.seed)
    steps_per_epoch = math.ceil(len(train_features) / spec.batch_size)
    total_steps = max(1, math.ceil(steps_per_epoch * spec.epochs))
    warmup_steps = int(spec.warmup_fraction * total_steps)
    # the embedding rows no training text uses never move (no weight decay): only the used ones are trained, without
    # a dense gradient over the whole vocabulary each step (training.embedding_rows); the result is the same
    rows = train_used_rows(model, (f["input_ids"] for f in train_features)) if spec.weight_decay == 0.0 else None
    optimizer = _optimizer(model, spec)
    scheduler = WarmupSchedule("linear", warmup_steps, total_steps, ramp="first").build(optimizer)
    result = FinetuneResult(total_steps=total_steps, best_step=0, best_dev=-math.inf)

    def batches() -> Iterator[list[int]]:
        while True:
            order = generator.permutation(len(train_features))
            for start in range(0, len(order), spec.batch_size):
                yield order[start:start + spec.batch_size].tolist()

    device = next(model.parameters()).device
    precision = resolve_precision(spec.precision, device)
    result.precision = precision.name
    mean_length = sum(len(f["input_ids"]) for f in train_features) / len(train_features)
    result.flops_per_token = body_flops_per_token(model, mean_length)
    result.peak_flops = peak_flops(device, precision.dtype)
    batch_indices = batches()

    def loss(step: int) -> torch.Tensor:
        batch = collate_features([train_features[i] for i in next(batch_indices)], pad_id)
        result.train_tokens += int(batch["attention_mask"].sum())  # counted on the CPU: no wait for a GPU
        batch = {k: v.to(device) for k, v in batch.items()}
        with precision.autocast():
            return model(**batch).loss

    def evaluate() -> float:
        with precision.autocast():
            score = float(evaluate_dev())
        model.train()
        return score

    eval_every = max(1, round(total_steps * spec.eval_every_fraction))

    def progressed(step: int, step_loss: float, last_dev: float | None) -> None:
        if on_progress is not None:
            on_progress(step, total_steps, last_dev)

    result.compile = _compile(model, spec, train_features, pad_id, precision, total_steps)
    recipe = FitRecipe("fine-tuning", loss, evaluate, spec.lr)
    optimization = Optimization(optimizer, scheduler, torch.amp.GradScaler(device.type)
                                if precision.needs_scaler else None, spec.max_grad_norm)
    model.train()
    try:
        fitted = fit(recipe, optimization, list(model.parameters()), total_steps, eval_every,
                     patience=spec.patience, on_step=progressed)
    finally:  # the caller's model runs eager again (its test predictions, a later fine-tuning), failed or not
        if result.compile.compiled:
            uncompile(model.base_model)
    result.history, result.best_step, result.best_dev = fitted.history, fitted.best_step, fitted.best_score
    result.steps = fitted.steps
    result.train_seconds, result.eval_seconds = fitted.train_seconds, fitted.eval_seconds
    if rows is not None:  # a plain embedding again, the trained rows written in
        plain = torch.nn.Embedding(rows.num_embeddings, rows.embedding_dim, padding_idx=rows.padding_idx,
                                   device=rows.weight.device, dtype=rows.weight.dtype)
        with torch.no_grad():
            plain.weight.copy_(rows.full_weight())
        model.set_input_embeddings(plain)
    model.eval()
    return result


def _compile(model: torch.nn.Module, spec: FinetuneSpec, features: Sequence[Feature], pad_id: int, precision: Any,
             steps: int) -> CompileDecision:
    """The body compiled as ``spec.compile`` says; ``auto`` measures it on a batch of the training features."""
    body = getattr(model, "base_model", None)
    if body is None or body is model:
        return CompileDecision(False, "nothing to compile")
    batch = collate_features(list(features[:spec.batch_size]), pad_id)
    device = next(model.parameters()).device
    batch = {k: v.to(device) for k, v in batch.items()}

    def loss() -> torch.Tensor:
        with precision.autocast():
            return model(**batch).loss

    signature = {"model": model.config.model_type, "head": type(model).__name__,
                 "parameters": sum(p.numel() for p in body.parameters()), "batch": list(batch["input_ids"].shape),
                 "precision": precision.name}
    decision = decide_compile(spec.compile, body, loss, steps, "fine-tuning", signature,
                              loss_tolerance(precision.dtype), owner=model)
    if decision.probe is not None:
        log.info("fine-tuning: %s", decision.reason)
    return decision
