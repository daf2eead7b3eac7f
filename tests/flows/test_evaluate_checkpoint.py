"""``evaluate-checkpoint`` re-runs downstream tasks (a ``cls`` task here) with the same evaluation settings as
``evaluate`` (``--data-root``, ``--seeds``, ``--epochs``), and names the final LAPT model ``final``."""

from __future__ import annotations

import contextlib
import json

import pandas as pd
from typer.testing import CliRunner

from focusflow.cli import app
from focusflow.flows.evaluate import checkpoint_artifact, checkpoint_label
from focusflow.pipeline.lapt_stage import checkpoint_key
from focusflow.storage import ArtifactStore
from focusflow.storage.keys import shorten_key
from tests.cli_runner import error_lines, run_cli
from tests.tiny_models import sample_texts, save_tiny


def _lapt_artifacts(store: ArtifactStore, model_dir):
    lineage = {"source": "file:///nowhere/source/x", "split": "file:///nowhere/split/y"}
    final = store.put_dir("lapt", "f" * 64, model_dir, metadata={"language": "sn", "lineage": lineage})
    checkpoint = store.put_dir("lapt-checkpoint", checkpoint_key("c" * 64, 40), model_dir,
                               metadata={"language": "sn", "lineage": lineage, "step": 40})
    return final, checkpoint


def test_a_checkpoint_is_named_as_every_command_names_an_artifact(tmp_path, monkeypatch, capsys):
    """``lapt-checkpoint/<key-prefix>`` and the shortened key of the stage lines, as ``store show`` takes them."""
    store = ArtifactStore(tmp_path / "store")
    final, checkpoint = _lapt_artifacts(store, save_tiny("xlmr", tmp_path / "tiny"))
    for address in (f"lapt-checkpoint/{shorten_key(checkpoint.key)}", "lapt-checkpoint/cccc", checkpoint.uri,
                    str(tmp_path / "store" / "lapt-checkpoint" / checkpoint.key)):
        assert checkpoint_artifact(address, "sn", store.uri).uri == checkpoint.uri, address
    assert checkpoint_artifact("lapt/ff", "sn", store.uri).uri == final.uri
    assert checkpoint_artifact("latest", "sn", store.uri).uri == checkpoint.uri

    import focusflow.flows.evaluate as flow_module
    import focusflow.orchestration.server as server

    given = {}
    monkeypatch.setattr(flow_module, "evaluate_checkpoint", lambda uri, *a, **k: given.update(uri=uri, **k) or {})
    monkeypatch.setattr(server, "local_api", contextlib.nullcontext)
    monkeypatch.setenv("FOCUSFLOW_STORE", store.uri)
    code, _, err = run_cli(monkeypatch, capsys, "evaluate-checkpoint", f"lapt-checkpoint/{shorten_key(checkpoint.key)}",
                           "--language", "sn")
    assert code == 0, err
    assert given["uri"] == checkpoint.uri and given["store"] == store.uri
    code, _, err = run_cli(monkeypatch, capsys, "evaluate-checkpoint", "lapt-checkpoint/dddd", "--language", "sn")
    assert code == 2 and error_lines(err) == [f"error: no artifact lapt-checkpoint/dddd in {store.uri}"], err


def test_checkpoints_are_named_by_step_and_the_final_model_final(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    final, checkpoint = _lapt_artifacts(store, save_tiny("xlmr", tmp_path / "tiny"))
    assert checkpoint_label(final) == "final" and checkpoint_label(checkpoint) == "step-40"


def test_evaluate_checkpoint_reruns_a_cls_task_with_the_evaluate_flags(prefect_server, shared_data, tmp_path,
                                                                       monkeypatch):
    store = ArtifactStore(tmp_path / "store")
    final, _ = _lapt_artifacts(store, save_tiny("xlmr", tmp_path / "tiny", texts=sample_texts(300)))
    monkeypatch.setenv("FOCUSFLOW_STORE", store.uri)
    result = CliRunner().invoke(app, [
        "evaluate-checkpoint", final.uri, "--language", "sn", "--suite", "cls:sib200:sn",
        "--data-root", str(shared_data), "--seeds", "2,3", "--epochs", "0.1"])
    assert result.exit_code == 0, result.output
    output = json.loads(result.output[result.output.index("{"):])
    assert output["label"] == "final" and output["step"] is None
    rows = pd.DataFrame(output["downstream"])
    main = rows[rows["main"]].iloc[0]
    assert (main["model"], main["task"], main["metric"], main["seeds"]) == ("final", "cls:sib200:sn", "accuracy", "2 3")
    (downstream,) = store.list("downstream")
    assert downstream.params["evaluation"]["epochs"] == 0.1
