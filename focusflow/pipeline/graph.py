"""The pipeline's graph, once: which stage feeds which, for every entry point::

    corpus → dedup → decontaminate (with evaluation tasks) → split → source → tokenizer → fasttext → ood-text
           → init × methods → align-budget (a minutes budget) → align (<method>+align) → reference (one per
             tokenizer) → intrinsic
           → lapt-budget (a minutes budget) → teacher (a distillation's, for the texts its steps read) → lapt
             → intrinsic → downstream
           → reading (a vocabulary from the source's, on the tasks' text) → report → publish (optional)

``prepare_branches`` and ``specialize`` take ``tasks``, a mapping from stage name to a caller with
the stage-task signature ``(store_uri, params, inputs, language=None, label=None) -> uri`` and a
``submit`` that returns an object with ``result()``; the store, the language and each stage's
parameters are bound once (``_Run``), so the graph reads one line a stage. The Prefect flows pass Prefect tasks (cached,
concurrent, visible in the UI); :func:`local_tasks` gives plain in-process callers over
``run_stage`` for the same graph without Prefect (``focusflow compare``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import CancelledError
from dataclasses import dataclass
from typing import Any

from focusflow.config import PipelineConfig
from focusflow.evaluation.records import ReportInput, ReportRecord
from focusflow.methods import (
    CANDIDATES,
    CandidateSpec,
    split_method,
)
from focusflow.pipeline.family_defaults import with_family_defaults
from focusflow.pipeline.ood_stage import wanted as wants_ood
from focusflow.pipeline.publish_stage import PRODUCT
from focusflow.pipeline.registry import STAGES, CheckpointCallback, params_for, run_stage
from focusflow.pipeline.report import COMPARISON_FILE
from focusflow.pipeline.run_plan import RunPlan
from focusflow.storage import ArtifactStore

log = logging.getLogger(__name__)


class Recoverable:
    """A submitted stage call that outlives its future.

    A task runner can lose a task's result: a Dask worker killed with its only copy, a dependency lost before its
    dependent was scheduled, a client that lost its scheduler. The future is then *cancelled*, not failed. A stage
    call is addressed by its inputs, so it is submitted again, with its inputs' results (recovered the same way):
    a stored artifact is a cache hit, an interrupted training resumes from the store's last checkpoint, and the
    work stays where the runner puts it (a GPU worker's LAPT is not retried on the orchestrator). A task that
    *failed* is not submitted again here: its own retries decide.
    """

    def __init__(self, future: Any, again: Callable[[], Recoverable], description: str, attempt: int = 1) -> None:
        self.future, self._again, self.description, self.attempt = future, again, description, attempt
        self._replacement: Recoverable | None = None

    def result(self) -> Any:
        if self._replacement is not None:
            return self._replacement.result()
        try:
            return self.future.result()
        except CancelledError as exc:
            if self.attempt >= SUBMISSIONS:
                raise RuntimeError(f"{self.description}: the task runner lost its result {SUBMISSIONS} times "
                                   "(cancelled futures); is the cluster losing its workers?") from exc
            # a cancelled call may still run somewhere (a worker cannot stop a thread): the second run writes the
            # same bytes under the same key, and the store commits atomically, so the duplicate costs time only
            log.warning("%s: the task runner lost its result (%s); submitting it again (%d of %d): %s",
                        self.description, type(exc).__name__, self.attempt + 1, SUBMISSIONS, exc)
            self._replacement = self._again()
            return self._replacement.result()

    def pending(self) -> Any:
        """What a task submitted now receives: the runner's future (the runner hands its result over without
        this process waiting for it)."""
        return self.future if self._replacement is None else self._replacement.pending()

    def settled(self) -> Any:
        """What a task called now receives: the future once it holds its result, so that the orchestrator
        records the dependency (a lost one was replaced)."""
        self.result()
        return self.future if self._replacement is None else self._replacement.settled()


#: How many times one stage call is submitted before a runner that keeps losing its result is an error.
SUBMISSIONS = 3


class _Run:
    """The graph's stage callers with the store, the language and the configuration bound once.

    ``run("dedup", corpus=corpus)`` runs a stage and waits for it, ``run.submit(...)`` returns a future;
    inputs are keywords, the parameters are the stage's own (``params_for(stage, cfg)``) unless given.
    """

    def __init__(self, cfg: PipelineConfig, store_uri: str, tasks: Mapping[str, Any]) -> None:
        self.cfg, self.store_uri, self.tasks = cfg, store_uri, tasks

    def _arguments(self, stage: str, params: dict[str, Any] | None, label: str | None, inputs: dict[str, Any],
                   given: Callable[[Any], Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The task's arguments, each submitted input (the lineage's too) handed over as ``given`` makes it."""
        params = params_for(stage, self.cfg) if params is None else params
        if "_lineage" in params:
            params = {**params, "_lineage": {name: given(value) for name, value in params["_lineage"].items()}}
        inputs = {name: given(value) for name, value in inputs.items()}
        return (self.store_uri, params, inputs), {"language": self.cfg.language, **({"label": label} if label else {})}

    def __call__(self, stage: str, params: dict[str, Any] | None = None, /, *, label: str | None = None,
                 **inputs: Any) -> Any:
        args, kwargs = self._arguments(stage, params, label, inputs, _settled)
        return self.tasks[stage](*args, **kwargs)

    def submit(self, stage: str, params: dict[str, Any] | None = None, /, *, label: str | None = None,
               **inputs: Any) -> Recoverable:
        return self._submit(stage, params, label, inputs, attempt=1)

    def _submit(self, stage: str, params: dict[str, Any] | None, label: str | None, inputs: dict[str, Any],
                attempt: int) -> Recoverable:
        """The first submission passes its inputs' futures on; a repeated one passes their results (recovering
        those the runner lost too), since the runner may have lost what a future of its names."""
        args, kwargs = self._arguments(stage, params, label, inputs, _pending if attempt == 1 else _value)
        return Recoverable(self.tasks[stage].submit(*args, **kwargs),
                           lambda: self._submit(stage, params, label, inputs, attempt + 1),
                           f"{stage}[{label}]" if label else stage, attempt)


