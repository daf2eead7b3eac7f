"""Prefect's results folder keeps its name on disk, and the store passes over it once the command line is loaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from focusflow.orchestration.results import RESULTS_FOLDER


def test_the_results_folder_keeps_its_name_and_is_no_stage_in_every_command(local_store):
    local_store.put_bytes("stage", "k1", "a.txt", b"x")
    records = Path(local_store.root) / RESULTS_FOLDER
    records.mkdir()
    (records / "focusflow-stage-v1-abc").write_text("{}")
    assert RESULTS_FOLDER == "prefect-results"  # existing stores stay valid
    assert local_store.stages() == ["stage"]
    script = ("import sys\nfrom focusflow.cli import app\nfrom focusflow.storage import ArtifactStore\n"
              f"print(ArtifactStore({local_store.uri!r}).stages(), 'prefect' in sys.modules)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env)
    assert shown.stdout.split() == ["['stage']", "False"]  # registered without loading Prefect
