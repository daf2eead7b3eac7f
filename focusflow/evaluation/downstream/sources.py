"""Task specs → :class:`TaskData`: known datasets on the Hugging Face Hub, local copies, local folders.

A task spec is ``kind:dataset:lang`` (``ner:masakhaner2:swa``, ``nli:xnli:sw``, ``qa:tydiqa:sw``,
``cls:sib200:sw``, ``cls:masakhanews:hau``) or ``kind:PATH`` (a folder holding ``train``/``dev``/``test``
files in the published format, or one labelled file that is split 70/10/20).

For ``kind:dataset:lang`` with a ``data_root``, a local copy laid out like ``../shared/data``
(``<root>/<kind>/<dataset>/<lang>/{train,dev,test}.<ext>``; SIB-200 folders are FLORES-200 codes,
``<root>/cls/sib200/swh_Latn/``) is used when present; otherwise
the dataset is loaded from the Hub. Hub ids were chosen so that ``datasets`` >= 4 (which no
longer runs loading scripts) can read them: native Parquet repositories where they exist,
the Hub's automatic Parquet conversion (``refs/convert/parquet``) for script-based ones.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from focusflow.corpus.io import compression_of, uncompressed_name
from focusflow.corpus.sources import hub_offline
from focusflow.errors import FocusflowError, InputError, UnavailableError
from focusflow.evaluation.downstream.datasets import (
    NLI_LABELS,
    ClsExample,
    DataFormatError,
    NerExample,
    NliExample,
    QaExample,
    QaReadStats,
    TaskData,
    complete_splits,
    data_suffix,
    nli_languages,
    qa_examples_from_records,
)
from focusflow.evaluation.downstream.kinds import KIND_NAMES, KINDS, task_kind

log = logging.getLogger(__name__)

PARQUET_BRANCH = "refs/convert/parquet"

# FLORES-200 (SIB-200) names individual languages where ISO 639-3 has the macrolanguage
FLORES_LANGUAGE = {"swa": "swh", "ara": "arb", "fas": "pes", "msa": "zsm", "lav": "lvs", "orm": "gaz", "aze": "azj",
                   "uzb": "uzn", "mon": "khk", "nep": "npi", "sqi": "als", "yid": "ydd", "kur": "kmr", "pus": "pbt",
                   "grn": "gug", "mlg": "plt", "que": "quy", "est": "est", "zho": "zho"}


@lru_cache(maxsize=1)
def _alpha_codes() -> tuple[dict[str, str], dict[str, str]]:
    """ISO 639-1 → 639-3 (terminological) for every two-letter code, and back (the bibliographic ``ger`` too), from
    langcodes' tables: no code is replaced by a newer one (Tagalog's ``tl`` stays ``tl``, WikiANN's config)."""
    import langcodes
    from langcodes.data_dicts import LANGUAGE_ALPHA3, LANGUAGE_ALPHA3_BIBLIOGRAPHIC

    forward = {two: three for two, three in LANGUAGE_ALPHA3.items() if len(two) == 2}
    # a language with a withdrawn code beside its current one (in/id, iw/he, jw/jv, ji/yi) goes back to the current
    current = sorted(forward.items(), key=lambda item: langcodes.standardize_tag(item[0]) == item[0])
    back = {three: two for two, three in current}
    back |= {three: two for two, three in LANGUAGE_ALPHA3_BIBLIOGRAPHIC.items() if len(two) == 2 and three not in back}
    return forward, back


def iso3(code: str) -> str:
    """The ISO 639-3 form of a two-letter code (``sw`` → ``swa``, ``it`` → ``ita``); any other code unchanged."""
    return _alpha_codes()[0].get(code.lower(), code)


def iso1(code: str) -> str:
    """The ISO 639-1 form of a three-letter code that has one (``swa`` → ``sw``); any other code unchanged (``swh``,
    an individual language FLORES names)."""
    return _alpha_codes()[1].get(code.lower(), code)


TYDIQA_NAMES = {"ar": "arabic", "bn": "bengali", "en": "english", "fi": "finnish", "id": "indonesian",
                "ja": "japanese", "ko": "korean", "ru": "russian", "sw": "swahili", "te": "telugu", "th": "thai"}


def language_forms(language: str) -> list[str]:
    """The code as given, then its ISO 639-1 and 639-3 forms (for folder and config lookups)."""
    code = language.strip().lower()
    forms = [code, iso1(code), iso3(code)]
    return list(dict.fromkeys(forms))


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


