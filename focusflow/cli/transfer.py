"""``focusflow init``: initialize a model for a target tokenizer (FOCUS or a baseline)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from focusflow.cli.app import app


@app.command("init")
def init(
    source: Path = typer.Option(..., "--source", help="Saved Hugging Face model folder (with its tokenizer)."),
    target_tokenizer: Path = typer.Option(None, "--target-tokenizer", help="Target tokenizer folder (not needed for prune)."),
    corpus: Path = typer.Option(None, "--corpus", help="Target-language corpus (.jsonl, or .txt with one document per line) for fastText, prune and extend ranking."),
    method: str = typer.Option("focus", "--method", help="focus|random|mean|fvt|focus-symbolic|wechsel|avg-eg"),
    mode: str = typer.Option("replace", "--mode", help="replace|extend|prune"),
    out: Path = typer.Option(..., "--out", help="Output model folder."),
    aux: Path = typer.Option(None, "--aux", help="Folder with vectors.safetensors/tokens.json (train_aux_embeddings)."),
    fasttext_bin: Path = typer.Option(None, "--fasttext-bin", help="Your own token-level fastText .bin."),
    extend_top_n: int = typer.Option(None, "--extend-top-n"),
    seed: int = typer.Option(0, "--seed"),
    wechsel_source_vectors: Path = typer.Option(None, help="WECHSEL: source-language fastText .bin"),
    wechsel_target_vectors: Path = typer.Option(None, help="WECHSEL: target-language fastText .bin"),
    wechsel_dictionary: Path = typer.Option(None, help="WECHSEL: TSV of source<TAB>target word pairs"),
    set_: list[str] = typer.Option([], "--set", help="FastText overrides, e.g. --set fasttext.dim=300"),
) -> None:
    """Write an initialized model folder plus transfer_report.parquet and transfer_totals.json."""
    from focusflow.config import load_config
    from focusflow.embeddings import initialize_model, load_fasttext_bin

    config = load_config(None, set_, language="xx")
    options: dict = {"fasttext": config.fasttext}
    if corpus is not None:
        options["train"] = corpus
    options["extend_top_n"] = extend_top_n or config.init.extend_top_n
    for name, value in (("wechsel_source_vectors", wechsel_source_vectors), ("wechsel_target_vectors", wechsel_target_vectors),
                        ("wechsel_dictionary", wechsel_dictionary)):
        if value is not None:
            options[name] = value
    try:
        if fasttext_bin is not None and aux is None:
            aux = out.with_name(out.name + ".fasttext")
            load_fasttext_bin(fasttext_bin, aux)
        totals = initialize_model(source, target_tokenizer, out, method, mode=mode, aux_dir=aux, seed=seed, **options)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None
    typer.echo(json.dumps(totals, default=str))
