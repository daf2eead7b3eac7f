"""What ``store rm`` and ``store gc`` may delete: only artifacts (or a killed write's leftovers) of a store."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from focusflow.storage import ArtifactStore, StoreError
from tests.cli_runner import error_lines, run_cli


def _age(path: Path, seconds: float) -> None:
    old = time.time() - seconds
    for item in [path, *path.rglob("*")] if path.is_dir() else [path]:
        os.utime(item, (old, old), follow_symlinks=False)


def _dead_pid() -> str:
    return subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_rm_refuses_a_folder_that_is_not_in_a_store(tmp_path, monkeypatch, capsys):
    victim = tmp_path / "a" / "b" / "c"
    victim.mkdir(parents=True)
    (victim / "notes.txt").write_text("mine")
    code, _, err = run_cli(monkeypatch, capsys, "store", "rm", victim.as_uri())
    assert code == 2 and len(error_lines(err)) == 1 and "is not an artifact store" in err
    assert (victim / "notes.txt").read_text() == "mine"


def test_rm_refuses_a_folder_without_a_manifest_inside_a_store(tmp_path, monkeypatch, capsys):
    store = ArtifactStore(tmp_path / "store")
    store.put_bytes("stage", "k1", "a.txt", b"x")
    victim = Path(store.root) / "backups" / "db"
    victim.mkdir(parents=True)
    (victim / "dump.sql").write_text("mine")
    for args in (["store", "rm", f"{store.uri}/backups/db"], ["store", "rm", "backups/db", "--store", store.uri]):
        code, _, err = run_cli(monkeypatch, capsys, *args)
        assert code == 2 and len(error_lines(err)) == 1 and "not an artifact" in err, args
    assert (victim / "dump.sql").read_text() == "mine"


def test_rm_never_follows_dot_dot(tmp_path, monkeypatch, capsys):
    mine, other = ArtifactStore(tmp_path / "mine"), ArtifactStore(tmp_path / "other")
    mine.put_bytes("stage", "k1", "a.txt", b"x")
    theirs = other.put_bytes("stage", "k2", "a.txt", b"y")
    for address in (f"{mine.uri}/../other/stage/k2", f"{mine.uri}/stage/../../other/stage/k2",
                    f"{mine.uri}/%2e%2e/other/stage/k2", f"{mine.root}/../other/stage/k2"):
        code, _, err = run_cli(monkeypatch, capsys, "store", "rm", address, "--store", mine.uri)
        assert code == 2 and len(error_lines(err)) == 1 and "'..'" in err, address
    code, _, err = run_cli(monkeypatch, capsys, "store", "rm", "../other/stage/k2", "--store", mine.uri)
    assert code == 2 and "'..'" in err
    assert other.get("stage", "k2").content_hash == theirs.content_hash


def test_rm_of_an_artifact_uri_in_the_configured_store_or_another_store(tmp_path, monkeypatch, capsys):
    mine, other = ArtifactStore(tmp_path / "mine"), ArtifactStore(tmp_path / "other")
    first = mine.put_bytes("stage", "k1", "a.txt", b"x")
    second = other.put_bytes("stage", "k2", "a.txt", b"y")
    code, out, _ = run_cli(monkeypatch, capsys, "store", "rm", first.uri, "--store", mine.uri)
    assert code == 0 and "removed" in out and mine.find("stage", "k1") is None
    code, out, _ = run_cli(monkeypatch, capsys, "store", "rm", second.uri, "--store", mine.uri)
    assert code == 0 and other.find("stage", "k2") is None
    third = other.put_bytes("stage", "k3", "a.txt", b"z")
    code, out, _ = run_cli(monkeypatch, capsys, "store", "rm", f"{other.root}/stage/k3", "--store", mine.uri)
    assert code == 0 and other.find("stage", third.key) is None, "an artifact's folder names it too"


def test_rm_removes_the_leftover_of_a_killed_write(local_store, monkeypatch, capsys):
    local_store.put_bytes("stage", "k1", "a.txt", b"x")
    killed = Path(local_store.root) / "stage" / "k2" / "d-0123456789abcdef"
    killed.mkdir(parents=True)
    (killed / "part.bin").write_bytes(b"z")
    code, out, _ = run_cli(monkeypatch, capsys, "store", "rm", "stage/k2", "--store", local_store.uri)
    assert code == 0 and "removed" in out and not killed.parent.exists()


def test_delete_refuses_a_key_folder_holding_files_the_store_did_not_write(local_store):
    artifact = local_store.put_bytes("stage", "k1", "a.txt", b"x")
    stray = Path(local_store.root) / "stage" / "k1" / "thesis.tex"
    stray.write_text("mine")
    with pytest.raises(StoreError, match="not an artifact"):
        local_store.delete("stage", "k1")
    assert stray.exists() and local_store.get("stage", "k1").content_hash == artifact.content_hash


@pytest.mark.s3
def test_rm_on_s3_deletes_only_artifacts(s3_store, monkeypatch, capsys):
    bucket = s3_store.root.split("/", 1)[0]
    s3_store.put_bytes("stage", "k1", "a.txt", b"x")
    for path in (f"{bucket}/backups/db/a.sql", f"{bucket}/backups/db/b.sql",
                 f"{s3_store.root}/backups/db/a.sql"):
        s3_store.fs.pipe_file(path, b"mine")
    code, _, err = run_cli(monkeypatch, capsys, "store", "rm", f"s3://{bucket}/backups/db")
    assert code == 2 and len(error_lines(err)) == 1 and "is not an artifact store" in err
    code, _, err = run_cli(monkeypatch, capsys, "store", "rm", f"{s3_store.uri}/backups/db")
    assert code == 2 and len(error_lines(err)) == 1 and "not an artifact" in err
    assert sorted(s3_store.fs.find(f"{bucket}/backups")) == [f"{bucket}/backups/db/a.sql", f"{bucket}/backups/db/b.sql"]
    assert s3_store.fs.exists(f"{s3_store.root}/backups/db/a.sql")
    code, out, _ = run_cli(monkeypatch, capsys, "store", "rm", f"{s3_store.uri}/stage/k1")
    assert code == 0 and s3_store.find("stage", "k1") is None


def test_gc_leaves_other_stores_staging_folders_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    mine, other = ArtifactStore(tmp_path / "mine"), ArtifactStore(tmp_path / "other")
    mine.put_bytes("stage", "k1", "a.txt", b"x")
    pid = _dead_pid()
    folders = {}
    for name, store in (("mine", mine), ("other", other)):
        folder = Path(tempfile.mkdtemp(prefix=store.staging_prefix("stage", pid=int(pid))))
        (folder / "out.txt").write_text("half")
        _age(folder, 3 * 3600)
        folders[name] = folder
    legacy = tmp_path / "tmp" / f"focusflow-stage-pid{pid}-abc"  # a staging folder that names no store
    legacy.mkdir()
    _age(legacy, 3 * 3600)
    removed = mine.gc(grace_s=3600)
    assert removed == [str(folders["mine"])]
    assert not folders["mine"].exists() and folders["other"].exists() and legacy.exists()


def test_gc_of_a_folder_that_is_not_a_store_touches_nothing_in_it(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    home = tmp_path / "home"
    lookalikes = [home / "project" / "build" / "d-0123456789abcdef", home / "project" / "data" / ".x.tmp-1-abcdef12",
                  home / "notes.txt", home / "project" / "setup.py"]  # files where stage and key folders would be
    for path in lookalikes:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("mine")
        _age(path, 3 * 3600)
    with pytest.raises(StoreError, match="is not an artifact store"):
        ArtifactStore(home).gc(grace_s=0)
    assert all(path.exists() for path in lookalikes)


def test_du_shows_the_space_per_stage_and_the_largest_artifacts(local_store, monkeypatch, capsys):
    from focusflow.storage import disk_usage

    local_store.put_bytes("fasttext", "f1" * 32, "fasttext.bin", b"b" * 5000)
    local_store.put_bytes("source", "s1" * 32, "model.safetensors", b"m" * 3000)
    local_store.put_bytes("source", "s2" * 32, "model.safetensors", b"m" * 1500)
    local_store.put_bytes("split", "p1" * 32, "train.jsonl", b"t" * 10)
    found = disk_usage(local_store.scan(), top=2)
    assert found.stages == {"fasttext": (1, 5000), "source": (2, 4500), "split": (1, 10)}
    assert [a.key for a in found.largest] == ["f1" * 32, "s1" * 32] and found.total_bytes == 9510
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run_cli(monkeypatch, capsys, "store", "du", "--store", local_store.uri, "--top", "2")
    assert code == 0 and "9.5 KB" in out
    lines = out.splitlines()
    assert [i for i, line in enumerate(lines) if "fasttext" in line][0] < [i for i, line in enumerate(lines)
                                                                           if "source" in line][0]
    assert any("fasttext/f1f1" in line and "fasttext.bin 5.0 KB" in line for line in lines)


def test_rm_in_a_fresh_process_removes_the_task_cache_records_too(local_store):
    """The store knows nothing of Prefect: ``store rm`` loads the tasks layer, whose hook removes its records."""
    from focusflow.tasks.common import cache_record_name

    artifact = local_store.put_bytes("split", "k" * 64, "a.txt", b"x")
    records = Path(local_store.root) / "prefect-results"
    records.mkdir()
    mine, other = cache_record_name("split", 1, artifact.key), cache_record_name("split", 1, "j" * 64)
    for name in (mine, other):
        (records / name).write_text("{}")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    subprocess.run([sys.executable, "-c", "from focusflow.cli import main; main()", "store", "rm", artifact.uri],
                   check=True, env=env, capture_output=True)
    assert [p.name for p in records.iterdir()] == [other]


def test_the_store_names_no_orchestrator():
    """The records folder's name belongs to the layer that keeps it there: nothing in ``storage`` names Prefect."""
    import focusflow.storage

    package = Path(focusflow.storage.__file__).parent
    assert [path.name for path in package.rglob("*.py") if "prefect" in path.read_text(encoding="utf-8").lower()] == []