@dataclass(frozen=True)
class Branches:
    """What ``prepare_branches`` built, each a stage call's result or future: the corpus and vocabulary stages by
    name (``decontaminate`` only when it ran), the source, every model by name (methods and candidates) with the
    reference it is evaluated on, and the intrinsic evaluations (the source's as ``original``)."""

    stages: dict[str, Any]
    source: Any
    models: dict[str, Any]
    references: dict[str, Any]
    reference_of: dict[str, Any]
    intrinsic: dict[str, Any]

    @property
    def split(self) -> Any:
        return self.stages["split"]

    @property
    def tokenizer(self) -> Any:
        return self.stages["tokenizer"]

    def resolved(self) -> Branches:
        """The same branches with every future waited for: artifact URIs."""
        def uris(group: dict[str, Any]) -> dict[str, Any]:
            return {name: _value(item) for name, item in group.items()}

        return Branches(uris(self.stages), _value(self.source), uris(self.models), uris(self.references),
                        uris(self.reference_of), uris(self.intrinsic))


def prepare_branches(cfg: PipelineConfig, store_uri: str, tasks: Mapping[str, Any]) -> Branches:
    """Corpus, tokenizer, fastText and every initialization with its intrinsic evaluation."""
    cfg = with_family_defaults(cfg)
    run = _Run(cfg, store_uri, tasks)
    corpus = run("corpus")
    dedup = run("dedup", corpus=corpus)
    decontaminated = ({"decontaminate": run("decontaminate", dedup=dedup)}
                      if cfg.evaluation.tasks and cfg.dedup.decontaminate else {})
    split = run("split", dedup=decontaminated.get("decontaminate", dedup))
    source = run.submit("source", split=split)
    tokenizer = run("tokenizer", split=split, source=source)
    fasttext = run("fasttext", tokenizer=tokenizer, split=split)
    initialized = {base: run.submit("init", params_for("init", cfg, method=base), label=base,
                                    source=source, tokenizer=tokenizer, fasttext=fasttext, split=split)
                   for base in dict.fromkeys(split_method(method)[0] for method in cfg.init.methods)}
    models = {}
    for method in cfg.init.methods:
        base, refinements = split_method(method)
        if "align" not in refinements:
            models[method] = initialized[base]
            continue
        refine_inputs = {"model": initialized[base], "source": source, "split": split}
        # a minutes budget is first fixed as steps, timed on the machine that refines
        budget = ({"budget": run.submit("align-budget", label=method, **refine_inputs)}
                  if cfg.init.refine.needs_plan else {})
        models[method] = run.submit("align", label=method, **refine_inputs, **budget)
    # candidates beside the methods (init.candidates, one row each of methods.CANDIDATES), each bringing its tokenizer
    candidates = {name: _candidate(run, cfg, CANDIDATES[name], source=source, split=split, tokenizer=tokenizer,
                                   fasttext=fasttext) for name in cfg.init.built_candidates}
    # text of another domain of the language (the tasks' sentences or the user's file), scored beside the held-out
    ood = {"ood": run("ood-text")} if wants_ood(cfg) else {}
    # one reference per tokenizer: held-out sentences and the source's embeddings, shared by its models. In replace
    # mode every model has the language tokenizer; extend and prune give each initialization the tokenizer it wrote.
    if cfg.init.mode == "replace":
        references = {"target": run.submit("reference", label="target", source=source, split=split,
                                           tokenizer=tokenizer, **ood)}
        reference_of = {name: references["target"] for name in models}
    else:
        references = {f"target:{base}": run.submit("reference", label=f"target:{base}", source=source, split=split,
                                                   tokenizer=model, **ood) for base, model in initialized.items()}
        reference_of = {name: references[f"target:{split_method(name)[0]}"] for name in models}
    for name, model in candidates.items():
        references[f"target:{name}"] = run.submit("reference", label=f"target:{name}", source=source, split=split,
                                                  tokenizer=model, **ood)
        reference_of[name] = references[f"target:{name}"]
    models.update(candidates)
    evaluated = {name: (model, reference_of[name]) for name, model in models.items()}
    if cfg.orchestration.evaluate_original:
        references["source"] = run.submit("reference", label="source", source=source, split=split, **ood)
        evaluated = {"original": (source, references["source"]), **evaluated}
    intrinsic = {name: run.submit("intrinsic", label=name, model=model, reference=reference)
                 for name, (model, reference) in evaluated.items()}
    stages = {"corpus": corpus, "dedup": dedup, **decontaminated, "split": split, "tokenizer": tokenizer,
              "fasttext": fasttext, **({"ood-text": ood["ood"]} if ood else {})}
    return Branches(stages, source, models, references, reference_of, intrinsic)


