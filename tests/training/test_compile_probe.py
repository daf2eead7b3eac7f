"""``compile: auto``: torch.compile where a measurement on the loop's own batch says it pays, eager elsewhere."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from focusflow.training import compile_probe
from focusflow.training.compile_probe import CompileProbe, decide_compile, is_compiled

SIGNATURE = {"module": "Body", "batch": [4, 8]}


class Body(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Dropout(0.1), nn.Linear(16, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


@pytest.fixture()
def body() -> Body:
    torch.manual_seed(0)
    return Body()


@pytest.fixture()
def fast_compile(monkeypatch):
    """Dynamo's eager backend: a real trace of the module, no C++ compile (seconds, not a minute)."""
    calls = []

    def compile_eagerly(module: nn.Module, **options) -> None:
        calls.append(module)
        module.compile(backend="eager")

    monkeypatch.setattr(compile_probe, "compile_in_place", compile_eagerly)
    return calls


def batch_loss(body: Body, x: torch.Tensor, head: nn.Linear | None = None):
    return lambda: (head(body(x)) if head is not None else body(x)).pow(2).mean()


def test_a_probe_pays_when_its_saving_over_the_steps_exceeds_the_compile():
    probe = CompileProbe(eager_s=1.0, compiled_s=0.8, compile_s=30.0, difference=0.0)
    assert probe.speedup == pytest.approx(1.25)
    assert probe.pays(200) and not probe.pays(100)  # 0.2 s saved a step: 40 s against 30, then 20 against 30
    assert not CompileProbe(eager_s=1.0, compiled_s=0.97, compile_s=0.0).pays(10 ** 6), "within noise: never"
    assert not CompileProbe(eager_s=1.0, error="no compiler").pays(10 ** 6)


def test_compile_true_and_false_are_obeyed_without_measuring(body, fast_compile):
    x = torch.randn(4, 8)
    assert not decide_compile(False, body, batch_loss(body, x), 10 ** 6, "t", SIGNATURE, 1e-3).compiled
    assert not is_compiled(body) and not fast_compile
    decision = decide_compile(True, body, batch_loss(body, x), 1, "t", SIGNATURE, 1e-3)
    assert decision.compiled and decision.probe is None and fast_compile == [body]


def test_a_loop_too_short_to_pay_back_a_compile_stays_eager_and_starts_as_it_would_have(body, fast_compile, tmp_path):
    x, head = torch.randn(4, 8), nn.Linear(8, 2)
    owner = nn.ModuleList([body, head])
    before = torch.random.get_rng_state()
    decision = decide_compile("auto", body, batch_loss(body, x, head), 5, "t", SIGNATURE, 1e-3, tmp_path, owner)
    assert not decision.compiled and "too short" in decision.reason and not fast_compile
    assert all(p.grad is None for p in owner.parameters()), "the probe's gradients would add to the first step's"
    assert torch.equal(torch.random.get_rng_state(), before), "dropout's draws are the loop's, not the probe's"
    assert not (tmp_path / compile_probe.PROBE_FILE).exists(), "nothing measured, nothing cached"


def test_auto_measures_once_per_machine_and_shape_then_reads_its_cache(body, fast_compile, tmp_path, monkeypatch):
    monkeypatch.setenv(compile_probe.PROBE_SECONDS_ENV, "0")
    x = torch.randn(4, 8)
    first = decide_compile("auto", body, batch_loss(body, x), 10 ** 6, "t", SIGNATURE, 1e-3, tmp_path)
    probe = first.probe
    assert probe.compiled_s > 0 and probe.compile_s >= 0 and probe.difference <= 1e-3 and probe.error is None
    assert first.compiled == probe.pays(10 ** 6) == is_compiled(body)
    cached = json.loads((tmp_path / compile_probe.PROBE_FILE).read_text(encoding="utf-8"))
    assert len(cached) == 1 and next(iter(cached.values()))["eager_s"] == probe.eager_s

    def no_second_measurement(*args, **kwargs):
        raise AssertionError("measured again")

    monkeypatch.setattr(compile_probe, "_probe", no_second_measurement)
    again = Body()
    second = decide_compile("auto", again, batch_loss(again, x), 10 ** 6, "t", SIGNATURE, 1e-3, tmp_path)
    assert second.probe.compiled_s == probe.compiled_s and second.compiled == first.compiled == is_compiled(again)
    other_shape = decide_compile("auto", Body(), batch_loss(Body(), x), 3, "t", SIGNATURE, 1e-3, tmp_path)
    assert not other_shape.compiled, "the same probe decides per loop: 3 steps never pay back a compile"


def test_a_compile_that_fails_or_changes_the_result_runs_eager_and_says_why(body, monkeypatch, tmp_path):
    monkeypatch.setenv(compile_probe.PROBE_SECONDS_ENV, "0")

    def broken(module: nn.Module, **options) -> None:
        raise RuntimeError("InductorError: no working C++ compiler\nmore lines")

    monkeypatch.setattr(compile_probe, "compile_in_place", broken)
    x = torch.randn(4, 8)
    failed = decide_compile("auto", body, batch_loss(body, x), 10 ** 6, "t", SIGNATURE, 1e-3, tmp_path)
    assert not failed.compiled and not is_compiled(body)
    assert failed.reason == "eager: RuntimeError: InductorError: no working C++ compiler"

    monkeypatch.setattr(compile_probe, "compile_in_place", lambda module, **options: module.compile(backend="eager"))
    other = Body()

    def drifting() -> torch.Tensor:  # a compiled graph that computes something else
        return other(x).pow(2).mean() + (1.0 if is_compiled(other) else 0.0)

    differs = decide_compile("auto", other, drifting, 10 ** 6, "t", {**SIGNATURE, "batch": [1]}, 1e-3, tmp_path)
    assert not differs.compiled and not is_compiled(other) and "differs from eager" in differs.reason


def test_eager_and_compiled_are_compared_with_every_dropout_off_and_the_same_draws(fast_compile, tmp_path,
                                                                                   monkeypatch):
    """A fine-tuning's head has dropout outside the compiled body, and a masking loss draws: neither may make a
    compile that computes the same thing look different."""
    monkeypatch.setenv(compile_probe.PROBE_SECONDS_ENV, "0")
    torch.manual_seed(0)
    body, head = Body(), nn.Sequential(nn.Dropout(0.5), nn.Linear(8, 2))
    owner, x = nn.ModuleList([body, head]), torch.randn(4, 8)

    def masked() -> torch.Tensor:
        keep = torch.rand(4, 8) > 0.3  # a loss of its own draws, like a masker's
        return head(body(x * keep)).pow(2).mean()

    decision = decide_compile("auto", body, masked, 10 ** 6, "t", SIGNATURE, 1e-6, tmp_path, owner)
    assert decision.probe.error is None and decision.probe.difference == 0.0


def test_a_cache_that_cannot_be_written_leaves_the_decision_standing(body, fast_compile, tmp_path, monkeypatch,
                                                                      caplog):
    monkeypatch.setenv(compile_probe.PROBE_SECONDS_ENV, "0")
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder", encoding="utf-8")
    decision = decide_compile("auto", body, batch_loss(body, torch.randn(4, 8)), 10 ** 6, "t", SIGNATURE, 1e-3,
                              blocked / "cache")
    assert decision.probe is not None and decision.probe.compiled_s > 0
    assert "could not be cached" in caplog.text
