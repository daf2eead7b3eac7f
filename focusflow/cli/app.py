"""The Typer application every command module of ``focusflow.cli`` registers its commands on."""

from __future__ import annotations

import logging

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
