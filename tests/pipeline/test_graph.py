"""The graph's wiring: in extend and prune mode every initialization brings its own tokenizer, so its models are
evaluated against a reference built with that tokenizer (in replace mode they share the language tokenizer's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from focusflow.config import load_config
from focusflow.pipeline.graph import local_tasks, prepare_branches, specialize
from focusflow.storage import ArtifactStore
from tests.pipeline.recording import LosingStage, RecordingStage
from tests.tiny_models import sample_texts, save_tiny

STAGES = ("corpus", "dedup", "decontaminate", "split", "source", "tokenizer", "fasttext", "init", "align", "reference",
          "intrinsic", "ood-text", "teacher", "lapt-budget", "lapt", "downstream", "reading", "report", "publish")


def _config(root: Path, mode: str, source: str = "unused", **more: Any):
    corpus = root / "corpus.txt"
    if not corpus.exists():
        corpus.write_text("\n".join(sample_texts(2500, seed=2)), encoding="utf-8")
    return load_config(language="sw", source_model=source, store=(root / "store").as_uri(),
                       corpus={"source": "local", "paths": [str(corpus)]}, cleaning={"min_chars": 10},
                       split={"min_heldout_documents": 60}, tokenizer={"vocab_size": 300, "threads": 1},
                       fasttext={"dim": 16, "epochs": 2, "min_count": 2, "threads": 1},
                       init={"methods": ["focus", "mean", "focus+align"], "mode": mode, "refine": {"steps": 2},
                             "candidates": []},
                       evaluation={"heldout_sentences": 20}, **more)


def _wiring(cfg) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any], dict[str, Any]]]]:
    calls: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    branches = specialize(cfg, cfg.store, {name: RecordingStage(name, calls) for name in STAGES})
    return branches, calls


@pytest.mark.parametrize("mode", ["extend", "prune"])
def test_each_initialization_of_a_mode_that_keeps_its_own_tokenizer_gets_its_reference(mode, tmp_path):
    cfg = _config(tmp_path, mode, lapt={"steps": 2}, orchestration={"lapt_methods": ["focus", "mean"]})
    _, calls = _wiring(cfg)
    tokenizers = [inputs.get("tokenizer") for stage, _, inputs in calls if stage == "reference"]
    assert tokenizers == ["init:focus", "init:mean", None]  # one per initialization, and the source's
    evaluated = {inputs["model"]: inputs["reference"] for stage, _, inputs in calls if stage == "intrinsic"}
    assert evaluated["init:focus"] == evaluated["align:focus+align"] == evaluated["lapt:focus"] == "reference:target:focus"
    assert evaluated["init:mean"] == evaluated["lapt:mean"] == "reference:target:mean"
    assert evaluated["source:"] == "reference:source"
    lapt_lineages = [params["_lineage"] for stage, params, _ in calls if stage == "lapt"]
    assert lapt_lineages and all("tokenizer" not in lineage for lineage in lapt_lineages)  # the model carries its own


def test_replace_mode_shares_the_language_tokenizers_reference(tmp_path):
    cfg = _config(tmp_path, "replace", lapt={"steps": 2})
    _, calls = _wiring(cfg)
    evaluated = {inputs["model"]: inputs["reference"] for stage, _, inputs in calls if stage == "intrinsic"}
    assert {evaluated[m] for m in ("init:focus", "init:mean", "align:focus+align", "lapt:focus")} == {"reference:target"}
    assert [params["_lineage"]["tokenizer"] for stage, params, _ in calls if stage == "lapt"] == ["tokenizer:"]


def test_extend_mode_runs_end_to_end_on_a_tiny_model(tmp_path, monkeypatch):
    """Before the fix the intrinsic stage refused every extended model: the reference had the language tokenizer."""
    monkeypatch.setenv("FOCUSFLOW_WORK_DIR", str(tmp_path / "work"))
    source = save_tiny("xlmr", tmp_path / "source", texts=sample_texts(600, seed=1), vocab_size=400)
    cfg = _config(tmp_path, "extend", source=str(source))
    cfg.init.methods = ["focus", "mean"]
    branches = prepare_branches(cfg, cfg.store, local_tasks())
    store = ArtifactStore(cfg.store)
    for name in ("focus", "mean"):
        metrics = store.resolve(branches.intrinsic[name].result()).metadata
        assert metrics["n_sentences"] > 0 and metrics["mlm_loss"] > 0


def test_a_result_the_task_runner_lost_is_computed_again_and_the_run_completes(tmp_path, caplog):
    """A Dask worker killed with the only copy of a finished model cancels that model's future: the graph calls the
    stage again (a cache hit on the stored artifact), and its dependents get the value."""
    cfg = _config(tmp_path, "replace", lapt={"steps": 2})
    expected, _ = _wiring(cfg)
    calls: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    lost = ("init", "align", "lapt")
    tasks = {name: (LosingStage if name in lost else RecordingStage)(name, calls) for name in STAGES}
    with caplog.at_level("WARNING", logger="focusflow.pipeline.graph"):
        resolved = specialize(cfg, cfg.store, tasks)
    assert resolved == expected
    submitted_and_again = {stage: sum(s == stage for s, _, _ in calls) for stage in lost}
    # init: 2 submitted, 2 computed again; align and LAPT: their submissions never ran (their model was lost), so
    # each ran once, when recovered; the intrinsic evaluations of lost models were lost with them and recovered
    assert submitted_and_again == {"init": 2 + 2, "align": 1, "lapt": 1}
    intrinsic = [inputs["model"] for stage, _, inputs in calls if stage == "intrinsic"]
    assert sorted(intrinsic) == ["align:focus+align", "init:focus", "init:mean", "lapt:focus", "source:"]
    report = next(inputs for stage, _, inputs in calls if stage == "report")
    assert report["init:focus"] == "init:focus" and report["lapt:focus"] == "lapt:focus"
    assert "lapt[focus]: the task runner lost its result (CancelledError); submitting it again" in caplog.text


def test_a_runner_that_keeps_losing_a_result_is_an_error_that_says_so(tmp_path):
    cfg = _config(tmp_path, "replace")
    calls: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    tasks = {name: (LosingStage(name, calls, always=True) if name == "init" else RecordingStage(name, calls))
             for name in STAGES}
    with pytest.raises(RuntimeError, match=r"init\[focus\]: the task runner lost its result 3 times"):
        specialize(cfg, cfg.store, tasks)
    assert sum(stage == "init" for stage, _, _ in calls) >= 3


def test_the_graphs_diagram_names_every_stage():
    """The diagram in the graph's docstring and in the README: a stage added to the registry is drawn there too."""
    import re

    from focusflow.pipeline import STAGES, graph

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    drawn = readme.split("## The pipeline", 1)[1].split("```", 2)[1]
    for diagram in (graph.__doc__.split("::", 1)[1].strip().split("\n\n", 1)[0], drawn):
        named = set(re.findall(r"[a-z][a-z-]*", diagram))
        assert set(STAGES) - named == set()


