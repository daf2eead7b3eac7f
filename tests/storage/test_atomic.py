"""The one way to write a local file atomically and the one way to hash it (focusflow.storage.atomic)."""

from __future__ import annotations

import hashlib
import os
import stat

import pytest

from focusflow.storage import sha256_file
from focusflow.storage.atomic import atomic_path, atomic_write


def test_atomic_write_replaces_text_and_bytes(tmp_path):
    target = tmp_path / "nested" / "stats.json"
    atomic_write(target, "première")
    assert target.read_text(encoding="utf-8") == "première"
    atomic_write(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in target.parent.iterdir()) == ["stats.json"]


def test_failure_mid_write_keeps_the_previous_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "results.csv"
    atomic_write(target, "old,complete\n")
    with pytest.raises(RuntimeError, match="writer died"):
        with atomic_path(target) as temporary:
            temporary.write_text("new,half")
            raise RuntimeError("writer died")
    assert target.read_text() == "old,complete\n"
    assert [p.name for p in tmp_path.iterdir()] == ["results.csv"]


def test_interrupted_first_write_leaves_nothing(tmp_path):
    target = tmp_path / "metrics.json"
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(target) as temporary:
            temporary.write_text("{")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_temporary_keeps_the_suffix_for_writers_that_infer_the_format(tmp_path):
    target = tmp_path / "loss_curve.png"
    with atomic_path(target) as temporary:
        assert temporary.suffix == ".png" and temporary.parent == tmp_path and temporary != target
        temporary.write_bytes(b"png")
    assert target.read_bytes() == b"png"


def test_written_file_has_the_umask_permissions_not_private_ones(tmp_path):
    target = tmp_path / "shared.txt"
    atomic_write(target, "x")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask


def test_sha256_file_is_the_sha256_of_the_bytes(tmp_path):
    data = os.urandom(3 * 1024 + 7)
    (tmp_path / "blob.bin").write_bytes(data)
    assert sha256_file(tmp_path / "blob.bin") == hashlib.sha256(data).hexdigest()


def test_a_killed_writers_hidden_copy_beside_a_folder_is_removed_by_the_next_write(tmp_path):
    """A kill mid-export left ``.out.tmp-*`` (a partial copy) beside the user's folder for ever; gc never saw it."""
    import subprocess
    import sys

    from focusflow.storage.atomic import _host, atomic_folder

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = tmp_path / f".out.tmp-{_host()}-pid{int(gone.stdout)}-abc123"
    left.mkdir()
    (left / "weights.bin").write_bytes(b"half")
    live = tmp_path / f".out.tmp-{_host()}-pid1-live"  # pid 1 lives: another writer's, left alone
    elsewhere = tmp_path / f".out.tmp-otherhost-pid{int(gone.stdout)}-xyz"  # a pid of another machine: unknowable
    for folder in (live, elsewhere):
        folder.mkdir()
    with atomic_folder(tmp_path / "out") as staging:
        (staging / "a.txt").write_text("x")
    assert (tmp_path / "out" / "a.txt").is_file() and not left.exists() and live.exists() and elsewhere.exists()
