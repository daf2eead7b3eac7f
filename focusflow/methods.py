"""The embedding-initialization methods as one table: what each does, what it needs, whether the flow can run it.

Everything that lists methods derives from :data:`INIT_METHODS`: ``InitMethod`` (``focusflow.config``),
``METHODS`` (``focusflow.embeddings``), the ``--method`` choices of ``focusflow init`` and ``focusflow compare``,
and the config check that refuses, in ``init.methods`` and ``orchestration.lapt_methods``, a method whose
inputs the pipeline flow cannot supply. A new method is one more row plus the builder it names in
``focusflow.embeddings.builders``; a refinement (such as ``focus+align``) is one row of :data:`REFINEMENTS`.
:class:`Fate` is what a method does with one target row, spelled once for the plan, its totals, the report and
align. Torch-free on purpose: validating a config imports it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from focusflow.errors import InputError


class Fate(StrEnum):
    """What the initialization did with one target row; the value is its spelling in the per-token report, the
    totals (``<fate>`` counts, ``<share group>_share`` shares) and every stored artifact."""

    COPIED_EXACT = "copied_exact"
    COPIED_FUZZY = "copied_fuzzy"
    COPIED_SPECIAL = "copied_special"
    COMBINED = "combined"
    COMBINED_SUBWORD = "combined_subword"  # FOCUS's rare token, combined from its fastText subword vector
    FVT = "fvt"  # FOCUS's rare token, the mean of its source pieces
    RANDOM = "random"
    MEAN = "mean"
    KEPT = "kept"  # the source's own row (prune and extend keep the source vocabulary)

    @property
    def copied(self) -> bool:
        """The row is a source row copied as it is (exact, fuzzy or special match)."""
        return self.value.startswith("copied_")

    @property
    def share_group(self) -> str:
        """Its share's name in the totals and the report (``<group>_share``): the three copies are one, ``copied``."""
        return "copied" if self.copied else self.value

    @property
    def unchanged(self) -> bool:
        """The row is its source token's row as it was (same token, a special, a kept row): align leaves it."""
        return self in (Fate.COPIED_EXACT, Fate.COPIED_SPECIAL, Fate.KEPT)

    @property
    def rare_fallback(self) -> bool:
        """A rare token's stand-in meaning (no fastText vector of its own): a 1-D per-token matrix draws these rows."""
        return self in (Fate.COMBINED_SUBWORD, Fate.FVT)


#: Every share of the totals once, in the order of :class:`Fate` (they add up to 1).
SHARE_GROUPS: tuple[str, ...] = tuple(dict.fromkeys(fate.share_group for fate in Fate))


@dataclass(frozen=True)
class MethodInput:
    """Something a method needs beyond the source model and the source and target tokenizers."""

    description: str
    flow_supplies: bool  # the pipeline flow (and ``focusflow compare``) builds it from the corpus


AUX_VECTORS = MethodInput(
    "token-level fastText vectors of the target language, trained on the corpus (`focusflow init --corpus`, "
    "--aux or --fasttext-bin)", flow_supplies=True)
ALIGNED_WORD_VECTORS = MethodInput(
    "source- and target-language fastText word vectors aligned with a bilingual dictionary "
    "(`focusflow init --wechsel-source-vectors --wechsel-target-vectors [--wechsel-dictionary]`)",
    flow_supplies=False)


@dataclass(frozen=True)
class InitMethodSpec:
    """One row of the table: a method name, a one-line description, the function that builds its plan, the inputs
    it needs and the overlap it copies.

    ``builder`` is the dotted path of a function of ``focusflow.embeddings.builders`` (this table sits below the
    embeddings and must not import them), resolved by ``tokenizer.source_ids.named_function`` as every table's rows
    are; ``build_plan`` calls it and nothing else, so a row is its method.
    """

    name: str
    description: str
    builder: str
    needs: tuple[MethodInput, ...] = ()
    overlap: Literal["full", "symbolic"] = "full"  # compute_overlap's ``match``: which tokens are copied as they are

    @property
    def flow_can_run(self) -> bool:
        return all(need.flow_supplies for need in self.needs)

    @property
    def needs_aux_vectors(self) -> bool:
        return AUX_VECTORS in self.needs

    @property
    def spells_with_source_pieces(self) -> bool:
        """Whether its plan falls back to the source's pieces (FVT) for rows it has nothing else for: the rows no
        piece spells are left over (``unspelled``). FOCUS's only where ``rare_tokens`` is not ``random``."""
        return self.builder in (BUILDERS + "fvt_plan", BUILDERS + "focus_plan")


