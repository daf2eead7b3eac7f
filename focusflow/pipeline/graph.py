"""The pipeline's graph, once: which stage feeds which, for every entry point.

``prepare_branches`` and ``specialize`` take ``tasks``, a mapping from stage name to a caller with
the stage-task signature ``(store_uri, params, inputs, language=None, label=None) -> uri`` and a
``submit`` that returns an object with ``result()``. The Prefect flows pass Prefect tasks (cached,
concurrent, visible in the UI); :func:`local_tasks` gives plain in-process callers over
``run_stage`` for the same graph without Prefect (``focusflow compare``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from focusflow.config import PipelineConfig
from focusflow.methods import split_method
from focusflow.pipeline import params as P
from focusflow.pipeline.registry import STAGES, CheckpointCallback, run_stage
from focusflow.storage import ArtifactStore

CORPUS_AND_VOCABULARY_STAGES = ("corpus", "dedup", "decontaminate", "split", "tokenizer", "fasttext")


def prepare_branches(cfg: PipelineConfig, store_uri: str, tasks: Mapping[str, Any]) -> dict[str, Any]:
    """Corpus, tokenizer, fastText and every initialization with its intrinsic evaluation."""
    language = cfg.language
    corpus = tasks["corpus"](store_uri, P.corpus_params(cfg), {}, language=language)
    dedup = tasks["dedup"](store_uri, P.dedup_params(cfg), {"corpus": corpus}, language=language)
    training_text, decontaminated = dedup, {}
    if cfg.evaluation.tasks and cfg.dedup.decontaminate:
        training_text = tasks["decontaminate"](store_uri, P.decontamination_params(cfg), {"dedup": dedup},
                                               language=language)
        decontaminated = {"decontaminate": training_text}
    split = tasks["split"](store_uri, P.split_params(cfg), {"dedup": training_text}, language=language)
    source = tasks["source"].submit(store_uri, P.source_params_for(cfg), {"split": split}, language=language)
    tokenizer = tasks["tokenizer"](store_uri, P.tokenizer_params(cfg), {"split": split, "source": source},
                                   language=language)
    fasttext = tasks["fasttext"](store_uri, P.fasttext_params(cfg), {"tokenizer": tokenizer, "split": split},
                                 language=language)
    bases = dict.fromkeys(split_method(method)[0] for method in cfg.init.methods)
    initialized = {
        base: tasks["init"].submit(store_uri, P.init_params(cfg, base),
                                   {"source": source, "tokenizer": tokenizer, "fasttext": fasttext, "split": split},
                                   language=language, label=base)
        for base in bases
    }
    models = {}
    for method in cfg.init.methods:
        base, refinements = split_method(method)
        model = initialized[base]
        if "align" in refinements:
            model = tasks["align"].submit(store_uri, P.align_params(cfg), {"model": model, "source": source,
                                                                        "split": split}, language=language, label=method)
        models[method] = model
    # one reference per tokenizer: held-out sentences and the source's embeddings, shared by its models
    references = {"target": tasks["reference"].submit(store_uri, P.intrinsic_params(cfg),
                                                      {"source": source, "split": split, "tokenizer": tokenizer},
                                                      language=language, label="target")}
    evaluated = {name: (model, "target") for name, model in models.items()}
    if cfg.orchestration.evaluate_original:
        references["source"] = tasks["reference"].submit(store_uri, P.intrinsic_params(cfg),
                                                         {"source": source, "split": split},
                                                         language=language, label="source")
        evaluated = {"original": (source, "source"), **evaluated}
    intrinsic = {
        name: tasks["intrinsic"].submit(store_uri, P.intrinsic_params(cfg),
                                        {"model": model, "reference": references[reference]},
                                        language=language, label=name)
        for name, (model, reference) in evaluated.items()
    }
    return {"corpus": corpus, "dedup": dedup, **decontaminated, "split": split, "source": source,
            "tokenizer": tokenizer, "fasttext": fasttext, "models": models, "references": references,
            "intrinsic": intrinsic}


def report_inputs(branches: dict[str, Any], **more: dict[str, Any]) -> dict[str, Any]:
    """The report's inputs, named ``<kind>:<name>`` (stage:corpus, init:focus, lapt:focus, …)."""
    named = {f"stage:{name}": branches[name] for name in (*CORPUS_AND_VOCABULARY_STAGES, "source") if name in branches}
    groups: dict[str, dict[str, Any]] = {"init": dict(branches["models"]), "reference": dict(branches["references"]),
                                         "intrinsic": dict(branches["intrinsic"])}
    for kind, futures in more.items():
        groups.setdefault(kind, {}).update(futures)
    for kind, futures in groups.items():
        named.update({f"{kind}:{name}": future for name, future in futures.items()})
    return named


