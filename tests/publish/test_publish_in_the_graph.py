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
    config = build_config({**base, "publish": {"repo_id": "me/e5-{language}-{model}", "models": ["focus+distill"]}})
    assert params_for("publish", config, model="focus+distill")["repo_id"] == "me/e5-sw-focus-distill"
    with pytest.raises(ConfigError, match="makes no model 'focus\\+lapt'; it makes focus, random, prune, prune\\+extend, "
                                          "focus\\+distill, prune\\+extend\\+distill"):
        params_for("publish", config, model="focus+lapt")  # an encoder's LAPT distills by default
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
        assert values[("ner:ner", row["metric"])] == row["mean"]  # a local folder by its name: no path on a card
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


def write_sib200_copy(data_root, code: str) -> None:
    """A local copy of SIB-200 as published (``<root>/cls/sib200/<FLORES code>/``: labels.txt and the split TSVs)."""
    from tests.tiny_models import sample_texts

    folder = data_root / "cls" / "sib200" / code
    folder.mkdir(parents=True)
    topics = ("science/technology", "travel", "politics", "sports")
    (folder / "labels.txt").write_text("\n".join(topics) + "\n", encoding="utf-8")
    for seed, (split, size) in enumerate((("train", 32), ("dev", 8), ("test", 8))):
        rows = [f"{i}\t{topics[i % len(topics)]}\t{text}" for i, text in enumerate(sample_texts(size, seed=20 + seed))]
        (folder / f"{split}.tsv").write_text("\n".join(["index_id\tcategory\ttext", *rows]) + "\n", encoding="utf-8")


def test_a_run_evaluated_on_sib200_publishes_its_product_and_the_pruned_model(tmp_path):
    """Issue 47: every card of a run with a SIB-200 task crashed on the dataset's ``{code}`` (KeyError) after all
    the run's work. The card is built offline and names the dataset, its config from the local copy the run read."""
    from focusflow.config import build_config
    from focusflow.corpus.io import write_texts
    from focusflow.pipeline.graph import local_tasks, specialize
    from focusflow.storage import ArtifactStore
    from tests.publish.conftest import tiny_run_config
    from tests.tiny_models import sample_texts, save_tiny

    write_texts(tmp_path / "corpus.jsonl", sample_texts(1500, seed=1))
    save_tiny("xlmr", tmp_path / "source")
    write_sib200_copy(tmp_path / "data", "nya_Latn")
    config = tiny_run_config(tmp_path, models=["product"])
    config["lapt"]["steps"] = 0
    config["split"]["min_heldout_documents"] = 30
    config["evaluation"].update(tasks=["cls:sib200:ny"], seeds=1, data_root=str(tmp_path / "data"))
    resolved = specialize(build_config(config), config["store"], local_tasks())
    store = ArtifactStore(config["store"])
    [published] = [store.resolve(uri) for uri in resolved["publish"].values()]
    card = ModelCard.load(store.fetch(published) / "README.md")
    sib200 = [r for r in card.data.eval_results if r.dataset_type == "Davlan/sib200"]
    assert {r.metric_type for r in sib200} == {"accuracy", "macro_f1"}
    assert {r.dataset_config for r in sib200} == {"nya_Latn"} and card.data.datasets is None  # evaluated on, not trained

    out = tmp_path / "prune"  # the command publishes the run's other candidate the same way
    result = CliRunner().invoke(app, ["publish", resolved["models"]["prune"], "--repo-id", "someone/tiny-ny-prune",
                                      "--out", str(out), "--store", store.uri])
    assert result.exit_code == 0, result.output
    card = ModelCard.load(out / "README.md")
    assert {r.dataset_config for r in card.data.eval_results if r.dataset_type == "Davlan/sib200"} == {"nya_Latn"}
