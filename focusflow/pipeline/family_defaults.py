"""What a run's ``auto`` settings become for its source's family, decided once, before the graph is walked: the
graph, the plan, the names of the models and their keys all read the one resolved configuration.

``lapt.objective: auto`` is the family's measured objective (``methods.FAMILY_OBJECTIVES``): a distillation for an
encoder, the causal LM for a decoder; ``init.refine.lr: auto`` the family's measured refinement rate
(``methods.FAMILY_REFINE_LR``). The family is read from the source's config without loading it (a Hub id's
``config.json`` is fetched when not cached: the run downloads the model anyway). Where it cannot be known (offline,
an id the Hub does not answer for) the run trains its own LM loss, which every family has, and says so.
"""

from __future__ import annotations

import functools
import logging

from focusflow.config import PipelineConfig
from focusflow.methods import AUTO_OBJECTIVE, FAMILY_REFINE_LR, family_objective, family_refine_lr, split_method
from focusflow.models.model_type import source_is_decoder
from focusflow.tokenizer.source_ids import source_kind

log = logging.getLogger(__name__)


def with_family_defaults(cfg: PipelineConfig) -> PipelineConfig:
    """``cfg`` with its ``auto`` settings resolved for its source (``cfg`` itself when none is ``auto``)."""
    update = {}
    if cfg.lapt.objective == AUTO_OBJECTIVE:
        update["lapt"] = cfg.lapt.model_copy(update={"objective": run_objective(cfg)})
    if cfg.init.refine.lr == AUTO_OBJECTIVE:  # an unknown family refines at the encoder's rate, the former default
        decoder = _is_decoder(cfg.source_model)
        if decoder is None and any("align" in split_method(m)[1] for m in cfg.init.methods):
            _say_unknown_rate(cfg.source_model)
        refine = cfg.init.refine.model_copy(update={"lr": family_refine_lr(AUTO_OBJECTIVE, bool(decoder))})
        update["init"] = cfg.init.model_copy(update={"refine": refine})
    return cfg.model_copy(update=update) if update else cfg


def run_objective(cfg: PipelineConfig) -> str:
    """The objective the run's LAPT trains with (``lapt.objective``, ``auto`` resolved): what its models are
    named by and whether they get the source as teacher."""
    if cfg.lapt.objective != AUTO_OBJECTIVE:
        return cfg.lapt.objective
    decoder = _is_decoder(cfg.source_model)
    if decoder is None:
        if cfg.lapt.has_budget:
            _say_unknown(cfg.source_model)
        return "mlm"
    return family_objective(AUTO_OBJECTIVE, decoder)


@functools.lru_cache(maxsize=64)
def _say_unknown(source_model: str) -> None:
    """Once per process and source: the graph, the plan and the stage settings each resolve the configuration."""
    log.warning("lapt.objective=auto: whether %s is an encoder or a decoder is not known here; its LAPT trains its "
                "own LM loss (set lapt.objective to distill or mlm to choose)", source_model)


@functools.lru_cache(maxsize=64)
def _say_unknown_rate(source_model: str) -> None:
    log.warning("init.refine.lr=auto: whether %s is an encoder or a decoder is not known here; its refinement runs at "
                "the encoder's rate, %g (a decoder's is %g: set init.refine.lr to choose)", source_model,
                FAMILY_REFINE_LR["encoder"], FAMILY_REFINE_LR["decoder"])


def is_decoder_source(source_model: str) -> bool:
    """Whether the run's source is known to be a decoder (False where it is an encoder or cannot be known)."""
    return bool(_is_decoder(source_model))


def _is_decoder(source_model: str) -> bool | None:
    """A Hub id is asked once per process (its config may be fetched); a folder or a packaged id every time (a folder
    may be written after the configuration is made)."""
    if source_kind(source_model).name == "hub":
        return _hub_is_decoder(source_model)
    return source_is_decoder(source_model)


@functools.lru_cache(maxsize=64)
def _hub_is_decoder(source_model: str) -> bool | None:
    return source_is_decoder(source_model, fetch=True)


__all__ = ["is_decoder_source", "run_objective", "with_family_defaults"]
