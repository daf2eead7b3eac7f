"""Everything a model card states, read from stored artifacts (manifests, the transfer totals, runs.csv).

Nothing here is typed by hand: each number is a stored result, each name a stored parameter, and
what was not stored is reported missing rather than guessed (a licence included).
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from focusflow.corpus.record import CorpusRecord
from focusflow.corpus.split import HELDOUT_FILE
from focusflow.evaluation.downstream.report import RUNS_FILE
from focusflow.evaluation.records import DownstreamRecord, IntrinsicRecord, ReportRecord
from focusflow.methods import LAPT_OBJECTIVES, lapt_objective
from focusflow.publish.lineage import TRANSFER_TOTALS, Lineage, recorded_language
from focusflow.storage import Artifact, ArtifactStore
from focusflow.tokenizer.record import TokenizerRecord
from focusflow.tokenizer.source_ids import UNKNOWN_LICENSE, by_prefix, source_licence
from focusflow.training.records import AlignSummary, CheckpointRecord, LaptRecord, ModelRecord, SourceRecord

if TYPE_CHECKING:
    from focusflow.models.weights import WeightCheck


@dataclass(frozen=True)
class LicenceTerms:
    """What a source licence asks of a model derived from it: the card names the terms with their link, the
    published folder ships ``notice`` as its ``NOTICE`` file (None: the licence asks for none) and the licence's own
    text as its ``LICENSE`` file (``text``: the file of ``focusflow/publish/licences``; MIT's with the source's
    copyright line)."""

    name: str
    link: str
    notice: str | None = None
    restrictions: str | None = None  # the use restrictions the terms pass on to every user of a derived model
    text: str | None = None
    link_in_metadata: bool = True  # the card's ``license_link`` (the Hub reads it for licences it has no page of)


# The copyright line an MIT-licensed source's licence carries (its project's own LICENSE), by lower-cased Hub id
# prefix: the MIT licence asks that it travel with every copy.
MIT_HOLDERS: tuple[tuple[str, str], ...] = (
    ("intfloat/multilingual-e5", "Microsoft Corporation"),
    ("microsoft/", "Microsoft Corporation"),
    ("facebookai/xlm-roberta", "Facebook, Inc. and its affiliates"),
)

# Sources trained as sentence encoders, by lower-cased Hub id prefix: the prefixes their texts take (query, passage).
# A model derived from one keeps its use: the card shows mean-pooled, normalized sentence vectors beside fill-mask.
EMBEDDING_PREFIXES: tuple[tuple[str, tuple[str, str]], ...] = (
    ("intfloat/multilingual-e5-small", ("query: ", "passage: ")),
    ("intfloat/multilingual-e5-base", ("query: ", "passage: ")),
    ("intfloat/multilingual-e5-large", ("query: ", "passage: ")),  # not -large-instruct: its queries take a task
)

# Source licences whose terms a derived model's card names and whose texts or notices it ships (Hub licence id ->
# terms); any other licence is named by the card's ``license`` metadata alone.
SOURCE_LICENCES: dict[str, LicenceTerms] = {
    "mit": LicenceTerms("MIT License", "https://opensource.org/license/mit", text="mit.txt", link_in_metadata=False),
    "apache-2.0": LicenceTerms("Apache License 2.0", "https://www.apache.org/licenses/LICENSE-2.0",
                               text="apache-2.0.txt", link_in_metadata=False),
    "gemma": LicenceTerms("Gemma Terms of Use", "https://ai.google.dev/gemma/terms",
                          notice="Gemma is provided under and subject to the Gemma Terms of Use found at "
                                 "ai.google.dev/gemma/terms",
                          restrictions="The use restrictions of section 3.2 of the Gemma Terms of Use and the Gemma "
                                       "Prohibited Use Policy (https://ai.google.dev/gemma/prohibited_use_policy) "
                                       "apply to this model and to every model derived from it; pass them on, with "
                                       "a copy of the Terms, to anyone you give it to."),
}


@dataclass(frozen=True)
class SourceModel:
    """What a source spec is on the Hub and under which licence its weights are shared."""

    hub_id: str | None
    license: str
    license_name: str | None = None
    license_link: str | None = None
    copy: str | None = None  # the copy its weights were read from, where not the Hub model itself
    terms_file: Path | None = None  # its licence's terms as installed (Gemma's wheel ships them): a copy is shipped

    @property
    def terms(self) -> LicenceTerms | None:
        """The terms of its licence that a derived model must name and ship (:data:`SOURCE_LICENCES`)."""
        return SOURCE_LICENCES.get(self.license)

    @property
    def copyright_holder(self) -> str | None:
        """The holder an MIT licence's copyright line names (:data:`MIT_HOLDERS`; None: not known here)."""
        return by_prefix(MIT_HOLDERS, self.hub_id or "")

    @property
    def embedding_prefixes(self) -> tuple[str, str] | None:
        """The (query, passage) prefixes of a sentence-encoder source (:data:`EMBEDDING_PREFIXES`); None otherwise."""
        hub_id = self.hub_id or ""
        return None if hub_id.lower().endswith("-instruct") else by_prefix(EMBEDDING_PREFIXES, hub_id)

    def licence_text(self, source_spec: str) -> str | None:
        """The ``LICENSE`` file a derived model ships (None where its terms have no text here); an MIT source whose
        copyright holder is not known here is named as "the copyright holders of" it."""
        terms = self.terms
        if terms is None or terms.text is None:
            return None
        text = (Path(__file__).parent / "licences" / terms.text).read_text(encoding="utf-8")
        holder = self.copyright_holder or f"the copyright holders of {self.hub_id or source_spec}"
        return text.replace("{holder}", holder)


