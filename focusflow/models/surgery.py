"""Embedding surgery: read a source model's per-token parameters, write a complete model for a new vocabulary.

Per-token parameters are the input embeddings, untied output embeddings (decoder LMs) and the
output bias of an MLM head. The written folder holds config (new vocab size and special-token
ids), safetensors weights and the target tokenizer, so ``AutoModelFor*.from_pretrained`` and
``AutoTokenizer.from_pretrained`` load it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from focusflow.errors import InputError
from focusflow.models.loading import uses_padding_offset
from focusflow.storage.atomic import atomic_folder

log = logging.getLogger(__name__)


@dataclass
class TokenParameters:
    """The source model's per-token parameters, as float32 numpy arrays keyed by role."""

    matrices: dict[str, np.ndarray]
    tied: bool


def _output_bias(model: Any) -> torch.nn.Parameter | None:
    output = model.get_output_embeddings()
    if output is None:
        return None
    for owner in (model, *model.modules()):
        bias = getattr(owner, "bias", None)
        if owner is not output and isinstance(bias, torch.nn.Parameter) and bias.dim() == 1 \
                and bias.shape[0] == output.weight.shape[0] and owner in dict(model.named_modules()).values() \
                and any(child is output for child in owner.children()):
            return bias
    bias = getattr(output, "bias", None)
    return bias if isinstance(bias, torch.nn.Parameter) else None


def token_parameters(model: Any) -> TokenParameters:
    """Input embeddings, untied output embeddings and MLM output bias of ``model``."""
    inputs = model.get_input_embeddings().weight
    matrices = {"embeddings": inputs.detach().float().numpy().copy()}
    output = model.get_output_embeddings()
    tied = output is None or output.weight is inputs or output.weight.data_ptr() == inputs.data_ptr()
    if output is not None and not tied:
        matrices["output_embeddings"] = output.weight.detach().float().numpy().copy()
    bias = _output_bias(model)
    if bias is not None:
        matrices["output_bias"] = bias.detach().float().numpy().copy()
    return TokenParameters(matrices, tied)


def _special_ids(tokenizer: Any) -> dict[str, int | None]:
    ids = {}
    for name in ("pad", "bos", "eos", "sep", "cls", "mask", "unk"):
        token = getattr(tokenizer, f"{name}_token", None)
        ids[f"{name}_token_id"] = tokenizer.convert_tokens_to_ids(str(token)) if token is not None else None
    return ids


def _shift_positions(model: Any, old_pad: int | None, new_pad: int | None) -> None:
    """RoBERTa-style models number positions from pad_token_id + 1; keep each position's vector."""
    if old_pad is None or new_pad is None or old_pad == new_pad:
        return
    embeddings = getattr(getattr(model, model.base_model_prefix, model), "embeddings", None)
    positions = getattr(embeddings, "position_embeddings", None)
    if positions is None:
        return
    weight = positions.weight.data
    old = weight.clone()
    usable = weight.shape[0] - max(old_pad, new_pad) - 1
    weight[new_pad + 1: new_pad + 1 + usable] = old[old_pad + 1: old_pad + 1 + usable]
    if hasattr(embeddings, "padding_idx"):
        embeddings.padding_idx = new_pad
    if hasattr(positions, "padding_idx"):
        positions.padding_idx = new_pad
    log.info("shifted position embeddings for pad id %s -> %s", old_pad, new_pad)


def write_model(model: Any, tokenizer: Any, matrices: dict[str, np.ndarray], out_dir: Path) -> dict[str, Any]:
    """Resize ``model`` to ``matrices['embeddings']`` rows, set every per-token parameter, save model + tokenizer."""
    out_dir = Path(out_dir)
    new_vocab = len(matrices["embeddings"])
    if len(tokenizer) != new_vocab:
        raise InputError(f"tokenizer has {len(tokenizer)} tokens but the embeddings have {new_vocab} rows")
    bias_before = _output_bias(model)
    old_pad = getattr(model.config, "pad_token_id", None)
    model.resize_token_embeddings(new_vocab, mean_resizing=False)
    with torch.no_grad():
        inputs = model.get_input_embeddings()
        inputs.weight.data = torch.from_numpy(matrices["embeddings"]).to(inputs.weight.dtype).contiguous()
        output = model.get_output_embeddings()
        if "output_embeddings" in matrices:
            output.weight = torch.nn.Parameter(torch.from_numpy(matrices["output_embeddings"]).contiguous())
            output.out_features = new_vocab
        if "output_bias" in matrices:
            bias = torch.nn.Parameter(torch.from_numpy(matrices["output_bias"]).contiguous())
            head = next((m for m in model.modules() if any(c is output for c in m.children())), None)
            if head is not None and isinstance(getattr(head, "bias", None), torch.nn.Parameter):
                head.bias = bias
            if output is not None and getattr(output, "bias", None) is not None:
                output.bias = bias
        elif bias_before is not None:
            log.warning("source model has an output bias but no transferred bias was given; it was resized only")
    ids = _special_ids(tokenizer)
    config = model.config
    config.vocab_size = new_vocab
    for key, value in ids.items():
        if key in ("pad_token_id", "bos_token_id", "eos_token_id") or hasattr(config, key):
            setattr(config, key, value)
    if uses_padding_offset(config):
        _shift_positions(model, old_pad, ids["pad_token_id"])
    generation = getattr(model, "generation_config", None)
    if generation is not None:
        for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
            if hasattr(generation, key):
                setattr(generation, key, ids[key])
    if "output_embeddings" not in matrices:
        model.tie_weights()
    with atomic_folder(out_dir) as staging:
        model.save_pretrained(str(staging), safe_serialization=True)
        tokenizer.save_pretrained(str(staging))
    return {"vocab_size": new_vocab, "n_params": int(sum(p.numel() for p in model.parameters())),
            "special_token_ids": ids}
