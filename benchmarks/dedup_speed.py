"""Near-duplicate removal speed and quality: focusflow's dedup vs datatrove's MinHash pipeline, same corpus, same run.

Generates ≥ 200 MB of pseudo-language text (Zipf vocabulary of syllable words), injects exact
duplicates (case/whitespace variants) and near duplicates (~3% of words replaced and the first
or last sentence changed), then runs both deduplicators on it and measures MB/s, recall of
the injected duplicates, precision (share of removed documents that were injected copies, so
distinct documents wrongly removed lower it) and the peak memory of each run's process tree.

Both use 5-word shingles, similar LSH curves (datatrove: 20 buckets × 6 hashes; focusflow: 128
values, threshold 0.5 with verification) and the same number of processes. datatrove gets its
own whitespace word tokenizer (its default one needs NLTK/spaCy data) and writes uncompressed
JSON Lines like focusflow. datatrove needs ``xxhash<4`` (see the ``bench`` extra).

    python benchmarks/dedup_speed.py [--mb 200] [--workers 2] [--skip-reference]

The last line is JSON: {"ours_mb_s", "reference_mb_s", "speedup", "recall", "precision", "peak_rss_gb", ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import _preamble  # noqa: F401  (this checkout's focusflow first)
import numpy as np

SYLLABLES = ["ka", "ta", "na", "ma", "wa", "ki", "ni", "mu", "la", "sa", "ya", "zi", "ku", "po", "ha", "re", "to",
             "be", "shi", "nyo", "mbe", "ndu", "cha", "gwe", "fi", "vu", "dze", "lo", "pi", "ju"]


# --------------------------------------------------------------------------- corpus

def make_vocabulary(rng: np.random.Generator, size: int = 60_000, max_syllables: int = 4) -> np.ndarray:
    lengths = rng.integers(1, max_syllables + 1, size=size)
    syllables = np.asarray(SYLLABLES)
    words = {"".join(syllables[rng.integers(0, len(SYLLABLES), size=n)]) for n in lengths}
    return np.asarray(sorted(words))


class Writer:
    """Random sentences from a Zipf distribution over the vocabulary."""

    def __init__(self, rng: np.random.Generator, vocabulary: np.ndarray):
        self.rng = rng
        self.vocabulary = vocabulary
        weights = 1.0 / np.arange(1, len(vocabulary) + 1) ** 1.05
        self.cumulative = np.cumsum(weights / weights.sum())

    def words(self, n: int) -> np.ndarray:
        index = np.searchsorted(self.cumulative, self.rng.random(n))
        return self.vocabulary[np.minimum(index, len(self.vocabulary) - 1)]

    def sentence(self) -> str:
        words = self.words(int(self.rng.integers(6, 25)))
        return " ".join(words).capitalize() + self.rng.choice([".", ".", ".", "?", "!"])

    def document(self, n_sentences: int) -> list[str]:
        return [self.sentence() for _ in range(n_sentences)]


def near_copy(sentences: list[str], writer: Writer, rng: np.random.Generator, share: float = 0.03) -> str:
    """~3% of words replaced and the first or the last sentence replaced by a new one."""
    sentences = list(sentences)
    position = 0 if rng.random() < 0.5 else len(sentences) - 1
    sentences[position] = writer.sentence()
    words = " ".join(sentences).split(" ")
    picks = rng.choice(len(words), size=max(1, round(share * len(words))), replace=False)
    replacements = writer.words(picks.size)
    for index, word in zip(picks, replacements, strict=False):
        words[index] = word
    return " ".join(words)


def exact_copy(text: str, rng: np.random.Generator) -> str:
    """The same text up to case and whitespace (what normalized exact matching must catch)."""
    variant = text.upper() if rng.random() < 0.5 else text
    return variant.replace(". ", ".  ") + ("\n" if rng.random() < 0.5 else "")


def generate(path: Path, target_bytes: int, seed: int = 0, dup_share: float = 0.1, near_share: float = 0.1) -> dict:
    """Write ``target_bytes`` of JSON Lines ({"id", "text"}); copies always come after their originals."""
    rng = np.random.default_rng(seed)
    writer = Writer(rng, make_vocabulary(rng))
    written = 0
    counts = {"base": 0, "exact": 0, "near": 0}
    pending: list[tuple[int, str]] = []  # (insert after this many base docs, json line)
    recent: list[list[str]] = []
    with open(path, "w", encoding="utf-8") as handle:
        while written < target_bytes:
            sentences = writer.document(int(rng.integers(8, 80)))
            text = " ".join(sentences)
            line = json.dumps({"id": f"b{counts['base']}", "text": text}) + "\n"
            handle.write(line)
            written += len(line)
            counts["base"] += 1
            recent.append(sentences)
            if len(recent) > 2000:
                recent.pop(0)
            draw = rng.random()
            if draw < dup_share + near_share:
                source = recent[int(rng.integers(0, len(recent)))]
                if draw < dup_share:
                    copy, kind = exact_copy(" ".join(source), rng), "exact"
                else:
                    copy, kind = near_copy(source, writer, rng), "near"
                delay = counts["base"] + int(rng.integers(1, 500))
                pending.append((delay, json.dumps({"id": f"{kind[0]}{counts[kind]}", "text": copy}) + "\n"))
                counts[kind] += 1
            due = [p for p in pending if p[0] <= counts["base"]]
            pending = [p for p in pending if p[0] > counts["base"]]
            for _, copy_line in due:
                handle.write(copy_line)
                written += len(copy_line)
        for _, copy_line in pending:
            handle.write(copy_line)
            written += len(copy_line)
    return {**counts, "bytes": written}


def split_file(path: Path, folder: Path, parts: int) -> None:
    """The same corpus as ``parts`` files (datatrove parallelizes over files)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = path.read_bytes().splitlines(keepends=True)
    size = -(-len(lines) // parts)
    for part in range(parts):
        (folder / f"part_{part:03d}.jsonl").write_bytes(b"".join(lines[part * size:(part + 1) * size]))


# --------------------------------------------------------------------------- runs (each in its own process)

def run_ours(corpus: str, out: str, workers: str) -> None:
    from focusflow.config import DedupSpec
    from focusflow.corpus import deduplicate

    deduplicate(Path(corpus), DedupSpec(threshold=0.5, num_perm=128, shingle_size=5, workers=int(workers)),
                Path(out))


def run_reference(folder: str, out: str, workers: str) -> None:
    workers = int(workers)
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter, MinhashDedupSignature
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers.jsonl import JsonlWriter
    from datatrove.utils.hashing import HashConfig
    from datatrove.utils.word_tokenizers import WordTokenizer

    class SpaceTokenizer(WordTokenizer):
        """Whitespace words (datatrove's default tokenizer needs NLTK/spaCy models)."""

        def word_tokenize(self, text: str) -> list[str]:
            return text.split()

        def sent_tokenize(self, text: str) -> list[str]:
            return [text]

        def span_tokenize(self, text: str) -> list[tuple[int, int]]:
            return [(0, len(text))]

    config = MinhashConfig(n_grams=5, num_buckets=20, hashes_per_bucket=6, hash_config=HashConfig(precision=64))
    files = len(list(Path(folder).glob("*.jsonl")))
    base = Path(out)
    logs = str(base / "logs")
    stage1 = LocalPipelineExecutor(
        pipeline=[JsonlReader(folder), MinhashDedupSignature(output_folder=str(base / "sigs"), config=config,
                                                            language=SpaceTokenizer())],
        tasks=files, workers=workers, logging_dir=f"{logs}/1")
    stage2 = LocalPipelineExecutor(
        pipeline=[MinhashDedupBuckets(input_folder=str(base / "sigs"), output_folder=str(base / "buckets"),
                                      config=config)],
        tasks=config.num_buckets, workers=workers, logging_dir=f"{logs}/2", depends=stage1)
    stage3 = LocalPipelineExecutor(
        pipeline=[MinhashDedupCluster(input_folder=str(base / "buckets"), output_folder=str(base / "remove"),
                                      config=config)],
        tasks=1, logging_dir=f"{logs}/3", depends=stage2)
    stage4 = LocalPipelineExecutor(
        pipeline=[JsonlReader(folder), MinhashDedupFilter(input_folder=str(base / "remove")),
                  JsonlWriter(str(base / "output"), compression=None)],
        tasks=files, workers=workers, logging_dir=f"{logs}/4", depends=stage3)
    stage4.run()


def timed_subprocess(function: str, *args: str) -> tuple[float, float]:
    """Run ``function(*args)`` of this file in a fresh process; returns (seconds, peak RSS of its process tree, GB)."""
    import psutil

    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import dedup_speed as b; "
            f"b.{function}(*sys.argv[1:])")
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", code, *args], env={**os.environ, "PYTHONWARNINGS": "ignore"},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0]

    def sample() -> None:
        try:
            root = psutil.Process(process.pid)
            while process.poll() is None:
                total = 0
                for p in [root, *root.children(recursive=True)]:
                    try:
                        total += p.memory_info().rss
                    except psutil.Error:
                        pass
                peak[0] = max(peak[0], total)
                time.sleep(0.05)
        except psutil.Error:
            pass

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    _, stderr = process.communicate()
    seconds = time.perf_counter() - started
    thread.join()
    if process.returncode != 0:
        raise RuntimeError(f"{function} failed:\n{stderr.decode()[-3000:]}")
    return seconds, peak[0] / 1e9


