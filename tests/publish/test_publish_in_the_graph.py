"""``publish:`` in a run configuration: the graph publishes at the end of ``specialize`` through the registry.

The configuration is checked before any stage runs; the stage gets the run's own results (the
report's), so ``focusflow publish`` of the same model with the same settings is a cache hit.
"""

from __future__ import annotations

import json

import pytest
from huggingface_hub import ModelCard
from typer.testing import CliRunner

from focusflow.cli import app
from focusflow.config import ConfigError, build_config
from focusflow.pipeline import params_for


def test_publish_settings_are_checked_before_anything_runs():
    base = {"language": "sw", "lapt": {"steps": 10}, "init": {"methods": ["focus", "random"]}}
    config = build_config({**base, "publish": {"repo_id": "me/e5-{language}-{model}", "models": ["focus+lapt"]}})
    assert params_for("publish", config, model="focus+lapt")["repo_id"] == "me/e5-sw-focus-lapt"
    with pytest.raises(ConfigError, match="makes no model 'random\\+lapt'; it makes focus, random, prune, focus\\+lapt"):
        params_for("publish", config, model="random+lapt")
    two = build_config({**base, "publish": {"repo_id": "me/e5", "models": ["focus", "random"]}})
    with pytest.raises(ConfigError, match="each model needs its own repository"):
        params_for("publish", two, model="focus")
    with pytest.raises(ConfigError, match="publish.privat: unknown setting \\(did you mean 'private'\\?\\)"):
        build_config({**base, "publish": {"privat": True}})


@pytest.mark.slow
def test_the_graph_publishes_the_lapt_model_with_its_downstream_results(tiny_run):
    from focusflow.storage import ArtifactStore

    store = ArtifactStore(tiny_run["config"]["store"])
    published = store.resolve(tiny_run["resolved"]["publish"]["focus+lapt"])
    assert published.params["repo_id"] == "someone/tiny-ny-focus-lapt" and not published.params["push"]
    folder = store.fetch(published)
    # LAPT keeps the initialization's transfer report: it is copied from the init artifact
    assert {"model.safetensors", "transfer_report.parquet", "transfer_totals.json", "metrics.csv"} <= set(
        published.files)
    card = ModelCard.load(folder / "README.md")
    lapt = store.resolve(tiny_run["resolved"]["lapt"]["focus"])
    downstream = store.resolve(tiny_run["resolved"]["downstream"]["focus+lapt"])
    values = {(r.dataset_type, r.metric_type): r.metric_value for r in card.data.eval_results}
    for row in downstream.metadata["results"]:
        assert values[(f"ner:{tiny_run['root'] / 'ner'}", row["metric"])] == row["mean"]
    assert f"steps {lapt.metadata['steps']}" in card.text and "(focus+lapt, after language-adaptive" in card.text
    original = store.resolve(tiny_run["resolved"]["downstream"]["original"]).metadata["results"]
    f1 = next(r for r in original if r["metric"] == "f1")
    source_column = f"| {100 * f1['mean']:.1f} ± {100 * f1['std']:.1f} | "  # then the paired verdict, then the seeds
    assert source_column in card.text and "2 paired seeds" in card.text and " | 1 2 |" in card.text
    lineage = json.loads((folder / "lineage.json").read_text())
    assert lineage["label"] == "focus+lapt" and lineage["artifacts"]["model"]["key"] == lapt.key
    assert lineage["artifacts"]["report"]["key"] == store.resolve(tiny_run["resolved"]["report"]).key

    # the command finds the same results by lineage: same key, nothing new stored
    before = {a.uri for a in store.list()}
    result = CliRunner().invoke(app, ["publish", lapt.uri, "--repo-id", "someone/tiny-ny-focus-lapt",
                                      "--out", str(tiny_run["root"] / "cli-out"), "--store", store.uri])
    assert result.exit_code == 0, result.output
    assert {a.uri for a in store.list()} == before
    stdout = result.stdout  # stderr carries the stage lines; the JSON is followed by the folder line
    assert json.loads(stdout[:stdout.rindex("}") + 1])["artifact"] == published.uri


@pytest.mark.slow
def test_a_lapt_checkpoint_is_publishable(tiny_run, tmp_path):
    from focusflow.storage import ArtifactStore

    store = ArtifactStore(tiny_run["config"]["store"])
    checkpoint = store.list("lapt-checkpoint")[-1]
    out = tmp_path / "checkpoint"
    result = CliRunner().invoke(app, ["publish", checkpoint.uri, "--repo-id", "someone/ckpt", "--out", str(out),
                                      "--store", store.uri])
    assert result.exit_code == 0, result.output
    names = {p.name for p in out.iterdir()}
    assert "model.safetensors" in names and "transfer_totals.json" in names
    assert not any(name.endswith(".pt") or name == "trainer_state.json" for name in names)
    assert "a checkpoint of language-adaptive pretraining" in (out / "README.md").read_text()