@dataclass(frozen=True)
class HubDataset:
    """Where a known dataset lives on the Hub and how its splits are named."""

    repo: str
    kind: str
    rows: Callable[[Any, TaskSpec], list[Any]]  # one split of the Hub's layout → our examples
    config: str | None = None  # format string with {iso1}/{iso3}/{code}
    data_dir: str | None = None  # format string, for Parquet-converted repositories
    revision: str | None = None
    splits: tuple[tuple[str, str], ...] = (("train", "train"), ("dev", "validation"), ("test", "test"))
    local_dirs: tuple[str, ...] = ()  # folder names of a local copy under <data_root>/<kind>/
    # the dataset's own language code ({code}), if it has one: (language, data_root, folders) -> code, as flores_code
    code: Callable[[str, Path | None, Iterable[str] | None], str] | None = None
    # a local file's examples of the task's language, where the published file holds several: (examples, spec) -> kept
    local_rows: Callable[[list[Any], TaskSpec], list[Any]] | None = None


# --------------------------------------------------------------------------- the Hub's layouts


def _label_names(dataset: Any, column: str) -> list[str] | None:
    feature = dataset.features.get(column)
    inner = getattr(feature, "feature", feature)  # Sequence(ClassLabel) or List(ClassLabel) or ClassLabel
    return list(inner.names) if hasattr(inner, "names") else None


def _ner_from_hub(dataset: Any, spec: TaskSpec) -> list[NerExample]:
    names = _label_names(dataset, "ner_tags")
    examples = []
    for row in dataset:
        if names is None and any(not isinstance(tag, str) for tag in row["ner_tags"]):
            raise DataFormatError(f"{spec.id}: the Hub data's ner_tags are numbers without their names (its "
                                  "features hold no ClassLabel: a copy without the dataset's metadata); use the "
                                  "dataset's own repository or a local copy with BIO tags")
        tags = [names[t] if names is not None else t for t in row["ner_tags"]]
        if row["tokens"]:
            examples.append(NerExample(tuple(row["tokens"]), tuple(tags)))
    return examples


def _nli_from_hub(dataset: Any, spec: TaskSpec) -> list[NliExample]:
    names = _label_names(dataset, "label") or list(NLI_LABELS)
    return [NliExample(row["premise"], row["hypothesis"], names[row["label"]])
            for row in dataset if row["label"] is not None and 0 <= row["label"] < len(names)]


def _qa_from_hub(dataset: Any, spec: TaskSpec) -> list[QaExample]:
    stats = QaReadStats()
    examples = qa_examples_from_records(dataset, f"{spec.dataset}:{spec.language}", stats)
    stats.warn(spec.id)
    return examples


def _tydiqa_prefix(spec: TaskSpec) -> str:
    """The id prefix of a TyDiQA question of the task's language (``swahili-``)."""
    return TYDIQA_NAMES.get(iso1(spec.language), spec.language) + "-"


def _tydiqa_local(examples: list[QaExample], spec: TaskSpec) -> list[QaExample]:
    """The task language's questions of a local TyDiQA file that holds several (the published
    ``tydiqa-goldp-v1.1-train.json`` holds all nine); a file without language-named ids is kept whole."""
    prefixes = tuple(f"{name}-" for name in TYDIQA_NAMES.values())
    if not any(example.id.startswith(prefixes) for example in examples):
        return examples
    kept = [example for example in examples if example.id.startswith(_tydiqa_prefix(spec))]
    if not kept:
        raise InputError(f"the local TyDiQA file holds no {spec.language!r} questions (ids {_tydiqa_prefix(spec)}…)")
    return kept


def _xnli_local(examples: list[NliExample], spec: TaskSpec) -> list[NliExample]:
    """The task language's pairs of a local XNLI 1.0 file (``xnli.dev.tsv`` holds all fifteen, by its ``language``
    column); a file without that column is kept whole."""
    languages = nli_languages(examples)
    if not languages:
        return examples
    wanted = {spec.language.lower(), iso1(spec.language.lower())}
    kept = [example for example in examples if example.language.lower() in wanted]
    if not kept:
        raise InputError(f"the local XNLI file holds no {spec.language!r} pairs (its language column: "
                         f"{', '.join(languages[:15])})")
    return kept