BUILDERS = "focusflow.embeddings.builders."  # where the methods' builders are

INIT_METHODS: dict[str, InitMethodSpec] = {spec.name: spec for spec in (
    InitMethodSpec("focus", "new tokens as sparsemax-weighted sums of overlapping source embeddings, similar "
                            "in auxiliary fastText vectors (FOCUS)", BUILDERS + "focus_plan", (AUX_VECTORS,)),
    InitMethodSpec("random", "every non-special row a random row of the source matrix (Zoph et al. 2016)",
                   BUILDERS + "random_plan"),
    InitMethodSpec("mean", "overlap copied, other rows the source mean", BUILDERS + "mean_plan"),
    InitMethodSpec("fvt", "overlap copied, other rows the mean of the token's source pieces (FVT)",
                   BUILDERS + "fvt_plan"),
    InitMethodSpec("focus-symbolic", "FOCUS with the symbolic-only overlap (the paper's ablation)",
                   BUILDERS + "focus_plan", (AUX_VECTORS,), overlap="symbolic"),
    InitMethodSpec("wechsel", "rows from the most similar source tokens in an aligned bilingual word-vector "
                              "space (WECHSEL)", BUILDERS + "wechsel_plan", (ALIGNED_WORD_VECTORS,)),
    InitMethodSpec("avg-eg", "overlap copied, other rows the mean of source sub- and super-words (AVG-EG)",
                   BUILDERS + "avg_eg_plan"),
)}
METHOD_NAMES: tuple[str, ...] = tuple(INIT_METHODS)

@dataclass(frozen=True)
class CandidateSpec:
    """One model a run may build beside its methods (``init.candidates``): how the init stage makes it. ``on_pruned``:
    it is built on the pruned source (pruned with room kept for the rows it adds) instead of on the source."""

    name: str
    description: str
    mode: Literal["prune", "extend"]
    method: str  # the init method its new rows get ("mean" where none are new)
    on_pruned: bool = False


#: The candidates, each a row: the graph builds every row the same way (``pipeline.graph``), the config's
#: ``init.candidates`` and ``orchestration.lapt_methods`` accept their names.
CANDIDATES: dict[str, CandidateSpec] = {spec.name: spec for spec in (
    CandidateSpec("prune", "the source's vocabulary pruned to the pieces the corpus uses and the source's most "
                           "probable pieces in the corpus's characters (init.prune_budget), every row copied: the "
                           "source's quality at a fraction of its size, the floor a new tokenizer must beat",
                  mode="prune", method="mean"),
    CandidateSpec("prune+extend", "the pruned source plus the language tokenizer's most frequent new tokens "
                                  "(init.extend_top_n), initialized by FOCUS: most of the input is what the source "
                                  "read, with fewer tokens per word", mode="extend", method="focus", on_pruned=True),
)}
CandidateName = Literal["prune", "prune+extend"]


def candidate_built_as(mode: str, method: str, *, on_pruned: bool) -> str | None:
    """The candidate whose init stage these are (a stored init's ``mode`` and ``method``, and whether its source was
    a pruned source), None for a method's model: how a stored model is named and rebuilt without its run's labels.
    A prune-mode run's ``mean`` model is the ``prune`` candidate's artifact (the same parameters, the same key)."""
    return next((spec.name for spec in CANDIDATES.values()
                 if (spec.mode, spec.method, spec.on_pruned) == (mode, method, on_pruned)), None)


