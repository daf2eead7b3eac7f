"""Downstream evaluation and the run report as stored stages.

The evaluation data is identified by the content of the files a run reads, not by its path, so the
same data on another machine gives the same key, changed data recomputes, and another task's folder
appearing beside them changes nothing.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import pandas as pd

from focusflow.config import EvalSpec, PipelineConfig
from focusflow.corpus.io import COMPRESSIONS
from focusflow.evaluation.continuations import repetition_rate
from focusflow.evaluation.downstream.report import RESULTS_FILE, RUNS_FILE, score_text
from focusflow.evaluation.downstream.sources import SPLIT_FILE_STEMS, task_versions
from focusflow.evaluation.downstream.verdict import RULE_TEXT, verdict_lines
from focusflow.evaluation.records import (
    DownstreamRecord,
    IntrinsicRecord,
    ReadingRecord,
    ReportInput,
    ReportRecord,
    finite_or_none,
)
from focusflow.methods import lapt_objective, model_label, model_stage, read_model_label
from focusflow.pipeline.product import (
    SOURCE,
    Candidate,
    Product,
    add_verdicts,
    bits_verdict,
    candidates_markdown,
    choose_product,
)
from focusflow.pipeline.registry import RunHints, Stage, StageRun, StageSettings, register
from focusflow.pipeline.report import COMPARISON_COLUMNS, flatten_metrics, stage_times, write_report
from focusflow.pipeline.run_plan import RunPlan
from focusflow.storage import Artifact
from focusflow.storage.atomic import atomic_write
from focusflow.storage.fingerprint import folder_fingerprint
from focusflow.storage.records import StageRecord
from focusflow.tokenizer.record import TokenizerRecord
from focusflow.training.records import LaptRecord, ModelRecord

# version 2: the key's ``data`` is the one folder fingerprint of the task folders the run reads (it was
# every data file under data_root, hashed differently), for downstream and decontaminate alike
# version 3: results.md shows one seed as "(1 seed)" and notes a run that never learned (its record says so)
# version 4: the files hold what was computed, never what was measured (see MEASURED_*): runs.csv, results.csv and
# runs.jsonl; results.md and the per-run JSON files of evaluate_models stay out (timings and local paths)
# version 5: NER reads each sentence as running text (a byte-level or Gemma-style tokenizer kept no word-start marker
# word by word), a decoder labels a word's last piece, a word without tokens inside an entity continues it; a pair
# whose tokenizer puts nothing between its texts (SmolLM2) gets a line break there
DOWNSTREAM_STAGE, DOWNSTREAM_VERSION = "downstream", 5
# What a fine-tuning run measures or finds on the machine that ran it (wall time, speed, local paths and the resume
# fingerprint built from them): kept in the manifest, never in the artifact's files, so the same key gives the same
# bytes on every machine that computes the same numbers.
MEASURED_COLUMNS = ("seconds", "train_tokens_per_s", "train_mfu", "seconds_per_run", "compile")
MEASURED_RUN_FIELDS = ("model_path", "fingerprint", "seconds", "train_seconds", "eval_seconds", "train_tokens_per_s",
                       "train_mfu", "provenance", "compile")  # compile: what the machine's probe decided, and why
# 4: the LAPT behind each +lapt row, the protocol; 5: the product; 6: a decoder's clm_loss/clm_accuracy columns, a
# model not below its unigram level marked in the comparison table, and every candidate the run built, measured or
# not, with its held-out bits per byte, how much text it cuts as the source does, and its address; 7: an encoder run
# without a task no longer chosen on masked-LM bits per byte, a decoder's bits verdict stored with each candidate
REPORT_STAGE, REPORT_VERSION = "report", 7
# settings added to EvalSpec after version 1 of the stage: in the key only when set, so existing keys stay
# the same (threads changes the speed, not the result: never in the key)
_KEY_WHEN_SET = ("max_length", "embedding_lr_scale", "protocol", "patience")
_NOT_IN_KEY = ("data_root", "heldout_sentences", "threads", "ood_text", "compile")
_DATA_SUFFIXES = {".txt", ".tsv", ".json", ".jsonl", ".csv", ".conll", ".iob2", ".bio", ".parquet", *COMPRESSIONS}

# Floats read back exactly as written: pandas 3 does it by default (and deprecates asking), pandas 2 when asked.
_EXACT_FLOATS = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}


def data_fingerprint(tasks: Iterable[str], data_root: str | Path | None) -> str | None:
    """The fingerprint of the evaluation files these tasks read under ``data_root``: each task's local copy
    (``<root>/<kind>/<dataset>/<lang>``); folders of other tasks beside them do not count."""
    from focusflow.evaluation.downstream.sources import local_copy, parse_task

    if data_root is None:
        return None
    root = Path(data_root)
    if not root.is_dir():
        raise FileNotFoundError(f"evaluation data folder {root} does not exist")
    specs = [parse_task(task) for task in tasks]
    read = [folder for spec in specs if spec.path is None and (folder := local_copy(spec, root)) is not None]
    return folder_fingerprint(root, read, _DATA_SUFFIXES, bare_names=SPLIT_FILE_STEMS)


def data_versions(tasks: Iterable[str]) -> dict[str, Any]:
    """A stage setting's ``versions`` where these tasks' data means something else now (``sources.TASK_VERSIONS``),
    else nothing, so that the keys of every other run stay as they were."""
    versions = task_versions(tasks)
    return {"versions": versions} if versions else {}


class DownstreamStageSettings(StageSettings):
    """The downstream stage's settings (the evaluation section of a run; ``config.DownstreamSettings`` is what a
    Python caller of ``evaluate_models`` gives)."""

    evaluation: EvalSpec
    name: str = "model"  # the model's row label in the results

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, *, name: str, tasks: list[str] | None = None,
                    **variant: Any) -> Self:
        """``name``: the model's row label; ``tasks`` replaces the configuration's task list."""
        evaluation = cfg.evaluation if tasks is None else cfg.evaluation.model_copy(update={"tasks": list(tasks)})
        return cls(evaluation=evaluation, name=name)


def _downstream_key(params: Mapping[str, Any]) -> dict[str, Any]:
    """The key-relevant evaluation settings: the data path is replaced by its content fingerprint."""
    evaluation = params["evaluation"]
    settings = {k: v for k, v in evaluation.items()
                if k not in _NOT_IN_KEY and not (k in _KEY_WHEN_SET and v is None)}
    return {"evaluation": settings, "data": data_fingerprint(evaluation.get("tasks") or [], evaluation.get("data_root")),
            "name": params.get("name", "model"), **_preset_values(evaluation),
            **data_versions(evaluation.get("tasks") or [])}


def _preset_values(evaluation: Mapping[str, Any]) -> dict[str, Any]:
    """A named protocol's values for each task, in the key: the name alone would keep a cached result when the preset
    it names changes (the cpu protocol's classification became a run until the dev score stops rising)."""
    from focusflow.evaluation.downstream.presets import protocol_values
    from focusflow.evaluation.downstream.sources import parse_task

    protocol = evaluation.get("protocol")
    if protocol in (None, "paper"):
        return {}
    specs = [parse_task(task) for task in evaluation.get("tasks") or []]
    return {"preset": {spec.id: protocol_values(protocol, spec.kind, spec.dataset) for spec in specs}}


def _downstream(run: StageRun) -> dict[str, Any]:
    """Fine-tune and test the model on every task of ``evaluation.tasks`` (any task kind) over its seeds."""
    from focusflow.evaluation.downstream import evaluate_models

    s: DownstreamStageSettings = run.settings
    with tempfile.TemporaryDirectory(prefix="focusflow-downstream-") as scratch:
        work = Path(scratch)
        frame = evaluate_models({s.name: run.inputs["model"]}, list(s.evaluation.tasks), work,
                                s.evaluation.downstream())
        records = [json.loads(f.read_text(encoding="utf-8")) for f in sorted((work / "runs").rglob("seed*.json"))]
        for name in (RUNS_FILE, RESULTS_FILE):
            table = pd.read_csv(work / name, **_EXACT_FLOATS)
            atomic_write(run.out / name, table.drop(columns=[c for c in MEASURED_COLUMNS if c in table.columns])
                         .to_csv(index=False))
    computed = [{k: v for k, v in record.items() if k not in MEASURED_RUN_FIELDS} for record in records]
    atomic_write(run.out / "runs.jsonl", "".join(json.dumps(r, sort_keys=True) + "\n" for r in computed))
    measured = [{"model": r["model"], "task": r["task"], "seed": r["seed"],
                 **{k: r.get(k) for k in MEASURED_RUN_FIELDS if k not in ("model_path", "fingerprint")}}
                for r in records]
    return {"results": json.loads(frame.to_json(orient="records")), "measured": measured}


def _comparison_row(label: str, evaluation: Artifact, init: Artifact | None,
                    tokenizer: TokenizerRecord | None) -> dict[str, Any]:
    """One row: intrinsic metrics + the initialization's token fates + the tokenizer's efficiency."""
    method, stage = model_stage(label)
    row: dict[str, Any] = {"method": method, "stage": stage}
    intrinsic = IntrinsicRecord.of(evaluation)
    for values in (intrinsic.shown(), ModelRecord.of(init).shown() if init else {}):
        for key, value in values.items():
            if key in COMPARISON_COLUMNS and (isinstance(value, (int, float, str, bool)) or value is None):
                row.setdefault(key, value)
    row.setdefault("tokens_per_word", tokenizer.tokens_per_word("source" if method == "original" else "target")
                   if tokenizer is not None else None)
    if intrinsic.continuations:  # a decoder's: the collapse into one repeated word, as a number
        row["repetition_rate"] = repetition_rate([c.get("continuation", "") for c in intrinsic.continuations])
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
        record = StageRecord.of(artifact)
        amount = flatten_metrics(record.shown()).get(work[0]) if work else None
        rows.append({"stage": artifact.stage, "name": ReportInput.parse(name).name, "seconds": record.build_seconds,
                     "work": amount if isinstance(amount, (int, float)) else None, "unit": work[1] if work else "",
                     "host": record.host})
    return rows


def _report(run: StageRun) -> dict[str, Any]:
    """The run report from stored artifacts named ``<kind>:<name>`` (``stage:corpus``, ``intrinsic:focus``,
    ``intrinsic:focus+lapt``, ``lapt:focus``, ``downstream:original``…); it reads manifests only."""
    by_kind: dict[str, dict[str, Artifact]] = {}
    for name, artifact in run.artifacts.items():
        given = ReportInput.parse(name)
        by_kind.setdefault(given.kind, {})[given.name] = artifact
    tokenizer = by_kind.get("stage", {}).get("tokenizer")
    tokenizer_record = TokenizerRecord.of_optional(tokenizer)
    rows = [_comparison_row(label, evaluation, by_kind.get("init", {}).get(label), tokenizer_record)
            for label, evaluation in by_kind.get("intrinsic", {}).items()]
    downstream = [pd.DataFrame(DownstreamRecord.of(a).results) for a in by_kind.get("downstream", {}).values()]
    downstream_frame = pd.concat(downstream, ignore_index=True) if downstream else None
    seed_runs = [pd.read_csv(run.inputs[str(ReportInput("downstream", label))] / RUNS_FILE)
                 for label, a in by_kind.get("downstream", {}).items() if RUNS_FILE in a.files]
    runs_table = pd.concat(seed_runs, ignore_index=True) if seed_runs else None  # every model's seeds, by task
    sections = {f"{label} stage": StageRecord.of(a).shown() for label, a in by_kind.get("stage", {}).items()}
    sections.update({f"LAPT of {label}": _lapt_summary(a) for label, a in by_kind.get("lapt", {}).items()})
    notes = [_downstream_note(label, a) for label, a in by_kind.get("lapt", {}).items()]
    protocols = sorted({str(a.params.get("evaluation", {}).get("protocol") or "paper")
                        for a in by_kind.get("downstream", {}).values()})
    if protocols:
        notes.append(f"Fine-tuning protocol: {', '.join(protocols)} (the same for every row, the source's included).")
    verdicts = verdict_lines(runs_table)
    if verdicts:
        notes.append(f"Against the source, paired by seed ({RULE_TEXT}): " + "; ".join(verdicts) + ".")
    sections["artifacts"] = {name: a.uri for name, a in run.artifacts.items()}
    continuations = {label: record.continuations for label, a in by_kind.get("intrinsic", {}).items()
                     if (record := IntrinsicRecord.of(a)).continuations}
    refined = [_refinement_note(label, a) for label, a in by_kind.get("init", {}).items()]
    candidates, product, source_row = _product(by_kind, downstream_frame, runs_table, run.settings.candidates)
    headline = write_report(run.out, run.settings.language, rows, sections, downstream_frame,
                            stage_times(_timing_rows(run.artifacts)), continuations, downstream_notes=notes,
                            refinement_notes=[note for note in refined if note],
                            product=candidates_markdown(candidates, product, source_row))
    return {**headline, "artifacts": sections["artifacts"], "product": product.name,
            "product_reason": product.reason, "product_measured": product.measured,
            "candidates": [c.to_dict() for c in candidates]}


def _product(by_kind: Mapping[str, Mapping[str, Artifact]], results: pd.DataFrame | None,
             runs: pd.DataFrame | None, names: Sequence[str]) -> tuple[list[Candidate], Product, dict[str, Any]]:
    """Every model the run could ship as a candidate beside the source (``names``, the configured one first; a report
    given none: the models evaluated downstream), and the one the run ships."""
    tasks = list(dict.fromkeys(runs["task"])) if runs is not None and not runs.empty else []
    main = results[results["main"].astype(bool)] if results is not None and "main" in results else None

    def scores(label: str) -> dict[str, str]:
        if main is None:
            return {}
        rows = main[main["model"] == label]
        return {str(r["task"]): score_text(r["mean"], r["std"], r["n_seeds"]) for r in rows.to_dict("records")}

    def facts(label: str) -> IntrinsicRecord:
        intrinsic = by_kind.get("intrinsic", {}).get(label)
        return IntrinsicRecord.of(intrinsic) if intrinsic is not None else IntrinsicRecord()

    def stored(label: str) -> str | None:
        method, after_lapt = read_model_label(label)
        model = by_kind.get("lapt" if after_lapt else "init", {}).get(method)
        return model.uri if model is not None else None

    listed = [name for name in names if stored(name) is not None or name in by_kind.get("downstream", {})]
    listed = listed or [label for label in by_kind.get("downstream", {}) if label != SOURCE]
    candidates = []
    for label in listed:
        measured = facts(label)
        candidate = Candidate(label, measured.n_params, measured.tokens_per_word, _cpu_minutes(label, by_kind),
                              test=scores(label), artifact=stored(label), reads_as_source=_reading(label, by_kind),
                              notes=_budget_notes(label, by_kind), **_bits(measured))
        candidates.append(add_verdicts(candidate, runs, tasks))
    lapt_methods = list(by_kind.get("lapt", {}))
    configured = (listed[0] if listed else _lapt_label(lapt_methods[0], by_kind["lapt"][lapt_methods[0]])
                  if lapt_methods else next(iter(by_kind.get("init", {})), "-"))
    source = facts(SOURCE)
    source_model = by_kind.get("stage", {}).get("source")
    source_row = {"n_params": source.n_params, "tokens_per_word": source.tokens_per_word, "test": scores(SOURCE),
                  "lm_loss": source.lm_loss, **_bits(source),
                  "artifact": source_model.uri if source_model is not None else None}
    for candidate in candidates:
        candidate.bits_verdict = bits_verdict(candidate, source_row)
    # bits per byte decide only between causal LMs: a masked LM's depend on its tokenizer's masking
    decoder = source.lm_loss == "clm" or any(facts(label).lm_loss == "clm" for label in listed)
    return candidates, choose_product(candidates, configured, source.dev_bits_per_byte if decoder else None,
                                      source.ood_dev_bits_per_byte if decoder else None, decoder=decoder), source_row


def _lapt_label(method: str, lapt: Artifact) -> str:
    """The name of the model a stored LAPT run made of ``method`` (its objective's suffix)."""
    return model_label(method, lapt=True, objective=lapt_objective(lapt.params))


def _reading(label: str, by_kind: Mapping[str, Mapping[str, Artifact]]) -> dict[str, float]:
    """Where a candidate whose vocabulary comes from the source's was measured cutting text as the source does: the
    held-out split (its initialization's record) and each task's text (the ``reading`` stage of its vocabulary, which
    its LAPT keeps)."""
    method, _ = read_model_label(label)
    found: dict[str, float] = {}
    init = by_kind.get("init", {}).get(method)
    held_out = ModelRecord.of(init).reads_as_source if init is not None else None
    if held_out and held_out.get("sentences") is not None:
        found["held-out"] = float(held_out["sentences"])
    reading = by_kind.get("reading", {}).get(method)
    for task, agreement in (ReadingRecord.of(reading).tasks if reading is not None else {}).items():
        if agreement.get("sentences") is not None:
            found[task] = float(agreement["sentences"])
    return found


def _budget_notes(label: str, by_kind: Mapping[str, Mapping[str, Artifact]]) -> list[str]:
    """A pruned source that could not keep its parameter budget says so (the corpus's pieces are always kept)."""
    init = by_kind.get("init", {}).get(read_model_label(label)[0])
    record = ModelRecord.of(init) if init is not None else None
    if record is None or record.within_budget is not False:
        return []
    return [f"over its budget of {record.prune_budget:g} of the source's parameters: the pieces its corpus uses "
            "are always kept, and the source's body alone may be more (init.prune_budget)"]


def _bits(record: IntrinsicRecord) -> dict[str, float | None]:
    """A model's bits per byte (held-out, its unigram level, dev, other domain) and a decoder's generation speed."""
    return {name: finite_or_none(getattr(record, name))
            for name in ("bits_per_byte", "unigram_bits_per_byte", "dev_bits_per_byte", "ood_bits_per_byte",
                         "ood_dev_bits_per_byte", "generated_bytes_per_s")}


def _cpu_minutes(label: str, by_kind: Mapping[str, Mapping[str, Artifact]]) -> float | None:
    """The training minutes a candidate cost on the machine that trained it, on a minutes budget's clock (CPU-minutes
    on a CPU): its LAPT and its align refinement as measured (a record from before that clock: a minutes budget's
    plan, else wall time); 0 for a model nothing trained (a pruned source)."""
    method, after_lapt = read_model_label(label)
    minutes = 0.0
    if after_lapt:
        lapt = by_kind.get("lapt", {}).get(method)
        if lapt is None:
            return None
        record = LaptRecord.of(lapt)
        minutes += float(record.work_seconds) / 60 if record.work_seconds is not None else \
            record.planned_minutes or float(record.train_seconds_this_session or 0) / 60
    init = by_kind.get("init", {}).get(method)
    align = ModelRecord.of(init).align if init is not None else None
    if align is not None:
        minutes += float(align.work_seconds if align.work_seconds is not None else align.train_seconds or 0) / 60
    return round(minutes, 2)


_LAPT_SUMMARY = ("steps", "tokens", "initial_heldout_loss", "final_heldout_loss", "final_train_loss", "tokens_per_s",
                 "mfu", "precision", "device", "world_size", "resumed_from", "trainable_parameters",
                 "train_seconds_this_session", "work_seconds")


def _lapt_summary(lapt: Artifact) -> dict[str, Any]:
    """What the report shows of a LAPT run; a minutes budget adds its plan (minutes, seconds per step)."""
    record = LaptRecord.of(lapt)
    summary = {k: v for k, v in record.shown().items() if k in _LAPT_SUMMARY}  # in the order the run wrote them
    if record.budget is not None:
        summary["budget_minutes"] = record.budget.minutes
    return summary


def _refinement_note(label: str, model: Artifact) -> str | None:
    """Which state a refinement kept and why (align keeps its best by the language model's dev loss, its start
    included); None for a model that was not refined, or refined before the choice was recorded."""
    align = ModelRecord.of(model).align
    selection = align.selection if align is not None else None
    if not selection:
        return None
    steps = align.steps
    kept = "its start (the rows as the initialization left them)" if selection["kept_step"] == 0 else \
        f"step {selection['kept_step']} of {steps}"
    return f"**{label}** kept {kept} by its {selection['measure']}: {selection['why']}."


def _downstream_note(label: str, lapt: Artifact) -> str:
    """The LAPT behind a ``+lapt`` row: its budget, steps and tokens, so a score is read with its cost."""
    record = LaptRecord.of(lapt)
    planned = f"{record.planned_minutes:g} minutes planned on this machine, " if record.planned_minutes else ""
    if record.work_seconds is not None:  # every session's, on the budget's clock
        on_cpu = str(record.device or "cpu").startswith("cpu")
        spent = f"; {record.work_seconds / 60:.1f} {'CPU-' if on_cpu else ''}minutes of training measured"
    else:  # a record from before that clock: this session's wall time
        trained = record.train_seconds_this_session
        spent = f"; {trained / 60:.1f} minutes of training measured" if trained is not None else ""
    return (f"{_lapt_label(label, lapt)}: {planned}{record.steps if record.steps is not None else '?'} steps, "
            f"{int(record.tokens or 0):,} tokens seen{spent}.")


class ReportSettings(StageSettings):
    language: str
    candidates: list[str] = []  # the models the run could ship (``RunPlan.shippable``), the configured first

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, *, trained: bool = True, **variant: Any) -> Self:
        """``trained=False``: the report of a graph that runs no LAPT (``compare``): its methods are its candidates."""
        return cls(language=cfg.language, candidates=RunPlan.from_config(cfg).shippable(trained=trained))


DOWNSTREAM = register(Stage(DOWNSTREAM_STAGE, DOWNSTREAM_VERSION, ("model",), _downstream,
                            "fine-tune and test on NER/NLI/QA/classification tasks over seeds",
                            key_params=_downstream_key, uses_model=True, settings=DownstreamStageSettings,
                            hints=RunHints(timeout_s=48 * 3600, gpu=True), record=DownstreamRecord))
REPORT = register(Stage(REPORT_STAGE, REPORT_VERSION, None, _report,
                        "the run report: method comparison, chart, downstream table", settings=ReportSettings,
                        record=ReportRecord))
