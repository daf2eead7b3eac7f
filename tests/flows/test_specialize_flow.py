"""End to end: the specialize_language flow against a real local Prefect server.

A tiny XLM-R-style source model and a small generated corpus make every stage run for real
(corpus → dedup → split → tokenizer → fastText → FOCUS/random init → intrinsic → LAPT → report)
in about a minute; the second run must be all cache hits.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from focusflow.corpus.io import write_texts
from focusflow.storage import ArtifactStore
from tests.tiny_models import sample_texts, save_tiny

pytestmark = pytest.mark.slow

STAGES_BEFORE_TOKENIZER = {"corpus", "dedup", "split", "source"}


def run_config(store_uri: str, corpus: Path, source: Path, **overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "store": store_uri,
        "source_model": str(source),
        "corpus": {"source": "local", "paths": [str(corpus)]},
        "cleaning": {"min_chars": 10, "min_words": 3},
        "split": {"min_heldout_documents": 40},
        "tokenizer": {"vocab_size": 300},
        "fasttext": {"dim": 16, "epochs": 2, "min_count": 1},
        "init": {"methods": ["focus", "random"]},
        "lapt": {"steps": 4, "batch_size": 4, "micro_batch_size": 2, "seq_len": 32, "checkpoint_every": 2,
                 "eval_every": 2, "eval_sequences": 4},
        "evaluation": {"heldout_sentences": 20},
    }
    for section, values in overrides.items():
        config[section] = {**config.get(section, {}), **values} if isinstance(values, dict) else values
    return config


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("flow-inputs")
    corpus = root / "corpus.jsonl"
    write_texts(corpus, sample_texts(1500, seed=1))
    return {"corpus": corpus, "source": save_tiny("xlmr", root / "source")}


@pytest.fixture(autouse=True)
def work_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FOCUSFLOW_WORK_DIR", str(tmp_path / "work"))
    return tmp_path / "work"


def task_states(flow_run_id: Any) -> dict[str, list[str]]:
    """Task name → state names of one flow run's task runs."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    async def read() -> dict[str, list[str]]:
        async with get_client() as client:
            runs = await client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
        states: dict[str, list[str]] = {}
        for run in runs:
            states.setdefault(run.name.split("[")[0], []).append(run.state.name if run.state else "?")
        return states

    return asyncio.run(read())


def markdown_artifacts(key: str) -> list[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    async def read() -> list[str]:
        async with get_client() as client:
            found = await client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
        return [str(artifact.data) for artifact in found]

    return asyncio.run(read())


def run_flow(language: str, config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, list[str]]]:
    from focusflow.flows import specialize_language

    state = specialize_language(language, config, return_state=True)
    assert state.is_completed(), state
    return state.result(), task_states(state.state_details.flow_run_id)


def test_specialize_runs_caches_and_recomputes_downstream_of_a_change(prefect_server, inputs, tmp_path):
    store_uri = (tmp_path / "store").as_uri()
    config = run_config(store_uri, inputs["corpus"], inputs["source"])

    first, states = run_flow("ny", config)
    store = ArtifactStore(store_uri)
    for stage in ("corpus", "dedup", "split", "source", "tokenizer", "fasttext", "init", "intrinsic", "lapt", "report"):
        assert store.list(stage), f"stage {stage} stored nothing"
    assert all(s == ["Completed"] or set(s) == {"Completed"} for s in states.values()), states
    report = store.fetch(store.resolve(first["report"]))
    assert {"report.md", "comparison.csv", "comparison.png"} <= {p.name for p in report.iterdir()}
    import pandas as pd

    comparison = pd.read_csv(report / "comparison.csv")
    assert {"method", "stage", "fidelity", "retrieval_top1", "mlm_loss", "bits_per_byte", "vocab_size",
            "tokens_per_word"} <= set(comparison.columns)
    # the default run: the pruned and the pruned-extended source beside the methods, FOCUS and prune+extend
    # distilled from the (encoder) source
    assert set(zip(comparison["method"], comparison["stage"], strict=False)) == {
        ("original", "init"), ("focus", "init"), ("random", "init"), ("focus", "distill"), ("prune", "init"),
        ("prune+extend", "init"), ("prune+extend", "distill")}
    assert comparison["tokens_per_word"].notna().all()
    assert "<redacted>" not in (report / "report.md").read_text()
    plans = markdown_artifacts("ny-plan")  # the UI showed the run's shape before it ran
    assert plans and "| lapt[focus] | after its inputs |" in plans[0] and "| corpus | to build |" in plans[0]

    started = time.monotonic()
    second, states = run_flow("ny", config)
    assert second == first
    assert all(set(s) == {"Cached"} for s in states.values()), states
    assert time.monotonic() - started < 60
    assert any("stored, 0 to build now, 0 after their inputs" in plan for plan in markdown_artifacts("ny-plan"))

    changed = run_config(store_uri, inputs["corpus"], inputs["source"], tokenizer={"vocab_size": 280})
    third, states = run_flow("ny", changed)
    for stage in STAGES_BEFORE_TOKENIZER:
        assert set(states[stage]) == {"Cached"}, (stage, states)
    for stage in ("tokenizer", "fasttext", "lapt", "report"):
        assert "Cached" not in states[stage], (stage, states)
    # the source's word states are of the texts each distillation reads, counted in its model's tokens: new too
    assert "Cached" not in states["teacher"], states
    # focus, random and prune+extend (which adds the new tokenizer's pieces) are new; the pruned source and the
    # pruned source prune+extend starts from read no target tokenizer: cached
    assert sorted(states["init"]) == ["Cached", "Cached", "Completed", "Completed", "Completed"], states
    assert third["tokenizer"] != first["tokenizer"] and third["corpus"] == first["corpus"]


