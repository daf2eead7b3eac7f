"""Atomic, verified, resumable training checkpoints (LAPT and align) with a keep-last-K policy.

Layout under ``out_dir/checkpoints``::

    step-00000500/                 a complete ``save_pretrained`` folder (safetensors + tokenizer) plus
        trainer_state.json         step, samples, tokens, stage, spec, metric history (JSON)
        trainer/optimizer.pt       optimizer state   } tensors, numbers, strings, lists and dicts only:
        trainer/scheduler.pt       LR scheduler      } ``torch.save`` of plain state dicts, read back with
        trainer/rng.pt             torch CPU/CUDA RNG} ``torch.load(weights_only=True)`` (no pickled objects)
        trainer/scaler.pt          fp16 GradScaler (when used)
        trainer/trainable.safetensors   LoRA runs: adapter + trainable weights (the HF folder holds merged weights)
        checkpoint_manifest.json   size and sha256 of every other file, written last
    latest                         name of the last complete checkpoint (replaced atomically)
    rejected-step-00000500/        a checkpoint that failed verification, moved aside (kept for inspection)

A checkpoint is written under a temporary name and renamed into place when complete, so a
crash (even ``kill -9``) leaves either the previous checkpoints or a finished new one. Files can
still be damaged after that (a bad disk, a copy cut short, a hand edit): a run resumes only from a
checkpoint whose files match its manifest (:func:`verified_checkpoint`), else from the previous good one.
Data position is the integer ``samples`` (the sample order is a pure function of the seed).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from focusflow.errors import InputError
from focusflow.storage.atomic import atomic_folder, atomic_write, sha256_file

log = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints"
LATEST = "latest"
STATE_FILE = "trainer_state.json"
TRAINER_DIR = "trainer"
MANIFEST = "checkpoint_manifest.json"
REJECTED_PREFIX = "rejected-"
STATE_FORMAT = 1


def step_name(step: int) -> str:
    return f"step-{step:08d}"


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def rng_states(world_size: int) -> dict[str, dict[str, Any]]:
    """A checkpoint's RNG files: ``rng`` (this process) and, under DDP, ``rng-rank<r>`` of every rank.

    With several processes every rank must call it (the states are gathered); only rank 0's result is written.
    """
    own = rng_state()
    states: dict[str, dict[str, Any]] = {"rng": own}
    if world_size > 1:
        import torch.distributed as dist

        gathered: list[Any] = [None] * world_size
        dist.all_gather_object(gathered, {k: v.tolist() if torch.is_tensor(v) else [t.tolist() for t in v]
                                          for k, v in own.items()})
        for rank, state in enumerate(gathered):
            states[f"rng-rank{rank}"] = {
                "cpu": torch.tensor(state["cpu"], dtype=torch.uint8),
                **({"cuda": [torch.tensor(t, dtype=torch.uint8) for t in state["cuda"]]} if "cuda" in state else {}),
            }
    return states


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(out_dir: Path, step: int, write_model: Callable[[Path], None], trainer_state: dict[str, Any],
                    tensors: dict[str, dict[str, Any]], keep_last: int) -> Path:
    """Write one checkpoint atomically, point ``latest`` at it, prune to the last ``keep_last``.

    ``write_model(folder)`` writes the HF folder (model + tokenizer); ``tensors`` maps a file stem
    under ``trainer/`` to a plain state dict saved with ``torch.save``.
    """
    root = Path(out_dir) / CHECKPOINTS
    root.mkdir(parents=True, exist_ok=True)
    final = root / step_name(step)
    with atomic_folder(final, replace=True) as staging:
        write_model(staging)
        (staging / TRAINER_DIR).mkdir(exist_ok=True)
        for stem, state in tensors.items():
            torch.save(state, staging / TRAINER_DIR / f"{stem}.pt")
        state = {"format": STATE_FORMAT, **trainer_state}
        (staging / STATE_FILE).write_text(json.dumps(state, indent=1, ensure_ascii=False))
        write_manifest(staging)
    atomic_write(root / LATEST, final.name + "\n")
    for old in sorted(p for p in root.glob("step-*") if p.is_dir())[:-keep_last]:
        if old != final:
            shutil.rmtree(old, ignore_errors=True)
    return final


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.relative_to(folder).as_posix() != MANIFEST)


def write_manifest(folder: Path) -> None:
    """Record the size and sha256 of every file in ``folder``; call it after the last file is written."""
    files = {p.relative_to(folder).as_posix(): {"size": p.stat().st_size, "sha256": sha256_file(p)}
             for p in _files(folder)}
    atomic_write(folder / MANIFEST, json.dumps({"format": 1, "files": files}, indent=1, sort_keys=True))


def checkpoint_problem(folder: Path) -> str | None:
    """Why ``folder`` cannot be resumed from (no manifest, a file missing, added, resized or changed), or None."""
    try:
        listed = json.loads((folder / MANIFEST).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"no readable {MANIFEST} (incomplete)"
    present = {p.relative_to(folder).as_posix(): p for p in _files(folder)}
    for name in sorted(set(listed) | set(present)):
        if name not in present:
            return f"{name} is missing"
        if name not in listed:
            return f"{name} is not in its manifest"
        path, expected = present[name], listed[name]
        if path.stat().st_size != expected.get("size"):
            return f"{name} has {path.stat().st_size} bytes, the manifest says {expected.get('size')}"
        if sha256_file(path) != expected.get("sha256"):
            return f"{name} does not match its sha256 in the manifest"
    return None


def _complete(folder: Path) -> bool:
    return folder.is_dir() and (folder / MANIFEST).is_file()


def _candidates(out_dir: Path) -> list[Path]:
    """Checkpoint folders, newest first: the ``latest`` pointer, then the ``step-*`` folders by step."""
    root = Path(out_dir) / CHECKPOINTS
    pointer = root / LATEST
    named = [root / pointer.read_text().strip()] if pointer.is_file() else []
    steps = sorted((p for p in root.glob("step-*") if p.is_dir()), reverse=True)
    return list(dict.fromkeys(named + steps))


def latest_checkpoint(out_dir: Path) -> Path | None:
    """The last complete checkpoint (manifest written), without reading its files: see :func:`verified_checkpoint`."""
    return next((folder for folder in _candidates(out_dir) if _complete(folder)), None)


def verified_checkpoint(out_dir: Path) -> Path | None:
    """The newest checkpoint whose files match its manifest; each newer one that does not is moved aside to
    ``rejected-<name>`` with a warning naming it (a resumed run never loads damaged weights or optimizer state).

    Only one process may call this for an ``out_dir`` (rank 0); the others then use :func:`latest_checkpoint`.
    """
    for folder in _candidates(out_dir):
        if not folder.is_dir():
            continue
        problem = checkpoint_problem(folder)
        if problem is None:
            return folder
        aside = folder.with_name(f"{REJECTED_PREFIX}{folder.name}")
        if aside.exists():
            shutil.rmtree(aside)
        folder.rename(aside)
        log.warning("checkpoint %s failed verification (%s): not resuming from it; moved to %s",
                    folder, problem, aside)
    return None


def clean_partial(out_dir: Path) -> None:
    """Remove temporary checkpoint folders left by a crash (:func:`atomic_folder`'s staging names)."""
    for leftover in (Path(out_dir) / CHECKPOINTS).glob(".step-*.tmp-*"):
        shutil.rmtree(leftover, ignore_errors=True)


def load_trainer_state(folder: Path) -> dict[str, Any]:
    return json.loads((folder / STATE_FILE).read_text())


def load_tensors(folder: Path, stem: str) -> dict[str, Any] | None:
    """A ``trainer/<stem>.pt`` state dict, loaded with ``weights_only=True`` (never unpickles objects)."""
    path = folder / TRAINER_DIR / f"{stem}.pt"
    if not path.is_file():
        return None
    return torch.load(path, map_location="cpu", weights_only=True)


def resume_point(out_dir: Path, resume: bool, main: bool, barrier: Callable[[], None]) -> Path | None:
    """The checkpoint a run resumes from (None: it starts afresh). The main rank cleans what an interrupted write
    left, discards earlier checkpoints when not resuming, and verifies them (moving damaged ones aside) before any
    rank reads one."""
    found = None
    if main:
        clean_partial(out_dir)
        for leftover in out_dir.glob(".final.tmp-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        if not resume and (out_dir / CHECKPOINTS).exists():
            log.warning("resume=False: discarding earlier checkpoints in %s", out_dir)
            shutil.rmtree(out_dir / CHECKPOINTS)
        if resume:
            found = verified_checkpoint(out_dir)
    barrier()
    if resume and not main:
        found = latest_checkpoint(out_dir)
    return found


def resumable_changes_only(spec: Any, saved: dict[str, Any], resumable: frozenset[str], out_dir: Path) -> None:
    """Refuse to resume unless the checkpoint's settings equal ``spec``'s but for ``resumable`` ones; a setting the
    checkpoint does not record (one added to focusflow after it was written) counts as what it was then (its former
    default, else its default), so an upgrade resumes."""
    current = spec.model_dump(mode="json")
    saved = type(spec).written_before(saved)
    try:
        saved = {**type(spec).model_validate(saved).model_dump(mode="json"), **saved}
    except ValueError:  # settings this version no longer reads: compared as written
        pass
    changed = sorted(k for k in current if k not in resumable and saved.get(k) != current[k])
    if changed:
        raise InputError(f"{out_dir} holds a run with different settings ({', '.join(changed)}); "
                         "use a new out_dir or resume=False")
    if spec.total_steps != type(spec).model_validate(saved).total_steps:
        log.warning("the budget changed since the checkpoint: the learning-rate schedule changes with it")


def restore_rng(folder: Path, rank: int) -> None:
    """Put back the random state a checkpoint holds for ``rank`` (older checkpoints hold one for all ranks)."""
    if (rng := load_tensors(folder, f"rng-rank{rank}") or load_tensors(folder, "rng")) is not None:
        set_rng_state(rng)
