"""The ``focusflow`` command line: one entry point, one module per area under ``focusflow.cli``."""

from __future__ import annotations

import logging
import sys

import typer

from focusflow import __version__
from focusflow.logs import configure_output

app = typer.Typer(
    name="focusflow",
    help="Specialize a multilingual language model to one language: tokenizer, FOCUS init, LAPT, evaluation.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"focusflow {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    verbose: bool = typer.Option(False, "--verbose", "-v",
                                 help="Log at INFO level and show every library message (FOCUSFLOW_VERBOSE=1 too)."),
) -> None:
    verbose = configure_output(True if verbose else None)
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


# Each area registers its commands on `app` (or adds a sub-app) when imported.
from focusflow.cli import store as _store  # noqa: E402,F401
from focusflow.cli import config as _config  # noqa: E402,F401
from focusflow.cli import transfer as _transfer  # noqa: E402,F401
from focusflow.cli import flows as _flows  # noqa: E402,F401
from focusflow.cli import ops as _ops  # noqa: E402,F401
from focusflow.cli import lapt as _lapt  # noqa: E402,F401
from focusflow.cli import evaluate as _evaluate  # noqa: E402,F401
from focusflow.cli import corpus as _corpus  # noqa: E402,F401
from focusflow.cli import models as _models  # noqa: E402,F401


def main() -> None:
    """Console entry point: known errors print one clear line and exit 1, no traceback."""
    from focusflow.config import ConfigError
    from focusflow.storage import StoreError, UnsafeNameError

    try:
        app()
    except (ConfigError, StoreError, UnsafeNameError, FileNotFoundError) as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        sys.exit(1)
