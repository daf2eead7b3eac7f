"""The corpus, vocabulary, model and intrinsic-evaluation stages, registered in the one registry.

Each build is a thin call into the core with the stage's parameters and input folders.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from focusflow.pipeline.registry import Stage, StageRun, register
from focusflow.storage import sha256_file


def _corpus(run: StageRun) -> Mapping[str, Any]:
    from focusflow.config import CleaningSpec, CorpusSpec
    from focusflow.corpus import collect_corpus

    p = run.params
    return collect_corpus(CorpusSpec(**p["corpus"]), CleaningSpec(**p["cleaning"]), p["language"], run.out)


def _dedup(run: StageRun) -> Mapping[str, Any]:
    from focusflow.config import DedupSpec
    from focusflow.corpus import deduplicate

    return deduplicate(run.inputs["corpus"] / "documents.jsonl", DedupSpec(**run.params["dedup"]), run.out)


def _decontaminate(run: StageRun) -> Mapping[str, Any]:
    from focusflow.corpus.decontaminate import decontaminate
    from focusflow.evaluation.downstream.texts import evaluation_texts

    p = run.params
    root = Path(p["_data_root"]) if p.get("_data_root") else None
    texts = evaluation_texts(p["tasks"], root, p["split_seed"])
    return decontaminate(run.inputs["dedup"] / "documents.jsonl", texts, run.out, window=p["window"],
                         stride=max(1, p["window"] // 2))


def _split(run: StageRun) -> Mapping[str, Any]:
    from focusflow.config import SplitSpec
    from focusflow.corpus import split_corpus

    return split_corpus(run.inputs["dedup"] / "documents.jsonl", SplitSpec(**run.params["split"]), run.out)


def folder_fingerprint(folder: Path) -> str:
    """sha256 over a folder's relative file names and file hashes: moving it keeps it, editing changes it."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + sha256_file(path).encode())
    return digest.hexdigest()


def _source(run: StageRun) -> Mapping[str, Any]:
    from focusflow.models import prepare_source

    p = run.params
    head_train = run.inputs["split"] / "train.jsonl" if "split" in run.inputs else None
    return prepare_source(p.get("_location") or p["source_model"], run.out, head_train=head_train,
                          cache_dir=p.get("_cache_dir"), **p.get("options", {}))


def _tokenizer(run: StageRun) -> Mapping[str, Any]:
    from focusflow.config import TokenizerSpec
    from focusflow.tokenizer import train_tokenizer

    split = run.inputs["split"]
    heldout = split / "heldout.jsonl"
    return train_tokenizer(split / "train.jsonl", TokenizerSpec(**run.params["tokenizer"]), run.out,
                           source_tokenizer=run.inputs["source"] if "source" in run.inputs else None,
                           heldout=heldout if heldout.is_file() else None)


def _fasttext(run: StageRun) -> Mapping[str, Any]:
    from focusflow.config import FastTextSpec
    from focusflow.embeddings import train_aux_embeddings

    return train_aux_embeddings(run.inputs["tokenizer"], run.inputs["split"] / "train.jsonl",
                                FastTextSpec(**run.params["fasttext"]), run.out)


def _init(run: StageRun) -> Mapping[str, Any]:
    """Prune mode needs no tokenizer; methods without an auxiliary space need no fastText; WECHSEL reads
    its aligned vectors and dictionary from the ``wechsel`` input (``source.bin``, ``target.bin``,
    ``dictionary.tsv``)."""
    from focusflow.embeddings import initialize_model

    p, given = run.params, run.inputs
    options = dict(p.get("options", {}))
    if "split" in given:
        options["train"] = given["split"] / "train.jsonl"
    if "wechsel" in given:
        options.update(wechsel_source_vectors=given["wechsel"] / "source.bin",
                       wechsel_target_vectors=given["wechsel"] / "target.bin",
                       wechsel_dictionary=given["wechsel"] / "dictionary.tsv")
    return initialize_model(given["source"], given["tokenizer"] if "tokenizer" in given else None, run.out,
                            method=p["method"], mode=p["mode"],
                            aux_dir=given["fasttext"] if "fasttext" in given else None, seed=p["seed"], **options)


