"""``specialize_language``: the whole pipeline for one language, as one Prefect flow of cached tasks.

corpus → dedup → split → tokenizer → fastText → init (each method) → intrinsic eval
→ LAPT (selected methods) → downstream eval → report
"""

from __future__ import annotations

from typing import Any

from prefect import flow, tags
from prefect.futures import PrefectFuture

from focusflow.config import PipelineConfig
from focusflow.flows.common import load_run_config, runner_for
from focusflow.logs import configure_output
from focusflow.pipeline.stages import decontamination_params, source_params
from focusflow.storage import ArtifactStore
from focusflow.tasks import tasks_for


CORPUS_AND_VOCABULARY_STAGES = ("corpus", "dedup", "decontaminate", "split", "tokenizer", "fasttext")


def _dump(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json")


def intrinsic_params(cfg: PipelineConfig) -> dict[str, Any]:
    """Held-out evaluation settings; the same for every model so that their numbers compare."""
    return {"max_sentences": cfg.evaluation.heldout_sentences, "seed": cfg.split.seed}


def prepare_branches(cfg: PipelineConfig, store_uri: str, tasks: dict[str, Any]) -> dict[str, Any]:
    """Corpus, tokenizer, fastText and every initialization with its intrinsic evaluation."""
    language = cfg.language
    corpus = tasks["corpus"](store_uri, {"language": language, "corpus": _dump(cfg.corpus),
                                         "cleaning": _dump(cfg.cleaning)}, {}, language=language)
    dedup = tasks["dedup"](store_uri, {"dedup": _dump(cfg.dedup)}, {"corpus": corpus}, language=language)
    training_text, decontaminated = dedup, {}
    if cfg.evaluation.tasks and cfg.dedup.decontaminate:
        training_text = tasks["decontaminate"](
            store_uri, decontamination_params(cfg.evaluation.tasks, cfg.evaluation.data_root, cfg.evaluation.split_seed,
                                          cfg.dedup.decontamination_window), {"dedup": dedup}, language=language)
        decontaminated = {"decontaminate": training_text}
    split = tasks["split"](store_uri, {"split": _dump(cfg.split)}, {"dedup": training_text}, language=language)
    head = {"head_spec": cfg.source_head} if cfg.source_head else {}
    source = tasks["source"].submit(store_uri, source_params(cfg.source_model, **head), {"split": split},
                                    language=language)
    tokenizer = tasks["tokenizer"](store_uri, {"tokenizer": _dump(cfg.tokenizer)},
                                   {"split": split, "source": source}, language=language)
    fasttext = tasks["fasttext"](store_uri, {"fasttext": _dump(cfg.fasttext)},
                                 {"tokenizer": tokenizer, "split": split}, language=language)
    init_options = {"extend_top_n": cfg.init.extend_top_n} if cfg.init.mode == "extend" else {}
    models: dict[str, PrefectFuture[str]] = {
        method: tasks["init"].submit(
            store_uri, {"method": method, "mode": cfg.init.mode, "seed": cfg.init.seed, "options": init_options},
            {"source": source, "tokenizer": tokenizer, "fasttext": fasttext, "split": split}, language=language,
            label=method)
        for method in cfg.init.methods
    }
    evaluated = dict(models)
    if cfg.orchestration.evaluate_original:
        evaluated = {"original": source, **models}
    intrinsic = {
        name: tasks["intrinsic"].submit(store_uri, intrinsic_params(cfg), {"model": model, "source": source, "split": split},
                                        language=language, label=name)
        for name, model in evaluated.items()
    }
    return {"corpus": corpus, "dedup": dedup, **decontaminated, "split": split, "source": source,
            "tokenizer": tokenizer, "fasttext": fasttext, "models": models, "intrinsic": intrinsic}


def report_inputs(branches: dict[str, Any], **more: dict[str, Any]) -> dict[str, Any]:
    """The report task's inputs, named ``<kind>:<name>`` (stage:corpus, init:focus, lapt:focus, …)."""
    named = {f"stage:{name}": branches[name] for name in CORPUS_AND_VOCABULARY_STAGES if name in branches}
    groups: dict[str, dict[str, Any]] = {"init": dict(branches["models"]), "intrinsic": dict(branches["intrinsic"])}
    for kind, futures in more.items():
        groups.setdefault(kind, {}).update(futures)
    for kind, futures in groups.items():
        named.update({f"{kind}:{name}": future for name, future in futures.items()})
    return named


@flow(name="specialize-language", log_prints=True)
def specialize_language(language: str, config: dict[str, Any] | None = None,
                        config_path: str | None = None) -> dict[str, Any]:
    """Specialize the source model to ``language``; returns the URIs of every stored artifact."""
    configure_output()
    cfg = load_run_config(language, config, config_path)
    store_uri = ArtifactStore(cfg.store).uri
    tasks = tasks_for(store_uri)
    language = cfg.language
    with tags(f"language:{language}"):
        branches = prepare_branches(cfg, store_uri, tasks)
        lapt = {}
        if cfg.lapt.total_steps > 0:
            lapt = {
                method: tasks["lapt"].submit(store_uri, {"lapt": _dump(cfg.lapt)},
                                             {"model": branches["models"][method], "split": branches["split"]},
                                             language=language, lineage={"source": branches["source"]}, label=method)
                for method in cfg.orchestration.lapt_methods if method in branches["models"]
            }
        lapt_intrinsic = {
            f"{method}+lapt": tasks["intrinsic"].submit(
                store_uri, intrinsic_params(cfg), {"model": model, "source": branches["source"], "split": branches["split"]},
                language=language, label=f"{method}+lapt")
            for method, model in lapt.items()
        }
        downstream = {}
        if cfg.evaluation.tasks:
            candidates = {f"{m}+lapt": f for m, f in lapt.items()} or dict(branches["models"])
            if cfg.orchestration.evaluate_original:
                candidates = {"original": branches["source"], **candidates}
            downstream = {name: tasks["downstream"].submit(store_uri, _dump(cfg.evaluation), {"model": model},
                                                           language=language, name=name)
                          for name, model in candidates.items()}
        report = tasks["report"](store_uri, {"language": language},
                                 report_inputs(branches, lapt=lapt, downstream=downstream, intrinsic=lapt_intrinsic),
                                 language=language)
    resolved = {name: branches[name] for name in CORPUS_AND_VOCABULARY_STAGES if name in branches}
    resolved["source"] = branches["source"].result()
    resolved["models"] = {m: f.result() for m, f in branches["models"].items()}
    resolved["lapt"] = {m: f.result() for m, f in lapt.items()}
    resolved["downstream"] = {m: f.result() for m, f in downstream.items()}
    resolved["report"] = report
    print(f"report: {report}")
    return resolved


def run_specialize(language: str, config: dict[str, Any] | None = None, config_path: str | None = None
                   ) -> dict[str, Any]:
    """Run the flow with the task runner the configuration selects."""
    cfg = load_run_config(language, config, config_path)
    return specialize_language.with_options(task_runner=runner_for(cfg))(language, config, config_path)
