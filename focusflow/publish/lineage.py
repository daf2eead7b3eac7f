"""Where a stored model came from and what was measured on it, read from the store's manifests.

Every manifest names its inputs by content hash, so a model's ancestors (LAPT ← align ← init ←
source, tokenizer, split, corpus …) are found by following those hashes, and its results are the
artifacts that took it as their ``model`` input: the intrinsic evaluation, the downstream
evaluation, the run report. A run report is the run's own index (its inputs are named
``intrinsic:focus+lapt``, ``downstream:original`` …), so when one lists the model its choices are
used; otherwise the newest matching artifacts are. Nothing here loads a model: manifests only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from focusflow.embeddings.record import REPORT_FILE, TOTALS_FILE
from focusflow.errors import InputError
from focusflow.evaluation.records import ReportInput
from focusflow.methods import candidate_built_as, lapt_objective, model_label
from focusflow.storage import Artifact, ArtifactStore, shorten_key
from focusflow.storage.records import StageRecord
from focusflow.training.records import CheckpointRecord

MODEL_STAGES = ("init", "align", "lapt", "lapt-checkpoint", "import")
REPORT_STAGE = "report"
SOURCE_LABEL = "original"
TRANSFER_REPORT, TRANSFER_TOTALS = REPORT_FILE, TOTALS_FILE
LINEAGE_FILE = "lineage.json"  # a published repository folder's record of its lineage (:func:`lineage_record`)
# Stages that are results or outputs, never ancestors of a model.
_RESULT_KINDS = ("intrinsic", "downstream", "lapt", "reference")
_NOT_ANCESTORS = {"report", "publish", "intrinsic", "downstream", "reference"}


class LineageError(InputError):
    """The given artifact is not a model the store can trace."""


@dataclass
class Lineage:
    """One model, its ancestors by stage and the stored results of it and of its source model."""

    model: Artifact
    label: str  # the run's name for it: focus, focus+align, focus+lapt …
    ancestors: dict[str, Artifact] = field(default_factory=dict)  # stage → artifact (nearest first)
    intrinsic: Artifact | None = None
    source_intrinsic: Artifact | None = None
    downstream: Artifact | None = None
    source_downstream: Artifact | None = None
    report: Artifact | None = None
    # the model its weights began as, where the store can tell: the source stage's artifact, else the model a stage
    # command took as its ``source`` (an imported folder), else the source a published folder's lineage.json names
    source_model: Artifact | None = None
    # the candidate it was built as (methods.CANDIDATES: ``prune``, ``prune+extend``), None for a method's model, and
    # the pruned source a candidate built on one started from
    candidate: str | None = None
    pruned_source: Artifact | None = None

    @property
    def source(self) -> Artifact | None:
        return self.ancestors.get("source")

    @property
    def init(self) -> Artifact | None:
        """The init artifact that made its vocabulary and embeddings (the model itself when it is one)."""
        return _init_of(self.ancestors, self.model)

    @property
    def transfer(self) -> Artifact | None:
        """The nearest model artifact that holds the transfer report (LAPT keeps the initialization's)."""
        for artifact in (self.model, self.ancestors.get("align"), self.init):
            if artifact is not None and TRANSFER_TOTALS in artifact.files:
                return artifact
        return None

    def artifacts(self) -> dict[str, Artifact]:
        """Every artifact the card and the repository folder are built from, by role."""
        roles: dict[str, Artifact | None] = {"model": self.model, **self.ancestors, "intrinsic": self.intrinsic,
                                             "source_intrinsic": self.source_intrinsic,
                                             "downstream": self.downstream,
                                             "source_downstream": self.source_downstream, "report": self.report,
                                             "pruned_source": self.pruned_source}
        return {role: artifact for role, artifact in roles.items() if artifact is not None}


class _Index:
    """Every committed artifact of a store, by content hash and by the content hash of each input."""

    def __init__(self, artifacts: Iterable[Artifact]) -> None:
        self.all = sorted(artifacts, key=lambda a: a.created)
        self.by_hash: dict[str, list[Artifact]] = {}
        for artifact in self.all:
            self.by_hash.setdefault(artifact.content_hash, []).append(artifact)

    def producers(self, content_hash: str) -> list[Artifact]:
        """Artifacts with this content, computed ones before imported copies."""
        return sorted(self.by_hash.get(content_hash, []), key=lambda a: a.stage == "import")

    def consumers(self, stage: str, content_hash: str, name: str = "model") -> list[Artifact]:
        """Artifacts of ``stage`` that took this content as input ``name``, newest first."""
        return [a for a in reversed(self.all)
                if a.stage == stage and a.inputs.get(name) == content_hash]


def _init_of(ancestors: dict[str, Artifact], model: Artifact) -> Artifact | None:
    """The init stage that made the model's vocabulary: the model itself when it is one (a candidate built on a
    pruned source has that pruned source's init as its nearest init ancestor), else its nearest init ancestor."""
    return model if model.stage == "init" else ancestors.get("init")


def _candidate(index: _Index, init: Artifact | None) -> tuple[str | None, Artifact | None]:
    """The candidate ``init`` was built as, and the pruned source it started from (a prune-mode init that was its
    ``source`` input), from the stored parameters alone."""
    if init is None:
        return None, None
    pruned_inits = [a for a in index.producers(str(init.inputs.get("source", "")))
                    if a.stage == "init" and a.params.get("mode") == "prune"]
    # the one pruned with room for what it adds, where the prune candidate's own has the same content
    pruned = min(pruned_inits, key=lambda a: "prune_reserve" not in a.params.get("options", {}), default=None)
    name = candidate_built_as(str(init.params.get("mode", "")), str(init.params.get("method", "")),
                              on_pruned=pruned is not None)
    return name, pruned


def _method_label(ancestors: dict[str, Artifact], model: Artifact, candidate: str | None = None) -> str:
    """``focus``, ``focus+align``, ``focus+lapt``, ``prune+extend+distill`` … from the stages the model went through
    (``candidate``: the candidate it was built as, its name in place of its init method's)."""
    init = _init_of(ancestors, model)
    stages = {model.stage, *ancestors}
    lapt = ancestors.get("lapt") or (model if model.stage == "lapt" else None)
    return model_label(candidate or (str(init.params.get("method", "model")) if init else "model"),
                       ("align",) if "align" in stages else (), lapt=bool(stages & {"lapt", "lapt-checkpoint"}),
                       objective=lapt_objective(lapt.params) if lapt is not None else "mlm")


def _ancestors(index: _Index, store: ArtifactStore, model: Artifact) -> dict[str, Artifact]:
    """Stage → the nearest ancestor of that stage, breadth first over input content hashes."""
    found: dict[str, Artifact] = {}
    frontier = [model]
    seen = {model.uri}
    while frontier:
        nxt: list[Artifact] = []
        for artifact in frontier:
            parents: list[Artifact] = []
            for content_hash in artifact.inputs.values():
                parents += [p for p in index.producers(content_hash) if p.stage not in _NOT_ANCESTORS][:1]
            if artifact.stage == "lapt-checkpoint":  # committed with its run's lineage as URIs, not as inputs
                for uri in CheckpointRecord.of(artifact).lineage.values():
                    stage, _, key = str(uri).rstrip("/").rpartition("/")
                    found_here = store.find(stage.rpartition("/")[2], key) if stage and key else None
                    if found_here is not None:  # by stage and key: the store may have moved since
                        parents.append(found_here)
            for parent in parents:
                if parent.uri in seen:
                    continue
                seen.add(parent.uri)
                found.setdefault(parent.stage, parent)
                nxt.append(parent)
        frontier = nxt
    return found


def _from_report(report: Artifact, index: _Index) -> dict[ReportInput, Artifact]:
    """The report's named inputs (``intrinsic:focus``, ``downstream:original`` …) as artifacts."""
    named: dict[ReportInput, Artifact] = {}
    for name, content_hash in report.inputs.items():
        given = ReportInput.parse(name)
        candidates = index.producers(content_hash)
        preferred = [a for a in candidates if a.stage == given.kind] if given.kind in _RESULT_KINDS else []
        if preferred or candidates:
            named[given] = (preferred or candidates)[0]
    return named


def _reading(report: Artifact, index: _Index, model: Artifact, label: str) -> tuple[str, dict[ReportInput, Artifact]]:
    """The model's name in a report (``focus``, ``focus+align``, ``focus+lapt`` …) and the report's named inputs."""
    named = _from_report(report, index)
    mine = next((given for given, a in named.items()
                 if a.content_hash == model.content_hash and given.kind in ("init", "lapt")), None)
    if mine is not None:
        label = (model_label(mine.name, lapt=True, objective=lapt_objective(named[mine].params))
                 if mine.kind == "lapt" else mine.name)
    return label, named


def _coverage(named: dict[ReportInput, Artifact], label: str) -> tuple[bool, ...]:
    return tuple(ReportInput(kind, name) in named for kind in ("downstream", "intrinsic")
                 for name in (label, SOURCE_LABEL))


def trace(store: ArtifactStore, model: Artifact, report: Artifact | None = None) -> Lineage:
    """The lineage and stored results of ``model`` (an init, align, LAPT or LAPT-checkpoint artifact); ``report``:
    the run report that names it (the model's name and results are that report's), else the one that reports most
    about it."""
    index = _Index(store.list())
    if model.stage == "import":  # an exported copy imported back: the computed artifact with the same content
        model = next((a for a in index.producers(model.content_hash) if a.stage != "import"), model)
    if model.stage not in MODEL_STAGES:
        raise LineageError(f"{model.uri} is a {model.stage} artifact, not a model; pass an init, align, lapt or "
                           "lapt-checkpoint artifact (`focusflow store ls init`)")
    ancestors = _ancestors(index, store, model)
    candidate, pruned = _candidate(index, _init_of(ancestors, model))
    label = _method_label(ancestors, model, candidate)
    lineage = Lineage(model=model, label=label, ancestors=ancestors, candidate=candidate, pruned_source=pruned)
    source = ancestors.get("source")
    lineage.source_model = source or _named_source(index, store, model, ancestors)
    reports = [report] if report is not None else [a for a in reversed(index.all) if a.stage == REPORT_STAGE
                                                  and model.content_hash in a.inputs.values()]
    if reports:  # the report that reports most about the model (a run's over a comparison's), newest first
        readings = [(report, *_reading(report, index, model, label)) for report in reports]
        lineage.report, lineage.label, named = max(readings, key=lambda r: _coverage(r[2], r[1]))
        lineage.intrinsic = named.get(ReportInput("intrinsic", lineage.label))
        lineage.downstream = named.get(ReportInput("downstream", lineage.label))
        lineage.source_intrinsic = named.get(ReportInput("intrinsic", SOURCE_LABEL))
        lineage.source_downstream = named.get(ReportInput("downstream", SOURCE_LABEL))
    lineage.intrinsic = lineage.intrinsic or _first(index.consumers("intrinsic", model.content_hash))
    lineage.downstream = lineage.downstream or _first(index.consumers("downstream", model.content_hash))
    if source is not None:
        lineage.source_intrinsic = lineage.source_intrinsic or _first(
            _same_settings(index.consumers("intrinsic", source.content_hash), lineage.intrinsic))
        lineage.source_downstream = lineage.source_downstream or _first(
            _same_settings(index.consumers("downstream", source.content_hash), lineage.downstream, ignore=("name",)))
    return lineage


def _named_source(index: _Index, store: ArtifactStore, model: Artifact,
                  ancestors: dict[str, Artifact]) -> Artifact | None:
    """The source model of a model without a source stage behind it: the ``source`` input of the nearest stage that
    took one (``focusflow init --source FOLDER`` imports the folder), else, for an imported copy of a published
    folder, the ``source`` its ``lineage.json`` names, when this store holds that content."""
    for artifact in (model, *ancestors.values()):
        content_hash = artifact.inputs.get("source")
        if content_hash and index.producers(content_hash):
            return index.producers(content_hash)[0]
    if model.stage != "import" or LINEAGE_FILE not in model.files:
        return None
    try:
        named = json.loads(store.read_bytes(model, LINEAGE_FILE))["artifacts"]["source"]["content_hash"]
    except (ValueError, KeyError, TypeError):  # not a lineage focusflow wrote, or one without a source
        return None
    return _first(index.producers(str(named)))


def _same_settings(candidates: list[Artifact], mine: Artifact | None, ignore: tuple[str, ...] = ()) -> list[Artifact]:
    """The source's results measured with the same settings as the model's (else none: not comparable)."""
    if mine is None:
        return candidates
    wanted = {k: v for k, v in mine.params.items() if k not in ignore}
    return [a for a in candidates if {k: v for k, v in a.params.items() if k not in ignore} == wanted]


def _first(artifacts: list[Artifact]) -> Artifact | None:
    return artifacts[0] if artifacts else None


def recorded_language(lineage: Lineage) -> str | None:
    """The language the store records for the model: its corpus's (or run report's) ``language`` parameter, else the
    ``language`` metadata of the model or of an ancestor (a run's artifacts and LAPT checkpoints carry it); None for a
    model built by stage commands that were given no language."""
    for artifact in (lineage.ancestors.get("corpus"), lineage.report):
        if artifact is not None and artifact.params.get("language"):
            return str(artifact.params["language"])
    for artifact in (lineage.model, *lineage.ancestors.values()):
        recorded = StageRecord.of(artifact).language
        if recorded:
            return recorded
    return None


def model_language(lineage: Lineage, given: str | None = None) -> str:
    """The language the model is published for: the recorded one (``given`` must agree with it), else ``given``.

    Neither is an error naming the fix (``--language``); a language is never guessed or filled with a placeholder.
    """
    recorded = recorded_language(lineage)
    address = f"{lineage.model.stage}/{shorten_key(lineage.model.key)}"
    if recorded is None:
        if not given:
            raise LineageError(f"model {address} records no language (models built by the stage commands record "
                               "none): pass --language CODE, its ISO 639 code, e.g. --language sw")
        return given
    if given and _language_key(given) != _language_key(recorded):
        raise LineageError(f"--language {given} contradicts the language {recorded!r} that model {address} records: "
                           f"drop --language (or pass --language {recorded})")
    return recorded


def _language_key(code: str) -> str:
    """A code's standard form (``swa`` and ``sw`` are one language); an unknown code stands for itself."""
    from focusflow.languages import LanguageError, normalize_language

    try:
        return normalize_language(code)
    except LanguageError:
        return code.strip().lower()


def lineage_record(lineage: Lineage) -> dict[str, Any]:
    """What ``lineage.json`` holds: every artifact's stage, key, content hash and parameters, by role."""
    return {"label": lineage.label,
            "artifacts": {role: {"stage": a.stage, "key": a.key, "content_hash": a.content_hash,
                                 "params": a.params}
                          for role, a in lineage.artifacts().items()}}
