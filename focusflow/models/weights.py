"""The one check that a model's weights are still a model: finite, and no tensor grown far past where it started.

A training run that blows up does not always reach ``inf``: at a learning rate of 1e30 (or 1e3) every weight jumps
to around that size and stays a finite number, and a model of such weights reads as fine to every check that only
asks for finite values. So each tensor's root mean square is compared with its value at the start of the run
(for a published folder without a stored check: with the model it was initialized from, else its source). LAPT and
align check every checkpoint and their final model with it (``training.loop``); ``publish`` reads the stored result,
or checks the folder itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

#: A tensor's RMS may grow to this many times its starting RMS.
RMS_GROWTH_LIMIT = 10.0
#: The starting RMS a tensor that starts near zero (a bias, a LoRA matrix) is measured against.
RMS_FLOOR = 0.1
#: Without a starting point (a folder of unknown origin), the largest RMS a tensor of a sane model has.
RMS_ABSOLUTE_LIMIT = 1e3


@dataclass(frozen=True)
class WeightCheck:
    """The result: ``passed``, what failed (``problem``), and the largest growth seen (``max_rms_ratio`` on
    ``worst``) against ``against`` (``start``, the role of the model compared with, e.g. ``source``, or
    ``absolute``); ``reference`` names that model where it is an artifact, ``uncompared`` counts the tensors it
    lacks (held to the absolute bound instead)."""

    passed: bool
    against: str
    max_rms_ratio: float | None = None
    worst: str | None = None
    problem: str | None = None
    reference: str | None = None
    uncompared: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WeightCheck:
        return cls(**{key: data[key] for key in ("passed", "against", "max_rms_ratio", "worst", "problem", "reference",
                                                 "uncompared") if key in data})


_RMS_CHUNK = 1 << 22  # elements summed in float64 at a time: no float64 copy of a whole embedding matrix


def tensor_rms(named: Iterable[tuple[str, torch.Tensor]]) -> dict[str, float]:
    """Each tensor's root mean square (float64 sums over chunks; ``inf``/``nan`` for a tensor holding a non-finite
    value)."""
    values: dict[str, float] = {}
    with torch.no_grad():
        for name, tensor in named:
            if tensor.numel():
                flat = tensor.detach().reshape(-1)
                squares = sum(float(chunk.double().pow(2).sum()) for chunk in flat.split(_RMS_CHUNK))
                values[name] = math.sqrt(squares / flat.numel())
    return values


def folder_rms(folder: Path) -> dict[str, float]:
    """:func:`tensor_rms` of every tensor of a model folder's safetensors files, read one tensor at a time."""
    from safetensors import safe_open

    values: dict[str, float] = {}
    for file in sorted(Path(folder).glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as handle:
            values.update(tensor_rms((name, handle.get_tensor(name)) for name in handle.keys()))  # noqa: SIM118
    return values


def check_weights(current: Mapping[str, float], start: Mapping[str, float] | None, against: str = "start",
                  limit: float = RMS_GROWTH_LIMIT, reference: str | None = None) -> WeightCheck:
    """Whether every tensor is finite and its RMS within ``limit`` × its starting RMS (floored at
    :data:`RMS_FLOOR`); a tensor ``start`` lacks (or every tensor, without ``start``) within
    :data:`RMS_ABSOLUTE_LIMIT`. Tensors compare by name alone: a new vocabulary's embedding matrix, of another shape
    than the start's, compares by its RMS too.

    ``against``: ``start`` (the start of a training run), or the role of the model ``start`` was measured on
    (``source``, ``init`` …), which ``reference`` names."""
    label = against if start is not None else "absolute"
    where = "at the start" if against == "start" else f"in the {against} model"
    bad = sorted(name for name, value in current.items() if not math.isfinite(value))
    growth = {name: value / max(start[name], RMS_FLOOR) for name, value in current.items()
              if start is not None and name in start}
    found = {"reference": reference if start is not None else None,
             "uncompared": (len(current) - len(growth)) or None if start is not None else None}
    if bad:
        return WeightCheck(False, label, worst=bad[0],
                           problem=f"{len(bad)} tensor(s) hold non-finite values ({', '.join(bad[:3])})", **found)
    worst = max(growth, key=growth.__getitem__) if growth else None
    largest = round(growth[worst], 3) if worst is not None else None
    if worst is not None and growth[worst] > limit:
        began = start[worst]  # type: ignore[index]
        return WeightCheck(False, label, largest, worst, f"{worst} grew to RMS {current[worst]:.3g}, past {limit:g}x "
                           f"its RMS {where} ({began:.3g}; bound {limit * max(began, RMS_FLOOR):.3g})", **found)
    huge = sorted(name for name, value in current.items() if name not in growth and value > RMS_ABSOLUTE_LIMIT)
    if huge:
        return WeightCheck(False, label, largest, huge[0], f"{huge[0]} has RMS {current[huge[0]]:.3g}, more than "
                           f"the {RMS_ABSOLUTE_LIMIT:g} no trained model's tensor reaches", **found)
    return WeightCheck(True, label, largest, worst, **found)


__all__ = ["RMS_ABSOLUTE_LIMIT", "RMS_FLOOR", "RMS_GROWTH_LIMIT", "WeightCheck", "check_weights", "folder_rms",
           "tensor_rms"]
