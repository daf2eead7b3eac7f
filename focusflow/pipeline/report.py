"""The run report: one Markdown page, a comparison CSV and a bar chart from the stages' metrics (and, for
decoders, their greedy continuations of held-out prompts).

It reads only artifact manifests (the metrics each stage recorded), so it is cheap and can be
rebuilt for any set of stored artifacts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from focusflow.methods import SHARE_GROUPS, Fate
from focusflow.pipeline.product import PRODUCT_RULE

COMPARISON_FILE = "comparison.csv"  # the report artifact's table of every model's measures
REPORT_TEXT = "report.md"  # and its text

# The comparison columns in the order users read them (missing ones are left out). The ``*_share`` columns are
# the initialization's fates as shares of the target vocabulary (transfer_totals.json has the counts): the rows a
# method built, then the random ones, shown even at 0% ("random 0%" is news); prune's kept rows are the source's.
BUILT_SHARES = [f"{group}_share" for group in SHARE_GROUPS if group not in (Fate.RANDOM, Fate.KEPT)]
SHARE_COLUMNS = [*BUILT_SHARES, f"{Fate.RANDOM}_share"]
# The language-model columns follow the LM loss the intrinsic records name: mlm_* for encoders, clm_* for decoders.
COMPARISON_COLUMNS = [
    "method", "stage", "fidelity", "fidelity_chance", "fidelity_centered", "retrieval_top1", "retrieval_top1_centered",
    "mlm_loss", "mlm_accuracy", "clm_loss", "clm_accuracy", "bits_per_byte", "repetition_rate",
    "unigram_loss", "unigram_bits_per_byte", "vocab_size", "n_params", "tokens_per_word", *SHARE_COLUMNS,
]
RANKING_NOTE = ("A decoder's bits per byte rank its models across tokenizers (its LM loss is per token of each model's "
                "own tokenizer); a masked LM's are over the bytes of its masked tokens, and a tokenizer with longer "
                "tokens hides more of the text at each mask: they rank models of one tokenizer only. A "
                "decoder's `repetition_rate` is the share of word pairs of its greedy continuations that repeat an "
                "earlier pair of the same continuation (near 1: collapsed into one repeated word). Fidelity "
                "and retrieval only measure how close a model's sentence embeddings stay to the source's: "
                "`fidelity_chance` is the mean cosine of mismatched sentence pairs (a decoder's embeddings all point "
                "nearly one way, so a raw fidelity near it says nothing) and the `_centered` scores remove the mean "
                "direction first; retrieval's chance level is 1 / the number of sentences.")
_CHART_METRICS = ["retrieval_top1", "fidelity", "mlm_loss", "clm_loss", "bits_per_byte"]
# Lower is better for these; each is drawn against its own tokenizer's unigram level.
_UNIGRAM_LEVELS = {"mlm_loss": "unigram_loss", "clm_loss": "unigram_loss", "bits_per_byte": "unigram_bits_per_byte"}
#: The mark of a comparison row whose model predicts no better than token frequencies (the list below the table).
ABOVE_UNIGRAM_MARK = "⚠"


def flatten_metrics(metadata: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested metrics as ``a.b`` → value (long lists summarized), for tables."""
    rows: dict[str, Any] = {}
    for key, value in metadata.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            rows.update(flatten_metrics(value, f"{name}."))
        elif isinstance(value, (list, tuple)) and len(value) > 8:
            rows[name] = f"[{len(value)} items]"
        else:
            rows[name] = value
    return rows


def comparison_frame(rows: list[Mapping[str, Any]]) -> pd.DataFrame:
    """The comparison columns users read, in order; columns no row has are left out, and so are fate shares
    that are zero in every row (except ``random_share``: "random 0%" is news)."""
    frame = pd.DataFrame(rows)

    def shown(column: str) -> bool:
        values = frame[column]
        if column in BUILT_SHARES:
            return bool(values.fillna(0).astype(float).gt(0).any())
        return bool(values.notna().any())

    return frame[[c for c in COMPARISON_COLUMNS if c in frame.columns and shown(c)]]


def _markdown_table(frame: pd.DataFrame) -> str:
    def cell(value: Any, column: str) -> str:
        if isinstance(value, float):
            if math.isnan(value):
                return ""
            if column in SHARE_COLUMNS:
                return f"{100 * value:.1f}%"
            return str(int(value)) if value.is_integer() and abs(value) >= 1000 else f"{value:.4g}"
        return str(value)

    header = "| " + " | ".join(frame.columns) + " |"
    rule = "| " + " | ".join("---" for _ in frame.columns) + " |"
    body = ["| " + " | ".join(cell(v, c) for v, c in zip(row, frame.columns, strict=False)) + " |"
            for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])


