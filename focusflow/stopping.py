"""Stop when told: SIGTERM and SIGINT end a command or a flow within seconds, at a safe point, keeping what is done.

A signal only asks (:func:`request_stop`); the work stops itself where that is safe. Every stage checks before it
starts (``pipeline.run_stage``); the training loops check after every step (LAPT and align first write a checkpoint
at that step, so that the same command resumes from it); the evaluation loops check between batches; native code
that cannot check (tokenizer training, fastText) runs in a child process (:func:`call_stoppable`) that is ended at
once. Whatever still runs a stage after :data:`GRACE_S` seconds has :class:`StopRequested` raised in its thread at
its next Python instruction. Nothing half-written reaches the store: its commits are atomic.

The command line installs the handlers (:func:`stop_on_signals`) around every command, a flow around its body; a
second signal ends the process at once. This module imports nothing of focusflow but its errors: every layer
may check.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from focusflow.errors import FocusflowError

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Seconds a stop request leaves the work to reach a safe point before it is interrupted where it is.
GRACE_S = float(os.environ.get("FOCUSFLOW_STOP_GRACE_S", "10"))
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequested(FocusflowError):
    """The run was asked to stop (SIGTERM, SIGINT) and stopped; the message says what was kept and how to go on."""

    def __init__(self, message: str = "stopped: interrupted where it was, past the grace period",
                 signum: int = signal.SIGTERM) -> None:
        super().__init__(message)
        self.signum = int(signum)

    def __reduce__(self) -> tuple[Any, ...]:  # crosses process boundaries (process and Dask runners, children)
        return type(self), (str(self), self.signum)

    @property
    def exit_code(self) -> int:
        """The shell's code of a process ended by the signal: 143 for SIGTERM, 130 for SIGINT."""
        return 128 + self.signum


_requested = threading.Event()
_state: dict[str, Any] = {"signum": None, "at": None, "armed": 0}
_working: dict[int, str] = {}  # thread id -> what it runs (a stage), while it runs
_kept: list[str] = []  # what stopped work kept beyond finished stages (note_kept)
_children: set[int] = set()  # pids of call_stoppable's children: ended by their waiter, not by forwarding
_critical: dict[int, int] = {}  # thread id -> depth of unstoppable sections it is in (never interrupted there)
_timer: list[threading.Timer] = []  # the grace period's timer, started by the first signal, cancelled by reset
#: Seconds within which a repeat of the same signal is the same request (a terminal's Ctrl-C reaches a worker process
#: directly and again as forwarded), not the "second signal" that ends the process.
REPEAT_WINDOW_S = 2.0
_lock = threading.RLock()  # re-entered by a signal handler that runs while its thread holds it


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def request_stop(signum: int = signal.SIGTERM) -> None:
    """Ask every stoppable piece of work in this process to stop at its next safe point."""
    with _lock:
        if not _requested.is_set():
            _state["signum"], _state["at"] = int(signum), time.monotonic()
            _requested.set()


def stop_requested() -> bool:
    return _requested.is_set()


def requested_signal() -> int | None:
    return _state["signum"] if _requested.is_set() else None


def check_stop(what: str = "") -> None:
    """Raise :class:`StopRequested` (naming ``what`` was stopped) when a stop was asked for."""
    if _requested.is_set():
        signum = _state["signum"] or signal.SIGTERM
        raise StopRequested(f"stopped by {signal_name(signum)}{f' {what}' if what else ''}", signum)


def reset() -> None:
    """Forget a stop request and what it kept (a command that handled it; tests)."""
    with _lock:
        _requested.clear()
        _state["signum"] = _state["at"] = None
        _kept.clear()
        for pending in _timer:
            pending.cancel()
        _timer.clear()


def note_kept(what: str) -> None:
    """Record what a stopped piece of work kept beyond its finished stages (a checkpoint), for the stop's message."""
    with _lock:
        _kept.append(what)


