"""The Typer application every command module of ``focusflow.cli`` registers its commands on.

It holds the CLI's one error policy: every command is registered through ``FocusflowTyper``, which
turns focusflow's own errors (``FocusflowError``, a missing file) and a full disk (wherever it struck:
the store commits nothing then) into one line on stderr and exit code 2, under the console entry point
and under Typer's ``CliRunner`` alike. Any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno
import functools
import logging
import signal
from collections.abc import Callable
from typing import Any

import typer

from focusflow import __version__
from focusflow.errors import cause_chain, is_user_error
from focusflow.logs import RunFormatter, UserErrorConsole, configure_output, show_stage_lines
from focusflow.stopping import StopRequested, requested_signal, stop_message, stop_on_signals
from focusflow.stopping import reset as reset_stop

USER_ERROR_EXIT = 2


#: OSErrors that say the disk is full, with what to tell the user.
DISK_FULL = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
             errno.EFBIG: "file too large for the file system"}


def disk_full(error: BaseException | None) -> OSError | None:
    """The full-disk OSError behind ``error`` (itself, or what it was raised from), if there is one."""
    return next((e for e in cause_chain(error) if isinstance(e, OSError) and e.errno in DISK_FULL), None)


def disk_full_message(error: OSError) -> str:
    where = f" writing {error.filename}" if error.filename else ""
    return (f"{DISK_FULL[error.errno]}{where}; nothing was stored: free space, or point TMPDIR (staging), "
            "FOCUSFLOW_STORE and FOCUSFLOW_WORK_DIR at a disk with room, and run the command again")


def error_line(error: BaseException) -> str:
    """The error's message on one line (a multi-line message's lines joined)."""
    return " ".join(line.strip() for line in str(error).splitlines() if line.strip()) or type(error).__name__


#: What a stopped command kept, unless its registration says otherwise (``app.command(name, keeps=…)``).
STORE_KEEPS = "every finished stage is in the store"


def report_user_errors(command: Callable[..., Any], keeps: str = STORE_KEEPS) -> Callable[..., Any]:
    """Run ``command`` so that SIGTERM and SIGINT stop it at a safe point (``focusflow.stopping``): one ``stopped:``
    line saying what was kept (``keeps``, formatted with the command's arguments: ``{out}``) and how to go on, exit
    code 143 (SIGTERM) or 130 (SIGINT); a user error becomes ``error: <message>`` on stderr and exit code 2."""
    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            with stop_on_signals():
                return command(*args, **kwargs)
        except BaseException as exc:
            stopped = stopped_by(exc)
            if stopped is not None:
                typer.secho(f"{error_line(stopped)}; {keeps.format(**kwargs)}: run the same command again to go on "
                            "from there", fg=typer.colors.YELLOW, err=True)
                reset_stop()
                raise typer.Exit(stopped.exit_code) from None
            if not isinstance(exc, Exception):
                raise
            full = disk_full(exc)
            if full is None and not is_user_error(exc):
                raise
            message = disk_full_message(full) if full is not None else error_line(exc)
            typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
            raise typer.Exit(USER_ERROR_EXIT) from None
    return run


#: What a stopped flow raises to its caller (Prefect's): a run ended Cancelled, a result that never came because the
#: stage before it stopped, the engine's own SIGTERM bridge.
STOPPED_RUN_ERRORS = frozenset({"CancelledRun", "UnfinishedRun", "TerminationSignal"})


def stopped_by(error: BaseException) -> StopRequested | None:
    """The stop behind ``error``: the StopRequested itself or one it was raised from; a KeyboardInterrupt; or, once a
    stop was asked for, what a stopped flow raises (``STOPPED_RUN_ERRORS``). Any other error stays an error, even
    after a signal (a full disk while the stop's checkpoint was written is said as such)."""
    found = next((e for e in cause_chain(error) if isinstance(e, StopRequested)), None)
    if found is not None:
        return found
    signum = requested_signal()
    if isinstance(error, KeyboardInterrupt):
        return StopRequested(stop_message(), signum or signal.SIGINT)
    if signum is not None and type(error).__name__ in STOPPED_RUN_ERRORS:
        return StopRequested(stop_message(), signum)
    return None


class FocusflowTyper(typer.Typer):
    """A Typer whose every command reports user errors by the one policy (``report_user_errors``); ``keeps`` says
    what a stopped command kept when that is not the store (``evaluate``: its ``--out`` folder)."""

    def command(self, *args: Any, keeps: str = STORE_KEEPS,
                **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        register = super().command(*args, **kwargs)

        def decorator(function: Callable[..., Any]) -> Callable[..., Any]:
            register(report_user_errors(function, keeps))
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
    show_stage_lines()
    # Libraries' loggers (Prefect's) propagate INFO records here whatever the root's level: the handler's own
    # level keeps them off the console unless verbose (the Prefect UI still gets them).
    handler = logging.StreamHandler()
    handler.setLevel(logging.INFO if verbose else logging.WARNING)
    handler.setFormatter(RunFormatter("%(levelname)s %(name)s: %(message)s"))
    if not verbose:  # an input error is the command's one `error:` line, not also a run's ERROR records
        handler.addFilter(UserErrorConsole())
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])
