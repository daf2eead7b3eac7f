"""A tiny specialized model with stored results: the whole graph in-process (no Prefect) on a tiny XLM-R source.

corpus → … → FOCUS init → intrinsic (model and source) → 2 LAPT steps → NER on a tiny CoNLL task (2 seeds, model
and source) → report → publish (``push: false``). About a minute on 2 cores; shared by the module's tests.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from focusflow.corpus.io import write_texts
from tests.tiny_models import sample_texts, save_tiny


def write_ner_task(folder: Path) -> Path:
    rng = random.Random(3)
    folder.mkdir(parents=True, exist_ok=True)
    for split, texts in {"train": sample_texts(40, seed=7), "dev": sample_texts(12, seed=8),
                         "test": sample_texts(12, seed=9)}.items():
        lines = []
        for text in texts:
            lines += [f"{word} {'B-LOC' if rng.random() < 0.2 else 'O'}" for word in text.split()] + [""]
        (folder / f"{split}.txt").write_text("\n".join(lines), encoding="utf-8")
    return folder


def tiny_run_config(root: Path, **publish: Any) -> dict[str, Any]:
    return {
        "language": "ny",
        "store": (root / "store").as_uri(),
        "source_model": str(root / "source"),
        "corpus": {"source": "local", "paths": [str(root / "corpus.jsonl")]},
        "cleaning": {"min_chars": 10, "min_words": 3},
        "split": {"min_heldout_documents": 40},
        "tokenizer": {"vocab_size": 300, "threads": 1},
        "fasttext": {"dim": 16, "epochs": 2, "min_count": 1, "threads": 1},
        "init": {"methods": ["focus"], "candidates": ["prune"]},  # publishing one LAPT model, by its own loss
        "lapt": {"objective": "mlm", "steps": 2, "batch_size": 4, "micro_batch_size": 2, "seq_len": 32,
                 "checkpoint_every": 2, "eval_every": 2, "eval_sequences": 4},
        "evaluation": {"heldout_sentences": 20, "tasks": [f"ner:{root / 'ner'}"], "seeds": 2, "epochs": 1,
                       "batch_size": 8},
        "dedup": {"decontaminate": False},
        "publish": {"repo_id": "someone/tiny-{language}-{model}", "models": ["focus+lapt"], "push": False, **publish},
    }


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The resolved graph of the tiny run (artifact URIs), its root folder and its configuration."""
    import os

    from focusflow.config import build_config
    from focusflow.pipeline.graph import local_tasks, specialize

    root = tmp_path_factory.mktemp("tiny-run")
    write_texts(root / "corpus.jsonl", sample_texts(1500, seed=1))
    save_tiny("xlmr", root / "source")
    write_ner_task(root / "ner")
    config = tiny_run_config(root)
    previous = os.environ.get("FOCUSFLOW_WORK_DIR")
    os.environ["FOCUSFLOW_WORK_DIR"] = str(root / "work")
    try:
        resolved = specialize(build_config(config), config["store"], local_tasks())
    finally:
        if previous is None:
            os.environ.pop("FOCUSFLOW_WORK_DIR", None)
        else:
            os.environ["FOCUSFLOW_WORK_DIR"] = previous
    return {"root": root, "config": config, "resolved": resolved}


