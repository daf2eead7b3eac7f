"""``store ls`` prints keys that tell rows apart, and ``show``/``rm`` take any unique key prefix."""

from __future__ import annotations

import pytest

from focusflow.storage import ArtifactStore, StoreError, locate
from tests.cli_runner import error_lines, run_cli

RUN = "f" * 40  # two checkpoints of one run share their first 40 characters


@pytest.fixture()
def checkpoints(local_store: ArtifactStore) -> ArtifactStore:
    for step in (100, 200):
        local_store.put_bytes("lapt-checkpoint", f"{RUN}-step-{step:08d}", "a.txt", str(step).encode())
    local_store.put_bytes("lapt", "ab12" + "0" * 60, "a.txt", b"x")
    return local_store


def test_ls_prints_keys_that_tell_rows_apart_and_show_accepts_them(checkpoints, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "300")
    code, out, _ = run_cli(monkeypatch, capsys, "store", "ls", "--store", checkpoints.uri)
    assert code == 0
    printed = [word for line in out.splitlines() for word in line.replace("│", " ").split()
               if word.startswith((RUN[:8], "ab12"))]
    assert len(printed) == 3 and len(set(printed)) == 3
    for key in printed:
        stage = "lapt" if key.startswith("ab12") else "lapt-checkpoint"
        code, out, err = run_cli(monkeypatch, capsys, "store", "show", f"{stage}/{key}", "--store", checkpoints.uri)
        assert code == 0, err
        assert f'"key": "{key}' in out


def test_a_unique_prefix_names_its_artifact_in_show_and_rm(checkpoints, monkeypatch, capsys):
    code, out, _ = run_cli(monkeypatch, capsys, "store", "show", "lapt/ab12", "--store", checkpoints.uri)
    assert code == 0 and '"key": "ab12' in out
    code, out, _ = run_cli(monkeypatch, capsys, "store", "rm", f"{checkpoints.uri}/lapt-checkpoint/{RUN}-step-0000020")
    assert code == 0 and "removed" in out
    assert [a.key for a in checkpoints.list("lapt-checkpoint")] == [f"{RUN}-step-00000100"]


def test_an_ambiguous_prefix_is_an_error_listing_the_candidates(checkpoints, monkeypatch, capsys):
    code, _, err = run_cli(monkeypatch, capsys, "store", "rm", f"lapt-checkpoint/{RUN[:16]}", "--store",
                           checkpoints.uri)
    assert code == 2 and len(error_lines(err)) == 1 and "ambiguous" in err
    assert f"{RUN}-step-00000100" in err and f"{RUN}-step-00000200" in err
    assert len(checkpoints.list("lapt-checkpoint")) == 2
    with pytest.raises(StoreError, match="no artifact lapt/zz"):
        locate("lapt/zz", checkpoints.uri)
