"""Deployments from the language registry: one ``specialize_language`` and one ``evaluate_checkpoint``
deployment per language, work pools for CPU and GPU stages, a cron schedule that re-evaluates a
language's latest checkpoint, and an event trigger that evaluates every new checkpoint.

The registry (``deployments/languages.yaml``) is the single source of truth: ``plan_deployments``
turns it into plain :class:`DeploymentPlan` records (no Prefect server needed; what ``--dry-run``
prints), ``apply_plans`` creates or updates them on the Prefect API, and ``render_prefect_yaml``
writes the same plans as a ``prefect.yaml`` so that ``prefect deploy --all`` creates identical
deployments. Prefect is imported lazily: the registry model and the plans need no server.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from focusflow.config import ConfigError, FlowMethod, PipelineConfig, _format_errors, _merge

log = logging.getLogger(__name__)

DEFAULT_REGISTRY = Path("deployments/languages.yaml")
#: ``checkpoint_uri`` of the scheduled re-evaluation; evaluate_checkpoint resolves it to the newest
#: checkpoint of the language (focusflow.flows.evaluate.latest_checkpoint_uri).
LATEST_CHECKPOINT = "latest"
CHECKPOINT_EVENT = "focusflow.checkpoint.updated"
CHECKPOINT_RESOURCE_PREFIX = "focusflow.checkpoint."
LANGUAGE_LABEL = "focusflow.language"
CHECKPOINT_URI_LABEL = "focusflow.checkpoint.uri"
#: Every deployment this module creates carries this tag (``--prune`` only ever touches those).
MANAGED_TAG = "focusflow"
CHECKPOINT_URI_TEMPLATE = "{{ event.resource['" + CHECKPOINT_URI_LABEL + "'] }}"

_LANGUAGE_CODE = re.compile(r"^[a-z]{2,3}(-[a-z0-9]{2,8})*$")
_SUITE = re.compile(r"^[a-z][a-z0-9_-]*(:\S+)?$")
_CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,?#LW-]+$")
_POOL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _check_cron(value: str | None) -> str | None:
    if value is None:
        return None
    fields = value.split()
    if len(fields) not in (5, 6) or not all(_CRON_FIELD.match(f) for f in fields):
        raise ValueError(f"must be a cron expression with 5 fields such as '0 4 * * *', got {value!r}")
    return " ".join(fields)


class WorkPoolSpec(_Model):
    """A Prefect work pool. ``process`` runs on any machine with focusflow installed; ``docker`` and
    ``kubernetes`` need the matching worker package (prefect-docker, prefect-kubernetes)."""

    name: str
    type: str = "process"
    base_job_template: str | None = Field(
        default=None, description="JSON file (relative to the registry) replacing the pool type's default template")
    concurrency_limit: int | None = Field(default=None, ge=1)
    description: str = ""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _POOL_NAME.match(value):
            raise ValueError(f"work pool names use letters, digits, '-', '_' and '.', got {value!r}")
        return value


class WorkPools(_Model):
    cpu: WorkPoolSpec = Field(default_factory=lambda: WorkPoolSpec(
        name="focusflow-cpu", description="CPU stages: corpus, tokenizer, fastText, initialization"))
    gpu: WorkPoolSpec = Field(default_factory=lambda: WorkPoolSpec(
        name="focusflow-gpu", description="GPU stages: LAPT and downstream evaluation"))


class FlowEntrypoints(_Model):
    """Import paths (``module:function``) of the flows; module paths, so that any worker with the
    package installed can load them without pulling source code."""

    specialize: str = "focusflow.flows.specialize:specialize_language"
    evaluate: str = "focusflow.flows.evaluate:evaluate_checkpoint"

    @field_validator("specialize", "evaluate")
    @classmethod
    def _module_path(cls, value: str) -> str:
        if not re.match(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$", value):
            raise ValueError(f"must be an import path 'package.module:flow_function', got {value!r}")
        return value


class Reevaluation(_Model):
    """When the scheduled re-evaluation of each language's latest checkpoint runs."""

    cron: str | None = "0 4 * * *"
    timezone: str = "UTC"

    _cron = field_validator("cron")(classmethod(lambda cls, v: _check_cron(v)))


