"""Whether ``torch.compile`` pays for a training loop on this machine: measured, cached, and off where it loses.

Inductor fuses the element-wise work around the matmuls (norms, activations, dropout, residual adds, casts), which is
most of a step on a bf16 CPU and little of one where fp32 matmuls dominate (an AVX2 CPU at 60% of its ceiling). It
also costs tens of seconds to compile and can fail on a model or a torch version. So ``compile: auto`` (the default
of LAPT, distillation and fine-tuning) decides by measurement, like ``flops.cpu_ceiling``: the module's forward and
backward on the loop's own batch, a few steps eager and a few compiled, on the same process clock a budget uses. The
measurement is cached per machine, module shape and batch shape (the user cache), so a loop of the same shape on
the same machine decides without measuring again. A compile pays when it is faster by ``MIN_SPEEDUP`` and the steps
the loop will take save more than the compile costs; it is off where it fails, where its outputs differ from eager
ones beyond the precision's tolerance, and where the whole loop is too short for any compile to pay back.

Compiling is in place (``nn.Module.compile``): the module's parameters, state dict and checkpoints are the eager
module's; varied sequence lengths recompile once, as one dynamic graph (torch's automatic dynamic shapes).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

log = logging.getLogger(__name__)

CompileSetting = Literal["auto"] | bool
MIN_SPEEDUP = 1.05  # below this a compiled step is within a busy machine's noise of an eager one
#: A loop whose eager steps take less than this is not measured: a compile costs 30-120 s on a CPU (28 s for e5-small's
#: body on 2 cores) and the speedups measured are 1.00-1.18x, so a loop of 5 minutes saves at most about 45 s. A SIB-200
#: fine-tuning (about a minute) stays eager without a probe; a LAPT of 30 CPU-minutes is measured once per machine.
MIN_EAGER_WORK_S = 300.0
PROBE_STEPS = 2  # timed steps each way, after one warm-up (the compile, for the compiled side)
PROBE_FILE = "compile-probes.json"
PROBE_SECONDS_ENV = "FOCUSFLOW_COMPILE_MIN_WORK_S"  # the tests lower MIN_EAGER_WORK_S to compile a tiny model


@dataclass(frozen=True)
class CompileProbe:
    """One measurement: seconds a step eager and compiled, the compile's own cost, and how far the outputs differ."""

    eager_s: float
    compiled_s: float | None = None
    compile_s: float | None = None
    difference: float | None = None  # the largest relative difference of the compiled outputs to the eager ones
    error: str | None = None  # why compiling failed

    @property
    def speedup(self) -> float | None:
        return self.eager_s / self.compiled_s if self.compiled_s else None

    def pays(self, steps: int) -> bool:
        """Faster by ``MIN_SPEEDUP`` and, over ``steps``, saving more than the compile costs."""
        if self.error is not None or not self.compiled_s or self.compile_s is None:
            return False
        return self.speedup >= MIN_SPEEDUP and (self.eager_s - self.compiled_s) * steps > self.compile_s


@dataclass(frozen=True)
class CompileDecision:
    """Whether a loop runs compiled, and why (the loop's summary and its log line say it)."""

    compiled: bool
    reason: str
    probe: CompileProbe | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"compiled": self.compiled, "reason": self.reason,
                "probe": asdict(self.probe) if self.probe is not None else None}


def loss_tolerance(dtype: torch.dtype | None) -> float:
    """How far a compiled loss may lie from the eager one and count as equal: float32 sums in another order, bf16
    rounds every product."""
    return 1e-3 if dtype in (None, torch.float32) else 3e-2


def compile_in_place(module: nn.Module, **options: Any) -> None:
    """``torch.compile`` ``module`` itself: its calls run compiled, its parameters and state dict stay its own."""
    module.compile(**options)


def uncompile(module: nn.Module) -> None:
    module._compiled_call_impl = None  # what nn.Module.compile set: the module's calls run eager again


def is_compiled(module: nn.Module) -> bool:
    return getattr(module, "_compiled_call_impl", None) is not None


def decide_compile(setting: CompileSetting, module: nn.Module, loss: Callable[[], torch.Tensor], steps: int,
                   kind: str, signature: dict[str, Any], tolerance: float, cache_dir: Path | None = None,
                   owner: nn.Module | None = None) -> CompileDecision:
    """Compile ``module`` in place where ``setting`` says so or, for ``auto``, where it pays for ``steps`` steps.

    ``loss()`` runs the loop's forward on one of its batches through ``module`` and returns a scalar (the probe runs
    it forward and backward; the gradients of ``owner``, the module that holds every parameter the loss reaches
    (default ``module``), are cleared and the random state restored after, so the loop starts as it would have).
    ``signature`` names what a step's time depends on besides the machine (the module's shape, the batch's, the
    precision): the cache key. ``tolerance``: the largest relative difference of the compiled loss to
    the eager one (in eval mode, no dropout) that counts as equal."""
    if setting is False:
        return CompileDecision(False, "compile: false")
    if setting is True:
        compile_in_place(module)
        return CompileDecision(True, "compile: true")
    device = next(module.parameters()).device
    with _untouched(owner or module, device):
        (owner or module).train()  # the step the loop takes: dropout included
        eager_s = _step_seconds(module, loss, device, warmup=1)
        min_work = float(os.environ.get(PROBE_SECONDS_ENV, MIN_EAGER_WORK_S))
        if eager_s * steps < min_work:
            return CompileDecision(False, f"{steps} steps of {eager_s:.2f} s: too short for a compile to pay back",
                                   CompileProbe(eager_s))
        key = json.dumps({**_machine(), "kind": kind, **signature}, sort_keys=True, default=str)
        probe = _cached_probe(_read_cache(cache_dir).get(key))
        if probe is None:
            probe = _probe(module, owner or module, loss, device, eager_s, tolerance)
            _write_cache(cache_dir, key, probe)
        elif probe.pays(steps):
            compile_in_place(module)
    compiled = probe.pays(steps)
    if not compiled:
        uncompile(module)
    return CompileDecision(compiled, _reason(probe, steps, compiled), probe)


