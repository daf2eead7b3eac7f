"""Publishing as a stored stage: the Hub repository folder of a model, pushed before it is committed.

The ``publish`` artifact is the repository folder (weights, tokenizer, configs, transfer report, card,
run configuration, lineage). With ``push`` the build uploads it to the Hub and only then returns, so a
failed push raises inside the build and the store keeps nothing of it; the pushed commit is recorded
in the manifest's metadata. Its inputs are the model and the stored results the card reports (the
run report and the intrinsic and downstream evaluations of the model and of its source), found by
:func:`publish_inputs` from the CLI and passed by the graph in a flow: the same artifacts, the same key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from focusflow.pipeline.registry import Stage, StageRun, StageSettings, register
from focusflow.pipeline.run_plan import RunPlan
from focusflow.publish.record import PublishRecord
from focusflow.storage import Artifact, ArtifactStore

if TYPE_CHECKING:
    from focusflow.config import PipelineConfig
    from focusflow.publish.lineage import Lineage

# version 2: cards name a source licence's terms (NOTICE for Gemma), one seed shows no spread, LAPT minutes
# version 3: the weight check of a model without a stored one compares with the source model its lineage names, and
# the card says what it compared with; a SIB-200 row names the dataset's config offline (or none)
# version 4: `datasets` names the training corpus only; the language as an ISO 639 code; a local task by its folder's
# name (no path); the tokenizer's class one transformers 4 knows; the weights' quantized copy and Gemma's use
# restrictions said in the card; a private push makes an existing repository private first; the configuration and
# the lineage name no local path (a corpus file, a data root, a store: <local>/<name>)
# version 5: the source licence's text ships as LICENSE (MIT with its copyright line, Apache 2.0) and the card names
# it; lineage.json lists the folder's files, and a push removes those an earlier push wrote that the new folder
# lacks; an e5-derived card shows sentence vectors; held-out results name a Hub corpus; without --private or
# --public a repository is created as the Hub's default makes it (an organization's private)
# version 6: a candidate (prune, prune+extend) is described and configured as itself, a model published at
# initialization is rebuilt without LAPT, the card's tokens per word are the run's measured ones, the model is named as
# the report it is published with names it
PUBLISH_STAGE, PUBLISH_VERSION = "publish", 6
RESULT_INPUTS = ("report", "intrinsic", "source_intrinsic", "downstream", "source_downstream")


#: ``publish.models``'s name of the model the run's report picks (``pipeline.product``).
PRODUCT = "product"


def publishable_models(cfg: PipelineConfig) -> list[str]:
    """The names a run's models have (``focus``, ``focus+align``, ``focus+lapt``, ``prune`` …): what
    ``publish.models`` lists, besides ``product``."""
    return [branch.name for branch in RunPlan.from_config(cfg).branches]


def publish_inputs(store: ArtifactStore, model: Artifact, lineage: Lineage | None = None) -> dict[str, Artifact]:
    """The model and the stored results of it and of its source (by lineage, traced unless given), as the
    stage's inputs."""
    from focusflow.publish.lineage import trace

    lineage = trace(store, model) if lineage is None else lineage
    found = {"model": lineage.model, "report": lineage.report, "intrinsic": lineage.intrinsic,
             "source_intrinsic": lineage.source_intrinsic, "downstream": lineage.downstream,
             "source_downstream": lineage.source_downstream}
    return {name: artifact for name, artifact in found.items() if artifact is not None}


class PublishSettings(StageSettings):
    """focusflow's version is part of them because the card names it."""

    repo_id: str
    private: bool | None = None  # None: the Hub's default (public, unless the organization makes repositories private)
    revision: str | None = None
    commit_message: str | None = None
    push: bool = True
    focusflow: str
    language: str | None = None  # only for a model whose lineage records none
    force: bool | None = None  # only when asked: publish a model that failed its weight check (the card says so)
    hub: str | None = None  # a push to another Hub than huggingface.co (HF_ENDPOINT): another publish, pushed there

    @classmethod
    def for_repo(cls, repo_id: str, *, private: bool | None = None, revision: str | None = None,
                 commit_message: str | None = None, push: bool = True, language: str | None = None,
                 force: bool = False) -> Self:
        """``language`` is given only for a model whose lineage records none (``publish --language``), ``force`` only
        when asked, ``hub`` only for a push to another Hub than huggingface.co: each is then part of the key, and
        absent otherwise, so a run's models keep the keys they have."""
        from focusflow import __version__
        from focusflow.publish.hub import DEFAULT_ENDPOINT, hub_endpoint
        from focusflow.publish.names import check_repo_id

        repo_id = check_repo_id(repo_id)
        endpoint = hub_endpoint() if push else DEFAULT_ENDPOINT
        return cls(repo_id=repo_id, private=private, revision=revision or None,
                   commit_message=commit_message or None, push=bool(push), focusflow=__version__,
                   **({"language": language} if language else {}), **({"force": True} if force else {}),
                   **({"hub": endpoint} if endpoint != DEFAULT_ENDPOINT else {}))

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, *, model: str, **variant: Any) -> Self:
        """One of the run's models (``publish.repo_id`` filled in for it)."""
        from focusflow.config import ConfigError
        from focusflow.publish.names import fill_repo_id

        spec = cfg.publish
        if not spec.repo_id:
            raise ConfigError("publish.repo_id is not set")
        if len(spec.models) > 1 and "{model}" not in spec.repo_id:
            raise ConfigError(f"publish.models lists {len(spec.models)} models but publish.repo_id {spec.repo_id!r} "
                              "has no {model}: each model needs its own repository")
        known = publishable_models(cfg)
        # checked now; the report's pick replaces it
        model = RunPlan.from_config(cfg).shippable()[0] if model == PRODUCT else model
        if model not in known:
            raise ConfigError(f"publish.models: this run makes no model {model!r}; it makes {', '.join(known)}")
        return cls.for_repo(fill_repo_id(spec.repo_id, cfg.language, model), private=spec.private,
                            revision=spec.revision, commit_message=spec.commit_message, push=spec.push)


def _publish(run: StageRun) -> dict[str, Any]:
    from focusflow.publish.folder import write_repository
    from focusflow.publish.hub import push_folder, require_token
    from focusflow.publish.lineage import LINEAGE_FILE, trace
    from focusflow.publish.weights import require_sound_weights, weight_check

    p: PublishSettings = run.settings
    if p.push:  # before anything is written (a run refuses it earlier: plan.check_plan)
        require_token()
    lineage = trace(run.store, run.artifacts["model"], report=run.artifacts.get("report"))  # its name in this run
    check = weight_check(run.store, lineage)  # before anything is written: a blown-up model is never published
    require_sound_weights(check, lineage.model, bool(p.force))
    for name in RESULT_INPUTS:  # the given results are the ones reported
        if name in run.artifacts:
            setattr(lineage, name, run.artifacts[name])
    metadata = write_repository(run.store, lineage, p.repo_id, run.out, p.focusflow, p.language, weights=check)
    if p.push:
        pushed = push_folder(run.out, p.repo_id, private=p.private, revision=p.revision,
                             commit_message=p.commit_message, record=LINEAGE_FILE)
        metadata["push"] = pushed.to_dict()
    return metadata


PUBLISH = register(Stage(PUBLISH_STAGE, PUBLISH_VERSION, ("model",), _publish,
                         "the Hub repository of a model (card from stored results), pushed when asked",
                         optional=RESULT_INPUTS, settings=PublishSettings, record=PublishRecord))
