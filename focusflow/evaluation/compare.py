"""Compare initialization methods on one corpus: one tokenizer, one fastText, one held-out set, one table.

``compare_methods`` runs split → source (+ MLM head for bare encoders) → tokenizer → fastText →
every method's initialization → intrinsic evaluation, and writes ``comparison.csv`` (the
contract: at least ``method, fidelity, retrieval_top1, mlm_loss, mlm_accuracy, bits_per_byte,
vocab_size, n_params, tokens_per_word``), ``comparison.md``, ``comparison.json`` and
``comparison.png``. The source model with its own tokenizer is the ``original`` row.
Intermediate stages live in ``work_dir`` and are reused when their parameters are unchanged
(the artifact store does this for the Prefect flows; this keeps the CLI re-runnable).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from focusflow.config import FastTextSpec, SplitSpec, TokenizerSpec
from focusflow.evaluation.intrinsic import (
    evaluate_model,
    select_heldout_sentences,
    sentence_embeddings,
)
from focusflow.models.lm_stats import unigram_counts, unigram_log_probs

log = logging.getLogger(__name__)

DEFAULT_METHODS = ("focus", "random", "mean", "fvt", "focus-symbolic")
CSV_COLUMNS = ["method", "fidelity", "retrieval_top1", "mlm_loss", "mlm_accuracy", "bits_per_byte", "vocab_size",
               "n_params", "tokens_per_word", "chars_per_token", "unigram_loss", "unigram_bits_per_byte",
               "objective", "copied", "combined", "random", "mean", "fidelity_min"]
COMPARE_VERSION = 1


def _stage(folder: Path, params: dict[str, Any], build: Callable[[Path], dict]) -> dict:
    """Build ``folder`` unless it was built with the same ``params``; returns the stage's stats."""
    marker = folder / "_focusflow_stage.json"
    digest = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()
    if marker.is_file():
        record = json.loads(marker.read_text(encoding="utf-8"))
        if record.get("params_sha256") == digest:
            log.info("reusing %s", folder)
            return record["stats"]
    started = time.perf_counter()
    stats = build(folder)
    folder.mkdir(parents=True, exist_ok=True)
    record = {"params_sha256": digest, "params": params, "stats": stats, "seconds": time.perf_counter() - started}
    temporary = folder / f".{marker.name}.tmp-{os.getpid()}"
    temporary.write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")
    os.replace(temporary, marker)
    return stats


