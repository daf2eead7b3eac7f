"""``TrainingRun``: the project's one training loop (budget, AdamW and schedule, trainable stages, precision,
atomic checkpoints and bit-for-bit resume, held-out evaluation, progress, metrics, the final folder), the contract
a recipe fulfils to use it (:class:`RunRecipe`) and what its model hands the loop (:class:`Trainable`).

LAPT (``focusflow.training.lapt``, the distillation in ``training.distill``) and embedding alignment
(``focusflow.training.align``) are its users; the short in-memory runs (``training.fit``) share its pieces. One
loop serves one CPU, one GPU or ``torchrun`` (DDP, rank 0 writes). Checkpoints are atomic, carry a manifest of
their files' hashes and are verified before a run resumes from them (see ``focusflow.training.checkpoint``); the
optimizer, schedule and scaler move together as one ``focusflow.training.optimization.Optimization``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from focusflow.logs import ProgressBar
from focusflow.models.weights import check_weights, tensor_rms
from focusflow.precision import resolve_precision
from focusflow.stopping import StopRequested, note_kept, requested_signal, stop_message, stop_requested, unstoppable
from focusflow.storage.atomic import atomic_folder
from focusflow.training import checkpoint as ckpt
from focusflow.training.compile_probe import CompileDecision, compile_in_place, decide_compile, loss_tolerance
from focusflow.training.distributed import data_parallel, setup_distributed
from focusflow.training.flops import mfu, peak, with_efficiency
from focusflow.training.master import trained_weights
from focusflow.training.monitor import METRICS_FILE, LossWindow, write_metrics_csv, write_run_record
from focusflow.training.optimization import Optimization, cadence_due, diverged, require_finite_loss
from focusflow.training.selection import BestState, kept_reason

log = logging.getLogger(__name__)

_NOTHING_COMMITTED = ". Nothing of this run was committed after its last good checkpoint"


@dataclass(frozen=True)
class TrainingStage:
    """From optimizer step ``first_step`` on, exactly ``parameters`` (their ``id``s) receive gradients."""

    name: str
    first_step: int
    parameters: frozenset[int]


@dataclass
class Trainable:
    """What a recipe's ``_build_model`` hands the loop: the whole of what it trains and how."""

    model: nn.Module  # the Hugging Face model being trained: saved with ``save_pretrained``
    tokenizer: Any  # saved beside it
    loss_model: nn.Module  # forward(micro-batch …) -> summed loss; the module DDP wraps
    parameters: list[nn.Parameter]  # every parameter the optimizer steps, in model order (clipped together)
    param_groups: list[dict[str, Any]]  # AdamW groups over ``parameters`` ("params", "weight_decay")
    stages: tuple[TrainingStage, ...]  # by ``first_step``; the first starts at step 0
    loss: str  # what the loop minimizes ("mlm", "clm", "distill", "align"): in checkpoints and the loss-curve title
    flops_per_token: float | None = None  # training FLOPs per token, for MFU (None: not reported)

    def __post_init__(self) -> None:
        starts = [stage.first_step for stage in self.stages]
        if not starts or starts[0] != 0 or starts != sorted(starts):
            raise ValueError(f"training stages must start at step 0 and be in step order, not {starts}")

    def stage_at(self, step: int) -> TrainingStage:
        return [stage for stage in self.stages if stage.first_step <= step][-1]


