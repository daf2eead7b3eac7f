"""Keeping the best state of a run: one rule for the short in-memory runs (``training.fit``: fine-tuning, the
MLM head) and the checkpointed ones (align's keep-best), all in ``training.loop.TrainingRun``, so that they differ
only in what they measure and what a state is."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

State = TypeVar("State")

log = logging.getLogger(__name__)


class BestState(Generic[State]):
    """Each evaluation's ``(step, score)``, and the step, score and snapshot of the best one so far.

    ``snapshot()`` takes what training changes (a state dict, the trained parameters); it is called only when an
    evaluation is the best so far. A score that is not better is never kept, except that ``offer(...,
    keep=True)`` keeps it when nothing is kept yet (a run's start is its fallback even when its score is NaN).
    """

    def __init__(self, snapshot: Callable[[], State], higher_is_better: bool = False) -> None:
        self.snapshot, self.higher_is_better = snapshot, higher_is_better
        self.history: list[tuple[int, float]] = []
        self.step = 0
        self.score = -math.inf if higher_is_better else math.inf
        self.state: State | None = None
        self.kept = False  # whether any evaluation was kept (a snapshot may itself be None)

    def better(self, score: float) -> bool:
        return score > self.score if self.higher_is_better else score < self.score

    def offer(self, step: int, score: float, keep: bool = False) -> bool:
        """Record an evaluation; take a snapshot when it is the best so far (or ``keep`` and none is kept)."""
        self.history.append((step, score))
        if self.better(score) or (keep and not self.kept):
            self.step, self.score, self.state, self.kept = step, score, self.snapshot(), True
            return True
        return False

    def evaluations_since_best(self) -> int:
        """How many evaluations came after the best one (0 when the last was the best): what patience counts."""
        return len(self.history) - 1 - max((i for i, (step, _) in enumerate(self.history) if step == self.step),
                                           default=len(self.history) - 1)

    # ----------------------------------------------------------------- a checkpoint's record of it
    def to_record(self) -> dict[str, Any]:
        """What a checkpoint stores (the snapshot goes in its tensors): ``selection`` and ``best``."""
        return {"selection": [[step, score] for step, score in self.history],
                **({"best": {"step": self.step, "score": self.score}} if self.history else {})}

    def restore(self, record: dict[str, Any], state: State | None) -> None:
        """Take back what ``to_record`` stored, with the snapshot kept beside it."""
        self.history = [(int(step), float(score)) for step, score in record.get("selection") or []]
        if record.get("best") is not None:
            self.step, self.score, self.state = int(record["best"]["step"]), float(record["best"]["score"]), state
            self.kept = True


def kept_reason(best: BestState[Any], measure: str, last_step: int) -> dict[str, Any]:
    """Why a run that keeps its best ended with the state it did (the report's refinement note reads it)."""
    history = best.history
    last = history[-1] if history else (last_step, math.nan)
    start = history[0][1] if history and history[0][0] == 0 else None
    if best.step == last_step:
        why = f"the last evaluation was the best ({best.score:.4f})"
    elif best.step == 0:
        why = (f"no step improved on the start ({best.score:.4f}; {last[1]:.4f} at step {last[0]}): the "
               "refinement left the model as it was")
    else:
        why = f"step {best.step} was the best ({best.score:.4f}; {last[1]:.4f} at step {last[0]})"
    return {"measure": measure, "history": [list(point) for point in history], "kept_step": best.step,
            "kept": best.score, "at_start": start, "at_end": last[1], "why": why}


class Evaluations:
    """What a run measures as it trains, the one rule of every loop: its held-out loss (``evaluate``; None where the
    run has none, as a short run selecting on a dev score), the measure it keeps its best state by (``selection``,
    None: the last state is the result), the seconds both took, and patience (stop once that many evaluations in a
    row did not improve on the best)."""

    def __init__(self, name: str, evaluate: Callable[[], float | None], selection: Callable[[], float] | None,
                 selection_name: str, snapshot: Callable[[], Any], higher_is_better: bool,
                 patience: int | None) -> None:
        self.name, self.evaluate, self.selection, self.selection_name = name, evaluate, selection, selection_name
        self.patience = patience
        self.best: BestState[Any] = BestState(snapshot, higher_is_better)
        self.seconds = 0.0

    def heldout(self) -> float | None:
        """The held-out loss now."""
        began = time.perf_counter()
        try:
            return self.evaluate()
        finally:
            self.seconds += time.perf_counter() - began

    def select(self, step: int) -> None:
        """Measure the model by ``selection`` and keep a snapshot when it is the best so far (the start, when
        measured, is kept whatever its score: the fallback)."""
        if self.selection is None:
            return
        began = time.perf_counter()
        self.best.offer(step, float(self.selection()), keep=step == 0)
        self.seconds += time.perf_counter() - began
        log.info("%s at step %d: %s %.4f (best %.4f at step %d)", self.name, step, self.selection_name,
                 self.best.history[-1][1], self.best.score, self.best.step)

    def last_score(self) -> float | None:
        return self.best.history[-1][1] if self.best.history else None

    def out_of_patience(self) -> bool:
        return self.patience is not None and self.best.evaluations_since_best() >= self.patience

    def keep_best(self, restore: Callable[[Any], None], last_step: int) -> dict[str, Any]:
        """Put the best snapshot back with ``restore`` (the start's, when no step improved on it) unless the last
        step was the best; the record of why (empty without a selection)."""
        if self.selection is None or not self.best.history or self.best.state is None:
            return {}
        if self.best.step != last_step:
            restore(self.best.state)
        return kept_reason(self.best, self.selection_name, last_step)
