"""The one stage registry: every pipeline step as data, run through the store with one signature.

A :class:`Stage` names its inputs, its version and the core function that builds it. ``run_stage``
computes the artifact key (parameters + input content hashes + version, see :func:`stage_key`),
returns the stored artifact when these inputs were built before, and otherwise runs the build into
a fresh folder and commits it. Python, the CLI and the Prefect tasks all call ``run_stage``; the
tasks' cache key is :func:`stage_key` itself, so a stage computed from one entry point is a cache
hit from every other. This module knows nothing of Prefect.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from focusflow.config import KEY_CONTEXT
from focusflow.errors import FocusflowError, InputError
from focusflow.logs import STAGE_LOGGER
from focusflow.stopping import check_stop, stoppable
from focusflow.storage import Artifact, ArtifactStore, shorten_key
from focusflow.storage.records import StageRecord
from focusflow.storage.work_folders import Holder, claim, default_work_root

if TYPE_CHECKING:
    from focusflow.config import PipelineConfig

log = logging.getLogger(__name__)
stage_lines = logging.getLogger(STAGE_LOGGER)  # started / cache hit / done in N s: the CLI prints them

CheckpointCallback = Callable[[str, int, Mapping[str, Any]], None]


def default_key_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters that identify a result; ``_``-prefixed ones (a local path, a language label) only travel."""
    return {name: value for name, value in params.items() if not name.startswith("_")}


key_params = default_key_params


def auto_precision() -> str:
    """What ``precision: auto`` means on this process's compute device: ``bf16`` on a GPU or a CPU that computes it
    natively, else ``fp16``/``fp32`` (:func:`focusflow.precision.resolve_precision`)."""
    from focusflow.precision import resolve_precision
    from focusflow.training.distributed import compute_device

    return resolve_precision("auto", compute_device()).setting


def machine_resolved(params: Any) -> Any:
    """Key parameters with every ``precision: auto`` as what it means here (:func:`auto_precision`): keyed ``auto``,
    one key held bf16 weights on one machine and fp32 on another, and a run resumed elsewhere changed precision."""
    if not isinstance(params, Mapping):
        return params
    return {name: auto_precision() if name == "precision" and value == "auto" else machine_resolved(value)
            for name, value in params.items()}


class _FetchedInputs(Mapping[str, Path]):
    """Input artifacts as local folders, fetched (and verified) only when a build reads them."""

    def __init__(self, store: ArtifactStore, artifacts: Mapping[str, Artifact]) -> None:
        self._store, self._artifacts, self._folders = store, artifacts, {}

    def __getitem__(self, name: str) -> Path:
        if name not in self._folders:
            self._folders[name] = self._store.fetch(self._artifacts[name])
        return self._folders[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._artifacts)

    def __len__(self) -> int:
        return len(self._artifacts)


class StageSettings(BaseModel):
    """A stage's parameters as one typed value: the build reads ``run.settings``, never re-parses a dict.

    Parameters travel as JSON (Prefect task arguments, the key); the row's ``settings`` model parses
    them once, just before the build. Runtime-only parameters keep their ``_`` name as the field's
    alias (``work_root: str | None = Field(None, alias="_work_root")``). Unknown names are ignored, as
    a build always did: they count in the key, which is all a parameter does beyond what the build reads.
    """

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _sections_as_written(cls, data: Any) -> Any:
        """A configuration section read from parameters: a field its key leaves out at its former default (keys
        stored before the default changed, and those since) reads as that value, not as today's default."""
        if not isinstance(data, Mapping):
            return data
        read = dict(data)
        for name, spec in cls.model_fields.items():
            key, section = spec.alias or name, spec.annotation
            if isinstance(read.get(key), Mapping) and hasattr(section, "written_before"):
                read[key] = section.written_before(dict(read[key]))
        return read

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        """The stage's settings in a run of this configuration (``variant``: which branch, e.g. the init method).

        Every entry point (graph, CLI, flows) builds them here, so one configuration gives one key everywhere."""
        raise StageSettingsError(f"{cls.__name__} is not built from a run configuration")

    def to_params(self) -> dict[str, Any]:
        """The parameters as they travel (JSON, ``_`` names) and are keyed: the fields that were given, so that a
        field a stage leaves out (a hub model's fingerprint) stays out of its key."""
        return self.model_dump(mode="json", by_alias=True, include=set(self.model_fields_set), context=KEY_CONTEXT)


