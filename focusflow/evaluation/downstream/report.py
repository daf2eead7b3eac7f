"""Seeds → statistics → tables: ``runs.csv`` (one row per run and metric), ``results.csv``
(mean ± std per model × task × metric) and ``results.md`` (one Markdown table per task; a model whose runs
never learned a task, dev score 0, gets a note under that task's table: :func:`never_learned`).

``results.csv`` is the contract other tools read: at least the columns
``model, task, metric, mean, std, n_seeds``. ``std`` is the sample standard deviation over
seeds (ddof=1); with a single seed it is 0.0 and ``n_seeds`` says so.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd

from focusflow.storage.export import OutputFolder

#: A downstream artifact's tables: one row per fine-tuning run, and the seeds' summary per model and task.
RUNS_FILE, RESULTS_FILE, RESULTS_TABLE = "runs.csv", "results.csv", "results.md"

RESULT_COLUMNS = ["model", "task", "kind", "dataset", "language", "metric", "main", "mean", "std", "n_seeds",
                  "seeds", "dev_mean", "seconds_per_run", "train_tokens_per_s", "train_mfu", "n_train", "n_dev",
                  "n_test"]


def score_text(mean: float, std: float, seeds: int, digits: int = 1) -> str:
    """A score ×100 as ``mean ± std``; one seed has no spread to show: ``mean (1 seed)``, never ``± 0.0``."""
    if int(seeds) < 2:
        return f"{100 * float(mean):.{digits}f} (1 seed)"
    return f"{100 * float(mean):.{digits}f} ± {100 * float(std):.{digits}f}"


def never_learned(run: dict[str, Any]) -> bool:
    """True for a run whose dev score never rose above 0: the model never learned the task (NER: the all-O
    plateau, where it tags nothing and F1 is 0), so its test score measures the fine-tuning budget, not the model.

    The run record's ``never_learned`` when it has one; else (a run saved before it existed) from its dev curve."""
    if "never_learned" in run:
        return bool(run["never_learned"])
    scores = [float(score) for _, score in run.get("dev_curve") or []]
    if not scores and run.get("best_dev") is not None:
        scores = [float(run["best_dev"])]
    return bool(scores) and max(scores) <= 0.0


def never_learned_advice(run: dict[str, Any]) -> str:
    """What a run that never learned should tell the user: which run, what happened, what to do."""
    lr = (run.get("hparams") or {}).get("lr")
    budget = f"{run.get('total_steps', '?')} steps" + (f" at lr {float(lr):g}" if lr is not None else "")
    return (f"{run['model']} · {run['task']} · seed {run['seed']} never learned the task: dev "
            f"{run.get('main_metric', 'score')} stayed 0 over {budget} (NER: the all-O plateau, nothing tagged), so "
            f"its test score is not a measurement of the model. Train more steps or with a higher learning rate "
            f"(--epochs, --lr), e.g. --protocol cpu (MasakhaNER leaves the plateau after ~300 steps at lr 2e-4).")


def never_learned_notes(runs: list[dict[str, Any]]) -> dict[str, list[str]]:
    """One note per task and model with runs that never learned (``never_learned``), for ``results.md``."""
    seeds: dict[tuple[str, str], list[int]] = {}
    examples: dict[tuple[str, str], dict[str, Any]] = {}
    for run in runs:
        if never_learned(run):
            key = (run["task"], run["model"])
            seeds.setdefault(key, []).append(int(run["seed"]))
            examples.setdefault(key, run)
    notes: dict[str, list[str]] = {}
    for (task, model), found in seeds.items():
        run = examples[(task, model)]
        listed = ", ".join(str(seed) for seed in sorted(found))
        notes.setdefault(task, []).append(
            f"**{model} never learned this task** (seed {listed}: best dev {run.get('main_metric', 'score')} 0, "
            f"e.g. NER's all-O plateau): its score above is not a measurement of the model. Rerun with more steps "
            f"or a higher learning rate (--epochs, --lr), e.g. --protocol cpu for MasakhaNER.")
    return notes


