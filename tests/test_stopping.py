"""SIGTERM and SIGINT ask the work to stop at a safe point; native code runs in a child a stop ends at once."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from focusflow import stopping
from focusflow.errors import InputError
from focusflow.stopping import StopRequested, call_stoppable, check_stop, request_stop, stop_on_signals


@pytest.fixture(autouse=True)
def _no_stop_left_behind():
    stopping.reset()
    yield
    stopping.reset()


def test_a_stop_is_asked_for_then_raised_where_the_work_checks():
    check_stop("nothing asked yet")
    request_stop(signal.SIGINT)
    with pytest.raises(StopRequested, match="stopped by SIGINT before tokenizer") as stopped:
        check_stop("before tokenizer")
    assert stopped.value.exit_code == 130
    stopping.reset()
    check_stop("forgotten")


def test_the_stop_message_names_what_was_kept():
    request_stop(signal.SIGTERM)
    assert stopping.stop_message("the flow ended") == "stopped by SIGTERM (the flow ended)"
    stopping.note_kept("LAPT's checkpoint at step 12 of 40")
    assert stopping.stop_message() == "stopped by SIGTERM: kept LAPT's checkpoint at step 12 of 40"


def _wait_for_request() -> None:
    deadline = time.monotonic() + 5
    while not stopping.stop_requested() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_the_signal_handlers_ask_a_running_stage_to_stop_and_are_restored():
    before = signal.getsignal(signal.SIGTERM)
    with stop_on_signals(), stopping.stoppable("a stage"):
        assert stopping.armed()
        os.kill(os.getpid(), signal.SIGTERM)
        _wait_for_request()
        assert stopping.requested_signal() == signal.SIGTERM
        os.kill(os.getpid(), signal.SIGTERM)  # the same signal again at once: the same request, not "end now"
        time.sleep(0.1)
        with pytest.raises(StopRequested):
            check_stop("at the stage's next safe point")
    assert signal.getsignal(signal.SIGTERM) is before and not stopping.armed()


def test_with_nothing_running_that_checks_a_signal_stops_the_command_at_once():
    """A command between stages, or a server loop, never reaches a check: the handler raises where it is."""
    with pytest.raises(StopRequested, match="stopped by SIGINT"), stop_on_signals():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
        pytest.fail("the signal did not stop the command")


def test_a_stop_request_survives_pickling_with_its_signal():
    import pickle

    again = pickle.loads(pickle.dumps(StopRequested("stopped by SIGINT", signal.SIGINT)))
    assert str(again) == "stopped by SIGINT" and again.exit_code == 130


def _double(value: int) -> int:
    return 2 * value


def _refuse(value: str) -> None:
    raise InputError(f"bad {value}")


def _sleep(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


def test_call_stoppable_runs_here_unless_armed_and_in_a_child_when_armed():
    assert call_stoppable(_double, 21) == 42  # not armed: in this process
    with stop_on_signals():
        assert call_stoppable(_double, 21, what="doubling") == 42
        with pytest.raises(InputError, match="bad input"):  # the child's own exception, as it was raised
            call_stoppable(_refuse, "input")


def test_a_stop_ends_the_child_at_once():
    with stop_on_signals():
        timer = threading.Timer(1.0, request_stop, args=(signal.SIGTERM,))
        timer.start()
        started = time.monotonic()
        with pytest.raises(StopRequested, match="in a long native call"):
            call_stoppable(_sleep, 60, what="in a long native call")
        assert time.monotonic() - started < 10


def test_work_that_never_checks_is_interrupted_after_the_grace_period(monkeypatch):
    """A stage thread that never reaches a check gets StopRequested raised at its next Python instruction."""
    outcome: list[str] = []

    def busy() -> None:
        with stopping.stoppable("a busy stage"):
            try:
                while True:
                    sum(range(1000))
            except StopRequested:
                outcome.append("stopped")

    worker = threading.Thread(target=busy)
    worker.start()
    time.sleep(0.2)
    request_stop(signal.SIGTERM)
    stopping._interrupt_late_work()  # what the handler's timer calls after GRACE_S
    worker.join(10)
    assert outcome == ["stopped"] and not worker.is_alive()


def test_an_unstoppable_section_is_finished_before_the_grace_period_interrupts(monkeypatch):
    """A checkpoint being written, a folder being swapped in: interrupted only once the section is left."""
    events: list[str] = []
    inside, leave = threading.Event(), threading.Event()

    def saving() -> None:
        with stopping.stoppable("LAPT"):
            try:
                with stopping.unstoppable():
                    inside.set()
                    leave.wait(10)
                    events.append("checkpoint written")
                while True:
                    sum(range(1000))
            except StopRequested:
                events.append("stopped")

    worker = threading.Thread(target=saving)
    worker.start()
    inside.wait(5)
    request_stop(signal.SIGTERM)
    stopping._interrupt_late_work()  # the grace period ends while the checkpoint is written: deferred 1 s
    time.sleep(0.3)
    leave.set()
    worker.join(10)
    assert events == ["checkpoint written", "stopped"] and not worker.is_alive()


def test_after_a_stop_only_the_stop_and_what_it_caused_are_said_as_a_stop():
    """A real error while stopping (a full disk writing the stop's checkpoint) stays an error."""
    from focusflow.cli.app import stopped_by
    from focusflow.storage import StoreError

    assert stopped_by(KeyboardInterrupt()).exit_code == 130
    request_stop(signal.SIGTERM)
    assert stopped_by(StoreError("no space left on device")) is None
    cancelled = type("CancelledRun", (Exception,), {})("stopped by SIGTERM")
    assert stopped_by(cancelled).exit_code == 143
    try:
        try:
            raise StopRequested("stopped by SIGTERM before tokenizer")
        except StopRequested as exc:
            raise RuntimeError("a task failed") from exc
    except RuntimeError as wrapped:
        assert str(stopped_by(wrapped)) == "stopped by SIGTERM before tokenizer"
