"""The Typer application every command module of ``focusflow.cli`` registers its commands on.

It holds the CLI's one error policy: every command is registered through ``FocusflowTyper``, which
turns focusflow's own errors (``FocusflowError``, a missing file) into one line on stderr and exit
code 2, under the console entry point and under Typer's ``CliRunner`` alike. Any other exception is
a bug and keeps its traceback.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import typer

from focusflow import __version__
from focusflow.errors import FocusflowError
from focusflow.logs import configure_output

USER_ERROR_EXIT = 2
USER_ERRORS: tuple[type[BaseException], ...] = (FocusflowError, FileNotFoundError, NotADirectoryError,
                                                 IsADirectoryError)


def one_line(error: BaseException) -> str:
    """The error's message on one line (a multi-line message's lines joined)."""
    return " ".join(line.strip() for line in str(error).splitlines() if line.strip()) or type(error).__name__


def report_user_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``command``; a user error becomes ``error: <message>`` on stderr and exit code 2."""
    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except USER_ERRORS as exc:
            typer.secho(f"error: {one_line(exc)}", fg=typer.colors.RED, err=True)
            raise typer.Exit(USER_ERROR_EXIT) from None
    return run


class FocusflowTyper(typer.Typer):
    """A Typer whose every command reports user errors by the one policy (``report_user_errors``)."""

    def command(self, *args: Any, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        register = super().command(*args, **kwargs)

        def decorator(function: Callable[..., Any]) -> Callable[..., Any]:
            register(report_user_errors(function))
            return function
        return decorator


app = FocusflowTyper(
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
