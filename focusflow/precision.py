"""Which floating-point precision a run computes in, decided once for every stage that trains or evaluates.

``auto`` picks bf16 autocast where the hardware has native bf16 kernels (a CUDA GPU that supports
it, else fp16 with a gradient scaler; a CPU with AVX512-BF16/AMX, or Arm BF16) and fp32 otherwise:
on a CPU without them bf16 is emulated and several times *slower* than fp32. ``bf16``, ``fp16``
and ``fp32`` are obeyed as given. Weights and optimizer state always stay float32 (autocast only
lowers the precision of the matrix products), so a checkpoint never depends on the choice.
"""

from __future__ import annotations

import contextlib
import functools
import platform
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch

from focusflow.config import PrecisionName
from focusflow.errors import InputError

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU runs bf16 matrix products natively (asked of torch's cpuinfo and oneDNN).

    x86 needs AVX512-BF16 or AMX-BF16 (oneDNN's own check accepts any AVX512 core, which only emulates
    bf16); elsewhere (Arm) oneDNN's check is the hardware's BF16 extension.
    """
    if platform.machine().lower() in ("x86_64", "amd64", "i386", "i686"):
        capabilities = torch.cpu.get_capabilities()
        return bool(capabilities.get("avx512_bf16") or capabilities.get("amx_bf16"))
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


@dataclass(frozen=True)
class Precision:
    """A resolved precision on one device: the autocast dtype (None: plain float32) and its context."""

    device_type: str
    dtype: torch.dtype | None

    @property
    def needs_scaler(self) -> bool:
        """fp16 gradients underflow without loss scaling; bf16 has fp32's exponent range and needs none."""
        return self.dtype == torch.float16

    @property
    def name(self) -> str:
        """``bfloat16``, ``float16`` or ``float32`` (what summaries and reports record)."""
        return str(self.dtype or torch.float32).replace("torch.", "")

    @property
    def setting(self) -> str:
        """The explicit setting that means the same (``bf16``, ``fp16`` or ``fp32``), e.g. for another trainer."""
        return next(key for key, dtype in _DTYPES.items() if dtype == self.dtype)

    def autocast(self) -> AbstractContextManager:
        """The context the forward pass (and its loss) runs in."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.dtype)


def resolve_precision(precision: PrecisionName, device: torch.device | str) -> Precision:
    """The precision ``precision`` means on ``device`` (``auto`` asks the hardware; see the module docstring)."""
    device = torch.device(device)
    if precision == "auto":
        if device.type == "cuda":
            # bf16 only where the GPU computes it (Ampere and later): an older one emulates it, slowly
            precision = "bf16" if torch.cuda.is_bf16_supported(including_emulation=False) else "fp16"
        elif device.type == "cpu":
            precision = "bf16" if cpu_has_native_bf16() else "fp32"
        else:
            precision = "fp32"
    if precision not in _DTYPES:
        raise InputError(f"unknown precision {precision!r}; expected one of auto, {', '.join(_DTYPES)}")
    return Precision(device.type, _DTYPES[precision])
