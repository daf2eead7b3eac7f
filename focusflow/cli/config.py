"""``focusflow config``: validate a run configuration and print it with every default filled in."""

from __future__ import annotations

from pathlib import Path

import typer
import yaml

from focusflow.cli.app import app
from focusflow.config import load_config


@app.command("config")
def show_config(
    path: Path = typer.Argument(None, help="YAML config file."),
    set_: list[str] = typer.Option([], "--set", help="Override, e.g. --set lapt.steps=100 (repeatable)."),
    language: str = typer.Option(None, "--language", "-l"),
) -> None:
    """Validate a configuration and print the complete, resolved YAML."""
    config = load_config(path, set_, language=language)
    typer.echo(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False, allow_unicode=True))
