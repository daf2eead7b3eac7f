"""The flow on a real Dask cluster: two worker processes that share nothing but an S3 store, one of them killed
with SIGKILL in the middle of LAPT, and the finished models' results lost as the scheduler loses them (their
futures cancelled). The run completes, its artifact keys equal those of a threads run, and every stored artifact is
whole."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from focusflow.corpus.io import write_texts
from focusflow.storage import ArtifactStore
from focusflow.storage.artifact import BrokenArtifact
from tests.flows.dask_probes import is_training
from tests.flows.test_specialize_flow import run_config
from tests.tiny_models import sample_texts, save_tiny

pytestmark = [pytest.mark.slow, pytest.mark.s3]


def _keys(resolved: Any) -> Any:
    """The flow's result with each artifact URI reduced to stage/key (the store's address differs)."""
    if isinstance(resolved, dict):
        return {name: _keys(value) for name, value in resolved.items()}
    if isinstance(resolved, list):
        return [_keys(value) for value in resolved]
    return "/".join(resolved.rstrip("/").split("/")[-2:]) if isinstance(resolved, str) else resolved


def private_work_dir(root: str) -> Any:
    """A Dask worker plugin: every worker process (a restarted one too) gets its own LAPT work folder, so a
    resumed LAPT can only have found its checkpoint in the store; torch computes on one thread, as in the
    threads run it is compared with (another thread count sums in another order)."""
    from distributed import WorkerPlugin

    class PrivateWorkDir(WorkerPlugin):
        def setup(self, worker: Any) -> None:
            import torch

            os.environ["FOCUSFLOW_WORK_DIR"] = os.path.join(root, f"worker-{os.getpid()}")
            torch.set_num_threads(1)

    return PrivateWorkDir()


def _run_in_thread(cfg: Any) -> tuple[threading.Thread, dict[str, Any]]:
    from focusflow.flows.specialize import run_specialize

    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["result"] = run_specialize(cfg)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


class _Recorded(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _lose_results(client: Any, prefix: str) -> list[str]:
    """Cancel, for every client, the tasks in memory whose key starts with ``prefix`` (and their dependents), as
    the scheduler does when the only copy of a result is gone and it cannot compute it again."""
    from distributed import Future

    keys = [key for key in client.who_has() if str(key).startswith(prefix)]
    client.cancel([Future(key, client) for key in keys], force=True)
    return keys


def test_flow_on_a_dask_cluster_survives_a_killed_worker(prefect_server, s3_server, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("prefect_dask", reason="the dask extra")
    from distributed import Client, LocalCluster

    from focusflow.flows.common import load_run_config
    from focusflow.flows.specialize import run_specialize

    corpus = tmp_path / "corpus.jsonl"
    write_texts(corpus, sample_texts(1500, seed=1))
    source = save_tiny("xlmr", tmp_path / "source")
    # one LAPT (FOCUS's): the worker killed is the one training it, so its rescheduled run must resume
    settings = {"init": {"methods": ["focus", "random"], "candidates": []},
                "lapt": {"steps": 80, "checkpoint_every": 5, "eval_every": 40},
                "orchestration": {"lapt_methods": ["focus"]}}

    import torch

    monkeypatch.setenv("FOCUSFLOW_WORK_DIR", str(tmp_path / "threads-work"))
    threads_store = (tmp_path / "threads-store").as_uri()
    torch_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        expected = run_specialize(load_run_config("ny", run_config(threads_store, corpus, source, **settings)))
    finally:
        torch.set_num_threads(torch_threads)

    bucket = s3_server.make_bucket("dask-flow")
    store = ArtifactStore(f"{bucket}/ff")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.register_plugin(private_work_dir(str(tmp_path / "dask-work")), name="private-work-dir")
        cfg = load_run_config("ny", run_config(store.uri, corpus, source, **settings), overrides=[
            "orchestration.task_runner=dask", f"orchestration.dask_address={cluster.scheduler_address}"])
        recovered = _Recorded()
        logging.getLogger("focusflow.pipeline.graph").addHandler(recovered)  # the flow's logging stops propagation
        thread, outcome = _run_in_thread(cfg)

        killed = None
        deadline = time.monotonic() + 600
        while killed is None and thread.is_alive() and time.monotonic() < deadline:
            if store.is_store() and store.list("lapt-checkpoint"):
                training = [address for address, busy in client.run(is_training).items() if busy]
                if training:
                    lost = _lose_results(client, "init_stage")  # first: a dead worker's keys leave who_has
                    killed = client.run(os.getpid, workers=training)[training[0]]
                    os.kill(killed, signal.SIGKILL)
            time.sleep(0.2)
        assert killed is not None, f"no LAPT was caught between its checkpoints: {outcome}"
        assert lost, "the finished initializations were not in the cluster's memory"
        thread.join(600)

    assert not thread.is_alive(), "the flow did not finish after its worker was killed"
    assert "error" not in outcome, outcome.get("error")
    assert _keys(outcome["result"]) == _keys(expected)
    logging.getLogger("focusflow.pipeline.graph").removeHandler(recovered)
    assert any("the task runner lost its result (FutureCancelledError); submitting it again" in line
               for line in recovered.lines), "no lost result was submitted again"

    lapt = store.resolve(outcome["result"]["lapt"]["focus"])
    assert lapt.metadata["resumed_from"], "the rescheduled LAPT must resume from the store's checkpoint"
    assert lapt.metadata["steps"] == 80
    scanned = store.scan()
    assert not [a for a in scanned if isinstance(a, BrokenArtifact)], "a half-written artifact is visible"
    for artifact in scanned:
        store.verify(artifact, hashes=True)
