"""FOCUS speed/memory/agreement: focusflow vs the reference implementation (deepfocus) on the same inputs.

Case at XLM-R scale: a SentencePiece source vocabulary of 250k pieces with a random 250k x 768
float32 matrix, a 50k Unigram target tokenizer trained on real text, ~10k shared pieces, and 300-d
auxiliary vectors from a REAL fastText model trained on that text tokenized with the target
tokenizer (sparsemax supports follow the vectors: ~30 entries on average here, ~50 for Gaussian ones). Timed: the
whole FOCUS call (lookups, overlap, similarity, sparsemax, combination); fastText training and
tokenizer training are excluded. ``--quick``: 30k source, 4k target, 50-d vectors: about a minute.

Prints a last line of JSON: {"ours_s", "deepfocus_s", "speedup", "max_abs_diff", "peak_rss_gb", "rows_compared",
"overlap_ours", "overlap_deepfocus", "overlap_differing", "overlap_unexplained", "ours_call_peak_rss_gb",
"before_call_rss_gb"} (peak_rss_gb is this process's peak after our call, before deepfocus runs, which includes the
fastText training that built the case; ours_call_peak_rss_gb is the peak sampled during our call alone, and
before_call_rss_gb what the inputs (source matrix, tokenizers) already took). Agreement (max_abs_diff) is measured
untimed, by running our FOCUS on deepfocus's own overlap over every row neither treats as random; how far the two
overlaps differ (specials by role, fuzzy symbolic tokens, byte-exact matching: README, "Differences from deepfocus")
is counted by rule.

Install: ``pip install -e .[bench]``. deepfocus depends on the source-built ``fasttext`` package,
which installs the same module name as ``fasttext-numpy2`` (what focusflow uses); if
``python -c "import fasttext; print(fasttext.__file__)"`` then points at the wrong one or numpy
errors appear, run ``pip install --force-reinstall --no-deps fasttext-numpy2``.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _preamble import SHARED

DEFAULT_TEXT = SHARED / "text" / "sw.txt"


def _unigram(pieces: list[tuple[str, float]]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.Unigram(pieces, unk_id=3, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                   cls_token="<s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>")


def build_case(text: Path, work: Path, n_source: int, n_target: int, n_overlap: int, dim: int, lines: int):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from focusflow.config import FastTextSpec
    from focusflow.corpus.io import write_texts
    from focusflow.embeddings import train_aux_embeddings

    texts = [line.strip() for line in text.read_text(encoding="utf-8").splitlines() if line.strip()][:lines]
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    trainer_tok = Tokenizer(models.Unigram())
    trainer_tok.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer_tok.train_from_iterator(texts, trainers.UnigramTrainer(vocab_size=n_target - 1, special_tokens=specials,
                                                                   unk_token="<unk>"))
    learned = [(p, s) for p, s in json.loads(trainer_tok.to_str())["model"]["vocab"] if p not in specials]
    target = _unigram([(s, 0.0) for s in specials] + learned + [("<mask>", 0.0)])
    rng = random.Random(0)
    shared = rng.sample(learned, min(n_overlap, len(learned)))
    letters = "абвгдежзийклмнопрстуфхцчшщыэюя"
    synthetic, seen = [], {p for p, _ in shared}
    while len(synthetic) < n_source - len(shared) - 5:
        piece = ("▁" if rng.random() < 0.6 else "") + "".join(rng.choice(letters) for _ in range(rng.randint(2, 9)))
        if piece not in seen:
            seen.add(piece)
            synthetic.append((piece, -rng.uniform(5, 20)))
    source_pieces = [(s, 0.0) for s in specials] + shared + synthetic
    rng.shuffle(source_pieces[4:])
    source = _unigram(source_pieces + [("<mask>", 0.0)])
    target.save_pretrained(work / "target")
    write_texts(work / "train.jsonl", texts)
    stats = train_aux_embeddings(work / "target", work / "train.jsonl",
                                 FastTextSpec(dim=dim, epochs=3, min_count=10, threads=2), work / "aux")
    embeddings = np.random.default_rng(0).standard_normal((len(source), 768)).astype(np.float32) * 0.05
    return source, target, embeddings, stats


class RssSampler:
    """Peak resident memory of this process while the block runs (polled every 5 ms by a thread): the
    process-wide peak (ru_maxrss) also holds the fastText training that built the case."""

    def __init__(self) -> None:
        import psutil

        self.process = psutil.Process()
        self.start = self.peak = self.process.memory_info().rss
        self.running = False

    def _poll(self) -> None:
        while self.running:
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.005)

    def __enter__(self) -> "RssSampler":
        import threading

        self.running = True
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.running = False
        self.thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)


def overlap_difference_rules(source, target, ours, theirs: dict[int, int]) -> dict[str, int]:
    """Every target token whose copied source row differs between focusflow and deepfocus, counted by the rule
    that explains it (README, "Differences from deepfocus"); what no rule explains is counted as unexplained."""
    from focusflow.tokenizer.canonical import canonical_vocab

    source_forms, target_forms = canonical_vocab(source), canonical_vocab(target)
    ours_pairs, kinds = ours.as_dict(), dict(zip(ours.target_ids.tolist(), ours.kinds.tolist(), strict=False))

    def squashed(form) -> str | None:  # the text with every Unicode space removed (what deepfocus compares)
        return None if form.text is None else "".join(form.text.split())

    counts: dict[str, int] = {}
    for target_id in set(ours_pairs) | set(theirs):
        if ours_pairs.get(target_id) == theirs.get(target_id):
            continue
        form = target_forms[target_id]
        theirs_form = source_forms[theirs[target_id]] if target_id in theirs else None
        if form.kind == "special":
            rule = "special tokens by role"
        elif kinds.get(target_id) == "fuzzy":
            rule = "symbolic tokens fuzzy (whitespace, word start, case ignored)"
        elif theirs_form is not None and theirs_form.key != form.key and squashed(theirs_form) == squashed(form):
            rule = "exact means same bytes (deepfocus equates spellings that differ only in spaces such as U+00A0)"
        else:
            rule = "unexplained"
        counts[rule] = counts.get(rule, 0) + 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--text", type=Path, default=DEFAULT_TEXT)
    parser.add_argument("--skip-deepfocus", action="store_true")
    args = parser.parse_args()
    sizes = dict(n_source=30_000, n_target=4_000, n_overlap=1_500, dim=50, lines=6_000) if args.quick else \
        dict(n_source=250_000, n_target=50_000, n_overlap=10_000, dim=300, lines=10**9)
    import torch

    from focusflow.embeddings import load_aux_vectors, transfer_embeddings

    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        source, target, embeddings, stats = build_case(args.text, work, **sizes)
        print(f"case: source {len(source)}x768, target {len(target)}, fastText {stats}", file=sys.stderr)
        with RssSampler() as sampler:
            started = time.perf_counter()  # deepfocus loads its fastText model inside its call: we time our load too
            aux = load_aux_vectors(work / "aux")
            ours = transfer_embeddings(source, target, embeddings, "focus", aux=aux)
            ours_s = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
        print(f"ours: {ours_s:.2f}s {ours.totals}", file=sys.stderr)
        result = {"ours_s": round(ours_s, 3), "deepfocus_s": None, "speedup": None, "max_abs_diff": None,
                  "peak_rss_gb": round(peak, 3), "ours_call_peak_rss_gb": round(sampler.peak / 1024**3, 3),
                  "before_call_rss_gb": round(sampler.start / 1024**3, 3)}
        if not args.skip_deepfocus:
            from deepfocus import FOCUS

            started = time.perf_counter()
            reference = FOCUS(target_tokenizer=target, source_tokenizer=source,
                              source_embeddings=torch.from_numpy(embeddings),
                              fasttext_model_path=str(work / "aux" / "fasttext.bin"),
                              exact_match_all=True, match_symbols=True, fuzzy_match_all=False, verbosity="silent").numpy()
            deepfocus_s = time.perf_counter() - started
            # agreement on the same inputs: our FOCUS given deepfocus's overlap (untimed); differences in the
            # overlap itself are counted by the documented rule that explains each one
            from deepfocus.focus import get_overlapping_tokens

            from focusflow.embeddings import Overlap, compute_overlap

            found, _ = get_overlapping_tokens(target, source, match_symbols=True, exact_match_all=True,
                                              fuzzy_match_all=False)
            pairs = {info.target.id: info.source[0].id for info in found.values()}
            same = transfer_embeddings(source, target, embeddings, "focus", aux=aux,
                                       overlap=Overlap.from_pairs(pairs, len(target)))
            compared = same.plan.fate != "random"
            ours_overlap = compute_overlap(source, target)
            ours_pairs = ours_overlap.as_dict()
            rules = overlap_difference_rules(source, target, ours_overlap, pairs)
            differing = sum(rules.values())
            print(f"overlap: ours {len(ours_pairs)}, deepfocus {len(pairs)}, differing {differing}: {rules}",
                  file=sys.stderr)
            result.update(deepfocus_s=round(deepfocus_s, 3), speedup=round(deepfocus_s / ours_s, 1),
                          max_abs_diff=float(np.abs(same.embeddings[compared] - reference[compared]).max()),
                          rows_compared=int(compared.sum()), overlap_ours=len(ours_pairs),
                          overlap_deepfocus=len(pairs), overlap_differing=int(differing),
                          overlap_unexplained=rules.get("unexplained", 0))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
