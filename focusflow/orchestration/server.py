"""A local Prefect server and UI, offline and without telemetry (``focusflow server``, the test fixture)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

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
