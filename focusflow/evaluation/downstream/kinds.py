"""The task kinds, in one table: what model class each fine-tunes, how its files are read, its label
set, its adapter, its defaults and its main metric. A new kind is one :class:`TaskKind` entry and
its adapter module; the runner, the task parser, the folder reader and decontamination read this table.

Defaults follow the FOCUS paper's Table 6 (DESIGN.md §5) where it states them: XNLI lr 2e-5, 2 epochs;
QA lr 5e-5, sequence length 384; WikiANN lr 5e-5; MasakhaNER lr 2e-5; linear schedule, 10% warmup, dev
evaluation every 5% of the steps. The rest is this module's choice: NER 10 epochs, QA 3, and for
sentence classification (which the paper does not run) lr 3e-5 over 10 epochs at 128 sub-tokens, since
SIB-200 trains on 701 sentences (22 steps an epoch at batch 32). Every value can be overridden per call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any

from focusflow.errors import InputError
from focusflow.evaluation.downstream.base import TaskAdapter
from focusflow.evaluation.downstream.datasets import (
    NLI_LABELS,
    ClsExample,
    DataFormatError,
    Example,
    NerExample,
    NliExample,
    QaExample,
    TaskData,
    check_labels,
    ner_label_set,
    read_cls_split,
    read_conll,
    read_labels_file,
    read_nli_tsv,
    read_squad_json,
)

log = logging.getLogger(__name__)

Splits = Mapping[str, list[Any]]
LABELS_FILE = "labels.txt"


@dataclass(frozen=True)
class TaskKind:
    """One kind of downstream task."""

    name: str
    description: str
    example_type: type  # the example dataclass of this kind (datasets.py)
    model_class: str  # the transformers Auto class of the task model
    make_adapter: Callable[[TaskData, Any, Any, Mapping[str, Any], str], TaskAdapter]  # data, tokenizer, config, …
    defaults: Mapping[str, Any]  # lr, epochs, max_length (and what the adapter reads, e.g. stride)
    main_metric: str
    file_extensions: tuple[str, ...]
    read_split: Callable[[Path], tuple[list[Any] | None, str | None]]  # examples (None: unlabelled) and a note
    label_set: Callable[[Splits, Path | None], list[str]]  # the splits and the folder they came from
    texts: Callable[[Any], list[str]]  # the running text of one example (decontamination)
    labelled_head: bool = True  # the model takes num_labels / id2label / label2id
    #: what examples that must share a split have in common (an NLI premise, a QA passage): a split made here that
    #: parted them would let the model learn test answers from training pairs
    split_group: Callable[[Any], Hashable] | None = None
    dataset_defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    dataset_main_metric: Mapping[str, str] = field(default_factory=dict)

    def settings(self, dataset: str) -> dict[str, Any]:
        """The fine-tuning defaults of one dataset of this kind (before the caller's overrides)."""
        return dict(self.defaults) | dict(self.dataset_defaults.get(dataset, {}))

    def main_metric_of(self, dataset: str) -> str:
        return self.dataset_main_metric.get(dataset, self.main_metric)

    def model_kwargs(self, labels: list[str]) -> dict[str, Any]:
        if not self.labelled_head:
            return {}
        return {"num_labels": len(labels), "id2label": dict(enumerate(labels)),
                "label2id": {label: i for i, label in enumerate(labels)}}


# --------------------------------------------------------------------------- adapters (imported on use: torch)


def _ner_adapter(data: TaskData, tokenizer: Any, config: Any, settings: Mapping[str, Any], main: str) -> TaskAdapter:
    from focusflow.evaluation.downstream.ner import NerTask

    return NerTask(data, tokenizer, max_length=settings["max_length"], config=config)


def _nli_adapter(data: TaskData, tokenizer: Any, config: Any, settings: Mapping[str, Any], main: str) -> TaskAdapter:
    from focusflow.evaluation.downstream.nli import NliTask

    return NliTask(data, tokenizer, max_length=settings["max_length"], config=config)


def _qa_adapter(data: TaskData, tokenizer: Any, config: Any, settings: Mapping[str, Any], main: str) -> TaskAdapter:
    from focusflow.evaluation.downstream.qa import QaTask

    max_length = settings["max_length"]
    return QaTask(data, tokenizer, max_length=max_length, stride=min(settings.get("stride", 128), max_length // 3),
                  config=config)


def _cls_adapter(data: TaskData, tokenizer: Any, config: Any, settings: Mapping[str, Any], main: str) -> TaskAdapter:
    from focusflow.evaluation.downstream.cls import ClsTask

    return ClsTask(data, tokenizer, max_length=settings["max_length"], config=config, main_metric=main)


# --------------------------------------------------------------------------- readers and label sets


def _read_qa(path: Path) -> tuple[list[Any] | None, str | None]:
    examples, stats = read_squad_json(path)
    if not examples:
        log.warning("%s: none of its %d questions has a gold answer; ignoring it as unlabelled", path, stats.questions)
        return None, f"{path.name} ignored: 0 of {stats.questions} questions have a gold answer"
    stats.warn(path)
    return examples, None


def _name_label_indices(splits: Splits, labels: list[str], labels_file: Path) -> None:
    """A Hugging Face export writes a ClassLabel as its index (0, 1, …): with ``labels.txt`` naming them in order,
    each index becomes its name (in place), where no label of the data is a name already."""
    seen = {example.label for examples in splits.values() for example in examples}
    if not seen or seen & set(labels) or not all(label.isdigit() and int(label) < len(labels) for label in seen):
        return
    for examples in splits.values():
        examples[:] = [ClsExample(example.text, labels[int(example.label)]) for example in examples]
    log.info("%s: the labels are indices; named by %s", ", ".join(sorted(seen, key=int)), labels_file)


def _cls_labels(splits: Splits, folder: Path | None) -> list[str]:
    """``labels.txt`` beside the files when there is one (every label must be in it); else the labels seen."""
    labels_file = folder / LABELS_FILE if folder is not None and folder.is_dir() else None
    if labels_file is not None and labels_file.is_file():
        labels = read_labels_file(labels_file)
        _name_label_indices(splits, labels, labels_file)
        check_labels(splits, labels, str(labels_file))
        return labels
    labels = sorted({example.label for examples in splits.values() for example in examples})
    unseen = sorted({e.label for name in ("dev", "test") for e in splits.get(name, [])}
                    - {e.label for e in splits.get("train", [])})
    if unseen:
        log.warning("labels %s occur in dev/test but never in train", unseen)
    if len(labels) < 2:
        raise DataFormatError(f"a classification task needs at least 2 labels, found {labels}")
    return labels


def _ner_texts(example: NerExample) -> list[str]:
    return [" ".join(example.words)]


def _nli_texts(example: NliExample) -> list[str]:
    return [example.premise, example.hypothesis]


def _qa_texts(example: QaExample) -> list[str]:
    return [example.context, example.question]


def _cls_texts(example: ClsExample) -> list[str]:
    return [example.text]


KINDS: dict[str, TaskKind] = {kind.name: kind for kind in (
    TaskKind("ner", "named entities: words → BIO tags, entity F1", NerExample,
             model_class="AutoModelForTokenClassification", make_adapter=_ner_adapter,
             defaults={"lr": 5e-5, "epochs": 10.0, "max_length": 256}, main_metric="f1",
             file_extensions=(".txt", ".conll", ".iob2", ".bio", ".tsv", ""),  # "": WikiANN's original train, dev, test
             read_split=lambda path: (read_conll(path), None),
             label_set=lambda splits, folder: ner_label_set(*splits.values()), texts=_ner_texts,
             dataset_defaults={"wikiann": {"lr": 5e-5}, "masakhaner2": {"lr": 2e-5}, "masakhaner": {"lr": 2e-5},
                               "germeval14": {"lr": 5e-5}}),
    TaskKind("nli", "premise + hypothesis → entailment / neutral / contradiction, accuracy", NliExample,
             model_class="AutoModelForSequenceClassification", make_adapter=_nli_adapter,
             defaults={"lr": 2e-5, "epochs": 2.0, "max_length": 256}, main_metric="accuracy",
             file_extensions=(".tsv", ".txt"), read_split=lambda path: (read_nli_tsv(path), None),
             label_set=lambda splits, folder: list(NLI_LABELS), texts=_nli_texts,
             split_group=attrgetter("premise")),
    TaskKind("qa", "extractive QA: question + context → answer span, SQuAD F1/EM", QaExample,
             model_class="AutoModelForQuestionAnswering", make_adapter=_qa_adapter,
             defaults={"lr": 5e-5, "epochs": 3.0, "max_length": 384, "stride": 128}, main_metric="f1",
             file_extensions=(".json", ".jsonl"), read_split=_read_qa, label_set=lambda splits, folder: [], texts=_qa_texts,
             labelled_head=False, split_group=attrgetter("context")),
    TaskKind("cls", "sentence classification: text → label, accuracy and macro-F1", ClsExample,
             model_class="AutoModelForSequenceClassification", make_adapter=_cls_adapter,
             defaults={"lr": 3e-5, "epochs": 10.0, "max_length": 128}, main_metric="accuracy",
             file_extensions=(".tsv", ".csv", ".jsonl", ".json", ".parquet", ".txt"), read_split=read_cls_split,
             label_set=_cls_labels, texts=_cls_texts, dataset_main_metric={"masakhanews": "macro_f1"}),
)}
KIND_NAMES: tuple[str, ...] = tuple(KINDS)


def task_kind(name: str) -> TaskKind:
    try:
        return KINDS[name]
    except KeyError:
        raise InputError(f"unknown task kind {name!r}; kinds: {', '.join(KIND_NAMES)}") from None


def example_texts(example: Example) -> list[str]:
    """The running text of any example: a sentence (NER), premise and hypothesis (NLI), context and
    question (QA), the text (classification)."""
    for kind in KINDS.values():
        if isinstance(example, kind.example_type):
            return kind.texts(example)
    raise TypeError(f"not an evaluation example: {type(example).__name__}")


def require_task_head(model_type: str, kind: str, name: str) -> None:
    """An error when transformers has no head of ``kind``'s task model for ``model_type`` models (Gemma 3 has no
    token-classification head, say): checked before a run (the plan) and again where a task model is loaded."""
    import transformers

    model_class = getattr(transformers, task_kind(kind).model_class)
    if model_type not in transformers.CONFIG_MAPPING:  # a model type this transformers does not know: loading says
        return
    if transformers.CONFIG_MAPPING[model_type] not in model_class._model_mapping:
        raise InputError(f"{name}: transformers has no {model_class.__name__} head for {model_type} models, "
                         f"so {kind} tasks cannot fine-tune it (cls tasks run on every model family)")
