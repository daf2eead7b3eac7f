"""The protocol: for every model × task × seed, fine-tune with the task's defaults, keep the
best dev checkpoint, score it on test; then mean ± std over seeds in one table.

The defaults of every task kind live in its entry of ``kinds.KINDS``; the caller's
:class:`~focusflow.config.DownstreamSettings` (seeds, overrides, data limits) applies to every task.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from focusflow.config import DownstreamSettings, downstream_settings
from focusflow.errors import InputError
from focusflow.evaluation.downstream.datasets import TaskData, subsample
from focusflow.evaluation.downstream.finetune import FinetuneSpec, finetune
from focusflow.evaluation.downstream.kinds import require_task_head, task_kind
from focusflow.evaluation.downstream.presets import with_protocol
from focusflow.evaluation.downstream.progress import RunProgress, warn_if_never_learned
from focusflow.evaluation.downstream.report import RUNS_FOLDER, never_learned, results_folder, write_reports
from focusflow.evaluation.downstream.sources import TaskSpec, parse_task, resolve_task, task_versions
from focusflow.logs import quiet_transformers_progress
from focusflow.models.loading import require_body_weights, require_vocabulary_fits, require_weights, usable_positions
from focusflow.precision import resolve_precision
from focusflow.storage.export import OutputFolder
from focusflow.storage.fingerprint import content_identity
from focusflow.training.distributed import compute_device

log = logging.getLogger(__name__)

RUN_VERSION = 3  # 2: a local model identified by content, not by file times; 3: the data by content, not sizes
OVERRIDES = ("lr", "epochs", "max_length")  # settings that replace a task kind's default when given


def task_defaults(spec: TaskSpec) -> dict[str, Any]:
    """The task kind's defaults for the spec's dataset (``kinds.KINDS``)."""
    return task_kind(spec.kind).settings(spec.dataset)


def task_settings(spec: TaskSpec, settings: DownstreamSettings) -> dict[str, Any]:
    """The task's defaults with the caller's overrides: what the adapter and the optimizer use."""
    return task_defaults(spec) | {name: getattr(settings, name) for name in OVERRIDES
                                  if getattr(settings, name) is not None}


def load_task_tokenizer(model: Path | str) -> Any:
    """The model's fast tokenizer (word ids and character offsets are needed), right padding."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(model))
    except Exception as exc:
        raise InputError(f"{model}: could not load a tokenizer ({type(exc).__name__}: {exc})") from exc
    if not getattr(tokenizer, "is_fast", False):
        raise InputError(f"{model}: the tokenizer is not a fast (Rust) tokenizer; NER alignment and QA spans need "
                         "word ids and character offsets. Save a tokenizer.json with the model, e.g. "
                         "PreTrainedTokenizerFast(tokenizer_object=...).save_pretrained(folder).")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    tokenizer.padding_side = "right"
    return tokenizer


def load_task_model(model: Path | str, kind: str, tokenizer: Any, **kwargs: Any) -> torch.nn.Module:
    """The task model with the encoder's pretrained weights; an error when they did not load."""
    import transformers

    model_class = getattr(transformers, task_kind(kind).model_class)
    quiet_transformers_progress()
    # the new head is always "missing": focusflow.logs drops that load report unless verbose
    require_weights(model)
    require_task_head(transformers.AutoConfig.from_pretrained(str(model)).model_type, kind, str(model))
    loaded, info = model_class.from_pretrained(str(model), output_loading_info=True, **kwargs)
    require_body_weights(info.get("missing_keys"), model)
    require_vocabulary_fits(loaded, tokenizer, model)
    if getattr(loaded.config, "pad_token_id", None) is None:
        # decoders: sequence classification reads the last token that is not padding
        loaded.config.pad_token_id = tokenizer.pad_token_id
    return loaded.to(compute_device())