@dataclass(frozen=True)
class LaptObjectiveSpec:
    """One ``lapt.objective``: what a model trained by it is named (its suffix), whether it learns from the source
    (a teacher: the graph passes the source and its stored word states), and the recipe of the run that trains it (the
    dotted path of a class of ``focusflow.training``, resolved there by ``named_function``: this table stays below
    torch)."""

    name: str
    description: str
    suffix: str
    teacher: bool
    recipe: str


#: The LAPT objectives, each a row: ``training.lapt.lapt_run`` builds the row's run, the graph, ``focusflow lapt``
#: and the benchmarks read ``teacher``, and every model name reads ``suffix``.
LAPT_OBJECTIVES: dict[str, LaptObjectiveSpec] = {spec.name: spec for spec in (
    LaptObjectiveSpec("mlm", "the model's own LM loss (masked LM for an encoder, causal for a decoder)", "+lapt",
                      teacher=False, recipe="focusflow.training.lapt.LaptRecipe"),
    LaptObjectiveSpec("distill", "the source's word-pooled hidden states at a few layers and its sentence vectors",
                      "+distill", teacher=True, recipe="focusflow.training.distill.DistillRecipe"),
    LaptObjectiveSpec("mlm+distill", "both", "+mlm+distill", teacher=True,
                      recipe="focusflow.training.distill.DistillRecipe"),
)}
#: What a model's name ends with after language-adaptive pretraining, by its objective: the masked/causal LM's
#: ``focus+lapt``, a distillation's ``focus+distill``, both at once ``focus+mlm+distill``.
LAPT_SUFFIXES: dict[str, str] = {name: spec.suffix for name, spec in LAPT_OBJECTIVES.items()}
LAPT_SUFFIX = LAPT_SUFFIXES["mlm"]


#: ``lapt.objective: auto``, by the source's family, each chosen by measurement (benchmarks/RESULTS-lapt-parity.md):
#: an encoder distills its source (FOCUS −2.5 and prune+extend +4.0 points on SIB-200 after 30 CPU-minutes, where
#: masked-LM LAPT left FOCUS −5.4), a decoder trains its own causal LM (Gemma's FOCUS + CLM LAPT: 2.09 bits per
#: byte against the source's 3.81; a decoder's distillation is not measured).
AUTO_OBJECTIVE = "auto"
FAMILY_OBJECTIVES: dict[str, str] = {"encoder": "distill", "decoder": "mlm"}


def family_objective(objective: str, decoder: bool) -> str:
    """The LAPT objective a run trains with: ``objective`` itself, or for ``auto`` its source family's."""
    if objective != AUTO_OBJECTIVE:
        return objective
    return FAMILY_OBJECTIVES["decoder" if decoder else "encoder"]


#: ``init.refine.lr: auto``, by the source's family: the encoder-sized 2e-3 the align refinement was built with, and
#: for a decoder 3e-4, measured on Gemma 3 270M (benchmarks/RESULTS-decoders.md: at 2e-3 every loss overshot and
#: keep-best returned FVT on Shona; at 3e-4 the refinement ended 0.126 (sn) and 0.092 (ha) bits per byte below FVT).
FAMILY_REFINE_LR: dict[str, float] = {"encoder": 2e-3, "decoder": 3e-4}


def family_refine_lr(lr: float | str, decoder: bool) -> float:
    """The align refinement's learning rate: ``lr`` itself, or for ``auto`` its source family's."""
    if lr != AUTO_OBJECTIVE:
        return float(lr)
    return FAMILY_REFINE_LR["decoder" if decoder else "encoder"]


def learns_from_source(objective: str) -> bool:
    """Whether a LAPT objective has the source as its teacher (the one place this rule is decided)."""
    return LAPT_OBJECTIVES[objective].teacher


def model_label(method: str, refinements: Iterable[str] = (), *, lapt: bool = False, objective: str = "mlm") -> str:
    """The one spelling of a model's name in reports, cards, results and ``publish.models``: the method, its
    refinements, and after LAPT its objective's suffix (``focus``, ``focus+align``, ``focus+lapt``,
    ``focus+distill``)."""
    return "+".join((method, *refinements)) + (LAPT_SUFFIXES[objective] if lapt else "")


