"""benchmarks/gpu_evidence.py: on a CPU its dry run takes every step of the GPU evidence at toy size (CI runs it),
and its GPU run refuses a machine without CUDA at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_evidence.py"


def run(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})


@pytest.mark.slow
def test_dry_run_takes_every_step_and_reports_a_table_and_a_json_line(shared_data, tmp_path):
    done = run("--dry-run", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["dry_run"] is True
    rows = {row["row"]: row for row in result["rows"]}
    assert set(rows) == {"LAPT eager", "LAPT torch.compile", "LAPT torchrun ×1 (CLI)", "SIB-200 sw fine-tuning (seed 1)"}
    for name in ("LAPT eager", "LAPT torch.compile", "LAPT torchrun ×1 (CLI)"):
        assert rows[name]["steps"] == 4 and rows[name]["tokens_per_s"] > 0
    assert rows["LAPT torchrun ×1 (CLI)"]["final_train_loss"] == pytest.approx(rows["LAPT eager"]["final_train_loss"])
    assert 0 <= rows["SIB-200 sw fine-tuning (seed 1)"]["accuracy"] <= 1
    assert "| LAPT torch.compile |" in (tmp_path / "gpu-evidence.md").read_text(encoding="utf-8")
    assert json.loads((tmp_path / "gpu-evidence.json").read_text(encoding="utf-8")) == result


def test_the_gpu_run_needs_cuda_and_says_so(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    done = run("--bundle", str(tmp_path), timeout=120)
    assert done.returncode != 0 and "no CUDA device here; on a CPU run --dry-run" in done.stderr


def test_wheels_lists_pinned_versions_of_what_a_bare_gpu_image_may_lack():
    done = run("--wheels", timeout=60)
    assert done.returncode == 0
    pins = dict(line.split("==") for line in done.stdout.split())
    assert {"pydantic", "pydantic_core", "typing-inspection", "platformdirs", "langcodes"} <= set(pins)
    assert all(pins.values())


def test_an_unknown_row_is_refused_with_the_known_ones():
    done = run("--dry-run", "--rows", "eager,warp", timeout=60)
    assert done.returncode != 0 and "unknown warp (known: eager, compile, torchrun, finetune)" in done.stderr


@pytest.mark.slow
def test_rows_runs_only_the_rows_named(shared_data, tmp_path):
    done = run("--dry-run", "--rows", "finetune", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert [row["row"] for row in result["rows"]] == ["SIB-200 sw fine-tuning (seed 1)"]
