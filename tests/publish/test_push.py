"""Pushing to the Hub over real HTTP, against a stand-in for its API on 127.0.0.1 behind ``HF_ENDPOINT``.

A push creates the repository (``exist_ok``), the branch of ``--revision``, and uploads the stored
repository folder as one commit; a refused token, an existing repository and a dropped connection
each end as one line, and a failed push leaves the store as it was.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from focusflow.cli import app
from tests.publish.hub_stand_in import HubStandIn


@pytest.fixture()
def hub(monkeypatch: pytest.MonkeyPatch):
    import huggingface_hub.constants

    with HubStandIn() as stand_in:
        monkeypatch.setenv("HF_ENDPOINT", stand_in.url)
        monkeypatch.setenv("HF_TOKEN", "hf_stand_in_token")
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # the test environment is offline
        yield stand_in


def push(run, repo_id: str, *args: str):
    return CliRunner().invoke(app, ["publish", run["model"].uri, "--repo-id", repo_id, *args,
                                    "--store", run["config"]["store"]])


def stored(run) -> set[str]:
    return {a.uri for a in run["store"].list()}


def test_a_push_creates_the_repository_and_uploads_the_stored_folder(light_run, hub):
    result = push(light_run, "someone/pushed", "--private", "--revision", "dev", "--commit-message", "first model")
    assert result.exit_code == 0, result.output
    assert hub.recorded.created == [{"name": "pushed", "organization": "someone", "visibility": "private",
                                     "type": "model"}]
    assert hub.recorded.branches == [("someone/pushed", "dev")]
    assert set(hub.recorded.tokens) == {"Bearer hf_stand_in_token"}
    [commit] = hub.recorded.commits
    assert commit["repo"] == "someone/pushed" and commit["revision"] == "dev" and commit["summary"] == "first model"
    assert commit["deleted"] == [], "a new repository holds nothing of an earlier push"
    artifact = light_run["store"].list("publish")[-1]
    assert artifact.params["repo_id"] == "someone/pushed"
    folder = light_run["store"].fetch(artifact)
    assert set(commit["files"]) == set(artifact.files)  # exactly the stored repository folder, byte for byte
    assert all(commit["files"][name] == (folder / name).read_bytes() for name in artifact.files)
    assert artifact.metadata["push"]["url"] == f"{hub.url}/someone/pushed"
    assert artifact.metadata["push"]["commit"] and f"published: {hub.url}/someone/pushed" in result.output


def test_a_push_removes_what_an_earlier_focusflow_push_wrote_that_its_folder_no_longer_has(light_run, hub):
    """A re-push of another model to the same repository: files the earlier push wrote that the new folder lacks (a
    transfer report, a notice, a shard) go in the same commit; what focusflow did not write stays, as for --out."""
    import json

    hub.existing.add("someone/repushed")
    earlier = {"model-00001-of-00002.safetensors": b"old", "transfer_report.parquet": b"old", "README.md": b"old",
               "lineage.json": json.dumps({"files": ["README.md", "lineage.json", "model-00001-of-00002.safetensors",
                                                     "transfer_report.parquet", "*.bin"]}).encode(),
               "pytorch_model.bin": b"the user's", "USAGE.md": b"the user's", "eval/results.json": b"the user's"}
    hub.files[("someone/repushed", "main")] = {".gitattributes": b"*.bin filter=lfs\n", **earlier}
    result = push(light_run, "someone/repushed")
    assert result.exit_code == 0, result.output
    [commit] = hub.recorded.commits
    published = light_run["store"].list("publish")[-1]
    gone = {"model-00001-of-00002.safetensors", "transfer_report.parquet"} - set(published.files)
    assert "model-00001-of-00002.safetensors" in gone and commit["deleted"] == sorted(gone)
    now = hub.files[("someone/repushed", "main")]
    assert {".gitattributes", "pytorch_model.bin", "USAGE.md", "eval/results.json"} <= set(now)  # not focusflow's
    assert now["README.md"] != b"old" and set(commit["files"]) <= set(now)
    assert published.metadata["push"]["removed"] == commit["deleted"]
    record = json.loads(now["lineage.json"])  # what the next push may replace: every file of this one
    assert record["files"] == sorted(published.files)


def test_a_first_push_removes_nothing(light_run, hub):
    hub.existing.add("someone/elsewhere")  # a repository another tool filled: focusflow wrote none of its files
    hub.files[("someone/elsewhere", "main")] = {".gitattributes": b"", "pytorch_model.bin": b"theirs"}
    assert push(light_run, "someone/elsewhere").exit_code == 0
    assert hub.recorded.commits[-1]["deleted"] == [] and "pytorch_model.bin" in hub.files[("someone/elsewhere", "main")]


def test_visibility_is_the_hubs_default_unless_asked(light_run, hub):
    """Without --private or --public a new repository is as the Hub makes it (an organization may default to
    private): the request names no visibility; --public names it."""
    assert push(light_run, "someorg/default").exit_code == 0
    assert push(light_run, "someorg/open", "--public").exit_code == 0
    assert [(c["name"], c.get("visibility")) for c in hub.recorded.created] == [("default", None), ("open", "public")]


def test_an_existing_repository_is_pushed_to(light_run, hub):
    hub.existing.add("someone/existing")  # create answers 409, which exist_ok accepts
    result = push(light_run, "someone/existing")
    assert result.exit_code == 0, result.output
    assert hub.recorded.created == [] and [c["repo"] for c in hub.recorded.commits] == ["someone/existing"]
    assert hub.recorded.settings == [], "a public push leaves a repository's visibility as it is"


def test_a_private_push_makes_an_existing_public_repository_private_before_the_upload(light_run, hub):
    """create_repo ignores ``private`` for a repository that exists: the push sets it, before any file travels."""
    hub.existing.add("someone/public")
    result = push(light_run, "someone/public", "--private")
    assert result.exit_code == 0, result.output
    assert hub.recorded.settings == [("someone/public", {"visibility": "private"})]
    settings_at = next(i for i, path in enumerate(hub.recorded.requests) if path.endswith("/settings"))
    assert settings_at < next(i for i, path in enumerate(hub.recorded.requests) if "/commit/" in path)


@pytest.mark.parametrize(("endpoint", "failure", "reason"), [
    ("create", 401, "the Hub refused the token (401 Unauthorized)"),
    ("create", "drop", "the connection to the Hub failed"),
    ("preupload", 403, "the token may not write to this repository (403 Forbidden)"),
])
def test_a_failed_push_is_one_line_and_leaves_the_store_untouched(light_run, hub, endpoint, failure, reason):
    hub.fail = {endpoint: failure}
    before = stored(light_run)
    result = push(light_run, "someone/refused")
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.output
    assert errors[0].startswith(f"error: could not push someone/refused at {hub.url}: {reason}")
    assert stored(light_run) == before and hub.recorded.commits == []


def test_offline_mode_is_named(light_run, hub, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    result = push(light_run, "someone/offline")
    assert result.exit_code == 2 and "HF_HUB_OFFLINE is set; unset it to push" in result.output


def test_the_same_publish_to_another_hub_is_pushed_there(light_run, hub, monkeypatch):
    """The stored publish of one Hub is not another Hub's: with another HF_ENDPOINT the same command pushes there
    (it printed the first Hub's address and pushed nothing)."""
    first = push(light_run, "someone/twice")
    assert first.exit_code == 0, first.output
    with HubStandIn() as other:
        monkeypatch.setenv("HF_ENDPOINT", other.url)
        again = push(light_run, "someone/twice")
        assert again.exit_code == 0, again.output
        assert [c["repo"] for c in other.recorded.commits] == ["someone/twice"]
        assert f"published: {other.url}/someone/twice" in again.output


def test_a_push_without_a_token_is_refused_before_anything_is_built(light_run, hub, monkeypatch, tmp_path):
    import huggingface_hub

    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    before = stored(light_run)
    result = push(light_run, "someone/tokenless")
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no token is set: set HF_TOKEN" in errors[0], result.output
    assert stored(light_run) == before and hub.recorded.created == []
