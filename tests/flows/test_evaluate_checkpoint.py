"""``evaluate-checkpoint`` re-runs downstream tasks (a ``cls`` task here) with the same evaluation settings as
``evaluate`` (``--data-root``, ``--seeds``, ``--epochs``), and names the final LAPT model ``final``."""

from __future__ import annotations

import json

import pandas as pd
from typer.testing import CliRunner

from focusflow.cli import app
from focusflow.flows.evaluate import checkpoint_label
from focusflow.storage import ArtifactStore
from tests.tiny_models import sample_texts, save_tiny


def _lapt_artifacts(store: ArtifactStore, model_dir):
    lineage = {"source": "file:///nowhere/source/x", "split": "file:///nowhere/split/y"}
    final = store.put_dir("lapt", "f" * 64, model_dir, metadata={"language": "sn", "lineage": lineage})
    checkpoint = store.put_dir("lapt-checkpoint", "c" * 64, model_dir,
                               metadata={"language": "sn", "lineage": lineage, "step": 40})
    return final, checkpoint


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
