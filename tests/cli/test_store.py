"""``focusflow store ls`` in an 80-column terminal: stage names and keys (what ``show`` and ``rm`` take) are never cut;
the other columns wrap instead."""

from __future__ import annotations

from focusflow.pipeline.lapt_stage import checkpoint_key
from tests.cli_runner import run_cli

RUN = "f" * 64


def test_ls_at_80_columns_shows_whole_stage_names_and_keys(local_store, monkeypatch, capsys):
    for step in (40, 50):
        local_store.put_bytes("lapt-checkpoint", checkpoint_key(RUN, step), "model.safetensors", b"x" * 123_456)
    local_store.put_bytes("lapt", "ab12" + "0" * 60, "model.safetensors", b"x" * 123_456)
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(monkeypatch, capsys, "store", "ls", "--store", local_store.uri)
    assert code == 0
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    cells = [[cell.strip() for cell in line.split("│")] for line in lines]
    stages = [row[1] for row in cells if len(row) > 2 and row[1] not in ("", "stage")]
    assert sorted(stages) == ["lapt", "lapt-checkpoint", "lapt-checkpoint"]  # not "la…"
    keys = {row[2] for row in cells if len(row) > 2 and row[2] not in ("", "key")}
    assert keys == {f"{RUN[:16]}…-step-00000040", f"{RUN[:16]}…-step-00000050", "ab12" + "0" * 12}
    assert "…" not in "".join(cell for row in cells for cell in row[1:2] + row[3:])  # nothing else is cut either
