"""Source vs FOCUS vs FOCUS+align on SIB-200 topic classification, with the CPU protocol of
``downstream_protocol.SIB200_PROTOCOL``, seeds 1..N: do the methods separate beyond the seed spread?

    python benchmarks/sib200_methods.py --store /work/models/sw/store --language sw --seeds 3
    python benchmarks/sib200_methods.py --models source=DIR,focus=DIR --language hau_Latn --seeds 2,3

With ``--store``, the models come from the newest run report of the language in that store (its
``metadata["artifacts"]``: ``stage:source``, ``init:focus``, ``init:focus+align``, as align_quality.py
writes them); ``--report URI`` picks one. The fine-tuning runs are saved under ``--out`` (default
/tmp/focusflow-sib200-<language>), so an interrupted comparison resumes and ``--seeds 2,3`` in a
second process splits it.

Prints one row per run (seconds included), the mean ± std table, and for each pair of models whether
their means are further apart than the sum of their seed standard deviations (``separated``); last line:
JSON {language, task, protocol, seeds, models: {name: {mean, std, runs, seconds_per_run}}, pairs, load}.

The protocol (3 epochs over the 701 training sentences in batches of 16 = 132 steps, lr 1e-4, 64
sub-tokens, dev every 20%, whole test set) was chosen with e5-small on a shared 2-core machine; the
measurement behind it is in benchmarks/RESULTS-sib200.md. It is the library's ``cpu`` preset, which since
RESULTS-finetune-recipe.md also trains the input embeddings at 10x the learning rate (every model gained);
``--embedding-lr-scale 1`` gives the protocol of RESULTS-sib200.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import sys
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

STORE_MODELS = {"source": "stage:source", "focus": "init:focus", "focus+align": "init:focus+align"}


def models_from_store(store_path: str, language: str, report_uri: str | None) -> dict[str, Path]:
    """The source, FOCUS and FOCUS+align model folders of the language's newest (or the given) run report."""
    from focusflow.evaluation.records import ReportRecord
    from focusflow.storage import ArtifactStore

    store = ArtifactStore(store_path)
    if report_uri:
        report = store.resolve(report_uri)
    else:
        reports = [a for a in store.list("report") if a.params.get("language") in (language, None)]
        if not reports:
            raise SystemExit(f"error: no run report in {store_path}; pass --report URI or --models")
        report = max(reports, key=lambda a: a.created)
    named = ReportRecord.of(report).artifacts
    missing = [name for name in STORE_MODELS.values() if name not in named]
    if missing:
        raise SystemExit(f"error: report {report.uri} names no {missing}")
    return {label: store.fetch(store.resolve(named[name])) for label, name in STORE_MODELS.items()}


def separation(scores: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every pair: the difference of means and whether it exceeds the sum of the two seed stds (``None`` when a
    model has a single run: one seed says nothing about the spread)."""
    pairs = []
    for a, b in itertools.combinations(scores, 2):
        difference = scores[a]["mean"] - scores[b]["mean"]
        spread = scores[a]["std"] + scores[b]["std"]
        judged = min(len(scores[a]["runs"]), len(scores[b]["runs"])) >= 2
        pairs.append({"pair": f"{a} - {b}", "difference": round(difference, 4), "std_sum": round(spread, 4),
                      "separated": abs(difference) > spread if judged else None})
    return pairs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--language", required=True, help="any code cls:sib200 accepts: sw, hau, sna_Latn, ...")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--store", help="artifact store of a run (align_quality.py or focusflow run)")
    source.add_argument("--models", help="name=DIR,name=DIR")
    parser.add_argument("--report", help="the run report's URI (default: the newest for the language)")
    parser.add_argument("--data-root", type=Path, default=SHARED, help="holds cls/sib200/<code>_<Script>/")
    parser.add_argument("--seeds", default="3", help="N (1..N) or a list (2,3)")
    parser.add_argument("--out", type=Path, default=None)
    add_protocol_arguments(parser, SIB200_PROTOCOL)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    from focusflow.evaluation.downstream.runner import parse_seeds

    if args.store:
        models = models_from_store(args.store, args.language, args.report)
    else:
        models = {name: Path(path) for name, _, path in (item.partition("=") for item in args.models.split(","))}
    task = sib200_task(args.language)
    out = args.out or Path(f"/tmp/focusflow-sib200-{args.language}")
    protocol = protocol_from_args(args)
    load_start = os.getloadavg()[0]
    results = evaluate_protocol(models, [task], out, parse_seeds(args.seeds), args.data_root, protocol)

    import pandas as pd

    runs = pd.read_csv(out / "runs.csv")
    main_metric = results[results["main"]]["metric"].iloc[0]
    for row in runs[runs["metric"] == main_metric].itertuples():
        print(f"{row.model:>12}  seed {row.seed}  {main_metric} {100 * row.value:5.1f}  dev {100 * row.dev:5.1f}  "
              f"best step {row.best_step}/{row.total_steps}  {row.seconds:6.1f} s")
    scores: dict[str, dict[str, Any]] = {}
    for row in results.itertuples():
        if row.metric == main_metric:
            values = runs[(runs["model"] == row.model) & (runs["metric"] == main_metric)]
            scores[row.model] = {"mean": round(row.mean, 4), "std": round(row.std, 4),
                                 "runs": [round(v, 4) for v in values["value"]],
                                 "seconds_per_run": round(row.seconds_per_run, 1)}
    f1 = results[results["metric"] == "macro_f1"].set_index("model")
    print(f"\n{'model':>12}  {main_metric} ×100        macro-F1 ×100     s/run")
    for name, score in scores.items():
        print(f"{name:>12}  {100 * score['mean']:5.1f} ± {100 * score['std']:4.1f}      "
              f"{100 * f1.loc[name, 'mean']:5.1f} ± {100 * f1.loc[name, 'std']:4.1f}     {score['seconds_per_run']:6.1f}")
    pairs = separation(scores)
    for pair in pairs:
        verdict = {True: "separated", False: "within the seed spread", None: "one seed: spread unknown"}
        print(f"{pair['pair']:>24}: Δ {100 * pair['difference']:+5.1f}, std sum {100 * pair['std_sum']:4.1f} → "
              f"{verdict[pair['separated']]}")
    print(json.dumps({"language": args.language, "task": task, "metric": main_metric,
                      "protocol": protocol.model_dump(mode="json", exclude={"seeds", "data_root"}),
                      "seeds": args.seeds, "models": scores, "pairs": pairs,
                      "load": [round(load_start, 2), round(os.getloadavg()[0], 2)]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