def stop_message(detail: str = "") -> str:
    """``stopped by SIGTERM`` with what was kept (:func:`note_kept`), else ``detail``: the line a stopped command or
    flow ends with."""
    signum = _state["signum"] or signal.SIGTERM
    with _lock:
        kept = list(_kept)
    said = f": kept {'; '.join(kept)}" if kept else (f" ({detail})" if detail else "")
    return f"stopped by {signal_name(signum)}{said}"


def armed() -> bool:
    """Whether signal handlers that request a stop are installed (by the command line or a flow)."""
    return _state["armed"] > 0


def armed_depth() -> int:
    """How many nested ``stop_on_signals`` contexts are active (a flow inside a command: 2)."""
    return int(_state["armed"])


@contextlib.contextmanager
def stoppable(what: str) -> Iterator[None]:
    """Mark this thread as running ``what`` (a stage): past the grace period, a stop interrupts it where it is."""
    ident = threading.get_ident()
    with _lock:
        _working[ident] = what
    try:
        yield
    finally:
        with _lock:
            _working.pop(ident, None)


@contextlib.contextmanager
def unstoppable() -> Iterator[None]:
    """A section this thread must finish once started (a checkpoint being written, a rename that swaps a folder
    in): the grace period's interruption waits until it is left."""
    ident = threading.get_ident()
    with _lock:
        _critical[ident] = _critical.get(ident, 0) + 1
    try:
        yield
    finally:
        with _lock:
            _critical[ident] -= 1
            if not _critical[ident]:
                del _critical[ident]


def _interrupt_late_work() -> None:
    """Raise StopRequested in every thread still running a stage :data:`GRACE_S` seconds after the request (one in
    an unstoppable section is looked at again a second later)."""
    signum = _state["signum"] or signal.SIGTERM
    deferred = False
    with _lock:  # held while raising: a thread cannot leave its stage or enter a critical section meanwhile
        for ident, what in list(_working.items()):
            if ident in _critical:
                deferred = True
                continue
            log.warning("%s did not reach a safe point within %.0f s of %s: interrupting it", what, GRACE_S,
                        signal_name(signum))
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(StopRequested))
        if deferred and _requested.is_set():
            _start_timer(1.0)


def _start_timer(seconds: float) -> None:
    """(Re)start the grace period's timer (called with ``_lock`` held, or before any thread waits on it)."""
    timer = threading.Timer(seconds, _interrupt_late_work)
    timer.daemon = True
    _timer[:] = [timer]
    timer.start()


def _forward(signum: int) -> None:
    """Pass the request on to this process's worker processes (a process runner's): they install the same handlers
    around their stages and stop at their own safe points. A local Dask cluster's are left alone (their nanny would
    end them at once; the cluster closes with the run)."""
    for child in multiprocessing.active_children():
        if child.pid is not None and child.pid not in _children and "dask" not in (child.name or "").lower():
            with contextlib.suppress(OSError):
                os.kill(child.pid, signum)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGTERM and SIGINT request a stop for the duration (a second one ends the process at once); the handlers
    before are restored after. Outside the main thread (where Python cannot set handlers) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if _requested.is_set():
            if signum == _state["signum"] and time.monotonic() - (_state["at"] or 0.0) < REPEAT_WINDOW_S:
                return  # the same request again (delivered to the process group, then forwarded)
            sys.stderr.write(f"\n{signal_name(signum)} again: ending now\n")
            sys.stderr.flush()
            os._exit(128 + signum)
        request_stop(signum)
        sys.stderr.write(f"\n{signal_name(signum)}: stopping at the next safe point (what is done is kept; "
                         "a second signal ends at once)\n")
        sys.stderr.flush()
        _forward(signum)
        with _lock:
            _start_timer(GRACE_S)
            idle = not _working and threading.get_ident() not in _critical
        if idle:  # nothing here checks for the request (a command between stages, a server): stop it now
            check_stop()

    previous = {signum: signal.signal(signum, handler) for signum in SIGNALS}
    _state["armed"] += 1
    try:
        yield
    finally:
        _state["armed"] -= 1
        for signum, before in previous.items():
            signal.signal(signum, before if before is not None else signal.SIG_DFL)


