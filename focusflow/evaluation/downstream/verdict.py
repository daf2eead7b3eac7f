"""A parity verdict that seed noise cannot flip: a model's score minus the source's, paired by seed, with its 95%
interval.

A 3-seed mean of a short fine-tuning protocol scatters by several points even for a model whose vectors equal the
source's (SIB-200, 132 steps: 55.9 to 65.2 over three seeds of the pruned e5-small). Differences paired by seed
cancel what the seed does to both (the head's initialization, the batch order); the interval says how far the mean
difference can be trusted.

A verdict has three outcomes. **Parity**: the mean difference is at least :data:`PARITY_MEAN` (−1 point), the
interval's lower end at least :data:`PARITY_LOWER` (−3 points) and the standard error at most :data:`DECISIVE_SE`
(1 point), or the whole interval lies at or above :data:`PARITY_MEAN`, whatever the standard error (a model +9.4
points ahead, +4.2 … +14.6, is at least the source's equal however noisy the seeds). **Below**: the whole interval
lies under :data:`PARITY_MEAN` (its upper end < −1), whatever the standard error (−17.4 … −10.7 is decided however
noisy the seeds). **Undecided** otherwise, and below :data:`MIN_SEEDS` paired seeds (two seeds that differ alike
give a zero-width interval): more seeds are needed, and the verdict says so instead of guessing.

A verdict is only as good as the fine-tunings behind it: a run whose best dev step lies in the last tenth of its steps
was still improving when it ended (:func:`~focusflow.evaluation.downstream.finetune.converged`), and a verdict over
such runs says "not converged" beside its call (:func:`unconverged`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

PARITY_MEAN = -1.0  # points (scores × 100)
PARITY_LOWER = -3.0
DECISIVE_SE = 1.0
MIN_SEEDS = 3  # paired seeds a decided verdict needs

# Student's t, two-sided 95%, by degrees of freedom (1..30); beyond, its Cornish-Fisher expansion (within 0.001).
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


#: A candidate's dev cell where the run's choice was made on downstream verdicts and it has none (its bits per byte,
#: what a run without a task chooses on, did not take part).
NOT_COMPARED = "no verdict (not compared)"


def parity_word(parity: bool | None) -> str:
    """A verdict's call in one word, for tables: parity, below or undecided."""
    return "undecided" if parity is None else "parity" if parity else "below"


def t95(degrees: int) -> float:
    if 1 <= degrees <= len(_T95):
        return _T95[degrees - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * degrees) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * degrees**2)


@dataclass(frozen=True)
class Verdict:
    """``model − source`` in points over ``seeds`` paired seeds: mean, standard error, 95% interval, and the call."""

    seeds: tuple[int, ...]
    mean: float
    se: float | None
    low: float | None
    high: float | None
    parity: bool | None  # True: parity, False: below, None: undecided (see the module's rule)

    @property
    def decided(self) -> bool:
        return self.parity is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        """``−0.8 (95% interval −3.1 to +1.5, 5 paired seeds): parity`` and the like."""
        shown = f"{self.mean:+.1f} points"
        if self.low is None:
            return f"{shown} ({len(self.seeds)} paired seed): undecided, needs at least {MIN_SEEDS} seeds"
        interval = f"95% interval {self.low:+.1f} to {self.high:+.1f}, {len(self.seeds)} paired seeds"
        if self.parity is None:
            if len(self.seeds) < MIN_SEEDS:
                return f"{shown} ({interval}): undecided, needs at least {MIN_SEEDS} seeds"
            if self.se > DECISIVE_SE:
                return (f"{shown} ({interval}): undecided, the standard error {self.se:.1f} is above "
                        f"{DECISIVE_SE:g}: add seeds")
            return f"{shown} ({interval}): undecided, the interval reaches both sides of parity: add seeds"
        return f"{shown} ({interval}): {'parity' if self.parity else 'below parity'}"


#: The rule in one sentence, for the report and the card (one wording wherever a verdict is explained).
RULE_TEXT = (f"parity: the mean of the model's score minus the source's, paired by seed, is at least {PARITY_MEAN:g} "
             f"point, its 95% interval's lower end at least {PARITY_LOWER:g} and its standard error at most "
             f"{DECISIVE_SE:g}, or the whole interval at or above {PARITY_MEAN:g}, however wide; below: the whole "
             f"interval under {PARITY_MEAN:g}, however wide; undecided otherwise or with fewer than {MIN_SEEDS} "
             "paired seeds (add seeds)")


def paired_verdict(model: Mapping[int, float], source: Mapping[int, float], scale: float = 100.0) -> Verdict | None:
    """The verdict over the seeds both have with a finite score (scores in [0, 1] are shown ×``scale``); None without
    such a seed. A NaN or infinite score (a run that never evaluated) is no measurement: its seed is left out."""
    seeds = tuple(sorted(s for s in set(model) & set(source)
                         if math.isfinite(float(model[s])) and math.isfinite(float(source[s]))))
    if not seeds:
        return None
    differences = [scale * (float(model[s]) - float(source[s])) for s in seeds]
    mean = statistics.fmean(differences)
    if len(differences) < 2:
        return Verdict(seeds, mean, None, None, None, None)
    se = statistics.stdev(differences) / math.sqrt(len(differences))
    half = t95(len(differences) - 1) * se
    low, high = mean - half, mean + half
    return Verdict(seeds, mean, se, low, high, call(mean, se, low, high) if len(seeds) >= MIN_SEEDS else None)


