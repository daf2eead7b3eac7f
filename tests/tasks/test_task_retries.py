"""A stage task retries only what may pass: an input error (a ``FocusflowError``) fails at once, a transient
error (a dropped connection) is retried by the stages that read from the network."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from focusflow.errors import InputError
from focusflow.pipeline import params_for
from focusflow.tasks import stages as stage_tasks
from focusflow.tasks.stages import STAGE_TASKS


class _Calls:
    """``run_stage`` as the tasks call it, counted; ``fail_first`` raises before the first real call."""

    def __init__(self, fail_first: Exception | None = None) -> None:
        self.count, self.fail_first, self.real = 0, fail_first, stage_tasks.run_stage

    def __call__(self, *args, **kwargs):
        self.count += 1
        if self.fail_first is not None and self.count == 1:
            raise self.fail_first
        return self.real(*args, **kwargs)


def _run_corpus_task(store: Path, corpus: Path, monkeypatch, calls: _Calls, **options):
    from prefect import flow

    from focusflow.config import load_config

    monkeypatch.setattr(stage_tasks, "run_stage", calls)
    cfg = load_config(language="sw", corpus={"source": "local", "paths": [str(corpus)]})
    corpus_task = STAGE_TASKS["corpus"].with_options(**options)

    @flow
    def corpus_only() -> str:
        return corpus_task(store.as_uri(), params_for("corpus", cfg), {}, language="sw")

    return corpus_only()


def test_the_network_stages_retry():
    assert STAGE_TASKS["corpus"].retries == 2 and STAGE_TASKS["source"].retries == 2


def test_an_input_error_fails_the_task_at_once_without_retries(prefect_server, tmp_path, monkeypatch):
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    calls = _Calls()
    with pytest.raises(InputError, match="no document"):
        _run_corpus_task(tmp_path / "store", empty, monkeypatch, calls)
    assert calls.count == 1


def test_a_read_only_disk_fails_the_task_at_once_without_retries(prefect_server, tmp_path, monkeypatch):
    """``errors.is_permanent``, the store transport's rule too: EROFS, EACCES, ENOTDIR, a full disk stay as they are."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Habari ya asubuhi rafiki yangu mpendwa.", encoding="utf-8")
    calls = _Calls(fail_first=OSError(errno.EROFS, "Read-only file system", str(tmp_path / "store" / "corpus")))
    with pytest.raises(OSError, match="Read-only file system"):
        _run_corpus_task(tmp_path / "store", corpus, monkeypatch, calls, retry_delay_seconds=0)
    assert calls.count == 1


def test_a_transient_error_is_retried(prefect_server, tmp_path, monkeypatch):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"Habari ya asubuhi rafiki yangu mpendwa, nambari {i}." for i in range(50)),
                      encoding="utf-8")
    calls = _Calls(fail_first=ConnectionResetError("connection reset by peer"))
    uri = _run_corpus_task(tmp_path / "store", corpus, monkeypatch, calls, retry_delay_seconds=0)
    assert calls.count == 2 and uri.startswith((tmp_path / "store").as_uri())


def test_a_path_the_user_mistyped_is_their_error_for_the_command_line_and_the_retry_rule_alike():
    """Issue 46: the CLI counted FileNotFoundError as the user's, the retry rule as transient: a mistyped
    corpus.paths was retried twice, 10 s and 60 s apart."""
    from focusflow.errors import is_permanent, is_user_error

    mistyped = FileNotFoundError(2, "No such file or directory", "/data/corpsu.txt")
    assert is_user_error(mistyped) and is_permanent(mistyped)
    assert not is_user_error(ConnectionResetError()) and not is_permanent(TimeoutError())
