"""``Optimization``: AdamW, its learning-rate schedule and the fp16 loss scaler, built, stepped, saved and
restored as one, so a training loop holds one object instead of three that must always move together (a
checkpoint without the scheduler's state would resume on the wrong learning rate). Every backward pass and
optimizer step of focusflow goes through it: LAPT and align (``training.loop``), downstream fine-tuning and the
source's MLM head (``training.fit``).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from focusflow.errors import TrainingDivergedError
from focusflow.training import checkpoint as ckpt
from focusflow.training.schedules import WarmupSchedule


def all_finite(parameters: Iterable[torch.Tensor]) -> bool:
    """Whether every weight is a number: the check both loops make before a run's weights are kept."""
    return all(bool(torch.isfinite(p).all()) for p in parameters)


def diverged(name: str, where: str, what: str, lr: float, then: str = "") -> TrainingDivergedError:
    """The one wording of a diverged run: what went non-finite, where, and the learning rate to lower."""
    return TrainingDivergedError(f"{name} diverged{where}: {what} (learning rate {lr:g}); lower the learning rate{then}")


def require_finite_loss(loss: float, name: str, where: str, lr: float, then: str = "") -> None:
    """Stop with one clear line when the training loss is not finite (the check of every training loop)."""
    if not math.isfinite(loss):
        raise diverged(name, where, f"the training loss became {loss}", lr, then)


def cadence_due(done: int, every: int, last: bool, marks: Collection[int] = ()) -> bool:
    """Whether a loop's periodic work (an evaluation, a checkpoint) falls after its step ``done``: every ``every``
    steps, at its last and at ``marks``."""
    return done % every == 0 or done in marks or last


def decay_groups(parameters: list[nn.Parameter], weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups with weight decay on matrices only (never on biases, norms and other vectors): the one rule of
    LAPT, the distillation and downstream fine-tuning. (The source's MLM head keeps the rule its stored heads were
    trained with: its transform decays all its parameters, the vocabulary bias none.)"""
    return [{"params": [p for p in parameters if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in parameters if p.dim() < 2], "weight_decay": 0.0}]


class Optimization:
    """The optimizer state of one run: the optimizer, its schedule, the fp16 scaler and the gradient clipping
    (``grad_clip=None``: none)."""

    def __init__(self, optimizer: torch.optim.Optimizer, scheduler: Any, scaler: torch.amp.GradScaler | None = None,
                 grad_clip: float | None = None) -> None:
        self.optimizer, self.scheduler, self.scaler, self.grad_clip = optimizer, scheduler, scaler, grad_clip

    @classmethod
    def from_spec(cls, param_groups: list[dict[str, Any]], spec: Any, total_steps: int, device: torch.device,
                  needs_scaler: bool) -> Optimization:
        """AdamW over the groups with the spec's betas, epsilon, warmup schedule and clipping (LAPT, align)."""
        fused = device.type in ("cuda", "cpu")  # one kernel for all parameters (also on CPU since torch 2.4)
        optimizer = torch.optim.AdamW(param_groups, lr=spec.lr, betas=(spec.adam_beta1, spec.adam_beta2),
                                      eps=spec.adam_epsilon, fused=fused or None)
        scheduler = WarmupSchedule(spec.schedule, round(spec.warmup_fraction * total_steps), total_steps).build(optimizer)
        return cls(optimizer, scheduler, torch.amp.GradScaler(device.type) if needs_scaler else None, spec.grad_clip)

    @property
    def lr(self) -> float:
        return self.scheduler.get_last_lr()[0]

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def step(self, parameters: list[nn.Parameter]) -> None:
        """Clip the trainable ``parameters`` together, step optimizer and schedule, clear the gradients."""
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        if self.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_([p for p in parameters if p.requires_grad], self.grad_clip)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)

    def state_tensors(self) -> dict[str, dict[str, Any]]:
        """What a checkpoint stores of this state, by checkpoint file name."""
        tensors = {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}
        if self.scaler is not None:
            tensors["scaler"] = self.scaler.state_dict()
        return tensors

    def restore(self, checkpoint: Path) -> None:
        self.optimizer.load_state_dict(ckpt.load_tensors(checkpoint, "optimizer"))
        self.scheduler.load_state_dict(ckpt.load_tensors(checkpoint, "scheduler"))
        if self.scaler is not None and (scaler := ckpt.load_tensors(checkpoint, "scaler")) is not None:
            self.scaler.load_state_dict(scaler)
