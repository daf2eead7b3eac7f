"""A long comparison is never silent: a line when each fine-tuning run starts, every ~30 s while it trains, and
when it ends (its score, the runs left and their estimated time); one seed shows no fake spread."""

from __future__ import annotations

import logging

from focusflow.evaluation.downstream import progress
from focusflow.evaluation.downstream.report import score_text


def test_a_run_reports_at_most_every_heartbeat_with_an_estimate(monkeypatch, caplog):
    now = [100.0]
    monkeypatch.setattr(progress.time, "perf_counter", lambda: now[0])
    caplog.set_level(logging.INFO, logger=progress.lines.name)
    runs = progress.RunProgress(total=3, seeds=3)
    runs.reused()
    label = runs.start("focus", "cls:sib200:ha", 2, 2)
    for step in range(1, 101):
        now[0] += 1.0  # one second a step
        label.step(step, 100, 0.5 if step > 50 else None)
    runs.finish(label, {"test": {"accuracy": 0.61}, "main_metric": "accuracy", "best_dev": 0.6, "best_step": 80,
                        "total_steps": 100})
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "evaluate focus · cls:sib200:ha · seed 2 (2/3): started (run 2 of 3)"
    heartbeats = [m for m in messages if ": step " in m]
    assert heartbeats == ["evaluate focus · cls:sib200:ha · seed 2 (2/3): step 30/100, 30 s, ETA 1 min 10 s",
                          "evaluate focus · cls:sib200:ha · seed 2 (2/3): step 60/100, dev 0.500, 1 min 00 s, "
                          "ETA 40 s",
                          "evaluate focus · cls:sib200:ha · seed 2 (2/3): step 90/100, dev 0.500, 1 min 30 s, "
                          "ETA 10 s"]
    assert messages[-1] == ("evaluate focus · cls:sib200:ha · seed 2 (2/3): test accuracy 0.610 (best dev 0.600 at "
                            "step 80/100) in 1 min 40 s, 1 run(s) left, ETA 1 min 40 s")


def test_one_seed_shows_no_spread():
    assert score_text(0.612, 0.0, 1) == "61.2 (1 seed)"
    assert score_text(0.612, 0.021, 3) == "61.2 ± 2.1"
