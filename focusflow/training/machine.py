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


class StepClock:
    """Seconds of work, the same on a busy machine as on an idle one: on a CPU, the process's CPU time (user and
    system, all its threads) over the threads torch computes with, so another job's time slices do not count; on an
    accelerator, the wall clock (the process waits for the device, which its CPU time does not see)."""

    def __init__(self, device: torch.device | str = "cpu") -> None:
        self.kind = "cpu" if torch.device(device).type == "cpu" else "wall"
        self.threads = max(1, torch.get_num_threads())

    def now(self) -> float:
        return time.process_time() / self.threads if self.kind == "cpu" else time.perf_counter()


__all__ = ["StepClock", "machine_fingerprint"]