def store_downstream(store: Any, model: Any, name: str, f1_by_seed: dict[int, float], task: str) -> Any:
    """A downstream artifact of ``model`` written by the project's own report writer from per-seed runs."""
    import tempfile

    from focusflow.evaluation.downstream.report import write_reports
    from focusflow.storage.export import EXPORT_MARKER

    runs = [{"model": name, "task": task, "kind": "ner", "dataset": "masakhaner2", "language": "nya", "seed": seed,
             "main_metric": "f1", "test": {"f1": f1, "precision": f1 / 2, "recall": min(1.0, f1 * 2)},
             "best_dev": f1, "best_step": 3, "total_steps": 10, "seconds": 1.0, "train_tokens_per_s": 100.0,
             "sizes": {"train": 40, "dev": 12, "test": 12}} for seed, f1 in f1_by_seed.items()]
    params = {"evaluation": {"tasks": [task], "seeds": len(runs), "epochs": 1.0}, "data": None, "name": name}
    with tempfile.TemporaryDirectory() as folder:
        results = write_reports(Path(folder), runs)
        (Path(folder) / EXPORT_MARKER).unlink()  # the tables only, as the downstream stage stores them
        key = store.key("downstream", params, {"model": model}, 1)
        return store.put_dir("downstream", key, folder, params=params, inputs={"model": model},
                             metadata={"results": json.loads(results.to_json(orient="records"))})


def initialized_run(root: Path, family: str, **overrides: Any) -> dict[str, Any]:
    """A real run without LAPT or downstream (~5 s): corpus … FOCUS init, intrinsic results of model and source;
    ``overrides`` replace sections of the configuration (``init={...}``)."""
    from focusflow.config import build_config
    from focusflow.pipeline.graph import local_tasks, specialize
    from focusflow.storage import ArtifactStore

    write_texts(root / "corpus.jsonl", sample_texts(1500, seed=1))
    save_tiny(family, root / "source")
    config = tiny_run_config(root)
    del config["publish"]  # the tests publish it themselves
    config["lapt"]["steps"] = 0
    config["evaluation"]["tasks"] = []
    config["split"]["min_heldout_documents"] = 30
    config.update(overrides)
    resolved = specialize(build_config(config), config["store"], local_tasks())
    store = ArtifactStore(config["store"])
    return {"root": root, "config": config, "resolved": resolved, "store": store,
            "model": store.resolve(resolved["models"]["focus"]), "source": store.resolve(resolved["source"])}


@pytest.fixture(scope="session")
def decoder_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same for a tiny GPT-2 (byte-level BPE, causal LM)."""
    return initialized_run(tmp_path_factory.mktemp("decoder-run"), "gpt2")


@pytest.fixture(scope="session")
def light_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A FOCUS-initialized tiny XLM-R with its intrinsic results and the source's, plus stored NER results of both
    (seed 2 of the model stuck at F1 0)."""
    run = initialized_run(tmp_path_factory.mktemp("light-run"), "xlmr")
    store, model, source = run["store"], run["model"], run["source"]
    task = "ner:masakhaner2:nya"
    downstream = {"model": store_downstream(store, model, "focus", {1: 0.61, 2: 0.0, 3: 0.58}, task),
                  "source": store_downstream(store, source, "original", {1: 0.55, 2: 0.52, 3: 0.57}, task)}
    return {**run, "downstream": downstream}


@pytest.fixture(scope="session")
def tiny_model_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT folder (weights and tokenizer), saved once: what the stage commands' model artifacts hold."""
    return save_tiny("bert", tmp_path_factory.mktemp("tiny-model") / "model", sample_texts(60))


def store_stage_model(store: Any, stage: str, folder: Path, metadata: dict[str, Any], marker: str = "",
                      key: str | None = None) -> Any:
    """A model artifact as ``focusflow transfer``/``lapt`` commit it: no run around it, so no corpus in its lineage
    and only the ``language`` its metadata names (``None`` from a stage command). ``marker`` makes the content (and
    so the publish key) differ between artifacts of the same folder; ``key`` picks the key (default: from params)."""
    import shutil
    import tempfile

    params = {"stage_command": stage, "marker": marker}
    with tempfile.TemporaryDirectory() as staging:
        copy = Path(staging) / "model"
        shutil.copytree(folder, copy)
        (copy / "marker.bin").write_text(marker, encoding="utf-8")  # not a published file
        return store.put_dir(stage, key or store.key(stage, params, {}, 1), copy, params=params, metadata=metadata)
