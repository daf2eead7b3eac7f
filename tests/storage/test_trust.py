"""The store keeps its promises under pressure: concurrent writers, hostile manifests, dead endpoints, leftovers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from focusflow.storage import ArtifactStore, CorruptArtifactError, StoreError
from focusflow.storage.store import MANIFEST
from tests.cli_runner import error_lines, run_cli

STORES = ["local_store", pytest.param("s3_store", marks=pytest.mark.s3)]


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> ArtifactStore:
    return request.getfixturevalue(request.param)


def key_folder_entries(store: ArtifactStore, stage: str, key: str) -> list[str]:
    return store.transport.names(stage, key)


# --------------------------------------------------------------------- concurrent writers
def test_concurrent_writers_commit_once_and_return_the_winner(store, monkeypatch):
    """Every writer has uploaded its data before any commits: exactly one wins, the others clean up."""
    writers = 4
    key = store.key("model", {"race": 2})
    all_uploaded = threading.Barrier(writers, timeout=60)
    commit = store.transport.commit_manifest

    def commit_together(remote: str, payload: bytes) -> None:
        all_uploaded.wait()
        commit(remote, payload)

    monkeypatch.setattr(store.transport, "commit_manifest", commit_together)
    results: dict[int, object] = {}

    def write(index: int) -> None:
        try:
            results[index] = store.put_bytes("model", key, "w.bin", bytes([index]) * 10_000)
        except BaseException as exc:  # noqa: BLE001 - reported below
            results[index] = exc

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    artifacts = list(results.values())
    assert all(not isinstance(a, BaseException) for a in artifacts), artifacts
    committed = store.get("model", key)
    assert {a.uri for a in artifacts} == {committed.uri}
    assert {a.data_dir for a in artifacts} == {committed.data_dir}
    assert sorted(key_folder_entries(store, "model", key)) == sorted([MANIFEST, committed.data_dir])
    assert len(set(store.read_bytes(committed, "w.bin"))) == 1


def test_writer_of_a_committed_key_keeps_the_first_artifact(store):
    first = store.put_bytes("stage", "k1", "a.txt", b"first")
    second = store.put_bytes("stage", "k1", "a.txt", b"second")
    assert second.data_dir == first.data_dir and store.read_bytes(second, "a.txt") == b"first"
    assert sorted(key_folder_entries(store, "stage", "k1")) == sorted([MANIFEST, first.data_dir])


def test_concurrent_writer_processes_commit_once(tmp_path: Path):
    root = tmp_path / "store"
    start_at = time.time() + 3
    script = textwrap.dedent(
        f"""
        import sys, time
        from focusflow.storage import ArtifactStore
        store = ArtifactStore({str(root)!r})
        time.sleep(max(0.0, {start_at} - time.time()))
        artifact = store.put_bytes("dedup", "k1", "documents.jsonl", sys.argv[1].encode() * 100_000)
        print(artifact.uri, artifact.data_dir)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    processes = [subprocess.Popen([sys.executable, "-c", script, str(i)], stdout=subprocess.PIPE, text=True, env=env)
                 for i in range(4)]
    outputs = {p.communicate(timeout=120)[0].strip() for p in processes}
    assert all(p.returncode == 0 for p in processes)
    store = ArtifactStore(root)
    committed = store.get("dedup", "k1")
    assert outputs == {f"{committed.uri} {committed.data_dir}"}
    assert sorted(p.name for p in (root / "dedup" / "k1").iterdir()) == sorted([MANIFEST, committed.data_dir])


# --------------------------------------------------------------------- hostile manifests
HOSTILE = {
    "data_dir up": lambda m: {**m, "data_dir": "../../../x"},
    "data_dir absolute": lambda m: {**m, "data_dir": "/etc"},
    "data_dir missing": lambda m: {k: v for k, v in m.items() if k != "data_dir"},
    "file up": lambda m: {**m, "files": {"../../etc/passwd": next(iter(m["files"].values()))}},
    "file absolute": lambda m: {**m, "files": {"/etc/passwd": next(iter(m["files"].values()))}},
    "file unnormalized": lambda m: {**m, "files": {"a/../../b": next(iter(m["files"].values()))}},
    "file without hash": lambda m: {**m, "files": {"a.txt": {"size": 1}}},
    "not an object": lambda m: [m],
}


