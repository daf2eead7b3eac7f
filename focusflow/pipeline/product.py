"""The run's product: among every candidate the run built (each method after LAPT, or each method where nothing
was trained; a pruned source, …), the one with the fewest tokens per word (what inference costs; within 1% of the
fewest, the fewest parameters) among those at parity with the source on **dev** on every task; else the closest one,
and the reason says so. The test score is
reported, never used to pick. A decoder run without a downstream task chooses the same way on the held-out split's
dev half: parity is dev bits per byte at most :data:`DEV_BITS_PARITY` above the source's (bits per byte compare
across tokenizers; the bits per byte the report scores are never looked at; tokens per word, a cost, not a score, are
counted on the held-out text). An encoder run without a downstream task cannot
measure the choice (a masked LM's loss does not compare across tokenizers): its product is the configured model,
and the report still shows every candidate with what it costs and its held-out measures.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from focusflow.evaluation.downstream.verdict import NOT_COMPARED, Verdict, parity_word, task_verdict, unconverged
from focusflow.evaluation.records import DECODER_MEASURES, finite_or_none, measure_text
from focusflow.storage import shorten_key

SOURCE = "original"


@dataclass
class Candidate:
    """One model the run could ship, with what it costs and how it scores beside the source."""

    name: str
    n_params: int | None = None
    tokens_per_word: float | None = None
    cpu_minutes: float | None = None  # training spent on it (LAPT, align), on the machine that trained
    bits_per_byte: float | None = None  # on the run's held-out text (its intrinsic evaluation)
    dev_bits_per_byte: float | None = None  # a decoder's, on the held-out split's dev half: what a choice looks at
    unigram_bits_per_byte: float | None = None  # its tokenizer's token frequencies alone, on the held-out text
    ood_bits_per_byte: float | None = None  # on text of another domain of the language
    ood_dev_bits_per_byte: float | None = None  # on the third of it a choice looks at (never the scored part)
    bits_verdict: str | None = None  # stored for the card (a published model reads no source row): bits_verdict()
    generated_bytes_per_s: float | None = None  # a decoder's greedy generation, on the machine that measured it
    reads_as_source: dict[str, float] = field(default_factory=dict)  # where → share of sentences cut as the source
    notes: list[str] = field(default_factory=list)  # what the table cannot say (a budget it could not keep)
    artifact: str | None = None  # the stored model's address (``lapt/<key>``, ``init/<key>``)
    test: dict[str, str] = field(default_factory=dict)  # task → "mean ± std" (×100)
    dev_verdicts: dict[str, Verdict | None] = field(default_factory=dict)
    test_verdicts: dict[str, Verdict | None] = field(default_factory=dict)
    unconverged: dict[str, tuple[int, int]] = field(default_factory=dict)  # task → (runs still improving, runs)

    @property
    def at_parity_on_dev(self) -> bool:
        return bool(self.dev_verdicts) and all(v is not None and v.parity for v in self.dev_verdicts.values())

    @property
    def dev_gap(self) -> float:
        """The mean paired dev difference over the tasks it has a verdict on (−inf without one): how close it comes."""
        gaps = [v.mean for v in self.dev_verdicts.values() if v is not None]
        return statistics.fmean(gaps) if gaps else float("-inf")

    @property
    def unpaired_tasks(self) -> list[str]:
        """The tasks it has no verdict on (no seed shared with the source's runs there)."""
        return [task for task, verdict in self.dev_verdicts.items() if verdict is None]

    @property
    def closeness(self) -> tuple[int, float]:
        """How close it comes, for choosing among candidates none of which reached parity: a verdict on more tasks
        first (a task without one is not a task passed), then the mean paired dev difference."""
        return len(self.dev_verdicts) - len(self.unpaired_tasks), self.dev_gap

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
        candidate.dev_verdicts[task] = task_verdict(runs, candidate.name, task, "dev", source=SOURCE)
        candidate.test_verdicts[task] = task_verdict(runs, candidate.name, task, source=SOURCE)
        candidate.unconverged[task] = unconverged(runs, (candidate.name, SOURCE), task)
    return candidate


#: A decoder at parity with its source without a downstream task: dev bits per byte at most 1% above the source's.
DEV_BITS_PARITY = 0.01
#: Tokens per word this close (relative) to the fewest count as as few: a hundredth must not outweigh a smaller model.
TOKENS_PER_WORD_TIE = 0.01

#: Why a candidate has no verdict on a task: what a user can check.
NO_VERDICT = ("no seed where both it and the source were fine-tuned and one of them learned the task: was the source "
              "evaluated (orchestration.evaluate_original), and did the fine-tuning leave dev 0?")

#: How the product is chosen, in one sentence (the report's and anything else that explains it).
PRODUCT_RULE = (f"the fewest tokens per word (within {100 * TOKENS_PER_WORD_TIE:g}% of the fewest: the fewest "
                "parameters) among the candidates at parity with the source on dev, paired by seed on every "
                f"downstream task or, in a decoder run without one, on dev bits per byte (at most "
                f"{100 * DEV_BITS_PARITY:g}% above the source's, on the other domain's dev third too where the run has "
                "one); else the one that comes closest, and its reason says so; an encoder run without a downstream "
                "task cannot measure it and ships the configured model. Test scores and the held-out text's bits per "
                "byte are reported, never used to pick")


def choose_product(candidates: Sequence[Candidate], configured: str, source_dev_bits: float | None = None,
                   source_ood_dev_bits: float | None = None, *, decoder: bool = False) -> Product:
    """The fewest tokens per word among the candidates at parity on dev on every task; else the closest on dev. A run
    without downstream verdicts: on dev bits per byte where measured (``source_dev_bits``, a decoder run's; with text
    of another domain, ``source_ood_dev_bits``, on its dev third too), else ``configured``, unmeasured
    (``decoder``: the run's models are causal LMs, which a source's dev bits per byte would have chosen between)."""
    measured = [c for c in candidates if c.closeness[0]]
    if not measured:
        source_dev_bits, source_ood_dev_bits = finite_or_none(source_dev_bits), finite_or_none(source_ood_dev_bits)
        scored = [c for c in candidates if finite_or_none(c.dev_bits_per_byte) is not None]
        tasks_run = any(c.dev_verdicts for c in candidates)  # but no candidate has a verdict against the source
        if source_dev_bits is not None and scored:
            return _choose_by_dev_bits(scored, source_dev_bits, source_ood_dev_bits, tasks_run)
        if tasks_run:
            return Product(configured, f"no candidate could be compared with the source on the downstream tasks "
                                       f"({NO_VERDICT}), so the choice was not measured: the configured model",
                           measured=False)
        if decoder and scored:  # a decoder run's candidates have dev bits per byte, the source has none
            return Product(configured, "the source's dev bits per byte were not measured (was the source evaluated? "
                                       "orchestration.evaluate_original), so the choice was not measured: the "
                                       "configured model", measured=False)
        return Product(configured, "no downstream task was evaluated, so the choice was not measured: the configured "
                                   "model", measured=False)
    left_out = [c.name for c in candidates if not c.closeness[0]]  # no verdict on any task: not compared
    return _with_left_out(_choose_on_tasks(measured), left_out)


def _choose_on_tasks(measured: Sequence[Candidate]) -> Product:
    """Among candidates with a verdict on at least one task: the leanest at parity on every task, else the closest."""
    at_parity = [c for c in measured if c.at_parity_on_dev]
    if at_parity:
        leanest = _leanest(at_parity)
        best = min(at_parity, key=lambda c: (*leanest(c), -c.dev_gap))
        return Product(best.name, f"at parity with the source on dev on every task, {_lean_reason(best, at_parity)}"
                       + (f" of the {len(at_parity)} candidates at parity" if len(at_parity) > 1 else ""), True)
    best = max(measured, key=lambda c: c.closeness)
    below = [task for task, verdict in best.dev_verdicts.items() if verdict is not None and verdict.parity is False]
    unpaired = (f"; it has no verdict on {', '.join(best.unpaired_tasks)} ({NO_VERDICT})"
                if best.unpaired_tasks else "")
    gap = f"{best.dev_gap:+.1f} points against the source on dev{_per_task(best)} (paired by seed)"
    if best.dev_gap >= 0 and not below:
        every = all(v.mean >= 0 for v in best.dev_verdicts.values() if v is not None)
        return Product(best.name, f"no candidate reached parity with the source on dev on every task; this one scored "
                                  f"highest, {gap}, above it{'' if every else ' on the mean of the tasks, not on each'}"
                                  f", but with too few seeds to call it parity: add seeds{unpaired}", True)
    if below:
        return Product(best.name, f"no candidate reached parity with the source on dev on every task; this one came "
                                  f"closest ({gap}), and is below the source on {', '.join(below)}{unpaired}", True)
    return Product(best.name, f"no candidate reached parity with the source on dev on every task; this one came "
                              f"closest ({gap}){unpaired}", True)


def _with_left_out(product: Product, left_out: Sequence[str]) -> Product:
    """The product, its reason naming the candidates the choice could not compare (no verdict on any task)."""
    if not left_out:
        return product
    return Product(product.name, f"{product.reason}; not compared: {', '.join(left_out)}, without a verdict against "
                                 f"the source on any task ({NO_VERDICT})", product.measured)


def _per_task(c: Candidate) -> str:
    """`` (+7.0 on a, −5.0 on b)``: each task's paired dev difference, where a mean over several could hide one."""
    verdicts = {task: v for task, v in c.dev_verdicts.items() if v is not None}
    if len(verdicts) < 2:
        return ""
    return " over the tasks (" + ", ".join(f"{v.mean:+.1f} on {task}" for task, v in verdicts.items()) + ")"


def _choose_by_dev_bits(candidates: Sequence[Candidate], source: float, source_ood: float | None = None,
                        tasks_run: bool = False) -> Product:
    """A decoder run's choice without a downstream task: the fewest tokens per word among the candidates whose dev
    bits per byte are within :data:`DEV_BITS_PARITY` of the source's (or below) and, where the run has text of another
    domain, whose bits per byte on its dev third are too (a gain of the corpus's domain alone is not the language's);
    else the one whose worse text comes closest to parity."""
    texts = "the held-out split's dev half" + (" and the other domain's dev third" if source_ood else "")
    why = "no downstream verdict against the source" if tasks_run else "no downstream task"
    within = f"within {100 * DEV_BITS_PARITY:g}% of the source's"
    at_parity = [c for c in candidates if _bits_gap(c, source, source_ood) <= 0]
    if at_parity:
        leanest = _leanest(at_parity)
        best = min(at_parity, key=lambda c: (*leanest(c), c.dev_bits_per_byte))
        other = (f" and on the other domain's dev third ({best.ood_dev_bits_per_byte:.3f} against {source_ood:.3f})"
                 if source_ood and best.ood_dev_bits_per_byte is not None else "")
        return Product(best.name, f"its dev bits per byte ({best.dev_bits_per_byte:.3f}) are {within} "
                                  f"({source:.3f}) or below{other}, {_lean_reason(best, at_parity)}"
                                  + (f" of the {len(at_parity)} candidates there" if len(at_parity) > 1 else "")
                                  + f" ({why}: {texts} decided)", True)
    best = min(candidates, key=lambda c: _bits_gap(c, source, source_ood))
    return Product(best.name, f"no candidate's bits per byte came {within} on {texts}; this one came closest "
                              f"(dev {best.dev_bits_per_byte:.3f} against {source:.3f}"
                              + (f", other domain {best.ood_dev_bits_per_byte:.3f} against {source_ood:.3f}"
                                 if source_ood and best.ood_dev_bits_per_byte is not None else "") + ")", True)


def _fewest_tokens_per_word(among: Sequence[Candidate]) -> float | None:
    return min((x.tokens_per_word for x in among if x.tokens_per_word is not None), default=None)


def _leanest(among: Sequence[Candidate]) -> Callable[[Candidate], tuple[float, float]]:
    """The order among candidates at parity: the fewest tokens per word, those within :data:`TOKENS_PER_WORD_TIE` of
    the fewest counting as equal, then the fewest parameters (measured on Shona: FOCUS chosen over prune+extend for
    2.63 against 2.64 tokens per word, although prune+extend was 0.82x its size and lower on dev)."""
    fewest = _fewest_tokens_per_word(among)

    def key(c: Candidate) -> tuple[float, float]:
        if c.tokens_per_word is None or fewest is None:
            return float("inf"), float("inf")
        tied = c.tokens_per_word <= fewest * (1 + TOKENS_PER_WORD_TIE)
        return (fewest if tied else c.tokens_per_word), (c.n_params if c.n_params is not None else float("inf"))

    return key


def _lean_reason(best: Candidate, among: Sequence[Candidate]) -> str:
    """Why ``best`` and not another at parity: the fewest tokens per word, or within :data:`TOKENS_PER_WORD_TIE` of
    the fewest and the fewest parameters of those."""
    fewest = _fewest_tokens_per_word(among)
    if best.tokens_per_word is None or fewest is None or best.tokens_per_word <= fewest:
        return f"with the fewest tokens per word ({_number(best.tokens_per_word)})"
    return (f"with tokens per word ({_number(best.tokens_per_word)}) within {100 * TOKENS_PER_WORD_TIE:g}% of the "
            f"fewest ({_number(fewest)}) and the fewest parameters of those ({_count(best.n_params)})")


def _bits_gap(c: Candidate, source: float, source_ood: float | None) -> float:
    """How far above parity a candidate's bits per byte are, the worse of its two texts (≤ 0: at parity; a text not
    measured, or measured as NaN, is not at parity)."""
    dev = finite_or_none(c.dev_bits_per_byte)
    gaps = [dev / source - 1 - DEV_BITS_PARITY if dev is not None else float("inf")]
    if source_ood:  # a candidate not measured there is not at parity there
        ood = finite_or_none(c.ood_dev_bits_per_byte)
        gaps.append(ood / source_ood - 1 - DEV_BITS_PARITY if ood is not None else float("inf"))
    return round(max(gaps), 12)  # exactly 1% above is at parity, whatever the last bit of a division says


def bits_verdict(c: Candidate, source_row: Mapping[str, Any] | None) -> str | None:
    """A decoder candidate's verdict on dev bits per byte, what a run without a downstream task chose on: parity
    (within 1% of the source's or below, on the other domain's dev third too where the run has one) or worse, with
    the relative differences."""
    source = finite_or_none((source_row or {}).get("dev_bits_per_byte"))
    if finite_or_none(c.dev_bits_per_byte) is None or not source or (source_row or {}).get("lm_loss") != "clm":
        return None  # a masked LM's bits per byte do not compare across tokenizers: no verdict on them
    source_ood = finite_or_none((source_row or {}).get("ood_dev_bits_per_byte"))
    parts = [f"dev {100 * (c.dev_bits_per_byte / source - 1):+.1f}%"]
    if source_ood:
        parts.append(f"other domain {100 * (c.ood_dev_bits_per_byte / source_ood - 1):+.1f}%"
                     if c.ood_dev_bits_per_byte is not None else "other domain not measured")
    return f"{'parity' if _bits_gap(c, source, source_ood) <= 0 else 'worse'} ({', '.join(parts)})"


def _number(value: float | None, digits: int = 2) -> str:
    return "unknown" if value is None else f"{value:.{digits}f}"


def candidates_markdown(candidates: Sequence[Candidate], product: Product,
                        source_row: Mapping[str, Any] | None = None) -> str:
    """The product first, then every candidate side by side: size, tokens per word, held-out bits per byte and test
    scores beside the source (with the paired difference), the dev verdict that picked, the CPU-minutes spent, and
    where each is stored."""
    picked = next((c for c in candidates if c.name == product.name), None)
    where = f" (`{picked.artifact}`)" if picked is not None and picked.artifact else ""
    lines = [f"**Product: {product.name}**{where}: {product.reason}.", ""]
    tasks = list(dict.fromkeys(task for c in candidates for task in c.test))
    reading = list(dict.fromkeys(where for c in candidates for where in c.reads_as_source))
    masked = (source_row or {}).get("lm_loss") == "mlm"  # a masked LM's dev bits per byte compare with nothing
    extra = [(field, title) for field, title in DECODER_MEASURES if not masked and (
        any(getattr(c, field) is not None for c in candidates) or (source_row or {}).get(field) is not None)]
    # a masked LM's are over its masked tokens' bytes: they compare models of one tokenizer only (as the card says)
    bits = "held-out masked bits/byte (within one tokenizer)" if masked else "held-out bits/byte"
    header = ["model", "params", "tokens/word", bits, *[title for _, title in extra],
              *[f"{task} test" for task in tasks], "dev verdict", "CPU-minutes",
              *[f"cut as the source ({where})" for where in reading], "stored as"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    if source_row:
        lines.append("| " + " | ".join([SOURCE, _count(source_row.get("n_params")),
                                        _number(source_row.get("tokens_per_word")),
                                        _number(source_row.get("bits_per_byte"), 3),
                                        *[measure_text(source_row.get(field), field) for field, _ in extra],
                                        *[source_row.get("test", {}).get(t, "-") for t in tasks], "", "",
                                        *["" for _ in reading], _address(source_row.get("artifact"))]) + " |")
    on_tasks = any(v is not None for c in candidates for v in c.dev_verdicts.values())  # what the choice read
    for c in sorted(candidates, key=lambda c: c.name != product.name):
        test = [f"{c.test.get(t, '-')} ({v.mean:+.1f})" if (v := c.test_verdicts.get(t)) else c.test.get(t, "-")
                for t in tasks]
        verdicts = "; ".join(_verdict_cell(c, task, v) for task, v in c.dev_verdicts.items())
        any_verdict = any(v is not None for v in c.dev_verdicts.values())
        dev = verdicts if any_verdict else NOT_COMPARED if on_tasks else (
            bits_verdict(c, source_row) or verdicts or "not measured")
        minutes = "" if c.cpu_minutes is None else f"{c.cpu_minutes:.1f}"
        lines.append("| " + " | ".join([f"**{c.name}**" if c.name == product.name else c.name, _count(c.n_params),
                                        _number(c.tokens_per_word), _number(c.bits_per_byte, 3),
                                        *[measure_text(getattr(c, field), field) for field, _ in extra], *test, dev, minutes,
                                        *[_share(c.reads_as_source.get(where)) for where in reading],
                                        _address(c.artifact)]) + " |")
    notes = [f"- **{c.name}**: {note}" for c in candidates for note in c.notes]
    return "\n".join([*lines, *([""] + notes if notes else [])])


def _verdict_cell(c: Candidate, task: str, v: Verdict | None) -> str:
    """One task's dev verdict in the candidates table: the call, the mean and its interval (one seed: no interval)."""
    if v is None:
        return "-"
    if v.low is None:
        return f"undecided ({v.mean:+.1f}, {len(v.seeds)} seed)"
    still, runs = c.unconverged.get(task, (0, 0))
    return (f"{parity_word(v.parity)} ({v.mean:+.1f}, {v.low:+.1f}…{v.high:+.1f})"
            + (f", not converged ({still} of {runs} runs)" if still else ""))


def _share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}% of sentences"


def _address(uri: Any) -> str:
    """``lapt/3027b661e3b0`` for a stored artifact's URI: the short address every command accepts."""
    parts = str(uri or "").rstrip("/").split("/")
    return f"`{parts[-2]}/{shorten_key(parts[-1])}`" if len(parts) >= 2 and parts[-1] else "-"


def _count(value: Any) -> str:
    """Parameters in millions (a tiny model's in thousands, so that it does not read 0.0M)."""
    if not isinstance(value, (int, float)):
        return "-"
    return f"{int(value) / 1e6:.1f}M" if value >= 1e5 else f"{int(value) / 1e3:.1f}k"


__all__ = ["Candidate", "DEV_BITS_PARITY", "PRODUCT_RULE", "Product", "add_verdicts", "bits_verdict",
           "candidates_markdown", "choose_product"]
