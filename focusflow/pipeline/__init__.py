"""The one stage registry and the pipeline graph, with no Prefect in sight.

``run_stage(store, stage, params, inputs)`` builds any stage (corpus … LAPT, downstream, report) or
returns it from the store; ``params_for(stage, cfg)`` gives its parameters in a run of a configuration;
``stage_key`` is the key it stores under and the key the Prefect tasks cache on. Importing this package
registers every stage.
"""

# One module a stage (``<name>_stage``; ``evaluation_stages`` holds downstream and report, ``lapt_stage`` the budget
# too), imported in the order they have always registered in (the registry's, and so the tasks', order).
# isort: off
from focusflow.pipeline import evaluation_stages as _evaluation_stages  # noqa: F401  (registers stages)
from focusflow.pipeline import lapt_stage as _lapt_stage  # noqa: F401
from focusflow.pipeline import publish_stage as _publish_stage  # noqa: F401
from focusflow.pipeline import corpus_stage as _corpus_stage  # noqa: F401
from focusflow.pipeline import dedup_stage as _dedup_stage  # noqa: F401
from focusflow.pipeline import decontaminate_stage as _decontaminate_stage  # noqa: F401
from focusflow.pipeline import split_stage as _split_stage  # noqa: F401
from focusflow.pipeline import source_stage as _source_stage  # noqa: F401
from focusflow.pipeline import tokenizer_stage as _tokenizer_stage  # noqa: F401
from focusflow.pipeline import fasttext_stage as _fasttext_stage  # noqa: F401
from focusflow.pipeline import init_stage as _init_stage  # noqa: F401
from focusflow.pipeline import align_stage as _align_stage  # noqa: F401
from focusflow.pipeline import reference_stage as _reference_stage  # noqa: F401
from focusflow.pipeline import intrinsic_stage as _intrinsic_stage  # noqa: F401
from focusflow.pipeline import teacher_stage as _teacher_stage  # noqa: F401
from focusflow.pipeline import ood_stage as _ood_stage  # noqa: F401
from focusflow.pipeline import reading_stage as _reading_stage  # noqa: F401
# isort: on
from focusflow.pipeline.registry import (
    STAGES,
    RunHints,
    Stage,
    StageCall,
    StageInputError,
    StageRun,
    StageSettings,
    get_stage,
    key_params,
    params_for,
    register,
    run_stage,
    stage_call,
    stage_key,
)

__all__ = ["STAGES", "RunHints", "Stage", "StageCall", "StageInputError", "StageRun", "StageSettings", "get_stage",
           "key_params", "params_for", "register", "run_stage", "stage_call", "stage_key"]
