"""``focusflow lapt``: language-adaptive pretraining of a model folder on a corpus split."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from focusflow.cli.app import app
from focusflow.config import load_config


def _split_files(corpus: Path, heldout: Path | None) -> tuple[Path, Path]:
    """A split folder (train.jsonl + heldout.jsonl, optionally .gz) or a train file plus --heldout."""
    if corpus.is_dir():
        def pick(stem: str) -> Path:
            for name in (f"{stem}.jsonl", f"{stem}.jsonl.gz"):
                if (corpus / name).is_file():
                    return corpus / name
            raise FileNotFoundError(f"{corpus} has no {stem}.jsonl; pass a split folder (train.jsonl + heldout.jsonl) "
                                    "or a train file with --heldout")
        return pick("train"), heldout or pick("heldout")
    if not corpus.is_file():
        raise FileNotFoundError(f"corpus {corpus} does not exist")
    if heldout is None:
        raise FileNotFoundError("a corpus file needs --heldout FILE (held-out text is never trained on)")
    return corpus, heldout


@app.command("lapt")
def lapt_command(
    model: Path = typer.Option(..., "--model", "-m", help="Hugging Face model folder (model + tokenizer)."),
    corpus: Path = typer.Option(..., "--corpus", "-c", help="Split folder (train.jsonl, heldout.jsonl) or train .jsonl."),
    out: Path = typer.Option(..., "--out", "-o", help="Run folder: checkpoints/, final/, metrics.csv, loss_curve.png."),
    heldout: Path = typer.Option(None, "--heldout", help="Held-out .jsonl (default: heldout.jsonl in --corpus)."),
    steps: int = typer.Option(None, "--steps", help="Optimizer steps (or use --set lapt.samples=/lapt.tokens=)."),
    config: Path = typer.Option(None, "--config", help="YAML config; its lapt section is used."),
    set_: list[str] = typer.Option([], "--set", help="Override, e.g. --set lapt.micro_batch_size=8 (repeatable)."),
    resume: bool = typer.Option(True, "--resume/--no-resume", help="Continue from the last complete checkpoint."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Rich progress bar with ETA."),
) -> None:
    """Continue pretraining (MLM for encoders, causal LM for decoders); prints the summary as JSON.

    Multi-GPU: ``torchrun --nproc_per_node N --no-python focusflow lapt ...`` (rank 0 writes).
    """
    overrides = list(set_)
    if steps is not None:
        overrides.append(f"lapt.steps={steps}")
    cfg = load_config(config, overrides, language="xx") if config is None else load_config(config, overrides)
    train_file, heldout_file = _split_files(corpus, heldout)
    if progress:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    from focusflow.training import run_lapt

    summary = run_lapt(model, train_file, heldout_file, cfg.lapt, out, resume=resume, progress=progress)
    typer.echo(json.dumps(summary, indent=2))