# --------------------------------------------------------------------------- scoring

def kept_ids(files: list[Path]) -> set[str]:
    ids = set()
    for file in files:
        with open(file, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    ids.add(json.loads(line)["id"])
    return ids


def score(all_ids: set[str], kept: set[str]) -> dict:
    removed = all_ids - kept
    injected = {i for i in all_ids if i[0] in "en"}
    removed_injected = removed & injected
    distinct_removed = removed - injected
    return {"recall": len(removed_injected) / len(injected),
            "precision": len(removed_injected) / max(1, len(removed)),
            "recall_exact": len({i for i in removed_injected if i[0] == "e"}) / max(1, sum(i[0] == "e" for i in injected)),
            "recall_near": len({i for i in removed_injected if i[0] == "n"}) / max(1, sum(i[0] == "n" for i in injected)),
            "distinct_removed": len(distinct_removed)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=200.0, help="corpus size in MB (≥ 200 for the reported number)")
    parser.add_argument("--workers", type=int, default=2, help="processes for both systems")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-reference", action="store_true", help="only run focusflow")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()

    work = args.workdir or Path(tempfile.mkdtemp(prefix="dedup-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "corpus.jsonl"
    started = time.perf_counter()
    counts = generate(corpus, int(args.mb * 1e6), seed=args.seed)
    megabytes = counts["bytes"] / 1e6
    print(f"generated {megabytes:.1f} MB: {counts} in {time.perf_counter() - started:.0f} s", flush=True)
    all_ids = kept_ids([corpus])

    seconds, peak = timed_subprocess("run_ours", str(corpus), str(work / "ours"), str(args.workers))
    ours = score(all_ids, kept_ids([work / "ours" / "documents.jsonl"]))
    result = {"ours_mb_s": round(megabytes / seconds, 2), "ours_seconds": round(seconds, 1),
              "ours_peak_rss_gb": round(peak, 3), **{f"ours_{k}": round(v, 4) for k, v in ours.items()}}
    print(f"focusflow: {seconds:.1f} s, {megabytes / seconds:.1f} MB/s, peak {peak:.2f} GB, {ours}", flush=True)
    if not args.skip_reference:
        split_file(corpus, work / "parts", max(4, args.workers * 2))
        ref_seconds, ref_peak = timed_subprocess("run_reference", str(work / "parts"), str(work / "reference"),
                                                 str(args.workers))
        reference = score(all_ids, kept_ids(sorted((work / "reference" / "output").glob("*.jsonl"))))
        print(f"datatrove: {ref_seconds:.1f} s, {megabytes / ref_seconds:.1f} MB/s, peak {ref_peak:.2f} GB, "
              f"{reference}", flush=True)
        result.update({"reference_mb_s": round(megabytes / ref_seconds, 2), "reference_seconds": round(ref_seconds, 1),
                       "reference_peak_rss_gb": round(ref_peak, 3),
                       **{f"reference_{k}": round(v, 4) for k, v in reference.items()},
                       "speedup": round(ref_seconds / seconds, 2)})
    summary = {"ours_mb_s": result["ours_mb_s"], "reference_mb_s": result.get("reference_mb_s"),
               "speedup": result.get("speedup"), "recall": round(ours["recall"], 4),
               "precision": round(ours["precision"], 4), "peak_rss_gb": round(peak, 3),
               "corpus_mb": round(megabytes, 1), "workers": args.workers, "cpus": os.cpu_count(),
               "details": result}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