def test_a_pruned_source_is_a_candidate_beside_the_methods_with_its_own_tokenizer(tmp_path):
    """Issue 38: init.candidates: [prune] builds the source's vocabulary pruned to the corpus, named prune in every
    row, evaluated against a reference of its own tokenizer and downstream beside the LAPT models and the source."""
    cfg = _config(tmp_path, "replace", lapt={"steps": 2})
    cfg.init.candidates, cfg.evaluation.tasks = ["prune"], ["ner:masakhaner2:swa"]
    _, calls = _wiring(cfg)
    init_calls = {inputs.get("tokenizer"): params for stage, params, inputs in calls if stage == "init"}
    prune = next(params for stage, params, inputs in calls if stage == "init" and params["mode"] == "prune")
    assert prune["method"] == "mean" and len(init_calls) == 2  # focus and mean share the tokenizer; prune has none
    evaluated = {inputs["model"]: inputs["reference"] for stage, _, inputs in calls if stage == "intrinsic"}
    assert evaluated["init:prune"] == "reference:target:prune" and evaluated["init:focus"] == "reference:target"
    assert [inputs["tokenizer"] for stage, _, inputs in calls if stage == "reference" and inputs.get("tokenizer")] \
        == ["tokenizer:", "init:prune"]
    downstream = sorted(params["name"] for stage, params, _ in calls if stage == "downstream")
    assert downstream == ["focus+lapt", "original", "prune"]
    report = next(inputs for stage, _, inputs in calls if stage == "report")
    assert report["init:prune"] == "init:prune" and report["downstream:prune"] == "downstream:prune"
    # every reference scores the tasks' sentences too: text of another domain, the same for every model
    assert [stage for stage, _, _ in calls].count("ood-text") == 1
    assert {inputs.get("ood") for stage, _, inputs in calls if stage == "reference"} == {"ood-text:"}
    plain = _config(tmp_path, "replace", lapt={"steps": 2})
    _, calls = _wiring(plain)
    assert "ood-text" not in [stage for stage, _, _ in calls], "no tasks, no other text: nothing to score on"