def report_inputs(branches: Branches, **more: dict[str, Any]) -> dict[str, Any]:
    """The report's inputs, each named by its :class:`ReportInput` (stage:corpus, init:focus, lapt:focus, …)."""
    groups: dict[str, dict[str, Any]] = {"stage": {**branches.stages, "source": branches.source},
                                         "init": dict(branches.models), "reference": dict(branches.references),
                                         "intrinsic": dict(branches.intrinsic)}
    for kind, futures in more.items():
        groups.setdefault(kind, {}).update(futures)
    return {str(ReportInput(kind, name)): future for kind, futures in groups.items() for name, future in futures.items()}


def lapt_inputs(call: Callable[..., Any], cfg: PipelineConfig, model: Any, split: Any, source: Any | None) -> dict[str, Any]:
    """The inputs of one LAPT of ``model`` on ``split``, the stages before it called as ``call(stage, **inputs)`` (a
    stage call or a task's submission): a minutes budget first fixed as steps, timed on the machine that trains; a
    distillation's teacher (``source``; None: the objective learns from none) and its word states, stored for the
    texts those steps read. The graph, ``focusflow lapt`` and the benchmarks wire a LAPT by this one rule."""
    inputs = {"model": model, "split": split}
    if source is not None:
        inputs["source"] = source
    if cfg.lapt.needs_plan:
        inputs["budget"] = call("lapt-budget", **inputs)
    if source is not None:
        inputs["teacher"] = call("teacher", **{name: inputs[name] for name in ("source", "split", "model", "budget")
                                               if name in inputs})
    return inputs