def test_a_records_folder_is_no_stage(local_store):
    """A folder a layer registers with ``keep_records`` is not listed, scanned, collected or deleted as an artifact;
    its files go only by pattern, and only a registered folder's."""
    from focusflow.storage import keep_records

    folder = keep_records("another-layers-records")
    local_store.put_bytes("stage", "k1", "a.txt", b"x")
    records = Path(local_store.root) / folder
    (records / "k2").mkdir(parents=True)
    (records / "k2" / "d-0123456789abcdef").mkdir()
    _age(records, 48 * 3600)
    (records / "rec-1").write_text("{}")
    (records / "rec-2").write_text("{}")
    assert local_store.stages() == ["stage"] and [a.stage for a in local_store.scan()] == ["stage"]
    assert local_store.gc(grace_s=0) == []
    with pytest.raises(StoreError, match="is not an artifact"):
        local_store.delete(folder, "k2")
    assert local_store.remove_records(folder, "rec-*") == 2 and sorted(p.name for p in records.iterdir()) == ["k2"]
    with pytest.raises(StoreError, match="no records folder"):
        local_store.remove_records("stage", "*")
    assert (Path(local_store.root) / "stage" / "k1").is_dir()


def test_rm_beside_another_writer_of_the_key_takes_only_the_artifact_it_removes(local_store):
    """``rm -r`` of the key folder took a live writer's upload too: it then committed a manifest of no files."""
    artifact = local_store.put_bytes("stage", "k1", "a.txt", b"x")
    uploading = Path(local_store.root) / "stage" / "k1" / "d-fedcba9876543210"
    uploading.mkdir()
    (uploading / "a.txt").write_bytes(b"y")
    assert local_store.delete("stage", "k1") and local_store.find("stage", "k1") is None
    assert uploading.is_dir() and not (Path(local_store.root) / "stage" / "k1" / artifact.data_dir).exists()


