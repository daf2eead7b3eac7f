"""``store ls`` prints keys that tell rows apart, and ``show``/``rm`` take any unique key prefix.

A LAPT checkpoint's key ends with its step (``<run key[:40]>-step-00000040``): wherever a key is shortened, that
step stays whole (``<prefix>…-step-00000040``), and the shortened form names the artifact wherever an address is taken.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from focusflow.storage import ArtifactStore, StoreError, locate, shorten_key, unique_prefixes
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
    expected = {f"{RUN[:16]}…-step-00000100": ("lapt-checkpoint", f"{RUN}-step-00000100"),
                f"{RUN[:16]}…-step-00000200": ("lapt-checkpoint", f"{RUN}-step-00000200"),
                "ab12" + "0" * 12: ("lapt", "ab12" + "0" * 60)}
    assert sorted(printed) == sorted(expected)
    for shown, (stage, key) in expected.items():
        code, out, err = run_cli(monkeypatch, capsys, "store", "show", f"{stage}/{shown}", "--store", checkpoints.uri)
        assert code == 0, err
        assert json.loads(out)["key"] == key


def test_a_shortened_checkpoint_key_keeps_its_step_whole():
    """Steps 40 and 50 share ``-step-0000``: a prefix cut there (``…-step-0000004``) would misstate the step."""
    other_run = RUN[:20] + "0" * 20  # shares its first 20 characters with RUN
    keys = [f"{RUN}-step-00000040", f"{RUN}-step-00000050", f"{other_run}-step-00000040", "ab12" + "0" * 60]
    shown = unique_prefixes(keys)
    assert shown == {f"{RUN}-step-00000040": f"{RUN[:21]}…-step-00000040",
                     f"{RUN}-step-00000050": f"{RUN[:16]}…-step-00000050",
                     f"{other_run}-step-00000040": f"{other_run[:21]}…-step-00000040",
                     "ab12" + "0" * 60: "ab12" + "0" * 12}
    assert unique_prefixes(["r-step-00000007"]) == {"r-step-00000007": "r-step-00000007"}  # nothing to leave out
    # the stage lines, cache-hit logs and error messages: 12 characters, then the step
    assert shorten_key(f"{RUN}-step-00000040") == f"{RUN[:12]}…-step-00000040"
    assert shorten_key("ab12" + "0" * 60) == "ab12" + "0" * 8
    assert shorten_key("r-step-00000007") == "r-step-00000007"


def test_every_shortened_form_of_a_checkpoint_key_names_it(local_store):
    keys = [f"{RUN}-step-{step:08d}" for step in (40, 50)]
    for key in keys:
        local_store.put_bytes("lapt-checkpoint", key, "a.txt", key.encode())
    shown = unique_prefixes(local_store.keys("lapt-checkpoint"))
    folder = Path(local_store.root) / "lapt-checkpoint"
    for key in keys:
        for form in (shown[key], shorten_key(key), shown[key].replace("…", "...")):  # ... for … when typed
            for address in (f"lapt-checkpoint/{form}", f"{local_store.uri}/lapt-checkpoint/{form}", str(folder / form)):
                assert locate(address, local_store.uri)[1:] == ("lapt-checkpoint", key), address
    with pytest.raises(StoreError, match="no artifact lapt-checkpoint/"):  # the step must be the key's own
        locate(f"lapt-checkpoint/{RUN[:16]}…-step-00000060", local_store.uri)
    local_store.put_bytes("lapt-checkpoint", f"{RUN[:30]}{'0' * 10}-step-00000040", "a.txt", b"x")  # another run
    with pytest.raises(StoreError, match="ambiguous"):  # whose head starts the same: a shortened form names both
        locate(f"lapt-checkpoint/{RUN[:16]}…-step-00000040", local_store.uri)


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
