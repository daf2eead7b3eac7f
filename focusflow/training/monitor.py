"""Metric history of a LAPT run as CSV and a loss-curve PNG (both written atomically)."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from focusflow.storage.atomic import atomic_path, atomic_write

COLUMNS = ("step", "samples", "tokens", "train_loss", "heldout_loss", "lr", "tokens_per_s", "mfu", "elapsed_s")


def write_metrics_csv(history: list[dict[str, Any]], path: Path) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in history:
        writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in COLUMNS})
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
