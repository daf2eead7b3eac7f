"""Where this process stands in a ``torchrun`` launch: the one reader of ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``.

The training loop sets its process group up from them (:func:`setup_distributed`); the LAPT stage (rank 0
restores and commits), the machine fingerprint and the command line (a minutes budget is planned by one
process) ask here too, so the environment's names and defaults are read in one place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


def rank() -> int:
    """This process's rank among all of the launch (0 outside ``torchrun``)."""
    return int(os.environ.get("RANK", "0"))


def world_size() -> int:
    """How many processes the launch has (1 outside ``torchrun``)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def local_rank() -> int:
    """This process's rank on its machine: the GPU it takes (0 outside ``torchrun``)."""
    return int(os.environ.get("LOCAL_RANK", "0"))


@dataclass
class Distributed:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    owns_group: bool = False  # this run initialized the process group (and tears it down)

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.world_size > 1:
            dist.barrier()

    def sum(self, values: list[float]) -> list[float]:
        if self.world_size == 1:
            return values
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor)
        return tensor.tolist()


def compute_device() -> torch.device:
    """Where this process trains and runs models: ``FOCUSFLOW_DEVICE`` when set (e.g. ``cpu``), else this rank's GPU
    when there is one, else the CPU. The one rule for LAPT, fine-tuning and the teacher's states."""
    forced = os.environ.get("FOCUSFLOW_DEVICE")
    if torch.cuda.is_available() and (forced is None or forced.startswith("cuda")):
        return torch.device(f"cuda:{local_rank()}")
    return torch.device(forced or "cpu")


def setup_distributed() -> Distributed:
    """Read torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK); NCCL on CUDA, gloo on CPU.

    ``FOCUSFLOW_DEVICE`` (e.g. ``cpu``) overrides the device choice.
    """
    world = world_size()
    this_rank, this_local_rank = rank(), local_rank()
    device = compute_device()
    use_cuda = device.type == "cuda"
    if use_cuda:
        torch.cuda.set_device(device)
    owns = world > 1 and not dist.is_initialized()
    if owns:
        dist.init_process_group("nccl" if use_cuda else "gloo")
    return Distributed(this_rank, world, this_local_rank, device, owns)


def data_parallel(module: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """``module`` under DDP (gloo on CPU, one device per rank on GPUs), for the process group set up above."""
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(module, device_ids=None if device.type == "cpu" else [device.index])
