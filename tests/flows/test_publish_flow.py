"""``specialize_language`` with ``publish:`` against a real Prefect server and a stand-in Hub on 127.0.0.1:
the model is pushed at the end of the flow and the Prefect UI shows the repository link."""

from __future__ import annotations

import asyncio

import pytest

from focusflow.corpus.io import write_texts
from focusflow.storage import ArtifactStore
from tests.publish.conftest import tiny_run_config, write_ner_task
from tests.publish.hub_stand_in import HubStandIn
from tests.tiny_models import sample_texts, save_tiny

pytestmark = pytest.mark.slow


def link_artifacts(key: str) -> list[tuple[str, str]]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    async def read() -> list[tuple[str, str]]:
        async with get_client() as client:
            found = await client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
        return [(a.type or "", str(a.data)) for a in found]

    return asyncio.run(read())


def test_the_flow_pushes_the_model_and_links_the_repository(prefect_server, tmp_path, monkeypatch):
    import huggingface_hub.constants

    from focusflow.flows import specialize_language

    write_texts(tmp_path / "corpus.jsonl", sample_texts(1500, seed=1))
    save_tiny("xlmr", tmp_path / "source")
    write_ner_task(tmp_path / "ner")
    monkeypatch.setenv("FOCUSFLOW_WORK_DIR", str(tmp_path / "work"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    config = tiny_run_config(tmp_path, push=True, private=True)
    config["evaluation"]["tasks"] = []
    with HubStandIn() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_TOKEN", "hf_flow")
        result = specialize_language("ny", {k: v for k, v in config.items() if k != "language"})
    published = ArtifactStore(config["store"]).resolve(result["publish"]["focus+lapt"])
    assert [c["repo"] for c in hub.recorded.commits] == ["someone/tiny-ny-focus-lapt"]
    assert hub.recorded.created[0]["visibility"] == "private"
    assert published.metadata["push"]["url"] == f"{hub.url}/someone/tiny-ny-focus-lapt"
    link = f"[someone/tiny-ny-focus-lapt]({hub.url}/someone/tiny-ny-focus-lapt)"  # Prefect stores a link so
    assert link in [data for _, data in link_artifacts("ny-publish-focus-lapt")]
