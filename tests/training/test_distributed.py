"""torchrun's environment is read in one place: ``training.distributed``."""

from __future__ import annotations

import re
from pathlib import Path

import torch

import focusflow
from focusflow.training.distributed import compute_device, local_rank, rank, setup_distributed, world_size


def test_rank_and_world_size_default_to_one_process(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert (rank(), world_size(), local_rank()) == (0, 1, 0)
    monkeypatch.setenv("FOCUSFLOW_DEVICE", "cpu")
    assert setup_distributed().main and setup_distributed().device == torch.device("cpu")


def test_one_device_rule_for_training_fine_tuning_and_the_teacher(monkeypatch):
    """FOCUSFLOW_DEVICE wins, else this rank's GPU, else the CPU; fine-tuning and the teacher's states follow it."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.delenv("FOCUSFLOW_DEVICE", raising=False)
    assert compute_device() == torch.device("cuda", 1)
    monkeypatch.setenv("FOCUSFLOW_DEVICE", "cpu")
    assert compute_device() == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("FOCUSFLOW_DEVICE")
    assert compute_device() == torch.device("cpu")
    for module in ("training/teacher.py", "evaluation/downstream/runner.py"):
        text = (Path(focusflow.__file__).parent / module).read_text(encoding="utf-8")
        assert "compute_device()" in text and "cuda.is_available" not in text, module


def test_rank_and_world_size_are_torchruns(monkeypatch):
    monkeypatch.setenv("RANK", "3"), monkeypatch.setenv("WORLD_SIZE", "4"), monkeypatch.setenv("LOCAL_RANK", "1")
    assert (rank(), world_size(), local_rank()) == (3, 4, 1)


def test_no_other_module_reads_torchruns_environment():
    package = Path(focusflow.__file__).parent
    reads = re.compile(r"environ[^\n]*[\"'](?:RANK|WORLD_SIZE|LOCAL_RANK)[\"']")
    readers = sorted(str(path.relative_to(package)) for path in package.rglob("*.py")
                     if reads.search(path.read_text(encoding="utf-8")))
    assert readers == ["training/distributed.py"]
