"""Downstream evaluation and the run report as stored stages.

The evaluation data is identified by the content of its files, not by its path, so the same
data on another machine gives the same key and changed data recomputes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from focusflow.pipeline.registry import Stage, StageRun, register
from focusflow.pipeline.report import COMPARISON_COLUMNS, flatten_metrics, stage_times, write_report
from focusflow.storage import Artifact, sha256_file

DOWNSTREAM_STAGE, DOWNSTREAM_VERSION = "downstream", 1
REPORT_STAGE, REPORT_VERSION = "report", 3
# settings added to EvalSpec after version 1 of the stage: in the key only when set, so existing keys stay
# the same (threads changes the speed, not the result: never in the key)
_KEY_WHEN_SET = ("max_length",)
_NOT_IN_KEY = ("data_root", "heldout_sentences", "threads")
_DATA_SUFFIXES = {".txt", ".tsv", ".json", ".jsonl", ".csv", ".conll", ".parquet"}


def data_fingerprint(data_root: Path | None) -> str | None:
    """sha256 over the evaluation files under ``data_root`` (names and bytes)."""
    if data_root is None:
        return None
    root = Path(data_root)
    if not root.is_dir():
        raise FileNotFoundError(f"evaluation data folder {root} does not exist")
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in _DATA_SUFFIXES):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(bytes.fromhex(sha256_file(path)))
    return digest.hexdigest()


def _downstream_key(params: Mapping[str, Any]) -> dict[str, Any]:
    """The key-relevant evaluation settings: the data path is replaced by its content fingerprint."""
    evaluation = params["evaluation"]
    settings = {k: v for k, v in evaluation.items()
                if k not in _NOT_IN_KEY and not (k in _KEY_WHEN_SET and v is None)}
    root = evaluation.get("data_root")
    return {"evaluation": settings, "data": data_fingerprint(Path(root)) if root else None,
            "name": params.get("name", "model")}


def _downstream(run: StageRun) -> dict[str, Any]:
    """Fine-tune and test the model on every task of ``evaluation['tasks']`` (any task kind) over its seeds."""
    from focusflow.config import EvalSpec
    from focusflow.evaluation.downstream import evaluate_models

    evaluation, name = EvalSpec.model_validate(run.params["evaluation"]), run.params.get("name", "model")
    frame = evaluate_models({name: run.inputs["model"]}, list(evaluation.tasks), run.out, evaluation.downstream())
    return {"results": json.loads(frame.to_json(orient="records"))}


def _comparison_row(label: str, evaluation: Artifact, init: Artifact | None,
                    tokenizer_metrics: Mapping[str, Any]) -> dict[str, Any]:
    """One row: intrinsic metrics + the initialization's token fates + the tokenizer's efficiency."""
    method, _, stage = label.partition("+")
    row: dict[str, Any] = {"method": method, "stage": stage or "init"}
    for values in (evaluation.metadata, init.metadata if init else {}):
        for key, value in values.items():
            if key in COMPARISON_COLUMNS and (isinstance(value, (int, float, str, bool)) or value is None):
                row.setdefault(key, value)
    side = "source" if method == "original" else "target"
    row.setdefault("tokens_per_word", tokenizer_metrics.get(f"heldout.{side}.tokens_per_word"))
    return row


def _timing_rows(artifacts: Mapping[str, Artifact]) -> list[dict[str, Any]]:
    """One row per distinct artifact: its build's seconds and host, and the work its stage declares."""
    from focusflow.pipeline.registry import STAGES

    rows, seen = [], set()
    for name, artifact in artifacts.items():
        if artifact.uri in seen:
            continue
        seen.add(artifact.uri)
        work = STAGES[artifact.stage].work if artifact.stage in STAGES else None
        amount = flatten_metrics(artifact.metadata).get(work[0]) if work else None
        rows.append({"stage": artifact.stage, "name": name.partition(":")[2],
                     "seconds": artifact.metadata.get("build_seconds"),
                     "work": amount if isinstance(amount, (int, float)) else None, "unit": work[1] if work else "",
                     "host": artifact.metadata.get("host")})
    return rows


def _report(run: StageRun) -> dict[str, Any]:
    """The run report from stored artifacts named ``<kind>:<name>`` (``stage:corpus``, ``intrinsic:focus``,
    ``intrinsic:focus+lapt``, ``lapt:focus``, ``downstream:original``…); it reads manifests only."""
    by_kind: dict[str, dict[str, Artifact]] = {}
    for name, artifact in run.artifacts.items():
        kind, _, label = name.partition(":")
        by_kind.setdefault(kind, {})[label] = artifact
    tokenizer = by_kind.get("stage", {}).get("tokenizer")
    tokenizer_metrics = flatten_metrics(tokenizer.metadata) if tokenizer else {}
    rows = [_comparison_row(label, evaluation, by_kind.get("init", {}).get(label), tokenizer_metrics)
            for label, evaluation in by_kind.get("intrinsic", {}).items()]
    downstream = [pd.DataFrame(a.metadata.get("results", [])) for a in by_kind.get("downstream", {}).values()]
    downstream_frame = pd.concat(downstream, ignore_index=True) if downstream else None
    sections = {f"{label} stage": dict(a.metadata) for label, a in by_kind.get("stage", {}).items()}
    sections.update({f"LAPT of {label}": {k: v for k, v in a.metadata.items() if k in _LAPT_SUMMARY}
                     for label, a in by_kind.get("lapt", {}).items()})
    sections["artifacts"] = {name: a.uri for name, a in run.artifacts.items()}
    headline = write_report(run.out, run.params["language"], rows, sections, downstream_frame,
                            stage_times(_timing_rows(run.artifacts)))
    return {**headline, "artifacts": sections["artifacts"]}


_LAPT_SUMMARY = ("steps", "tokens", "initial_heldout_loss", "final_heldout_loss", "final_train_loss", "tokens_per_s",
                 "mfu", "precision", "device", "world_size", "resumed_from", "trainable_parameters")




DOWNSTREAM = register(Stage(DOWNSTREAM_STAGE, DOWNSTREAM_VERSION, ("model",), _downstream,
                            "fine-tune and test on NER/NLI/QA/classification tasks over seeds", key_params=_downstream_key,
                            uses_model=True))
REPORT = register(Stage(REPORT_STAGE, REPORT_VERSION, None, _report,
                        "the run report: method comparison, chart, downstream table"))