class LanguageEntry(_Model):
    """One registered language: the budget knobs people change most, plus free-form run config."""

    code: str = Field(description="ISO 639-1/639-3 code, optionally with a script/region subtag: sw, hau, sr-latn")
    corpus: dict[str, Any] | None = Field(default=None, description="corpus section: source, paths, max_bytes, ...")
    tokenizer_size: int | None = Field(default=None, description="target vocabulary size")
    methods: list[FlowMethod] | None = Field(default=None, description="embedding initialization methods")
    lapt_steps: int | None = Field(default=None, description="LAPT optimizer steps (0 skips LAPT)")
    eval_suites: list[str] | None = Field(default=None, description="e.g. ner:masakhaner2:swa, nli:xnli:sw")
    config: dict[str, Any] = Field(default_factory=dict, description="any other PipelineConfig fields")
    reevaluate_cron: str | None | Literal["default"] = "default"
    specialize_pool: Literal["cpu", "gpu", "auto"] = "auto"
    evaluate_pool: Literal["cpu", "gpu"] = "gpu"
    enabled: bool = True
    tags: list[str] = Field(default_factory=list)

    @field_validator("code", mode="before")
    @classmethod
    def _code(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        code = value.strip().lower().replace("_", "-")
        if not _LANGUAGE_CODE.match(code):
            raise ValueError(
                f"must be an ISO 639 language code (2-3 letters, optional subtag) such as 'sw', 'hau' "
                f"or 'sr-latn', got {value!r}")
        return code

    @field_validator("eval_suites")
    @classmethod
    def _suites(cls, value: list[str] | None) -> list[str] | None:
        for suite in value or []:
            if not _SUITE.match(suite):
                raise ValueError(f"an eval suite looks like 'kind' or 'kind:dataset[:subset]' "
                                 f"(e.g. 'ner:masakhaner2:swa'), got {suite!r}")
        return value

    @field_validator("reevaluate_cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        return value if value == "default" else _check_cron(value)

    def shorthand(self) -> dict[str, Any]:
        """The registry's shorthand fields as PipelineConfig sections."""
        data: dict[str, Any] = {}
        if self.corpus is not None:
            data["corpus"] = self.corpus
        if self.tokenizer_size is not None:
            data["tokenizer"] = {"vocab_size": self.tokenizer_size}
        if self.methods is not None:
            data["init"] = {"methods": list(self.methods)}
        if self.lapt_steps is not None:
            data["lapt"] = {"steps": self.lapt_steps}
        if self.eval_suites is not None:
            data["evaluation"] = {"tasks": list(self.eval_suites)}
        return data


class LanguageRegistry(_Model):
    """``deployments/languages.yaml``: shared defaults, pools, flows, and the registered languages."""

    version: Literal[1] = 1
    defaults: dict[str, Any] = Field(default_factory=dict, description="PipelineConfig fields shared by all languages")
    work_pools: WorkPools = Field(default_factory=WorkPools)
    flows: FlowEntrypoints = Field(default_factory=FlowEntrypoints)
    reevaluate: Reevaluation = Field(default_factory=Reevaluation)
    languages: list[LanguageEntry] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_codes(self) -> LanguageRegistry:
        seen: set[str] = set()
        for entry in self.languages:
            if entry.code in seen:
                raise ValueError(f"language {entry.code!r} is registered twice")
            seen.add(entry.code)
        return self

    def config_overrides(self, code: str) -> dict[str, Any]:
        """What the registry sets for one language (defaults < config < shorthand), unresolved.

        This sparse dict is the deployment's ``config`` parameter: readable in the UI, and a new
        PipelineConfig default reaches deployed languages without redeploying.
        """
        entry = self.language(code)
        data = _merge(_merge(self.defaults, entry.config), entry.shorthand())
        data["language"] = entry.code
        return data

    def run_config(self, code: str) -> PipelineConfig:
        """The validated PipelineConfig of one language, every default filled in."""
        entry = self.language(code)
        try:
            return PipelineConfig.model_validate(self.config_overrides(code))
        except ValidationError as exc:
            index = self.languages.index(entry)
            raise ConfigError(_format_errors(exc).replace(
                "invalid configuration:", f"invalid run configuration of languages[{index}] ({entry.code}):")) from None

    def language(self, code: str) -> LanguageEntry:
        for entry in self.languages:
            if entry.code == code:
                return entry
        known = ", ".join(e.code for e in self.languages)
        raise ConfigError(f"language {code!r} is not in the registry (registered: {known})")


def parse_registry(data: Any, source: str = "registry") -> LanguageRegistry:
    """Validate registry data; every language's run config too, so errors surface before deploying."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must hold a mapping with a 'languages' list at the top level")
    try:
        registry = LanguageRegistry.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_errors(exc).replace("invalid configuration:", f"invalid {source}:")) from None
    for entry in registry.languages:
        registry.run_config(entry.code)
    return registry


def load_registry(path: str | Path = DEFAULT_REGISTRY) -> LanguageRegistry:
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"language registry {file} does not exist (see deployments/languages.yaml for the format)")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"language registry {file} is not valid YAML: {exc}") from None
    return parse_registry(data, source=f"language registry {file}")


# --------------------------------------------------------------------------------------- plans
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
    return "gpu" if config.lapt.steps > 0 else "cpu"


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
                match={"prefect.resource.id": f"{CHECKPOINT_RESOURCE_PREFIX}*", LANGUAGE_LABEL: entry.code},
                parameters={"checkpoint_uri": CHECKPOINT_URI_TEMPLATE, "language": entry.code, "suites": suites},
            )],
        ))
    return plans


def checkpoint_event_payload(checkpoint_uri: str, language: str) -> dict[str, Any]:
    """The event LAPT emits for a stored checkpoint (kwargs for ``prefect.events.emit_event``)."""
    return {"event": CHECKPOINT_EVENT,
            "resource": {"prefect.resource.id": f"{CHECKPOINT_RESOURCE_PREFIX}{checkpoint_uri}",
                         LANGUAGE_LABEL: language, CHECKPOINT_URI_LABEL: checkpoint_uri}}


# ----------------------------------------------------------------------------- prefect.yaml
def render_prefect_yaml(registry: LanguageRegistry, plans: Sequence[DeploymentPlan]) -> str:
    """The plans as a ``prefect.yaml`` for ``prefect deploy --all --prefect-file deployments/prefect.yaml``."""
    pools = {registry.work_pools.cpu.name: registry.work_pools.cpu, registry.work_pools.gpu.name: registry.work_pools.gpu}
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
    header = (
        "# GENERATED by `focusflow deploy --write-prefect-yaml` from deployments/languages.yaml: edit the\n"
        "# registry, not this file. Deploy with either command (same deployments):\n"
        "#   focusflow deploy --registry deployments/languages.yaml\n"
        "#   prefect --no-prompt deploy --all --prefect-file deployments/prefect.yaml\n"
        f"# Work pools ({', '.join(sorted(pools))}) are created by `focusflow deploy`; with plain\n"
        "# `prefect deploy`, create them first: prefect work-pool create NAME --type process\n"
    )
    return header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)


def _prefect_version() -> str:
    try:
        from importlib.metadata import version

        return version("prefect")
    except Exception:  # pragma: no cover - prefect is a dependency
        return "3"


# ---------------------------------------------------------------------------------- apply
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


def apply_plans(registry: LanguageRegistry, plans: Sequence[DeploymentPlan], *,
                base_dir: Path = Path("."), prune: bool = False) -> DeployResult:
    """Create missing work pools, then create or update every deployment with its schedule and trigger.

    Idempotent: re-applying updates deployments in place and replaces their automations.
    With ``prune``, focusflow-tagged deployments that are no longer planned are deleted.
    """
    specs = {registry.work_pools.cpu.name: registry.work_pools.cpu, registry.work_pools.gpu.name: registry.work_pools.gpu}
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


def deploy(registry_path: str | Path = DEFAULT_REGISTRY, *, cpu_pool: str | None = None, gpu_pool: str | None = None,
           languages: Sequence[str] | None = None, prune: bool = False) -> DeployResult:
    """Load the registry and deploy every enabled language to the Prefect API in PREFECT_API_URL."""
    if prune and languages:
        raise ConfigError("--prune removes every deployment not in the plan: use it without --language")
    registry = load_registry(registry_path)
    plans = plan_deployments(registry, cpu_pool=cpu_pool, gpu_pool=gpu_pool, languages=languages)
    return apply_plans(registry, plans, base_dir=Path(registry_path).parent, prune=prune)


# ------------------------------------------------------------------------------ local server
#: Offline, no-telemetry settings for a local Prefect server (also used by the test fixture).
OFFLINE_SERVER_ENV = {"DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def server_command(host: str = "127.0.0.1", port: int = 4200, *, ui: bool = True,
                   home: str | Path | None = None, extra_args: Sequence[str] = ()) -> tuple[list[str], dict[str, str]]:
    """argv and environment of ``prefect server start`` for a local server + UI, analytics off.

    ``home`` sets PREFECT_HOME (the server's SQLite database lives there).
    """
    import os
    import sys

    argv = [sys.executable, "-m", "prefect", "server", "start", "--host", host, "--port", str(port),
            "--analytics-off", "--ui" if ui else "--no-ui", *extra_args]
    env = {**os.environ, **OFFLINE_SERVER_ENV}
    # the UI calls the API at PREFECT_UI_API_URL, which defaults to port 4200 whatever --port says
    env.setdefault("PREFECT_UI_API_URL", f"http://{host}:{port}/api")
    if home is not None:
        env["PREFECT_HOME"] = str(home)
    return argv, env
