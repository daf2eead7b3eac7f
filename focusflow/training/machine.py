"""What a timing depends on besides a run's settings: the machine (its processor, threads, accelerator, torch), and
the clock a budget is measured with (:class:`StepClock`: a CPU-minute is a minute of this process's own CPU time).

A LAPT minutes budget (``lapt_budget``) and a CPU's matmul ceiling (``flops.cpu_ceiling``) are both keyed by it.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Any

import torch

from focusflow.training.distributed import world_size

CPUINFO = Path("/proc/cpuinfo")
#: The instruction sets that change which kernels torch runs (and so a step's time): a virtual machine may name two
#: generations of a processor alike ("AMD EPYC" for a Zen 3 with AVX2 only and a Zen 5 with AVX512-BF16).
KERNEL_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
                "asimd", "sve", "sve2", "bf16", "i8mm")


def machine_fingerprint() -> dict[str, Any]:
    """What a step time depends on besides the run's settings: the processor (its name, generation and the
    instruction sets torch's kernels use), threads, accelerator, torch."""
    accelerator = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"cpu": _cpu_name(), "cpu_model": _cpu_model(), "isa": _kernel_flags(), "cpus": os.cpu_count(),
            "threads": torch.get_num_threads(), "accelerator": accelerator, "world_size": world_size(),
            "torch": torch.__version__.split("+")[0]}


def _cpuinfo_first(*fields: str) -> dict[str, str]:
    """The first processor's values of these ``/proc/cpuinfo`` fields (none where the file is missing: not Linux)."""
    found: dict[str, str] = {}
    try:
        lines = CPUINFO.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return found
    for line in lines:
        name, _, value = line.partition(":")
        if name.strip() in fields and name.strip() not in found:
            found[name.strip()] = value.strip()
        if len(found) == len(fields):
            break
    return found


def _cpu_name() -> str:
    return _cpuinfo_first("model name").get("model name") or platform.processor() or platform.machine()


def _cpu_model() -> str | None:
    """The processor's generation (family, model, stepping), which a virtual machine's name may leave out."""
    found = _cpuinfo_first("cpu family", "model", "stepping")
    return "/".join(found.get(k, "?") for k in ("cpu family", "model", "stepping")) if found else None


def _kernel_flags() -> list[str]:
    """Which of :data:`KERNEL_FLAGS` the processor has (x86 ``flags``, Arm ``Features``)."""
    found = _cpuinfo_first("flags", "Features")
    flags = set((found.get("flags") or found.get("Features") or "").split())
    return [flag for flag in KERNEL_FLAGS if flag in flags]


class StepClock:
    """Seconds of work, the same on a busy machine as on an idle one: on a CPU, the process's CPU time (user and
    system, all its threads) over the threads torch computes with, so another process's time slices do not count
    (another thread of this process does: a flow's non-model stage beside a LAPT); on an accelerator, the wall
    clock (the process waits for the device, which its CPU time does not see)."""

    def __init__(self, device: torch.device | str = "cpu") -> None:
        self.kind = "cpu" if torch.device(device).type == "cpu" else "wall"
        self.threads = max(1, torch.get_num_threads())

    def now(self) -> float:
        return time.process_time() / self.threads if self.kind == "cpu" else time.perf_counter()


__all__ = ["KERNEL_FLAGS", "StepClock", "machine_fingerprint"]
