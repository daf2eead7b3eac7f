"""DDP under torchrun on CPU (gloo, 2 processes): same result as one process, rank 0 writes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoConfig

from focusflow.training import run_lapt
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_two_process_gloo_ddp_matches_a_single_process_run(tiny_dirs, lapt_corpus, tmp_path):
    from tests.training.lapt_ddp_child import SPEC

    # Without dropout the two layouts compute the same global-batch gradient (masks are keyed by sample index).
    model = tmp_path / "model"
    source = tiny_dirs("xlmr")
    config = AutoConfig.from_pretrained(source)
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.0
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    AutoModelForMaskedLM.from_pretrained(source, config=config).save_pretrained(model)
    AutoTokenizer.from_pretrained(source).save_pretrained(model)

    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "FOCUSFLOW_DEVICE": "cpu"}
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
               str(free_port()), str(ROOT / "tests" / "training" / "lapt_ddp_child.py"), str(model),
               *map(str, lapt_corpus), str(tmp_path / "ddp")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    single = run_lapt(model, *lapt_corpus, SPEC, tmp_path / "single")

    ddp_summary = json.loads((tmp_path / "ddp" / "summary.json").read_text())
    assert ddp_summary["world_size"] == 2 and ddp_summary["steps"] == 6
    expected, got = load_file(tmp_path / "single" / "final" / "model.safetensors"), \
        load_file(tmp_path / "ddp" / "final" / "model.safetensors")
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-4, atol=1e-5, msg=name)
    assert ddp_summary["final_heldout_loss"] == pytest.approx(single["final_heldout_loss"], rel=1e-4)
    # rank 0 alone wrote: one set of checkpoints, per-rank RNG states inside
    names = sorted(p.name for p in (tmp_path / "ddp" / "checkpoints").iterdir())
    assert names == ["latest", "step-00000003", "step-00000006"]
    assert (tmp_path / "ddp" / "checkpoints" / "step-00000006" / "trainer" / "rng-rank1.pt").is_file()

    # a damaged last checkpoint: rank 0 moves it aside, every rank resumes from step 3 and reaches the same weights
    weights = tmp_path / "ddp" / "checkpoints" / "step-00000006" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-len(data) // 3] ^= 0xFF
    weights.write_bytes(bytes(data))
    shutil.rmtree(tmp_path / "ddp" / "final")
    command[command.index("--master_port") + 1] = str(free_port())
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "failed verification" in again.stderr and "step-00000006" in again.stderr
    resumed = json.loads((tmp_path / "ddp" / "summary.json").read_text())
    assert resumed["resumed_from"].endswith("step-00000003") and resumed["steps"] == 6
    got = load_file(tmp_path / "ddp" / "final" / "model.safetensors")
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-4, atol=1e-5, msg=name)