def _probe(module: nn.Module, owner: nn.Module, loss: Callable[[], torch.Tensor], device: torch.device,
           eager_s: float, tolerance: float) -> CompileProbe:
    """Measure the compiled side (the module left compiled); a failure or a difference is a probe that never pays."""
    try:
        eager_value = _eval_loss(owner, loss, device)
        compile_in_place(module)
        compiled_value = _eval_loss(owner, loss, device)
        difference = abs(compiled_value - eager_value) / max(abs(eager_value), 1e-6)
        if not difference <= tolerance:  # NaN too
            uncompile(module)
            return CompileProbe(eager_s, difference=difference,
                                error=f"compiled loss {compiled_value:.6g} differs from eager {eager_value:.6g}")
        began = time.perf_counter()  # wall time: inductor compiles in worker processes this one's CPU time misses
        _step(module, loss)  # the compile of the training graph
        compile_s = time.perf_counter() - began
        compiled_s = _step_seconds(module, loss, device, warmup=0)
        return CompileProbe(eager_s, compiled_s, compile_s, difference)
    except Exception as exc:  # noqa: BLE001  (a compile that fails is a compile that does not pay; the loop runs eager)
        uncompile(module)
        log.debug("torch.compile failed", exc_info=True)
        return CompileProbe(eager_s, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")


def _cached_probe(cached: Any) -> CompileProbe | None:
    if not isinstance(cached, dict) or not isinstance(cached.get("eager_s"), (int, float)):
        return None
    return CompileProbe(**{name: cached.get(name) for name in CompileProbe.__dataclass_fields__})


def _reason(probe: CompileProbe, steps: int, compiled: bool) -> str:
    if probe.error is not None:
        return f"eager: {probe.error}"
    if probe.speedup is None or probe.compile_s is None:
        return "eager: no compiled step was timed"
    speed = f"{probe.speedup:.2f}x a step ({probe.eager_s:.2f} s eager), {probe.compile_s:.0f} s to compile"
    if compiled:
        return f"compiled: {speed}, over {steps} steps"
    return f"eager: compiled {speed}, does not pay over {steps} steps"


def _step(module: nn.Module, loss: Callable[[], torch.Tensor]) -> None:
    loss().backward()
    module.zero_grad(set_to_none=True)


def _step_seconds(module: nn.Module, loss: Callable[[], torch.Tensor], device: torch.device, warmup: int) -> float:
    for _ in range(warmup):
        _step(module, loss)
    clock = _Clock(device)
    began = clock.now()
    for _ in range(PROBE_STEPS):
        _step(module, loss)
    return (clock.now() - began) / PROBE_STEPS


@torch.no_grad()
def _eval_loss(owner: nn.Module, loss: Callable[[], torch.Tensor], device: torch.device) -> float:
    """The loss with every part of ``owner`` in eval mode (a head's dropout too) and the same random state each time
    (a loss that draws, such as masking, draws the same), so eager and compiled compute the same thing."""
    with _untouched(owner, device):
        owner.eval()
        return float(loss())


@contextlib.contextmanager
def _untouched(owner: nn.Module, device: torch.device) -> Iterator[None]:
    """Whatever runs inside leaves ``owner`` as it found it: its gradients cleared, every module's mode and the
    random state (dropout's, a masker's draws) put back."""
    modes = {m: m.training for m in owner.modules()}
    rng = torch.random.get_rng_state(), torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    try:
        yield
    finally:
        owner.zero_grad(set_to_none=True)
        torch.random.set_rng_state(rng[0])
        if rng[1] is not None:
            torch.cuda.set_rng_state(rng[1], device)
        for part, training in modes.items():
            part.training = training


class _Clock:
    """The budget's clock (``machine.StepClock``), the device synchronized before each reading."""

    def __init__(self, device: torch.device) -> None:
        from focusflow.training.machine import StepClock

        self.device, self.clock = device, StepClock(device)

    def now(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return self.clock.now()


def _machine() -> dict[str, Any]:
    from focusflow.training.machine import machine_fingerprint

    return {**machine_fingerprint(), "capability": torch.backends.cpu.get_cpu_capability()}


def _cache_path(cache_dir: Path | None) -> Path:
    from platformdirs import user_cache_dir

    return Path(cache_dir or user_cache_dir("focusflow")) / PROBE_FILE


def _read_cache(cache_dir: Path | None) -> dict[str, Any]:
    try:
        cached = json.loads(_cache_path(cache_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return cached if isinstance(cached, dict) else {}


def _write_cache(cache_dir: Path | None, key: str, probe: CompileProbe) -> None:
    from focusflow.storage.atomic import atomic_write

    cached = _read_cache(cache_dir)
    cached[key] = {**asdict(probe), "measured": time.strftime("%Y-%m-%dT%H:%M:%S")}
    path = _cache_path(cache_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(cached, indent=1))
    except OSError as exc:  # a read-only or full cache: the decision stands, the next run measures again
        log.warning("the compile measurement could not be cached at %s: %s", path, exc)


__all__ = ["CompileDecision", "CompileProbe", "CompileSetting", "compile_in_place", "decide_compile", "is_compiled",
           "loss_tolerance", "uncompile"]