def test_a_pruned_candidate_runs_end_to_end_on_a_tiny_model(tmp_path, monkeypatch):
    monkeypatch.setenv("FOCUSFLOW_WORK_DIR", str(tmp_path / "work"))
    source = save_tiny("xlmr", tmp_path / "source", texts=sample_texts(600, seed=1), vocab_size=400)
    cfg = _config(tmp_path, "replace", source=str(source))
    cfg.init.methods, cfg.init.candidates, cfg.init.extend_top_n = ["mean"], ["prune", "prune+extend"], 40
    branches = prepare_branches(cfg, cfg.store, local_tasks())
    store = ArtifactStore(cfg.store)
    pruned = store.resolve(branches.models["prune"].result())
    assert pruned.metadata["method"] == "prune" and pruned.metadata["mode"] == "prune"
    metrics = {name: store.resolve(branches.intrinsic[name].result()).metadata
               for name in ("prune", "prune+extend", "original")}
    assert metrics["prune"]["vocab_size"] < metrics["original"]["vocab_size"]
    # every token the corpus uses is kept: the held-out text is cut (nearly) as the source cuts it
    assert metrics["prune"]["tokens_per_word"] == pytest.approx(metrics["original"]["tokens_per_word"], rel=0.05)
    extended = store.resolve(branches.models["prune+extend"].result())
    assert extended.metadata["mode"] == "extend" and 0 < extended.metadata["added"] <= 40
    assert metrics["prune+extend"]["tokens_per_word"] < metrics["prune"]["tokens_per_word"]


@pytest.mark.parametrize("shape", ["gemma", "smollm"])
def test_decoders_get_the_pruned_and_the_pruned_extended_candidates_too(tmp_path, monkeypatch, shape):
    """Issue 48: the candidates the default run builds, built for a decoder source as for an encoder."""
    from tests.tiny_decoders import save_tiny_gemma, save_tiny_smollm

    monkeypatch.setenv("FOCUSFLOW_WORK_DIR", str(tmp_path / "work"))
    save = {"gemma": save_tiny_gemma, "smollm": save_tiny_smollm}[shape]
    source = save(tmp_path / "source", sample_texts(600, seed=1), vocab_size=400)
    cfg = _config(tmp_path, "replace", source=str(source))
    cfg.tokenizer.vocab_size, cfg.init.methods, cfg.init.extend_top_n = 500, ["mean"], 40
    cfg.init.candidates = ["prune", "prune+extend"]
    branches = prepare_branches(cfg, cfg.store, local_tasks())
    store = ArtifactStore(cfg.store)
    metrics = {name: store.resolve(branches.intrinsic[name].result()).metadata
               for name in ("prune", "prune+extend", "original")}
    assert metrics["prune"]["vocab_size"] < metrics["original"]["vocab_size"]
    assert metrics["prune"]["tokens_per_word"] == pytest.approx(metrics["original"]["tokens_per_word"], rel=0.01)
    assert metrics["prune+extend"]["tokens_per_word"] < metrics["prune"]["tokens_per_word"]
    assert all(m["bits_per_byte"] > 0 for m in metrics.values())


