"""A downstream task spec (``ner:masakhaner2:swa``, ``nli:PATH``) as the Hub's model-index names it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePath

# focusflow's task kinds → the Hub's task ids (https://hf.co/tasks) and their pretty names
HUB_TASKS = {"ner": ("token-classification", "Named entity recognition"),
             "nli": ("text-classification", "Natural language inference"),
             "qa": ("question-answering", "Extractive question answering"),
             "cls": ("text-classification", "Text classification")}


@dataclass(frozen=True)
class TaskDataset:
    task_type: str
    task_name: str
    dataset_type: str  # the Hub dataset id where there is one, else the task spec
    dataset_name: str
    dataset_config: str | None
    hub_id: str | None


def task_dataset(task: str, dataset: str | None = None, language: str | None = None,
                 folders: Iterable[str] = ()) -> TaskDataset:
    """The Hub's names for a downstream task spec; a local folder has no dataset id and says so.

    Built offline: the dataset's config is what the spec and ``folders`` (the local copy the run read, from its
    results' provenance) say, and is left out where they do not (SIB-200's ``cls:sib200:sw`` read from the Hub)."""
    from focusflow.evaluation.downstream.sources import ALIASES, KNOWN, hub_layout_name, parse_task

    kind, _, rest = task.partition(":")
    task_type, task_name = HUB_TASKS.get(kind, (kind or "other", kind or "task"))
    name, _, lang = rest.partition(":")
    known = KNOWN.get(ALIASES.get(name.lower(), name.lower())) if lang else None
    if known is None:  # a folder or file of the user's: its name only (a public card holds no local path)
        local = PurePath(rest.rstrip("/\\")).name if not lang else name
        label = f"{dataset or local or kind} (local files)"
        return TaskDataset(task_type, task_name, f"{kind}:{local}" if local else kind, label, language or None, None)
    config = hub_layout_name(parse_task(task), folders)
    return TaskDataset(task_type, task_name, known.repo, f"{name} ({lang})", config, known.repo)
