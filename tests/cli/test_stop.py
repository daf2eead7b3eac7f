"""``focusflow run`` stops when told: SIGINT in the source stage, SIGTERM in LAPT, then the same command goes on.

Each case starts the real command in its own process group (a tiny source, a generated corpus, a local Prefect API
server of its own), waits for the stage line it wants to interrupt, sends the signal and checks the ending: the
exit code of the signal within 60 s, one ``stopped by`` line and no traceback, nothing half-written in the store,
the flow run Cancelled in the server's database, the server gone. After SIGTERM in LAPT the same command resumes
from the checkpoint of the step the stop reached.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from focusflow.corpus.io import write_texts
from focusflow.storage import ArtifactStore
from tests.tiny_models import sample_texts, save_tiny

pytestmark = pytest.mark.slow

STOP_BOUND_S = 60  # the generous bound; a stop takes a few seconds here


class Command:
    """A ``focusflow`` process whose stderr lines are collected as they come."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "focusflow", *args], env=env, cwd=cwd,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                        start_new_session=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        self.kill()
        raise AssertionError(f"no line with {text!r}:\n" + "\n".join(self.lines[-40:]))

    def stop(self, signum: int) -> tuple[int, float]:
        """Send ``signum`` to the command (not its group: a user's ``kill``); its exit code and how long it took."""
        started = time.monotonic()
        os.kill(self.process.pid, signum)
        try:
            code = self.process.wait(timeout=STOP_BOUND_S + 30)
        finally:
            self.kill()
        self.reader.join(10)
        return code, time.monotonic() - started

    def finish(self, timeout: float = 600) -> int:
        code = self.process.wait(timeout=timeout)
        self.reader.join(10)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@pytest.fixture()
def setting(tmp_path: Path) -> dict[str, Any]:
    corpus = tmp_path / "corpus.jsonl"
    write_texts(corpus, sample_texts(1500, seed=1))
    home = tmp_path / "prefect-home"
    env = {key: value for key, value in os.environ.items() if key != "PREFECT_API_URL"}
    env.update({"FOCUSFLOW_STORE": str(tmp_path / "store"), "FOCUSFLOW_WORK_DIR": str(tmp_path / "work"),
                "PREFECT_HOME": str(home), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    return {"root": tmp_path, "corpus": corpus, "env": env, "home": home, "store": ArtifactStore(tmp_path / "store")}


def write_config(setting: dict[str, Any], source: Path, **sections: Any) -> Path:
    config = {"source_model": str(source), "corpus": {"source": "local", "paths": [str(setting["corpus"])]},
              "cleaning": {"min_chars": 10, "min_words": 3}, "split": {"min_heldout_documents": 40},
              "tokenizer": {"vocab_size": 300}, "fasttext": {"dim": 16, "epochs": 2, "min_count": 1},
              "init": {"methods": ["focus"], "candidates": []}, "orchestration": {"lapt_methods": ["focus"]},
              "evaluation": {"heldout_sentences": 20}, **sections}
    path = setting["root"] / "run.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def flow_run_states(home: Path) -> list[str]:
    with sqlite3.connect(home / "prefect.db") as database:
        return [row[0] for row in database.execute("SELECT state_type FROM flow_run ORDER BY created")]


def servers_of(home: Path) -> list[int]:
    """Processes that are a Prefect API server with this PREFECT_HOME."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            environment = (entry / "environ").read_bytes()
        except OSError:
            continue
        if b"prefect.server.api.server:create_app" in command and f"PREFECT_HOME={home}".encode() in environment:
            found.append(int(entry.name))
    return found


def assert_stopped_cleanly(command: Command, code: int, seconds: float, signum: int, setting: dict[str, Any]) -> str:
    output = "\n".join(command.lines)
    assert code == 128 + signum, output[-3000:]
    assert seconds < STOP_BOUND_S, f"stopped after {seconds:.0f} s"
    stopped = [line for line in command.lines if line.startswith(f"stopped by {signal.Signals(signum).name}")]
    assert len(stopped) == 1 and "run the same command again" in stopped[0], output[-3000:]
    assert "Traceback" not in output and "error:" not in output, output[-3000:]
    assert setting["store"].gc(grace_s=0, dry_run=True) == [], "something half-written was left in the store"
    assert flow_run_states(setting["home"])[-1] == "CANCELLED"
    assert servers_of(setting["home"]) == [], "the run's Prefect API server outlived it"
    return stopped[0]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_in_the_source_stage_stops_it_and_keeps_what_finished(setting, signum):
    """A bare encoder trains its MLM head in the source stage (the issue's 2¼ minutes after SIGTERM)."""
    from transformers import BertModel

    headed = save_tiny("bert", setting["root"] / "headed")  # e5-small's family: a bare BERT encoder
    bare = setting["root"] / "bare"
    BertModel.from_pretrained(headed).save_pretrained(bare)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (bare / name).write_bytes((headed / name).read_bytes())
    config = write_config(setting, bare, source_head={"steps": 1_000_000, "feature_sequences": 64, "eval_every": 50})
    command = Command(["run", "-l", "ny", "-c", str(config)], setting["env"], setting["root"])
    command.wait_for("source: started")
    time.sleep(4)
    code, seconds = command.stop(signum)
    assert_stopped_cleanly(command, code, seconds, signum, setting)
    store = setting["store"]
    assert store.list("split") and not store.list("source"), "the finished stages are kept, the stopped one is not"


def test_sigterm_in_lapt_keeps_its_step_and_the_same_command_resumes_from_it(setting):
    source = save_tiny("xlmr", setting["root"] / "source")
    config = write_config(setting, source, lapt={"steps": 1500, "batch_size": 4, "micro_batch_size": 2, "seq_len": 32,
                                                 "checkpoint_every": 1000, "eval_every": 1000, "eval_sequences": 4})
    command = Command(["run", "-l", "ny", "-c", str(config)], setting["env"], setting["root"])
    command.wait_for("lapt[focus]: started")
    time.sleep(5)
    code, seconds = command.stop(signal.SIGTERM)
    line = assert_stopped_cleanly(command, code, seconds, signal.SIGTERM, setting)
    store = setting["store"]
    assert not store.list("lapt")
    steps = [checkpoint.metadata["step"] for checkpoint in store.list("lapt-checkpoint")]
    assert len(steps) == 1 and 0 < steps[0] < 1000, "a checkpoint at the step the stop reached, not a periodic one"
    assert f"LAPT's checkpoint at step {steps[0]} of 1500" in line

    again = Command(["run", "-l", "ny", "-c", str(config)], setting["env"], setting["root"])
    # the rest of 1,500 distillation steps and the report: minutes on an idle 2-core machine, more beside other jobs
    assert again.finish(timeout=1200) == 0, "\n".join(again.lines[-40:])
    summary = store.list("lapt")[0].metadata
    assert summary["resumed_from"].endswith(f"step-{steps[0]:08d}") and summary["steps"] == 1500
    assert flow_run_states(setting["home"])[-1] == "COMPLETED"
