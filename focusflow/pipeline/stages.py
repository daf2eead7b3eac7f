"""The pipeline's stages as data: name, version, inputs, and the core function that builds each.

This module knows nothing of Prefect. ``run_stage`` computes the artifact key from the stage's
parameters and its input artifacts' content hashes, returns the stored artifact when it
exists, and otherwise fetches the inputs to local folders, runs the core function into a
fresh folder and commits it. The Prefect tasks in ``focusflow.tasks`` call exactly this, with
a cache policy equal to the same key, so a stage computed from the CLI is a cache hit in a
flow and the other way round.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from focusflow.storage import Artifact, ArtifactStore, sha256_file

log = logging.getLogger(__name__)

Build = Callable[[Path, Mapping[str, Path], Mapping[str, Any]], Mapping[str, Any] | None]


@dataclass(frozen=True)
class Stage:
    """One pipeline step: ``build(out_dir, input_folders, params) -> metadata``."""

    name: str
    version: int
    inputs: tuple[str, ...]
    build: Build
    description: str = ""


def _corpus(out: Path, inputs: Mapping[str, Path], p: Mapping[str, Any]) -> Mapping[str, Any]:
    from focusflow.config import CleaningSpec, CorpusSpec
    from focusflow.corpus import collect_corpus

    return collect_corpus(CorpusSpec(**p["corpus"]), CleaningSpec(**p["cleaning"]), p["language"], out)


def _dedup(out: Path, inputs: Mapping[str, Path], p: Mapping[str, Any]) -> Mapping[str, Any]:
    from focusflow.config import DedupSpec
    from focusflow.corpus import deduplicate

    return deduplicate(inputs["corpus"] / "documents.jsonl", DedupSpec(**p["dedup"]), out)


def _decontaminate(out: Path, inputs: Mapping[str, Path], p: Mapping[str, Any]) -> Mapping[str, Any]:
    from focusflow.corpus.decontaminate import decontaminate
    from focusflow.evaluation.downstream.texts import evaluation_texts

    root = Path(p["_data_root"]) if p.get("_data_root") else None
    texts = evaluation_texts(p["tasks"], root, p["split_seed"])
    return decontaminate(inputs["dedup"] / "documents.jsonl", texts, out, window=p["window"],
                         stride=max(1, p["window"] // 2))


def decontamination_params(tasks: list[str], data_root: str | None, split_seed: int, window: int) -> dict[str, Any]:
    """Evaluation data counts by content (its fingerprint); the folder is only where to read it."""
    from focusflow.pipeline.evaluation_stages import data_fingerprint

    return {"tasks": sorted(tasks), "data": data_fingerprint(Path(data_root)) if data_root else None,
            "split_seed": split_seed, "window": window, "_data_root": data_root}


def _split(out: Path, inputs: Mapping[str, Path], p: Mapping[str, Any]) -> Mapping[str, Any]:
    from focusflow.config import SplitSpec
    from focusflow.corpus import split_corpus

    return split_corpus(inputs["dedup"] / "documents.jsonl", SplitSpec(**p["split"]), out)


def source_params(spec: str, **options: Any) -> dict[str, Any]:
    """Parameters of the source stage, identifying the model by content where it is local.

    A local folder counts by the sha256 of its files (moving it keeps the key; editing it
    changes the key); its path travels as the runtime-only ``_location``.
    """
    folder = Path(spec).expanduser()
    if folder.is_dir():
        digest = hashlib.sha256()
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + sha256_file(path).encode())
        return {"source_model": "local", "fingerprint": digest.hexdigest(), "_location": str(folder.resolve()),
                "options": options}
    return {"source_model": spec, "options": options}


def _source(out: Path, inputs: Mapping[str, Path], p: Mapping[str, Any]) -> Mapping[str, Any]:
    from focusflow.models import prepare_source

    return prepare_source(p.get("_location") or p["source_model"], out, head_train=inputs["split"] / "train.jsonl",
                          **p.get("options", {}))


def _tokenizer(out: Path, inputs: Mapping[str, Path], p: Mapping[str, Any]) -> Mapping[str, Any]:
    from focusflow.config import TokenizerSpec
    from focusflow.tokenizer import train_tokenizer

    return train_tokenizer(inputs["split"] / "train.jsonl", TokenizerSpec(**p["tokenizer"]), out,
                           source_tokenizer=inputs["source"], heldout=inputs["split"] / "heldout.jsonl")


def _fasttext(out: Path, inputs: Mapping[str, Path], p: Mapping[str, Any]) -> Mapping[str, Any]:
    from focusflow.config import FastTextSpec
    from focusflow.embeddings import train_aux_embeddings

    return train_aux_embeddings(inputs["tokenizer"], inputs["split"] / "train.jsonl",
                                FastTextSpec(**p["fasttext"]), out)


def _init(out: Path, inputs: Mapping[str, Path], p: Mapping[str, Any]) -> Mapping[str, Any]:
    from focusflow.embeddings import initialize_model

    return initialize_model(inputs["source"], inputs["tokenizer"], out, method=p["method"], mode=p["mode"],
                            aux_dir=inputs["fasttext"], seed=p["seed"], train=inputs["split"] / "train.jsonl",
                            **p.get("options", {}))


def _intrinsic(out: Path, inputs: Mapping[str, Path], p: Mapping[str, Any]) -> Mapping[str, Any]:
    from focusflow.evaluation.intrinsic import evaluate_to_folder

    return evaluate_to_folder(inputs["model"], inputs["source"], inputs["split"] / "heldout.jsonl", out,
                              max_sentences=p["max_sentences"], seed=p["seed"])


STAGES: dict[str, Stage] = {
    stage.name: stage
    for stage in [
        Stage("corpus", 1, (), _corpus, "stream, clean and budget the raw corpus"),
        Stage("dedup", 1, ("corpus",), _dedup, "exact and near-duplicate removal"),
        Stage("decontaminate", 1, ("dedup",), _decontaminate, "drop lines that overlap evaluation dev/test text"),
        Stage("split", 1, ("dedup",), _split, "deterministic held-out split by document hash"),
        Stage("source", 1, ("split",), _source,
              "source model folder; an MLM head is trained on the train split when it has none"),
        Stage("tokenizer", 1, ("split", "source"), _tokenizer, "language tokenizer from the train split"),
        Stage("fasttext", 1, ("tokenizer", "split"), _fasttext, "token-level auxiliary embeddings"),
        Stage("init", 1, ("source", "tokenizer", "fasttext", "split"), _init, "embedding initialization"),
        Stage("intrinsic", 1, ("model", "source", "split"), _intrinsic, "held-out MLM loss and fidelity"),
    ]
}


class StageInputError(ValueError):
    """A stage was given the wrong set of input artifacts."""


def run_stage(store: ArtifactStore, stage: str, params: Mapping[str, Any],
              inputs: Mapping[str, Artifact | str] | None = None) -> Artifact:
    """Build a stage's artifact, or return it from the store when these inputs were built before."""
    if stage not in STAGES:
        raise KeyError(f"unknown stage {stage!r}; known: {', '.join(STAGES)}")
    spec = STAGES[stage]
    given = dict(inputs or {})
    missing, extra = set(spec.inputs) - set(given), set(given) - set(spec.inputs)
    if missing or extra:
        raise StageInputError(f"stage {stage} takes inputs {list(spec.inputs)}; missing {sorted(missing)}, "
                              f"unexpected {sorted(extra)}")
    artifacts = {name: store.resolve(v) if isinstance(v, str) else v for name, v in given.items()}

    def build(folder: Path) -> Mapping[str, Any] | None:
        local = {name: store.fetch(artifact) for name, artifact in artifacts.items()}
        log.info("running stage %s", stage)
        return spec.build(folder, local, params)

    return store.build_or_get(stage, build, params=key_params(params), inputs=artifacts, version=spec.version)


def key_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters that identify a result; ``_``-prefixed ones (a local path, say) only tell where to read."""
    return {name: value for name, value in params.items() if not name.startswith("_")}