def model_max_tokens(config: Any, tokenizer: Any) -> int | None:
    """The longest input the model accepts (position table; RoBERTa-style models lose pad+1 slots)."""
    limits = []
    positions = usable_positions(config)
    if positions:
        limits.append(positions)
    if 0 < getattr(tokenizer, "model_max_length", 0) < 100_000:
        limits.append(int(tokenizer.model_max_length))
    return min(limits) if limits else None


def make_adapter(data: TaskData, tokenizer: Any, config: Any, settings: dict[str, Any],
                 main_metric: str | None = None) -> Any:
    """The task kind's adapter; the window shrinks to what the model's position table allows."""
    max_length = settings["max_length"]
    limit = model_max_tokens(config, tokenizer)
    if limit is not None and limit < max_length:
        log.warning("%s: the model accepts at most %d tokens; using max_length %d instead of %d",
                    data.name, limit, limit, max_length)
        max_length = limit
    kind = task_kind(data.kind)
    return kind.make_adapter(data, tokenizer, config, settings | {"max_length": max_length},
                             main_metric or kind.main_metric_of(data.name))


def prepare_data(spec: TaskSpec, settings: DownstreamSettings) -> TaskData:
    """Resolve the task and apply the sample limits (seeded: the same subset for every model).

    ``max_eval_samples`` caps the dev set used for checkpoint selection; ``max_test_samples``
    caps the test set (for smoke runs only: the report names the subset in its provenance)."""
    split_seed = settings.split_seed
    data = resolve_task(spec, settings.data_root, split_seed)
    for split, limit, offset in (("train", settings.max_train_samples, 0), ("dev", settings.max_eval_samples, 1),
                                 ("test", settings.max_test_samples, 2)):
        examples = getattr(data, split)
        if limit is not None and len(examples) > limit:
            setattr(data, split, subsample(examples, limit, split_seed + offset))
            data.provenance[split] += f" (seeded subset: {limit} of {len(examples)})"
    if not data.train or not data.dev or not data.test:
        raise InputError(f"{spec.id}: empty split after loading ({data.sizes()})")
    return data


def model_signature(model: Path | str) -> str:
    """What identifies a model's weights: a local folder by its content (``storage.fingerprint.content_identity``: a
    stored artifact's content hash, else the files' hashes; a model retrained into the same folder is another model,
    one copied elsewhere is the same), the id itself for a hub id."""
    folder = Path(str(model))
    return content_identity(folder) if folder.is_dir() else str(model)


