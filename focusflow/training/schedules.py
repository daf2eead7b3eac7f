"""The one learning-rate schedule builder: a linear warm-up, then a shape (constant, linear decay or cosine), as a
``LambdaLR`` factor of the optimizer's rate. LAPT and align (``Optimization.from_spec``), downstream fine-tuning and
the source's MLM head all build theirs here.

Their warm-ups differ in where the ramp starts, and each is kept exactly as its stored results were trained
(changing one would change every stored model or fine-tuning run of its kind):

- ``zero``: step ``s`` of ``w`` warm-up steps at ``s / w``, the first step at rate 0 (LAPT and align; as
  ``transformers.get_scheduler``'s schedules, which they used before);
- ``first``: at ``(s + 1) / (w + 1)``, the first step already learning (downstream fine-tuning);
- ``under``: ``(s + 1) / w`` as a ceiling under a cosine that spans every step, warm-up included (the MLM head).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

import torch

Shape = Literal["constant", "linear", "cosine"]
Ramp = Literal["zero", "first", "under"]


@dataclass(frozen=True)
class WarmupSchedule:
    """``shape`` after ``warmup_steps`` of ``ramp``'s warm-up, over ``total_steps``."""

    shape: Shape
    warmup_steps: int
    total_steps: int
    ramp: Ramp = "zero"

    def factor(self, step: int) -> float:
        """The learning rate's factor at optimizer step ``step`` (counted from 0)."""
        warmup, total = self.warmup_steps, self.total_steps
        if self.ramp == "under":
            return min((step + 1) / warmup, 0.5 * (1 + math.cos(math.pi * min(step, total) / total)))
        if step < warmup:
            return (step + 1) / (warmup + 1) if self.ramp == "first" else float(step) / float(max(1, warmup))
        if self.shape == "constant":
            return 1.0
        if self.shape == "linear":
            return max(0.0, float(total - step) / float(max(1, total - warmup)))
        progress = float(step - warmup) / float(max(1, total - warmup))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))

    def build(self, optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LambdaLR:
        return torch.optim.lr_scheduler.LambdaLR(optimizer, functools.partial(_factor, self))


def _factor(schedule: WarmupSchedule, step: int) -> float:
    return schedule.factor(step)


__all__ = ["WarmupSchedule"]