def _refuse_several_nli_languages(splits: Mapping[str, list[Any] | None], folder: Path) -> None:
    """A folder task (``nli:PATH``) of XNLI 1.0's files of several languages would train and test on all of them."""
    languages = sorted({language for examples in splits.values() for language in nli_languages(examples or [])})
    if len(languages) > 1:
        raise DataFormatError(f"{folder} holds XNLI rows of {len(languages)} languages ({', '.join(languages[:15])}): "
                              "use nli:xnli:<language> with evaluation.data_root (it keeps the task's language), or "
                              "keep one language's rows in the task's files")


def _warn_several_tydiqa_languages(splits: Mapping[str, list[Any] | None], folder: Path) -> None:
    """A folder task (``qa:PATH``) holding TyDiQA's published files of every language trains and tests on all of them
    (only ``qa:tydiqa:LANG`` keeps its language's questions): said, with the way to one language."""
    names = {name: code for code, name in TYDIQA_NAMES.items()}
    found = {names[prefix] for examples in splits.values() for example in examples or ()
             if (prefix := str(getattr(example, "id", "")).partition("-")[0]) in names}
    if len(found) > 1:
        log.warning("%s: its questions are TyDiQA's of %d languages (%s), all read as one task; for one language's "
                    "use qa:tydiqa:<language> with evaluation.data_root, or keep that language's file only", folder,
                    len(found), ", ".join(sorted(found)))


def _tydiqa_from_hub(dataset: Any, spec: TaskSpec) -> list[QaExample]:
    """TyDiQA GoldP mixes its languages in one config: keep the questions whose id names the language."""
    language = spec.language
    prefix = _tydiqa_prefix(spec)
    dataset = dataset.filter(lambda row, prefix=prefix: row["id"].startswith(prefix))
    if len(dataset) == 0:
        raise InputError(f"TyDiQA GoldP has no {language!r} questions; languages: {sorted(TYDIQA_NAMES)}")
    return _qa_from_hub(dataset, spec)


def _cls_from_hub(dataset: Any, label_column: str, text_columns: tuple[str, ...]) -> list[ClsExample]:
    """Rows → (text, label); a ClassLabel column gives its names, a string column its values; the text columns
    are joined with a newline as the local reader joins them (MasakhaNEWS: headline, then text)."""
    names = _label_names(dataset, label_column)
    examples = []
    for row in dataset:
        label = row[label_column]
        if label is None or (names is not None and not 0 <= label < len(names)):
            continue
        text = "\n".join(str(row[c]).strip() for c in text_columns if row.get(c) and str(row[c]).strip())
        if text:
            examples.append(ClsExample(text, names[label] if names is not None else str(label).strip()))
    return examples


def _sib200_from_hub(dataset: Any, spec: TaskSpec) -> list[ClsExample]:
    return _cls_from_hub(dataset, "category", ("text",))


def _masakhanews_from_hub(dataset: Any, spec: TaskSpec) -> list[ClsExample]:
    return _cls_from_hub(dataset, "label", ("headline", "text"))


def flores_code(language: str, data_root: Path | None = None, folders: Iterable[str] | None = None) -> str:
    """A FLORES-200 code (``swh_Latn``) from ISO 639-1/3 (``sw``, ``swa``, ``sn``, ``sna``) or the code itself.

    The script comes from the local copy's folder names under ``data_root`` when one is given, else from
    the Hub's list of SIB-200 configs; a language written in several scripts needs its script (``ace_Latn``).
    ``folders``: the names to choose among instead (the local copy's folders a run recorded it read): neither the
    disk nor the Hub is asked."""
    if "_" in language:
        return language
    code = language.lower()
    code = iso3(code)
    code = FLORES_LANGUAGE.get(code, code)
    candidates: list[str] = []
    if folders is not None:
        candidates = [name for name in folders if name.startswith(f"{code}_")]
    elif data_root is not None:
        for folder_name in KNOWN["sib200"].local_dirs:
            candidates += sorted(p.name for p in (Path(data_root) / "cls" / folder_name).glob(f"{code}_*") if p.is_dir())
    else:
        candidates = [name for name in _hub_configs(KNOWN["sib200"]) if name.startswith(f"{code}_")]
    candidates = list(dict.fromkeys(candidates))
    if len(candidates) > 1:
        raise InputError(f"SIB-200 has {language!r} in several scripts ({', '.join(candidates)}); name one, "
                         f"e.g. cls:sib200:{candidates[0]}")
    if not candidates:
        where = f" under {data_root}" if data_root is not None else ""
        raise InputError(f"SIB-200 has no language {language!r}{where} (looked for {code}_<Script>); give its "
                         "FLORES-200 code, e.g. cls:sib200:swh_Latn")
    return candidates[0]