def _fingerprint(signature: str, spec: TaskSpec, seed: int, finetune_spec: FinetuneSpec,
                 settings: dict[str, Any], data_hash: str) -> str:
    # "auto" may mean bf16 on one machine and fp32 on another: the key holds what it resolves to here
    resolved = resolve_precision(finetune_spec.precision, compute_device()).name
    payload = json.dumps({"files": signature, "task": spec.id, "seed": seed,
                          "finetune": _finetune_fields(finetune_spec) | {"precision": resolved}, "settings": settings,
                          "data": data_hash, "version": RUN_VERSION,
                          # a task whose data means something else now (sources.TASK_VERSIONS); other runs stay valid
                          **({"task_versions": versions} if (versions := task_versions([spec.id])) else {})},
                         sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _finetune_fields(spec: FinetuneSpec) -> dict[str, Any]:
    """The spec as the run fingerprint holds it: a setting at its neutral value is left out, so runs saved
    before the setting existed are still reused."""
    fields = asdict(spec)
    if fields["embedding_lr_scale"] == 1.0:
        del fields["embedding_lr_scale"]
    if fields["patience"] is None:
        del fields["patience"]
    del fields["compile"]  # how fast, not what: a compiled run computes the same to the precision's tolerance
    return fields


def _finetune_spec(settings: DownstreamSettings, task: dict[str, Any], seed: int) -> FinetuneSpec:
    return FinetuneSpec(lr=task["lr"], epochs=task["epochs"], batch_size=settings.batch_size,
                        eval_every_fraction=settings.eval_every_fraction, seed=seed, precision=settings.precision,
                        embedding_lr_scale=settings.embedding_lr_scale or 1.0, patience=settings.patience,
                        compile=settings.compile)


def evaluate_task(model: Path | str, task: str | TaskSpec, seed: int, settings: DownstreamSettings | None = None, *,
                  model_name: str | None = None, data: TaskData | None = None, adapter: Any = None,
                  tokenizer: Any = None, on_progress: Callable[[int, int, float | None], None] | None = None
                  ) -> dict[str, Any]:
    """Fine-tune ``model`` on ``task`` with one seed; returns test scores of the best dev checkpoint,
    the dev curve, sizes, cost (seconds, training tokens/s) and preprocessing counts; ``never_learned`` is true
    when the dev score never rose above 0 (NER's all-O plateau: the test score then measures nothing).

    ``settings.precision`` (auto, bf16, fp16, fp32) applies to training, dev and test alike; ``data``,
    ``adapter`` and ``tokenizer`` are what :func:`evaluate_models` prepared once for every seed."""
    settings = settings or DownstreamSettings()
    spec = parse_task(task) if isinstance(task, str) else task
    started = time.perf_counter()
    task_values = task_settings(spec, settings)
    if data is None:
        data = prepare_data(spec, settings)
    tokenizer = tokenizer or load_task_tokenizer(model)
    torch.manual_seed(seed)  # the head's initialization depends on the seed
    network = load_task_model(model, spec.kind, tokenizer, **task_kind(spec.kind).model_kwargs(data.labels))
    adapter = adapter or make_adapter(data, tokenizer, network.config, task_values)
    finetune_spec = _finetune_spec(settings, task_values, seed)
    eval_batch = max(settings.batch_size, 64)
    result = finetune(network, adapter.train_features(),
                      lambda: adapter.evaluate(network, "dev", eval_batch)[adapter.main_metric],
                      finetune_spec, network.config.pad_token_id if network.config.pad_token_id is not None else 0,
                      on_progress=on_progress)
    with resolve_precision(settings.precision, compute_device()).autocast():
        test = adapter.evaluate(network, "test", eval_batch)
    return {
        "model": model_name or _model_name(model), "model_path": str(model), "task": spec.id, "kind": spec.kind,
        "dataset": spec.dataset, "language": spec.language, "seed": seed, "main_metric": adapter.main_metric,
        "test": test, "best_dev": result.best_dev, "best_step": result.best_step,
        "total_steps": result.total_steps, "steps": result.steps, "converged": result.converged,
        "dev_curve": result.history,
        "never_learned": never_learned({"dev_curve": result.history, "best_dev": result.best_dev}),
        "seconds": time.perf_counter() - started, "train_seconds": result.train_seconds,
        "eval_seconds": result.eval_seconds, "train_tokens": result.train_tokens,
        "train_tokens_per_s": result.tokens_per_second, "train_mfu": result.mfu, "precision": result.precision,
        "compile": result.compile.reason if result.compile is not None else None,
        "sizes": data.sizes(),
        "stats": dict(adapter.stats),
        "provenance": data.provenance, "hparams": asdict(finetune_spec) | task_values,
    }


def _model_name(model: Path | str) -> str:
    path = Path(str(model))
    return path.name if path.exists() else str(model)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:120]


