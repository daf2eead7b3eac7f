"""Quiet by default: library noise never reaches a log handler (what a user sees), ``--verbose`` shows it."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from focusflow.logs import VERBOSE_ENV, NoiseFilter, configure_output
from tests.tiny_models import sample_texts, save_tiny

LOAD_REPORT = "LOAD REPORT"
TOO_LONG = "sequence length is longer than the specified maximum"


@pytest.fixture(autouse=True)
def _output_policy(restore_output_policy):
    """Every test here changes the output policy; conftest's fixture undoes it."""


@pytest.fixture(scope="module")
def tiny_xlmr(tmp_path_factory) -> Path:
    return save_tiny("xlmr", tmp_path_factory.mktemp("tiny") / "xlmr")


def test_loading_a_body_prints_no_load_report_unless_verbose(tiny_xlmr, caplog):
    """Our loader takes the encoder body of an MLM checkpoint: transformers reports the unused head."""
    from focusflow.models.source import load_source

    configure_output(verbose=False)
    load_source(tiny_xlmr, with_head=False)
    assert LOAD_REPORT not in caplog.text

    configure_output(verbose=True)
    load_source(tiny_xlmr, with_head=False)
    assert LOAD_REPORT in caplog.text and "lm_head" in caplog.text


def test_other_transformers_warnings_stay():
    configure_output(verbose=False)
    logger = logging.getLogger("transformers.modeling_utils")
    kept = logging.makeLogRecord({"name": logger.name, "levelno": logging.WARNING, "msg": "This checkpoint seem corrupted."})
    dropped = logging.makeLogRecord({"name": logger.name, "levelno": logging.WARNING,
                                     "msg": "\x1b[1mBertModel LOAD REPORT\x1b[0m from: x\n..."})
    assert logger.filter(kept) and not logger.filter(dropped)


def test_tokenizing_long_documents_for_statistics_does_not_warn(tiny_xlmr, caplog):
    """Unigram counts and tokenizer metrics read whole documents on purpose: no 'longer than maximum'."""
    from transformers import AutoTokenizer

    from focusflow.models.lm_stats import unigram_counts
    from focusflow.tokenizer.metrics import _encode_batch

    document = " ".join(sample_texts(40))
    configure_output(verbose=True)  # silenced at the call, not by a filter: even verbose shows nothing

    def short_tokenizer():
        tokenizer = AutoTokenizer.from_pretrained(tiny_xlmr)
        tokenizer.model_max_length = 16
        return tokenizer

    short_tokenizer()([document])  # the plain call warns: the case is real
    assert TOO_LONG in caplog.text
    caplog.clear()
    assert unigram_counts(short_tokenizer(), [document]).sum() > 16
    assert len(_encode_batch(_WithoutBackend(short_tokenizer()), [document])[0][0]) > 16
    assert TOO_LONG not in caplog.text


class _WithoutBackend:
    """A tokenizer as metrics sees one without ``backend_tokenizer``: it falls back to ``__call__``."""

    def __init__(self, tokenizer) -> None:
        self._tokenizer = tokenizer

    def __call__(self, *args, **kwargs):
        return self._tokenizer(*args, **kwargs)


def test_cli_is_quiet_by_default_and_its_verbose_flag_reaches_flows(tmp_path):
    from focusflow.cli import app

    report_logger = logging.getLogger("transformers.modeling_utils")
    assert CliRunner().invoke(app, ["store", "ls", "--store", str(tmp_path)]).exit_code == 0
    assert any(isinstance(f, NoiseFilter) for f in report_logger.filters)
    assert VERBOSE_ENV not in os.environ

    assert CliRunner().invoke(app, ["--verbose", "store", "ls", "--store", str(tmp_path)]).exit_code == 0
    assert not any(isinstance(f, NoiseFilter) for f in report_logger.filters)
    assert configure_output() is True  # what a flow started from this process applies


def test_model_loads_show_no_progress_bar_unless_verbose(tiny_xlmr, capfd, monkeypatch):
    """One progress bar per long stage: transformers' per-load 'Loading weights' bar is not one of them."""
    from focusflow.models.loading import load_source

    configure_output(verbose=False)
    load_source(tiny_xlmr)
    assert "Loading weights" not in capfd.readouterr().err
    monkeypatch.setenv(VERBOSE_ENV, "1")
    load_source(tiny_xlmr)
    assert "Loading weights" in capfd.readouterr().err


