"""A long command says what it is doing: one line per stage on stderr (started / cache hit / done in N s), and
library INFO records (Prefect's ``Finished in state Completed()``) stay off the console unless verbose, where
they name the run they come from."""

from __future__ import annotations

import json
import logging
import re

from focusflow.logs import RunFormatter
from tests.cli_runner import run_cli
from tests.tiny_models import sample_texts

LINE = re.compile(r"^\d\d:\d\d:\d\d (?P<stage>[\w\[\]+-]+): (?P<what>started|cache hit|done in [\d.]+ s)")


def stage_lines(err: str) -> list[tuple[str, str]]:
    return [(m["stage"], re.sub(r"[\d.]+ s", "N s", m["what"])) for m in map(LINE.match, err.splitlines()) if m]


def test_a_stage_command_prints_started_done_then_cache_hit(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FOCUSFLOW_STORE", str(tmp_path / "store"))
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"text": t}) + "\n" for t in sample_texts(30)), encoding="utf-8")
    code, out, err = run_cli(monkeypatch, capsys, "split", str(docs))
    assert code == 0, err
    assert stage_lines(err) == [("split", "started"), ("split", "done in N s")]
    assert "artifact" in json.loads(out)  # stdout keeps only the result
    code, out, err = run_cli(monkeypatch, capsys, "split", str(docs))
    assert stage_lines(err) == [("split", "cache hit")]


def test_the_compare_graph_labels_its_branches(tmp_path):
    """The in-process graph passes each branch's label (``init[focus]``), as the Prefect tasks name their runs."""
    from focusflow.pipeline.graph import LocalStage

    seen: list[str] = []

    class Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    logger = logging.getLogger("focusflow.stages")
    handler = Seen()
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        docs = tmp_path / "dedup"
        docs.mkdir()
        (docs / "documents.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in sample_texts(30)),
                                              encoding="utf-8")
        from focusflow.storage import ArtifactStore

        store = ArtifactStore(tmp_path / "store")
        dedup = store.put_dir("dedup", "d" * 64, docs)
        from focusflow.config import load_config
        from focusflow.pipeline import params_for

        LocalStage("split")(store.uri, params_for("split", load_config(language="sw")), {"dedup": dedup.uri}, label="mine")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert [m.split(" (")[0].split(" in ")[0] for m in seen] == ["split[mine]: started", "split[mine]: done"]


def test_library_info_records_name_their_run_and_stay_off_the_console_by_default(restore_output_policy, monkeypatch,
                                                                                 capsys):
    record = logging.LogRecord("prefect.task_runs", logging.INFO, __file__, 1, "Finished in state %s", ("Completed()",),
                               None)
    record.task_run_name = "init[focus]"
    assert RunFormatter("%(levelname)s %(name)s: %(message)s").format(record) == \
        "[init[focus]] INFO prefect.task_runs: Finished in state Completed()"

    library = logging.getLogger("focusflow-test.library")  # a library logger at INFO, as Prefect sets its own
    library.setLevel(logging.INFO)
    code, _, _ = run_cli(monkeypatch, capsys, "config", "-l", "sw")
    assert code == 0
    library.info("Finished in state Completed()")
    library.warning("a real warning")
    err = capsys.readouterr().err
    assert "Finished in state" not in err and "a real warning" in err
    monkeypatch.setattr(logging.root, "handlers", [])
    code, _, _ = run_cli(monkeypatch, capsys, "--verbose", "config", "-l", "sw")
    library.info("Finished in state Completed()")
    assert "INFO focusflow-test.library: Finished in state Completed()" in capsys.readouterr().err