def specialize(cfg: PipelineConfig, store_uri: str, tasks: Mapping[str, Any]) -> dict[str, Any]:
    """The whole pipeline for one language: branches, LAPT, downstream evaluation, report."""
    language = cfg.language
    branches = prepare_branches(cfg, store_uri, tasks)
    lapt = {}
    if cfg.lapt.total_steps > 0:
        lapt = {
            method: tasks["lapt"].submit(store_uri, P.lapt_params(cfg, {"source": branches["source"],
                                                                         "tokenizer": branches["tokenizer"]}),
                                         {"model": branches["models"][method], "split": branches["split"]},
                                         language=language, label=method)
            for method in cfg.orchestration.lapt_methods if method in branches["models"]
        }
    lapt_intrinsic = {
        f"{method}+lapt": tasks["intrinsic"].submit(
            store_uri, P.intrinsic_params(cfg), {"model": model, "reference": branches["references"]["target"]},
            language=language, label=f"{method}+lapt")
        for method, model in lapt.items()
    }
    downstream = {}
    if cfg.evaluation.tasks:
        candidates = {f"{m}+lapt": f for m, f in lapt.items()} or dict(branches["models"])
        if cfg.orchestration.evaluate_original:
            candidates = {"original": branches["source"], **candidates}
        downstream = {name: tasks["downstream"].submit(store_uri, P.downstream_params(cfg, name), {"model": model},
                                                       language=language, label=name)
                      for name, model in candidates.items()}
    report = tasks["report"](store_uri, P.report_params(cfg),
                             report_inputs(branches, lapt=lapt, downstream=downstream, intrinsic=lapt_intrinsic),
                             language=language)
    resolved: dict[str, Any] = {name: _value(branches[name]) for name in CORPUS_AND_VOCABULARY_STAGES
                                if name in branches}
    resolved["source"] = _value(branches["source"])
    resolved["models"] = {m: _value(f) for m, f in branches["models"].items()}
    resolved["lapt"] = {m: _value(f) for m, f in lapt.items()}
    resolved["downstream"] = {m: _value(f) for m, f in downstream.items()}
    resolved["report"] = report
    return resolved


def compare(cfg: PipelineConfig, store_uri: str, tasks: Mapping[str, Any]) -> str:
    """Every initialization method on the same tokenizer, fastText and held-out text; returns the report URI."""
    branches = prepare_branches(cfg, store_uri, tasks)
    return tasks["report"](store_uri, P.report_params(cfg), report_inputs(branches), language=cfg.language)


def _value(result: Any) -> Any:
    return result.result() if hasattr(result, "result") else result


@dataclass(frozen=True)
class _Done:
    value: str

    def result(self) -> str:
        return self.value


@dataclass(frozen=True)
class LocalStage:
    """A stage caller with the task signature, run in this process through ``run_stage`` (no Prefect)."""

    stage: str
    progress: bool = False
    on_checkpoint: CheckpointCallback | None = None

    def __call__(self, store_uri: str, params: dict[str, Any], inputs: dict[str, Any] | None = None,
                 language: str | None = None, label: str | None = None) -> str:
        resolved = {name: _value(value) for name, value in (inputs or {}).items()}
        resolved_params = {k: ({n: _value(v) for n, v in value.items()} if k == "_lineage" else value)
                           for k, value in params.items()}
        return run_stage(ArtifactStore(store_uri), self.stage, resolved_params, resolved, language=language,
                         on_checkpoint=self.on_checkpoint, progress=self.progress, label=label).uri

    def submit(self, *args: Any, **kwargs: Any) -> _Done:
        return _Done(self(*args, **kwargs))


def local_tasks(progress: bool = False) -> dict[str, LocalStage]:
    """Every registered stage as an in-process caller with the Prefect tasks' signature."""
    return {name: LocalStage(name, progress=progress) for name in STAGES}


def compare_locally(cfg: PipelineConfig, store: ArtifactStore, progress: bool = False):
    """``compare`` in this process; returns the report artifact and its comparison table (one row per model)."""
    import io

    import pandas as pd

    report = store.resolve(compare(cfg, store.uri, local_tasks(progress=progress)))
    return report, pd.read_csv(io.BytesIO(store.read_bytes(report, "comparison.csv")))