class RunRecipe:
    """What a run trains, the contract between the loop (:class:`TrainingRun`) and a recipe: a loss with its data
    (LAPT's ``LaptRun``, the distillation's ``DistillRun``, align's ``AlignRun``). A recipe supplies

    - ``_build_model() -> Trainable`` (called once the resume point is known: ``self.checkpoint``),
    - ``_step_batches(start_step)``: each optimizer step's micro-batches (each with ``predicted``, the loss's
      normalizer), ``_micro_loss(module, batch)``: a micro-batch's summed loss, ``_step_size(batches)``:
      (samples, tokens) of a step, ``evaluate()``: the held-out loss, ``_summary(...)``: the run's summary;

    sets ``total_steps`` in its ``__init__`` (after preparing its data) and then calls ``_start``. It may extend
    ``_write_hf_folder`` (what goes beside the model), ``_write_checkpoint_extras``/``_restore_checkpoint_extras``
    (state the HF folder does not hold).
    """

    name = "training"
    # Spec fields that may change between a run and its resumption without changing the trajectory.
    resumable_changes: frozenset[str] = frozenset({"steps", "checkpoint_every", "keep_last", "eval_every", "log_every"})
    time_limit_s: float | None = None  # stop once this much training time (over all sessions) is spent
    total_steps: int
    # the measure a run keeps its best state by (lower is better; its start included), set by a recipe whose own
    # loss is only a proxy (align); None: the last state is the result
    selection: Callable[[], float] | None = None
    selection_name: str = ""
    trainable: Trainable

    @property
    def hf_model(self) -> nn.Module:
        return self.trainable.model

    @property
    def loss_model(self) -> nn.Module:
        return self.trainable.loss_model

    def _build_model(self) -> Trainable:
        raise NotImplementedError

    def _step_batches(self, start_step: int) -> Iterator[list[Any]]:
        """Each optimizer step's micro-batches from ``start_step`` on (a function of the step: resume needs no state)."""
        raise NotImplementedError

    def _micro_loss(self, module: nn.Module, batch: Any) -> torch.Tensor:
        """The summed loss of one micro-batch (normalized by the step's total ``predicted``)."""
        raise NotImplementedError

    def _step_size(self, micro_batches: list[Any]) -> tuple[int, int]:
        """(samples, tokens) one step consumed, for the budget counters."""
        raise NotImplementedError

    def evaluate(self) -> float:
        """The held-out loss."""
        raise NotImplementedError

    def _summary(self, train_time: float, start_step: int, resumed_from: str | None) -> dict[str, Any]:
        raise NotImplementedError

    def _write_hf_folder(self, folder: Path) -> None:
        """The model folder of a checkpoint and of ``final/``."""
        self.trainable.model.save_pretrained(folder)
        self.trainable.tokenizer.save_pretrained(folder)

    def _write_checkpoint_extras(self, folder: Path) -> None:
        """Trained state a checkpoint needs that its HF folder does not hold (none by default)."""

    def _restore_checkpoint_extras(self, folder: Path) -> None:
        """Read back what ``_write_checkpoint_extras`` wrote."""