def write_ner_task(folder: Path) -> Path:
    """A tiny CoNLL NER task whose test sentences also occur in the corpus (to be decontaminated)."""
    import random

    rng = random.Random(3)
    for split, texts in {"train": sample_texts(60, seed=7), "dev": sample_texts(20, seed=8),
                         "test": sample_texts(1500, seed=1)[:20]}.items():
        lines = []
        for text in texts:
            lines += [f"{word} {'B-LOC' if rng.random() < 0.2 else 'O'}" for word in text.split()] + [""]
        (folder / f"{split}.txt").write_text("\n".join(lines), encoding="utf-8")
    return folder


@pytest.mark.s3
def test_specialize_on_s3_store_with_decontamination_and_downstream(prefect_server, s3_server, inputs, tmp_path):
    uri = s3_server.make_bucket("flow-store")
    task = write_ner_task(tmp_path)
    config = run_config(f"{uri}/ff", inputs["corpus"], inputs["source"],
                        init={"methods": ["focus"], "candidates": ["prune"]},
                        lapt={"steps": 2, "checkpoint_every": 1, "objective": "mlm"},
                        evaluation={"tasks": [f"ner:{task}"], "seeds": 2, "epochs": 1, "batch_size": 8})
    first, _ = run_flow("ny", config)
    assert first["report"].startswith(f"{uri}/ff/report/")
    store = ArtifactStore(f"{uri}/ff")
    assert store.list("lapt-checkpoint") and store.list("lapt")
    removed = store.resolve(first["decontaminate"]).metadata["lines_removed"]
    assert removed >= 15, "the test sentences copied into the corpus must be removed"
    results = [row for a in store.list("downstream") for row in a.metadata["results"]]
    assert {row["model"] for row in results} == {"original", "focus+lapt", "prune"}  # prune: the floor candidate
    assert all(row["n_seeds"] == 2 for row in results)
    second, states = run_flow("ny", config)
    assert second == first and all(set(s) == {"Cached"} for s in states.values()), states


def test_killed_flow_resumes_lapt_from_last_checkpoint(prefect_server, inputs, tmp_path, work_dir):
    store_uri = (tmp_path / "store").as_uri()
    config = run_config(store_uri, inputs["corpus"], inputs["source"], init={"methods": ["focus"]},
                        lapt={"steps": 60, "checkpoint_every": 5, "eval_every": 30},  # a distillation: resumed too
                        orchestration={"lapt_methods": ["focus"]})
    script = ("import json, sys; from focusflow.flows import specialize_language; "
              "specialize_language('ny', json.loads(sys.argv[1]))")
    env = {**os.environ, "PREFECT_API_URL": prefect_server.api_url}
    process = subprocess.Popen([sys.executable, "-c", script, json.dumps(config)], env=env,
                               start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = ArtifactStore(store_uri)
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline and process.poll() is None:
            if Path(store.root).is_dir() and store.list("lapt-checkpoint"):  # the first stage creates the store
                break
            time.sleep(0.5)
        assert process.poll() is None, "the flow ended before a checkpoint could be interrupted"
        assert store.list("lapt-checkpoint"), "no checkpoint was stored in time"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    stored_step = max(a.metadata["step"] for a in store.list("lapt-checkpoint"))
    assert not store.list("lapt"), "killed mid-LAPT: no final model may be committed"

    result, _ = run_flow("ny", config)
    summary = store.resolve(result["lapt"]["focus"]).metadata
    assert summary["resumed_from"], "the re-run must resume from a checkpoint, not start over"
    assert summary["steps"] == 60 and stored_step >= 5
