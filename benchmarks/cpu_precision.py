"""fp32 vs bf16 autocast on this CPU, through the code users run: a LAPT step (``run_lapt``), a fine-tuning step
(``finetune`` on WikiANN Swahili NER) and an evaluation pass (``evaluate_mlm``), in one run.

The model is e5-small-sized (BertForMaskedLM: 12 layers, hidden 384, 12 heads, intermediate 1536) with a WordPiece
vocabulary trained on ``../shared/data/text/sw.txt`` (~11k tokens), randomly initialized. Both precisions run the
same LAPT steps on the same data; the held-out loss after them tells whether bf16 changes training. The first LAPT
step of each run is not timed. Prints the settings and the CPU's bf16 capability (what ``precision: auto`` would
choose), then the last line JSON:
``{"lapt_ratio": …, "finetune_ratio": …, "eval_ratio": …, "loss_fp32": …, "loss_bf16": …}``
(ratios are bf16 tokens/s over fp32 tokens/s).
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import tempfile
import time
from pathlib import Path

import torch
from _preamble import SHARED

E5_SMALL = dict(hidden_size=384, num_hidden_layers=12, num_attention_heads=12, intermediate_size=1536)
NER_TASK = "ner:" + str(SHARED / "ner" / "wikiann" / "swa")


def build_model(folder: Path, vocab_size: int, layers: int) -> Path:
    """An e5-small-shaped BertForMaskedLM with a WordPiece tokenizer of ``vocab_size`` trained on Swahili text;
    writes ``model/``, ``train.jsonl`` and ``heldout.jsonl`` into ``folder``."""
    from transformers import BertConfig, BertForMaskedLM

    from focusflow.corpus.io import write_texts
    from tests.tiny_models import train_tokenizer

    lines = [line.strip() for line in (SHARED / "text" / "sw.txt").read_text(encoding="utf-8").splitlines()
             if len(line.split()) >= 5]
    tokenizer = train_tokenizer("bert", lines[:20_000], vocab_size=vocab_size)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), max_position_embeddings=512, pad_token_id=tokenizer.pad_token_id,
                        **E5_SMALL | {"num_hidden_layers": layers})
    config.architectures = ["BertForMaskedLM"]
    BertForMaskedLM(config).save_pretrained(folder / "model")
    tokenizer.save_pretrained(folder / "model")
    write_texts(folder / "train.jsonl", lines[:20_000])
    write_texts(folder / "heldout.jsonl", lines[-2_000:])
    return folder / "model"


def lapt(folder: Path, precision: str, args) -> tuple[float, float]:
    """(tokens/s of the timed steps, held-out loss after all steps) of ``run_lapt``."""
    from focusflow.config import LaptSpec
    from focusflow.training import run_lapt

    spec = LaptSpec(objective="mlm", steps=1 + args.lapt_steps, batch_size=args.batch_size, micro_batch_size=args.batch_size,
                    seq_len=args.seq_len, lr=args.lr, warmup_fraction=0.0, precision=precision, log_every=1,
                    eval_every=10 ** 6, checkpoint_every=10 ** 6, eval_sequences=args.eval_sequences)
    out = folder / f"lapt-{precision}"
    summary = run_lapt(folder / "model", folder / "train.jsonl", folder / "heldout.jsonl", spec, out)
    assert summary["precision"] == {"bf16": "bfloat16", "fp32": "float32"}[precision], summary["precision"]
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    timed = float(rows[-1]["elapsed_s"]) - float(rows[1]["elapsed_s"])  # rows[0]: step 0; rows[1]: the first step
    return args.lapt_steps * args.batch_size * args.seq_len / timed, summary["final_heldout_loss"]


def ner_setup(model_dir: Path, train_samples: int, seed: int = 1):
    """(task model, adapter, tokenizer) for WikiANN Swahili, the way ``evaluate_task`` builds them."""
    from focusflow.config import DownstreamSettings
    from focusflow.evaluation.downstream.kinds import task_kind
    from focusflow.evaluation.downstream.runner import (
        load_task_model,
        load_task_tokenizer,
        make_adapter,
        prepare_data,
        task_defaults,
    )
    from focusflow.evaluation.downstream.sources import parse_task

    spec = parse_task(NER_TASK)
    data = prepare_data(spec, DownstreamSettings(max_train_samples=train_samples, max_eval_samples=16,
                                                 max_test_samples=16))
    tokenizer = load_task_tokenizer(model_dir)
    torch.manual_seed(seed)
    network = load_task_model(model_dir, "ner", tokenizer, **task_kind("ner").model_kwargs(data.labels))
    adapter = make_adapter(data, tokenizer, network.config, task_defaults(spec))
    return network, adapter, tokenizer


def finetune_speed(folder: Path, precision: str, args) -> float:
    """Training tokens/s of ``finetune`` (dev evaluation excluded, as it reports them)."""
    from focusflow.evaluation.downstream.finetune import FinetuneSpec, finetune

    network, adapter, tokenizer = ner_setup(folder / "model", args.finetune_steps * args.batch_size)
    spec = FinetuneSpec(lr=5e-5, epochs=1.0, batch_size=args.batch_size, eval_every_fraction=1.0, seed=1,
                        precision=precision)
    result = finetune(network, adapter.train_features(), lambda: 0.0, spec, tokenizer.pad_token_id)
    assert result.precision == {"bf16": "bfloat16", "fp32": "float32"}[precision]
    return result.tokens_per_second


def eval_speed(folder: Path, precision: str, args) -> float:
    """Tokens/s of an intrinsic ``evaluate_mlm`` pass over held-out sentences."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from focusflow.corpus.io import read_texts
    from focusflow.evaluation.intrinsic import encode_texts, evaluate_mlm

    model = AutoModelForMaskedLM.from_pretrained(folder / "model")
    tokenizer = AutoTokenizer.from_pretrained(folder / "model")
    texts = list(read_texts(folder / "heldout.jsonl"))[:args.eval_texts]
    tokens = sum(len(ids) for ids in encode_texts(tokenizer, texts, max_length=args.seq_len).ids)
    started = time.perf_counter()
    evaluate_mlm(model, tokenizer, texts, max_length=args.seq_len, precision=precision)
    return tokens / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: steady on a shared machine)")
    parser.add_argument("--vocab-size", type=int, default=11_000)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--lr", type=float, default=5e-4, help="LAPT learning rate (high enough to move the loss)")
    parser.add_argument("--lapt-steps", type=int, default=2, help="timed LAPT steps (one more runs untimed)")
    parser.add_argument("--eval-sequences", type=int, default=16, help="held-out sequences of the LAPT loss")
    parser.add_argument("--finetune-steps", type=int, default=4)
    parser.add_argument("--eval-texts", type=int, default=64)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(args.threads)

    from focusflow.precision import cpu_has_native_bf16, resolve_precision

    began = time.perf_counter()
    measured: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="cpu-precision-") as tmp:
        folder = Path(tmp)
        build_model(folder, args.vocab_size, args.layers)
        for precision in ("fp32", "bf16"):
            lapt_tok_s, loss = lapt(folder, precision, args)
            measured[precision] = {"lapt_tok_s": lapt_tok_s, "heldout_loss": loss,
                                   "finetune_tok_s": finetune_speed(folder, precision, args),
                                   "eval_tok_s": eval_speed(folder, precision, args)}
    fp32, bf16 = measured["fp32"], measured["bf16"]
    print(json.dumps({"cpu": torch.cpu.get_capabilities().get("cpu_name"), "native_bf16": cpu_has_native_bf16(),
                      "auto_chooses": resolve_precision("auto", "cpu").name, "threads": args.threads,
                      "batch_size": args.batch_size, "seq_len": args.seq_len, "lapt_steps": args.lapt_steps,
                      "vocab_size": args.vocab_size, "layers": args.layers,
                      "tok_s": {p: {k: round(v, 4 if k == "heldout_loss" else 1) for k, v in m.items()}
                                for p, m in measured.items()},
                      "seconds": round(time.perf_counter() - began, 1)}))
    print(json.dumps({"lapt_ratio": round(bf16["lapt_tok_s"] / fp32["lapt_tok_s"], 3),
                      "finetune_ratio": round(bf16["finetune_tok_s"] / fp32["finetune_tok_s"], 3),
                      "eval_ratio": round(bf16["eval_tok_s"] / fp32["eval_tok_s"], 3),
                      "loss_fp32": round(fp32["heldout_loss"], 4), "loss_bf16": round(bf16["heldout_loss"], 4)}))


if __name__ == "__main__":
    main()
