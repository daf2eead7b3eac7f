"""``run_lapt``: language-adaptive pretraining of an initialized model on the target corpus, and
``TrainingRun``, the loop it runs in (other objectives, e.g. embedding alignment, subclass it).

One entry point for one CPU, one GPU or ``torchrun`` (DDP, rank 0 writes). The recipe follows
the FOCUS paper (Table 5): AdamW (0.9, 0.999, eps 1e-8), no weight decay, peak lr 5e-5, linear
warmup over 10% of the budget then constant (cosine/linear selectable), clipping 1.0, effective
batch 128 by gradient accumulation, sequences of 256 packed tokens. Checkpoints are atomic and a
resumed run continues bit-for-bit (see ``focusflow.training.checkpoint``).
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import math
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from focusflow.config import LaptSpec
from focusflow.errors import InputError
from focusflow.models.lm_stats import EVAL_STREAM, Masker
from focusflow.models.loading import describe_source, model_class, require_vocabulary_fits, require_weights
from focusflow.precision import resolve_precision
from focusflow.storage.atomic import atomic_folder, atomic_write
from focusflow.training import checkpoint as ckpt
from focusflow.training.data import PackedSequences, SampleOrder, iter_sample_ranges, pretokenize
from focusflow.training.flops import flops_per_token, mfu, peak_flops
from focusflow.training.loader import MicroBatch, Prefetcher, make_micro_batch
from focusflow.training.monitor import plot_loss_curve, write_metrics_csv
from focusflow.training.objective import LossModel, head_modules

log = logging.getLogger(__name__)


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


def setup_distributed() -> Distributed:
    """Read torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK); NCCL on CUDA, gloo on CPU.

    ``FOCUSFLOW_DEVICE`` (e.g. ``cpu``) overrides the device choice.
    """
    forced = os.environ.get("FOCUSFLOW_DEVICE")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() and (forced is None or forced.startswith("cuda"))
    device = torch.device(f"cuda:{local_rank}" if use_cuda else (forced or "cpu"))
    if use_cuda:
        torch.cuda.set_device(device)
    owns = world > 1 and not dist.is_initialized()
    if owns:
        dist.init_process_group("nccl" if use_cuda else "gloo")
    return Distributed(rank, world, local_rank, device, owns)


def _max_positions(config) -> int | None:
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if limit is None or getattr(config, "position_embedding_type", "absolute") not in ("absolute", None):
        return None
    if "roberta" in config.model_type or config.model_type in ("camembert", "xmod"):
        limit -= (config.pad_token_id or 0) + 1  # RoBERTa positions start after the padding index
    return limit


def load_model(folder: Path, attn_implementation: str) -> tuple[nn.Module, str]:
    """The LM of an HF folder in float32 and its LAPT objective (a bare encoder gets a new MLM head)."""
    require_weights(folder)
    info = describe_source(folder)
    auto = model_class(info, add_head=True)
    try:
        model = auto.from_pretrained(folder, dtype=torch.float32, attn_implementation=attn_implementation)
    except (ValueError, ImportError) as exc:
        if attn_implementation == "eager":
            raise
        log.warning("attention %r unavailable for %s (%s); using eager", attn_implementation, info.model_type, exc)
        model = auto.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    return model, info.training_objective


class TrainingRun:
    """The project's one training loop: budget, optimizer and schedule, stages, precision, atomic checkpoints and
    bit-for-bit resume, held-out evaluation, progress bar, metrics and the final folder.

    A subclass supplies the objective and its data: ``_build_model`` (sets ``model``, ``hf_model``, ``loss_model``,
    ``params``, ``stage_sets``, ``stage1_steps``, ``objective`` and ``flops_token``), ``_step_batches``,
    ``_micro_loss``, ``_step_size``, ``evaluate`` and ``_summary``; its ``__init__`` prepares data and
    ``total_steps`` and then calls ``_start``. Batches carry ``predicted`` (the loss's normalizer).
    """

    name = "training"
    # Spec fields that may change between a run and its resumption without changing the trajectory.
    resumable_changes: frozenset[str] = frozenset({"steps", "checkpoint_every", "keep_last", "eval_every", "log_every"})
    lora = False
    time_limit_s: float | None = None  # stop once this much training time (over all sessions) is spent

    def __init__(self, spec: Any, out_dir: Path, on_checkpoint: Callable[[Path, int, dict], None] | None,
                 progress: bool):
        self.spec, self.out_dir, self.on_checkpoint, self.progress = spec, Path(out_dir), on_checkpoint, progress
        self.dist = setup_distributed()

    def _start(self, resume: bool) -> None:
        """Find the resume point, then build model and optimizer and restore their state."""
        spec = self.spec
        self.checkpoint: Path | None = None
        if self.dist.main:
            ckpt.clean_partial(self.out_dir)
            for leftover in self.out_dir.glob(".final.tmp-*"):
                shutil.rmtree(leftover, ignore_errors=True)
            if not resume and (self.out_dir / ckpt.CHECKPOINTS).exists():
                log.warning("resume=False: discarding earlier checkpoints in %s", self.out_dir)
                shutil.rmtree(self.out_dir / ckpt.CHECKPOINTS)
            if resume:  # rank 0 verifies (and moves damaged checkpoints aside) before any rank reads one
                self.checkpoint = ckpt.verified_checkpoint(self.out_dir)
        self.dist.barrier()
        if resume and not self.dist.main:
            self.checkpoint = ckpt.latest_checkpoint(self.out_dir)
        self.state: dict[str, Any] = {"step": 0, "samples": 0, "tokens": 0, "seconds": 0.0, "history": []}
        if self.checkpoint is not None:
            self.state = {"seconds": 0.0, **ckpt.load_trainer_state(self.checkpoint)}
            self._check_compatible(self.state.get("spec", {}))
            log.info("resuming from %s (step %d)", self.checkpoint, self.state["step"])

        torch.manual_seed(spec.seed)
        self.precision = resolve_precision(spec.precision, self.dist.device)
        self.scaler = torch.amp.GradScaler(self.dist.device.type) if self.precision.needs_scaler else None
        self.peak = peak_flops(self.dist.device)
        self.stage: str | None = None
        self.ddp: nn.Module | None = None
        self._build_model()
        self._build_optimizer()
        if self.checkpoint is not None:
            self._restore_training_state()

    # ---------------------------------------------------------------- the objective (subclasses)
    def _build_model(self) -> None:
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

    # ---------------------------------------------------------------- setup
    def _check_compatible(self, saved: dict[str, Any]) -> None:
        current = self.spec.model_dump(mode="json")
        changed = sorted(k for k in current if k not in self.resumable_changes and saved.get(k) != current[k])
        if changed:
            raise InputError(f"{self.out_dir} holds a run with different settings ({', '.join(changed)}); "
                             "use a new out_dir or resume=False")
        if self.spec.total_steps != type(self.spec).model_validate(saved).total_steps:
            log.warning("the budget changed since the checkpoint: the learning-rate schedule changes with it")

    def _build_optimizer(self) -> None:
        from transformers import get_scheduler

        spec = self.spec
        groups = self._param_groups()
        fused = self.dist.device.type in ("cuda", "cpu")  # one kernel for all parameters (also on CPU since torch 2.4)
        self.optimizer = torch.optim.AdamW(groups, lr=spec.lr, betas=(spec.adam_beta1, spec.adam_beta2),
                                           eps=spec.adam_epsilon, fused=fused or None)
        name = {"constant": "constant_with_warmup", "cosine": "cosine", "linear": "linear"}[spec.schedule]
        self.scheduler = get_scheduler(name, self.optimizer, num_warmup_steps=round(spec.warmup_fraction * self.total_steps),
                                       num_training_steps=self.total_steps)

    def _param_groups(self) -> list[dict[str, Any]]:
        """AdamW groups: weight decay on matrices only."""
        decay = [p for p in self.params if p.dim() >= 2]
        no_decay = [p for p in self.params if p.dim() < 2]
        return [{"params": decay, "weight_decay": self.spec.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]

    def _restore_training_state(self) -> None:
        if self.lora:
            from safetensors.torch import load_file

            trainable = load_file(self.checkpoint / ckpt.TRAINER_DIR / "trainable.safetensors")
            missing = set(trainable) - {n for n, _ in self.hf_model.named_parameters()}
            if missing:
                raise ValueError(f"checkpoint {self.checkpoint} does not match the LoRA model: {sorted(missing)[:3]}")
            self.hf_model.load_state_dict(trainable, strict=False)
        self.optimizer.load_state_dict(ckpt.load_tensors(self.checkpoint, "optimizer"))
        self.scheduler.load_state_dict(ckpt.load_tensors(self.checkpoint, "scheduler"))
        if self.scaler is not None and (scaler := ckpt.load_tensors(self.checkpoint, "scaler")) is not None:
            self.scaler.load_state_dict(scaler)
        rng = ckpt.load_tensors(self.checkpoint, f"rng-rank{self.dist.rank}") or ckpt.load_tensors(self.checkpoint, "rng")
        if rng is not None:
            ckpt.set_rng_state(rng)

    def _set_stage(self, step: int) -> None:
        stage = "embeddings" if step < self.stage1_steps else "full"
        if stage == self.stage:
            return
        trainable = self.stage_sets[stage]
        for parameter in self.hf_model.parameters():
            parameter.requires_grad_(id(parameter) in trainable)
        self.stage = stage
        if self.dist.world_size > 1:  # DDP registers gradient hooks for the trainable set at construction
            from torch.nn.parallel import DistributedDataParallel

            ids = None if self.dist.device.type == "cpu" else [self.dist.device.index]
            self.ddp = DistributedDataParallel(self.loss_model, device_ids=ids)
        log.info("%s stage %r from step %d: %d trainable tensors", self.name, stage, step,
                 sum(p.requires_grad for p in self.hf_model.parameters()))

    # ---------------------------------------------------------------- saving
    def _write_hf_folder(self, folder: Path) -> None:
        if self.lora:
            merged = copy.deepcopy(self.model).merge_and_unload()
            merged.save_pretrained(folder)
            del merged
        else:
            self.hf_model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)

    def _save_checkpoint(self, step: int, metrics: dict[str, Any]) -> Path | None:
        rng = ckpt.rng_state()
        if self.dist.world_size > 1:
            gathered: list[Any] = [None] * self.dist.world_size
            dist.all_gather_object(gathered, {k: v.tolist() if torch.is_tensor(v) else [t.tolist() for t in v]
                                              for k, v in rng.items()})
        folder = None
        if self.dist.main:
            tensors: dict[str, dict[str, Any]] = {"optimizer": self.optimizer.state_dict(),
                                                  "scheduler": self.scheduler.state_dict(), "rng": rng}
            if self.dist.world_size > 1:
                for rank, state in enumerate(gathered):
                    tensors[f"rng-rank{rank}"] = {
                        "cpu": torch.tensor(state["cpu"], dtype=torch.uint8),
                        **({"cuda": [torch.tensor(t, dtype=torch.uint8) for t in state["cuda"]]} if "cuda" in state else {}),
                    }
            if self.scaler is not None:
                tensors["scaler"] = self.scaler.state_dict()

            def write_model(target: Path) -> None:
                self._write_hf_folder(target)
                if self.lora:
                    from safetensors.torch import save_file

                    (target / ckpt.TRAINER_DIR).mkdir(exist_ok=True)
                    trainable = {n: p.detach().cpu().contiguous() for n, p in self.hf_model.named_parameters()
                                 if id(p) in self.stage_sets["full"] | self.stage_sets["embeddings"]}
                    save_file(trainable, target / ckpt.TRAINER_DIR / "trainable.safetensors")

            trainer_state = {k: self.state[k] for k in ("step", "samples", "tokens", "seconds", "history")}
            trainer_state.update(spec=self.spec.model_dump(mode="json"), objective=self.objective, stage=self.stage,
                                 world_size=self.dist.world_size)
            folder = ckpt.save_checkpoint(self.out_dir, step, write_model, trainer_state, tensors, self.spec.keep_last)
            write_metrics_csv(self.state["history"], self.out_dir / "metrics.csv")
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
        self._set_stage(start_step)
        batches = self._step_batches(start_step)
        spent_before, self.start_tokens = state["seconds"], state["tokens"]
        train_time, window_time, window_loss, window_count, window_tokens = 0.0, 0.0, 0.0, 0.0, 0
        last_metrics: dict[str, Any] = {}
        bar = self._progress_bar(start_step)
        try:
            for step in range(start_step, self.total_steps):
                self._set_stage(step)
                began = time.perf_counter()
                step_batches = next(batches)
                loss_sum, predicted = self._optimizer_step(step_batches)
                elapsed = time.perf_counter() - began
                samples, tokens = self._step_size(step_batches)
                train_time, window_time, window_tokens = train_time + elapsed, window_time + elapsed, window_tokens + tokens
                window_loss, window_count = window_loss + loss_sum, window_count + predicted
                state["step"], state["samples"], state["tokens"] = step + 1, state["samples"] + samples, \
                    state["tokens"] + tokens
                state["seconds"] = spent_before + train_time
                done = step + 1
                last = done == self.total_steps or self._out_of_time()
                row: dict[str, Any] | None = None
                if done % spec.log_every == 0 or done % spec.eval_every == 0 or done % spec.checkpoint_every == 0 or last:
                    loss_total, count = self.dist.sum([window_loss, window_count])
                    speed = window_tokens / max(window_time, 1e-9)
                    row = {"step": done, "samples": state["samples"], "tokens": state["tokens"],
                           "train_loss": loss_total / max(count, 1.0), "lr": self.scheduler.get_last_lr()[0],
                           "tokens_per_s": speed, "mfu": mfu(speed, self.flops_token, self.peak),
                           "elapsed_s": round(train_time, 3)}
                    window_time, window_loss, window_count, window_tokens = 0.0, 0.0, 0.0, 0
                    if done % spec.eval_every == 0 or last:
                        row["heldout_loss"] = self.evaluate()
                    history.append(row)
                    last_metrics = row
                    log.info("step %d/%d %s", done, self.total_steps,
                             " ".join(f"{k}={v:.4g}" for k, v in row.items() if isinstance(v, float)))
                if bar is not None:
                    bar[0].update(bar[1], completed=done, loss=last_metrics.get("train_loss", float("nan")))
                if done % spec.checkpoint_every == 0 or last:
                    self._save_checkpoint(done, last_metrics)
                if last:
                    break
        finally:
            batches.close()
            if bar is not None:
                bar[0].stop()
        return self._finish(train_time, start_step, resumed_from)

    def _out_of_time(self) -> bool:
        """Whether the time budget is spent (decided together on all ranks)."""
        if self.time_limit_s is None:
            return False
        return self.dist.sum([float(self.state["seconds"] >= self.time_limit_s)])[0] > 0

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
                (self.scaler.scale(scaled) if self.scaler is not None else scaled).backward()
            loss_total += loss_sum.detach()
        trainable = [p for p in self.params if p.requires_grad]
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(trainable, self.spec.grad_clip)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(loss_total), local

    def _progress_bar(self, start_step: int):
        if not (self.progress and self.dist.main):
            return None
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        progress = Progress(TextColumn(self.name), BarColumn(), MofNCompleteColumn(),
                            TextColumn("loss {task.fields[loss]:.3f}"),
                            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
        task = progress.add_task(self.name, total=self.total_steps, completed=start_step, loss=float("nan"))
        progress.start()
        return progress, task

    def _finish(self, train_time: float, start_step: int, resumed_from: str | None) -> dict[str, Any]:
        summary = self._summary(train_time, start_step, resumed_from)
        history = self.state["history"]
        if self.dist.main:
            with atomic_folder(self.out_dir / "final") as staging:
                self._write_hf_folder(staging)
            write_metrics_csv(history, self.out_dir / "metrics.csv")
            plot_loss_curve(history, self.out_dir / "loss_curve.png", title=f"{self.name} ({self.objective})")
            atomic_write(self.out_dir / "summary.json", json.dumps(summary, indent=2))
        self.dist.barrier()
        return summary


class _Run(TrainingRun):
    """One LAPT run: packed pre-tokenized sequences, MLM or CLM, two-stage and LoRA (a class only to keep
    ``run_lapt`` readable)."""

    name = "LAPT"
    resumable_changes = frozenset({"steps", "samples", "tokens", "checkpoint_every", "keep_last", "eval_every",
                                   "log_every", "prefetch", "eval_sequences", "compile"})

    def __init__(self, model_dir: Path, train: Path, heldout: Path, spec: LaptSpec, out_dir: Path, resume: bool,
                 on_checkpoint: Callable[[Path, int, dict], None] | None, progress: bool):
        from transformers import AutoTokenizer

        super().__init__(spec, out_dir, on_checkpoint, progress)
        self.model_dir = Path(model_dir)
        self.lora = spec.lora
        self.total_steps = spec.total_steps
        if self.total_steps <= 0:
            raise InputError("the LAPT budget is zero: set lapt.steps, lapt.samples or lapt.tokens")
        per_step = self.dist.world_size * spec.micro_batch_size
        if spec.batch_size % per_step:
            raise InputError(f"lapt.batch_size={spec.batch_size} must be a multiple of world_size × micro_batch_size "
                             f"= {self.dist.world_size} × {spec.micro_batch_size}; adjust micro_batch_size")
        self.accumulation = spec.batch_size // per_step
        if not (self.model_dir / "config.json").is_file():
            raise FileNotFoundError(f"{self.model_dir} is not a Hugging Face model folder (no config.json); "
                                    "pass the output of save_pretrained")
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)

        # Data: rank 0 tokenizes once into memory-mapped arrays, the others wait and map them.
        data_dir = self.out_dir / "data"
        if self.dist.main:
            self.train_meta = pretokenize(Path(train), self.tokenizer, data_dir / "train_ids.npy", progress)
            pretokenize(Path(heldout), self.tokenizer, data_dir / "heldout_ids.npy", progress)
        self.dist.barrier()
        if not self.dist.main:
            self.train_meta = json.loads((data_dir / "train_ids.json").read_text())
        self.train_data = PackedSequences(data_dir / "train_ids.npy", spec.seq_len)
        self.heldout_data = PackedSequences(data_dir / "heldout_ids.npy", spec.seq_len)
        if len(self.heldout_data) == 0:
            raise InputError(f"held-out corpus {heldout} has fewer than seq_len={spec.seq_len} tokens; give more "
                             "held-out text or lower lapt.seq_len")
        self.order = SampleOrder(len(self.train_data), spec.seed)
        self._start(resume)

    def _build_model(self) -> None:
        spec = self.spec
        source = self.checkpoint if (self.checkpoint is not None and not spec.lora) else self.model_dir
        self.model, self.objective = load_model(source, spec.attn_implementation)
        limit = _max_positions(self.model.config)
        if limit is not None and spec.seq_len > limit:
            raise InputError(f"lapt.seq_len={spec.seq_len} exceeds the model's {limit} positions; lower it")
        require_vocabulary_fits(self.model, self.tokenizer, self.model_dir)
        if self.objective == "mlm":
            self.masker = Masker.for_tokenizer(self.tokenizer, spec.mlm_probability, spec.whole_word_masking, spec.seed)
        else:
            self.masker = None
        self.hf_model = self.model  # plain HF model (LoRA layers are injected into it in place)
        head_params = {id(p) for m in head_modules(self.model) for p in m.parameters()}
        if spec.lora:
            from peft import LoraConfig, get_peft_model

            lora = LoraConfig(r=spec.lora_rank, lora_alpha=spec.lora_alpha, lora_dropout=spec.lora_dropout,
                              target_modules=spec.lora_target_modules, bias="none")
            self.model = get_peft_model(self.hf_model, lora)
            full = {id(p) for n, p in self.hf_model.named_parameters() if "lora_" in n}
            if spec.lora_train_embeddings:
                full |= head_params
        else:
            full = {id(p) for p in self.hf_model.parameters()}
        self.params = [p for p in self.hf_model.parameters() if id(p) in full | head_params]
        self.stage_sets = {"embeddings": head_params, "full": full}
        self.stage1_steps = round(spec.embeddings_only_fraction * self.total_steps)
        self.hf_model.to(self.dist.device)
        self.hf_model.train()
        self.loss_model = LossModel(self.hf_model, self.objective, spec.masked_only_projection)
        if spec.compile:
            self.loss_model.compile_body()
        self.flops_token = flops_per_token(self.hf_model, spec.seq_len, self.objective, self.loss_model.masked_only,
                                           spec.mlm_probability)

    # ---------------------------------------------------------------- data
    def _step_batches(self, start_step: int) -> Iterator[list[MicroBatch]]:
        spec, pin = self.spec, self.dist.device.type == "cuda"
        ranges = iter_sample_ranges(start_step * spec.batch_size, self.total_steps - start_step, spec.batch_size,
                                    self.dist.world_size, self.dist.rank, spec.micro_batch_size)

        def produce(micro_ranges: list[np.ndarray]) -> list[MicroBatch]:
            return [make_micro_batch(self.train_data.blocks(self.order.blocks_for(s)), s, self.masker, pin)
                    for s in micro_ranges]

        return Prefetcher(ranges, produce, depth=spec.prefetch)

    # ---------------------------------------------------------------- evaluation
    @torch.no_grad()
    def evaluate(self) -> float:
        """Mean held-out loss per predicted token on a fixed, evenly spaced set of held-out sequences."""
        spec = self.spec
        count = min(spec.eval_sequences, len(self.heldout_data))
        blocks = np.linspace(0, len(self.heldout_data) - 1, count).round().astype(np.int64)
        mine = blocks[self.dist.rank::self.dist.world_size]
        self.hf_model.eval()
        total = torch.zeros((), dtype=torch.float64, device=self.dist.device)
        predicted = 0
        for start in range(0, len(mine), spec.micro_batch_size):
            chosen = mine[start:start + spec.micro_batch_size]
            ids = self.heldout_data.blocks(chosen)
            if self.masker is not None:
                inputs, labels = self.masker(ids, chosen, stream=EVAL_STREAM)
                labels_t = torch.from_numpy(labels).to(self.dist.device)
            else:
                inputs, labels_t = ids, None
            with self.precision.autocast():
                loss, n = self.loss_model(torch.from_numpy(inputs).to(self.dist.device), labels_t)
            total += loss.double()
            predicted += int(n)
        self.hf_model.train()
        loss_sum, n = self.dist.sum([float(total), float(predicted)])
        return loss_sum / max(n, 1.0)

    def _micro_loss(self, module: nn.Module, mb: MicroBatch) -> torch.Tensor:
        device = self.dist.device
        input_ids = mb.input_ids.to(device, non_blocking=True)
        labels = mb.labels.to(device, non_blocking=True) if mb.labels is not None else None
        positions = mb.positions.to(device, non_blocking=True) if mb.positions is not None else None
        loss_sum, _ = module(input_ids, labels, positions)
        return loss_sum

    def _step_size(self, micro_batches: list[MicroBatch]) -> tuple[int, int]:
        return self.spec.batch_size, self.spec.batch_size * self.spec.seq_len

    def _summary(self, train_time: float, start_step: int, resumed_from: str | None) -> dict[str, Any]:
        spec, state = self.spec, self.state
        history = state["history"]
        heldout = [r["heldout_loss"] for r in history if r.get("heldout_loss") is not None]
        trained = [r["train_loss"] for r in history if r.get("train_loss") is not None]
        steps_here = state["step"] - start_step
        speed = steps_here * spec.batch_size * spec.seq_len / train_time if train_time > 0 else None
        summary = {
            "objective": self.objective, "steps": state["step"], "samples": state["samples"], "tokens": state["tokens"],
            "epochs": state["samples"] / len(self.train_data), "train_sequences": len(self.train_data),
            "train_corpus_tokens": self.train_meta["tokens"], "initial_heldout_loss": heldout[0] if heldout else None,
            "final_heldout_loss": heldout[-1] if heldout else None, "final_train_loss": trained[-1] if trained else None,
            "tokens_per_s": speed, "flops_per_token": self.flops_token,
            "mfu": mfu(speed, self.flops_token, self.peak) if speed else None, "device": str(self.dist.device),
            "world_size": self.dist.world_size, "precision": self.precision.name,
            "parameters": sum(p.numel() for p in self.hf_model.parameters()),
            "trainable_parameters": sum(p.numel() for p in self.params), "lora": spec.lora,
            "two_stage_embedding_steps": self.stage1_steps, "resumed_from": resumed_from,
            "train_seconds_this_session": round(train_time, 3), "final_dir": str(self.out_dir / "final"),
        }
        return summary


def run_lapt(model_dir: Path, train: Path, heldout: Path, spec: LaptSpec, out_dir: Path, resume: bool = True,
             on_checkpoint: Callable[[Path, int, dict], None] | None = None, progress: bool = False) -> dict:
    """Continue pretraining ``model_dir`` on the ``train`` corpus; evaluate on ``heldout``; write into ``out_dir``.

    ``out_dir`` receives ``checkpoints/step-XXXXXXXX/`` (each a complete ``save_pretrained`` folder
    plus trainer state; ``latest`` names the last complete one), ``final/`` (model + tokenizer),
    ``metrics.csv``, ``loss_curve.png`` and ``summary.json``; the summary is returned. With
    ``resume`` a run continues from the last complete checkpoint in ``out_dir``.
    ``on_checkpoint(folder, step, metrics)`` is called on rank 0 after each checkpoint is committed.
    Under ``torchrun`` every rank calls this; rank 0 writes.
    """
    if math.isclose(spec.embeddings_only_fraction, 1.0) and spec.lora:
        log.warning("embeddings_only_fraction=1 with LoRA: the adapters are never trained")
    run = _Run(model_dir, train, heldout, spec, out_dir, resume, on_checkpoint, progress)
    try:
        return run.train()
    finally:
        if run.dist.owns_group and dist.is_initialized():
            dist.destroy_process_group()