def _plant_manifest(store: ArtifactStore, stage: str, key: str, manifest: object) -> None:
    store.fs.pipe_file(f"{store.root}/{stage}/{key}/{MANIFEST}", json.dumps(manifest).encode())


@pytest.mark.parametrize("case", HOSTILE)
def test_hostile_manifest_is_refused_on_read(store, case):
    key = "k-" + case.replace(" ", "-")
    artifact = store.put_bytes("stage", key, "a.txt", b"x")
    _plant_manifest(store, "stage", key, HOSTILE[case](artifact.manifest))
    with pytest.raises(CorruptArtifactError, match=r"refused: .*focusflow store rm"):
        store.get("stage", key)
    with pytest.raises(CorruptArtifactError, match="refused"):
        store.resolve(artifact.uri)


@pytest.mark.parametrize("case", ["data_dir up", "file up"])
def test_hostile_manifest_is_refused_on_fetch_and_writes_nothing_outside(store, tmp_path, case):
    artifact = store.put_bytes("stage", "k1", "a.txt", b"x")
    forged = type(artifact)(artifact.store_uri, "stage", "k1", HOSTILE[case](artifact.manifest))
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(CorruptArtifactError, match="refused"):
        store.fetch(forged)
    with pytest.raises(CorruptArtifactError, match="refused"):
        store.read_bytes(forged, next(iter(forged.files)))
    assert sorted(tmp_path.rglob("*")) == before


def test_manifest_cannot_verify_a_file_outside_the_store(tmp_path, monkeypatch, capsys):
    """The case that used to pass: a manifest naming a real file outside the store, with its true hash."""
    store = ArtifactStore(tmp_path / "store")
    artifact = store.put_bytes("stage", "k1", "a.txt", b"x")
    outside = tmp_path / "secret.txt"
    outside.write_bytes(b"x")
    _plant_manifest(store, "stage", "k1", {**artifact.manifest, "data_dir": "../../.."})
    code, out, err = run_cli(monkeypatch, capsys, "store", "show", artifact.uri, "--verify")
    assert code == 2 and "verified" not in out
    assert len(error_lines(err)) == 1 and "Traceback" not in err
    assert "data_dir '../../..'" in err and f"focusflow store rm {artifact.uri}" in err


