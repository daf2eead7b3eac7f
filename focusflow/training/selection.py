"""Keeping the best state of a run: one rule for the short in-memory runs (``training.fit``: fine-tuning, the
MLM head) and the checkpointed ones (``training.loop.TrainingRun``: align's keep-best), so that they differ only
in what they measure and what a state is."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Generic, TypeVar

State = TypeVar("State")


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
