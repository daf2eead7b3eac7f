"""What a run will do, before it does anything: the graph of one configuration walked without building a stage.

Every stage call of ``graph.specialize`` is recorded in order with its branch label, its inputs (the calls that
produce them) and what the store says of it: **stored** (its key is known and committed: a cache hit), **to build**
(its inputs are stored, its key is known, it is not), or **after its inputs** (an input is still to be built, so its
key, which hashes its inputs' content, cannot be known yet). ``focusflow plan`` prints it, with the run's models and
which of them may be its product, before any compute.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from focusflow.config import PipelineConfig
from focusflow.models.model_type import source_is_decoder
from focusflow.pipeline.registry import STAGES, get_stage, stage_key
from focusflow.storage import Artifact, ArtifactStore, shorten_key

STORED, TO_BUILD, AFTER_INPUTS = "stored", "to build", "after its inputs"


@dataclass(frozen=True)
class PlannedCall:
    """One stage call of the run: where it stands now."""

    stage: str
    label: str
    inputs: dict[str, str]  # input name → the call that produces it (``stage[label]``)
    status: str
    key: str | None = None
    output: str = ""  # what it makes: its stage's record (``Stage.record``), which its readers read

    @property
    def name(self) -> str:
        return f"{self.stage}[{self.label}]" if self.label else self.stage


@dataclass(frozen=True)
class _Pending:
    """A call's result that is not stored yet: its name stands in for it downstream."""

    name: str

    def result(self) -> _Pending:
        return self


@dataclass
class RunView:
    """The run's models and every stage call it makes, in order."""

    language: str
    store: str
    models: dict[str, list[str]] = field(default_factory=dict)  # methods, candidates, LAPT'd, may be the product
    lapt: dict[str, Any] = field(default_factory=dict)
    tasks: list[str] = field(default_factory=list)
    calls: list[PlannedCall] = field(default_factory=list)
    without_tasks: str = "-"  # how the product is chosen without a downstream task

    def counts(self) -> dict[str, int]:
        return {status: sum(call.status == status for call in self.calls) for status in (STORED, TO_BUILD,
                                                                                          AFTER_INPUTS)}

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "counts": self.counts()}, indent=2)

    def text(self) -> str:
        """The plan for a person: the models, then every stage call with where it stands."""
        lines = [f"focusflow plan: {self.language}, store {self.store}", ""]
        for what, names in self.models.items():
            lines.append(f"{what:<24} {', '.join(names) or '-'}")
        if self.lapt:
            lines.append(f"{'LAPT':<24} " + ", ".join(f"{k} {v}" for k, v in self.lapt.items()))
        lines.append(f"{'downstream tasks':<24} {', '.join(self.tasks) or self.without_tasks}")
        lines += ["", f"{'stage call':<36} {'status':<18} key", f"{'-' * 36} {'-' * 18} {'-' * 20}"]
        for call in self.calls:
            key = f"{call.stage}/{shorten_key(call.key)}" if call.key else ""
            lines.append(f"{call.name:<36} {call.status:<18} {key}")
        counts = self.counts()
        lines += ["", f"{len(self.calls)} stage calls: {counts[STORED]} stored, {counts[TO_BUILD]} to build now, "
                      f"{counts[AFTER_INPUTS]} after their inputs"]
        return "\n".join(lines)

    def markdown(self) -> str:
        """The same plan as Markdown (what the Prefect UI shows as the run starts)."""
        rows = [f"| {what} | {', '.join(names) or '-'} |" for what, names in self.models.items()]
        if self.lapt:
            rows.append("| LAPT | " + ", ".join(f"{k} {v}" for k, v in self.lapt.items()) + " |")
        rows.append(f"| downstream tasks | {', '.join(self.tasks) or self.without_tasks} |")
        counts = self.counts()
        lines = [f"# focusflow plan: {self.language}", "", "| | |", "| --- | --- |", *rows, "",
                 f"**{len(self.calls)} stage calls**: {counts[STORED]} stored, {counts[TO_BUILD]} to build now, "
                 f"{counts[AFTER_INPUTS]} after their inputs.", "", "| stage call | status | inputs | output | key |",
                 "| --- | --- | --- | --- | --- |"]
        for call in self.calls:
            key = f"`{call.stage}/{shorten_key(call.key)}`" if call.key else ""
            inputs = ", ".join(f"{name} ← {source}" for name, source in call.inputs.items())
            lines.append(f"| {call.name} | {call.status} | {inputs.replace('|', '&#124;')} | {call.output} | {key} |")
        return "\n".join(lines) + "\n"