# --------------------------------------------------------------------------- native code in a child process

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent: int | None = None) -> None:
    """In a child process: have Linux SIGTERM it when its parent dies (even by SIGKILL); a no-op elsewhere. If the
    parent (``parent``, its pid before the fork) is gone already, the child SIGTERMs itself: no window is left."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


def _child_entry() -> None:
    """A child process of :func:`call_stoppable`: run the call pickled in ``argv[1]``, pickle its outcome into
    ``argv[2]`` (both are files of the parent's, which it reads back once this process has exited)."""
    import pickle

    call_file, outcome_file = sys.argv[1], sys.argv[2]
    with open(call_file, "rb") as handle:
        parent, path, payload = pickle.load(handle)
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the parent's to handle: it ends us
    sys.path[:] = path  # the parent's: its function may live in a module only its path finds
    try:
        function, args, kwargs = pickle.loads(payload)
        outcome: tuple[bool, Any] = (True, function(*args, **kwargs))
    except BaseException as exc:  # noqa: BLE001 — every failure goes back to the parent, which raises it
        outcome = (False, exc)
    try:
        data = pickle.dumps(outcome)
    except Exception:  # an exception or result that does not pickle: its text
        data = pickle.dumps((False, RuntimeError(f"{type(outcome[1]).__name__}: {outcome[1]}")))
    with open(outcome_file + ".partial", "wb") as handle:
        handle.write(data)
    os.replace(outcome_file + ".partial", outcome_file)  # all of it or nothing, for the parent to read


def call_stoppable(function: Callable[..., T], *args: Any, what: str = "", **kwargs: Any) -> T:
    """``function(*args, **kwargs)`` where a stop request can end it at once: in a child process (a fresh Python
    running only this call) when signal handlers are armed, since native code does not return to Python to check;
    here otherwise. The child's result and its exception come back as they were; a stop request ends the child and
    raises :class:`StopRequested`. ``function`` must be importable by name (a module-level function)."""
    if not armed():
        return function(*args, **kwargs)
    import pickle
    import subprocess
    import tempfile

    check_stop(what)
    with tempfile.TemporaryDirectory(prefix="focusflow-child-") as folder:
        call_file, outcome_file = os.path.join(folder, "call.pickle"), os.path.join(folder, "outcome.pickle")
        with open(call_file, "wb") as handle:
            pickle.dump((os.getpid(), list(sys.path), pickle.dumps((function, args, kwargs))), handle)
        child = subprocess.Popen([sys.executable, "-c", "from focusflow.stopping import _child_entry; _child_entry()",
                                  call_file, outcome_file], stdin=subprocess.DEVNULL)
        _children.add(child.pid)
        try:
            while child.poll() is None:
                if _requested.is_set():
                    child.terminate()
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        child.wait(5)
                    check_stop(what)
                time.sleep(0.1)
        finally:
            _children.discard(child.pid)
            if child.poll() is None:
                child.kill()
                child.wait()
        if not os.path.exists(outcome_file):
            if child.returncode is not None and child.returncode < 0:  # a signal to the whole process group may
                _requested.wait(1.0)  # have ended it before this process's handler ran
            check_stop(what)
            raise RuntimeError(f"the child process running {what or function.__name__} ended (exit code "
                               f"{child.returncode}) without a result")
        with open(outcome_file, "rb") as handle:
            try:
                ok, value = pickle.load(handle)
            except Exception as exc:  # an exception that pickled but does not unpickle here
                raise RuntimeError(f"the child process running {what or function.__name__} failed, and its "
                                   f"error could not be read back ({type(exc).__name__}: {exc})") from None
    if ok:
        return value
    raise value


__all__ = ["GRACE_S", "StopRequested", "armed", "armed_depth", "call_stoppable", "check_stop", "die_with_parent",
           "note_kept", "request_stop", "requested_signal", "reset", "stop_message", "stop_on_signals",
           "stop_requested", "stoppable", "unstoppable"]
