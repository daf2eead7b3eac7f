"""A fine-tuning run whose dev score never rose above 0 (NER's all-O plateau: nothing tagged, F1 0) is flagged:
``never_learned`` in the run record, a warning line naming model, task and seed with what to do, and a note in
``results.md`` under that task's table for that model; the other runs and the record's other keys are untouched."""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd

from focusflow.evaluation.downstream import progress
from focusflow.evaluation.downstream.report import never_learned, write_reports

TASK = "ner:masakhaner2:hau"


def _run(model: str, seed: int, curve: list[tuple[int, float]], test_f1: float, **extra: Any) -> dict[str, Any]:
    best = max(score for _, score in curve)
    return {"model": model, "model_path": f"/models/{model}", "task": TASK, "kind": "ner", "dataset": "masakhaner2",
            "language": "hau", "seed": seed, "main_metric": "f1",
            "test": {"f1": test_f1, "precision": test_f1, "recall": test_f1},
            "best_dev": best, "best_step": next(step for step, score in curve if score == best),
            "total_steps": curve[-1][0], "dev_curve": curve, "seconds": 10.0, "train_seconds": 8.0,
            "eval_seconds": 2.0, "train_tokens": 1000, "train_tokens_per_s": 125.0, "precision": "float32",
            "sizes": {"train": 100, "dev": 20, "test": 30}, "stats": {}, "provenance": {},
            "hparams": {"lr": 5e-5, "epochs": 1.0}, **extra}


FLAT = [(6, 0.0), (12, 0.0), (18, 0.0)]
LEARNED = [(6, 0.0), (12, 0.21), (18, 0.34)]


def test_a_dev_curve_that_never_leaves_zero_never_learned():
    assert never_learned(_run("focus", 1, FLAT, 0.0))
    assert not never_learned(_run("focus", 1, LEARNED, 0.3))
    # a record saved before the field existed: from its curve; a record with the field: the field
    legacy = _run("focus", 1, FLAT, 0.0)
    assert "never_learned" not in legacy and never_learned(legacy)
    assert not never_learned(_run("focus", 1, FLAT, 0.0, never_learned=False))
    assert never_learned({"best_dev": 0.0, "dev_curve": []}) and not never_learned({"dev_curve": []})


def test_the_warning_names_model_task_seed_and_the_remedy(caplog):
    caplog.set_level(logging.INFO, logger=progress.lines.name)
    runs = progress.RunProgress(total=2, seeds=2)
    label = runs.start("focus", TASK, 2, 1)
    runs.finish(label, _run("focus", 2, FLAT, 0.0))
    label = runs.start("focus", TASK, 3, 2)
    runs.finish(label, _run("focus", 3, LEARNED, 0.3))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"focus · {TASK} · seed 2 never learned the task: dev f1 stayed 0 over 18 steps "
                                  "at lr 5e-05")
    assert "more steps or with a higher learning rate" in warnings[0] and "--protocol cpu" in warnings[0]


def test_results_md_notes_the_model_that_never_learned(tmp_path):
    runs = [_run("focus", 1, FLAT, 0.0), _run("focus", 2, FLAT, 0.0), _run("source", 1, LEARNED, 0.3),
            _run("source", 2, LEARNED, 0.32)]
    keys = [set(run) for run in runs]
    write_reports(tmp_path, runs, {TASK: ["train: somewhere"]})
    assert [set(run) for run in runs] == keys  # the records are not rewritten by the report
    markdown = (tmp_path / "results.md").read_text()
    section = markdown.split(f"## {TASK}", 1)[1]
    notes = [line for line in section.splitlines() if line.startswith("- ")]
    assert notes[0].startswith("- **focus never learned this task** (seed 1, 2: best dev f1 0")
    assert "--protocol cpu" in notes[0] and notes[1] == "- train: somewhere"
    assert not any("source never learned" in line for line in markdown.splitlines())
    table = pd.read_csv(tmp_path / "results.csv")
    assert set(table["model"]) == {"focus", "source"}  # the contract's columns and rows are unchanged


def test_no_note_when_every_run_learned(tmp_path):
    write_reports(tmp_path, [_run("source", 1, LEARNED, 0.3)], None)
    assert "never learned" not in (tmp_path / "results.md").read_text()
