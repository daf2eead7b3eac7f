"""``focusflow config``: validate a run configuration and print it with every default filled in."""

from __future__ import annotations

from pathlib import Path

import typer
import yaml

from focusflow.cli.app import app
from focusflow.cli.stage_io import run_config
from focusflow.config import ANY_LANGUAGE


@app.command("config")
def show_config(
    path: Path = typer.Argument(None, help="YAML config file."),
    set_: list[str] = typer.Option([], "--set", help="Override, e.g. --set lapt.steps=100 (repeatable)."),
    language: str = typer.Option(None, "--language", "-l",
                                 help="ISO 639 code; without it (and no language: in the file) everything else is "
                                      "validated, as `focusflow run --language X --config FILE` will read it."),
) -> None:
    """Validate a configuration and print the complete, resolved YAML."""
    config = run_config(path, set_, language=language)
    resolved = config.model_dump(mode="json")
    if config.language == ANY_LANGUAGE and language is None:
        resolved.pop("language")  # none given: `focusflow run --language` supplies it
    typer.echo(yaml.safe_dump(resolved, sort_keys=False, allow_unicode=True))