def _hub_configs(info: HubDataset) -> list[str]:
    """The configurations of a Parquet-converted Hub dataset: the folders of its conversion branch."""
    try:
        from huggingface_hub import HfApi

        entries = HfApi().list_repo_tree(info.repo, repo_type="dataset", revision=info.revision or None)
        return sorted(entry.path for entry in entries if not getattr(entry, "size", None) and "/" not in entry.path)
    except Exception as exc:  # network, offline mode: the same advice as a failed download
        raise UnavailableError(f"could not list the languages of {info.repo} on the Hugging Face Hub "
                               f"({type(exc).__name__}: {exc}). Offline? Pass --data-root with a local copy "
                               f"(<root>/{info.kind}/<dataset>/<code>_<Script>/...) or a folder task "
                               f"{info.kind}:PATH.") from exc


KNOWN: dict[str, HubDataset] = {
    # Rahimi et al. (2019) balanced train/dev/test splits, native Parquet, one config per ISO 639-1 code.
    "wikiann": HubDataset("unimelb-nlp/wikiann", "ner", _ner_from_hub, config="{iso1}", local_dirs=("wikiann", "panx")),
    # MasakhaNER 2.0 is script-based: read the Hub's Parquet conversion, one folder per ISO 639-3 code.
    "masakhaner2": HubDataset("masakhane/masakhaner2", "ner", _ner_from_hub, data_dir="{iso3}", revision=PARQUET_BRANCH,
                              local_dirs=("masakhaner2", "masakhaner-2")),
    # MasakhaNER 1.0 (Adelani et al. 2021): ten languages, other sentences and sizes than 2.0 (swa: 2,109/300/604
    # against 6,593/942/1,883), amh only here; never read in place of 2.0, nor 2.0 in its place.
    "masakhaner": HubDataset("masakhane/masakhaner", "ner", _ner_from_hub, data_dir="{iso3}", revision=PARQUET_BRANCH,
                             local_dirs=("masakhaner", "masakhaner1", "masakhaner-1")),
    # GermEval 2014 (outer entity layer, BIO), script-based: Parquet conversion.
    "germeval14": HubDataset("GermanEval/germeval_14", "ner", _ner_from_hub, revision=PARQUET_BRANCH,
                             local_dirs=("germeval14", "germeval_14", "germeval2014")),
    # XNLI with the machine-translated training set (translate-train): native Parquet, config per language.
    "xnli": HubDataset("facebook/xnli", "nli", _nli_from_hub, config="{iso1}", local_dirs=("xnli",),
                       local_rows=_xnli_local),
    # TyDiQA GoldP = the "secondary_task" config; its validation split is the benchmark's test set.
    "tydiqa": HubDataset("google-research-datasets/tydiqa", "qa", _tydiqa_from_hub, config="secondary_task",
                         splits=(("train", "train"), ("test", "validation")),
                         local_dirs=("tydiqa-goldp", "tydiqa", "tydiqa_goldp"), local_rows=_tydiqa_local),
    # GermanQuAD: train + test, script-based: Parquet conversion.
    "germanquad": HubDataset("deepset/germanquad", "qa", _qa_from_hub, revision=PARQUET_BRANCH,
                             splits=(("train", "train"), ("test", "test")), local_dirs=("germanquad",)),
    # SIB-200 (Adelani et al. 2024): 7 topics over FLORES-200 sentences, one config per FLORES code (swh_Latn);
    # script-based on the Hub: its Parquet conversion. Local copies: the published TSVs + labels.txt.
    "sib200": HubDataset("Davlan/sib200", "cls", _sib200_from_hub, data_dir="{code}", revision=PARQUET_BRANCH,
                         local_dirs=("sib200", "sib-200"), code=flores_code),
    # MasakhaNEWS (Adelani et al. 2023): news topics, headline + text, one folder per ISO 639-3 code.
    "masakhanews": HubDataset("masakhane/masakhanews", "cls", _masakhanews_from_hub, data_dir="{iso3}",
                              revision=PARQUET_BRANCH, local_dirs=("masakhanews", "masakhane-news")),
}
ALIASES = {"sib-200": "sib200", "sib": "sib200", "masakhane-news": "masakhanews",
           "masakhaner-2": "masakhaner2", "masakhaner1": "masakhaner", "masakhaner-1": "masakhaner",
           "panx": "wikiann", "pan-x": "wikiann",
           "germeval": "germeval14", "germeval_14": "germeval14", "germeval2014": "germeval14",
           "tydiqa-goldp": "tydiqa", "tydiqa_goldp": "tydiqa", "tydi": "tydiqa"}