def test_symlink_inside_an_artifact_that_leads_out_is_refused(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    artifact = store.put_bytes("stage", "k1", "a.txt", b"x")
    (tmp_path / "outside.txt").write_bytes(b"x")
    stored = Path(store.root) / "stage" / "k1" / artifact.data_dir / "a.txt"
    stored.unlink()
    stored.symlink_to(tmp_path / "outside.txt")
    with pytest.raises(CorruptArtifactError, match="outside the artifact"):
        store.fetch(artifact)


@pytest.mark.s3
def test_hostile_remote_manifest_is_refused_by_the_cli(s3_store, monkeypatch, capsys):
    artifact = s3_store.put_bytes("stage", "k1", "a.txt", b"x")
    _plant_manifest(s3_store, "stage", "k1", HOSTILE["file up"](artifact.manifest))
    code, _, err = run_cli(monkeypatch, capsys, "store", "show", artifact.uri, "--verify")
    assert code == 2 and "'../../etc/passwd'" in err and len(error_lines(err)) == 1 and "Traceback" not in err


# --------------------------------------------------------------------- S3 that hangs or refuses
@pytest.mark.s3
@pytest.mark.parametrize("operation", ["list", "get", "put"])
def test_endpoint_that_never_answers_fails_fast_naming_it(silent_endpoint, short_s3_limits, monkeypatch, operation,
                                                          tmp_path):
    pytest.importorskip("s3fs")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", silent_endpoint)
    store = ArtifactStore("s3://bucket/prefix", backoff_s=0.05, cache_dir=tmp_path)
    assert store.retries == 2
    calls = {"list": store.list, "get": lambda: store.get("stage", "k1"),
             "put": lambda: store.put_bytes("stage", "k1", "a.txt", b"x")}
    started = time.monotonic()
    with pytest.raises(StoreError, match=f"endpoint {silent_endpoint}.*after 2 attempts"):
        calls[operation]()
    assert time.monotonic() - started < 15, "two attempts of 1 s connect + 1 s read, not s3fs's or botocore's loops"


@pytest.mark.s3
def test_cli_on_a_silent_endpoint_is_one_line(silent_endpoint, short_s3_limits, monkeypatch, capsys):
    pytest.importorskip("s3fs")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", silent_endpoint)
    code, _, err = run_cli(monkeypatch, capsys, "store", "ls", "--store", "s3://bucket/prefix")
    assert code == 2 and len(error_lines(err)) == 1 and "Traceback" not in err and silent_endpoint in err


def test_s3_limits_must_be_positive_numbers(monkeypatch):
    monkeypatch.setenv("FOCUSFLOW_S3_READ_TIMEOUT", "soon")
    with pytest.raises(StoreError, match="FOCUSFLOW_S3_READ_TIMEOUT='soon'"):
        ArtifactStore("s3://bucket/prefix")


@pytest.mark.s3
def test_missing_bucket_is_an_error_not_an_empty_store(s3_server, tmp_path):
    store = ArtifactStore("s3://no-such-bucket/prefix", cache_dir=tmp_path, backoff_s=0.05)
    for operation in (store.list, store.stages, lambda: store.list("corpus"), lambda: store.find("corpus", "k1"),
                      lambda: store.build_or_get("corpus", lambda folder: pytest.fail("built into a missing bucket"))):
        with pytest.raises(StoreError, match="no bucket 'no-such-bucket'"):
            operation()


@pytest.mark.s3
def test_empty_prefix_in_an_existing_bucket_is_an_empty_store(s3_store):
    assert s3_store.list() == [] and s3_store.stages() == []


@pytest.mark.s3
def test_access_denied_is_an_error_at_once(s3_store, monkeypatch):
    calls = []

    def denied(*args, **kwargs):
        calls.append(1)
        raise PermissionError("Access Denied")

    monkeypatch.setattr(s3_store.fs, "ls", denied)
    with pytest.raises(StoreError, match="access denied"):
        s3_store.stages()
    assert len(calls) == 1, "a 403 is not retried"


# --------------------------------------------------------------------- housekeeping
def test_ls_reports_a_corrupt_manifest_as_one_bad_row(tmp_path, monkeypatch, capsys):
    store = ArtifactStore(tmp_path / "store")
    good = store.put_bytes("stage", "good1", "a.txt", b"x")
    store.put_bytes("stage", "bad1", "a.txt", b"y")
    (Path(store.root) / "stage" / "bad1" / MANIFEST).write_text("{not json")
    entries = store.scan()
    assert [type(e).__name__ for e in entries].count("BrokenArtifact") == 1
    assert [a.key for a in store.list()] == [good.key]
    monkeypatch.setenv("COLUMNS", "300")
    code, out, _ = run_cli(monkeypatch, capsys, "store", "ls", "--store", store.uri)
    assert code == 0 and "good1" in out
    assert [line for line in out.splitlines() if "bad1" in line and "BAD" in line and "not valid JSON" in line]


def test_rm_removes_an_artifact_even_with_a_corrupt_manifest(tmp_path, monkeypatch, capsys):
    store = ArtifactStore(tmp_path / "store")
    artifact = store.put_bytes("stage", "k1", "a.txt", b"x")
    (Path(store.root) / "stage" / "k1" / MANIFEST).write_text("[]")
    code, out, _ = run_cli(monkeypatch, capsys, "store", "rm", artifact.uri)
    assert code == 0 and "removed" in out
    assert not (Path(store.root) / "stage" / "k1").exists()
    code, _, err = run_cli(monkeypatch, capsys, "store", "rm", "stage/k1", "--store", store.uri)
    assert code == 2 and "no artifact stage/k1" in err


def test_corruption_error_names_the_rm_command(local_store):
    artifact = local_store.put_bytes("stage", "k1", "a.txt", b"x")
    (Path(local_store.root) / "stage" / "k1" / artifact.data_dir / "a.txt").write_bytes(b"y")
    with pytest.raises(CorruptArtifactError, match=f"focusflow store rm {artifact.uri}"):
        local_store.read_bytes(artifact, "a.txt")


def _age(path: Path, seconds: float) -> None:
    old = time.time() - seconds
    for item in [path, *path.rglob("*")] if path.is_dir() else [path]:
        os.utime(item, (old, old), follow_symlinks=False)


def test_gc_removes_old_leftovers_and_keeps_artifacts_and_recent_writes(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    store = ArtifactStore(tmp_path / "store", cache_dir=tmp_path / "cache")
    artifact = store.put_bytes("stage", "k1", "a.txt", b"x")
    key_dir = Path(store.root) / "stage" / "k1"
    loser = key_dir / "d-0123456789abcdef"  # a losing writer killed before it cleaned up
    loser.mkdir()
    (loser / "a.txt").write_text("y")
    pending = key_dir / ".manifest-abc"
    pending.write_text("{}")
    killed = Path(store.root) / "stage" / "k2" / "d-fedcba9876543210"  # a writer killed before committing
    killed.mkdir(parents=True)
    (killed / "part.bin").write_bytes(b"z")
    running = Path(store.root) / "stage" / "k3" / "d-00000000000000aa"  # a write still under way
    running.mkdir(parents=True)
    (running / "part.bin").write_bytes(b"z")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    staging = tmp_path / "tmp" / f"{store.staging_prefix('stage', pid=int(dead.stdout.strip()))}abc"
    staging.mkdir()
    (staging / "out.txt").write_text("half")
    alive = tmp_path / "tmp" / f"{store.staging_prefix('stage')}abc"
    alive.mkdir()
    for path in (loser, pending, killed, staging, alive):
        _age(path, 3 * 3600)

    code, out, _ = run_cli(monkeypatch, capsys, "store", "gc", "--store", store.uri, "--grace-hours", "1",
                           "--dry-run")
    assert code == 0 and "4 leftover(s) found" in out
    assert loser.exists() and pending.exists() and killed.exists() and staging.exists()
    code, out, _ = run_cli(monkeypatch, capsys, "store", "gc", "--store", store.uri, "--grace-hours", "1")
    assert code == 0 and "4 leftover(s) removed" in out
    assert not loser.exists() and not pending.exists() and not killed.parent.exists() and not staging.exists()
    assert running.exists() and alive.exists()
    assert store.read_bytes(store.get("stage", "k1"), "a.txt") == b"x" and artifact.data_dir in os.listdir(key_dir)


@pytest.mark.s3
def test_gc_on_s3_removes_unreferenced_data(s3_store, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # this machine's staging folders are not under test
    artifact = s3_store.put_bytes("stage", "k1", "a.txt", b"x")
    s3_store.fs.pipe_file(f"{s3_store.root}/stage/k1/d-0123456789abcdef/a.txt", b"y")
    assert s3_store.gc(grace_s=3600, dry_run=True) == []
    removed = s3_store.gc(grace_s=0)
    assert len(removed) == 1 and removed[0].endswith("stage/k1/d-0123456789abcdef")
    assert sorted(key_folder_entries(s3_store, "stage", "k1")) == sorted([MANIFEST, artifact.data_dir])


def test_misspelled_local_store_is_an_error_not_a_new_store(tmp_path, monkeypatch, capsys):
    missing = tmp_path / "stroe"
    store = ArtifactStore(missing)
    with pytest.raises(StoreError, match="no store at .*created by the first stage that writes"):
        store.list()
    for args in (["store", "ls", "--store", str(missing)], ["store", "show", "stage/k1", "--store", str(missing)],
                 ["store", "rm", "stage/k1", "--store", str(missing)], ["store", "gc", "--store", str(missing)]):
        code, _, err = run_cli(monkeypatch, capsys, *args)
        assert code == 2 and "no store at" in err, args
    assert not missing.exists()
    assert store.find("stage", "k1") is None, "a stage's cache lookup before its first write is a miss"
    store.put_bytes("stage", "k1", "a.txt", b"x")
    assert missing.is_dir() and [a.key for a in store.list()] == ["k1"]


def test_default_store_is_created_by_the_first_write(tmp_path, monkeypatch):
    monkeypatch.delenv("FOCUSFLOW_STORE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    store = ArtifactStore()
    assert Path(store.root).is_relative_to(tmp_path / "cache") and not Path(store.root).exists()
    store.build_or_get("stage", lambda folder: (folder / "a.txt").write_text("x") and None)
    assert len(store.list("stage")) == 1



@pytest.mark.s3
def test_a_damaged_cached_copy_is_fetched_again_not_blamed_on_the_store(s3_store):
    """A fetched folder saved into (same size, other bytes) raised "corrupt: store rm it", and following that advice
    deleted intact stored work: the cached copy is fetched again and the store's own copy decides."""
    artifact = s3_store.put_bytes("stage", "k1", "weights.bin", b"0123456789")
    folder = s3_store.fetch(artifact)
    (folder / "weights.bin").write_bytes(b"0123456780")
    again = s3_store.fetch(artifact)
    assert (again / "weights.bin").read_bytes() == b"0123456789"
