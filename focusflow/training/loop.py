"""``TrainingRun``: the project's one training loop (budget, AdamW and schedule, trainable stages, precision,
atomic checkpoints and bit-for-bit resume, evaluation and keep-best, patience, progress, metrics, the final folder),
handed a recipe (``training.recipe.RunRecipe``: a loss with its data and its settings).

Its users: LAPT (``training.lapt.LaptRecipe``), the distillation (``training.distill.DistillRecipe``), embedding
alignment (``training.align.AlignRecipe``) and, with no checkpoints, the short in-memory runs (``training.fit``:
downstream fine-tuning, the source's MLM head). One loop serves one CPU, one GPU or ``torchrun`` (DDP, rank 0
writes). Checkpoints are atomic, carry a manifest of their files' hashes and are verified before a run resumes from
them (see ``focusflow.training.checkpoint``); the optimizer, schedule and scaler move together as one
``focusflow.training.optimization.Optimization``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from focusflow.errors import TrainingDivergedError
from focusflow.logs import ProgressBar
from focusflow.models.weights import check_weights, tensor_rms
from focusflow.precision import resolve_precision
from focusflow.stopping import (
    StopRequested,
    check_stop,
    note_kept,
    requested_signal,
    stop_message,
    stop_requested,
    unstoppable,
)
from focusflow.storage.atomic import atomic_folder
from focusflow.training import checkpoint as ckpt
from focusflow.training.compile_probe import CompileDecision, compile_in_place, decide_compile, loss_tolerance
from focusflow.training.distributed import data_parallel
from focusflow.training.flops import mfu, peak, with_efficiency
from focusflow.training.machine import StepClock
from focusflow.training.master import trained_weights
from focusflow.training.monitor import METRICS_FILE, LossWindow, write_metrics_csv, write_run_record
from focusflow.training.optimization import all_finite, cadence_due, diverged, require_finite_loss
from focusflow.training.recipe import RunRecipe, RunTotals, Trainable
from focusflow.training.selection import BestState, Evaluations

log = logging.getLogger(__name__)

_NOTHING_COMMITTED = ". Nothing of this run was committed after its last good checkpoint"




class TrainingRun:
    """The one training loop: budget, AdamW and schedule, trainable stages, precision, checkpoints and resume (where
    the recipe's settings ask for them), evaluation and keep-best, patience, progress, metrics and the final folder,
    for the recipe it is handed: the long runs (LAPT, the distillation, align) and, without checkpoints, the short
    in-memory ones (``training.fit``: downstream fine-tuning, the source's MLM head)."""

    def __init__(self, recipe: RunRecipe, resume: bool,
                 on_checkpoint: Callable[[Path, int, dict], None] | None = None):
        self.recipe, self.on_checkpoint, self.settings = recipe, on_checkpoint, recipe.settings
        self.spec, self.out_dir, self.dist, self.name = recipe.spec, recipe.out_dir, recipe.dist, recipe.name
        self.total_steps, self.progress = recipe.total_steps, recipe.progress
        self._start(resume)

    @property
    def trainable(self) -> Trainable:
        return self.recipe.trainable

    @property
    def hf_model(self) -> nn.Module:
        return self.recipe.hf_model

    @property
    def loss_model(self) -> nn.Module:
        return self.recipe.loss_model

    @property
    def best(self) -> BestState[list[torch.Tensor]]:
        """The best evaluation so far: its step, score and the trained parameters' snapshot."""
        return self.evaluations.best

    def _start(self, resume: bool) -> None:
        """Find the resume point, then build model and optimizer and restore their state."""
        spec, recipe, settings = self.spec, self.recipe, self.settings
        self.checkpoint = ckpt.resume_point(self.out_dir, resume, self.dist.main, self.dist.barrier) \
            if settings.checkpointed else None
        self.state: dict[str, Any] = {"step": 0, "samples": 0, "tokens": 0, "seconds": 0.0, "work_seconds": 0.0,
                                      "history": []}
        if self.checkpoint is not None:  # a checkpoint from before work_seconds counts its wall seconds as work
            loaded = ckpt.load_trainer_state(self.checkpoint)
            self.state = {"seconds": 0.0, "work_seconds": loaded.get("seconds", 0.0), **loaded}
            ckpt.resumable_changes_only(spec, self.state.get("spec", {}), recipe.resumable_changes, self.out_dir)
            log.info("resuming from %s (step %d)", self.checkpoint, self.state["step"])

        if settings.seed is not None:
            torch.manual_seed(settings.seed)
        self.precision = resolve_precision(settings.precision, self.dist.device)
        self.stage: str | None = None
        self.ddp: nn.Module | None = None
        recipe.begin(self.checkpoint, self.precision)
        # what MFU is measured against, where the recipe counts its FLOPs (a CPU's ceiling is measured once per machine)
        self.peak = peak(self.dist.device, self.precision.dtype) if self.trainable.flops_per_token else None
        self.peak_flops = self.peak.flops if self.peak is not None else None
        if self.checkpoint is not None:  # trained state the model folder does not hold, before any copy of the weights
            recipe.restore_extras(self.checkpoint)
        self.weights = trained_weights(self.hf_model, self.trainable.parameters, spec, self.precision,
                                       self.dist.world_size)
        self.compile_decision: CompileDecision | None = configured_compile(self)
        self.optimization = recipe.optimization(self.weights.groups(self.trainable.param_groups), self.dist.device,
                                                self.precision.needs_scaler)
        self.evaluations = Evaluations(self.name, recipe.evaluate, recipe.selection, recipe.selection_name,
                                       lambda: [p.detach().clone() for p in self.weights.optimized],
                                       settings.higher_is_better, settings.patience)
        if self.checkpoint is not None:
            self.optimization.restore(self.checkpoint)
            kept = ckpt.load_tensors(self.checkpoint, "best")
            self.best.restore(self.state, [t.to(self.dist.device) for t in kept["params"]] if kept else None)
            ckpt.restore_rng(self.checkpoint, self.dist.rank)
        # what every checkpoint and the final model are checked against (a checkpoint of an older run lacks it:
        # then its own weights, which passed the finite check when written, are the start)
        if settings.checkpointed:
            self.state.setdefault("start_rms", tensor_rms(self.hf_model.named_parameters()))
        self.weights_check: dict[str, Any] = {}

    # ---------------------------------------------------------------- setup
    def _set_stage(self, step: int) -> None:
        stage = self.trainable.stage_at(step)
        if stage.name == self.stage:
            return
        for parameter in self.hf_model.parameters():
            parameter.requires_grad_(id(parameter) in stage.parameters)
        self.stage = stage.name
        if self.dist.world_size > 1:  # DDP registers gradient hooks for the trainable set at construction
            self.ddp = data_parallel(self.loss_model, self.dist.device)
        log.info("%s stage %r from step %d: %d trainable tensors", self.name, stage.name, step,
                 sum(p.requires_grad for p in self.hf_model.parameters()))

    # ---------------------------------------------------------------- training
    def train(self) -> dict[str, Any]:
        settings, state = self.settings, self.state
        start_step = state["step"]
        resumed_from = str(self.checkpoint) if self.checkpoint is not None else None
        if start_step == 0 and not state["history"] and settings.evaluate_at_start:
            self._evaluate_start()
        self._set_stage(start_step)
        batches = self.recipe.step_batches(start_step)
        spent_before, worked_before, self.start_tokens = state["seconds"], state["work_seconds"], state["tokens"]
        clock = StepClock(self.dist.device)  # the clock a minutes budget counts: CPU time over threads on a CPU
        # a run stopped between logged rows resumes with the open window, so its rows equal an uninterrupted run's
        train_time, work_time, window = 0.0, 0.0, LossWindow(**state.get("window", {}))
        self.window = window
        last_metrics: dict[str, Any] = {}
        bar = ProgressBar(self.name, self.total_steps, start_step) if self.progress and self.dist.main else None
        try:
            pending = next(batches) if start_step < self.total_steps else None
            if self.compile_decision is None and pending is not None:  # compile: auto, decided on the run's batch
                self.compile_decision = probe_compile(self, pending, self.total_steps - start_step)
            for step in range(start_step, self.total_steps):
                if not settings.checkpointed:  # a short run keeps nothing: a stop asked before a step ends it there
                    check_stop(f"in {self.name} at step {step + 1}/{self.total_steps} (a short run: nothing of it "
                               "is kept)")
                self._set_stage(step)  # before the clock: a stage switch (DDP's rewrap) is no training time
                began, work_began = time.perf_counter(), clock.now()
                step_batches, pending = pending or next(batches), None  # the first step's, fetched for the probe
                loss_sum, predicted = self.step(step, step_batches)
                require_finite_step(self, step + 1, loss_sum)
                elapsed = time.perf_counter() - began
                work_time += clock.now() - work_began
                samples, tokens = self.recipe.step_size(step_batches)
                train_time += elapsed
                window.add(elapsed, loss_sum, predicted, tokens)
                state["step"], state["samples"], state["tokens"] = step + 1, state["samples"] + samples, \
                    state["tokens"] + tokens
                state["seconds"], state["work_seconds"] = spent_before + train_time, worked_before + work_time
                done = step + 1
                last = done == self.total_steps or self._out_of_time()
                checkpoint = settings.checkpointed and cadence_due(done, settings.checkpoint_every, last,
                                                                   settings.milestones)
                evaluate = cadence_due(done, settings.eval_every, last, settings.milestones)
                if done % settings.log_every == 0 or evaluate or checkpoint:
                    last_metrics = self._log_row(done, window, train_time, evaluate=evaluate)
                self.recipe.after_step(done, loss_sum, self.evaluations.last_score())
                if bar is not None:
                    used = last_metrics.get("mfu")
                    bar.update(done, last_metrics.get("train_loss", float("nan")), f"MFU {used:.1%}" if used else "")
                if checkpoint:
                    write_checkpoint(self, done, last_metrics)
                if last or self.evaluations.out_of_patience():
                    break
                if self._stop_asked():
                    self._stop_at(done, last_metrics, saved=checkpoint)
        finally:
            batches.close()
            if bar is not None:
                bar.stop()
        return self._finish(train_time, start_step, resumed_from)

    def _evaluate_start(self) -> None:
        """The held-out loss and the selection's measure of the start (the state kept when no step improves on it)."""
        initial = self.evaluations.heldout()
        if initial is not None:
            self.state["history"].append({"step": 0, "samples": 0, "tokens": 0, "heldout_loss": initial})
            log.info("held-out loss before %s: %.4f", self.name, initial)
        self.evaluations.select(0)

    def _log_row(self, done: int, window: LossWindow, train_time: float, evaluate: bool) -> dict[str, Any]:
        """Close the loss window into a metric-history row (with the held-out loss when ``evaluate``)."""
        train_loss, speed = window.close(self.dist.sum)
        speed = speed if self.state["tokens"] else None  # a short run counts no tokens: no speed to show
        row: dict[str, Any] = {"step": done, "samples": self.state["samples"], "tokens": self.state["tokens"],
                               "train_loss": train_loss, "lr": self.optimization.lr, "tokens_per_s": speed,
                               "mfu": mfu(speed, self.trainable.flops_per_token, self.peak_flops),
                               "elapsed_s": round(train_time, 3)}
        if evaluate:
            heldout = self.evaluations.heldout()
            if heldout is not None:
                row["heldout_loss"] = heldout
            self.evaluations.select(done)
        self.state["history"].append(row)
        log.info("step %d/%d %s", done, self.total_steps,
                 " ".join(f"{k}={v:.4g}" for k, v in row.items() if isinstance(v, float)))
        return row

    def _stop_asked(self) -> bool:
        """Whether a stop was asked for (SIGTERM, SIGINT: ``focusflow.stopping``), decided together on all ranks."""
        return self.dist.sum([float(stop_requested())])[0] > 0

    def _stop_at(self, done: int, last_metrics: dict[str, Any], saved: bool) -> None:
        """Checkpoint the step reached (unless it just was) and stop: the same command resumes from that step, with
        the same metric history an uninterrupted run writes (no row is added; the open loss window is kept). A run
        without checkpoints keeps nothing."""
        if not self.settings.checkpointed:
            check_stop(f"in {self.name} at step {done}/{self.total_steps} (a short run: nothing of it is kept)")
        if not saved:
            write_checkpoint(self, done, {**last_metrics, "step": done, "stopped": True})
        note_kept(f"{self.name}'s checkpoint at step {done} of {self.total_steps} (the same command resumes from it)")
        raise StopRequested(stop_message(), requested_signal() or signal.SIGTERM)

    def _out_of_time(self) -> bool:
        """Whether the time budget is spent, on the budget's clock (CPU time over threads on a CPU: another
        process's time slices are not this run's), decided together on all ranks."""
        limit = self.recipe.time_limit_s  # the same on every rank: all of them take part in the sum, or none
        return limit is not None and self.dist.sum([float(self.state["work_seconds"] >= limit)])[0] > 0

    # ---------------------------------------------------------------- one step, also for callers that time steps
    def step_batches(self, start_step: int) -> Iterator[list[Any]]:
        """Each optimizer step's micro-batches from ``start_step`` on (the recipe's)."""
        return self.recipe.step_batches(start_step)

    def step(self, step: int, micro_batches: list[Any]) -> tuple[float, float]:
        """Optimizer step number ``step`` on ``micro_batches`` in the training stage of that step; returns the
        summed loss and the predicted tokens (``lapt_budget`` times these; ``train`` adds the bookkeeping)."""
        self._set_stage(step)
        return self._optimizer_step(micro_batches, step + 1)

    def _optimizer_step(self, micro_batches: list[Any], number: int) -> tuple[float, float]:
        world = self.dist.world_size
        local = float(sum(mb.predicted for mb in micro_batches))
        total = self.dist.sum([local])[0]
        module = self.ddp if self.ddp is not None else self.loss_model
        loss_total = torch.zeros((), device=self.dist.device)
        for index, mb in enumerate(micro_batches):
            sync = index == len(micro_batches) - 1 or self.ddp is None
            with (contextlib.nullcontext() if sync else self.ddp.no_sync()):
                with self.precision.autocast():
                    loss_sum = self.recipe.micro_loss(module, mb)
                if not self.settings.checkpointed:  # the caller's model: a non-finite loss never reaches its weights
                    require_finite_step(self, number, float(loss_sum.detach()))
                # DDP averages gradients over ranks; scale so the result is the mean over the global batch.
                scaled = loss_sum * (world / max(total, 1.0))
                self.optimization.backward(scaled)
            loss_total += loss_sum.detach()
        self.weights.step(self.optimization)
        return float(loss_total), local

    def _finish(self, train_time: float, start_step: int, resumed_from: str | None) -> dict[str, Any]:
        """Keep the best state, check the weights and, for a checkpointed run, write ``final/`` and the run record."""
        if not self.settings.checkpointed:  # the weights trained, not only the best state put back, are checked
            require_sound(self, self.state["step"])
        selection = self.evaluations.keep_best(self.weights.restore, self.state["step"])
        require_sound(self, self.state["step"])
        totals = RunTotals(self.state, train_time, start_step, self.start_tokens, resumed_from, self.peak_flops)
        summary = {**self.recipe.summary(totals), "weights_check": self.weights_check,
                   "compile": self.compile_decision.to_dict() if self.compile_decision is not None else None}
        if selection:
            summary["selection"] = selection
        summary = with_efficiency(summary, self.trainable.flops_per_token, self.peak)
        if self.dist.main and self.settings.checkpointed:
            with atomic_folder(self.out_dir / "final", replace=True) as staging, self.weights.full_precision():
                self.recipe.write_model(staging)
            write_run_record(self.out_dir, self.state["history"], summary, f"{self.name} ({self.trainable.loss})")
        self.dist.barrier()
        return summary


def compile_target(run: TrainingRun) -> nn.Module | None:
    """What ``spec.compile`` compiles: the transformer body (heads gather rows of data-dependent shapes)."""
    return getattr(run.hf_model, "base_model", None)


def configured_compile(run: TrainingRun) -> CompileDecision | None:
    """``compile: true`` compiles now (a caller that times ``step`` directly gets it too), ``false`` or no body
    never; ``auto`` is decided by ``train`` on its first batch (None until then)."""
    setting = getattr(run.spec, "compile", False)
    target = compile_target(run)
    if setting is False or target is None:
        return CompileDecision(False, "compile: false" if setting is False else "nothing to compile")
    if setting is True:
        compile_in_place(target)
        return CompileDecision(True, "compile: true")
    return None


def probe_compile(run: TrainingRun, micro_batches: list[Any], steps: int) -> CompileDecision:
    """``compile: auto``: compiled where the probe (``training.compile_probe``) finds it pays for the run's remaining
    micro-steps; one micro-batch of the first step, forward and backward, eager against compiled."""
    if run.dist.world_size > 1:  # a probe's backward outside DDP's forward would trip its gradient hooks
        return CompileDecision(False, "compile: auto measures single-process runs; torchrun compiles with true")
    target, batch = compile_target(run), micro_batches[0]

    def loss() -> torch.Tensor:
        with run.precision.autocast():
            return run.recipe.micro_loss(run.loss_model, batch)

    signature = {"run": run.name, "loss": run.trainable.loss, "stage": run.stage,
                 "module": type(target).__name__,
                 "parameters": sum(p.numel() for p in target.parameters()),
                 "trainable": sum(p.numel() for p in run.trainable.parameters),
                 "batch": list(run.recipe.step_size([batch])), "precision": run.precision.name,
                 "weights": type(run.weights).__name__}
    decision = decide_compile("auto", target, loss, steps * len(micro_batches), run.name, signature,
                              loss_tolerance(run.precision.dtype), owner=run.loss_model)
    log.info("%s: %s", run.name, decision.reason)
    return decision


def _then(run: TrainingRun) -> str:
    """What a diverged run's message says was kept: a checkpointed run's last good checkpoint, a short run nothing."""
    return _NOTHING_COMMITTED if run.settings.checkpointed else ""


def _diverged(run: TrainingRun, where: str, what: str) -> TrainingDivergedError:
    return diverged(run.name, where, what, run.settings.lr, _then(run))


def require_finite_step(run: TrainingRun, step: int, loss_sum: float) -> None:
    """Stop at ``step`` when the loss is not finite on any rank: a diverged run is never committed."""
    if run.dist.sum([0.0 if math.isfinite(loss_sum) else 1.0])[0] > 0:
        where = f" at step {step}/{run.total_steps}"
        require_finite_loss(loss_sum, run.name, where, run.settings.lr, _then(run))
        raise _diverged(run, where, "another rank's training loss became non-finite")


def require_sound(run: TrainingRun, step: int) -> None:
    """Stop at ``step`` unless every weight is finite and, for a checkpointed run, no tensor grew past ten times its
    starting RMS (``models.weights``; a short run's fresh head may): a run whose weights blew up to finite nonsense
    is never checkpointed or committed either. The result is recorded with the checkpoint and the final model
    (``weights_check``)."""
    if not run.settings.checkpointed:
        if not all_finite(run.weights.optimized):
            raise _diverged(run, "", f"the weights hold non-finite values after {step} steps")
        return
    check = check_weights(tensor_rms(run.hf_model.named_parameters()), run.state["start_rms"])
    if not check.passed:
        raise _diverged(run, f" at step {step}", f"the weights failed their check ({check.problem})")
    run.weights_check = {**check.to_dict(), "step": step}


@unstoppable()  # a checkpoint begun is finished: a stop's grace period does not cut it off
def write_checkpoint(run: TrainingRun, step: int, metrics: dict[str, Any]) -> Path | None:
    """Check the weights and write the checkpoint of ``step`` (rank 0; every rank takes part in the collectives):
    the model folder and the recipe's extras, the optimizer state, RNG states, the best state and the metrics."""
    require_sound(run, step)
    rng = ckpt.rng_states(run.dist.world_size)  # collective: every rank takes part
    folder = None
    if run.dist.main:
        tensors = {**run.optimization.state_tensors(), **rng}
        if run.best.state is not None:
            tensors["best"] = {"params": [t.detach().cpu() for t in run.best.state]}

        def write_model(target: Path) -> None:
            with run.weights.full_precision():
                run.recipe.write_model(target)
                run.recipe.write_extras(target)

        folder = ckpt.save_checkpoint(run.out_dir, step, write_model, trainer_state(run), tensors,
                                      run.settings.keep_last)
        write_metrics_csv(run.state["history"], run.out_dir / METRICS_FILE)
        if run.on_checkpoint is not None:
            run.on_checkpoint(folder, step, metrics)
    run.dist.barrier()
    return folder


def trainer_state(run: TrainingRun) -> dict[str, Any]:
    """What a checkpoint holds of the loop besides tensors: counters, history, the best state's record, the open loss
    window, the settings it ran with, its stage and its weights check."""
    state = {k: run.state[k]
             for k in ("step", "samples", "tokens", "seconds", "work_seconds", "history", "start_rms")}
    state.update(run.best.to_record() if run.recipe.selection is not None else {})
    if run.dist.world_size == 1:  # a rank's own window: under DDP the first row after a resume is shorter
        state["window"] = dataclasses.asdict(run.window)
    state.update(spec=run.spec.model_dump(mode="json"), loss=run.trainable.loss, stage=run.stage,
                 world_size=run.dist.world_size, weights_check=run.weights_check)
    return state
