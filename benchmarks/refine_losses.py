"""The align refinement's losses side by side on one run configuration: which one a decoder should default to.

    python benchmarks/refine_losses.py --config run.yaml --base fvt --losses mse,layers,kl --steps 24
    python benchmarks/refine_losses.py --config run.yaml --base focus --losses mse,kl --steps 24 --store /tmp/s

Each loss is one `focusflow compare` of `<base>` and `<base>+align` (the same store: the corpus, tokenizer, base
initialization and references are built once), with the same step budget; the table gives, beside the source and
the base, each refinement's held-out, dev and other-domain bits per byte, its alignment loss at the start and the end,
the step keep-best kept and its tokens per second. A refinement never ends above its start on its dev slice
(keep-best); the held-out column says whether that holds on text it did not select on. Last line: JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from _preamble import ROOT  # noqa: F401  (this checkout's focusflow first)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, required=True, help="the run configuration (language, source, corpus)")
    parser.add_argument("--base", default="fvt", help="the initialization refined")
    parser.add_argument("--losses", default="mse,layers,kl", help="comma-separated init.refine.loss values")
    parser.add_argument("--steps", type=int, default=24, help="optimizer steps of every refinement")
    parser.add_argument("--set", action="append", default=[], help="more overrides, as focusflow's --set")
    parser.add_argument("--store", default=None, help="artifact store (default: the configuration's)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from focusflow.config import load_config
    from focusflow.evaluation.records import IntrinsicRecord, ReportRecord
    from focusflow.methods import model_label
    from focusflow.pipeline.graph import compare_locally
    from focusflow.storage import ArtifactStore
    from focusflow.training.records import ModelRecord

    refined = model_label(args.base, ("align",))
    rows, summary = [], {}
    for loss in args.losses.split(","):
        cfg = load_config(args.config, [f"init.methods=[{args.base},{refined}]", "init.candidates=[]",
                                        f"init.refine.loss={loss}", f"init.refine.steps={args.steps}", *args.set])
        store = ArtifactStore(args.store or cfg.store)
        started = time.perf_counter()
        report, _ = compare_locally(cfg, store)
        artifacts = ReportRecord.of(report).artifacts

        def measured(label: str) -> IntrinsicRecord:
            return IntrinsicRecord.of(store.resolve(artifacts[f"intrinsic:{label}"]))  # noqa: B023

        if not rows:  # the source and the base are the same in every comparison
            for label, name in (("original", "source"), (args.base, args.base)):
                rows.append((name, measured(label), None))
        align = ModelRecord.of(store.resolve(artifacts[f"init:{refined}"])).align
        rows.append((f"{refined} (loss {loss})", measured(refined), align))
        summary[loss] = {"bits_per_byte": measured(refined).bits_per_byte,
                         "seconds": round(time.perf_counter() - started, 1)}

    base_bpb = rows[1][1].bits_per_byte
    print("| model | held-out bits/byte | vs base | dev | other domain | align loss start → end | kept step | "
          "steps | tokens/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, record, align in rows:
        selection = (align.selection or {}) if align is not None else {}
        cells = [name, f"{record.bits_per_byte:.3f}", f"{record.bits_per_byte - base_bpb:+.3f}",
                 f"{record.dev_bits_per_byte:.3f}" if record.dev_bits_per_byte is not None else "",
                 f"{record.ood_bits_per_byte:.3f}" if record.ood_bits_per_byte is not None else "",
                 f"{align.initial_heldout_loss:.4g} → {align.final_heldout_loss:.4g}" if align is not None else "",
                 str(selection.get("kept_step", "")), str(align.steps) if align is not None else "",
                 f"{align.tokens_per_s:.0f}" if align is not None and align.tokens_per_s else ""]
        print("| " + " | ".join(cells) + " |")
    print(json.dumps({"base": args.base, "base_bits_per_byte": base_bpb, "steps": args.steps, **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