def test_prune_plus_extend_is_the_source_pruned_with_room_then_extended_and_may_be_trained(tmp_path):
    """Issue 44: the pruned source plus the language's frequent new tokens (FOCUS), a candidate LAPT may train."""
    cfg = _config(tmp_path, "replace", lapt={"steps": 2, "objective": "distill"})
    cfg.init.candidates, cfg.evaluation.tasks = ["prune", "prune+extend"], ["ner:masakhaner2:swa"]
    cfg.orchestration.lapt_methods = ["focus", "prune+extend"]
    _, calls = _wiring(cfg)
    inits = {params["mode"] + ("+reserve" if params["options"].get("prune_reserve") else ""): (params, inputs)
             for stage, params, inputs in calls if stage == "init"}
    reserved, _ = inits["prune+reserve"]
    assert reserved["options"]["prune_reserve"] == cfg.init.extend_top_n and "tokenizer" not in inits["prune"][1]
    extended, inputs = inits["extend"]
    assert extended["method"] == "focus" and inputs["source"] == "init:prune+extend:pruned"
    assert inputs["tokenizer"] == "tokenizer:" and inputs["fasttext"] == "fasttext:"
    trained = sorted(inputs["model"] for stage, _, inputs in calls if stage == "lapt")
    assert trained == ["init:focus", "init:prune+extend"]
    downstream = sorted(params["name"] for stage, params, _ in calls if stage == "downstream")
    assert downstream == ["focus+distill", "original", "prune", "prune+extend", "prune+extend+distill"]
    assert all("source" not in inputs for stage, _, inputs in calls if stage == "downstream")
    read = {inputs["model"]: inputs["source"] for stage, _, inputs in calls if stage == "reading"}
    assert read == {"init:prune": "source:", "init:prune+extend": "source:"}, "once per vocabulary from the source's"
    report = next(inputs for stage, _, inputs in calls if stage == "report")
    assert report["reading:prune+extend"] == "reading:prune+extend"


def test_a_distilling_lapt_and_its_budget_get_the_source_as_teacher(tmp_path):
    """The budget first (it times steps on states of its own texts), then the teacher's states for the texts its
    planned steps read, then the LAPT reading them."""
    cfg = _config(tmp_path, "replace", lapt={"minutes": 5, "objective": "distill"})
    _, calls = _wiring(cfg)
    for stage in ("lapt", "lapt-budget"):
        assert [inputs.get("source") for name, _, inputs in calls if name == stage] == ["source:"], stage
    assert [inputs.get("teacher") for name, _, inputs in calls if name == "lapt"] == ["teacher:focus"]
    assert [inputs for name, _, inputs in calls if name == "teacher"] == [
        {"source": "source:", "split": "split:", "model": "init:focus", "budget": "lapt-budget:focus"}]
    stepped = _config(tmp_path, "replace", lapt={"steps": 40, "objective": "distill"})
    _, calls = _wiring(stepped)
    assert [params["steps"] for name, params, _ in calls if name == "teacher"] == [40], "a step budget is its count"
    plain = _config(tmp_path, "replace", lapt={"minutes": 5})
    _, calls = _wiring(plain)
    assert all("source" not in inputs for name, _, inputs in calls if name in ("lapt", "lapt-budget"))
    assert not [name for name, _, _ in calls if name == "teacher"], "an MLM LAPT has no teacher to store"