def _align(run: StageRun) -> Mapping[str, Any]:
    """Refine an initialized model (rows not copied exactly) against the source model on the train split.

    The work folder is keyed by the artifact key, so a killed run resumes from its last checkpoint;
    the held-out split is never read (the alignment loss is monitored on texts held back from train).
    """
    import json
    import shutil

    from focusflow.config import AlignSpec
    from focusflow.embeddings.api import TOTALS_FILE
    from focusflow.pipeline.lapt_stage import default_work_root
    from focusflow.training import align_embeddings

    work = Path(run.params.get("_work_root") or default_work_root()) / "align" / run.key
    summary = align_embeddings(run.inputs["model"], run.inputs["source"], run.inputs["split"] / "train.jsonl", work,
                               AlignSpec(**run.params["align"]), resume=True, progress=run.progress)
    shutil.copytree(work / "final", run.out, dirs_exist_ok=True)
    for extra in ("metrics.csv", "loss_curve.png", "summary.json"):
        if (work / extra).exists():
            shutil.copy2(work / extra, run.out / extra)
    run.after_commit.append(lambda: shutil.rmtree(work, ignore_errors=True))
    totals_file = run.inputs["model"] / TOTALS_FILE
    totals = json.loads(totals_file.read_text(encoding="utf-8")) if totals_file.is_file() else {}
    # the row fates of the initialization it refined stay visible in comparisons
    return {**{k: v for k, v in totals.items() if not isinstance(v, (dict, list))}, "align": summary}


def _reference(run: StageRun) -> Mapping[str, Any]:
    """Held-out sentences for one tokenizer and the source's embeddings of them, shared by its models."""
    from focusflow.evaluation.intrinsic import build_reference

    p = run.params
    return build_reference(run.inputs["source"], run.inputs["split"] / "heldout.jsonl", run.out,
                           tokenizer_dir=run.inputs["tokenizer"] if "tokenizer" in run.inputs else None,
                           max_sentences=p["max_sentences"], seed=p["seed"], precision=p.get("precision", "auto"))


def _intrinsic(run: StageRun) -> Mapping[str, Any]:
    from focusflow.evaluation.intrinsic import evaluate_against_reference

    p = run.params
    return evaluate_against_reference(run.inputs["model"], run.inputs["reference"], run.out, seed=p["seed"],
                                      precision=p.get("precision", "auto"))


CORPUS = register(Stage("corpus", 1, (), _corpus, "stream, clean and budget the raw corpus",
                         work=("bytes", "bytes")))
DEDUP = register(Stage("dedup", 1, ("corpus",), _dedup, "exact and near-duplicate removal",
                        work=("input_bytes", "bytes")))
DECONTAMINATE = register(Stage("decontaminate", 1, ("dedup",), _decontaminate,
                               "drop lines that overlap evaluation dev/test text"))
SPLIT = register(Stage("split", 1, ("dedup",), _split, "deterministic held-out split by document hash",
                        work=("documents", "documents")))
SOURCE = register(Stage("source", 1, (), _source,
                        "source model folder; an MLM head is trained on the train split when it has none",
                        optional=("split",), uses_model=True))
TOKENIZER = register(Stage("tokenizer", 2, ("split",), _tokenizer, "language tokenizer from the train split",
                           optional=("source",), work=("training_chars", "chars")))
FASTTEXT = register(Stage("fasttext", 2, ("tokenizer", "split"), _fasttext, "token-level auxiliary embeddings",
                           work=("tokens", "tokens")))
INIT = register(Stage("init", 1, ("source",), _init, "embedding initialization",
                      optional=("tokenizer", "fasttext", "split", "wechsel"), uses_model=True,
                      work=("target_vocab_size", "rows")))
ALIGN = register(Stage("align", 1, ("model", "source", "split"), _align,
                      "align the new embedding rows to the source model's word-pooled hidden states", uses_model=True,
                      work=("align.tokens", "tokens")))
REFERENCE = register(Stage("reference", 1, ("source", "split"), _reference,
                           "held-out sentences for one tokenizer and the source model's embeddings of them",
                           optional=("tokenizer",), uses_model=True, work=("n_sentences", "sentences")))
INTRINSIC = register(Stage("intrinsic", 2, ("model", "reference"), _intrinsic,
                           "held-out MLM loss and fidelity against a reference", uses_model=True,
                           work=("n_sentences", "sentences")))
