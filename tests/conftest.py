"""Shared fixtures: a local store, an in-process S3 server on 127.0.0.1, the shared data folder."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.prefect_server import prefect_server  # noqa: F401  (the session's Prefect server, for every folder)

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# Offline by default: Hugging Face Hub and Prefect telemetry are unreachable here.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("FOCUSFLOW_CEILING_SECONDS", "0.3")  # a CPU ceiling in 0.3 s, not 6: tests do not check MFU
# the tests' numbers, clocks and precisions are a CPU's wherever they run (a GPU machine too, and the processes they
# start); a test marked ``gpu`` runs on the GPU instead (``_device_of_the_test``)
os.environ.setdefault("FOCUSFLOW_DEVICE", "cpu")


@pytest.fixture(autouse=True)
def _device_of_the_test(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test marked ``gpu`` trains on the CUDA device (skipped without one); every other test on the CPU."""
    if request.node.get_closest_marker("gpu") is None:
        return
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    monkeypatch.delenv("FOCUSFLOW_DEVICE", raising=False)


@pytest.fixture(autouse=True, scope="session")
def _isolated_default_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """CLI stage commands write to the default store: one fresh store per test session, never the user's."""
    saved = {name: os.environ.get(name) for name in ("FOCUSFLOW_STORE", "FOCUSFLOW_WORK_DIR")}
    os.environ["FOCUSFLOW_STORE"] = str(tmp_path_factory.mktemp("default-store"))
    os.environ["FOCUSFLOW_WORK_DIR"] = str(tmp_path_factory.mktemp("default-work"))
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture()
def restore_output_policy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Undo what a test does to focusflow's output policy: FOCUSFLOW_VERBOSE and the noise filters."""
    import logging

    from focusflow.logs import NOISE, RUN_FAILURE_LOGGERS, VERBOSE_ENV, NoiseFilter, UserErrorTraceback

    monkeypatch.setenv(VERBOSE_ENV, "0")  # recorded, so that what a test sets is undone
    monkeypatch.delenv(VERBOSE_ENV)
    yield
    for name in (*NOISE, *RUN_FAILURE_LOGGERS):
        logger = logging.getLogger(name)
        for installed in [f for f in logger.filters if isinstance(f, (NoiseFilter, UserErrorTraceback))]:
            logger.removeFilter(installed)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture()
def shared_data() -> Path:
    """../shared/data beside the project; tests that need it skip with a reason when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared evaluation data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture()
def local_store(tmp_path: Path):
    from focusflow.storage import ArtifactStore

    return ArtifactStore(tmp_path / "store", cache_dir=tmp_path / "cache")


class S3Server:
    """moto's S3 on 127.0.0.1 with the AWS environment pointed at it."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        self._server.stop()

    def make_bucket(self, name: str) -> str:
        import boto3

        boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1").create_bucket(Bucket=name)
        return f"s3://{name}"


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    pytest.importorskip("moto.server")
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    saved = {k: os.environ.get(k) for k in [*env, "AWS_ENDPOINT_URL_S3"]}
    os.environ.update(env)
    server = S3Server()
    server.start()
    os.environ["AWS_ENDPOINT_URL_S3"] = server.endpoint
    yield server
    server.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture()
def s3_store(s3_server: S3Server, tmp_path: Path, request: pytest.FixtureRequest):
    from focusflow.storage import ArtifactStore

    bucket = "ff-" + request.node.name.lower().replace("_", "-")[:40].strip("-[]")
    bucket = "".join(c if c.isalnum() or c == "-" else "-" for c in bucket)
    uri = s3_server.make_bucket(bucket)
    return ArtifactStore(f"{uri}/artifacts", cache_dir=tmp_path / "cache", backoff_s=0.05)


@pytest.fixture()
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (a connection is refused at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture()
def silent_endpoint() -> Iterator[str]:
    """A TCP server on 127.0.0.1 that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.settimeout(0.2)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(5)
    for connection in accepted:
        connection.close()
    server.close()


@pytest.fixture()
def short_s3_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1", "FOCUSFLOW_S3_CONNECT_TIMEOUT": "1",
                        "FOCUSFLOW_S3_READ_TIMEOUT": "1", "FOCUSFLOW_S3_RETRIES": "2"}.items():
        monkeypatch.setenv(name, value)
