"""What a training run reports: the loss window between logged rows, the metric history as CSV and a loss-curve
PNG (both written atomically), the loss figures of its summary and its progress bar."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from focusflow.storage.atomic import atomic_path, atomic_write

METRICS_FILE = "metrics.csv"  # a training run's loss curve, one row per logged step
SUMMARY_FILE = "summary.json"  # and its summary (steps, losses, seconds): a record of the run, not the model

COLUMNS = ("step", "samples", "tokens", "train_loss", "heldout_loss", "lr", "tokens_per_s", "mfu", "elapsed_s")
# Measured, not computed: they differ between two runs of the same training, so a stored artifact keeps them in
# its manifest and its files only the columns before them.
TIMING_COLUMNS = ("tokens_per_s", "mfu", "elapsed_s")


def write_metrics_csv(history: list[dict[str, Any]], path: Path, timings: bool = True) -> None:
    """The metric history as CSV; ``timings=False`` leaves out the measured columns (for a stored artifact)."""
    columns = COLUMNS if timings else tuple(c for c in COLUMNS if c not in TIMING_COLUMNS)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in history:
        writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in columns})
    atomic_write(path, buffer.getvalue())


def plot_loss_curve(history: list[dict[str, Any]], path: Path, title: str = "LAPT loss") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def series(key: str) -> tuple[list[int], list[float]]:
        rows = [(r["step"], r[key]) for r in history if r.get(key) is not None and math.isfinite(r[key])]
        return [s for s, _ in rows], [v for _, v in rows]

    figure, axis = plt.subplots(figsize=(7, 4), dpi=110)
    for key, label, style in (("train_loss", "train", "-"), ("heldout_loss", "held-out", "o-")):
        steps, values = series(key)
        if steps:
            axis.plot(steps, values, style, label=label, markersize=3)
    axis.set_xlabel("optimizer step")
    axis.set_ylabel("loss (nats / predicted token)")
    axis.set_title(title)
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    try:
        with atomic_path(path) as temporary:
            figure.savefig(temporary)
    finally:
        plt.close(figure)


def loss_summary(history: list[dict[str, Any]]) -> dict[str, float | None]:
    """The held-out loss before training and at the end, and the last train loss, from a run's metric history."""
    heldout = [r["heldout_loss"] for r in history if r.get("heldout_loss") is not None]
    trained = [r["train_loss"] for r in history if r.get("train_loss") is not None]
    return {"initial_heldout_loss": heldout[0] if heldout else None,
            "final_heldout_loss": heldout[-1] if heldout else None,
            "final_train_loss": trained[-1] if trained else None}


@dataclass
class LossWindow:
    """Summed loss, its normalizer, tokens and seconds of the steps since the last logged row."""

    seconds: float = 0.0
    loss: float = 0.0
    predicted: float = 0.0
    tokens: int = 0

    def add(self, seconds: float, loss: float, predicted: float, tokens: int) -> None:
        self.seconds, self.loss = self.seconds + seconds, self.loss + loss
        self.predicted, self.tokens = self.predicted + predicted, self.tokens + tokens

    def close(self, sum_over_ranks: Callable[[list[float]], list[float]]) -> tuple[float, float]:
        """(mean train loss over every rank's predictions, this rank's tokens per second); then start afresh."""
        loss, predicted = sum_over_ranks([self.loss, self.predicted])
        result = loss / max(predicted, 1.0), self.tokens / max(self.seconds, 1e-9)
        self.seconds, self.loss, self.predicted, self.tokens = 0.0, 0.0, 0.0, 0
        return result


def write_run_record(out_dir: Path, history: list[dict[str, Any]], summary: dict[str, Any], title: str) -> None:
    """What a finished run leaves beside its final model: the metric history, the loss curve and the summary."""
    write_metrics_csv(history, out_dir / METRICS_FILE)
    plot_loss_curve(history, out_dir / "loss_curve.png", title=title)
    atomic_write(out_dir / SUMMARY_FILE, json.dumps(summary, indent=2))