def runs_frame(runs: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per (run, metric) from the dicts :func:`evaluate_task` returns."""
    rows = []
    for run in runs:
        for metric, value in run["test"].items():
            rows.append({"model": run["model"], "task": run["task"], "kind": run["kind"], "dataset": run["dataset"],
                         "language": run["language"], "seed": run["seed"], "metric": metric,
                         "main": metric == run["main_metric"], "value": value, "dev": run["best_dev"],
                         "best_step": run["best_step"], "total_steps": run["total_steps"],
                         "steps": run.get("steps") or run["total_steps"],
                         "seconds": run["seconds"], "train_tokens_per_s": run["train_tokens_per_s"],
                         "train_mfu": run.get("train_mfu"),
                         "n_train": run["sizes"]["train"], "n_dev": run["sizes"]["dev"],
                         "n_test": run["sizes"]["test"]})
    return pd.DataFrame(rows)


def aggregate(runs: pd.DataFrame) -> pd.DataFrame:
    if runs.empty:
        return pd.DataFrame(columns=RESULT_COLUMNS)
    keys = ["model", "task", "kind", "dataset", "language", "metric", "main"]
    rows = []
    for key, group in runs.groupby(keys, sort=False, dropna=False):
        values = group["value"].to_numpy(dtype=float)
        rows.append(dict(zip(keys, key, strict=True)) | {
            "mean": float(values.mean()),
            "std": float(values.std(ddof=1)) if len(values) > 1 else 0.0,
            "n_seeds": int(len(values)),
            "seeds": " ".join(str(s) for s in sorted(group["seed"])),
            "dev_mean": float(group["dev"].mean()),
            "seconds_per_run": float(group["seconds"].mean()),
            "train_tokens_per_s": float(group["train_tokens_per_s"].mean()),
            "train_mfu": (float(group["train_mfu"].astype(float).mean())
                          if "train_mfu" in group and group["train_mfu"].notna().any() else None),
            "n_train": int(group["n_train"].iloc[0]), "n_dev": int(group["n_dev"].iloc[0]),
            "n_test": int(group["n_test"].iloc[0]),
        })
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def summary_markdown(results: pd.DataFrame, language: str | None = None) -> str:
    """One row per model and task with its main metric, ×100 as mean ± std: the headline table."""
    header = ["model", "task", "language", "metric", "score", "seeds"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    main = results[results["main"].astype(bool)] if "main" in results.columns else results
    for row in main.to_dict("records"):
        shown_language = row.get("language") if isinstance(row.get("language"), str) and row.get("language") else None
        lines.append("| " + " | ".join([
            str(row["model"]), str(row["task"]), shown_language or language or "-", str(row["metric"]),
            score_text(row["mean"], row["std"], row["n_seeds"]), str(int(row["n_seeds"]))]) + " |")
    return "\n".join(lines)


def markdown(results: pd.DataFrame, notes: dict[str, list[str]] | None = None) -> str:
    """One table per task: models as rows, every metric as ``mean ± std`` (×100)."""
    lines = ["# Downstream evaluation", "",
             "Scores ×100, mean ± sample std over seeds (test split, best dev checkpoint). "
             "Cost: wall seconds per run (training + evaluation) and training tokens/s.", ""]
    if not results.empty:
        lines += [summary_markdown(results), ""]
    for task, group in results.groupby("task", sort=False):
        metrics = list(dict.fromkeys(group.sort_values("main", ascending=False)["metric"]))
        first = group.iloc[0]
        lines += [f"## {task}", "",
                  f"{first['kind']} · dataset {first['dataset']} · language {first['language'] or '-'} · "
                  f"train/dev/test {first['n_train']}/{first['n_dev']}/{first['n_test']}", ""]
        header = ["model", *metrics, "seeds", "s/run", "tokens/s"]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for model, rows in group.groupby("model", sort=False):
            by_metric = rows.set_index("metric")
            cells = [str(model)]
            for metric in metrics:
                if metric in by_metric.index:
                    row = by_metric.loc[metric]
                    cells.append(score_text(row["mean"], row["std"], row["n_seeds"]))
                else:
                    cells.append("-")
            any_row = rows.iloc[0]
            cells += [str(int(any_row["n_seeds"])), f"{any_row['seconds_per_run']:.1f}",
                      f"{any_row['train_tokens_per_s']:.0f}"]
            lines.append("| " + " | ".join(cells) + " |")
        task_notes = (notes or {}).get(task, [])
        if task_notes:
            lines += ["", *(f"- {note}" for note in task_notes)]
        lines.append("")
    return "\n".join(lines) + "\n"


RUNS_FOLDER = "runs"  # runs/<model>/<task>/seed<k>.json: one fine-tuning run each, with its fingerprint
_RUN_FILE = re.compile(r"seed\d+\.json")


def results_folder(out: str | os.PathLike[str] | OutputFolder) -> OutputFolder:
    """``evaluate``'s ``--out``: refused at once (nothing touched) unless it is new, empty, or holds only what an
    earlier ``evaluate`` wrote there (a run to go on) and run files of its format (``runs/`` copied in from other
    machines to merge: :func:`is_run_file`)."""
    return out if isinstance(out, OutputFolder) else OutputFolder(out, "evaluate", own_format=is_run_file)


def is_run_file(name: str, path: Path) -> bool:
    """Whether ``name`` is a fine-tuning run's file as ``evaluate`` writes it (``runs/<model>/<task>/seed<k>.json``,
    a JSON object with its fingerprint), here or on another machine."""
    parts = name.split("/")
    if len(parts) != 4 or parts[0] != RUNS_FOLDER or not _RUN_FILE.fullmatch(parts[3]):
        return False
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(run, dict) and isinstance(run.get("fingerprint"), str)


def write_reports(out: str | os.PathLike[str] | OutputFolder, runs: list[dict[str, Any]],
                  notes: dict[str, list[str]] | None = None) -> pd.DataFrame:
    """``runs.csv``, ``results.csv`` and ``results.md`` of ``runs`` in the results folder (:func:`results_folder`)."""
    folder = results_folder(out)
    per_run = runs_frame(runs)
    results = aggregate(per_run)
    flagged = never_learned_notes(runs)
    notes = {task: [*(flagged.get(task) or []), *((notes or {}).get(task) or [])]
             for task in dict.fromkeys([*(notes or {}), *flagged])}
    folder.write(RUNS_FILE, per_run.to_csv(index=False))
    folder.write(RESULTS_FILE, results.to_csv(index=False))
    folder.write(RESULTS_TABLE, markdown(results, notes))
    return results

