"""Model FLOPs per trained token and model FLOPs utilization (MFU).

Counts matrix multiplications only (the PaLM/Megatron convention): every weight matrix of the
transformer body costs 2 FLOPs per weight per token forward, attention scores and the weighted
sum cost 4·T·d per token per layer, and the LM head (its transform plus the |V|-wide projection)
counts only at the positions where it runs (the masked 15% with masked-only projection).
Training = forward + backward = 3 × forward. MFU divides achieved model FLOPs/s by the device's peak: a GPU's
dense bf16 peak from its name, a CPU's ceiling measured once on this machine for the run's precision (the best of
4096×1536×1536 products run for a few seconds in bf16 or float32 at the run's thread count; :func:`cpu_ceiling`).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from focusflow.models.loading import lm_head

# Dense bf16/fp16 tensor-core peaks (FLOP/s), matched by substring of the CUDA device name, most specific first.
PEAK_FLOPS = (
    ("H100 PCIe", 756e12), ("H100 NVL", 835e12), ("H100", 989e12), ("H200", 989e12), ("GH200", 989e12),
    ("B200", 2250e12), ("A100", 312e12), ("L40S", 362e12), ("L40", 181e12), ("L4", 121e12), ("A10G", 70e12),
    ("A10", 125e12), ("RTX 4090", 165e12), ("RTX 3090", 71e12), ("V100", 125e12), ("T4", 65e12),
)


def _matrix_params(module: nn.Module, skip: set[int]) -> int:
    """Weights of the Linear / GPT-2 Conv1D layers under ``module`` (excluding modules in ``skip``)."""
    total = 0
    for sub in module.modules():
        if id(sub) in skip:
            continue
        weight = getattr(sub, "weight", None)
        if isinstance(sub, nn.Linear) or type(sub).__name__ == "Conv1D":
            if weight is not None and weight.dim() == 2:
                total += weight.numel()
    return total


def flops_per_token(model: nn.Module, seq_len: int, lm_loss: str, masked_only: bool,
                    mlm_probability: float = 0.15) -> float | None:
    """Training FLOPs (forward + backward) per input token for a Hugging Face MLM or causal LM
    (None when the config names no layer count / width: MFU is then not reported)."""
    config = model.config
    layers = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", None)
    hidden = getattr(config, "hidden_size", None) or getattr(config, "n_embd", None)
    if not layers or not hidden:
        return None
    head = lm_head(model) if lm_loss == "mlm" else model.get_output_embeddings()
    output = model.get_output_embeddings()
    head_ids = {id(m) for m in head.modules()} if head is not None else set()
    body = _matrix_params(model.base_model, head_ids | ({id(output)} if output is not None else set()))
    head_matrices = _matrix_params(head, set()) if head is not None else 0
    if lm_loss == "mlm":
        head_fraction = mlm_probability if masked_only else 1.0
    else:
        head_fraction = (seq_len - 1) / seq_len
    forward = 2 * body + 4 * layers * seq_len * hidden + 2 * head_matrices * head_fraction
    return 3.0 * forward


def body_flops_per_token(model: nn.Module, seq_len: float, layers_used: int | None = None,
                         trained: bool = True) -> float | None:
    """Training FLOPs per token through the body of ``model`` (a task head's few weights and the LM head left out):
    the forward through the first ``layers_used`` layers (all by default), times 3 when the body trains (forward,
    activation and weight gradients: fine-tuning) or times 2 when it is frozen and only the input embeddings learn
    (align: no weight gradient). None for a model that is not a transformers model (no config to count from)."""
    config = getattr(model, "config", None)
    layers = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", None)
    hidden = getattr(config, "hidden_size", None) or getattr(config, "n_embd", None)
    if not layers or not hidden or not hasattr(model, "base_model"):
        return None
    output = model.get_output_embeddings()
    body = _matrix_params(model.base_model, {id(output)} if output is not None else set())
    used = min(layers_used or layers, layers)
    return (3.0 if trained else 2.0) * (2 * body * used / layers + 4 * used * seq_len * hidden)


@dataclass(frozen=True)
class Peak:
    """The FLOP/s an MFU is measured against, and where that number came from."""

    flops: float
    source: str  # "FOCUSFLOW_PEAK_TFLOPS", "NVIDIA H100 bf16 table", "calibrated: CPU float32, 2 threads"

    def to_dict(self) -> dict[str, Any]:
        return {"peak_tflops": round(self.flops / 1e12, 4), "peak_source": self.source}


def peak(device: torch.device | str, dtype: torch.dtype | None = None) -> Peak | None:
    """What the device can do: ``FOCUSFLOW_PEAK_TFLOPS`` × 1e12 when set; a CUDA device's dense bf16 peak from its
    name; on a CPU the calibrated ceiling of the run's matrix products (``dtype``: bf16 under bf16 autocast, else
    float32), measured once per machine (:func:`cpu_ceiling`). None for an unknown accelerator."""
    override = os.environ.get("FOCUSFLOW_PEAK_TFLOPS")
    if override:
        return Peak(float(override) * 1e12, "FOCUSFLOW_PEAK_TFLOPS")
    device = torch.device(device)
    if device.type == "cpu":
        dtype = dtype or torch.float32
        return Peak(cpu_ceiling(dtype), f"calibrated: CPU {str(dtype).removeprefix('torch.')}, "
                                        f"{torch.get_num_threads()} threads")
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name(device)
    for key, value in PEAK_FLOPS:
        if key in name:
            return Peak(value, f"{name} dense bf16 table")
    return None


def peak_flops(device: torch.device | str, dtype: torch.dtype | None = None) -> float | None:
    """:func:`peak`'s FLOP/s (None when unknown)."""
    found = peak(device, dtype)
    return found.flops if found is not None else None