SPLIT_NAMES = {"train": ("train",), "dev": ("dev", "validation", "valid", "val"), "test": ("test",)}
_NAME_WORDS = re.compile(r"[-_. ]+")  # the words of a file's name: hau_train, daily-news-dikgang-dev, test_v0.2
SPLIT_FILE_STEMS = frozenset(stem for stems in SPLIT_NAMES.values() for stem in stems)  # a file's name without ending

#: What a task's data means, where that changed, by task kind or by ``kind:dataset``: in the keys of the stages that
#: read such a task (downstream results, decontamination, the reading and other-domain texts), so those are made
#: again, and no other key moves. qa 2: questions that shared an id were scored as one, and a local TyDiQA file of
#: every language trained on all of them; ner:masakhaner 2: the name means MasakhaNER 1.0, no longer 2.0; qa 3:
#: contexts and answers in one Unicode form (NFC), which some published contexts are not. NER's reading of converted
#: files (a tab-separated word with a space, a no-break space after a tag, old-Mac line ends) changed without a
#: version: the published files (MasakhaNER, WikiANN, CoNLL) read exactly as before, and the decontamination under
#: every NER run's corpus would otherwise be made again. nli 2 and qa 4: a split made here keeps a premise's
#: hypotheses and a passage's questions together (XNLI's dev file alone, split, held test pairs whose premise was in
#: train, their label inferable from its two training pairs).
TASK_VERSIONS = {"nli": 2, "qa": 4, "ner:masakhaner": 2}


def task_versions(tasks: Iterable[str]) -> dict[str, int]:
    """The entries of ``TASK_VERSIONS`` these tasks name (read from the text alone: a path need not exist)."""
    found: dict[str, int] = {}
    for task in tasks:
        kind, _, rest = task.strip().partition(":")
        dataset = rest.partition(":")[0].lower()
        named = f"{kind.lower()}:{ALIASES.get(dataset, dataset)}"
        for entry in (kind.lower(), named):
            if entry in TASK_VERSIONS:
                found[entry] = TASK_VERSIONS[entry]
    return dict(sorted(found.items()))


def parse_task(text: str) -> TaskSpec:
    """``kind:dataset:lang`` or ``kind:PATH`` → :class:`TaskSpec`; an ``InputError`` says what is wrong (a
    FileNotFoundError, a PATH that is not there)."""
    kind, sep, rest = text.strip().partition(":")
    kind = kind.lower()
    if not sep or kind not in KINDS or not rest:
        raise InputError(f"task {text!r} must look like kind:dataset:lang or kind:PATH with kind in {KIND_NAMES}")
    candidate = Path(rest).expanduser()
    looks_like_path = candidate.exists() or "/" in rest or "\\" in rest or rest.startswith((".", "~"))
    if looks_like_path:
        if candidate.is_file():
            return TaskSpec(kind, candidate.stem, "", candidate.resolve(), text.strip())
        if not candidate.is_dir():
            raise FileNotFoundError(f"task {text!r}: {candidate} is not a folder with train/dev/test files "
                                    "(or one labelled file)")
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
    language = language.strip()
    return TaskSpec(kind, dataset, language if "_" in language else language.lower(), None, text.strip())


# --------------------------------------------------------------------------- local folders


def _find_split_file(folder: Path, kind: str, split: str) -> Path | None:
    """``train.tsv`` (any case), else the one file whose name holds the split as a word, as published files are
    named: ``train_clean.tsv``, ``hau_train.tsv``, ``daily-news-dikgang-dev.tsv``, ``test_v0.2.csv``."""
    extensions = KINDS[kind].file_extensions
    files = [path for path in sorted(folder.iterdir()) if path.is_file() and not path.name.startswith(".")]

    def stem_of(path: Path) -> str | None:
        name = uncompressed_name(path.name).lower()  # train.txt.gz reads as train.txt does
        for extension in sorted(extensions, key=len, reverse=True):
            if name.endswith(extension) and (extension or "." not in name):
                return name[:len(name) - len(extension)] if extension else name
        return None

    stems = {path: stem for path in files if (stem := stem_of(path)) is not None}
    for stem in SPLIT_NAMES[split]:
        for extension in extensions:  # the table's order: train.txt before train.tsv
            exact = [path for path, found in stems.items() if found == stem and data_suffix(path) == extension]
            if exact:
                return exact[0]
    words = {path: set(_NAME_WORDS.split(stem)) for path, stem in stems.items()}
    # a name holding the words of two splits (train_dev.tsv) is no one split's: never read as two
    named = [path for path, parts in words.items() if parts & set(SPLIT_NAMES[split])
             and not any(parts & set(names) for other, names in SPLIT_NAMES.items() if other != split)]
    # a published file beside its unpacked copy (hau_train.txt.gz, hau_train.txt): the copy
    named = [path for path in named if not (compression_of(path.name) and path.with_name(
        uncompressed_name(path.name)) in named)]
    if len(named) > 1:
        raise InputError(f"{folder}: {len(named)} files could be the {split} split ({', '.join(p.name for p in named)}); "
                         f"name one {SPLIT_NAMES[split][0]}{extensions[0]}")
    return named[0] if named else None


