"""The downstream stage: any task kind from ``evaluation.tasks``, the same settings object as the CLI,
artifact keys of existing configurations unchanged, classification rows in the report's table."""

from __future__ import annotations

import pandas as pd

from focusflow.config import build_config
from focusflow.evaluation.downstream.report import summary_markdown
from focusflow.pipeline import params_for, run_stage, stage_key
from focusflow.pipeline.evaluation_stages import _downstream_key
from focusflow.storage import ArtifactStore
from tests.tiny_models import sample_texts, save_tiny

# EvalSpec as version 1 of the stage dumped it, before max_length and threads existed
VERSION_1_EVALUATION = {"tasks": ["ner:masakhaner2:swa"], "seeds": 5, "epochs": None, "max_train_samples": None,
                        "heldout_sentences": 500, "data_root": None, "lr": None, "batch_size": 32,
                        "eval_every_fraction": 0.05, "max_eval_samples": None, "max_test_samples": None,
                        "split_seed": 0, "precision": "auto"}


def test_existing_configurations_keep_their_downstream_keys(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    config = build_config({"language": "sw", "evaluation": {"tasks": ["ner:masakhaner2:swa"]}})
    params = params_for("downstream", config, name="focus+lapt")
    before = {"evaluation": VERSION_1_EVALUATION, "name": "focus+lapt"}
    inputs = {"model": store.put_bytes("import", "b" * 64, "config.json", b"{}").uri}
    assert _downstream_key(params) == _downstream_key(before)
    assert stage_key(store, "downstream", params, inputs) == stage_key(store, "downstream", before, inputs)
    # threads changes the speed only; a max_length override changes the result, hence the key
    threaded = params_for("downstream", build_config({"language": "sw", "evaluation": {
        "tasks": ["ner:masakhaner2:swa"], "threads": 2}}), name="focus+lapt")
    assert stage_key(store, "downstream", threaded, inputs) == stage_key(store, "downstream", before, inputs)
    shorter = params_for("downstream", build_config({"language": "sw", "evaluation": {
        "tasks": ["ner:masakhaner2:swa"], "max_length": 64}}), name="focus+lapt")
    assert stage_key(store, "downstream", shorter, inputs) != stage_key(store, "downstream", before, inputs)
    faster_rows = params_for("downstream", build_config({"language": "sw", "evaluation": {
        "tasks": ["ner:masakhaner2:swa"], "embedding_lr_scale": 10}}), name="focus+lapt")
    assert stage_key(store, "downstream", faster_rows, inputs) != stage_key(store, "downstream", before, inputs)


def test_the_stage_runs_a_cls_task_and_the_report_table_shows_it(shared_data, tmp_path):
    store = ArtifactStore(tmp_path / "store")
    model = store.put_dir("import", "a" * 64, save_tiny("xlmr", tmp_path / "tiny", texts=sample_texts(300)))
    config = build_config({"language": "sn", "evaluation": {
        "tasks": ["cls:sib200:sn"], "seeds": 2, "epochs": 1, "max_train_samples": 32, "max_eval_samples": 16,
        "max_test_samples": 24, "batch_size": 16, "eval_every_fraction": 0.5, "data_root": str(shared_data)}})
    artifact = run_stage(store, "downstream", params_for("downstream", config, name="focus"), {"model": model})
    results = pd.DataFrame(artifact.metadata["results"])
    main = results[results["main"]].iloc[0]
    assert (main["task"], main["metric"], main["n_seeds"]) == ("cls:sib200:sn", "accuracy", 2)
    assert set(results["metric"]) == {"accuracy", "macro_f1"}
    row = f"| focus | cls:sib200:sn | sn | accuracy | {100 * main['mean']:.1f} ± {100 * main['std']:.1f} | 2 |"
    assert row in summary_markdown(results, "sn")


def test_the_same_evaluation_computed_twice_stores_the_same_bytes_and_its_timings_in_the_manifest(shared_data,
                                                                                                  tmp_path):
    """Same key, same bytes: wall times, speeds and local paths (the data's, the fetched model's) are the manifest's."""
    from focusflow.pipeline.evaluation_stages import MEASURED_COLUMNS

    config = build_config({"language": "sn", "evaluation": {
        "tasks": ["cls:sib200:sn"], "seeds": 1, "epochs": 1, "max_train_samples": 16, "max_eval_samples": 8,
        "max_test_samples": 8, "batch_size": 8, "eval_every_fraction": 0.5, "data_root": str(shared_data)}})
    tiny = save_tiny("xlmr", tmp_path / "tiny", texts=sample_texts(300))
    built = []
    for name in ("one", "two"):
        store = ArtifactStore(tmp_path / name, cache_dir=tmp_path / f"cache-{name}")
        model = store.put_dir("import", "a" * 64, tiny)
        params = params_for("downstream", config, name="focus")
        built.append((store, run_stage(store, "downstream", params, {"model": model})))
    (store, first), (_, second) = built
    assert first.key == second.key and first.content_hash == second.content_hash
    assert set(first.files) == {"runs.csv", "results.csv", "runs.jsonl"}
    assert not set(MEASURED_COLUMNS) & set(pd.read_csv(store.fetch(first) / "runs.csv").columns)
    measured = first.metadata["measured"]
    assert len(measured) == 1 and measured[0]["seconds"] > 0 and str(shared_data) in str(measured[0]["provenance"])


def test_a_named_protocols_values_are_in_the_key_so_a_changed_preset_is_not_a_cache_hit(monkeypatch):
    from focusflow.evaluation.downstream import presets
    from focusflow.pipeline.evaluation_stages import _downstream_key

    params = {"evaluation": {"tasks": ["cls:sib200:sw"], "protocol": "cpu", "seeds": 3}, "name": "prune"}
    before = _downstream_key(params)
    assert before["preset"]["cls:sib200:sw"]["patience"] == 6
    changed = {**presets.CPU, ("cls", None): {**presets.CPU[("cls", None)], "epochs": 20.0}}
    monkeypatch.setattr(presets, "CPU", changed)
    assert _downstream_key(params) != before
    assert "preset" not in _downstream_key({"evaluation": {"tasks": ["cls:sib200:sw"]}, "name": "prune"})
