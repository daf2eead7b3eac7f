"""The run's product: among every candidate the run built and evaluated downstream (each method after LAPT, a
pruned source, …), the one with the fewest tokens per word (what inference costs) among those at parity with the
source on **dev** on every task; else the best one, and the reason says so. The test score is reported, never used
to pick. A run without a downstream task cannot measure the choice: its product is the configured model.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from focusflow.evaluation.downstream.verdict import Verdict, paired_verdict, parity_word, seed_scores

SOURCE = "original"


@dataclass
class Candidate:
    """One model the run could ship, with what it costs and how it scores beside the source."""

    name: str
    n_params: int | None = None
    tokens_per_word: float | None = None
    cpu_minutes: float | None = None  # training spent on it (LAPT, align), on the machine that trained
    test: dict[str, str] = field(default_factory=dict)  # task → "mean ± std" (×100)
    dev_verdicts: dict[str, Verdict | None] = field(default_factory=dict)
    test_verdicts: dict[str, Verdict | None] = field(default_factory=dict)

    @property
    def at_parity_on_dev(self) -> bool:
        return bool(self.dev_verdicts) and all(v is not None and v.parity for v in self.dev_verdicts.values())

    @property
    def dev_gap(self) -> float:
        """The mean paired dev difference over the tasks (−inf without one): how close it comes."""
        gaps = [v.mean for v in self.dev_verdicts.values() if v is not None]
        return statistics.fmean(gaps) if gaps else float("-inf")

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        for name in ("dev_verdicts", "test_verdicts"):
            record[name] = {task: (v.to_dict() if v else None) for task, v in getattr(self, name).items()}
        record["at_parity_on_dev"] = self.at_parity_on_dev
        return record


@dataclass(frozen=True)
class Product:
    name: str
    reason: str
    measured: bool


def add_verdicts(candidate: Candidate, runs: Any, tasks: Sequence[str]) -> Candidate:
    """Its dev and test verdicts against the source, paired by seed, on every task (from a runs table)."""
    for task in tasks:
        candidate.dev_verdicts[task] = paired_verdict(seed_scores(runs, candidate.name, task, "dev"),
                                                      seed_scores(runs, SOURCE, task, "dev"))
        candidate.test_verdicts[task] = paired_verdict(seed_scores(runs, candidate.name, task),
                                                       seed_scores(runs, SOURCE, task))
    return candidate


def choose_product(candidates: Sequence[Candidate], configured: str) -> Product:
    """The fewest tokens per word among the candidates at parity on dev on every task; else the closest on dev; a
    run without downstream results: ``configured``, unmeasured."""
    measured = [c for c in candidates if c.dev_verdicts]
    if not measured:
        return Product(configured, "no downstream task was evaluated, so the choice was not measured: the configured "
                                   "model", measured=False)
    at_parity = [c for c in measured if c.at_parity_on_dev]
    if at_parity:
        best = min(at_parity, key=lambda c: (c.tokens_per_word if c.tokens_per_word is not None else float("inf"),
                                             -c.dev_gap))
        others = len(at_parity) - 1
        return Product(best.name, f"at parity with the source on dev on every task, with the fewest tokens per word "
                                  f"({_number(best.tokens_per_word)})"
                                  + (f" of the {len(at_parity)} candidates at parity" if others else ""), True)
    best = max(measured, key=lambda c: c.dev_gap)
    return Product(best.name, f"no candidate reached parity with the source on dev on every task; this one came "
                              f"closest ({best.dev_gap:+.1f} points on dev, paired by seed)", True)


def _number(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.2f}"


def candidates_markdown(candidates: Sequence[Candidate], product: Product,
                        source_row: Mapping[str, Any] | None = None) -> str:
    """The product first, then every candidate side by side: size, tokens per word, test scores beside the source
    with the paired difference, the dev verdict that picked, the CPU-minutes spent."""
    lines = [f"**Product: {product.name}**: {product.reason}.", ""]
    tasks = list(dict.fromkeys(task for c in candidates for task in c.test))
    header = ["model", "params", "tokens/word", *[f"{task} test" for task in tasks], "dev verdict", "CPU-minutes"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    if source_row:
        lines.append("| " + " | ".join([SOURCE, _count(source_row.get("n_params")),
                                        _number(source_row.get("tokens_per_word")),
                                        *[source_row.get("test", {}).get(t, "-") for t in tasks], "", ""]) + " |")
    for c in sorted(candidates, key=lambda c: c.name != product.name):
        test = [f"{c.test.get(t, '-')} ({v.mean:+.1f})" if (v := c.test_verdicts.get(t)) else c.test.get(t, "-")
                for t in tasks]
        dev = "; ".join(f"{parity_word(v.parity)} "
                        f"({v.mean:+.1f}, {v.low:+.1f}…{v.high:+.1f})" if v and v.low is not None else "-"
                        for v in c.dev_verdicts.values()) or "-"
        minutes = "" if c.cpu_minutes is None else f"{c.cpu_minutes:.1f}"
        lines.append("| " + " | ".join([f"**{c.name}**" if c.name == product.name else c.name, _count(c.n_params),
                                        _number(c.tokens_per_word), *test, dev, minutes]) + " |")
    return "\n".join(lines)


def _count(value: Any) -> str:
    return f"{int(value) / 1e6:.1f}M" if isinstance(value, (int, float)) else "-"


__all__ = ["Candidate", "Product", "add_verdicts", "candidates_markdown", "choose_product"]
