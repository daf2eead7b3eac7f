"""bf16 weights trained through float32 master copies, for CPUs with bf16 kernels (AMX, AVX512-BF16).

Under autocast a float32 model has every weight cast to bf16 at every forward pass (a fifth of a LAPT step on an AMX
CPU), and the element-wise work around its bf16 products (norms, activations, dropout, residual adds) runs on float32
tensors. Held in bf16, the model computes its forward and backward passes on bf16 weights and activations with no per
step cast; what must stay exact stays float32: AdamW steps float32 copies of the trained weights (a bf16 weight
cannot hold an update smaller than its last bit), and a float32 copy of every weight, trained or frozen, is what a
checkpoint and the final model are written from, so a saved model never carries bf16 rounding and a resumed run
continues from exactly the weights it saved. Losses are computed in float32 as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

WEIGHT_DTYPE = torch.bfloat16


class PlainWeights:
    """A model trained as it is: the optimizer steps its own parameters, and it is written as it is."""

    def __init__(self, trained: list[nn.Parameter]) -> None:
        self.trained = list(trained)

    @property
    def optimized(self) -> list[nn.Parameter]:
        """The parameters the optimizer steps (a best state is a snapshot of these)."""
        return self.trained

    def groups(self, param_groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return param_groups

    def step(self, optimization: Any) -> None:
        optimization.step(self.trained)

    def sync(self) -> None:
        """Nothing to write back: the optimized parameters are the model's."""

    @torch.no_grad()
    def restore(self, kept: list[torch.Tensor]) -> None:
        """Put a kept state (a snapshot of :attr:`optimized`) back into the model."""
        for parameter, value in zip(self.optimized, kept, strict=True):
            parameter.copy_(value)
        self.sync()

    def full_precision(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()


class MasterWeights(PlainWeights):
    """A model whose parameters are bf16, with a float32 copy of each (the trained ones as the optimizer's)."""

    def __init__(self, model: nn.Module, trained: list[nn.Parameter]) -> None:
        super().__init__(trained)
        self.model = model
        self.parameters = [parameter for _, parameter in model.named_parameters()]  # tied weights once
        self.full = {id(p): p.detach().to(torch.float32).clone() for p in self.parameters}
        self.masters = [nn.Parameter(self.full[id(p)], requires_grad=True) for p in self.trained]
        self._master_of = {id(p): m for p, m in zip(self.trained, self.masters, strict=True)}
        for parameter in self.parameters:
            parameter.data = parameter.data.to(WEIGHT_DTYPE)

    @property
    def optimized(self) -> list[nn.Parameter]:
        return self.masters

    def groups(self, param_groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The optimizer's groups over the float32 copies of the trained parameters."""
        return [{**group, "params": [self._master_of[id(p)] for p in group["params"]]} for group in param_groups]

    def step(self, optimization: Any) -> None:
        """Hand the bf16 gradients to the float32 copies, step them (clip, AdamW, schedule) and write the bf16
        weights from them."""
        for parameter, master in zip(self.trained, self.masters, strict=True):
            master.grad = None if parameter.grad is None else parameter.grad.to(torch.float32)
            parameter.grad = None
        optimization.step(self.masters)
        self.sync()

    @torch.no_grad()
    def sync(self) -> None:
        """The bf16 weights from their float32 copies (after a step, or after the copies were set)."""
        for parameter, master in zip(self.trained, self.masters, strict=True):
            parameter.data.copy_(master)

    @contextlib.contextmanager
    def full_precision(self) -> Iterator[None]:
        """The model's parameters as their float32 copies for the block (to write a checkpoint or the final model)."""
        held = [parameter.data for parameter in self.parameters]
        try:
            for parameter in self.parameters:
                parameter.data = self.full[id(parameter)]
            yield
        finally:
            for parameter, data in zip(self.parameters, held, strict=True):
                parameter.data = data


def trained_weights(model: nn.Module, trained: list[nn.Parameter], spec: Any, precision: Any,
                    world_size: int) -> PlainWeights:
    """How a run holds what it trains: in bf16 with float32 master copies where asked for (``bf16_weights``) and the
    run computes in bf16 on a CPU in one process; else as the model is."""
    wanted = bool(getattr(spec, "bf16_weights", False)) and precision.dtype == WEIGHT_DTYPE and \
        precision.device_type == "cpu" and world_size == 1
    return MasterWeights(model, trained) if wanted else PlainWeights(trained)


__all__ = ["MasterWeights", "PlainWeights", "WEIGHT_DTYPE", "trained_weights"]
