"""Run ``focusflow`` in-process through its console entry point, as a user's shell would."""

from __future__ import annotations

import logging
import sys

import pytest


def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """``focusflow ARGS`` through the console entry point: exit code, stdout, stderr."""
    from focusflow.cli import main

    monkeypatch.setattr(sys, "argv", ["focusflow", *args])
    # the CLI's logging.basicConfig binds a handler to this test's captured stderr: keep it to this test
    monkeypatch.setattr(logging.root, "handlers", [])
    try:
        main()
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def error_lines(err: str) -> list[str]:
    """The ``error:`` lines of a command's stderr (warnings such as store retries may come before them)."""
    return [line for line in err.splitlines() if line.startswith("error:")]
