"""A candidate the run built beside its methods (the pruned source, the pruned source extended) is published as what
it is: its card says its vocabulary is the source's own, and the configuration shipped with it rebuilds it alone."""

from __future__ import annotations

from typing import Any

import pytest

from focusflow.config import build_config
from focusflow.pipeline.registry import params_for
from focusflow.pipeline.run_plan import RunPlan
from focusflow.publish.card import CANDIDATE_TEXTS, build_card
from focusflow.publish.facts import gather_facts
from focusflow.publish.folder import run_configuration
from focusflow.publish.lineage import trace
from tests.publish.conftest import initialized_run


@pytest.fixture(scope="module")
def candidate_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return initialized_run(tmp_path_factory.mktemp("candidate-run"), "xlmr",
                           init={"methods": ["focus"], "candidates": ["prune", "prune+extend"], "extend_top_n": 40,
                                 "prune_budget": 0.5})


@pytest.mark.parametrize("name", ["prune", "prune+extend"])
def test_a_candidate_is_named_described_and_rebuilt_as_itself(candidate_run, name):
    store = candidate_run["store"]
    model = store.resolve(candidate_run["resolved"]["models"][name])
    lineage = trace(store, model)
    assert (lineage.candidate, lineage.label) == (name, name)
    facts = gather_facts(store, lineage)
    card = build_card(facts, "someone/tiny-ny-candidate", "9.9.9").text
    assert CANDIDATE_TEXTS[name] in card and "a new tokenizer trained on" not in card
    assert f"the `{name}` candidate" in card
    assert facts.model.tokens_per_word == lineage.intrinsic.metadata["tokens_per_word"], \
        "tokens per word as the run measured them on this model's own tokenizer, not the language tokenizer's"

    config = build_config(run_configuration(lineage))
    plan = RunPlan.from_config(config)
    assert [branch.name for branch in plan.branches] == [name], "the configuration rebuilds this model and no other"
    assert not config.lapt.has_budget, "a model published at initialization is rebuilt without LAPT"
    spec_inputs = {"prune": {"method": "mean", "mode": "prune"}, "prune+extend": {"method": "focus", "mode": "extend"}}
    assert params_for("init", config, **spec_inputs[name]) == model.params, "the same init parameters: the same key"
    if name == "prune+extend":
        assert lineage.pruned_source is not None
        assert params_for("init", config, method="mean", mode="prune", reserve=config.init.extend_top_n) \
            == lineage.pruned_source.params


def test_a_method_model_published_at_initialization_is_rebuilt_without_lapt(candidate_run):
    store = candidate_run["store"]
    lineage = trace(store, candidate_run["model"])
    config = build_config(run_configuration(lineage))
    assert lineage.candidate is None and config.init.methods == ["focus"] and config.init.candidates == []
    assert not config.lapt.has_budget and [b.name for b in RunPlan.from_config(config).branches] == ["focus"]


def test_the_model_is_named_as_the_report_it_is_published_with_names_it(candidate_run, tmp_path):
    """A prune-mode run of the same store names the same artifact ``mean`` (the same parameters, a cache hit): the
    card published with this run's report calls it what this run calls it."""
    store = candidate_run["store"]
    model = store.resolve(candidate_run["resolved"]["models"]["prune"])
    run_report = store.resolve(candidate_run["resolved"]["report"])
    folder = tmp_path / "other-report"
    folder.mkdir()
    (folder / "report.md").write_text("another run's report", encoding="utf-8")
    named = {"init:mean": model, "intrinsic:mean": trace(store, model).intrinsic,
             "intrinsic:original": trace(store, model).source_intrinsic,
             "downstream:mean": trace(store, model).intrinsic}  # it reports more about the model than the run's
    store.put_dir("report", store.key("report", {"language": "ny", "run": "other"}, named, 1), folder,
                  params={"language": "ny", "run": "other"}, inputs=named,
                  metadata={"product": "mean", "candidates": [{"name": "mean", "dev_verdicts": {}}]})
    assert trace(store, model).label == "mean", "traced alone, the report that reports most names it"
    assert trace(store, model, report=run_report).label == "prune"
    assert trace(store, model, report=run_report).report == run_report
