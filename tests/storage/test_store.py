"""The artifact store: content-addressed, atomic, verified — on local disk and on S3."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from focusflow.storage import (
    ArtifactNotFound,
    ArtifactStore,
    CorruptArtifactError,
    StoreError,
    UnsafeNameError,
    artifact_key,
)

STORES = ["local_store", pytest.param("s3_store", marks=pytest.mark.s3)]


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> ArtifactStore:
    return request.getfixturevalue(request.param)


def make_model_folder(root: Path) -> Path:
    folder = root / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"vocab_size": 10}))
    (folder / "model.safetensors").write_bytes(os.urandom(50_000))
    (folder / "sub" / "tokenizer.json").write_text("{}")
    return folder


# --------------------------------------------------------------------- keys
def test_key_is_stable_and_order_independent():
    a = artifact_key("tokenizer", {"vocab": 100, "algo": "unigram"}, {"corpus": "abc"}, version=1)
    b = artifact_key("tokenizer", {"algo": "unigram", "vocab": 100}, {"corpus": "abc"}, version=1)
    assert a == b and len(a) == 64


@pytest.mark.parametrize(
    "change",
    [
        dict(params={"vocab": 101, "algo": "unigram"}),
        dict(inputs={"corpus": "abd"}),
        dict(version=2),
        dict(stage="fasttext"),
    ],
)
def test_key_changes_with_any_input(change):
    base = dict(stage="tokenizer", params={"vocab": 100, "algo": "unigram"}, inputs={"corpus": "abc"}, version=1)
    assert artifact_key(**base) != artifact_key(**{**base, **change})


def test_secrets_do_not_change_keys_or_reach_manifests(local_store, tmp_path):
    k1 = local_store.key("corpus", {"dataset": "oscar", "hf_token": "hf_AAA"})
    k2 = local_store.key("corpus", {"dataset": "oscar", "hf_token": "hf_BBB"})
    assert k1 == k2
    artifact = local_store.put_bytes("corpus", k1, "a.txt", b"x", params={"dataset": "oscar", "hf_token": "hf_AAA"})
    manifest_text = (Path(local_store.root) / "corpus" / k1 / "_manifest.json").read_text()
    assert "hf_AAA" not in manifest_text and artifact.params["hf_token"] == "<redacted>"


@pytest.mark.parametrize("name", ["tokenizer", "tokens", "max_tokens", "tokens_per_word", "secretary",
                                  "chars_per_token", "flops_per_token", "eos_token", "mask_token", "tokens_per_s"])
def test_ordinary_parameters_that_contain_secret_words_still_count(name):
    assert artifact_key("s", {name: 1}) != artifact_key("s", {name: 2})


@pytest.mark.parametrize("name", ["hf_token", "token", "HF_TOKEN", "auth_token", "api_key", "aws_secret_access_key",
                                  "aws_access_key_id", "password", "client_secret"])
def test_credential_parameters_are_redacted(name):
    from focusflow.storage.keys import REDACTED, redact_secrets

    assert redact_secrets({name: "s3cr3t", "nested": {name: "x"}}) == {name: REDACTED, "nested": {name: REDACTED}}


def test_credentials_in_store_uri_are_never_shown():
    from focusflow.storage import redact_uri

    assert redact_uri("s3://AKIA:supersecret@bucket/prefix") == "s3://bucket/prefix"


# --------------------------------------------------------------------- round trips
def test_file_round_trip(store, tmp_path):
    source = tmp_path / "metrics.json"
    source.write_text('{"loss": 1.5}')
    key = store.key("metrics", {"a": 1})
    assert not store.exists("metrics", key)
    artifact = store.put_file("metrics", key, source, params={"a": 1})
    assert store.exists("metrics", key)
    again = store.get("metrics", key)
    assert again.content_hash == artifact.content_hash
    assert store.read_json(again, "metrics.json") == {"loss": 1.5}
    with store.open(again, "metrics.json") as handle:
        assert handle.read() == b'{"loss": 1.5}'


def test_directory_round_trip(store, tmp_path):
    folder = make_model_folder(tmp_path)
    key = store.key("model", {"m": "tiny"})
    artifact = store.put_dir("model", key, folder, params={"m": "tiny"})
    assert set(artifact.files) == {"config.json", "model.safetensors", "sub/tokenizer.json"}
    local = store.fetch(store.get("model", key))
    for name in artifact.files:
        assert (local / name).read_bytes() == (folder / name).read_bytes()
    assert [a.key for a in store.list("model")] == [key]


def test_same_key_twice_is_found_not_rebuilt(store):
    calls = []

    def build(folder: Path):
        calls.append(1)
        (folder / "out.txt").write_text("result")
        return {"n": 1}

    first = store.build_or_get("stage", build, params={"p": 1})
    second = store.build_or_get("stage", build, params={"p": 1})
    assert len(calls) == 1
    assert first.key == second.key and second.metadata["n"] == 1
    store.build_or_get("stage", build, params={"p": 2})
    assert len(calls) == 2


def test_input_artifacts_key_by_content(store):
    a = store.build_or_get("corpus", lambda f: (f / "t.txt").write_text("one") and None, params={"x": 1})
    b = store.build_or_get("corpus", lambda f: (f / "t.txt").write_text("two") and None, params={"x": 2})
    assert store.key("tok", {}, {"corpus": a}) != store.key("tok", {}, {"corpus": b})
    assert store.key("tok", {}, {"corpus": a}) == store.key("tok", {}, {"corpus": a.content_hash})


# --------------------------------------------------------------------- atomicity
def test_crash_mid_write_leaves_no_committed_artifact(store, tmp_path, monkeypatch):
    folder = make_model_folder(tmp_path)
    key = store.key("model", {"crash": True})
    uploaded = []
    original = store.transport.upload

    def failing_upload(local, remote):
        if uploaded:
            raise KeyboardInterrupt("simulated crash after the first file")
        uploaded.append(remote)
        original(local, remote)

    monkeypatch.setattr(store.transport, "upload", failing_upload)
    with pytest.raises(KeyboardInterrupt):
        store.put_dir("model", key, folder)
    assert uploaded, "the crash must happen mid-write, after some data was written"
    assert not store.exists("model", key)
    assert store.list("model") == []
    with pytest.raises(ArtifactNotFound):
        store.get("model", key)


def test_failure_inside_writer_commits_nothing(store):
    key = store.key("stage", {"boom": 1})
    with pytest.raises(RuntimeError):
        with store.writer("stage", key) as folder:
            (folder / "half.txt").write_text("partial")
            raise RuntimeError("stage failed")
    assert not store.exists("stage", key)


def test_killed_writer_process_leaves_nothing_committed(tmp_path):
    root = tmp_path / "store"
    script = textwrap.dedent(
        f"""
        import time
        from focusflow.storage import ArtifactStore
        store = ArtifactStore({str(root)!r})
        with store.writer("big", "k1") as folder:
            for i in range(1000):
                (folder / f"part{{i}}.bin").write_bytes(b"x" * 1000)
            original = store.transport.upload
            def slow(local, remote):
                original(local, remote)
                print("uploaded", flush=True)
                time.sleep(0.05)
            store.transport.upload = slow
        """
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "uploaded"
    process.kill()
    process.wait()
    store = ArtifactStore(root)
    assert not store.exists("big", "k1")
    assert any((root / "big" / "k1").rglob("part*.bin")), "some data had been written before the kill"


def test_concurrent_writers_end_with_one_valid_artifact(store, tmp_path):
    key = store.key("model", {"race": 1})
    errors: list[BaseException] = []

    def write(index: int) -> None:
        try:
            with store.writer("model", key) as folder:
                (folder / "a.bin").write_bytes(bytes([index]) * 20_000)
                (folder / "b.bin").write_bytes(bytes([index]) * 30_000)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    artifact = store.get("model", key)
    a = store.read_bytes(artifact, "a.bin")
    b = store.read_bytes(artifact, "b.bin")
    assert a[0] == b[0], "files of one committed artifact come from one writer"
    assert len(store.list("model")) == 1


# --------------------------------------------------------------------- corruption
def _stored_file(store: ArtifactStore, artifact, name: str) -> str:
    return f"{store.root}/{artifact.stage}/{artifact.key}/{artifact.data_dir}/{name}"


def test_corrupted_file_is_detected(store, tmp_path):
    folder = make_model_folder(tmp_path)
    artifact = store.put_dir("model", store.key("model", {"c": 1}), folder)
    store.fs.pipe_file(_stored_file(store, artifact, "config.json"), b'{"vocab_size": 11}')
    with pytest.raises(CorruptArtifactError, match="config.json.*corrupt"):
        store.read_bytes(artifact, "config.json")
    with pytest.raises(CorruptArtifactError):
        store.fetch(artifact, files=["config.json"])


def test_missing_file_is_detected(store, tmp_path):
    folder = make_model_folder(tmp_path)
    artifact = store.put_dir("model", store.key("model", {"m": 1}), folder)
    store.fs.rm_file(_stored_file(store, artifact, "sub/tokenizer.json"))
    with pytest.raises(CorruptArtifactError, match="missing"):
        store.fetch(artifact)


# --------------------------------------------------------------------- safety
@pytest.mark.parametrize("bad", ["../escape", "/abs", "a/b", "", "..", "with space", "x\\y"])
def test_unsafe_stage_or_key_rejected(local_store, bad):
    with pytest.raises(UnsafeNameError):
        local_store.exists(bad, "k")
    with pytest.raises(UnsafeNameError):
        local_store.exists("stage", bad)


@pytest.mark.parametrize("bad", ["../../etc/passwd", "/etc/passwd", "a/../../b", "a\\b"])
def test_unsafe_file_names_rejected(local_store, tmp_path, bad):
    source = tmp_path / "f.txt"
    source.write_text("x")
    with pytest.raises(UnsafeNameError):
        local_store.put_file("stage", "k", source, name=bad)
    assert not local_store.exists("stage", "k")


def test_empty_artifact_refused(local_store):
    with pytest.raises(StoreError, match="empty"):
        with local_store.writer("stage", "k"):
            pass


def test_default_store_follows_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("FOCUSFLOW_STORE", str(tmp_path / "envstore"))
    store = ArtifactStore()
    assert store.uri == (tmp_path / "envstore").resolve().as_uri()


# --------------------------------------------------------------------- S3 outage
@pytest.mark.s3
def test_s3_server_stopped_mid_operation_gives_clear_error(s3_server, tmp_path, monkeypatch):
    from tests.conftest import S3Server

    outage = S3Server()
    outage.start()
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", outage.endpoint)
    uri = outage.make_bucket("outage")
    store = ArtifactStore(f"{uri}/a", retries=3, backoff_s=0.05, cache_dir=tmp_path / "c")
    folder = make_model_folder(tmp_path)
    key = store.key("model", {"outage": 1})
    started = time.monotonic()
    with pytest.raises(StoreError, match=r"after 3 attempts"):
        with store.writer("model", key) as staging:
            for path in folder.rglob("*"):
                if path.is_file():
                    target = staging / path.relative_to(folder)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(path.read_bytes())
            outage.stop()
    assert time.monotonic() - started < 120, "retries are bounded"
    # moto's state lives in-process: a server on the same bucket shows nothing was committed
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server.endpoint)
    assert not ArtifactStore(f"{uri}/a").exists("model", key)


def test_delete_removes_artifact_and_its_cache_records(local_store):
    import focusflow.tasks.common  # noqa: F401 — the tasks layer registers the removal of its records

    artifact = local_store.put_bytes("stage", "k1", "a.txt", b"x")
    records = Path(local_store.root) / "prefect-results"
    records.mkdir()
    (records / f"focusflow-stage-v1-{artifact.key}").write_text("{}")
    (records / "focusflow-stage-v1-otherkey").write_text("{}")
    assert local_store.stages() == ["stage"]
    local_store.delete("stage", "k1")
    assert not local_store.exists("stage", "k1")
    assert [p.name for p in records.iterdir()] == ["focusflow-stage-v1-otherkey"]


def test_files_another_program_put_beside_the_stages_are_passed_over(local_store):
    """A folder of files no layer registered (another program's records, an orchestrator's results read by a script
    that never loaded the layer that names them) holds no keys: listings and gc read past it."""
    artifact = local_store.put_bytes("corpus", "k" * 16, "a.txt", b"text")
    (Path(local_store.root) / "someone-elses-records").mkdir()
    (Path(local_store.root) / "someone-elses-records" / "0123abcd").write_text("{}", encoding="utf-8")
    assert [a.uri for a in local_store.list()] == [artifact.uri] and local_store.stages() == ["corpus"]
    assert local_store.gc(grace_s=0, dry_run=True) == []


# --------------------------------------------------------------------- what no retry changes

@pytest.fixture()
def read_only_store(tmp_path: Path):
    """A local store with one artifact whose folders this process cannot write: read-only (``chattr +i`` where the
    tests run as root, which ignores permissions; ``chmod a-w`` otherwise)."""
    root = tmp_path / "store"
    ArtifactStore(root).put_bytes("split", "k0", "train.jsonl", b"{}\n")
    if os.geteuid() == 0:
        made = subprocess.run(["chattr", "-R", "+i", str(root)], capture_output=True)
        if made.returncode != 0:
            pytest.skip(f"no read-only folder can be made here (chattr: {made.stderr.decode().strip()})")
        undo = ["chattr", "-R", "-i", str(root)]
    else:
        subprocess.run(["chmod", "-R", "a-w", str(root)], check=True)
        undo = ["chmod", "-R", "u+w", str(root)]
    try:
        yield root
    finally:
        subprocess.run(undo, check=True)


def test_a_store_path_that_is_a_file_is_said_at_once(tmp_path, caplog):
    """Not "no store … created by the first stage that writes", nor three retries of NotADirectoryError."""
    path = tmp_path / "store"
    path.write_text("my notes")
    store = ArtifactStore(path, backoff_s=30)  # a retry would take 30 s
    said = f"the store path {path} is a file, not a folder: point --store (or FOCUSFLOW_STORE) at a folder"
    built = []
    started = time.monotonic()
    for operation in (store.require_root, lambda: store.find("split", "k1"), lambda: store.list(),
                      lambda: store.build_or_get("split", built.append, params={"a": 1}),
                      lambda: store.put_bytes("split", "k1", "a.txt", b"x")):
        with pytest.raises(StoreError) as refused:
            operation()
        assert str(refused.value).startswith(said), str(refused.value)
    assert time.monotonic() - started < 5 and "retrying" not in caplog.text
    assert built == [] and path.read_text() == "my notes"


def test_a_read_only_store_is_refused_before_the_build_computes(read_only_store, caplog):
    store = ArtifactStore(read_only_store, backoff_s=30)
    assert store.find("split", "k0") is not None  # reading it is fine
    built = []
    with pytest.raises(StoreError, match=f"store {store.uri}: cannot write: {read_only_store}/split (is on a "
                                         r"read-only file system|may not be written by this user).*--store"):
        store.build_or_get("split", built.append, params={"seed": 1})
    assert built == [] and "retrying" not in caplog.text


@pytest.mark.parametrize(("number", "says"), [(errno.EROFS, "is on a read-only file system"),
                                              (errno.EACCES, "may not be written by this user (permission denied)"),
                                              (errno.ENOTDIR, "split is a file where the store needs a folder")])
def test_an_error_no_retry_changes_is_never_retried(number, says, tmp_path, caplog):
    """A read-only file system, a refused permission, a path through a file: the same rule as the stage tasks'."""
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "split").write_text("a file where a stage folder belongs")
    store = ArtifactStore(tmp_path / "store", backoff_s=30)
    calls = []
    target = str(tmp_path / "store" / "split" / "k1" / "a.txt")

    def write() -> None:
        calls.append(1)
        raise OSError(number, os.strerror(number), target)

    with pytest.raises(StoreError) as refused:
        store.transport.retry("upload a.txt", write)
    assert says in str(refused.value) and "--store (or FOCUSFLOW_STORE)" in str(refused.value)
    assert calls == [1] and "retrying" not in caplog.text