def _file_identity(path: Path) -> dict[str, Any]:
    stat = path.stat()
    return {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def compare_methods(source: str, corpus: str | os.PathLike[str], language: str, out_dir: str | os.PathLike[str], *,
                    methods: Sequence[str] = DEFAULT_METHODS, tokenizer_spec: TokenizerSpec | None = None,
                    fasttext_spec: FastTextSpec | None = None, head_spec: dict | None = None,
                    split_spec: SplitSpec | None = None, heldout_sentences: int = 500, max_length: int = 128,
                    max_documents: int | None = None, seed: int = 0, work_dir: str | os.PathLike[str] | None = None,
                    source_cache: str | os.PathLike[str] | None = None) -> dict:
    """Initialize ``source`` for ``language`` with every method and evaluate all on the same held-out sentences.

    ``corpus`` is any local text file (one document per line) or a corpus ``.jsonl``. Returns
    ``{"rows": [...], "files": {...}, "stages": {...}}``.
    """
    from focusflow.corpus import split_corpus
    from focusflow.corpus.io import write_texts
    from focusflow.embeddings import initialize_model, train_aux_embeddings
    from focusflow.corpus.io import read_documents
    from focusflow.models.source import prepare_source
    from focusflow.tokenizer import tokenizer_metrics, train_tokenizer

    corpus = Path(corpus)
    if not corpus.is_file():
        raise FileNotFoundError(f"corpus file {corpus} does not exist; pass a local text file (one document per line)")
    unknown = [m for m in methods if m not in _known_methods()]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; choose from {', '.join(_known_methods())}")
    out = Path(out_dir)
    work = Path(work_dir) if work_dir is not None else out / "work"
    work.mkdir(parents=True, exist_ok=True)
    tokenizer_spec = tokenizer_spec or TokenizerSpec(vocab_size="auto", seed=seed)
    fasttext_spec = fasttext_spec or FastTextSpec(seed=seed)
    split_spec = split_spec or SplitSpec(seed=seed, min_heldout_documents=max(200, 2 * heldout_sentences))
    stages: dict[str, Any] = {}

    def build_split(folder: Path) -> dict:
        documents = list(dict.fromkeys(read_documents(corpus, limit=max_documents)))
        write_texts(work / "documents.jsonl", documents)
        return split_corpus(work / "documents.jsonl", split_spec, folder)

    corpus_params = {"corpus": _file_identity(corpus), "max_documents": max_documents, "split": split_spec.model_dump()}
    stages["split"] = _stage(work / "split", corpus_params, build_split)
    train_file, heldout_file = work / "split" / "train.jsonl", work / "split" / "heldout.jsonl"

    source_params = {"source": source, "head": head_spec or {}, "data": corpus_params, "v": COMPARE_VERSION}
    stages["source"] = _stage(work / "source", source_params, lambda folder: prepare_source(
        source, folder, head_train=train_file, head_spec=head_spec, cache_dir=source_cache))
    source_dir = work / "source"

    tokenizer_params = {"spec": tokenizer_spec.model_dump(), "source": source_params, "data": corpus_params}
    stages["tokenizer"] = _stage(work / "tokenizer", tokenizer_params, lambda folder: train_tokenizer(
        train_file, tokenizer_spec, folder, source_tokenizer=source_dir))
    tokenizer_dir = work / "tokenizer"

    fasttext_params = {"spec": fasttext_spec.model_dump(), "tokenizer": tokenizer_params}
    stages["fasttext"] = _stage(work / "fasttext", fasttext_params, lambda folder: train_aux_embeddings(
        tokenizer_dir, train_file, fasttext_spec, folder))

    init_stats: dict[str, dict] = {}
    for method in methods:
        params = {"method": method, "seed": seed, "fasttext": fasttext_params, "source": source_params}
        init_stats[method] = _stage(work / "init" / method, params, lambda folder, m=method: initialize_model(
            source_dir, tokenizer_dir, folder, method=m, aux_dir=work / "fasttext", seed=seed, train=train_file))
    stages["init"] = init_stats

    rows = _evaluate_all(source_dir, tokenizer_dir, {m: work / "init" / m for m in methods}, train_file, heldout_file,
                         init_stats, heldout_sentences=heldout_sentences, max_length=max_length, seed=seed,
                         tokenizer_metrics=tokenizer_metrics, read_documents=read_documents)
    files = write_comparison(rows, out, title=f"{language}: {source} → {len(rows) - 1} initializations "
                                              f"({stages['tokenizer'].get('vocab_size', '')} tokens)")
    (out / "stages.json").write_text(json.dumps(stages, indent=2, default=str), encoding="utf-8")
    return {"rows": rows, "files": files, "stages": stages, "language": language, "source": source}


def _known_methods() -> tuple[str, ...]:
    from focusflow.embeddings import METHODS

    return tuple(METHODS)


def _evaluate_all(source_dir: Path, tokenizer_dir: Path, model_dirs: dict[str, Path], train_file: Path,
                  heldout_file: Path, init_stats: dict[str, dict], *, heldout_sentences: int, max_length: int,
                  seed: int, tokenizer_metrics, read_documents) -> list[dict]:
    from transformers import AutoTokenizer

    from focusflow.models.loading import load_source

    source_tokenizer = AutoTokenizer.from_pretrained(source_dir)
    target_tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    sentences = select_heldout_sentences(read_documents(heldout_file), [source_tokenizer, target_tokenizer],
                                         max_sentences=heldout_sentences, max_length=max_length, seed=seed)
    if len(sentences) < 10:
        raise ValueError(f"only {len(sentences)} held-out sentences fit {max_length} tokens; the corpus is too small")
    log.info("evaluating on %d held-out sentences", len(sentences))
    train_texts = read_documents(train_file, limit=50_000)
    unigram = {"source": unigram_log_probs(unigram_counts(source_tokenizer, train_texts)),
               "target": unigram_log_probs(unigram_counts(target_tokenizer, train_texts))}
    efficiency = {"source": tokenizer_metrics(source_tokenizer, sentences),
                  "target": tokenizer_metrics(target_tokenizer, sentences)}
    encoder, _, _ = load_source(source_dir, with_head=False)
    reference = sentence_embeddings(encoder, source_tokenizer, sentences, max_length=max_length)
    del encoder

    rows = []
    for method, folder in [("original", source_dir), *model_dirs.items()]:
        started = time.perf_counter()
        side = "source" if method == "original" else "target"
        metrics = evaluate_model(folder, source_dir, sentences, seed=seed, max_length=max_length,
                                 unigram=unigram[side], source_embeddings=reference)
        totals = init_stats.get(method, {})
        rows.append({
            "method": method,
            "fidelity": metrics["fidelity"],
            "retrieval_top1": metrics["retrieval_top1"],
            "mlm_loss": metrics.get("mlm_loss", metrics.get("clm_loss")),
            "mlm_accuracy": metrics.get("mlm_accuracy", metrics.get("clm_accuracy")),
            "bits_per_byte": metrics.get("bits_per_byte"),
            "vocab_size": metrics["vocab_size"],
            "n_params": metrics["n_params"],
            "tokens_per_word": efficiency[side]["tokens_per_word"],
            "chars_per_token": efficiency[side].get("chars_per_token"),
            "unigram_loss": metrics.get("unigram_loss"),
            "unigram_bits_per_byte": metrics.get("unigram_bits_per_byte"),
            "objective": metrics["objective"],
            "copied": totals.get("copied"),
            "combined": totals.get("combined"),
            "random": totals.get("random"),
            "mean": totals.get("mean"),
            "fidelity_min": metrics["fidelity_min"],
            "n_sentences": metrics["n_sentences"],
            "n_scored": metrics.get("n_scored"),
        })
        log.info("%s: fidelity %.3f top1 %.3f loss %s (%.0fs)", method, metrics["fidelity"], metrics["retrieval_top1"],
                 rows[-1]["mlm_loss"], time.perf_counter() - started)
    return rows


def write_comparison(rows: list[dict], out_dir: str | os.PathLike[str], title: str = "method comparison") -> dict:
    """``comparison.csv``/``.json``/``.md`` and a bar chart ``comparison.png`` (fidelity, retrieval, loss, bpb)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame(rows)
    frame = frame[[c for c in CSV_COLUMNS if c in frame.columns] + [c for c in frame.columns if c not in CSV_COLUMNS]]
    files = {}
    for name, write in (("comparison.csv", lambda p: frame.to_csv(p, index=False)),
                        ("comparison.json", lambda p: p.write_text(json.dumps(rows, indent=2, default=_json),
                                                                   encoding="utf-8")),
                        ("comparison.md", lambda p: p.write_text(f"## {title}\n\n{markdown_table(frame)}\n",
                                                                 encoding="utf-8")),
                        ("comparison.png", lambda p: _bar_chart(frame, p, title))):
        temporary = out / f".{name}.tmp-{os.getpid()}{Path(name).suffix}"
        write(temporary)
        os.replace(temporary, out / name)
        files[name] = str(out / name)
    return files


def _json(value: Any) -> Any:
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return str(value)


def markdown_table(frame: pd.DataFrame) -> str:
    """A compact Markdown table of the headline columns (no tabulate dependency)."""
    columns = ["method", "fidelity", "retrieval_top1", "mlm_loss", "mlm_accuracy", "bits_per_byte",
               "unigram_loss", "vocab_size", "n_params", "tokens_per_word", "copied", "combined", "random"]
    columns = [c for c in columns if c in frame.columns]

    def cell(value: Any) -> str:
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return "–"
        if isinstance(value, (float, np.floating)):
            return str(int(value)) if float(value).is_integer() and abs(value) >= 2 else f"{value:.3f}"
        if isinstance(value, (int, np.integer)) and abs(value) >= 1_000_000:
            return f"{value / 1e6:.1f}M"
        return str(value)

    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(cell(row[c]) for c in columns) + " |" for _, row in frame.iterrows()]
    return "\n".join(lines)


def _bar_chart(frame: pd.DataFrame, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("fidelity", "mean cosine to source ↑"), ("retrieval_top1", "retrieval top-1 ↑"),
              ("mlm_loss", "held-out LM loss ↓"), ("bits_per_byte", "bits per byte ↓")]
    figure, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.6))
    colors = ["#888888" if m == "original" else "#2b6cb0" if m == "focus" else "#9fb7d6" for m in frame["method"]]
    for axis, (column, label) in zip(axes, panels):
        values = pd.to_numeric(frame[column], errors="coerce").fillna(0.0)
        axis.bar(frame["method"], values, color=colors)
        axis.set_title(label, fontsize=10)
        axis.tick_params(axis="x", rotation=45, labelsize=8)
        if column == "mlm_loss" and "unigram_loss" in frame and frame["unigram_loss"].notna().any():
            axis.axhline(float(frame["unigram_loss"].dropna().iloc[-1]), color="#c05621", linestyle="--",
                         linewidth=1, label="unigram (new vocab)")
            axis.legend(fontsize=7)
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, format="png", dpi=110)
    plt.close(figure)