# Corpora with a Hub id (``corpus.source`` → dataset id); local files and the demo's wheel have none.
CORPUS_DATASETS = {"cc100": "statmt/cc100", "oscar": "oscar-corpus/OSCAR-2301", "mc4": "allenai/c4"}


def source_model_facts(spec: str) -> SourceModel:
    """The Hub id and licence of a source spec (its row of :data:`~focusflow.tokenizer.source_ids.SOURCE_KINDS`);
    a spec nobody listed has licence ``unknown``."""
    known = source_licence(spec)
    terms = SOURCE_LICENCES.get(known.licence)
    link = terms.link if terms is not None and terms.link_in_metadata else None
    return SourceModel(known.hub_id, known.licence, license_link=link, copy=known.copy,
                       terms_file=known.terms_file)


@dataclass
class ModelFacts:
    """The stored facts of one model (the published one or its source)."""

    label: str
    intrinsic: dict[str, Any] = field(default_factory=dict)
    downstream: list[dict[str, Any]] = field(default_factory=list)  # results.csv rows (mean, std, seeds …)
    runs: pd.DataFrame | None = None  # runs.csv: one row per seed and metric
    tokens_per_word: float | None = None
    n_params: int | None = None
    vocab_size: int | None = None
    data_folders: dict[str, list[str]] = field(default_factory=dict)  # task → the local copy's folders it was read from


@dataclass
class CardFacts:
    language: str
    label: str
    method: str
    mode: str
    stage: str
    lm_loss: str  # mlm or clm
    architecture: str
    source_spec: str
    source: SourceModel
    model: ModelFacts
    original: ModelFacts
    fates: dict[str, float] = field(default_factory=dict)  # <fate>_share of the vocabulary
    fate_counts: dict[str, int] = field(default_factory=dict)
    lapt: dict[str, Any] = field(default_factory=dict)
    align: dict[str, Any] = field(default_factory=dict)
    corpus: dict[str, Any] = field(default_factory=dict)  # the corpus stage's parameters and counts
    evaluation: dict[str, Any] = field(default_factory=dict)  # the downstream stage's settings
    datasets: list[str] = field(default_factory=list)
    example: str | None = None  # a held-out sentence for the usage snippet
    heldout_sentences: int | None = None
    weight_check: WeightCheck | None = None  # the check publish made or read (a failed one: published with --force)
    product: str | None = None  # the model the run's report picked (pipeline.product), and why
    product_reason: str | None = None
    candidates: list[dict[str, Any]] = field(default_factory=list)  # every candidate the run built, side by side
    candidate: str | None = None  # the candidate it was built as (prune, prune+extend), None for a method's model


