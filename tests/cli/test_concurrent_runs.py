"""Two runs of one configuration started together on one store (and one work folder, one Prefect home) both end
well: each stage is built once, the second run waits for what the first builds (LAPT included, which would
otherwise train twice in one work folder) and both report the same artifacts."""

from __future__ import annotations

import pytest

from focusflow.storage import ArtifactStore
from tests.cli.test_stop import Command, setting, write_config  # noqa: F401 (setting is a fixture)
from tests.tiny_models import save_tiny

pytestmark = pytest.mark.slow


def test_two_identical_runs_started_together_both_exit_0_with_the_same_artifacts(setting):  # noqa: F811
    source = save_tiny("xlmr", setting["root"] / "source")
    config = write_config(setting, source, lapt={"steps": 300, "batch_size": 4, "micro_batch_size": 2, "seq_len": 32,
                                                 "checkpoint_every": 50, "eval_every": 100, "eval_sequences": 4})
    runs = [Command(["run", "-l", "ny", "-c", str(config)], setting["env"], setting["root"]) for _ in range(2)]
    codes = [run.finish() for run in runs]
    outputs = ["\n".join(run.lines) for run in runs]
    assert codes == [0, 0], "\n\n".join(output[-3000:] for output in outputs)
    assert all("Traceback" not in output and "error:" not in output for output in outputs), outputs
    assert any("waiting for process" in output for output in outputs), "the runs met at no stage"
    store: ArtifactStore = setting["store"]
    # one report and one LAPT (write_config trains FOCUS alone): the same artifacts
    assert len(store.list("report")) == 1 and len(store.list("lapt")) == 1
    assert store.gc(grace_s=0, dry_run=True) == [], "nothing half-written"
