"""``focusflow plan``: a run's models and every stage call it makes, each stored, to build, or after its inputs,
before anything is built."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from focusflow.cli import app
from focusflow.config import load_config
from focusflow.pipeline import params_for, run_stage
from focusflow.pipeline.run_view import AFTER_INPUTS, STORED, TO_BUILD, plan_run
from focusflow.storage import ArtifactStore
from tests.tiny_models import sample_texts


def _config(tmp_path: Path) -> Path:
    raw = tmp_path / "raw.txt"
    raw.write_text("\n".join(sample_texts(300, seed=5)) + "\n", encoding="utf-8")
    config = tmp_path / "run.yaml"
    config.write_text(f"language: sw\nstore: {(tmp_path / 'store').as_uri()}\ncorpus:\n  source: local\n"
                      f"  paths: ['{raw}']\ninit:\n  methods: [focus]\n  candidates: [prune, prune+extend]\n"
                      "lapt:\n  minutes: 5\n  objective: distill\norchestration:\n  lapt_methods: [focus, prune+extend]\n",
                      encoding="utf-8")
    return config


def test_a_plan_walks_the_run_without_building_and_follows_the_store(tmp_path):
    cfg = load_config(_config(tmp_path))
    store = ArtifactStore(cfg.store)
    view = plan_run(cfg, store)
    first, *rest = view.calls
    assert (first.stage, first.status) == ("corpus", TO_BUILD) and first.key
    assert {call.status for call in rest} == {AFTER_INPUTS}, "nothing past the corpus has a key yet"
    names = [call.name for call in view.calls]
    assert "teacher[prune+extend]" in names and "lapt-budget[prune+extend]" in names and "lapt[prune+extend]" in names
    assert view.models["may be the product"] == ["focus+distill", "prune+extend+distill", "prune", "prune+extend"]
    assert view.lapt["objective"] == "distill"
    outputs = {call.stage: call.output for call in view.calls}
    assert (outputs["corpus"], outputs["lapt"], outputs["split"]) == ("CorpusRecord", "LaptRecord", "StageRecord")
    assert "threads: another thread count plans and trains again" in view.lapt["budget"], view.lapt["budget"]
    assert not list((tmp_path / "store").glob("*/*")), "planning built nothing"
    corpus = run_stage(store, "corpus", params_for("corpus", cfg), language="sw")
    again = plan_run(cfg, store)
    assert (again.calls[0].status, again.calls[0].key) == (STORED, corpus.key) == (STORED, first.key)
    assert again.calls[1].stage == "dedup" and again.calls[1].status == TO_BUILD


def test_the_plan_says_which_objective_auto_chose_and_which_lm_loss_the_source_trains(tmp_path):
    cfg = load_config(_config(tmp_path), ["lapt.objective=auto"])  # e5-small, an encoder: it distills
    assert plan_run(cfg, ArtifactStore(cfg.store)).lapt["objective"] == "distill (auto: the source's family's)"
    cfg = load_config(_config(tmp_path), ["lapt.objective=mlm"])
    assert plan_run(cfg, ArtifactStore(cfg.store)).lapt["objective"] == "mlm (masked LM)"
    decoder = load_config(_config(tmp_path), ["lapt.objective=auto", "source_model=gemma3:270m",
                                              "orchestration.lapt_methods=[focus]"])
    assert plan_run(decoder, ArtifactStore(decoder.store)).lapt["objective"] == \
        "mlm (causal LM; auto: the source's family's)"


def test_a_decoder_run_that_does_not_evaluate_its_source_is_not_said_to_choose_on_bits(tmp_path):
    """Without the source's dev bits per byte the choice cannot be made on them: the plan said it would."""
    decoder = ["source_model=gemma3:270m", "orchestration.lapt_methods=[focus]"]
    chosen = plan_run(cfg := load_config(_config(tmp_path), decoder), ArtifactStore(cfg.store)).without_tasks
    assert "dev bits per byte" in chosen
    blind = load_config(_config(tmp_path), [*decoder, "orchestration.evaluate_original=false"])
    assert plan_run(blind, ArtifactStore(blind.store)).without_tasks.endswith("not measured: the configured model)")


def test_focusflow_plan_prints_it_for_a_person_or_as_json(tmp_path):
    config = _config(tmp_path)
    text = CliRunner().invoke(app, ["plan", "-c", str(config)])
    assert text.exit_code == 0, text.output
    assert "may be the product" in text.output and "corpus" in text.output and "to build" in text.output
    as_json = CliRunner().invoke(app, ["plan", "-c", str(config), "--json"])
    plan = json.loads(as_json.output)
    assert plan["counts"]["to build"] == 1 and plan["calls"][0]["stage"] == "corpus"


def test_the_plan_as_markdown_names_every_call_with_its_inputs_for_the_prefect_ui(tmp_path):
    cfg = load_config(_config(tmp_path))
    view = plan_run(cfg, ArtifactStore(cfg.store))
    markdown = view.markdown()
    assert markdown.startswith("# focusflow plan: sw")
    assert "| may be the product | focus+distill, prune+extend+distill, prune, prune+extend |" in markdown
    assert "| lapt[prune+extend] | after its inputs |" in markdown
    assert f"| corpus | to build |  | CorpusRecord | `corpus/{view.calls[0].key[:12]}" in markdown
    assert "dataset ← split" in markdown or "split ← split" in markdown, "an input and the call that makes it"
    tables = 2 + len(view.models) + 2 + 2  # the models table (header, models, LAPT, tasks), the calls header
    assert markdown.count("\n| ") == tables + len(view.calls), "one row per call"