def _downstream(store: ArtifactStore, artifact: Artifact | None) -> tuple[list[dict[str, Any]], pd.DataFrame | None]:
    if artifact is None:
        return [], None
    results = [dict(row) for row in DownstreamRecord.of(artifact).results]
    runs = pd.read_csv(io.BytesIO(store.read_bytes(artifact, RUNS_FILE))) if RUNS_FILE in artifact.files else None
    return results, runs


def _data_folders(artifact: Artifact | None) -> dict[str, list[str]]:
    """Task → the names of the local folders its runs read (their recorded provenance): what names a dataset's
    config offline (SIB-200's ``swh_Latn`` for ``cls:sib200:sw``)."""
    from focusflow.evaluation.downstream.sources import provenance_folders

    folders: dict[str, list[str]] = {}
    for run in DownstreamRecord.of(artifact).measured if artifact is not None else []:
        names = folders.setdefault(str(run.get("task", "")), [])
        names += [name for name in provenance_folders(run.get("provenance") or {}) if name not in names]
    return folders


def _tokenizer_side(lineage: Lineage, side: str) -> float | None:
    tokenizer = TokenizerRecord.of_optional(lineage.ancestors.get("tokenizer"))
    return tokenizer.tokens_per_word(side) if tokenizer is not None else None


def _example_sentence(store: ArtifactStore, lineage: Lineage) -> str | None:
    """A short held-out sentence of the target language (never a training text) for the usage snippet."""
    split = lineage.ancestors.get("split")
    if split is None or HELDOUT_FILE not in split.files:
        return None
    with store.open(split, HELDOUT_FILE) as handle:
        for number, line in enumerate(io.TextIOWrapper(handle, encoding="utf-8")):
            if number >= 500:
                break
            lines = str(json.loads(line).get("text", "")).strip().splitlines() if line.strip() else []
            text = lines[0].strip() if lines else ""
            words = text.split()
            if 6 <= len(words) <= 16 and len(text) <= 120:
                return text
    return None


def _source_spec(source: Artifact | None) -> str:
    if source is None:
        return "unknown"
    spec = str(source.params.get("source_model", "unknown"))
    if spec == "local":
        return f"local folder (content {str(source.params.get('fingerprint', ''))[:12]})"
    return spec


def _datasets(corpus: dict[str, Any]) -> list[str]:
    """The card's ``datasets``: what the weights were trained on (the Hub shows them as "Datasets used to train"),
    the corpus where it is a Hub dataset; the evaluation tasks' datasets are named in the model-index only."""
    return [CORPUS_DATASETS[corpus["source"]]] if corpus.get("source") in CORPUS_DATASETS else []