def parse_seeds(text: str) -> int | list[int]:
    """``"5"`` -> 5 (seeds 1..5); ``"2,3"`` -> [2, 3] (just those seeds); :class:`DownstreamSettings` checks them."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InputError(f"seeds must be a count (5) or a comma-separated list (2,3), got {text!r}") from None
    return values if "," in text else (values[0] if values else 0)


def evaluate_models(models: dict[str, Path | str], tasks: list[str], out_dir: Path | OutputFolder,
                    settings: DownstreamSettings | None = None):
    """The same protocol for every model on every task, seeds 1..N (or the listed seeds); writes ``results.csv``,
    ``results.md``, ``runs.csv`` and one JSON per run (``runs/<model>/<task>/seed<k>.json``;
    a finished run with the same settings is reused, so an interrupted comparison resumes).

    ``out_dir`` is refused before any data is read unless focusflow may write there (``report.results_folder``:
    new, empty, or its own earlier output and run files); a caller that checked it already passes the folder.

    ``settings``: :class:`~focusflow.config.DownstreamSettings` (seeds, data root, overrides of the task
    defaults, sample limits, precision, threads: 1 is much faster than oversubscribing a busy machine).
    A list of seeds splits one comparison across machines or processes; copying their ``runs/`` into one
    folder and calling again with every seed writes the whole table from the saved runs.
    Returns the ``results.csv`` table as a DataFrame.
    """
    settings = settings if settings is not None else DownstreamSettings()
    if not isinstance(settings, DownstreamSettings):  # a mapping of fields: validated like the run configuration
        settings = downstream_settings(**dict(settings))
    if not models:
        raise InputError("no models to evaluate")
    if not tasks:
        raise InputError("no tasks to evaluate")
    folder = results_folder(out_dir)  # created by the first run written: a run that fails on its inputs leaves none
    if settings.threads:
        torch.set_num_threads(settings.threads)
    specs = [parse_task(task) for task in tasks]  # fail on a bad spec before any training
    runs: list[dict[str, Any]] = []
    notes: dict[str, list[str]] = {}
    progress = RunProgress(len(specs) * len(models) * len(settings.seed_list), len(settings.seed_list))
    common = settings
    for spec in specs:
        settings = with_protocol(common, spec.kind, spec.dataset)  # a named preset fills what was left unset
        data = prepare_data(spec, settings)
        notes[spec.id] = [f"{split}: {origin}" for split, origin in data.provenance.items()]
        task_values = task_settings(spec, settings)
        data_hash = data.content_hash()  # what the runs are scored on, not only how many
        for name, model in models.items():
            tokenizer = load_task_tokenizer(model)
            signature = model_signature(model)  # once per model: a folder outside a store is read to be hashed
            adapter = None
            for seed in settings.seed_list:
                finetune_spec = _finetune_spec(settings, task_values, seed)
                key = _fingerprint(signature, spec, seed, finetune_spec, task_values, data_hash)
                run_name = f"{RUNS_FOLDER}/{_slug(name)}/{_slug(spec.id)}/seed{seed}.json"
                run_file = folder / run_name
                if run_file.is_file():
                    previous = json.loads(run_file.read_text(encoding="utf-8"))
                    if previous.get("fingerprint") == key:
                        log.info("reusing %s", run_file)
                        runs.append(previous)
                        progress.reused()
                        warn_if_never_learned(previous)
                        continue
                if adapter is None:
                    from transformers import AutoConfig

                    adapter = make_adapter(data, tokenizer, AutoConfig.from_pretrained(str(model)), task_values)
                log.info("%s · %s · seed %d", name, spec.id, seed)
                label = progress.start(name, spec.id, seed, settings.seed_list.index(seed) + 1)
                run = evaluate_task(model, spec, seed, settings, model_name=name, data=data, adapter=adapter,
                                    tokenizer=tokenizer, on_progress=label.step)
                progress.finish(label, run)
                run["fingerprint"] = key
                folder.write(run_name, json.dumps(run, indent=1, default=float))
                runs.append(run)
                write_reports(folder, runs, notes)  # partial tables stay readable while running
            if adapter is not None:
                stats = ", ".join(f"{k} {v}" for k, v in adapter.stats.items() if v)
                if stats:
                    notes[spec.id].append(f"{name} preprocessing: {stats}")
    return write_reports(folder, runs, notes)
