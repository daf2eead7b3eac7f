"""What a finished resumable training run hands to its artifact: the one place the LAPT and align stages share
(each trains in its claimed work folder, ``StageRun.work``, keyed by its artifact key, so a killed run resumes from its
last checkpoint, and commits the final model with its record)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path
from typing import Any

from focusflow.training.monitor import METRICS_FILE, TIMING_COLUMNS, write_metrics_csv


def store_finished_run(work: Path, out: Path) -> dict[str, Any]:
    """Put a finished run's final model and record into the artifact folder ``out``: the model, the loss curve and
    the metric history without its measured columns (the artifact's content must not depend on how fast the machine
    was). Returns what goes into the manifest instead: the measured columns per logged step (the run's summary is
    the manifest's metadata already)."""
    shutil.copytree(work / "final", out, dirs_exist_ok=True)
    if (work / "loss_curve.png").exists():
        shutil.copy2(work / "loss_curve.png", out / "loss_curve.png")
    if not (work / METRICS_FILE).exists():
        return {}
    with (work / METRICS_FILE).open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    write_metrics_csv(rows, out / METRICS_FILE, timings=False)
    return {"timings": [{"step": int(row["step"]), **{name: float(row[name]) for name in TIMING_COLUMNS if row.get(name)}}
                        for row in rows]}
