"""Model FLOPs per trained token and model FLOPs utilization (MFU).

Counts matrix multiplications only (the PaLM/Megatron convention): every weight matrix of the
transformer body costs 2 FLOPs per weight per token forward, attention scores and the weighted
sum cost 4·T·d per token per layer, and the LM head (its transform plus the |V|-wide projection)
counts only at the positions where it runs (the masked 15% with masked-only projection).
Training = forward + backward = 3 × forward. MFU divides achieved model FLOPs/s by the device's
dense bf16 peak.
"""

from __future__ import annotations

import os

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


def flops_per_token(model: nn.Module, seq_len: int, objective: str, masked_only: bool,
                    mlm_probability: float = 0.15) -> float | None:
    """Training FLOPs (forward + backward) per input token for a Hugging Face MLM or causal LM
    (None when the config names no layer count / width: MFU is then not reported)."""
    config = model.config
    layers = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", None)
    hidden = getattr(config, "hidden_size", None) or getattr(config, "n_embd", None)
    if not layers or not hidden:
        return None
    head = lm_head(model) if objective == "mlm" else model.get_output_embeddings()
    output = model.get_output_embeddings()
    head_ids = {id(m) for m in head.modules()} if head is not None else set()
    body = _matrix_params(model.base_model, head_ids | ({id(output)} if output is not None else set()))
    head_matrices = _matrix_params(head, set()) if head is not None else 0
    if objective == "mlm":
        head_fraction = mlm_probability if masked_only else 1.0
    else:
        head_fraction = (seq_len - 1) / seq_len
    forward = 2 * body + 4 * layers * seq_len * hidden + 2 * head_matrices * head_fraction
    return 3.0 * forward


def peak_flops(device: torch.device | str) -> float | None:
    """The device's dense bf16 peak, or ``FOCUSFLOW_PEAK_TFLOPS`` × 1e12 when set; None on CPU/unknown."""
    override = os.environ.get("FOCUSFLOW_PEAK_TFLOPS")
    if override:
        return float(override) * 1e12
    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name(device)
    for key, value in PEAK_FLOPS:
        if key in name:
            return value
    return None


def mfu(tokens_per_s: float, flops_token: float | None, peak: float | None) -> float | None:
    return None if not peak or not flops_token else tokens_per_s * flops_token / peak
