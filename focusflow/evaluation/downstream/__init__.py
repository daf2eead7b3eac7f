"""Downstream evaluation: NER, NLI and QA fine-tuning with seeds, best-dev model selection and
mean ± std reports (the FOCUS paper's protocol, DESIGN.md §5).

Python::

    from focusflow.evaluation.downstream import evaluate_models
    table = evaluate_models({"focus": "out/focus", "random": "out/random"},
                            ["ner:masakhaner2:swa", "nli:path/to/xnli_sw"], out_dir=Path("eval"), seeds=5)

CLI: ``focusflow evaluate --models A,B --task ner:masakhaner2:swa --out DIR``.
"""

from focusflow.evaluation.downstream.datasets import (
    DataFormatError,
    NerExample,
    NliExample,
    QaExample,
    TaskData,
    complete_splits,
    read_conll,
    read_nli_tsv,
    read_squad_json,
)
from focusflow.evaluation.downstream.finetune import FinetuneResult, FinetuneSpec, finetune
from focusflow.evaluation.downstream.metrics import accuracy, ner_scores, normalize_answer, squad_scores
from focusflow.evaluation.downstream.report import aggregate, write_reports
from focusflow.evaluation.downstream.runner import (
    TASK_DEFAULTS,
    evaluate_models,
    evaluate_task,
    load_task_model,
    load_tokenizer,
)
from focusflow.evaluation.downstream.sources import KNOWN, TaskSpec, parse_task, resolve_task

__all__ = [
    "KNOWN", "TASK_DEFAULTS", "DataFormatError", "FinetuneResult", "FinetuneSpec", "NerExample", "NliExample",
    "QaExample", "TaskData", "TaskSpec", "accuracy", "aggregate", "complete_splits", "evaluate_models",
    "evaluate_task", "finetune", "load_task_model", "load_tokenizer", "ner_scores", "normalize_answer",
    "parse_task", "read_conll", "read_nli_tsv", "read_squad_json", "resolve_task", "squad_scores", "write_reports",
]