def _key_values(title: str, values: Mapping[str, Any]) -> str:
    lines = [f"### {title}", "", "| metric | value |", "| --- | --- |"]
    for key, value in flatten_metrics(values).items():
        shown = f"{value:.4g}" if isinstance(value, float) else str(value)
        lines.append(f"| {key} | {shown[:120]} |")
    return "\n".join(lines)


def _above_unigram(frame: pd.DataFrame) -> list[str | None]:
    """Per row, why its model (encoder or decoder) has learned no context: not below its tokenizer's unigram level
    (``evaluation.intrinsic.above_unigram``, the rule the card applies too); None for a row below it."""
    from focusflow.evaluation.intrinsic import above_unigram

    return [above_unigram({k: v for k, v in row.items() if not (isinstance(v, float) and pd.isna(v))})
            for row in frame.to_dict("records")]


def _unigram_warnings(frame: pd.DataFrame) -> list[str]:
    """Every model that has learned no context, and why (its row of the table carries :data:`ABOVE_UNIGRAM_MARK`)."""
    lines = [f"- **{row['method']} ({row.get('stage', 'init')})**: {why}."
             for row, why in zip(frame.to_dict("records"), _above_unigram(frame), strict=True) if why]
    return [*lines, ""] if lines else []


def _flagged(frame: pd.DataFrame) -> pd.DataFrame:
    """The table as shown: a model not below its unigram level has :data:`ABOVE_UNIGRAM_MARK` beside its name."""
    if frame.empty or "method" not in frame.columns:
        return frame
    shown = frame.copy()
    shown["method"] = [f"{method} {ABOVE_UNIGRAM_MARK}" if why else method
                       for method, why in zip(frame["method"], _above_unigram(frame), strict=True)]
    return shown