def load_folder(kind: str, folder: Path, name: str, language: str, split_seed: int = 0,
                keep: Callable[[list[Any]], list[Any]] | None = None) -> TaskData:
    """Read ``train``/``dev``/``test`` files of one task from a folder (or one labelled file to split) and
    complete the splits; the kind's table entry says how to read a file and where the labels come from. ``keep``:
    the examples of the task's language, for a published file that holds several."""
    info = task_kind(kind)
    if folder.is_file():
        files: dict[str, Path | None] = {"train": folder, "dev": None, "test": None}
        folder = folder.parent
    else:
        files = {split: _find_split_file(folder, kind, split) for split in ("train", "dev", "test")}
    if not any(files.values()):
        wanted = ", ".join(f"{s}{{{','.join(info.file_extensions)}}}" for s in ("train", "dev", "test"))
        raise InputError(f"{folder} holds no {kind} files; expected {wanted}")
    splits: dict[str, list[Any] | None] = {}
    notes: dict[str, str] = {}
    for split, path in files.items():
        splits[split], note = info.read_split(path) if path is not None else (None, None)
        if keep is not None and splits[split]:
            splits[split] = keep(splits[split])
        if note:
            notes[split] = note
    if keep is None:
        _warn_several_tydiqa_languages(splits, folder)
        _refuse_several_nli_languages(splits, folder)
    if not any(splits.values()):
        raise DataFormatError(f"{folder}: no labelled {kind} data ({'; '.join(notes.values())})")
    if not splits["train"] and "train" in notes and any(splits[name] for name in ("dev", "test")):
        raise DataFormatError(f"{folder}: no training split ({notes['train']})")
    train, dev, test, provenance = complete_splits(splits["train"], splits["dev"], splits["test"], split_seed,
                                                   KINDS[kind].split_group)
    provenance = {split: f"{origin} [{folder}]" for split, origin in provenance.items()} | {
        f"note_{split}": note for split, note in notes.items()}
    return _task_data(kind, name, language, train, dev, test, provenance, folder)


def _task_data(kind: str, name: str, language: str, train: list[Any], dev: list[Any], test: list[Any],
               provenance: dict[str, str], folder: Path | None = None) -> TaskData:
    labels = KINDS[kind].label_set({"train": train, "dev": dev, "test": test}, folder)
    return TaskData(kind, name, language, train, dev, test, labels, provenance)


def local_copy(spec: TaskSpec, data_root: Path) -> Path | None:
    """``<data_root>/<kind>/<dataset>/<lang>`` if such a folder exists (any known folder/ISO spelling; the
    dataset's own code, such as SIB-200's ``swh_Latn``)."""
    info = KNOWN[spec.dataset]
    codes = language_forms(spec.language)
    if info.code is not None:
        try:
            codes.append(info.code(spec.language, Path(data_root), None))
        except InputError:
            pass  # no local folder under the dataset's code either: the caller tries the Hub
    for folder_name in info.local_dirs or (spec.dataset,):
        for code in codes:
            folder = Path(data_root) / spec.kind / folder_name / code
            if folder.is_dir():
                return folder
    return None


# --------------------------------------------------------------------------- the Hub


def _hub_split(info: HubDataset, language: str, split_name: str) -> Any:
    import datasets

    forms = _language_forms_of(info, language)
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


