"""LAPT throughput: focusflow's trainer vs Hugging Face ``Trainer`` on the same encoder, in one run.

Both train the same randomly initialized XLM-R-architecture MLM for the same number of optimizer
steps on the same packed sequences with the same batch (micro batch × accumulation), sequence
length, precision, SDPA attention, fused AdamW, 15% masking and clipping; the first
``--warmup-steps`` steps of each are excluded from the timing. Prints one JSON line last:
``{"ours_tok_s": …, "hf_trainer_tok_s": …, "ratio": …}`` (plus the settings and, on CUDA, MFU).

CPU (default): an e5-small-shaped encoder (12 layers, d=384, the offline source model of this
project) with a 50k vocabulary (focusflow's default target tokenizer size), seq 128, fp32.
``--preset base`` on a CUDA device: XLM-R-base-sized (12 layers, d=768, 250,002 vocabulary),
seq 256, bf16 — reports tokens/s and model FLOPs utilization (peak from the device name, or
``FOCUSFLOW_PEAK_TFLOPS``). Token ids come from a small tokenizer trained on pseudo-text; the
model's vocabulary is sized by the preset, so the projection costs what a real vocabulary costs.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import _preamble  # noqa: F401  (this checkout's focusflow first)
import torch

PRESETS = {
    "small": dict(hidden_size=384, num_hidden_layers=12, num_attention_heads=12, intermediate_size=1536,
                  vocab_size=50_000, seq_len=128),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                 vocab_size=250_002, seq_len=256),
}


def build_model(folder: Path, preset: str, layers: int | None = None) -> Path:
    from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM

    from focusflow.corpus.io import write_texts
    from tests.tiny_models import sample_texts, train_tokenizer

    texts = sample_texts(6000, seed=11)
    tokenizer = train_tokenizer("xlmr", texts, vocab_size=2000)
    shape = {k: v for k, v in PRESETS[preset].items() if k != "seq_len"}
    shape["num_hidden_layers"] = layers or shape["num_hidden_layers"]
    torch.manual_seed(0)
    config = XLMRobertaConfig(max_position_embeddings=514, pad_token_id=tokenizer.pad_token_id,
                              bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, **shape)
    XLMRobertaForMaskedLM(config).save_pretrained(folder / "model")
    tokenizer.save_pretrained(folder / "model")
    write_texts(folder / "train.jsonl", texts[:5500])
    write_texts(folder / "heldout.jsonl", texts[5500:])
    return folder / "model"


def run_ours(folder: Path, args, precision: str, name: str = "ours") -> dict:
    from focusflow.config import LaptSpec
    from focusflow.training import run_lapt

    steps = args.warmup_steps + args.steps
    spec = LaptSpec(objective="mlm", steps=steps, batch_size=args.batch_size, micro_batch_size=args.micro_batch_size,
                    seq_len=args.seq_len, precision=precision, compile=args.compile, log_every=1,
                    eval_every=10 ** 6, checkpoint_every=10 ** 6, eval_sequences=args.micro_batch_size)
    summary = run_lapt(folder / "model", folder / "train.jsonl", folder / "heldout.jsonl", spec, folder / name)
    rows = [r for r in csv.DictReader((folder / name / "metrics.csv").open()) if r["elapsed_s"]]
    start = float(rows[args.warmup_steps - 1]["elapsed_s"]) if args.warmup_steps else 0.0
    seconds = float(rows[-1]["elapsed_s"]) - start
    tokens_per_s = args.steps * args.batch_size * args.seq_len / seconds
    return {"tok_s": tokens_per_s, "flops_per_token": summary["flops_per_token"], "device": summary["device"]}


def run_hf_trainer(folder: Path, args, precision: str) -> float:
    from datasets import Dataset
    from transformers import (
        AutoModelForMaskedLM,
        AutoTokenizer,
        DataCollatorForLanguageModeling,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    from focusflow.training.data import PackedSequences

    tokenizer = AutoTokenizer.from_pretrained(folder / "model")
    packed = PackedSequences(folder / "ours-0" / "data" / "train_ids.npy", args.seq_len)
    needed = (args.warmup_steps + args.steps) * args.batch_size
    blocks = packed.blocks(torch.arange(needed).remainder(len(packed)).numpy())
    dataset = Dataset.from_dict({"input_ids": blocks.tolist()})
    model = AutoModelForMaskedLM.from_pretrained(folder / "model", dtype=torch.float32, attn_implementation="sdpa")
    stamps: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, *_, **__):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            stamps.append(time.perf_counter())

    world_micro = args.micro_batch_size
    training_args = TrainingArguments(
        output_dir=str(folder / "hf"), seed=0, max_steps=args.warmup_steps + args.steps,
        per_device_train_batch_size=world_micro, gradient_accumulation_steps=args.batch_size // world_micro,
        learning_rate=5e-5, adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8, weight_decay=0.0,
        warmup_steps=0.1, lr_scheduler_type="constant_with_warmup", max_grad_norm=1.0,
        optim="adamw_torch_fused", bf16=precision == "bf16", fp16=precision == "fp16",
        use_cpu=not torch.cuda.is_available(), save_strategy="no", logging_strategy="no", report_to="none",
        disable_tqdm=True, dataloader_num_workers=0, torch_compile=args.compile)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm=True, mlm_probability=0.15)
    trainer = Trainer(model=model, args=training_args, train_dataset=dataset, data_collator=collator,
                      callbacks=[Clock()])
    trainer.train()
    seconds = stamps[-1] - stamps[args.warmup_steps - 1] if args.warmup_steps else stamps[-1] - stamps[0]
    measured = args.steps if args.warmup_steps else args.steps - 1
    return measured * args.batch_size * args.seq_len / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cuda = torch.cuda.is_available()
    parser.add_argument("--preset", choices=sorted(PRESETS), default="base" if cuda else "small")
    parser.add_argument("--steps", type=int, default=20 if cuda else 3, help="timed optimizer steps")
    parser.add_argument("--warmup-steps", type=int, default=3 if cuda else 1, help="untimed first steps")
    parser.add_argument("--repeats", type=int, default=1 if cuda else 2,
                        help="alternate ours/HF this many times and keep each one's best (a shared CPU's load varies)")
    parser.add_argument("--layers", type=int, default=None, help="override the preset's layer count")
    parser.add_argument("--batch-size", type=int, default=128 if cuda else 8, help="sequences per optimizer step")
    parser.add_argument("--micro-batch-size", type=int, default=32 if cuda else 4)
    parser.add_argument("--seq-len", type=int, default=None)
    parser.add_argument("--precision", choices=["auto", "bf16", "fp16", "fp32"], default="auto")
    parser.add_argument("--compile", action="store_true", help="torch.compile in both trainers")
    parser.add_argument("--skip-hf", action="store_true", help="only our trainer (tokens/s and MFU)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout (an earlier main): run its copy of this benchmark alternately with "
                             "this one, same arguments, and print the ratio (benchmarks/baseline.py)")
    parser.add_argument("--alternate", type=int, default=2, help="with --baseline: runs of each side")
    args = parser.parse_args()
    if args.baseline is not None:
        from baseline import compare_with_baseline, strip_baseline_arguments

        print(json.dumps(compare_with_baseline("lapt_throughput.py", strip_baseline_arguments(sys.argv[1:]),
                                               args.baseline, args.alternate, "ours_tok_s")))
        return
    args.seq_len = args.seq_len or PRESETS[args.preset]["seq_len"]
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    from transformers import AutoConfig, AutoModelForMaskedLM

    from focusflow.precision import resolve_precision
    from focusflow.training.flops import flops_per_token, mfu, peak_flops

    precision = resolve_precision(args.precision, "cuda" if cuda else "cpu").setting

    with tempfile.TemporaryDirectory(prefix="lapt-bench-") as tmp:
        folder = Path(tmp)
        build_model(folder, args.preset, args.layers)
        with torch.device("meta"):  # structure only, for the FLOP count of the full-projection (HF) step
            meta_model = AutoModelForMaskedLM.from_config(AutoConfig.from_pretrained(folder / "model"))
        full_flops = flops_per_token(meta_model, args.seq_len, "mlm", masked_only=False)
        ours_runs, hf_runs = [], []
        for repeat in range(args.repeats):
            ours_runs.append(run_ours(folder, args, precision, f"ours-{repeat}"))
            if not args.skip_hf:
                hf_runs.append(run_hf_trainer(folder, args, precision))
        ours = max(ours_runs, key=lambda r: r["tok_s"])
        hf = max(hf_runs) if hf_runs else None
    device = torch.device("cuda" if cuda else "cpu")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    try:
        peak = peak_flops(device, dtype)
    except TypeError:  # an older focusflow on the path (a --baseline side): the device's peak alone
        peak = peak_flops(device)
    result = {
        "preset": args.preset, "device": torch.cuda.get_device_name() if cuda else "cpu",
        "threads": torch.get_num_threads(), "precision": precision, "seq_len": args.seq_len,
        "batch_size": args.batch_size, "micro_batch_size": args.micro_batch_size, "timed_steps": args.steps,
        "layers": args.layers or PRESETS[args.preset]["num_hidden_layers"],
        "ours_runs_tok_s": [round(r["tok_s"], 1) for r in ours_runs], "hf_runs_tok_s": [round(r, 1) for r in hf_runs],
        "flops_per_token": ours["flops_per_token"], "peak_flops": peak,
    }
    print(json.dumps(result))
    final = {"ours_tok_s": round(ours["tok_s"], 1), "hf_trainer_tok_s": None if hf is None else round(hf, 1),
             "ratio": None if hf is None else round(ours["tok_s"] / hf, 3)}
    final["ours_mfu"] = mfu(ours["tok_s"], ours["flops_per_token"], peak)  # a CPU's calibrated ceiling too
    final["hf_trainer_mfu"] = None if hf is None else mfu(hf, full_flops, peak)
    print(json.dumps(final))


if __name__ == "__main__":
    main()
