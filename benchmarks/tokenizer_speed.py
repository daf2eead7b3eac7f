"""Tokenizer training and encoding speed: focusflow (sentencepiece trainer → tokenizers Unigram) vs plain HF tokenizers.

Same corpus (default 100 MB of generated pseudo-language text with a Zipf word distribution,
or ``--corpus`` for a corpus JSONL), same vocabulary size (default 50k), same normalizer and
pre-tokenizer (XLM-R's: nmt_nfkc + ``▁`` words). Training time is wall time end to end (focusflow:
normalizing the text, training, conversion, saving; HF: ``train_from_iterator`` over the same
lines). Encoding speed is ``encode_batch`` MB/s over held-out text with each trained tokenizer.

    python benchmarks/tokenizer_speed.py [--mb 100] [--vocab 50000] [--corpus FILE.jsonl]

The last line is JSON: {"ours_train_s", "reference_train_s", "train_speedup", "ours_encode_mb_s",
"reference_encode_mb_s", ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import _preamble  # noqa: F401  (this checkout's focusflow first)
import numpy as np


def generate_corpus(path: Path, target_bytes: int, seed: int = 0) -> int:
    """Documents of pseudo-language sentences (the dedup benchmark's generator, without duplicates)."""
    from dedup_speed import Writer, make_vocabulary

    from focusflow.corpus.io import write_texts

    rng = np.random.default_rng(seed)
    writer = Writer(rng, make_vocabulary(rng, size=400_000, max_syllables=6))  # rich enough for 50k pieces
    size = [0]

    def documents():
        while size[0] < target_bytes:
            text = "\n".join(writer.document(int(rng.integers(3, 30))))
            size[0] += len(text) + 12
            yield text

    write_texts(path, documents())
    return path.stat().st_size


def train_reference(lines_file: Path, vocab_size: int):
    """HF tokenizers' own Unigram trainer with XLM-R's normalizer and pre-tokenizer."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    from focusflow.tokenizer.pipeline import nmt_nfkc_charsmap

    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.Sequence([normalizers.Precompiled(
        __import__("base64").b64decode(nmt_nfkc_charsmap())), normalizers.Replace(" {2,}", " ")])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=vocab_size - 1, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                      unk_token="<unk>", show_progress=False)

    def lines():
        with open(lines_file, encoding="utf-8") as handle:
            for line in handle:
                yield line

    tokenizer.train_from_iterator(lines(), trainer)
    tokenizer.add_special_tokens(["<mask>"])
    tokenizer.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    return tokenizer


def encode_speed(backend, texts: list[str], repeats: int = 3) -> float:
    size = sum(len(t.encode("utf-8")) for t in texts)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        backend.encode_batch(texts)
        best = min(best, time.perf_counter() - started)
    return size / 1e6 / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=100.0)
    parser.add_argument("--vocab", type=int, default=50_000)
    parser.add_argument("--corpus", type=Path, default=None, help="corpus JSONL instead of generated text")
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()

    from focusflow.config import SplitSpec, TokenizerSpec
    from focusflow.corpus import split_corpus
    from focusflow.corpus.io import read_texts
    from focusflow.tokenizer import load_tokenizer, tokenizer_metrics, train_tokenizer
    from focusflow.tokenizer.training import _sentences

    work = args.workdir or Path(tempfile.mkdtemp(prefix="tok-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = args.corpus
    if corpus is None:
        corpus = work / "corpus.jsonl"
        if not corpus.exists():
            generate_corpus(corpus, int(args.mb * 1e6))
    split_corpus(corpus, SplitSpec(heldout_fraction=0.01), work / "split")
    train = work / "split" / "train.jsonl"
    heldout = list(read_texts(work / "split" / "heldout.jsonl"))
    megabytes = train.stat().st_size / 1e6
    print(f"corpus: {megabytes:.1f} MB train, {len(heldout)} held-out documents", flush=True)

    spec = TokenizerSpec(vocab_size=args.vocab, chars_per_vocab_entry=1)
    started = time.perf_counter()
    stats = train_tokenizer(train, spec, work / "ours")
    ours_seconds = time.perf_counter() - started
    ours = load_tokenizer(work / "ours")
    result = {"corpus_mb": round(megabytes, 1), "vocab_size": args.vocab, "ours_train_s": round(ours_seconds, 1),
              "ours_prepare_s": stats["seconds_prepare"], "ours_sentencepiece_s": stats["seconds_train"],
              "ours_encode_mb_s": round(encode_speed(ours.backend_tokenizer, heldout), 2),
              "ours_tokens_per_word": round(tokenizer_metrics(ours, heldout)["tokens_per_word"], 4)}
    print(f"focusflow: {ours_seconds:.1f} s ({stats})", flush=True)

    if not args.skip_reference:
        lines_file = work / "lines.txt"
        with open(lines_file, "w", encoding="utf-8") as handle:
            for sentence in _sentences(read_texts(train)):
                handle.write(sentence + "\n")
        started = time.perf_counter()
        reference = train_reference(lines_file, args.vocab)
        reference_seconds = time.perf_counter() - started
        from transformers import PreTrainedTokenizerFast

        wrapped = PreTrainedTokenizerFast(tokenizer_object=reference, unk_token="<unk>")
        result.update({"reference_train_s": round(reference_seconds, 1),
                       "train_speedup": round(reference_seconds / ours_seconds, 2),
                       "reference_encode_mb_s": round(encode_speed(reference, heldout), 2),
                       "reference_tokens_per_word": round(tokenizer_metrics(wrapped, heldout)["tokens_per_word"], 4)})
        print(f"tokenizers: {reference_seconds:.1f} s", flush=True)
    result["cpus"] = os.cpu_count()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