def comparison_chart(frame: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [m for m in _CHART_METRICS if m in frame.columns and frame[m].notna().any()]
    if not metrics:
        return
    labels = frame["method"].astype(str) + frame.get("stage", pd.Series([""] * len(frame))).map(
        lambda s: f" ({s})" if s and s != "init" else "")
    figure, axes = plt.subplots(1, len(metrics), figsize=(4 * len(metrics), 3.6), squeeze=False)
    for axis, metric in zip(axes[0], metrics, strict=False):
        values = frame[metric].astype(float)
        axis.bar(range(len(values)), values, color=["#4c72b0" if m == "focus" else "#999999" for m in frame["method"]])
        axis.set_xticks(range(len(values)), labels, rotation=45, ha="right", fontsize=8)
        axis.set_title(metric + (" ↓" if metric in _UNIGRAM_LEVELS else " ↑"))
        reference = _UNIGRAM_LEVELS.get(metric)
        if reference in frame.columns and frame[reference].notna().any():  # each bar's own tokenizer's unigram level
            axis.hlines(frame[reference].astype(float), [i - 0.4 for i in range(len(frame))],
                        [i + 0.4 for i in range(len(frame))], colors="#c05621", linestyles="--", linewidth=1.2,
                        label="unigram")
            axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def stage_times(rows: list[Mapping[str, Any]]) -> pd.DataFrame:
    """Where the time went: one row per stored stage run (``stage``, ``name``, ``seconds`` of its build, ``work``
    and ``unit`` from the stage's declared work metric, ``per_second``, ``host``), slowest first."""
    frame = pd.DataFrame(rows, columns=["stage", "name", "seconds", "work", "unit", "host"])
    frame["per_second"] = frame["work"] / frame["seconds"].where(frame["seconds"] > 0)
    return frame.sort_values("seconds", ascending=False, na_position="last").reset_index(drop=True)


def _stage_time_table(frame: pd.DataFrame) -> str:
    lines = ["| stage | name | seconds | share | work | per second | host |", "| --- | --- | --- | --- | --- | --- | --- |"]
    total = float(frame["seconds"].sum()) or 1.0
    for row in frame.to_dict("records"):
        seconds = row["seconds"]
        shown = "" if pd.isna(seconds) else f"{seconds:.1f}"
        share = "" if pd.isna(seconds) else f"{100 * seconds / total:.0f}%"
        work = "" if pd.isna(row["work"]) else f"{row['work']:,.0f} {row['unit']}"
        rate = "" if pd.isna(row["per_second"]) else f"{row['per_second']:,.0f} {row['unit']}/s"
        lines.append(f"| {row['stage']} | {row['name']} | {shown} | {share} | {work} | {rate} | {row['host'] or ''} |")
    return "\n".join(lines)


def _cell_text(text: str) -> str:
    """Generated text as one Markdown table cell: pipes escaped, line breaks shown as ⏎, other control characters
    as escapes (the report is printed to terminals), nothing said so."""
    lines = ("".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii") for c in line)
             for line in str(text).replace("|", "\\|").splitlines())
    shown = " ⏎ ".join(lines)
    return shown if shown.strip() else "(nothing)"


def continuations_markdown(continuations: Mapping[str, list[Mapping[str, str]]]) -> str:
    """Per held-out prompt, what the text says next and each model's greedy continuation (models in the order
    given; a model whose reference drew other prompts shows under its own prompts)."""
    by_prompt: dict[str, dict[str, Any]] = {}
    for model, items in continuations.items():
        for item in items:
            entry = by_prompt.setdefault(item["prompt"], {"heldout": item.get("heldout", ""), "models": {}})
            entry["models"][model] = item["continuation"]
    lines = []
    for number, (prompt, entry) in enumerate(by_prompt.items(), start=1):
        lines += [f"**Prompt {number}:** {_cell_text(prompt)}", "", "| model | continuation |", "| --- | --- |",
                  f"| *held-out text* | {_cell_text(entry['heldout'])} |"]
        lines += [f"| {model} | {_cell_text(text)} |" for model, text in entry["models"].items()]
        lines.append("")
    return "\n".join(lines)


def write_report(out_dir: Path, language: str, comparison_rows: list[Mapping[str, Any]],
                 sections: Mapping[str, Mapping[str, Any]], downstream: pd.DataFrame | None = None,
                 timings: pd.DataFrame | None = None,
                 continuations: Mapping[str, list[Mapping[str, str]]] | None = None,
                 downstream_notes: list[str] | None = None,
                 refinement_notes: list[str] | None = None, product: str | None = None) -> dict[str, Any]:
    """Write ``report.md``, ``comparison.csv`` and ``comparison.png`` (and ``stage_times.csv``); return the headline.

    ``continuations`` (model label → its intrinsic evaluation's greedy continuations; decoders only) become a
    section a person reads: each prompt, then every model's text.

    The report is a view of manifests, timings included: the one artifact whose files are not
    deterministic, and no stage takes it as an input.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    frame = comparison_frame(comparison_rows)
    frame.to_csv(out_dir / COMPARISON_FILE, index=False)
    comparison_chart(frame, out_dir / "comparison.png")
    parts = [f"# focusflow report — {language}", ""]
    if product:
        parts += ["## The product", "", "Every candidate this run built, the one it ships first (`focusflow publish` "
                  f"publishes it by default): {PRODUCT_RULE}.", "", product, ""]
    if not frame.empty:
        parts += ["## Method comparison (held-out text)", "", _markdown_table(_flagged(frame)), "", RANKING_NOTE, "",
                  *_unigram_warnings(frame), "![comparison](comparison.png)", ""]
    if refinement_notes:
        parts += ["### Refinements", "", "A refinement keeps the state its language model measures best on a dev "
                  "slice of its own (not these held-out sentences), its start included: it never ends worse than it "
                  "started.", "", *[f"- {note}" for note in refinement_notes], ""]
    if continuations:
        parts += ["## Greedy continuations (held-out prompts)", "",
                  "The first words of held-out sentences, continued greedily by each decoder: read them for "
                  "whether the text is the language.", "", continuations_markdown(continuations)]
    if downstream is not None and not downstream.empty:
        from focusflow.evaluation.downstream.report import summary_markdown

        downstream.to_csv(out_dir / "downstream.csv", index=False)
        parts += ["## Downstream tasks", "", "Scores ×100, mean ± sample std over seeds (test split, best dev "
                  "checkpoint); every metric per run in `downstream.csv`.", "", summary_markdown(downstream, language),
                  "", *[f"- {note}" for note in downstream_notes or []], ""]
    if timings is not None and not timings.empty:
        timings.to_csv(out_dir / "stage_times.csv", index=False)
        parts += ["## Where the time went", "", "Wall seconds of each stage's build (a cached stage shows the run that "
                  "built it) and its throughput: what to scale out.", "", _stage_time_table(timings), ""]
    for title, values in sections.items():
        parts += [_key_values(title, values), ""]
    (out_dir / REPORT_TEXT).write_text("\n".join(parts), encoding="utf-8")
    headline: dict[str, Any] = {"language": language, "n_methods": int(len(frame))}
    if "retrieval_top1" in frame.columns:
        for row in frame.to_dict("records"):
            headline[f"{row['method']}_{row.get('stage', 'init')}_top1"] = row.get("retrieval_top1")
    return headline
