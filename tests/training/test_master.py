"""bf16 weights with float32 master copies: the model trains in bf16, the optimizer steps float32, and what is
written (checkpoints, the final model) is float32; a resumed run continues from exactly the weights it saved."""

from __future__ import annotations

import shutil

import pytest
import torch
from safetensors.torch import load_file

from focusflow.training import run_lapt
from focusflow.training.master import MasterWeights
from focusflow.training.optimization import Optimization
from tests.training.test_lapt_run import small_spec


def test_the_optimizer_steps_float32_copies_and_the_model_holds_their_bf16_rounding():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    frozen = model[1].weight
    frozen.requires_grad_(False)
    trained = [p for p in model.parameters() if p.requires_grad]
    master = MasterWeights(model, trained)
    assert all(p.dtype == torch.bfloat16 for p in model.parameters())
    optimizer = torch.optim.AdamW(master.groups([{"params": trained, "weight_decay": 0.0}]), lr=1e-3)
    optimization = Optimization(optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0), None, 1.0)
    before = master.masters[0].detach().clone()
    model(torch.randn(8, 4, dtype=torch.bfloat16)).float().pow(2).sum().backward()
    master.step(optimization)
    assert master.masters[0].dtype == torch.float32 and not torch.equal(master.masters[0], before)
    assert torch.equal(model[0].weight, master.masters[0].to(torch.bfloat16)) and model[0].weight.grad is None
    with master.full_precision():
        assert model[0].weight.dtype == torch.float32 and torch.equal(model[0].weight, master.masters[0])
        assert frozen.dtype == torch.float32  # a frozen weight is written from its float32 copy too
    assert model[0].weight.dtype == torch.bfloat16


def test_a_lapt_in_bf16_weights_trains_writes_float32_and_resumes_exactly(tiny_dirs, lapt_corpus, tmp_path):
    model = tiny_dirs("xlmr")
    spec = small_spec(steps=6, checkpoint_every=3, eval_every=3, precision="bf16", bf16_weights=True)
    whole = run_lapt(model, *lapt_corpus, spec, tmp_path / "whole")
    assert whole["final_heldout_loss"] < whole["initial_heldout_loss"]
    weights = load_file(tmp_path / "whole" / "final" / "model.safetensors")
    assert {tensor.dtype for tensor in weights.values()} == {torch.float32}
    autocast = run_lapt(model, *lapt_corpus, small_spec(steps=6, checkpoint_every=3, eval_every=3, precision="bf16"),
                        tmp_path / "autocast")
    assert whole["final_heldout_loss"] == pytest.approx(autocast["final_heldout_loss"], abs=0.05)
    (tmp_path / "resumed" / "checkpoints").mkdir(parents=True)  # a run stopped after its step-3 checkpoint
    shutil.copytree(tmp_path / "whole" / "checkpoints" / "step-00000003",
                    tmp_path / "resumed" / "checkpoints" / "step-00000003")
    resumed = run_lapt(model, *lapt_corpus, spec, tmp_path / "resumed")
    assert resumed["resumed_from"].endswith("step-00000003")
    again = load_file(tmp_path / "resumed" / "final" / "model.safetensors")
    for name, tensor in weights.items():
        torch.testing.assert_close(again[name], tensor, rtol=0, atol=0, msg=name)


def test_a_lora_run_in_bf16_weights_resumes_its_adapters(tiny_dirs, lapt_corpus, tmp_path):
    """The float32 copies were taken before a resumed LoRA run's adapters were restored: it restarted them."""
    pytest.importorskip("peft")
    model = tiny_dirs("xlmr")
    spec = small_spec(steps=6, checkpoint_every=3, eval_every=3, precision="bf16", bf16_weights=True, lora=True)
    run_lapt(model, *lapt_corpus, spec, tmp_path / "whole")
    (tmp_path / "resumed" / "checkpoints").mkdir(parents=True)
    shutil.copytree(tmp_path / "whole" / "checkpoints" / "step-00000003",
                    tmp_path / "resumed" / "checkpoints" / "step-00000003")
    run_lapt(model, *lapt_corpus, spec, tmp_path / "resumed")
    whole, resumed = (load_file(tmp_path / name / "final" / "model.safetensors") for name in ("whole", "resumed"))
    for name, tensor in whole.items():
        torch.testing.assert_close(resumed[name], tensor, rtol=0, atol=0, msg=name)
