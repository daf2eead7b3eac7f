"""A real local Prefect server (API, UI, services), started once per test session (a fixture of every folder).

Tests that talk to Prefect take the ``prefect_server`` fixture: it starts ``prefect server start``
on a free 127.0.0.1 port with a temporary PREFECT_HOME (its own SQLite database) and analytics off,
waits for ``/api/health``, points this process (settings context) and its subprocesses
(``PREFECT_API_URL``) at it, and stops it at the end of the session. Cold start ≈ 35 s here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SERVER_START_TIMEOUT_S = float(os.environ.get("FOCUSFLOW_TEST_SERVER_TIMEOUT", "240"))


@dataclass
class PrefectServer:
    url: str          # http://127.0.0.1:PORT (the UI)
    api_url: str      # http://127.0.0.1:PORT/api
    home: Path        # PREFECT_HOME of the server
    log_file: Path
    process: subprocess.Popen

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_file.read_text(encoding="utf-8", errors="replace")[-chars:]
        except OSError:
            return ""


def _healthy(api_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM the server's process group (uvicorn runs in a child), SIGKILL if it lingers."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=10)


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectServer]:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from focusflow.orchestration.server import server_command
    from tests.conftest import free_port

    home = tmp_path_factory.mktemp("prefect-home")
    port = free_port()
    argv, env = server_command("127.0.0.1", port, ui=True, home=home, extra_args=["--log-level", "WARNING"])
    env.pop("PREFECT_API_URL", None)
    env["PREFECT_SERVER_API_HOST"] = "127.0.0.1"
    log_file = home / "server.log"
    with open(log_file, "wb") as log:
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    server = PrefectServer(url=f"http://127.0.0.1:{port}", api_url=f"http://127.0.0.1:{port}/api", home=home,
                           log_file=log_file, process=process)
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while not _healthy(server.api_url):
        if process.poll() is not None:
            pytest.fail(f"prefect server exited with {process.returncode} before it was healthy:\n{server.log_tail()}")
        if time.monotonic() > deadline:
            _stop(process)
            pytest.fail(f"prefect server not healthy after {SERVER_START_TIMEOUT_S:.0f} s:\n{server.log_tail()}")
        time.sleep(0.5)

    saved = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = server.api_url
    try:
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            yield server
    finally:
        if saved is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = saved
        _stop(process)