def call(mean: float, se: float, low: float, high: float) -> bool | None:
    """The three outcomes: parity (True), below (False) or undecided (None); see the module's rule."""
    if high < PARITY_MEAN:
        return False
    if low >= PARITY_MEAN or (mean >= PARITY_MEAN and low >= PARITY_LOWER and se <= DECISIVE_SE):
        return True
    return None


def seed_scores(runs: Any, model: str, task: str, column: str = "value") -> dict[int, float]:
    """A model's main-metric score per seed on a task, from a runs table (``runs.csv``): its test score
    (``value``), or its best dev score (``dev``: what a choice between models may look at)."""
    if runs is None or getattr(runs, "empty", True) or column not in runs:
        return {}
    import pandas as pd

    rows = runs[(runs["model"] == model) & (runs["task"] == task) & runs["main"].astype(bool)]
    values = pd.to_numeric(rows[column], errors="coerce")  # an empty cell, None or pd.NA: no score
    return {int(seed): float(value) for seed, value in zip(rows["seed"], values, strict=True)
            if math.isfinite(float(value))}


def task_verdict(runs: Any, model: str, task: str, column: str = "value", *, source: str = "original",
                 source_runs: Any = None) -> Verdict | None:
    """``model`` against ``source`` on ``task`` (``column``: the test score, or ``dev``), paired by seed over the
    seeds where at least one of the two learned the task: where neither did (dev 0, NER's all-O plateau) the pair
    measures the fine-tuning budget, and 0 against 0 is no parity. ``source_runs``: the source's own runs table when it
    is not ``runs`` (a published model's card reads two)."""
    source_runs = runs if source_runs is None else source_runs
    mine, theirs = seed_scores(runs, model, task, column), seed_scores(source_runs, source, task, column)
    mine_dev, theirs_dev = seed_scores(runs, model, task, "dev"), seed_scores(source_runs, source, task, "dev")
    idle = {seed for seed in mine if seed in mine_dev and seed in theirs_dev
            and mine_dev[seed] <= 0 and theirs_dev[seed] <= 0}
    return paired_verdict({seed: score for seed, score in mine.items() if seed not in idle}, theirs)


def unconverged(runs: Any, models: tuple[str, ...], task: str) -> tuple[int, int]:
    """How many of these models' runs on ``task`` ended while their dev score still rose, of how many (a runs table
    without the columns: none of none); the seeds where none of them learned the task are left out, as the verdict
    leaves them out (:func:`task_verdict`)."""
    import pandas as pd

    from focusflow.evaluation.downstream.finetune import converged

    if runs is None or getattr(runs, "empty", True) or "best_step" not in runs:
        return 0, 0
    rows = runs[runs["model"].isin(models) & (runs["task"] == task) & runs["main"].astype(bool)]
    if "dev" in rows:
        learned = pd.to_numeric(rows["dev"], errors="coerce").fillna(1.0) > 0  # an unknown dev score: not idle
        rows = rows[rows["seed"].isin(set(rows.loc[learned, "seed"]))]
    # a table stored before runs recorded their steps has no such column, or NaN where it is joined with a newer one
    steps = rows["steps"].fillna(rows["total_steps"]) if "steps" in rows else rows["total_steps"]
    flags = [converged(int(best), int(total)) for best, total in zip(rows["best_step"], steps, strict=True)]
    return sum(not flag for flag in flags), len(flags)


def convergence_note(runs: Any, model: str, source: str, task: str) -> str:
    """``; not converged: 13 of 15 runs ended while their dev score still rose`` (empty when they all converged)."""
    open_runs, total = unconverged(runs, (model, source), task)
    return (f"; not converged: {open_runs} of {total} runs had their best dev score in the last tenth of their "
            "steps (they ended while still improving: the verdict measures how fast a model adapts)"
            if open_runs else "")


def verdict_lines(runs: Any, source: str = "original") -> list[str]:
    """One line per model and task beside the source: its paired difference and the call."""
    if runs is None or getattr(runs, "empty", True) or source not in set(runs["model"]):
        return []
    lines = []
    for task in dict.fromkeys(runs["task"]):
        for model in dict.fromkeys(runs.loc[runs["task"] == task, "model"]):
            if model == source:
                continue
            verdict = task_verdict(runs, model, task, source=source)
            if verdict is not None:
                lines.append(f"**{model}** on {task} vs the source: {verdict.text()}"
                             f"{convergence_note(runs, model, source, task)}")
    return lines


__all__ = ["DECISIVE_SE", "PARITY_LOWER", "PARITY_MEAN", "RULE_TEXT", "Verdict", "call", "convergence_note",
           "paired_verdict", "seed_scores", "t95", "task_verdict", "unconverged", "verdict_lines"]