def lapt_objective(params: Mapping[str, Any]) -> str:
    """The objective of a stored LAPT run from its parameters (``lapt.objective``, keyed only when not the
    default): what its model's name ends with."""
    objective = (params.get("lapt") or {}).get("objective") if isinstance(params.get("lapt"), Mapping) else None
    return objective if objective in LAPT_SUFFIXES else "mlm"


def model_stage(label: str) -> tuple[str, str]:
    """``"focus+align+lapt"`` → ``("focus", "align+lapt")``, ``"prune+extend+distill"`` → ``("prune+extend",
    "distill")``, ``"prune"`` → ``("prune", "init")``: the model a row starts from (a method, a candidate or the
    source's ``original``) and what was done to it after, for the comparison table's method and stage columns."""
    for known in sorted([*METHOD_NAMES, *CANDIDATES, "original"], key=len, reverse=True):
        if label == known or label.startswith(f"{known}+"):
            return known, label[len(known) + 1:] or "init"
    return label, "init"


def read_model_label(label: str) -> tuple[str, bool]:
    """``"focus+align+lapt"`` → ``("focus+align", True)``, ``"prune+distill"`` → ``("prune", True)``: the pipeline
    method and whether LAPT followed (whatever its objective)."""
    for suffix in sorted(LAPT_SUFFIXES.values(), key=len, reverse=True):
        if label.endswith(suffix):
            return label.removesuffix(suffix), True
    return label, False


# Refinements run after any initialization: ``<method>+<refinement>`` (``focus+align``) in the pipeline.
REFINEMENTS: dict[str, str] = {
    "align": "then train the rows not copied exactly so that word-pooled hidden states match the source model's "
             "on training text (body frozen; settings: init.refine)",
}
PIPELINE_METHOD_NAMES: tuple[str, ...] = METHOD_NAMES + tuple(
    model_label(name, (refinement,)) for name in METHOD_NAMES for refinement in REFINEMENTS)
FLOW_METHOD_NAMES: tuple[str, ...] = tuple(name for name in PIPELINE_METHOD_NAMES
                                           if INIT_METHODS[name.split("+")[0]].flow_can_run)


def split_method(name: str) -> tuple[str, tuple[str, ...]]:
    """``"focus+align"`` → ``("focus", ("align",))``; each part checked against the tables."""
    base, *refinements = name.split("+")
    init_method(base)
    unknown = [r for r in refinements if r not in REFINEMENTS]
    if unknown:
        raise InputError(f"unknown refinement {'+'.join(unknown)!r} in method {name!r}; refinements: "
                         f"{', '.join(REFINEMENTS)}")
    return base, tuple(refinements)


def init_method(name: str) -> InitMethodSpec:
    """The table row of ``name``; a ValueError naming the choices when there is none."""
    try:
        return INIT_METHODS[name]
    except KeyError:
        raise InputError(f"unknown method {name!r}; choose one of {', '.join(METHOD_NAMES)}") from None


def check_flow_method(name: str) -> str:
    """``name`` if the pipeline flow can supply every input it needs, else a ValueError saying what is missing."""
    spec = init_method(split_method(name)[0])
    missing = [need.description for need in spec.needs if not need.flow_supplies]
    if missing:
        raise InputError(f"method {name!r} cannot run in the pipeline flow: it needs {'; '.join(missing)}, which "
                         f"the flow does not produce (run it with `focusflow init`); the flow runs "
                         f"{', '.join(FLOW_METHOD_NAMES)}")
    return name


def methods_help(names: Iterable[str] = METHOD_NAMES) -> str:
    """``name: description`` of each method, for command-line help."""
    return "; ".join(f"{name}: {INIT_METHODS[name].description}" for name in names)


def refinements_help() -> str:
    return "; ".join(f"+{name}: {description}" for name, description in REFINEMENTS.items())
