"""The configured task runner fans independent stage tasks out (threads, processes, Dask)."""

from __future__ import annotations

import pytest

from focusflow.config import load_config
from focusflow.flows.common import runner_for

pytestmark = pytest.mark.slow


def _fan_out(store_uri: str, runner, n: int) -> list[str]:
    """n independent runs of a real stage (split) on n tiny corpora, through the given runner."""
    from prefect import flow

    from focusflow.tasks import tasks_for

    @flow
    def fan_out(uris: list[str]) -> list[str]:
        split = tasks_for(store_uri)["split"]
        futures = [split.submit(store_uri, {"split": {"min_heldout_documents": 1}}, {"dedup": uri}) for uri in uris]
        return [future.result() for future in futures]

    from focusflow.corpus.io import write_texts
    from focusflow.storage import ArtifactStore

    store = ArtifactStore(store_uri)
    corpora = []
    for i in range(n):
        def build(folder, i=i):
            write_texts(folder / "documents.jsonl", [f"document {i} number {j} with some words" for j in range(20)])
        corpora.append(store.build_or_get("dedup", build, params={"corpus": i}).uri)
    return fan_out.with_options(task_runner=runner)(corpora)


@pytest.mark.parametrize("kind", ["threads", "processes", "dask"])
def test_runner_fans_out_stage_tasks(kind, prefect_server, tmp_path):
    if kind == "dask":
        pytest.importorskip("prefect_dask", reason="the dask runner needs the `dask` extra")
    config = load_config(language="sw", overrides=[f"orchestration.task_runner={kind}", "orchestration.max_workers=2"])
    uris = _fan_out((tmp_path / "store").as_uri(), runner_for(config), 3)
    assert len(set(uris)) == 3 and all("/split/" in uri for uri in uris)