class SectionSettings(StageSettings):
    """Settings that are one section of the run configuration, under its name (``dedup: DedupSpec``): the one
    field says which section, so the stages that read a section as it is spell no ``from_config`` of their own."""

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        (section,) = cls.model_fields
        return cls(**{section: getattr(cfg, section)})


@dataclass
class StageRun:
    """Everything a build sees: the folder to fill, its inputs, its settings and where it is stored."""

    out: Path
    inputs: Mapping[str, Path]
    artifacts: Mapping[str, Artifact]
    params: Mapping[str, Any]
    key: str
    store: ArtifactStore
    language: str | None = None
    on_checkpoint: CheckpointCallback | None = None
    progress: bool = False
    after_commit: list[Callable[[], None]] = field(default_factory=list)
    settings: Any = None  # the row's ``settings`` model parsed from ``params`` (None for a stage without one)
    work: Path | None = None  # a stage with ``work_folder``: its local folder for resumable work, claimed for it

    def input(self, name: str, output: Callable[[Path], Any]) -> Any:
        """Input ``name`` as its stage's output type reads it (``run.input("split", SplitOutput).train``): a stage's
        layout is spelled by its own output class, never by its readers."""
        return output(self.inputs[name])


Build = Callable[[StageRun], Mapping[str, Any] | None]


@dataclass(frozen=True)
class RunHints:
    """How a runner should treat a stage, as plain data: the Prefect tasks read it, the core ignores it.

    ``retries`` (after ``retry_delays_s``) apply to transient errors only: a ``FocusflowError`` explains
    a problem of the input and is never retried. ``timeout_s`` reports a stage that hangs; ``gpu`` tags
    it for a GPU pool; ``checkpoints``: it commits checkpoints while it runs, so a runner may pass an
    ``on_checkpoint`` hook (its settings then have ``total_steps``).
    """

    retries: int = 0
    retry_delays_s: tuple[float, ...] = ()
    timeout_s: float | None = None
    gpu: bool = False
    checkpoints: bool = False


