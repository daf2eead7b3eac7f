"""Task specs → :class:`TaskData`: known datasets on the Hugging Face Hub, local copies, local folders.

A task spec is ``kind:dataset:lang`` (``ner:masakhaner2:swa``, ``nli:xnli:sw``, ``qa:tydiqa:sw``)
or ``kind:PATH`` (a folder holding ``train``/``dev``/``test`` files in the published format).

For ``kind:dataset:lang`` with a ``data_root``, a local copy laid out like ``../shared/data``
(``<root>/<kind>/<dataset>/<lang>/{train,dev,test}.<ext>``) is used when present; otherwise
the dataset is loaded from the Hub. Hub ids were chosen so that ``datasets`` >= 4 (which no
longer runs loading scripts) can read them: native Parquet repositories where they exist,
the Hub's automatic Parquet conversion (``refs/convert/parquet``) for script-based ones.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from focusflow.errors import InputError, UnavailableError
from focusflow.evaluation.downstream.datasets import (
    KINDS,
    NLI_LABELS,
    DataFormatError,
    NerExample,
    NliExample,
    TaskData,
    complete_splits,
    ner_label_set,
    qa_examples_from_records,
    read_conll,
    read_nli_tsv,
    read_squad_json,
)

log = logging.getLogger(__name__)

PARQUET_BRANCH = "refs/convert/parquet"

# ISO 639-1 ↔ 639-3 for the languages of the supported datasets (others pass through unchanged).
ISO3 = {
    "sw": "swa", "ha": "hau", "yo": "yor", "ig": "ibo", "am": "amh", "rw": "kin", "lg": "lug", "ny": "nya",
    "sn": "sna", "xh": "xho", "zu": "zul", "wo": "wol", "tn": "tsn", "ee": "ewe", "tw": "twi", "de": "deu",
    "en": "eng", "fr": "fra", "ar": "ara", "bg": "bul", "el": "ell", "es": "spa", "hi": "hin", "ru": "rus",
    "th": "tha", "tr": "tur", "ur": "urd", "vi": "vie", "zh": "zho", "bn": "ben", "fi": "fin", "id": "ind",
    "ja": "jpn", "ko": "kor", "te": "tel",
}
ISO1 = {three: one for one, three in ISO3.items()}
TYDIQA_NAMES = {"ar": "arabic", "bn": "bengali", "en": "english", "fi": "finnish", "id": "indonesian",
                "ja": "japanese", "ko": "korean", "ru": "russian", "sw": "swahili", "te": "telugu", "th": "thai"}


def language_forms(language: str) -> list[str]:
    """The code as given, then its ISO 639-1 and 639-3 forms (for folder and config lookups)."""
    code = language.strip().lower()
    forms = [code, ISO1.get(code, code), ISO3.get(code, code)]
    return list(dict.fromkeys(forms))


@dataclass(frozen=True)
class HubDataset:
    """Where a known dataset lives on the Hub and how its splits are named."""

    repo: str
    kind: str
    config: str | None = None  # format string with {iso1}/{iso3}
    data_dir: str | None = None  # format string, for Parquet-converted repositories
    revision: str | None = None
    splits: tuple[tuple[str, str], ...] = (("train", "train"), ("dev", "validation"), ("test", "test"))
    local_dirs: tuple[str, ...] = ()  # folder names of a local copy under <data_root>/<kind>/


KNOWN: dict[str, HubDataset] = {
    # Rahimi et al. (2019) balanced train/dev/test splits, native Parquet, one config per ISO 639-1 code.
    "wikiann": HubDataset("unimelb-nlp/wikiann", "ner", config="{iso1}", local_dirs=("wikiann", "panx")),
    # MasakhaNER 2.0 is script-based: read the Hub's Parquet conversion, one folder per ISO 639-3 code.
    "masakhaner2": HubDataset("masakhane/masakhaner2", "ner", data_dir="{iso3}", revision=PARQUET_BRANCH,
                              local_dirs=("masakhaner2", "masakhaner")),
    # GermEval 2014 (outer entity layer, BIO), script-based: Parquet conversion.
    "germeval14": HubDataset("GermanEval/germeval_14", "ner", revision=PARQUET_BRANCH,
                             local_dirs=("germeval14", "germeval_14", "germeval2014")),
    # XNLI with the machine-translated training set (translate-train): native Parquet, config per language.
    "xnli": HubDataset("facebook/xnli", "nli", config="{iso1}", local_dirs=("xnli",)),
    # TyDiQA GoldP = the "secondary_task" config; its validation split is the benchmark's test set.
    "tydiqa": HubDataset("google-research-datasets/tydiqa", "qa", config="secondary_task",
                         splits=(("train", "train"), ("test", "validation")),
                         local_dirs=("tydiqa-goldp", "tydiqa", "tydiqa_goldp")),
    # GermanQuAD: train + test, script-based: Parquet conversion.
    "germanquad": HubDataset("deepset/germanquad", "qa", revision=PARQUET_BRANCH,
                             splits=(("train", "train"), ("test", "test")), local_dirs=("germanquad",)),
}
ALIASES = {"masakhaner": "masakhaner2", "masakhaner-2": "masakhaner2", "panx": "wikiann", "pan-x": "wikiann",
           "germeval": "germeval14", "germeval_14": "germeval14", "germeval2014": "germeval14",
           "tydiqa-goldp": "tydiqa", "tydiqa_goldp": "tydiqa", "tydi": "tydiqa"}
FILE_EXTENSIONS = {"ner": (".txt", ".conll", ".iob2", ".bio", ".tsv"), "nli": (".tsv", ".txt"), "qa": (".json",)}
SPLIT_NAMES = {"train": ("train",), "dev": ("dev", "validation", "valid", "val"), "test": ("test",)}


@dataclass(frozen=True)
class TaskSpec:
    kind: str
    dataset: str  # a known dataset name, or the folder name for a path task
    language: str  # "" for a path task whose folder does not say
    path: Path | None = None
    text: str = ""

    @property
    def id(self) -> str:
        return self.text or f"{self.kind}:{self.dataset}:{self.language}"


def parse_task(text: str) -> TaskSpec:
    """``kind:dataset:lang`` or ``kind:PATH`` → :class:`TaskSpec` (raises ValueError saying what is wrong)."""
    kind, sep, rest = text.strip().partition(":")
    kind = kind.lower()
    if not sep or kind not in KINDS or not rest:
        raise InputError(f"task {text!r} must look like kind:dataset:lang or kind:PATH with kind in {KINDS}")
    candidate = Path(rest).expanduser()
    looks_like_path = candidate.exists() or "/" in rest or "\\" in rest or rest.startswith((".", "~"))
    if looks_like_path:
        if not candidate.is_dir():
            raise FileNotFoundError(f"task {text!r}: {candidate} is not a folder with train/dev/test files")
        return TaskSpec(kind, candidate.resolve().name, "", candidate.resolve(), text.strip())
    dataset, sep, language = rest.partition(":")
    dataset = ALIASES.get(dataset.lower(), dataset.lower())
    if not sep or not language:
        raise InputError(f"task {text!r}: a known dataset needs a language, e.g. {kind}:{dataset}:sw")
    if dataset not in KNOWN:
        known = sorted(name for name, info in KNOWN.items() if info.kind == kind)
        raise InputError(f"task {text!r}: unknown dataset {dataset!r}; known {kind} datasets: {known} "
                         f"(or give a folder: {kind}:PATH)")
    if KNOWN[dataset].kind != kind:
        raise InputError(f"task {text!r}: {dataset} is a {KNOWN[dataset].kind} dataset, not {kind}")
    return TaskSpec(kind, dataset, language.lower(), None, text.strip())


# --------------------------------------------------------------------------- local folders


def _find_split_file(folder: Path, kind: str, split: str) -> Path | None:
    for stem in SPLIT_NAMES[split]:
        for extension in FILE_EXTENSIONS[kind]:
            path = folder / f"{stem}{extension}"
            if path.is_file():
                return path
    return None


def load_folder(kind: str, folder: Path, name: str, language: str, split_seed: int = 0) -> TaskData:
    """Read ``train``/``dev``/``test`` files of one task from a folder and complete the splits."""
    files = {split: _find_split_file(folder, kind, split) for split in ("train", "dev", "test")}
    if not any(files.values()):
        wanted = ", ".join(f"{s}{{{','.join(FILE_EXTENSIONS[kind])}}}" for s in ("train", "dev", "test"))
        raise FileNotFoundError(f"{folder} holds no {kind} files; expected {wanted}")
    splits: dict[str, list[Any] | None] = {}
    notes: dict[str, str] = {}
    for split, path in files.items():
        if path is None:
            splits[split] = None
        elif kind == "ner":
            splits[split] = read_conll(path)
        elif kind == "nli":
            splits[split] = read_nli_tsv(path)
        else:
            examples, stats = read_squad_json(path)
            if not examples:
                log.warning("%s: none of its %d questions has a gold answer; ignoring it as unlabelled",
                            path, stats.questions)
                notes[split] = f"{path.name} ignored: 0 of {stats.questions} questions have a gold answer"
                splits[split] = None
                continue
            if stats.unanswered:
                log.warning("%s: %d of %d questions have no gold answer and are skipped", path,
                            stats.unanswered, stats.questions)
            splits[split] = examples
    if not any(splits.values()):
        raise DataFormatError(f"{folder}: no labelled {kind} data ({'; '.join(notes.values())})")
    train, dev, test, provenance = complete_splits(splits["train"], splits["dev"], splits["test"], split_seed)
    provenance = {split: f"{origin} [{folder}]" for split, origin in provenance.items()} | {
        f"note_{split}": note for split, note in notes.items()}
    return _task_data(kind, name, language, train, dev, test, provenance)


def _task_data(kind: str, name: str, language: str, train: list[Any], dev: list[Any], test: list[Any],
               provenance: dict[str, str]) -> TaskData:
    if kind == "ner":
        labels = ner_label_set(train, dev, test)
    elif kind == "nli":
        labels = list(NLI_LABELS)
    else:
        labels = []
    return TaskData(kind, name, language, train, dev, test, labels, provenance)


def local_copy(spec: TaskSpec, data_root: Path) -> Path | None:
    """``<data_root>/<kind>/<dataset>/<lang>`` if such a folder exists (any known folder/ISO spelling)."""
    info = KNOWN[spec.dataset]
    for folder_name in info.local_dirs or (spec.dataset,):
        for code in language_forms(spec.language):
            folder = Path(data_root) / spec.kind / folder_name / code
            if folder.is_dir():
                return folder
    return None


# --------------------------------------------------------------------------- the Hub


def _hub_split(info: HubDataset, language: str, split_name: str) -> Any:
    import datasets

    forms = {"iso1": ISO1.get(language, language), "iso3": ISO3.get(language, language)}
    kwargs: dict[str, Any] = {"split": split_name}
    if info.revision:
        kwargs["revision"] = info.revision
    if info.data_dir:
        kwargs["data_dir"] = info.data_dir.format(**forms)
    config = info.config.format(**forms) if info.config else None
    try:
        return datasets.load_dataset(info.repo, config, **kwargs)
    except Exception as exc:  # network, missing config, offline mode: all need the same advice
        raise UnavailableError(f"could not load {info.repo} (config={config}, split={split_name}) from the Hugging "
                           f"Face Hub: {type(exc).__name__}: {exc}. Offline? Pass --data-root with a local copy "
                           f"(<root>/{info.kind}/<dataset>/<lang>/...) or a folder task {info.kind}:PATH.") from exc


def _label_names(dataset: Any, column: str) -> list[str] | None:
    feature = dataset.features.get(column)
    inner = getattr(feature, "feature", feature)  # Sequence(ClassLabel) or List(ClassLabel) or ClassLabel
    return list(inner.names) if hasattr(inner, "names") else None


def _ner_from_hub(dataset: Any) -> list[NerExample]:
    names = _label_names(dataset, "ner_tags")
    examples = []
    for row in dataset:
        tags = [names[t] if names is not None else str(t) for t in row["ner_tags"]]
        if row["tokens"]:
            examples.append(NerExample(tuple(row["tokens"]), tuple(tags)))
    return examples


def _nli_from_hub(dataset: Any) -> list[NliExample]:
    names = _label_names(dataset, "label") or list(NLI_LABELS)
    return [NliExample(row["premise"], row["hypothesis"], names[row["label"]])
            for row in dataset if row["label"] is not None and 0 <= row["label"] < len(names)]


def load_hub(spec: TaskSpec, split_seed: int = 0) -> TaskData:
    info = KNOWN[spec.dataset]
    splits: dict[str, list[Any] | None] = {"train": None, "dev": None, "test": None}
    language = spec.language
    for ours, theirs in info.splits:
        dataset = _hub_split(info, language, theirs)
        if spec.kind == "ner":
            splits[ours] = _ner_from_hub(dataset)
        elif spec.kind == "nli":
            splits[ours] = _nli_from_hub(dataset)
        else:
            if spec.dataset == "tydiqa":
                prefix = TYDIQA_NAMES.get(ISO1.get(language, language), language) + "-"
                dataset = dataset.filter(lambda row, prefix=prefix: row["id"].startswith(prefix))
                if len(dataset) == 0:
                    raise InputError(f"TyDiQA GoldP has no {language!r} questions; languages: "
                                     f"{sorted(TYDIQA_NAMES)}")
            splits[ours] = qa_examples_from_records(dataset, f"{info.repo}:{theirs}")
    train, dev, test, provenance = complete_splits(splits["train"], splits["dev"], splits["test"], split_seed)
    provenance = {split: f"{origin} [{info.repo}{'@' + info.revision if info.revision else ''}]"
                  for split, origin in provenance.items()}
    return _task_data(spec.kind, spec.dataset, spec.language, train, dev, test, provenance)


def resolve_task(spec: TaskSpec | str, data_root: Path | None = None, split_seed: int = 0) -> TaskData:
    """Load a task's data: a folder task, a local copy under ``data_root``, or the Hub."""
    spec = parse_task(spec) if isinstance(spec, str) else spec
    if spec.path is not None:
        return load_folder(spec.kind, spec.path, spec.dataset, spec.language, split_seed)
    if data_root is not None:
        folder = local_copy(spec, Path(data_root))
        if folder is not None:
            return load_folder(spec.kind, folder, spec.dataset, spec.language, split_seed)
        log.warning("no local copy of %s under %s; trying the Hugging Face Hub", spec.id, data_root)
    return load_hub(spec, split_seed)
