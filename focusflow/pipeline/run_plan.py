"""The run as a value: which models a run makes, what each is called and where it comes from, decided once from the
configuration, before anything is built. The graph wires its LAPT branches from it, the product choice and the report
take its list of shippable models, publishing checks names against it and ``focusflow plan`` prints it; none of them
works the rules out again (which models get LAPT, which objective and teacher, how a trained model is named).

A model's name is :attr:`Branch.name`, spelled once by ``methods.model_label``; ``RunPlan.branch(name)`` reads it back
without splitting the string.
"""

from __future__ import annotations

from dataclasses import dataclass

from focusflow.config import PipelineConfig
from focusflow.errors import InputError
from focusflow.methods import learns_from_source, model_label, split_method
from focusflow.pipeline.family_defaults import with_family_defaults


@dataclass(frozen=True)
class Branch:
    """One model the run makes: a method's initialization (refined where its name says so), a candidate built beside
    the methods, or one of these after LAPT."""

    name: str  # the one spelling in reports, cards, results and publish.models
    start: str  # the initialization it is (or LAPT continued): a method of init.methods, or a candidate
    candidate: bool = False  # built beside the methods (init.candidates), not by a method
    trained: bool = False  # the LAPT of ``start``

    @property
    def stage(self) -> str:
        """The stage that stores its model: ``lapt`` after LAPT, else ``init`` (or ``align`` for a refined method)."""
        if self.trained:
            return "lapt"
        return "align" if not self.candidate and split_method(self.start)[1] else "init"


@dataclass(frozen=True)
class RunPlan:
    """What a run of one configuration makes. ``objective`` is the LAPT objective the run trains with (``auto``
    resolved by the source's family), None when it trains none."""

    language: str
    methods: tuple[str, ...]
    candidates: tuple[str, ...]  # built beside the methods (a prune-mode run's methods are pruned sources already)
    trained: tuple[str, ...]  # the methods and candidates LAPT continues, in orchestration.lapt_methods's order
    objective: str | None
    tasks: tuple[str, ...]

    @classmethod
    def from_config(cls, cfg: PipelineConfig) -> RunPlan:
        cfg = with_family_defaults(cfg)
        built = (*cfg.init.methods, *cfg.init.built_candidates)
        trained = tuple(dict.fromkeys(m for m in cfg.orchestration.lapt_methods if m in built)) \
            if cfg.lapt.has_budget else ()
        return cls(cfg.language, tuple(cfg.init.methods), tuple(cfg.init.built_candidates), trained,
                   cfg.lapt.objective if trained else None, tuple(cfg.evaluation.tasks))

    @property
    def teacher(self) -> bool:
        """Whether the run's LAPT learns from the source (the graph passes it and its stored word states)."""
        return self.objective is not None and learns_from_source(self.objective)

    def lapt_name(self, start: str) -> str:
        """The name of ``start`` after the run's LAPT (``focus+distill``, ``prune+extend+lapt``)."""
        return model_label(start, lapt=True, objective=self.objective or "mlm")

    @property
    def branches(self) -> tuple[Branch, ...]:
        """Every model the run makes: the methods, the candidates, then each trained one after its LAPT."""
        return (*(Branch(m, m) for m in self.methods), *(Branch(c, c, candidate=True) for c in self.candidates),
                *(Branch(self.lapt_name(s), s, candidate=s in self.candidates, trained=True) for s in self.trained))

    def branch(self, name: str) -> Branch:
        """The branch called ``name``; an InputError naming the run's models when it makes none."""
        for branch in self.branches:
            if branch.name == name:
                return branch
        raise InputError(f"this run makes no model {name!r}; it makes {', '.join(b.name for b in self.branches)}")

    def shippable(self, *, trained: bool = True) -> list[str]:
        """The models the run could ship, by name: each method after its LAPT (the methods themselves when the run
        trains none of them; ``trained=False``: a graph that runs no LAPT, ``compare``), then each candidate after its
        LAPT where it has one, then the candidates as built. The downstream evaluation, the report's candidates table
        and the product choice read this one list; its first entry is the configured product."""
        lapt = set(self.trained) if trained else set()
        names = [self.lapt_name(m) for m in self.methods if m in lapt] or list(self.methods)
        names += [self.lapt_name(c) for c in self.candidates if c in lapt]
        return list(dict.fromkeys([*names, *self.candidates]))


__all__ = ["Branch", "RunPlan"]
