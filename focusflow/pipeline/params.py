"""Each stage's parameters from a run configuration, built in one place.

The flows and the CLI both call these, so the same configuration gives the same parameters, the
same artifact keys, and cache hits across entry points.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from focusflow.config import PipelineConfig
from focusflow.methods import init_method
from focusflow.pipeline.evaluation_stages import data_fingerprint
from focusflow.storage.fingerprint import folder_fingerprint


def _dump(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json")


def corpus_params(cfg: PipelineConfig) -> dict[str, Any]:
    return {"language": cfg.language, "corpus": _dump(cfg.corpus), "cleaning": _dump(cfg.cleaning)}


def dedup_params(cfg: PipelineConfig) -> dict[str, Any]:
    return {"dedup": _dump(cfg.dedup)}


def decontamination_params(cfg: PipelineConfig) -> dict[str, Any]:
    """Evaluation data counts by the content of the files it reads; the folder is only where to read them."""
    root = cfg.evaluation.data_root
    return {"tasks": sorted(cfg.evaluation.tasks), "data": data_fingerprint(cfg.evaluation.tasks, root),
            "split_seed": cfg.evaluation.split_seed, "window": cfg.dedup.decontamination_window, "_data_root": root}


def split_params(cfg: PipelineConfig) -> dict[str, Any]:
    return {"split": _dump(cfg.split)}


def source_params(spec: str, **options: Any) -> dict[str, Any]:
    """The source stage's parameters, identifying the model by content where it is a local folder.

    A local folder counts by its files' hashes (moving it keeps the key; editing it changes the
    key); its path travels as the runtime-only ``_location``.
    """
    folder = Path(spec).expanduser()
    if folder.is_dir():
        return {"source_model": "local", "fingerprint": folder_fingerprint(folder),
                "_location": str(folder.resolve()), "options": options}
    return {"source_model": spec, "options": options}


def source_params_for(cfg: PipelineConfig) -> dict[str, Any]:
    head = {"head_spec": cfg.source_head} if cfg.source_head else {}
    return source_params(cfg.source_model, **head)


def tokenizer_params(cfg: PipelineConfig) -> dict[str, Any]:
    return {"tokenizer": _dump(cfg.tokenizer)}


def fasttext_params(cfg: PipelineConfig) -> dict[str, Any]:
    return {"fasttext": _dump(cfg.fasttext)}


def init_params(cfg: PipelineConfig, method: str) -> dict[str, Any]:
    options: dict[str, Any] = {"extend_top_n": cfg.init.extend_top_n} if cfg.init.mode == "extend" else {}
    if init_method(method).needs_aux_vectors:  # only FOCUS has rare tokens; other methods keep their keys
        options["rare_tokens"] = cfg.init.rare_tokens
    return {"method": method, "mode": cfg.init.mode, "seed": cfg.init.seed, "options": options}


def align_params(cfg: PipelineConfig) -> dict[str, Any]:
    return {"align": _dump(cfg.init.refine)}


def intrinsic_params(cfg: PipelineConfig) -> dict[str, Any]:
    """Held-out evaluation settings; the same for every model so that their numbers compare."""
    return {"max_sentences": cfg.evaluation.heldout_sentences, "seed": cfg.split.seed,
            "precision": cfg.evaluation.precision}


def lapt_params(cfg: PipelineConfig, lineage: dict[str, Any] | None = None) -> dict[str, Any]:
    """``lineage`` (artifact URIs such as the source model) travels with every checkpoint, outside the key."""
    return {"lapt": _dump(cfg.lapt), "_lineage": dict(lineage or {})}


def lapt_budget_params(cfg: PipelineConfig) -> dict[str, Any]:
    """A minutes budget's step plan: the LAPT settings it is timed with (the machine joins the key at run time)."""
    return {"lapt": _dump(cfg.lapt)}


def downstream_params(cfg: PipelineConfig, name: str, tasks: list[str] | None = None) -> dict[str, Any]:
    """The evaluation settings; ``name`` is the model's row label in the results."""
    evaluation = _dump(cfg.evaluation)
    if tasks is not None:
        evaluation["tasks"] = list(tasks)
    return {"evaluation": evaluation, "name": name}


def report_params(cfg: PipelineConfig) -> dict[str, Any]:
    return {"language": cfg.language}


def publishable_models(cfg: PipelineConfig) -> list[str]:
    """The names a run's models have (``focus``, ``focus+align``, ``focus+lapt`` …): what ``publish.models`` lists."""
    names = list(cfg.init.methods)
    if cfg.lapt.has_budget:
        names += [f"{method}+lapt" for method in cfg.orchestration.lapt_methods if method in cfg.init.methods]
    return names


def publish_params(cfg: PipelineConfig, model: str) -> dict[str, Any]:
    """The publish stage's parameters for one of the run's models (``publish.repo_id`` filled in for it)."""
    from focusflow.config import ConfigError
    from focusflow.pipeline.publish_stage import publish_params as stage_params
    from focusflow.publish.names import fill_repo_id

    spec = cfg.publish
    if not spec.repo_id:
        raise ConfigError("publish.repo_id is not set")
    if len(spec.models) > 1 and "{model}" not in spec.repo_id:
        raise ConfigError(f"publish.models lists {len(spec.models)} models but publish.repo_id {spec.repo_id!r} "
                          "has no {model}: each model needs its own repository")
    known = publishable_models(cfg)
    if model not in known:
        raise ConfigError(f"publish.models: this run makes no model {model!r}; it makes {', '.join(known)}")
    return stage_params(fill_repo_id(spec.repo_id, cfg.language, model), private=spec.private,
                        revision=spec.revision, commit_message=spec.commit_message, push=spec.push)


#: The stages whose parameters follow from the configuration alone (what the graph passes by default).
FROM_CONFIG = {"corpus": corpus_params, "dedup": dedup_params, "decontaminate": decontamination_params,
               "split": split_params, "source": source_params_for, "tokenizer": tokenizer_params,
               "fasttext": fasttext_params, "align": align_params, "reference": intrinsic_params,
               "intrinsic": intrinsic_params, "report": report_params, "lapt-budget": lapt_budget_params}
