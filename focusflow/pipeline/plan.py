"""What can be known to fail from a run's inputs, checked in seconds before any stage runs.

``run``, ``compare`` and ``demo`` call :func:`check_plan` first, so a wrong setting fails at once with one line
instead of after a 12-minute source stage: the store is reachable and writable, local corpus files exist and
hold enough text for an explicit vocabulary size, every evaluation task's data is where the run will look, and the
source model's family has the head each task fine-tunes (Gemma 3 has none for NER).
"""

from __future__ import annotations

import uuid
from pathlib import Path

from focusflow.config import ConfigError, PipelineConfig
from focusflow.storage import ArtifactStore


def check_plan(cfg: PipelineConfig, store: ArtifactStore) -> None:
    """One :class:`~focusflow.errors.FocusflowError` line for the first problem found; None when the plan holds."""
    _check_store(store)
    files = _corpus_files(cfg)
    _check_vocabulary(cfg, files)
    _check_tasks(cfg)


def _check_store(store: ArtifactStore) -> None:
    """Write and remove one small hidden object (not a stage: listings skip dot names): an unwritable or
    unreachable store fails now, with the store's own one-line error, not at the first commit."""
    transport = store.transport
    probe = transport.path(f".plan-check-{uuid.uuid4().hex}")
    transport.retry("the plan check's probe write", lambda: transport.write_atomic(probe, b"focusflow"))
    transport.retry("the plan check's probe removal", lambda: transport.fs.rm(probe))


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
    if int(size) * spec.chars_per_vocab_entry > at_most:
        raise ConfigError(f"tokenizer.vocab_size={size:,} needs about {int(size) * spec.chars_per_vocab_entry / 1e6:.1f}M "
                          f"characters of training text; corpus.paths hold at most {at_most / 1e6:.1f}M: use "
                          "tokenizer.vocab_size=auto (the default), or add text")


def _check_tasks(cfg: PipelineConfig) -> None:
    """Every downstream task parses, a local copy the run will read is there (or the Hub may serve it), and the
    source's family has the task's head (its model type read from its id or config, nothing loaded)."""
    from focusflow.evaluation.downstream.kinds import require_task_head
    from focusflow.evaluation.downstream.sources import missing_local_copy, parse_task
    from focusflow.models.model_type import source_model_type

    model_type = source_model_type(cfg.source_model) if cfg.evaluation.tasks else None
    for task in cfg.evaluation.tasks:
        spec = parse_task(task)
        if spec.path is None and cfg.evaluation.data_root is not None:
            missing_local_copy(spec, Path(cfg.evaluation.data_root))
        if model_type is not None:
            require_task_head(model_type, spec.kind, f"source_model {cfg.source_model}")


__all__ = ["check_plan"]
