"""Atomic, resumable LAPT checkpoints with a keep-last-K policy.

Layout under ``out_dir/checkpoints``::

    step-00000500/                 a complete ``save_pretrained`` folder (safetensors + tokenizer) plus
        trainer_state.json         step, samples, tokens, stage, spec, metric history (JSON)
        trainer/optimizer.pt       optimizer state   } tensors, numbers, strings, lists and dicts only:
        trainer/scheduler.pt       LR scheduler      } ``torch.save`` of plain state dicts, read back with
        trainer/rng.pt             torch CPU/CUDA RNG} ``torch.load(weights_only=True)`` (no pickled objects)
        trainer/scaler.pt          fp16 GradScaler (when used)
        trainer/trainable.safetensors   LoRA runs: adapter + trainable weights (the HF folder holds merged weights)
    latest                         name of the last complete checkpoint (replaced atomically)

A checkpoint is written under a temporary name and renamed into place when complete, so a
crash (even ``kill -9``) leaves either the previous checkpoints or a finished new one.
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

from focusflow.storage.atomic import atomic_folder, atomic_write

log = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints"
LATEST = "latest"
STATE_FILE = "trainer_state.json"
TRAINER_DIR = "trainer"
STATE_FORMAT = 1


def step_name(step: int) -> str:
    return f"step-{step:08d}"


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


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
    with atomic_folder(final) as staging:
        write_model(staging)
        (staging / TRAINER_DIR).mkdir(exist_ok=True)
        for stem, state in tensors.items():
            torch.save(state, staging / TRAINER_DIR / f"{stem}.pt")
        state = {"format": STATE_FORMAT, **trainer_state}
        (staging / STATE_FILE).write_text(json.dumps(state, indent=1, ensure_ascii=False))
    atomic_write(root / LATEST, final.name + "\n")
    for old in sorted(p for p in root.glob("step-*") if p.is_dir())[:-keep_last]:
        if old != final:
            shutil.rmtree(old, ignore_errors=True)
    return final


def _complete(folder: Path) -> bool:
    return folder.is_dir() and (folder / STATE_FILE).is_file()


def latest_checkpoint(out_dir: Path) -> Path | None:
    """The last complete checkpoint: the ``latest`` pointer, else the highest complete ``step-*`` folder."""
    root = Path(out_dir) / CHECKPOINTS
    pointer = root / LATEST
    if pointer.is_file():
        candidate = root / pointer.read_text().strip()
        if _complete(candidate):
            return candidate
    for folder in sorted(root.glob("step-*"), reverse=True):
        if _complete(folder):
            return folder
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