@dataclass(frozen=True)
class Stage:
    """One pipeline step, the whole truth about it in one row.

    ``inputs`` are required input names, ``optional`` may be given; ``inputs=None`` accepts any names
    (the report reads whatever it is given). ``settings`` parses the parameters into the typed value
    the build reads (``run.settings``); ``record`` is its output's type, what its build records (the manifest's
    metadata, read back with ``record.of(artifact)``), checked before the artifact is committed; ``hints`` say how a
    runner should run it.
    """

    name: str
    version: int
    inputs: tuple[str, ...] | None
    build: Build
    description: str = ""
    optional: tuple[str, ...] = ()
    key_params: Callable[[Mapping[str, Any]], dict[str, Any]] = default_key_params
    uses_model: bool = False  # loads a transformers model (see focusflow.tasks: they take turns in threads)
    work: tuple[str, str] | None = None  # (metadata key, unit) of the work done: the report's throughput column
    work_folder: bool = False  # keeps resumable work in ``<work root>/<stage>/<key>`` (``StageRun.work``)
    settings: type[StageSettings] | None = None
    record: type[StageRecord] = StageRecord
    hints: RunHints = RunHints()

    def keyed(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The parameters the stage's artifact is keyed by: ``key_params``, machine choices resolved
        (:func:`machine_resolved`)."""
        return machine_resolved(self.key_params(params))

    def parse(self, params: Mapping[str, Any]) -> Any:
        """The typed settings of these parameters (None for a stage without a settings model)."""
        if self.settings is None:
            return None
        try:
            return self.settings.model_validate(dict(params))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'parameters'}: {e['msg']}"
                                 for e in exc.errors())
            raise StageSettingsError(f"stage {self.name}: invalid parameters ({problems})") from None


    def recorded(self, metadata: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """The build's metadata once it reads as the stage's record: a build that records a field of another type
        fails here, before its artifact is committed, not in the reader that trips over it later."""
        if metadata is None:
            return None
        try:
            self.record.model_validate(dict(metadata))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:3])
            raise StageOutputError(f"stage {self.name}: its build recorded metadata that is not a "
                                   f"{self.record.__name__} ({problems}); nothing was stored") from None
        return metadata


class StageOutputError(FocusflowError, RuntimeError):
    """A build's output is not its stage's record: a defect of the build (printed in one line; no retry mends it)."""


class StageInputError(FocusflowError, ValueError):
    """A stage was given the wrong set of input artifacts."""


class StageSettingsError(FocusflowError, ValueError):
    """A stage's parameters do not parse into its settings."""


STAGES: dict[str, Stage] = {}


def register(stage: Stage) -> Stage:
    """Add a stage to the registry (stage modules call this when imported)."""
    if stage.name in STAGES:
        raise ValueError(f"stage {stage.name!r} is registered twice")
    STAGES[stage.name] = stage
    return stage


def get_stage(stage: str | Stage) -> Stage:
    if isinstance(stage, Stage):
        return stage
    if stage not in STAGES:
        raise InputError(f"unknown stage {stage!r}; known: {', '.join(STAGES)}")
    return STAGES[stage]


def params_for(stage: str | Stage, cfg: PipelineConfig, /, **variant: Any) -> dict[str, Any]:
    """The parameters of ``stage`` in a run of ``cfg``: its settings class builds them (``from_config``)."""
    spec = get_stage(stage)
    if spec.settings is None:
        raise StageSettingsError(f"stage {spec.name} has no settings to build from a run configuration")
    return spec.settings.from_config(cfg, **variant).to_params()


def resolve_inputs(store: ArtifactStore, stage: str | Stage,
                   inputs: Mapping[str, Artifact | str] | None) -> dict[str, Artifact]:
    """Input artifacts by name (URIs of this store are resolved), checked against the stage's inputs."""
    spec = get_stage(stage)
    given = dict(inputs or {})
    if spec.inputs is not None:
        missing = set(spec.inputs) - set(given)
        extra = set(given) - set(spec.inputs) - set(spec.optional)
        if missing or extra:
            raise StageInputError(f"stage {spec.name} takes inputs {list(spec.inputs)}"
                                  f"{f' (optional {list(spec.optional)})' if spec.optional else ''}; "
                                  f"missing {sorted(missing)}, unexpected {sorted(extra)}")
    return {name: store.resolve(value) if isinstance(value, str) else value for name, value in given.items()}


@dataclass(frozen=True)
class StageCall:
    """One call of a stage, identified once: its store, parameters, input artifacts (resolved and checked) and
    artifact key. The Prefect task's cache policy computes it and hands it to ``run_stage``, so that a task reads
    its inputs' manifests and computes its key once."""

    spec: Stage
    store: ArtifactStore
    params: Mapping[str, Any]
    artifacts: dict[str, Artifact]
    key: str


def stage_call(store: ArtifactStore, stage: str | Stage, params: Mapping[str, Any],
               inputs: Mapping[str, Artifact | str] | None = None) -> StageCall:
    spec = get_stage(stage)
    artifacts = resolve_inputs(store, spec, inputs)
    return StageCall(spec, store, params, artifacts,
                     store.key(spec.name, spec.keyed(params), artifacts, spec.version))


def stage_key(store: ArtifactStore, stage: str | Stage, params: Mapping[str, Any],
              inputs: Mapping[str, Artifact | str] | None = None) -> str:
    """The artifact key of a stage run: what ``run_stage`` stores under and what the Prefect tasks cache on."""
    return stage_call(store, stage, params, inputs).key


def _claims_here() -> bool:
    """Whether this process claims the stages it builds: under torchrun only rank 0 does (the other ranks follow
    it inside the same build, and would wait for it forever)."""
    from focusflow.training.distributed import rank

    return rank() == 0


def run_stage(store: ArtifactStore, stage: str | Stage, params: Mapping[str, Any],
              inputs: Mapping[str, Artifact | str] | None = None, *, language: str | None = None,
              on_checkpoint: CheckpointCallback | None = None, progress: bool = False,
              label: str | None = None, call: StageCall | None = None) -> Artifact:
    """Build a stage's artifact, or return it from the store when these inputs were built before.

    ``language`` labels the artifact (metadata, events); ``on_checkpoint(uri, step, metrics)`` is
    called for every checkpoint a training stage commits; ``progress`` shows a progress bar; ``label``
    names the branch in the stage lines (``init[focus]: started``); ``call``: the call already identified (by
    the task's cache policy) for these arguments.
    """
    call = call or stage_call(store, stage, params, inputs)
    spec, artifacts, key = call.spec, call.artifacts, call.key
    after_commit: list[Callable[[], None]] = []
    name = f"{spec.name}[{label}]" if label else spec.name
    started: list[float] = []
    settings = spec.parse(params)
    work = Path(getattr(settings, "work_root", None) or default_work_root()) / spec.name / key

    def build(folder: Path) -> Mapping[str, Any] | None:
        check_stop(f"before {name}")  # a stop asked for while earlier stages ran: this one does not start
        stage_lines.info("%s: started", name)
        started.append(time.perf_counter())
        run = StageRun(out=folder, inputs=_FetchedInputs(store, artifacts), artifacts=artifacts, params=params,
                       key=key, store=store, language=language, on_checkpoint=on_checkpoint, progress=progress,
                       after_commit=after_commit, settings=settings, work=work if spec.work_folder else None)
        with stoppable(name):  # past the grace period, a stop interrupts the build where it is
            return spec.recorded(spec.build(run))

    def build_or_get() -> Artifact:
        # the manifest keeps the parameters as given (``auto``, not what it resolved to here): a configuration
        # rebuilt from it (a published model's) means the same on another machine; the key holds the resolution
        found = store.build_or_get(spec.name, build, params=spec.key_params(params), inputs=artifacts,
                                   version=spec.version, key=key)
        for action in after_commit:  # still under the claim: a waiting run finds the work folder as it was left
            action()
        return found

    if store.find(spec.name, key) is not None or not _claims_here():
        artifact = build_or_get()
    else:  # another run of this machine may be building it: wait for it, then it is a cache hit
        def waiting(holder: Holder) -> None:
            stage_lines.info("%s: waiting for %s, which builds it (%s/%s)", name, holder, spec.name, shorten_key(key))

        with claim(work, waiting=waiting, still_wanted=lambda: check_stop(f"while {name} waited for another run")):
            artifact = build_or_get()
    if started:
        stage_lines.info("%s: done in %.1f s (%s/%s)", name, time.perf_counter() - started[0], spec.name,
                         shorten_key(key))
    else:
        log_cache_hit(name, spec.name, key)
    return artifact


def log_cache_hit(name: str, stage: str, key: str) -> None:
    """The stage line of a result found in the store (``init[focus]: cache hit (init/3f2a…)``): ``run_stage``'s,
    and a flow's cached task's, which Prefect answers from its cache without calling ``run_stage``."""
    stage_lines.info("%s: cache hit (%s/%s)", name, stage, shorten_key(key))
