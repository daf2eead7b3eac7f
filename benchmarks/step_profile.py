"""Where one training step's time goes on this machine: LAPT (MLM on an e5-small-shaped encoder, CLM on a Gemma 3
270M-shaped decoder) and downstream fine-tuning (a SIB-200-sized classification batch), under ``torch.profiler``.

Each row runs focusflow's own code path: ``TrainingRun``'s optimizer step of a ``LaptRecipe`` (micro-batches from
its loader, autocast, backward, clipping, fused AdamW) and ``finetune``'s step (``training.fit``). One warm-up step,
then ``--steps`` profiled steps. Operator self-times are grouped: matmuls (mm, addmm, bmm, linear), attention (SDPA and its
kernels, softmax), the embedding and its backward, the LM/classifier head's projection is a matmul too, element-wise
(norms, activations, dropout, adds, masks), casts and copies, the optimizer (AdamW, clipping, zeroing), and
"Python and the rest": the wall time no operator accounts for (the loop, the loader's wait, collation, autograd's
bookkeeping). Prints a Markdown table per row and one JSON line with every row's shares and tokens/s.

The models are random (the time of a step does not depend on the weights' values): e5-small's shape (BERT-like,
12 layers, d=384) with a 50,000-token vocabulary (a LAPT of a new tokenizer) and with 250,002 (fine-tuning the
source itself); Gemma 3 270M's (18 layers, d=640) with a 12,000-token vocabulary.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import _preamble  # noqa: F401  (this checkout's focusflow first)
import torch

CATEGORIES = (  # first match wins: (category, substrings of the operator's name)
    ("optimizer", ("adam", "clip_grad", "_foreach", "zero_", "fused_adamw", "optimizer")),
    ("attention", ("scaled_dot_product", "_flash_attention", "_efficient_attention", "softmax", "attention")),
    ("embedding", ("embedding",)),
    ("matmul", ("aten::mm", "aten::addmm", "aten::bmm", "aten::linear", "aten::matmul", "aten::baddbmm",
                "mkldnn_", "aten::_addmm")),
    ("casts and copies", ("aten::to", "aten::_to_copy", "aten::copy_", "aten::clone", "aten::contiguous")),
    ("element-wise", ("aten::",)),
)


def category(name: str) -> str:
    lowered = name.lower()
    if not lowered.startswith("aten::") and not any(tag in lowered for tag in ("adam", "optimizer")):
        return "autograd and framework"  # the autograd engine's nodes, record_function ranges: their own time
    for label, needles in CATEGORIES:
        if any(needle.lower() in lowered for needle in needles):
            return label
    return "other operators"


def grouped(prof, wall: float) -> dict[str, float]:
    """Self CPU seconds per category (every operator's own time, children excluded, so nothing counts twice);
    the wall time no operator accounts for is "Python and the rest"."""
    seconds: dict[str, float] = defaultdict(float)
    for event in prof.key_averages():
        if event.self_cpu_time_total > 0:
            seconds[category(event.key)] += event.self_cpu_time_total / 1e6
    # the loader's thread works while the main thread waits: its time can overlap the wall's
    seconds["Python and the rest"] = max(0.0, wall - sum(seconds.values()))
    return dict(seconds)


def profile(step, steps: int) -> tuple[dict[str, float], float]:
    """Self CPU seconds per category over ``steps`` calls of ``step`` (after one warm-up), and the wall seconds."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    step()
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        started = time.perf_counter()
        for _ in range(steps):
            step()
        wall = time.perf_counter() - started
    return grouped(prof, wall), wall


def lapt_row(kind: str, folder: Path, args) -> dict:
    from focusflow.config import LaptSpec
    from focusflow.training.lapt import LaptRecipe
    from focusflow.training.loop import TrainingRun

    model = build_lapt_model(kind, folder)
    spec = LaptSpec(objective="mlm", steps=10 ** 6, batch_size=args.batch_size, micro_batch_size=args.micro_batch_size,
                    seq_len=args.seq_len, precision=args.precision, compile=args.compile, log_every=10 ** 6,
                    eval_every=10 ** 6, checkpoint_every=10 ** 6, eval_sequences=args.micro_batch_size)
    recipe = LaptRecipe(model, folder / "train.jsonl", folder / "heldout.jsonl", spec, folder / f"run-{kind}",
                        progress=False)
    run = TrainingRun(recipe, resume=False)
    batches = run.step_batches(0)
    seconds, wall = profile(lambda: run.step(0, next(batches)), args.steps)
    batches.close()
    tokens = args.steps * args.batch_size * args.seq_len
    return {"row": f"LAPT {kind}", "precision": run.precision.name, "tokens_per_s": round(tokens / wall, 1),
            "seconds_per_step": round(wall / args.steps, 3), "mfu": _mfu(tokens / wall, run.trainable.flops_per_token,
                                                                         run.peak_flops), "seconds": seconds}


def _mfu(speed: float, flops: float | None, peak: float | None) -> float | None:
    return round(speed * flops / peak, 4) if flops and peak else None


def build_lapt_model(kind: str, folder: Path) -> Path:
    """A random model of the row's shape with a small tokenizer trained on pseudo-text (ids within its vocabulary)."""
    from focusflow.corpus.io import write_texts
    from tests.tiny_models import sample_texts, train_tokenizer

    texts = sample_texts(6000, seed=11)
    write_texts(folder / "train.jsonl", texts[:5500])
    write_texts(folder / "heldout.jsonl", texts[5500:])
    out = folder / f"model-{kind}"
    torch.manual_seed(0)
    if kind == "mlm":
        from transformers import BertConfig, BertForMaskedLM

        tokenizer = train_tokenizer("bert", texts, vocab_size=2000)
        config = BertConfig(vocab_size=50_000, hidden_size=384, num_hidden_layers=12, num_attention_heads=12,
                            intermediate_size=1536, max_position_embeddings=512,
                            pad_token_id=tokenizer.pad_token_id)
        BertForMaskedLM(config).save_pretrained(out)
    else:
        from transformers import Gemma3ForCausalLM, Gemma3TextConfig

        tokenizer = train_tokenizer("llama", texts, vocab_size=2000)
        config = Gemma3TextConfig(vocab_size=12_000, hidden_size=640, num_hidden_layers=18, num_attention_heads=4,
                                  num_key_value_heads=1, head_dim=256, intermediate_size=2048,
                                  max_position_embeddings=32_768, sliding_window=512,
                                  pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                                  eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=True)
        Gemma3ForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def finetune_row(vocab: int, args) -> dict:
    """One ``finetune`` step of an e5-small-shaped classifier on SIB-200-sized inputs (7 topics)."""
    import numpy as np
    from transformers import BertConfig, BertForSequenceClassification

    from focusflow.evaluation.downstream.finetune import FinetuneSpec, finetune
    from focusflow.training.flops import body_flops_per_token, peak_flops

    torch.manual_seed(0)
    config = BertConfig(vocab_size=vocab, hidden_size=384, num_hidden_layers=12, num_attention_heads=12,
                        intermediate_size=1536, max_position_embeddings=512, num_labels=7)
    model = BertForSequenceClassification(config)
    rng = np.random.default_rng(0)
    batches = args.steps + 1
    features = [{"input_ids": rng.integers(5, vocab, size=int(rng.integers(30, 70))).tolist(),
                 "labels": int(rng.integers(0, 7))} for _ in range(batches * args.finetune_batch)]
    spec = FinetuneSpec(lr=5e-5, epochs=1.0, batch_size=args.finetune_batch, eval_every_fraction=1.0, seed=1,
                        precision=args.precision)
    # the whole epoch is profiled: its first step is the warm-up, subtracted below by the step count
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        started = time.perf_counter()
        result = finetune(model, features, lambda: 0.0, spec, pad_id=0)
        wall = time.perf_counter() - started
    seconds = grouped(prof, wall)
    speed = result.tokens_per_second
    return {"row": f"fine-tuning, {vocab:,}-token vocabulary", "precision": result.precision,
            "tokens_per_s": round(speed, 1), "seconds_per_step": round(wall / batches, 3),
            "mfu": _mfu(speed, body_flops_per_token(model, float(np.mean([len(f["input_ids"]) for f in features]))),
                        peak_flops("cpu", None if result.precision == "float32" else torch.bfloat16)),
            "seconds": seconds}


def table(row: dict) -> str:
    total = sum(row["seconds"].values())
    lines = [f"### {row['row']} ({row['precision']}): {row['tokens_per_s']} tokens/s, {row['seconds_per_step']} s a "
             f"step, MFU {row['mfu']}", "", "| where | seconds | share |", "| --- | --- | --- |"]
    for name, value in sorted(row["seconds"].items(), key=lambda item: -item[1]):
        lines.append(f"| {name} | {value:.3f} | {value / total:.1%} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="mlm,clm,finetune-source,finetune-target",
                        help="which steps to profile (comma-separated)")
    parser.add_argument("--steps", type=int, default=2, help="profiled steps per row (after one warm-up)")
    parser.add_argument("--batch-size", type=int, default=32, help="LAPT sequences per step (the CPU recipe's 32)")
    parser.add_argument("--micro-batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--finetune-batch", type=int, default=32)
    parser.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto")
    parser.add_argument("--compile", action="store_true", help="lapt.compile (inductor) for the LAPT rows")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.threads:
        torch.set_num_threads(args.threads)
    from focusflow.training.lapt_budget import machine_fingerprint

    rows = []
    with tempfile.TemporaryDirectory(prefix="step-profile-") as tmp:
        for name in args.rows.split(","):
            if name in ("mlm", "clm"):
                rows.append(lapt_row(name, Path(tmp), args))
            elif name.startswith("finetune"):
                rows.append(finetune_row(250_002 if name.endswith("source") else 50_000, args))
            print(table(rows[-1]) + "\n", flush=True)
    machine = machine_fingerprint()
    capabilities = torch.cpu.get_capabilities() if hasattr(torch.cpu, "get_capabilities") else {}
    print(json.dumps({"machine": machine, "cpu_capability": capabilities.get("cpu_capability"),
                      "load": os.getloadavg()[0], "rows": rows}))


if __name__ == "__main__":
    main()