class TrainingRun(RunRecipe):
    """The loop: budget, AdamW and schedule, trainable stages, precision, checkpoints and resume, held-out
    evaluation and keep-best, progress, metrics and the final folder, for the recipe a subclass defines."""

    def __init__(self, spec: Any, out_dir: Path, on_checkpoint: Callable[[Path, int, dict], None] | None,
                 progress: bool):
        self.spec, self.out_dir, self.on_checkpoint, self.progress = spec, Path(out_dir), on_checkpoint, progress
        # steps that are checkpointed (and evaluated) besides every ``checkpoint_every``: a curve's points
        self.milestones = frozenset(getattr(spec, "checkpoint_steps", None) or ())
        self.dist = setup_distributed()

    def _start(self, resume: bool) -> None:
        """Find the resume point, then build model and optimizer and restore their state."""
        spec = self.spec
        self.checkpoint = ckpt.resume_point(self.out_dir, resume, self.dist.main, self.dist.barrier)
        self.state: dict[str, Any] = {"step": 0, "samples": 0, "tokens": 0, "seconds": 0.0, "history": []}
        if self.checkpoint is not None:
            self.state = {"seconds": 0.0, **ckpt.load_trainer_state(self.checkpoint)}
            ckpt.resumable_changes_only(spec, self.state.get("spec", {}), self.resumable_changes, self.out_dir)
            log.info("resuming from %s (step %d)", self.checkpoint, self.state["step"])

        torch.manual_seed(spec.seed)
        self.precision = resolve_precision(spec.precision, self.dist.device)
        self.peak = peak(self.dist.device, self.precision.dtype)  # a CPU's ceiling is measured once per machine
        self.peak_flops = self.peak.flops if self.peak is not None else None  # what MFU is measured against
        self.stage: str | None = None
        self.ddp: nn.Module | None = None
        self.trainable = self._build_model()
        if self.checkpoint is not None:  # trained state the HF folder does not hold, before any copy of the weights
            self._restore_checkpoint_extras(self.checkpoint)
        self.weights = trained_weights(self.hf_model, self.trainable.parameters, spec, self.precision,
                                       self.dist.world_size)
        self.compile_decision: CompileDecision | None = configured_compile(self)
        self.optimization = Optimization.from_spec(self.weights.groups(self.trainable.param_groups), spec,
                                                   self.total_steps, self.dist.device, self.precision.needs_scaler)
        self.best: BestState[list[torch.Tensor]] = BestState(
            lambda: [p.detach().clone() for p in self.weights.optimized])
        if self.checkpoint is not None:
            self.optimization.restore(self.checkpoint)
            kept = ckpt.load_tensors(self.checkpoint, "best")
            self.best.restore(self.state, [t.to(self.dist.device) for t in kept["params"]] if kept else None)
            ckpt.restore_rng(self.checkpoint, self.dist.rank)
        # what every checkpoint and the final model are checked against (a checkpoint of an older run lacks it:
        # then its own weights, which passed the finite check when written, are the start)
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

    # ---------------------------------------------------------------- divergence
    def _require_finite(self, step: int, loss_sum: float) -> None:
        """Stop at ``step`` when the loss is not finite on any rank: a diverged run is never committed."""
        if self.dist.sum([0.0 if math.isfinite(loss_sum) else 1.0])[0] > 0:
            require_finite_loss(loss_sum, self.name, f" at step {step}", self.spec.lr, _NOTHING_COMMITTED)
            raise diverged(self.name, f" at step {step}", "another rank's training loss became non-finite",
                           self.spec.lr, _NOTHING_COMMITTED)

    def _require_sound(self, step: int) -> None:
        """Stop at ``step`` unless every weight is finite and no tensor grew past ten times its starting RMS
        (``models.weights``): a run whose weights blew up to finite nonsense is never checkpointed or committed
        either. The result is recorded with the checkpoint and the final model (``weights_check``)."""
        check = check_weights(tensor_rms(self.hf_model.named_parameters()), self.state["start_rms"])
        if not check.passed:
            raise diverged(self.name, f" at step {step}", f"the weights failed their check ({check.problem})",
                           self.spec.lr, _NOTHING_COMMITTED)
        self.weights_check = {**check.to_dict(), "step": step}

    # ---------------------------------------------------------------- saving
    @unstoppable()  # a checkpoint begun is finished: a stop's grace period does not cut it off
    def _save_checkpoint(self, step: int, metrics: dict[str, Any]) -> Path | None:
        self._require_sound(step)
        rng = ckpt.rng_states(self.dist.world_size)  # collective: every rank takes part
        folder = None
        if self.dist.main:
            tensors = {**self.optimization.state_tensors(), **rng}
            if self.best.state is not None:
                tensors["best"] = {"params": [t.detach().cpu() for t in self.best.state]}

            def write_model(target: Path) -> None:
                with self.weights.full_precision():
                    self._write_hf_folder(target)
                    self._write_checkpoint_extras(target)

            folder = ckpt.save_checkpoint(self.out_dir, step, write_model, trainer_state(self), tensors,
                                          self.spec.keep_last)
            write_metrics_csv(self.state["history"], self.out_dir / METRICS_FILE)
            if self.on_checkpoint is not None:
                self.on_checkpoint(folder, step, metrics)
        self.dist.barrier()
        return folder

    # ---------------------------------------------------------------- training
    def train(self) -> dict[str, Any]:
        spec, state = self.spec, self.state
        start_step = state["step"]
        resumed_from = str(self.checkpoint) if self.checkpoint is not None else None
        history = state["history"]
        if start_step == 0 and not history:
            initial = self.evaluate()
            history.append({"step": 0, "samples": 0, "tokens": 0, "heldout_loss": initial})
            log.info("held-out loss before %s: %.4f", self.name, initial)
            self._select(0)
        self._set_stage(start_step)
        batches = self._step_batches(start_step)
        spent_before, self.start_tokens = state["seconds"], state["tokens"]
        # a run stopped between logged rows resumes with the open window, so its rows equal an uninterrupted run's
        train_time, window = 0.0, LossWindow(**state.get("window", {}))
        self.window = window
        last_metrics: dict[str, Any] = {}
        bar = ProgressBar(self.name, self.total_steps, start_step) if self.progress and self.dist.main else None
        try:
            pending = next(batches) if start_step < self.total_steps else None
            if self.compile_decision is None and pending is not None:  # compile: auto, decided on the run's batch
                self.compile_decision = probe_compile(self, pending, self.total_steps - start_step)
            for step in range(start_step, self.total_steps):
                self._set_stage(step)  # before the clock: a stage switch (DDP's rewrap) is no training time
                began = time.perf_counter()
                step_batches, pending = pending or next(batches), None  # the first step's, fetched for the probe
                loss_sum, predicted = self.step(step, step_batches)
                self._require_finite(step + 1, loss_sum)
                elapsed = time.perf_counter() - began
                samples, tokens = self._step_size(step_batches)
                train_time += elapsed
                window.add(elapsed, loss_sum, predicted, tokens)
                state["step"], state["samples"], state["tokens"] = step + 1, state["samples"] + samples, \
                    state["tokens"] + tokens
                state["seconds"] = spent_before + train_time
                done = step + 1
                last = done == self.total_steps or self._out_of_time()
                checkpoint = cadence_due(done, spec.checkpoint_every, last, self.milestones)
                evaluate = cadence_due(done, spec.eval_every, last, self.milestones)
                if done % spec.log_every == 0 or evaluate or checkpoint:
                    last_metrics = self._log_row(done, window, train_time, evaluate=evaluate)
                if bar is not None:
                    used = last_metrics.get("mfu")
                    bar.update(done, last_metrics.get("train_loss", float("nan")), f"MFU {used:.1%}" if used else "")
                if checkpoint:
                    self._save_checkpoint(done, last_metrics)
                if last:
                    break
                if self._stop_asked():
                    self._stop_at(done, last_metrics, saved=checkpoint)
        finally:
            batches.close()
            if bar is not None:
                bar.stop()
        return self._finish(train_time, start_step, resumed_from)

    def _log_row(self, done: int, window: LossWindow, train_time: float, evaluate: bool) -> dict[str, Any]:
        """Close the loss window into a metric-history row (with the held-out loss when ``evaluate``)."""
        train_loss, speed = window.close(self.dist.sum)
        row: dict[str, Any] = {"step": done, "samples": self.state["samples"], "tokens": self.state["tokens"],
                               "train_loss": train_loss, "lr": self.optimization.lr, "tokens_per_s": speed,
                               "mfu": mfu(speed, self.trainable.flops_per_token, self.peak_flops),
                               "elapsed_s": round(train_time, 3)}
        if evaluate:
            row["heldout_loss"] = self.evaluate()
            self._select(done)
        self.state["history"].append(row)
        log.info("step %d/%d %s", done, self.total_steps,
                 " ".join(f"{k}={v:.4g}" for k, v in row.items() if isinstance(v, float)))
        return row

    def _select(self, step: int) -> None:
        """Measure the model by ``selection`` and keep its trained parameters when it is the best so far."""
        if self.selection is None:
            return
        self.best.offer(step, float(self.selection()), keep=True)
        log.info("%s at step %d: %s %.4f (best %.4f at step %d)", self.name, step, self.selection_name,
                 self.best.history[-1][1], self.best.score, self.best.step)

    def _keep_best(self) -> dict[str, Any]:
        """Put the best state's parameters back (the start's, when no step improved on it); the record of why."""
        if self.selection is None or not self.best.history or self.best.state is None:
            return {}
        if self.best.step != self.state["step"]:
            self.weights.restore(self.best.state)
        return kept_reason(self.best, self.selection_name, self.state["step"])

    def _stop_asked(self) -> bool:
        """Whether a stop was asked for (SIGTERM, SIGINT: ``focusflow.stopping``), decided together on all ranks."""
        return self.dist.sum([float(stop_requested())])[0] > 0

    def _stop_at(self, done: int, last_metrics: dict[str, Any], saved: bool) -> None:
        """Checkpoint the step reached (unless it just was) and stop: the same command resumes from that step, with
        the same metric history an uninterrupted run writes (no row is added; the open loss window is kept)."""
        if not saved:
            self._save_checkpoint(done, {**last_metrics, "step": done, "stopped": True})
        note_kept(f"{self.name}'s checkpoint at step {done} of {self.total_steps} (the same command resumes from it)")
        raise StopRequested(stop_message(), requested_signal() or signal.SIGTERM)

    def _out_of_time(self) -> bool:
        """Whether the time budget is spent (decided together on all ranks)."""
        limit = self.time_limit_s  # the same on every rank: all of them take part in the sum, or none
        return limit is not None and self.dist.sum([float(self.state["seconds"] >= limit)])[0] > 0

    # ---------------------------------------------------------------- one step, also for callers that time steps
    def step_batches(self, start_step: int) -> Iterator[list[Any]]:
        """Each optimizer step's micro-batches from ``start_step`` on (the recipe's ``_step_batches``)."""
        return self._step_batches(start_step)

    def step(self, step: int, micro_batches: list[Any]) -> tuple[float, float]:
        """Optimizer step number ``step`` on ``micro_batches`` in the training stage of that step; returns the
        summed loss and the predicted tokens (``lapt_budget`` times these; ``train`` adds the bookkeeping)."""
        self._set_stage(step)
        return self._optimizer_step(micro_batches)

    def _optimizer_step(self, micro_batches: list[Any]) -> tuple[float, float]:
        world = self.dist.world_size
        local = float(sum(mb.predicted for mb in micro_batches))
        total = self.dist.sum([local])[0]
        module = self.ddp if self.ddp is not None else self.loss_model
        loss_total = torch.zeros((), device=self.dist.device)
        for index, mb in enumerate(micro_batches):
            sync = index == len(micro_batches) - 1 or self.ddp is None
            with (contextlib.nullcontext() if sync else self.ddp.no_sync()):
                with self.precision.autocast():
                    loss_sum = self._micro_loss(module, mb)
                # DDP averages gradients over ranks; scale so the result is the mean over the global batch.
                scaled = loss_sum * (world / max(total, 1.0))
                self.optimization.backward(scaled)
            loss_total += loss_sum.detach()
        self.weights.step(self.optimization)
        return float(loss_total), local

    def _finish(self, train_time: float, start_step: int, resumed_from: str | None) -> dict[str, Any]:
        selection = self._keep_best()
        self._require_sound(self.state["step"])
        summary = {**self._summary(train_time, start_step, resumed_from), "weights_check": self.weights_check,
                   "compile": self.compile_decision.to_dict() if self.compile_decision is not None else None}
        if selection:
            summary["selection"] = selection
        summary = with_efficiency(summary, self.trainable.flops_per_token, self.peak)
        if self.dist.main:
            with atomic_folder(self.out_dir / "final", replace=True) as staging, self.weights.full_precision():
                self._write_hf_folder(staging)
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
            return run._micro_loss(run.loss_model, batch)

    signature = {"run": run.name, "loss": run.trainable.loss, "stage": run.stage,
                 "module": type(target).__name__,
                 "parameters": sum(p.numel() for p in target.parameters()),
                 "trainable": sum(p.numel() for p in run.trainable.parameters),
                 "batch": list(run._step_size([batch])), "precision": run.precision.name,
                 "weights": type(run.weights).__name__}
    decision = decide_compile("auto", target, loss, steps * len(micro_batches), run.name, signature,
                              loss_tolerance(run.precision.dtype), owner=run.loss_model)
    log.info("%s: %s", run.name, decision.reason)
    return decision


def trainer_state(run: TrainingRun) -> dict[str, Any]:
    """What a checkpoint holds of the loop besides tensors: counters, history, the best state's record, the open loss
    window, the settings it ran with, its stage and its weights check."""
    state = {k: run.state[k] for k in ("step", "samples", "tokens", "seconds", "history", "start_rms")}
    state.update(run.best.to_record() if run.selection is not None else {})
    if run.dist.world_size == 1:  # a rank's own window: under DDP the first row after a resume is shorter
        state["window"] = dataclasses.asdict(run.window)
    state.update(spec=run.spec.model_dump(mode="json"), loss=run.trainable.loss, stage=run.stage,
                 world_size=run.dist.world_size, weights_check=run.weights_check)
    return state
