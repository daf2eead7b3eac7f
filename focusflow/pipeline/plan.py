"""What can be known to fail from a run's inputs, checked in seconds before any stage runs.

``run``, ``compare`` and ``demo`` call :func:`check_plan` first, so a wrong setting fails at once with one line
instead of after a 12-minute source stage: the store is reachable and writable, local corpus files exist and
hold enough text for an explicit vocabulary size, every evaluation task's data is where the run will look, and the
source model's family has the head each task fine-tunes (Gemma 3 has none for NER).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from focusflow.config import ConfigError, PipelineConfig
from focusflow.storage import ArtifactStore
from focusflow.tokenizer.training import chars_needed

if TYPE_CHECKING:
    from focusflow.evaluation.downstream.sources import TaskSpec


def check_plan(cfg: PipelineConfig, store: ArtifactStore) -> None:
    """One :class:`~focusflow.errors.FocusflowError` line for the first problem found; None when the plan holds."""
    _check_store(store)
    _check_runner(cfg)
    files = _corpus_files(cfg)
    _check_vocabulary(cfg, files)
    _check_tasks(cfg)
    _check_push(cfg)


def _check_push(cfg: PipelineConfig) -> None:
    """A run that pushes its models needs a token: refused now, not after its LAPT (huggingface_hub would upload
    without one, and the Hub's 401 blame a token nobody gave)."""
    if cfg.publish.repo_id and cfg.publish.push and cfg.publish.models:
        from focusflow.publish.hub import require_token

        require_token()


def _check_store(store: ArtifactStore) -> None:
    """Write and remove one small hidden object (not a stage: listings skip dot names): an unwritable or
    unreachable store fails now, with the store's own one-line error, not at the first commit."""
    transport = store.transport
    probe = transport.path(f".plan-check-{uuid.uuid4().hex}")
    transport.retry("the plan check's probe write", lambda: transport.write_atomic(probe, b"focusflow"))
    transport.retry("the plan check's probe removal", lambda: transport.fs.rm(probe))


#: Seconds the plan check waits for a Dask scheduler to accept a connection.
DASK_CONNECT_TIMEOUT_S = 5.0


def _check_runner(cfg: PipelineConfig) -> None:
    """The task runner can run: the dask extra is installed for ``task_runner: dask``, its scheduler address parses
    and accepts a connection; an address (``$FOCUSFLOW_DASK_ADDRESS``) beside another runner would be ignored."""
    import importlib.util
    import os

    from focusflow.config import DASK_ADDRESS_ENV

    orchestration = cfg.orchestration
    from_env = os.environ.get(DASK_ADDRESS_ENV)
    if orchestration.task_runner != "dask":
        if from_env:
            raise ConfigError(f"${DASK_ADDRESS_ENV}={from_env} names a Dask cluster, but orchestration.task_runner is "
                              f"{orchestration.task_runner!r}: set orchestration.task_runner=dask, or unset "
                              f"{DASK_ADDRESS_ENV}")
        return
    address = orchestration.dask_address or from_env
    if address:  # a wrong address is wrong with or without the extra: said first
        _check_dask_address(address, "orchestration.dask_address" if orchestration.dask_address else DASK_ADDRESS_ENV)
    try:
        installed = importlib.util.find_spec("prefect_dask") is not None
    except ValueError:  # a module entry of None: as good as missing
        installed = False
    if not installed:
        raise ConfigError("orchestration.task_runner=dask needs the dask extra: pip install 'focusflow[dask]'")


def _check_dask_address(address: str, name: str) -> None:
    """``tcp://host:port`` (or ``host:port``) that accepts a TCP connection within a few seconds."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if parts.scheme not in ("tcp", "tls") or not host or not port:
        raise ConfigError(f"{name}={address!r} is not a Dask scheduler address; write tcp://HOST:PORT "
                          "(e.g. tcp://scheduler:8786)")
    try:
        with socket.create_connection((host, port), timeout=DASK_CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise ConfigError(f"{name}={address}: no Dask scheduler answers there ({exc.strerror or exc}); start the "
                          "cluster, correct the address, or leave it unset for a local cluster") from None


def _corpus_files(cfg: PipelineConfig) -> list[Path]:
    """The local corpus files, found as the corpus stage finds them (``corpus.sources.resolve_paths``)."""
    from focusflow.corpus.sources import resolve_paths

    if cfg.corpus.source != "local":
        return []
    found: list[Path] = []
    for pattern in cfg.corpus.paths:
        try:
            files = resolve_paths([pattern])
        except FileNotFoundError:
            raise ConfigError(f"corpus.paths: {pattern} matches no file or folder; give existing text files, globs or "
                              "folders") from None
        found += [Path(f) for f in files if "://" not in f]  # a remote file's size is not checked here
    return found


def _check_vocabulary(cfg: PipelineConfig, files: list[Path]) -> None:
    """An explicit vocabulary the corpus cannot support fails now (its bytes bound its characters from above)."""
    size, spec = cfg.tokenizer.vocab_size, cfg.tokenizer
    if size == "auto" or not files or spec.chars_per_vocab_entry <= 1:
        return
    if any(f.suffix in (".gz", ".zst", ".zstd", ".xz", ".bz2", ".parquet") for f in files):
        return  # compressed: the size on disk says little about the text
    at_most = sum(f.stat().st_size for f in files)
    if chars_needed(size, spec) > at_most:
        raise ConfigError(f"tokenizer.vocab_size={size:,} needs about {chars_needed(size, spec) / 1e6:.1f}M "
                          f"characters of training text; corpus.paths hold at most {at_most / 1e6:.1f}M: use "
                          "tokenizer.vocab_size=auto (the default), or add text")


def _check_tasks(cfg: PipelineConfig) -> None:
    """Every downstream task parses, is in the run's language, its data is in the local copy the run will read or
    the Hub serves it (asked once, without retries), and the source's family has the task's head (its model type
    read from its id or config, nothing loaded)."""
    from focusflow.evaluation.downstream.kinds import require_task_head
    from focusflow.evaluation.downstream.sources import check_hub_serves, missing_local_copy, parse_task
    from focusflow.models.model_type import source_model_type

    model_type = source_model_type(cfg.source_model) if cfg.evaluation.tasks else None
    specs = [parse_task(task) for task in cfg.evaluation.tasks]
    for spec in specs:  # what needs no network first
        _check_task_language(cfg.language, spec)
        if model_type is not None:
            require_task_head(model_type, spec.kind, f"source_model {cfg.source_model}")
    for spec in specs:
        if spec.path is None and cfg.evaluation.data_root is not None:
            missing_local_copy(spec, Path(cfg.evaluation.data_root))
        elif spec.path is None:
            check_hub_serves(spec)


# codes of one language that normalize apart (a dataset names the written standard, a corpus the language)
_SAME_LANGUAGE = {"nb": "no", "nn": "no"}


def _check_task_language(language: str, spec: TaskSpec) -> None:
    """A known dataset's task in another language than the run's is a mistake (a model for Swahili evaluated on
    Hausa measures nothing the run is for): one line naming both. A folder task says no language: not checked."""
    from focusflow.evaluation.downstream.sources import task_language
    from focusflow.languages import LanguageError, normalize_language

    theirs = task_language(spec)
    if theirs is None:
        return
    try:
        ours, task = normalize_language(language), normalize_language(theirs)
    except LanguageError:
        return  # an unknown code is the local-copy check's to name
    if _SAME_LANGUAGE.get(ours, ours) != _SAME_LANGUAGE.get(task, task):
        raise ConfigError(f"evaluation.tasks: {spec.id} is a task in '{task}', but this run specializes to "
                          f"'{ours}': name the task in the run's language ({spec.kind}:{spec.dataset}:{language}), "
                          f"or give a folder task {spec.kind}:PATH")


__all__ = ["check_plan"]