def gather_facts(store: ArtifactStore, lineage: Lineage, language: str | None = None) -> CardFacts:
    """The card's facts: stored parameters and results of the model, its source and the stages between.

    ``language``: the model's language when its lineage records none (``publish --language``); a language neither
    recorded nor given is ``unknown``, which the card leaves out of its metadata.
    """
    model, ancestors = lineage.model, lineage.ancestors
    init = lineage.init
    transfer = lineage.transfer
    totals = json.loads(store.read_bytes(transfer, TRANSFER_TOTALS)) if transfer is not None else {}
    config = json.loads(store.read_bytes(model, "config.json")) if "config.json" in model.files else {}
    measured = IntrinsicRecord.of_optional(lineage.intrinsic) or IntrinsicRecord()
    measured_original = IntrinsicRecord.of_optional(lineage.source_intrinsic) or IntrinsicRecord()
    mine, original = measured.scalars(), measured_original.scalars()  # every metric, for the card's tables
    results, runs = _downstream(store, lineage.downstream)
    source_results, source_runs = _downstream(store, lineage.source_downstream)
    lapt = ancestors.get("lapt") or (model if model.stage in ("lapt", "lapt-checkpoint") else None)
    align = ancestors.get("align") or (model if model.stage == "align" else None)
    corpus_artifact = ancestors.get("corpus")
    corpus = {**(corpus_artifact.params.get("corpus", {}) if corpus_artifact else {}),
              **(CorpusRecord.of(corpus_artifact).model_dump(exclude_unset=True, include={"documents", "bytes", "chars"})
                 if corpus_artifact else {})}
    source_artifact = ancestors.get("source")
    source_spec = _source_spec(source_artifact)
    lm_loss = str(measured.lm_loss or ("clm" if any(a.endswith(("ForCausalLM", "LMHeadModel"))
                                                          for a in config.get("architectures", [])) else "mlm"))
    lapt_facts = _lapt_facts(lapt) if lapt is not None else {}
    align_summary = ModelRecord.of(align).align if align is not None else None
    align_facts = {k: v for k, v in (align_summary or AlignSummary()).model_dump(include={"steps", "tokens", "layer"})
                   .items() if v is not None}
    report = ReportRecord.of_optional(lineage.report)
    init_record = ModelRecord.of_optional(init)
    source_record = SourceRecord.of_optional(source_artifact)
    evaluation = dict((lineage.downstream.params.get("evaluation") or {}) if lineage.downstream else {})
    return CardFacts(
        language=recorded_language(lineage) or language or "unknown", label=lineage.label,
        method=str(init.params.get("method", "unknown")) if init else "unknown",
        mode=str(init.params.get("mode", "unknown")) if init else "unknown",
        stage=model.stage, lm_loss=lm_loss,
        architecture=(config.get("architectures") or ["unknown"])[0],
        source_spec=source_spec, source=source_model_facts(str(source_artifact.params.get("source_model", "")))
        if source_artifact is not None and source_artifact.params.get("source_model") != "local"
        else SourceModel(None, UNKNOWN_LICENSE),
        # tokens per word as the run measured them on its own tokenizer (a candidate's is not the language
        # tokenizer's), else the tokenizer stage's count
        model=ModelFacts(lineage.label, mine, results, runs, measured.tokens_per_word
                         or _tokenizer_side(lineage, "target"),
                         measured.n_params or (init_record.n_params if init_record else None),
                         measured.vocab_size or _int(config.get("vocab_size")), _data_folders(lineage.downstream)),
        original=ModelFacts("original", original, source_results, source_runs,
                            measured_original.tokens_per_word or _tokenizer_side(lineage, "source"),
                            measured_original.n_params or (source_record.n_params if source_record else None),
                            measured_original.vocab_size or (source_record.vocab_size if source_record else None),
                            _data_folders(lineage.source_downstream)),
        fates={k: float(v) for k, v in totals.items() if k.endswith("_share") and isinstance(v, (int, float))},
        fate_counts={k: int(v) for k, v in totals.items()
                     if not k.endswith("_share") and isinstance(v, int) and not isinstance(v, bool)},
        lapt=lapt_facts, align=align_facts, corpus=corpus, evaluation=evaluation,
        datasets=_datasets(corpus), example=_example_sentence(store, lineage),
        heldout_sentences=measured.n_sentences,
        product=report.product if report else None, product_reason=report.product_reason if report else None,
        candidates=list(report.candidates) if report else [], candidate=lineage.candidate,
    )


def _lapt_facts(lapt: Artifact) -> dict[str, Any]:
    """What the card says of the LAPT behind the model (a finished run, or the checkpoint published)."""
    if lapt.stage == "lapt":
        record: LaptRecord | CheckpointRecord = LaptRecord.of(lapt)
        summary = record.model_dump()
    else:
        record = CheckpointRecord.of(lapt)
        summary = {"steps": record.step, **record.metrics}
    objective = lapt_objective(lapt.params)  # what it learned from: its own LM loss, or the source's states too
    facts = {"objective": f"{objective} ({LAPT_OBJECTIVES[objective].description})"}
    facts.update({k: summary.get(k) for k in ("steps", "tokens", "final_heldout_loss", "initial_heldout_loss",
                                              "precision", "device") if summary.get(k) is not None})
    facts.update({k: lapt.params.get("lapt", {}).get(k) for k in ("lr", "batch_size", "seq_len")
                  if lapt.params.get("lapt", {}).get(k) is not None})
    if isinstance(record, CheckpointRecord):
        facts["checkpoint_of_total_steps"] = record.total_steps
    if record.planned_minutes:  # a minutes budget: the cost behind the scores, as planned on the machine that trained
        facts["minutes_planned"] = record.planned_minutes
    if isinstance(record, LaptRecord) and record.work_seconds is not None:  # as measured, on the budget's clock
        on_cpu = str(record.device or "cpu").startswith("cpu")
        facts["cpu_minutes_trained" if on_cpu else "minutes_trained"] = round(record.work_seconds / 60, 1)
    return facts


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return int(value)
    return None
