"""The language registry (``deployments/languages.yaml``): the single source of truth for deployments.

Its schema, and loading it with every language's run configuration validated, so that errors surface
before anything is deployed. Needs no Prefect server.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from focusflow.config import ConfigError, InitMethod, PipelineConfig, format_errors, merge_layers, read_yaml_file

REGISTRY_FILE = Path("deployments") / "languages.yaml"  # in the focusflow checkout (the image: /app/deployments)
# The checkout the package is installed from (an editable install, or the source tree it runs from).
PROJECT_ROOT = Path(__file__).resolve().parents[2]

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

    def by_name(self) -> dict[str, WorkPoolSpec]:
        return {self.cpu.name: self.cpu, self.gpu.name: self.gpu}


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
    methods: list[InitMethod] | None = Field(default=None, description="embedding initialization methods")
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
        return merge_layers(self.defaults, entry.config, entry.shorthand(), {"language": entry.code})

    def run_config(self, code: str) -> PipelineConfig:
        """The validated PipelineConfig of one language, every default filled in."""
        entry = self.language(code)
        try:
            return PipelineConfig.model_validate(self.config_overrides(code))
        except ValidationError as exc:
            index = self.languages.index(entry)
            raise ConfigError(format_errors(exc).replace(
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
        raise ConfigError(format_errors(exc).replace("invalid configuration:", f"invalid {source}:")) from None
    for entry in registry.languages:
        registry.run_config(entry.code)
    return registry


def default_registry() -> Path:
    """The registry read without ``--registry``, wherever the command runs: ``deployments/languages.yaml`` of the
    focusflow checkout the package is installed from, else (a wheel installed apart from it, as in the image) the
    one in the current directory."""
    beside_package = PROJECT_ROOT / REGISTRY_FILE
    return beside_package if beside_package.is_file() else Path.cwd() / REGISTRY_FILE


def load_registry(path: str | Path | None = None) -> LanguageRegistry:
    """The registry at ``path`` (relative to the current directory), by default :func:`default_registry`."""
    file = Path(path) if path is not None else default_registry()
    if not file.is_file() and path is None:
        raise ConfigError(f"no language registry: neither {PROJECT_ROOT / REGISTRY_FILE} nor {file} exists; pass "
                          "--registry FILE (see deployments/languages.yaml in the focusflow repository for the format)")
    if not file.is_file():
        raise ConfigError(f"language registry {file} does not exist (see deployments/languages.yaml for the format)")
    data = read_yaml_file(file, f"language registry {file}")
    return parse_registry(data, source=f"language registry {file}")
