"""The one stage registry and the pipeline graph, with no Prefect in sight.

``run_stage(store, stage, params, inputs)`` builds any stage (corpus … LAPT, downstream, report) or
returns it from the store; ``params_for(stage, cfg)`` gives its parameters in a run of a configuration;
``stage_key`` is the key it stores under and the key the Prefect tasks cache on. Importing this package
registers every stage.
"""

from focusflow.pipeline import evaluation_stages as _evaluation_stages  # noqa: F401  (registers stages)
from focusflow.pipeline import lapt_stage as _lapt_stage  # noqa: F401
from focusflow.pipeline import publish_stage as _publish_stage  # noqa: F401
from focusflow.pipeline import stages as _stages  # noqa: F401
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