def test_a_commit_whose_files_were_deleted_meanwhile_is_taken_back(local_store, monkeypatch):
    from focusflow.storage.transport import Transport

    commit = Transport.commit_manifest

    def rm_first(self, path, payload):  # a `store rm` between the upload's check and the manifest
        for data in Path(path).parent.glob("d-*"):
            shutil.rmtree(data)
        return commit(self, path, payload)

    monkeypatch.setattr(Transport, "commit_manifest", rm_first)
    with pytest.raises(StoreError, match="deleted while it was committed"):
        local_store.put_bytes("stage", "k9", "a.txt", b"x")
    assert local_store.find("stage", "k9") is None


def test_rm_of_a_manifest_naming_a_folder_outside_its_key_deletes_nothing_outside(local_store):
    """The data folder a manifest names is checked as every reader checks it before anything is deleted by it."""
    import json

    other = local_store.put_bytes("stage", "k2", "a.txt", b"keep")
    victim = local_store.put_bytes("stage", "k1", "a.txt", b"x")
    manifest = Path(local_store.root) / "stage" / "k1" / "_manifest.json"
    hostile = json.loads(manifest.read_text())
    hostile["data_dir"] = f"../k2/{other.data_dir}"
    manifest.write_text(json.dumps(hostile))
    assert local_store.delete("stage", "k1") and local_store.find("stage", "k1") is None
    assert local_store.get("stage", "k2").content_hash == other.content_hash and victim.key == "k1"