class _Planner:
    """A stage caller with the task signature that records the call instead of running it."""

    def __init__(self, stage: str, store: ArtifactStore, calls: list[PlannedCall]) -> None:
        self.stage, self.store, self.calls = stage, store, calls

    def __call__(self, store_uri: str, params: dict[str, Any], inputs: dict[str, Any] | None = None,
                 language: str | None = None, label: str | None = None) -> Artifact | _Pending:
        given = {name: value.result() if hasattr(value, "result") else value for name, value in (inputs or {}).items()}
        sources = {name: value.name if isinstance(value, _Pending) else f"{value.stage}/{shorten_key(value.key)}"
                   for name, value in given.items()}
        output = get_stage(self.stage).record.__name__
        call = PlannedCall(self.stage, label or "", sources, AFTER_INPUTS, output=output)
        if not any(isinstance(value, _Pending) for value in given.values()):
            key = stage_key(self.store, self.stage, params, given)
            found = self.store.find(self.stage, key)
            call = PlannedCall(self.stage, label or "", sources, STORED if found is not None else TO_BUILD, key, output)
            self.calls.append(call)
            if found is not None:
                return found
            return _Pending(call.name)
        self.calls.append(call)
        return _Pending(call.name)

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        result = self(*args, **kwargs)
        return result if isinstance(result, _Pending) else _Stored(result)


@dataclass(frozen=True)
class _Stored:
    artifact: Artifact

    def result(self) -> Artifact:
        return self.artifact


def plan_run(cfg: PipelineConfig, store: ArtifactStore) -> RunView:
    """Walk the run's graph (``graph.specialize``) without building anything; publishing is listed, not walked (its
    model is the report's pick)."""
    from focusflow.methods import learns_from_source
    from focusflow.pipeline.family_defaults import with_family_defaults
    from focusflow.pipeline.graph import specialize
    from focusflow.pipeline.run_plan import RunPlan

    given, cfg = cfg.lapt.objective, with_family_defaults(cfg)
    calls: list[PlannedCall] = []
    walked = cfg.model_copy(update={"publish": cfg.publish.model_copy(update={"repo_id": None})})
    specialize(walked, store.uri, {name: _Planner(name, store, calls) for name in STAGES})
    view = RunView(cfg.language, store.uri, tasks=list(cfg.evaluation.tasks), calls=calls)
    plan = RunPlan.from_config(cfg)
    view.models = {"methods": list(plan.methods), "candidates": list(plan.candidates),
                   "trained by LAPT": list(plan.trained), "may be the product": plan.shippable()}
    decoder = bool(source_is_decoder(cfg.source_model))
    if cfg.lapt.has_budget:
        budget = (f"{cfg.lapt.minutes:g} minutes (CPU-minutes on a CPU; planned as steps for this machine and "
                  f"{_threads()} threads: another thread count plans and trains again)" if cfg.lapt.minutes
                  else f"{cfg.lapt.total_steps} steps")
        teacher = ("the source (its word states for the texts each LAPT reads, stored once)"
                   if learns_from_source(cfg.lapt.objective) else "-")
        # "mlm" is the model's own LM loss: say which one this source trains
        notes = [{"mlm": "causal LM" if decoder else "masked LM"}.get(cfg.lapt.objective),
                 "auto: the source's family's" if given != cfg.lapt.objective else None]
        said = "; ".join(note for note in notes if note)
        view.lapt = {"objective": cfg.lapt.objective + (f" ({said})" if said else ""), "budget": budget,
                     "teacher": teacher}
    if cfg.publish.repo_id:
        view.models["published"] = list(cfg.publish.models)
    # a decoder's choice reads the source's dev bits per byte: only a run that evaluates the source has them
    view.without_tasks = ("- (the product is chosen on the held-out split's dev bits per byte)"
                          if decoder and cfg.orchestration.evaluate_original
                          else "- (the product is not measured: the configured model)")
    return view


def _threads() -> int:
    """The threads this process computes with: part of the machine a minutes budget is planned for."""
    from focusflow.training.machine import machine_fingerprint

    return int(machine_fingerprint()["threads"])


__all__ = ["AFTER_INPUTS", "STORED", "TO_BUILD", "PlannedCall", "RunView", "plan_run"]
