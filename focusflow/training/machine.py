"""What a timing depends on besides a run's settings: the machine (its processor, threads, accelerator, torch).

A LAPT minutes budget (``lapt_budget``) and a CPU's matmul ceiling (``flops.cpu_ceiling``) are both keyed by it.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import torch

from focusflow.training.distributed import world_size


def machine_fingerprint() -> dict[str, Any]:
    """What a step time depends on besides the run's settings: the processor, threads, accelerator, torch."""
    accelerator = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"cpu": _cpu_name(), "cpus": os.cpu_count(), "threads": torch.get_num_threads(),
            "accelerator": accelerator, "world_size": world_size(),
            "torch": torch.__version__.split("+")[0]}


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


__all__ = ["machine_fingerprint"]
