"""Deployment plans: the registry turned into plain records (what ``focusflow deploy --dry-run`` prints),
one ``specialize_language`` and one ``evaluate_checkpoint`` deployment per language, with the cron
schedule that re-evaluates the latest checkpoint and the trigger that evaluates every new one; and
the same plans rendered as a ``prefect.yaml`` so that ``prefect deploy --all`` creates identical
deployments. Needs no Prefect server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import yaml

from focusflow.config import PipelineConfig
from focusflow.orchestration.events import CHECKPOINT_EVENT, CHECKPOINT_URI_TEMPLATE, checkpoint_event_match
from focusflow.orchestration.registry import LanguageEntry, LanguageRegistry

#: ``checkpoint_uri`` of the scheduled re-evaluation; evaluate_checkpoint resolves it to the newest
#: checkpoint of the language (focusflow.flows.evaluate.latest_checkpoint_uri).
LATEST_CHECKPOINT = "latest"
#: Every deployment planned here carries this tag (``--prune`` only ever touches those).
MANAGED_TAG = "focusflow"


@dataclass
class TriggerPlan:
    """``expect`` event, ``match`` resource labels → run the deployment with templated parameters."""

    name: str
    expect: list[str]
    match: dict[str, str]
    parameters: dict[str, Any]
    description: str = ""

    def prefect_dict(self) -> dict[str, Any]:
        return {"type": "event", "name": self.name, "description": self.description, "enabled": True,
                "posture": "Reactive", "threshold": 1, "within": 0,
                "expect": list(self.expect), "match": dict(self.match), "parameters": dict(self.parameters)}


@dataclass
class DeploymentPlan:
    """One deployment, fully resolved: what ``--dry-run`` shows and what gets applied."""

    flow: str                      # "specialize" | "evaluate"
    language: str
    name: str
    entrypoint: str
    work_pool: str
    parameters: dict[str, Any]
    tags: list[str]
    description: str
    cron: str | None = None
    timezone: str = "UTC"
    triggers: list[TriggerPlan] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _specialize_pool(entry: LanguageEntry, config: PipelineConfig) -> str:
    if entry.specialize_pool != "auto":
        return entry.specialize_pool
    # a budget in steps, samples or tokens is work to finish (a GPU's); a minutes budget is time-boxed on whatever
    # machine trains, the default run's 30 CPU-minutes included
    return "gpu" if config.lapt.total_steps > 0 else "cpu"


def plan_deployments(registry: LanguageRegistry, *, cpu_pool: str | None = None, gpu_pool: str | None = None,
                     languages: Sequence[str] | None = None) -> list[DeploymentPlan]:
    """Two deployments per enabled language: ``<code>`` of specialize_language and of evaluate_checkpoint."""
    pools = {"cpu": cpu_pool or registry.work_pools.cpu.name, "gpu": gpu_pool or registry.work_pools.gpu.name}
    wanted = set(languages) if languages else None
    if wanted:
        for code in wanted:
            registry.language(code)
    plans: list[DeploymentPlan] = []
    for entry in registry.languages:
        if not entry.enabled or (wanted is not None and entry.code not in wanted):
            continue
        config = registry.run_config(entry.code)
        suites = list(config.evaluation.tasks)
        base_tags = [MANAGED_TAG, f"language:{entry.code}", *entry.tags]
        plans.append(DeploymentPlan(
            flow="specialize", language=entry.code, name=entry.code, entrypoint=registry.flows.specialize,
            work_pool=pools[_specialize_pool(entry, config)],
            parameters={"language": entry.code, "config": registry.config_overrides(entry.code)},
            tags=[*base_tags, "stage:specialize"],
            description=f"Specialize {config.source_model} to {entry.code}: corpus {config.corpus.source}, "
                        f"{config.tokenizer.vocab_size} tokens, init {'+'.join(config.init.methods)}, "
                        f"LAPT {config.lapt.steps} steps.",
        ))
        cron = registry.reevaluate.cron if entry.reevaluate_cron == "default" else entry.reevaluate_cron
        plans.append(DeploymentPlan(
            flow="evaluate", language=entry.code, name=entry.code, entrypoint=registry.flows.evaluate,
            work_pool=pools[entry.evaluate_pool],
            parameters={"checkpoint_uri": LATEST_CHECKPOINT, "language": entry.code, "suites": suites},
            tags=[*base_tags, "stage:evaluate"],
            description=f"Evaluate a {entry.code} checkpoint on {', '.join(suites) or 'intrinsic metrics'}; "
                        f"scheduled runs take the latest checkpoint, event-triggered runs the new one.",
            cron=cron, timezone=registry.reevaluate.timezone,
            triggers=[TriggerPlan(
                name=f"focusflow-evaluate-new-checkpoint-{entry.code}",
                description=f"Evaluate every new {entry.code} checkpoint that LAPT stores.",
                expect=[CHECKPOINT_EVENT],
                match=checkpoint_event_match(entry.code),
                parameters={"checkpoint_uri": CHECKPOINT_URI_TEMPLATE, "language": entry.code, "suites": suites},
            )],
        ))
    return plans


def render_prefect_yaml(registry: LanguageRegistry, plans: Sequence[DeploymentPlan]) -> str:
    """The plans as a ``prefect.yaml`` for ``prefect deploy --all --prefect-file deployments/prefect.yaml``."""
    deployments = []
    for plan in plans:
        item: dict[str, Any] = {
            "name": plan.name, "entrypoint": plan.entrypoint, "description": plan.description,
            "tags": plan.tags, "parameters": plan.parameters,
            "work_pool": {"name": plan.work_pool, "work_queue_name": None, "job_variables": {}},
            "schedules": ([{"cron": plan.cron, "timezone": plan.timezone, "active": True}] if plan.cron else []),
        }
        if plan.triggers:
            item["triggers"] = [t.prefect_dict() for t in plan.triggers]
        deployments.append(item)
    document = {
        "name": "focusflow",
        "prefect-version": _prefect_version(),
        # Flows are imported from the installed package (module entrypoints): nothing to build or pull.
        "build": None,
        "push": None,
        "pull": None,
        "deployments": deployments,
    }
    pools = ", ".join(sorted(registry.work_pools.by_name()))
    header = (
        "# GENERATED by `focusflow deploy --write-prefect-yaml` from deployments/languages.yaml: edit the\n"
        "# registry, not this file. Deploy with either command (same deployments):\n"
        "#   focusflow deploy --registry deployments/languages.yaml\n"
        "#   prefect --no-prompt deploy --all --prefect-file deployments/prefect.yaml\n"
        f"# Work pools ({pools}) are created by `focusflow deploy`; with plain\n"
        "# `prefect deploy`, create them first: prefect work-pool create NAME --type process\n"
    )
    return header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)


def _prefect_version() -> str:
    try:
        from importlib.metadata import version

        return version("prefect")
    except Exception:  # pragma: no cover - prefect is a dependency
        return "3"
