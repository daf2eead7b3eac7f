"""Apply plans to a Prefect API (work pools, deployments, schedules, triggers) or serve them from
this process. Prefect is imported inside the functions: importing this module needs no server.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from focusflow.config import ConfigError
from focusflow.orchestration.plans import MANAGED_TAG, DeploymentPlan, plan_deployments
from focusflow.orchestration.registry import LanguageRegistry, WorkPoolSpec, default_registry, load_registry

log = logging.getLogger(__name__)


@dataclass
class DeployResult:
    pools_created: list[str]
    deployments: dict[str, str]            # "flow-name/deployment-name" -> deployment id
    automations: int
    pruned: list[str]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _load_template(spec: WorkPoolSpec, base_dir: Path) -> dict[str, Any] | None:
    if spec.base_job_template is None:
        return None
    file = (base_dir / spec.base_job_template) if not Path(spec.base_job_template).is_absolute() \
        else Path(spec.base_job_template)
    if not file.is_file():
        raise ConfigError(f"work pool {spec.name}: base_job_template {file} does not exist")
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"work pool {spec.name}: base_job_template {file} is not valid JSON: {exc}") from None


def _default_template(pool_type: str) -> dict[str, Any] | None:
    """The pool type's default base job template: from the installed worker class, else Prefect's
    bundled worker metadata (served by the API, so this works offline)."""
    from prefect.workers.base import BaseWorker
    from prefect.workers.utilities import get_default_base_job_template_for_infrastructure_type

    worker = BaseWorker.get_worker_class_from_type(pool_type)
    if worker is not None:
        return worker.get_default_base_job_template()
    return asyncio.run(get_default_base_job_template_for_infrastructure_type(pool_type))


def ensure_work_pool(spec: WorkPoolSpec, name: str | None = None, base_dir: Path = Path(".")) -> bool:
    """Create the pool if it is missing (an existing pool is left as it is); True when created."""
    from prefect import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    pool_name = name or spec.name
    with get_client(sync_client=True) as client:
        try:
            client.read_work_pool(pool_name)
            return False
        except ObjectNotFound:
            pass
        template = _load_template(spec, base_dir)
        if template is None:
            template = _default_template(spec.type)
        if template is None:
            raise ConfigError(
                f"work pool {pool_name}: no default job template for type {spec.type!r}; install its worker "
                f"package (e.g. prefect-docker, prefect-kubernetes) or set base_job_template in the registry")
        try:
            client.create_work_pool(WorkPoolCreate(
                name=pool_name, type=spec.type, base_job_template=template,
                description=spec.description or None, concurrency_limit=spec.concurrency_limit))
        except ObjectAlreadyExists:  # created concurrently by another deployer
            return False
        log.info("created work pool %s (type %s)", pool_name, spec.type)
        return True


def _runner_deployment(plan: DeploymentPlan, *, served: bool = False):
    """A Prefect RunnerDeployment for a plan; loads the flow for its name and parameter schema."""
    from prefect.client.schemas.actions import DeploymentScheduleCreate
    from prefect.client.schemas.schedules import CronSchedule
    from prefect.deployments.runner import EntrypointType
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger
    from prefect.flows import load_flow_from_entrypoint

    try:
        flow = load_flow_from_entrypoint(plan.entrypoint, use_placeholder_flow=False)
    except Exception as exc:
        raise ConfigError(f"cannot load the {plan.flow} flow {plan.entrypoint!r}: {exc}. Is focusflow installed "
                          f"with its flows, or does flows.{plan.flow} in the registry point to the right place?") from exc
    schedules = ([DeploymentScheduleCreate(schedule=CronSchedule(cron=plan.cron, timezone=plan.timezone), active=True)]
                 if plan.cron else [])
    triggers = [DeploymentEventTrigger(**{k: v for k, v in t.prefect_dict().items() if k != "type"})
                for t in plan.triggers]
    deployment = flow.to_deployment(
        name=plan.name, parameters=plan.parameters, tags=plan.tags, description=plan.description,
        schedules=schedules, triggers=triggers, entrypoint_type=EntrypointType.MODULE_PATH,
        work_pool_name=None if served else plan.work_pool)
    deployment.entrypoint = plan.entrypoint  # module:function, as in prefect.yaml
    return deployment


def _prune(keep: set[str]) -> list[str]:
    from prefect import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterTags
    from prefect.client.schemas.sorting import DeploymentSort

    removed = []
    with get_client(sync_client=True) as client:
        found, page = [], 200
        while True:  # limit and sort explicit: this server rejects nulls for them
            batch = client.read_deployments(
                deployment_filter=DeploymentFilter(tags=DeploymentFilterTags(all_=[MANAGED_TAG])),
                limit=page, offset=len(found), sort=DeploymentSort.NAME_ASC)
            found.extend(batch)
            if len(batch) < page:
                break
        for deployment in found:
            full = f"{client.read_flow(deployment.flow_id).name}/{deployment.name}"
            if full not in keep:
                client.delete_resource_owned_automations(f"prefect.deployment.{deployment.id}")
                client.delete_deployment(deployment.id)
                removed.append(full)
    return removed


def check_prune(prune: bool, languages: Sequence[str] | None) -> None:
    """Pruning a partial plan would delete every language left out of it: refuse that."""
    if prune and languages:
        raise ConfigError("--prune removes every deployment not in the plan: use it without --language")


def apply_plans(registry: LanguageRegistry, plans: Sequence[DeploymentPlan], *,
                base_dir: Path = Path("."), prune: bool = False) -> DeployResult:
    """Create missing work pools, then create or update every deployment with its schedule and trigger.

    Idempotent: re-applying updates deployments in place and replaces their automations.
    With ``prune``, focusflow-tagged deployments that are no longer planned are deleted.
    """
    specs = registry.work_pools.by_name()
    created = [pool for pool in sorted({p.work_pool for p in plans})
               if ensure_work_pool(specs.get(pool) or WorkPoolSpec(name=pool), pool, base_dir)]
    deployments = [(plan, _runner_deployment(plan)) for plan in plans]  # load every flow before writing anything
    ids: dict[str, str] = {}
    for plan, deployment in deployments:
        ids[f"{deployment.flow_name}/{plan.name}"] = str(deployment.apply())
        log.info("deployed %s/%s to work pool %s", deployment.flow_name, plan.name, plan.work_pool)
    pruned = _prune(set(ids)) if prune else []
    return DeployResult(pools_created=created, deployments=ids,
                        automations=sum(len(p.triggers) for p in plans), pruned=pruned)


def serve_plans(plans: Sequence[DeploymentPlan]) -> None:
    """Run the planned deployments from this process (``prefect.serve``): schedules and triggers work,
    no work pool or worker needed. Blocks until interrupted; for a single machine or a demo."""
    from prefect import serve

    serve(*[_runner_deployment(plan, served=True) for plan in plans], print_starting_message=True)


def deploy(registry_path: str | Path | None = None, *, cpu_pool: str | None = None, gpu_pool: str | None = None,
           languages: Sequence[str] | None = None, prune: bool = False) -> DeployResult:
    """Load the registry (default: :func:`~focusflow.orchestration.registry.default_registry`) and deploy every
    enabled language to the Prefect API in PREFECT_API_URL."""
    check_prune(prune, languages)
    path = Path(registry_path) if registry_path is not None else default_registry()
    registry = load_registry(registry_path)
    plans = plan_deployments(registry, cpu_pool=cpu_pool, gpu_pool=gpu_pool, languages=languages)
    return apply_plans(registry, plans, base_dir=path.parent, prune=prune)
