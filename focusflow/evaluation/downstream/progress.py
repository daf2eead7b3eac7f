"""Progress of a downstream comparison as lines (the CLI shows them on stderr, a terminal or a file alike):
each fine-tuning run says when it starts, every ~30 s how far it is, and when it ends with its score, the
runs left and an estimate of the time they take. A 35-minute ``evaluate`` is never silent again."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from focusflow.evaluation.downstream.report import never_learned, never_learned_advice
from focusflow.logs import PROGRESS_LINE_S, STAGE_LOGGER, clock

lines = logging.getLogger(f"{STAGE_LOGGER}.evaluate")


@dataclass
class RunLabel:
    """One fine-tuning run's line prefix and clock; ``step`` is the fine-tuning loop's progress hook."""

    text: str
    started: float = field(default_factory=lambda: time.perf_counter())
    last_line: float = field(default_factory=lambda: time.perf_counter())

    def step(self, step: int, total: int, dev: float | None) -> None:
        now = time.perf_counter()
        if now - self.last_line < PROGRESS_LINE_S or step == total:
            return
        self.last_line = now
        elapsed = now - self.started
        shown = f", dev {dev:.3f}" if dev is not None else ""
        lines.info("%s: step %d/%d%s, %s, ETA %s", self.text, step, total, shown, clock(elapsed),
                   clock(elapsed / step * (total - step)))


class RunProgress:
    """Counts the runs of one comparison (those reused from disk too) and times the ones trained here."""

    def __init__(self, total: int, seeds: int) -> None:
        self.total, self.seeds, self.done, self.trained_seconds, self.trained = total, seeds, 0, 0.0, 0

    def reused(self) -> None:
        self.done += 1

    def start(self, model: str, task: str, seed: int, index: int) -> RunLabel:
        label = RunLabel(f"evaluate {model} · {task} · seed {seed} ({index}/{self.seeds})")
        lines.info("%s: started (run %d of %d)", label.text, self.done + 1, self.total)
        return label

    def finish(self, label: RunLabel, run: dict[str, Any]) -> None:
        seconds = time.perf_counter() - label.started
        self.done, self.trained, self.trained_seconds = self.done + 1, self.trained + 1, self.trained_seconds + seconds
        left = self.total - self.done
        eta = f", {left} run(s) left, ETA {clock(self.trained_seconds / self.trained * left)}" if left else ""
        score = run["test"].get(run["main_metric"])
        speed = f", {run['train_tokens_per_s']:.0f} tokens/s" if run.get("train_tokens_per_s") else ""
        speed += f" (MFU {run['train_mfu']:.1%})" if run.get("train_mfu") else ""
        lines.info("%s: test %s %.3f (best dev %.3f at step %d/%d) in %s%s%s", label.text, run["main_metric"], score,
                   run["best_dev"], run["best_step"], run["total_steps"], clock(seconds), speed, eta)
        warn_if_never_learned(run)


def warn_if_never_learned(run: dict[str, Any]) -> None:
    """A warning line for a run whose dev score never rose above 0 (``report.never_learned``)."""
    if never_learned(run):
        lines.warning("%s", never_learned_advice(run))