def load_hub(spec: TaskSpec, split_seed: int = 0) -> TaskData:
    info = KNOWN[spec.dataset]
    splits: dict[str, list[Any] | None] = {"train": None, "dev": None, "test": None}
    for ours, theirs in info.splits:
        splits[ours] = info.rows(_hub_split(info, spec.language, theirs), spec)
    train, dev, test, provenance = complete_splits(splits["train"], splits["dev"], splits["test"], split_seed,
                                                   KINDS[spec.kind].split_group)
    provenance = {split: f"{origin} [{info.repo}{'@' + info.revision if info.revision else ''}]"
                  for split, origin in provenance.items()}
    return _task_data(spec.kind, spec.dataset, spec.language, train, dev, test, provenance)


def resolve_task(spec: TaskSpec | str, data_root: Path | None = None, split_seed: int = 0) -> TaskData:
    """Load a task's data: a folder task, a local copy under ``data_root``, or the Hub (probed once first, so that
    an unreachable Hub is one line at once, not a storm of retried downloads)."""
    spec = parse_task(spec) if isinstance(spec, str) else spec
    if spec.path is not None:
        return load_folder(spec.kind, spec.path, spec.dataset, spec.language, split_seed)
    if data_root is None:
        check_hub_serves(spec)
        return load_hub(spec, split_seed)
    folder = local_copy(spec, Path(data_root))
    if folder is not None:
        rows = KNOWN[spec.dataset].local_rows
        return load_folder(spec.kind, folder, spec.dataset, spec.language, split_seed,
                           keep=None if rows is None else lambda examples: rows(examples, spec))
    missing = missing_local_copy(spec, Path(data_root))  # probes the Hub: an error when it cannot serve the task
    log.warning("%s; reading it from the Hugging Face Hub", missing)
    try:
        return load_hub(spec, split_seed)
    except (UnavailableError, InputError) as exc:
        raise UnavailableError(f"{missing}, and the Hugging Face Hub did not give it either: "
                               f"{str(exc).split(' Offline?')[0]}") from None


def missing_local_copy(spec: TaskSpec, data_root: Path) -> str | None:
    """None when ``data_root`` holds the task; else what is missing, once the Hub was found to serve it; an
    InputError when nothing can serve it (an unknown language code, the Hub switched off, unreachable, or without
    this language): the check a run's plan makes before any stage."""
    if local_copy(spec, data_root) is not None:
        return None
    missing = _no_local_copy(spec, data_root)
    if "_" not in spec.language:  # a dataset's own code (swh_Latn) is the dataset's to check; an ISO code here
        from focusflow.languages import LanguageError, normalize_language

        try:
            normalize_language(spec.language)
        except LanguageError as exc:
            raise InputError(f"task {spec.id!r}: {exc} ({missing})") from None
    if hub_offline():
        raise InputError(f"{missing}; the Hugging Face Hub is switched off here (HF_HUB_OFFLINE / "
                         "HF_DATASETS_OFFLINE): add the folder, or name a task the copy holds")
    try:
        check_hub_serves(spec)
    except FocusflowError as exc:
        raise InputError(f"{missing}, and {exc}") from None
    return missing


#: Seconds the one probe of the Hub may take (``check_hub_serves``): a plan check, not a download.
HUB_PROBE_TIMEOUT_S = 10.0


def check_hub_serves(spec: TaskSpec) -> None:
    """Whether the Hub serves ``spec``'s data, asked once and without retries (the repository, and the language's
    folder where the dataset has one per language); an error line saying why not. Offline mode is not asked."""
    info = KNOWN[spec.dataset]
    advice = (f"add a local copy (--data-root / evaluation.data_root: <root>/{info.kind}/<dataset>/<lang>/...) or "
              f"give a folder task {info.kind}:PATH")
    if hub_offline():
        raise InputError(f"the Hugging Face Hub is switched off here (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE) and "
                         f"{spec.id} has no local copy: {advice}")
    from huggingface_hub import HfApi
    from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None)  # read now: a test or a mirror may set it late
    try:
        api.dataset_info(info.repo, revision=info.revision, timeout=HUB_PROBE_TIMEOUT_S)
        if info.data_dir:
            folder = info.data_dir.format(**_language_forms_of(info, spec.language))
            next(iter(api.list_repo_tree(info.repo, folder, repo_type="dataset", revision=info.revision)), None)
    except (EntryNotFoundError, RevisionNotFoundError, RepositoryNotFoundError) as exc:
        raise InputError(f"the Hugging Face Hub's {info.repo} has no data for {spec.language!r} "
                         f"({type(exc).__name__}); check the language code, or {advice}") from None
    except FocusflowError:
        raise
    except Exception as exc:  # DNS, refused, timeout, proxy: one line, no retries
        reason = " ".join(str(exc).split())[:160]
        if cached_locally(info.repo):  # an earlier download: `datasets` reads it without the Hub
            log.warning("the Hugging Face Hub cannot be reached for %s (%s); reading its local cache of %s",
                        spec.id, reason, info.repo)
            return
        raise UnavailableError(f"the Hugging Face Hub cannot be reached for {spec.id} ({type(exc).__name__}: "
                               f"{reason}), and no local cache of {info.repo} was found: {advice}") from None