def test_quiet_mode_keeps_prefect_console_to_warnings(monkeypatch):
    monkeypatch.delenv("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", raising=False)
    configure_output(verbose=False)
    assert os.environ["PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"] == "WARNING"  # the Prefect UI still gets every log


def _failed_run_record(error: Exception) -> logging.LogRecord:
    try:
        raise error
    except Exception:
        import sys

        return logging.LogRecord("prefect.task_runs", logging.ERROR, __file__, 1, "Task run failed with exception: %r",
                                 (error,), sys.exc_info())


def _console_text(record: logging.LogRecord) -> str:
    for installed in logging.getLogger("prefect.task_runs").filters:
        installed.filter(record)
    return logging.Formatter().format(record)


def test_a_failed_run_of_a_user_error_logs_one_line_without_its_traceback_unless_verbose():
    from focusflow.errors import InputError

    configure_output(verbose=False)
    quiet = _console_text(_failed_run_record(InputError("corpus is empty")))
    assert "corpus is empty" in quiet and "Traceback" not in quiet
    assert "Traceback" in _console_text(_failed_run_record(RuntimeError("a bug")))  # a bug keeps its traceback

    configure_output(verbose=True)
    assert "Traceback" in _console_text(_failed_run_record(InputError("corpus is empty")))


def test_the_cli_console_drops_a_user_errors_run_records_which_its_error_line_repeats():
    from focusflow.errors import InputError
    from focusflow.logs import UserErrorConsole

    configure_output(verbose=False)
    console = UserErrorConsole()
    user_error = _failed_run_record(InputError("corpus is empty"))
    _console_text(user_error)
    assert not console.filter(user_error)
    closing = logging.LogRecord("prefect.task_runs", logging.ERROR, __file__, 1, "Finished in state Failed('Task run "
                                "encountered an exception InputError: corpus is empty')", (), None)
    _console_text(closing)
    assert not console.filter(closing)
    bug = _failed_run_record(RuntimeError("a bug"))
    closing_bug = logging.LogRecord("prefect.task_runs", logging.ERROR, __file__, 1, "Finished in state Failed('Task "
                                    "run encountered an exception RuntimeError: a bug')", (), None)
    for record in (bug, closing_bug):
        _console_text(record)
        assert console.filter(record)  # a bug keeps its lines (and traceback)


def test_a_long_stage_off_a_terminal_prints_a_progress_line_every_30_seconds(monkeypatch, caplog):
    """The demo's source, align and LAPT stages ran minutes with no output when stderr was a file."""
    import logging

    from focusflow import logs

    now = [0.0]
    monkeypatch.setattr(logs.time, "perf_counter", lambda: now[0])
    caplog.set_level(logging.INFO, logger=logs.progress_lines.name)
    with logs.ProgressBar("LAPT", total=100) as bar:  # pytest's captured stderr is not a terminal
        for step in range(1, 101):
            now[0] += 2.0
            bar.update(step, 5.0)
    assert [r.getMessage() for r in caplog.records] == [
        "LAPT: 15/100, loss 5.000, 30 s, ETA 2 min 50 s", "LAPT: 30/100, loss 5.000, 1 min 00 s, ETA 2 min 20 s",
        "LAPT: 45/100, loss 5.000, 1 min 30 s, ETA 1 min 50 s", "LAPT: 60/100, loss 5.000, 2 min 00 s, ETA 1 min 20 s",
        "LAPT: 75/100, loss 5.000, 2 min 30 s, ETA 50 s", "LAPT: 90/100, loss 5.000, 3 min 00 s, ETA 20 s"]


def test_prefects_exit_drain_report_is_dropped_unless_verbose(caplog, monkeypatch):
    """evaluate-checkpoint's error line was followed by "EventsWorker: Still processing items: 1 items remaining"."""
    import logging

    from focusflow.logs import VERBOSE_ENV, configure_output

    monkeypatch.setenv(VERBOSE_ENV, "")  # configure_output(True) sets it: restored after the test
    configure_output(False)
    caplog.set_level(logging.WARNING)
    for name in ("EventsWorker", "APILogWorker"):
        logging.getLogger(name).warning("Still processing items: 1 items remaining...")
    logging.getLogger("EventsWorker").warning("another warning stays")
    assert [r.getMessage() for r in caplog.records] == ["another warning stays"]
    configure_output(True)
    logging.getLogger("EventsWorker").warning("Still processing items: 2 items remaining...")
    assert caplog.records[-1].getMessage() == "Still processing items: 2 items remaining..."
    configure_output(False)
