"""Downstream evaluation: NER, NLI, QA and sentence-classification fine-tuning with seeds, best-dev model selection and
mean ± std reports (the FOCUS paper's protocol, DESIGN.md §5).

Python::

    from focusflow.evaluation.downstream import evaluate_models
    from focusflow.config import DownstreamSettings
    table = evaluate_models({"focus": "out/focus", "random": "out/random"},
                            ["ner:masakhaner2:swa", "cls:sib200:sw", "nli:path/to/xnli_sw"], out_dir=Path("eval"),
                            settings=DownstreamSettings(seeds=5, data_root="../shared/data"))

CLI: ``focusflow evaluate --models A,B --task ner:masakhaner2:swa --task cls:sib200:sw --out DIR``.
The task kinds (ner, nli, qa, cls) are one table: ``focusflow.evaluation.downstream.kinds``.
"""

from focusflow.evaluation.downstream.datasets import (
    ClsExample,
    DataFormatError,
    NerExample,
    NliExample,
    QaExample,
    TaskData,
    complete_splits,
    read_cls_file,
    read_conll,
    read_nli_tsv,
    read_squad_json,
)
from focusflow.evaluation.downstream.finetune import FinetuneResult, FinetuneSpec, finetune
from focusflow.evaluation.downstream.kinds import KINDS, TaskKind, task_kind
from focusflow.evaluation.downstream.metrics import (
    accuracy,
    classification_scores,
    ner_scores,
    normalize_answer,
    squad_scores,
)
from focusflow.evaluation.downstream.report import aggregate, write_reports
from focusflow.evaluation.downstream.runner import (
    evaluate_models,
    evaluate_task,
    load_task_model,
    load_task_tokenizer,
)
from focusflow.evaluation.downstream.sources import KNOWN, TaskSpec, parse_task, resolve_task

__all__ = [
    "KINDS", "KNOWN", "ClsExample", "DataFormatError", "TaskKind", "classification_scores", "read_cls_file",
    "task_kind", "FinetuneResult", "FinetuneSpec", "NerExample", "NliExample",
    "QaExample", "TaskData", "TaskSpec", "accuracy", "aggregate", "complete_splits", "evaluate_models",
    "evaluate_task", "finetune", "load_task_model", "load_task_tokenizer", "ner_scores", "normalize_answer",
    "parse_task", "read_conll", "read_nli_tsv", "read_squad_json", "resolve_task", "squad_scores", "write_reports",
]