def cached_locally(repo: str) -> bool:
    """Whether this machine holds an earlier download of the dataset ``repo`` (the Hub's file cache, or the
    ``datasets`` cache): a run offline can still read it."""
    from huggingface_hub import constants

    hub = Path(os.environ.get("HF_HUB_CACHE") or constants.HF_HUB_CACHE) / f"datasets--{repo.replace('/', '--')}"
    datasets_home = Path(os.environ.get("HF_DATASETS_CACHE")
                         or Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface") / "datasets")
    return hub.is_dir() or any(datasets_home.glob(f"{repo.replace('/', '___')}*"))


def _language_forms_of(info: HubDataset, language: str, folders: Iterable[str] | None = None) -> dict[str, str]:
    """The names a Hub layout spells ``language`` with: ``{iso1}``, ``{iso3}`` and the dataset's own ``{code}``.

    ``folders``: find the dataset's code offline, in the language itself or among these folder names (a local copy's,
    as a run recorded them); a code found in neither is left out rather than asked of the Hub."""
    forms = {"iso1": iso1(language), "iso3": iso3(language)}
    if info.code is not None:
        if folders is None:
            forms["code"] = info.code(language, None, None)
        else:
            try:
                forms["code"] = info.code(language, None, list(folders))
            except InputError:
                pass  # not derivable without the Hub: the placeholder stays unfilled
    return forms


def hub_layout_name(spec: TaskSpec, folders: Iterable[str] = ()) -> str | None:
    """A known dataset's Hub config (or data folder) for ``spec``, found without the network, for a model card.

    The ISO forms of its language fill ``{iso1}``/``{iso3}``; the dataset's own ``{code}`` (SIB-200's ``swh_Latn``)
    comes from the spec when it names it, else from ``folders`` (the local copy a run read, :func:`provenance_folders`).
    None when a placeholder cannot be filled that way: never a guess, never a question to the Hub."""
    info = KNOWN[spec.dataset]
    template = info.config or info.data_dir
    if template is None:
        return None
    try:
        return template.format(**_language_forms_of(info, spec.language, folders)) or None
    except KeyError:  # a placeholder nothing offline fills
        return None


def provenance_folders(provenance: Mapping[str, str]) -> list[str]:
    """The names of the local folders a task's splits were read from, as :func:`load_folder` records them
    (``test [<folder>]``); a split read from the Hub names its repository (:func:`load_hub`), not a folder."""
    repositories = {info.repo for info in KNOWN.values()}
    names = []
    for origin in provenance.values():
        where = re.search(r"\[([^\]]+)\]", str(origin))
        if where is not None and where.group(1).split("@")[0] not in repositories:
            names.append(Path(where.group(1)).name)
    return list(dict.fromkeys(names))


def task_language(spec: TaskSpec) -> str | None:
    """The language code of a known dataset's task, without a dataset's script (FLORES' ``swh_Latn`` → ``swh``;
    FLORES' individual-language codes back to the macrolanguage's, ``gaz`` → ``orm``); None for a folder task,
    which says none."""
    if spec.path is not None or not spec.language:
        return None
    code = spec.language.split("_")[0].lower()
    return {flores: iso3 for iso3, flores in FLORES_LANGUAGE.items()}.get(code, code)


def _no_local_copy(spec: TaskSpec, data_root: Path) -> str:
    """What a local copy lacks, naming the languages it does hold (so a typo or a missing language is plain)."""
    info = KNOWN[spec.dataset]
    folders = [data_root / spec.kind / name for name in info.local_dirs or (spec.dataset,)]
    held = sorted({p.name for folder in folders if folder.is_dir() for p in folder.iterdir() if p.is_dir()})
    shown = ", ".join(held[:12]) + (f" and {len(held) - 12} more" if len(held) > 12 else "")
    return (f"no local copy of {spec.id} under {data_root} (looked in {folders[0]}/<language>/"
            + (f"; it holds {shown})" if held else "; there is no such folder)"))
