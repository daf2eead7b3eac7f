"""``focusflow deploy`` (deployments from the language registry) and ``focusflow server`` (local Prefect UI)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer
import yaml

from focusflow.cli.app import app


@app.command("deploy")
def deploy_command(
    registry: Path = typer.Option(None, "--registry", "-r", show_default=False,
                                  help="Language registry YAML (default: deployments/languages.yaml of the focusflow "
                                       "checkout, from any directory; else of the current directory)."),
    work_pool_cpu: str = typer.Option(None, "--work-pool-cpu", help="CPU work pool (default: the registry's)."),
    work_pool_gpu: str = typer.Option(None, "--work-pool-gpu", help="GPU work pool (default: the registry's)."),
    language: list[str] = typer.Option([], "--language", "-l", help="Deploy only these languages (repeatable)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and print the plan; contact no server."),
    prune: bool = typer.Option(False, "--prune", help="Delete focusflow deployments no longer in the registry."),
    write_prefect_yaml: Path = typer.Option(None, "--write-prefect-yaml",
                                            help="Also write the plan as a prefect.yaml (for `prefect deploy --all`)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    serve: bool = typer.Option(False, "--serve", help="Serve the deployments from this process (no work pool "
                                                      "or worker needed); blocks until interrupted."),
) -> None:
    """One specialize_language and one evaluate_checkpoint deployment per registered language."""
    from focusflow.orchestration.apply import apply_plans, check_prune, serve_plans
    from focusflow.orchestration.plans import plan_deployments, render_prefect_yaml
    from focusflow.orchestration.registry import default_registry, load_registry

    loaded = load_registry(registry)
    registry = registry if registry is not None else default_registry()
    plans = plan_deployments(loaded, cpu_pool=work_pool_cpu, gpu_pool=work_pool_gpu, languages=language or None)
    if write_prefect_yaml is not None:
        from focusflow.storage.atomic import atomic_write

        atomic_write(write_prefect_yaml, render_prefect_yaml(loaded, plans))
        typer.echo(f"wrote {write_prefect_yaml}", err=True)
    if dry_run:
        plan = [p.as_dict() for p in plans]
        typer.echo(json.dumps(plan, indent=2) if as_json
                   else yaml.safe_dump(plan, sort_keys=False, allow_unicode=True, width=100))
        return
    if serve:
        serve_plans(plans)
        return
    check_prune(prune, language)
    result = apply_plans(loaded, plans, base_dir=registry.parent, prune=prune)
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2))
        return
    for pool in result.pools_created:
        typer.echo(f"created work pool {pool}")
    for name, deployment_id in result.deployments.items():
        typer.echo(f"deployed {name}  ({deployment_id})")
    for name in result.pruned:
        typer.echo(f"removed {name}")
    typer.echo(f"{len(result.deployments)} deployments, {result.automations} checkpoint triggers. "
               f"Start workers: prefect worker start --pool <pool>")


@app.command("server")
def run_server(
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on (0.0.0.0 for all)."),
    port: int = typer.Option(4200, "--port", "-p"),
    ui: bool = typer.Option(True, "--ui/--no-ui", help="Serve the web UI."),
    home: Path = typer.Option(None, "--home", help="PREFECT_HOME (database location); default ~/.prefect."),
) -> None:
    """Start a local Prefect server and UI (analytics off): then set PREFECT_API_URL=http://HOST:PORT/api."""
    from focusflow.orchestration.server import server_command

    argv, env = server_command(host, port, ui=ui, home=home)
    typer.echo(f"Prefect UI at http://{host}:{port}  —  in other shells: "
               f"export PREFECT_API_URL=http://{host}:{port}/api", err=True)
    os.execvpe(argv[0], argv, env)
