"""The local Prefect API server of ``focusflow run|demo|evaluate-checkpoint`` dies with its parent, even on SIGKILL.

Each test starts the server as focusflow does (``focusflow.orchestration.server``) in a child Python process,
SIGKILLs that child (no atexit, no finally) and checks that the server process is gone soon after, not left
running with parent PID 1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")

REPO = Path(__file__).resolve().parents[2]

# start (and, with "healthy", wait for) the server, print its PID and API URL, then wait to be killed
CHILD = """
import json, sys, time
from focusflow.orchestration import server
api = server.start_local_api()
if sys.argv[1] == "healthy":
    api = server.wait_healthy(api, 600)
print(json.dumps({"pid": api.process.pid, "url": api.api_url, "port": api.port}), flush=True)
time.sleep(900)
"""


def _alive(pid: int) -> bool:
    """Running, not a zombie (a container's PID 1 may never reap the orphan)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _kill_parent_and_wait(child: subprocess.Popen, server_pid: int, within_s: float) -> None:
    assert _alive(server_pid)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    deadline = time.monotonic() + within_s
    while _alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        assert not _alive(server_pid), f"the server ({server_pid}) outlived the SIGKILLed focusflow process"
    finally:
        if _alive(server_pid):
            os.kill(server_pid, signal.SIGKILL)  # leave no orphan behind a failing test


def _child(mode: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, mode], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "PREFECT_HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    env.pop("PREFECT_API_URL", None)
    return env


def test_server_dies_with_its_sigkilled_parent_while_starting(tmp_path: Path) -> None:
    """Killed while the server still imports: it is SIGTERMed at once (seconds, no server start-up to wait for)."""
    child = _child("starting", _env(tmp_path))
    try:
        started = json.loads(child.stdout.readline())
        _kill_parent_and_wait(child, started["pid"], within_s=10)
    finally:
        if child.poll() is None:
            child.kill()
        child.stdout.close()


@pytest.mark.slow
def test_healthy_server_dies_with_its_sigkilled_parent(tmp_path: Path) -> None:
    """The case of the review: a serving API (port bound, SQLite open) stops once ``focusflow run`` is kill -9ed."""
    import socket
    import urllib.request

    child = _child("healthy", _env(tmp_path))
    try:
        line = child.stdout.readline()
        assert line, "the child exited before the server was healthy"
        started = json.loads(line)
        with urllib.request.urlopen(f"{started['url']}/health", timeout=5) as response:
            assert response.status == 200
        _kill_parent_and_wait(child, started["pid"], within_s=30)
        with socket.socket() as sock:  # nothing listens on the port any more (TIME_WAIT aside, as for any server)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", started["port"]))
    finally:
        if child.poll() is None:
            child.kill()
        child.stdout.close()
