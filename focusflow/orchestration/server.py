"""A local Prefect server and UI, offline and without telemetry (``focusflow server``, the test fixture), and the
run's own API server that dies with it (``local_api``, for ``focusflow run|demo|evaluate-checkpoint``)."""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from focusflow.errors import UnavailableError
from focusflow.storage.work_folders import claim

#: Offline, no-telemetry settings for a local Prefect server.
OFFLINE_SERVER_ENV = {"DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def server_command(host: str = "127.0.0.1", port: int = 4200, *, ui: bool = True,
                   home: str | Path | None = None, extra_args: Sequence[str] = ()) -> tuple[list[str], dict[str, str]]:
    """argv and environment of ``prefect server start`` for a local server + UI, analytics off.

    ``home`` sets PREFECT_HOME (the server's SQLite database lives there).
    """
    argv = [sys.executable, "-m", "prefect", "server", "start", "--host", host, "--port", str(port),
            "--analytics-off", "--ui" if ui else "--no-ui", *extra_args]
    env = {**os.environ, **OFFLINE_SERVER_ENV}
    # the UI calls the API at PREFECT_UI_API_URL, which defaults to port 4200 whatever --port says
    env.setdefault("PREFECT_UI_API_URL", f"http://{host}:{port}/api")
    if home is not None:
        env["PREFECT_HOME"] = str(home)
    return argv, env


# --- the run's own API server (``focusflow run|demo|evaluate-checkpoint`` without PREFECT_API_URL) -------------
#
# Left alone, Prefect starts an "ephemeral" API server itself (prefect.server.api.server.SubprocessASGIServer, a
# plain ``subprocess.Popen`` of uvicorn, stopped by an ``atexit`` hook). atexit does not run on SIGKILL, and Prefect
# has no setting or hook for the child's preexec_fn, so after ``kill -9`` that server lives on with parent PID 1,
# holding its port and the SQLite file in PREFECT_HOME. Prefect may also start it from one of its worker threads,
# and a parent-death signal follows the thread that forked. So focusflow starts that same server (Prefect's own
# command and environment for it) from the main thread, with PR_SET_PDEATHSIG, and points PREFECT_API_URL at it:
# Prefect then never starts its own.

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with_parent_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has Linux SIGTERM the child when its parent dies (even by SIGKILL); None off Linux.

    prctl is looked up here, in the parent; the child only calls it. If the parent is gone already (it died
    between fork and prctl), the child SIGTERMs itself: no window is left.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)

    return hook


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class LocalApi:
    """A local Prefect API server process of this process (``start_local_api``)."""

    process: subprocess.Popen
    port: int

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.api_url}/health", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, timeout: float = 10) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_local_api(port: int | None = None) -> LocalApi:
    """Start Prefect's ephemeral API server (no UI, the ephemeral services) on 127.0.0.1; do not wait for it.

    The command and environment are those of Prefect's own ephemeral server (SubprocessASGIServer), so the
    database (PREFECT_HOME) and services are the same; the difference is that this one dies with this process,
    even on SIGKILL (Linux). Call it from the main thread: the parent-death signal follows the forking thread.
    """
    spec = importlib.util.find_spec("prefect")  # not imported: prefect.__module_path__.parent, as Prefect passes
    app_dir = Path(spec.origin).parent.parent if spec and spec.origin else Path(sys.prefix)
    port = port or _free_port()
    argv = [sys.executable, "-m", "uvicorn", "--app-dir", str(app_dir), "--factory",
            "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port),
            "--log-level", "error", "--lifespan", "on"]
    env = {key: value for key, value in os.environ.items() if key != "PREFECT_API_URL"}
    env.update(OFFLINE_SERVER_ENV)
    env.update({"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"})
    # its own session: a terminal's Ctrl-C or ``timeout``'s SIGTERM to the whole process group reaches only us, and
    # the server stays up until the stopped run has reported its Cancelled state (``local_api`` stops it after)
    process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent_hook(),
                               start_new_session=True)
    return LocalApi(process=process, port=port)


def wait_healthy(api: LocalApi, timeout: float) -> LocalApi:
    """Wait until ``api`` answers /health; a port taken meanwhile (uvicorn exits 3) is retried on another."""
    deadline = time.monotonic() + timeout
    while not api.healthy():
        code = api.process.poll()
        if code == 3:
            api = start_local_api()
        elif code is not None:
            raise UnavailableError(f"the local Prefect API server exited with {code} before it was healthy")
        elif time.monotonic() > deadline:
            api.stop()
            raise UnavailableError(f"the local Prefect API server was not healthy after {timeout:.0f} s "
                               "(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS)")
        time.sleep(0.2)
    return api


@contextlib.contextmanager
def local_api() -> Iterator[str | None]:
    """PREFECT_API_URL for the body: the one set already, else a local server started here and stopped after.

    Replaces Prefect's ephemeral server, which would outlive a SIGKILL of this process (see above).
    """
    if os.environ.get("PREFECT_API_URL"):
        yield os.environ["PREFECT_API_URL"]
        return
    timeout = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120"))
    with claim(_prefect_home() / "focusflow-api-start"):  # two runs with one PREFECT_HOME: one migrates its database
        api = start_local_api()
        try:
            api = wait_healthy(api, timeout)
        except BaseException:
            api.stop()
            raise
    try:
        from prefect.settings import PREFECT_API_URL, temporary_settings

        os.environ["PREFECT_API_URL"] = api.api_url  # and so for subprocesses
        try:
            with temporary_settings(updates={PREFECT_API_URL: api.api_url}):
                yield api.api_url
        finally:
            _drain_prefect_workers()
            os.environ.pop("PREFECT_API_URL", None)
    finally:
        api.stop()


def _prefect_home() -> Path:
    """The folder of Prefect's database: what a local API server opens (and migrates) on start."""
    from prefect.settings import get_current_settings

    return Path(get_current_settings().home).expanduser()


def _drain_prefect_workers() -> None:
    """Send the logs and events Prefect still holds to the server before it stops (as Prefect's test harness does)."""
    try:
        from prefect.events.worker import EventsWorker
        from prefect.logging.handlers import APILogWorker

        APILogWorker.drain_all(timeout=5)
        EventsWorker.drain_all(timeout=5)
    except Exception:  # best effort: the run's result does not depend on it
        pass