#: The product a CPU's ceiling is measured on (M × K × N): large enough that the kernel, not the call, is timed.
CEILING_SHAPE = (4096, 1536, 1536)
CEILING_FILE = "cpu-ceiling.json"


def measure_matmul(dtype: torch.dtype, shape: tuple[int, int, int] = CEILING_SHAPE, seconds: float = 6.0,
                   at_least: int = 3) -> float:
    """FLOP/s of the fastest of the products run back to back for ``seconds`` (at least ``at_least`` of them) at this
    process's thread count: a ceiling is the best the cores do, and a virtual machine's cores can take seconds of
    work to reach their clock (seen here: 70 GFLOP/s for the first 5 s of 4096×1536×1536 in fp32, then 110)."""
    m, k, n = shape
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=generator).to(dtype)
    b = torch.randn(k, n, generator=generator).to(dtype)
    torch.matmul(a, b)
    best, runs, began = math.inf, 0, time.perf_counter()
    while runs < at_least or time.perf_counter() - began < seconds:
        started = time.perf_counter()
        torch.matmul(a, b)
        best, runs = min(best, time.perf_counter() - started), runs + 1
    return 2.0 * m * k * n / best


def cpu_ceiling(dtype: torch.dtype = torch.float32, cache_dir: Path | None = None) -> float:
    """This CPU's matrix-product ceiling in ``dtype`` (FLOP/s) at the current thread count: measured once (about 6 s)
    and cached per machine fingerprint (the one ``lapt-budget`` keys on) in the user cache, with the load it ran
    under; a ceiling measured under load is measured again once the machine is quieter (the best is kept)."""
    from platformdirs import user_cache_dir

    from focusflow.storage.atomic import atomic_write
    from focusflow.training.machine import machine_fingerprint

    path = Path(cache_dir or user_cache_dir("focusflow")) / CEILING_FILE
    key = json.dumps({**machine_fingerprint(), "dtype": str(dtype)}, sort_keys=True)
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cached = {}
    if not isinstance(cached, dict):
        cached = {}
    known = cached.get(key) if isinstance(cached.get(key), dict) and cached[key].get("flops") else None
    load = _load_average()
    if known is not None and not _busier(load, known.get("load")):
        return float(known["flops"])
    # a ceiling measured on a busy machine is too low: measured again once the machine is quieter, the best kept
    seconds = float(os.environ.get("FOCUSFLOW_CEILING_SECONDS", "6"))  # the tests shorten it
    flops = max(measure_matmul(dtype, seconds=seconds), float(known["flops"]) if known else 0.0)
    cached[key] = {"flops": flops, "shape": list(CEILING_SHAPE), "load": load,
                   "measured": time.strftime("%Y-%m-%dT%H:%M:%S")}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(cached, indent=1))
    return flops


def _busier(now: float | None, then: float | None) -> bool:
    """Whether the cached measurement ran under clearly more load than there is now (half a core or more)."""
    return now is not None and then is not None and then - now >= 0.5


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def mfu(tokens_per_s: float, flops_token: float | None, peak: float | None) -> float | None:
    return None if not peak or not flops_token else tokens_per_s * flops_token / peak


def with_efficiency(summary: dict[str, Any], flops_token: float | None, measured_peak: Peak | None) -> dict[str, Any]:
    """A run's summary with its MFU (unless it measured its own), FLOPs per token and the peak they are against."""
    speed = summary.get("tokens_per_s")
    peak_flops = measured_peak.flops if measured_peak is not None else None
    return {**summary, "mfu": summary.get("mfu") or (mfu(speed, flops_token, peak_flops) if speed else None),
            "flops_per_token": summary.get("flops_per_token") or flops_token,
            **(measured_peak.to_dict() if measured_peak is not None else {})}