def specialize(cfg: PipelineConfig, store_uri: str, tasks: Mapping[str, Any]) -> dict[str, Any]:
    """The whole pipeline for one language: branches, LAPT, downstream evaluation, report."""
    cfg = with_family_defaults(cfg)
    plan = RunPlan.from_config(cfg)
    run = _Run(cfg, store_uri, tasks)
    publishing = ({model: params_for("publish", cfg, model=model) for model in cfg.publish.models}
                  if cfg.publish.repo_id else {})
    branches = prepare_branches(cfg, store_uri, tasks)
    models, split, reference_of = branches.models, branches.split, branches.reference_of
    lineage = {"source": branches.source}  # travels with every checkpoint
    if cfg.init.mode == "replace":  # the models' tokenizer; extend and prune models carry their own
        lineage["tokenizer"] = branches.tokenizer
    lapt = {}
    for method in plan.trained:
        inputs = lapt_inputs(functools.partial(run.submit, label=method), cfg, models[method], split,
                             branches.source if plan.teacher else None)
        lapt[method] = run.submit("lapt", {**params_for("lapt", cfg), "_lineage": lineage}, label=method, **inputs)
    lapt_intrinsic = {plan.lapt_name(method): run.submit("intrinsic", label=plan.lapt_name(method), model=model,
                                                         reference=reference_of[method])
                      for method, model in lapt.items()}
    downstream = {}
    if cfg.evaluation.tasks:
        candidates = {name: _model_of(plan, name, models, lapt) for name in plan.shippable()}
        if cfg.orchestration.evaluate_original:
            candidates = {"original": branches.source, **candidates}
        downstream = {name: run.submit("downstream", params_for("downstream", cfg, name=name), label=name,
                                       model=model) for name, model in candidates.items()}
    # a vocabulary from the source's (a candidate's; prune or extend mode): how much of the tasks' text it cuts as the
    # source does, once per vocabulary (its LAPT keeps it)
    reading = ({name: run.submit("reading", label=name, source=branches.source, model=models[name])
                for name in models if name in cfg.init.built_candidates or cfg.init.mode != "replace"}
               if cfg.evaluation.tasks else {})
    report = run("report", **report_inputs(branches, lapt=lapt, downstream=downstream, intrinsic=lapt_intrinsic,
                                           reading=reading))
    intrinsic = {**branches.intrinsic, **lapt_intrinsic}
    if PRODUCT in publishing:  # the model the report picked (its name fills the repository id)
        picked = ReportRecord.of(ArtifactStore(store_uri).resolve(_value(report))).product or plan.shippable()[0]
        publishing[picked] = params_for("publish", cfg, model=picked)
        del publishing[PRODUCT]
    published = {}
    for name, params in publishing.items():  # after the report: the card reports its results
        given = {"model": _model_of(plan, name, models, lapt), "report": report, "intrinsic": intrinsic.get(name),
                 "source_intrinsic": intrinsic.get("original"), "downstream": downstream.get(name),
                 "source_downstream": downstream.get("original")}
        published[name] = run("publish", params, label=name, **{k: v for k, v in given.items() if v is not None})
    done = branches.resolved()
    return {**done.stages, "source": done.source, "models": done.models, "lapt": {m: _value(f) for m, f in lapt.items()},
            "downstream": {m: _value(f) for m, f in downstream.items()}, "report": report, "publish": published}


def _model_of(plan: RunPlan, name: str, models: Mapping[str, Any], lapt: Mapping[str, Any]) -> Any:
    """The stage result that holds the model named ``name`` (``focus+distill``: its LAPT; ``prune``: its init)."""
    branch = plan.branch(name)
    return lapt[branch.start] if branch.trained else models[branch.start]


def compare(cfg: PipelineConfig, store_uri: str, tasks: Mapping[str, Any]) -> str:
    """Every initialization method on the same tokenizer, fastText and held-out text; returns the report URI."""
    cfg = with_family_defaults(cfg)
    branches = prepare_branches(cfg, store_uri, tasks)
    return _Run(cfg, store_uri, tasks)("report", params_for("report", cfg, trained=False), **report_inputs(branches))


def _candidate(run: _Run, cfg: PipelineConfig, spec: CandidateSpec, **given: Any) -> Any:
    """A candidate's init stage: on the source, or on the source pruned with room for the rows the candidate adds."""
    inputs = {"source": given["source"], "split": given["split"]}
    if spec.mode != "prune":
        inputs.update(tokenizer=given["tokenizer"], fasttext=given["fasttext"])
    if spec.on_pruned:
        pruned = CANDIDATES["prune"]
        inputs["source"] = run.submit("init", params_for("init", cfg, method=pruned.method, mode=pruned.mode,
                                                         reserve=cfg.init.extend_top_n),
                                      label=f"{spec.name}:pruned", source=given["source"], split=given["split"])
    return run.submit("init", params_for("init", cfg, method=spec.method, mode=spec.mode), label=spec.name, **inputs)


def _value(result: Any) -> Any:
    return result.result() if hasattr(result, "result") else result


def _settled(value: Any) -> Any:
    return value.settled() if isinstance(value, Recoverable) else value


def _pending(value: Any) -> Any:
    return value.pending() if isinstance(value, Recoverable) else value


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
    return report, pd.read_csv(io.BytesIO(store.read_bytes(report, COMPARISON_FILE)))
