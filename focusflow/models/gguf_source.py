"""Convert a wheel-shipped GGUF decoder (``gemma3:270m``, ``smollm2:135m``) into a float32 Hugging Face folder.

transformers dequantizes the GGUF tensors (``gguf_file=``) into a float32 ``*ForCausalLM`` and rebuilds
the tokenizer from the same file. The loaded model carries the GGUF quantizer state
(``hf_quantizer``, ``config.quantization_config``); ``save_pretrained`` refuses a quantized model
that cannot be serialized, and the weights are plain float32 by then, so that state is dropped.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import tempfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

from focusflow.logs import is_verbose, progress_lines, quiet_transformers_progress
from focusflow.storage.atomic import atomic_folder
from focusflow.tokenizer.gguf_wheels import (
    CONVERSION_VERSION,
    GGUF_SOURCES,
    GgufSourceError,
    converted_folder,
    expected_sha256,
    gguf_file,
)
from focusflow.tokenizer.source_record import has_source_record, write_source_record

log = logging.getLogger(__name__)


def drop_gguf_quantizer(model) -> None:
    """Forget that ``model`` was read from a quantized file (its weights are dequantized float32 already)."""
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


@contextlib.contextmanager
def _quiet_dequantization_bar() -> Iterator[None]:
    """transformers' GGUF reader draws its own tqdm bar (not through its logging hook): hidden unless verbose."""
    if is_verbose():
        yield
        return
    from transformers import modeling_gguf_pytorch_utils as reader

    drawn = reader.tqdm
    reader.tqdm = functools.partial(drawn, disable=True)
    try:
        yield
    finally:
        reader.tqdm = drawn


def convert_gguf_source(spec: str, out_dir: str | os.PathLike[str], *, replace: bool = False) -> dict:
    """Join/check the wheel's GGUF file, dequantize it to float32 and save model + tokenizer into ``out_dir``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if spec not in GGUF_SOURCES:
        raise GgufSourceError(f"unknown GGUF source {spec!r}; expected one of {sorted(GGUF_SOURCES)}")
    wheel = GGUF_SOURCES[spec]
    try:
        import gguf  # noqa: F401  (transformers reads GGUF with it)
    except ImportError:
        raise GgufSourceError(f"reading {spec}'s GGUF file needs the gguf package: pip install gguf "
                              "(or pip install 'focusflow[llm]')") from None
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".focusflow-gguf-", dir=out.parent) as work, \
            gguf_file(spec, work) as path:
        # a minute in three long steps (reading the GGUF file's vocabulary, then its metadata and weights, then
        # writing the float32 folder), each said as it starts: no bar can count inside transformers' reader
        progress_lines.info("source: converting %s to a float32 model folder, once: reading its tokenizer", spec)
        quiet_transformers_progress()  # its load and save bars, unless verbose
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        progress_lines.info("source: converting %s: reading and dequantizing its weights", spec)
        with _quiet_dequantization_bar():
            model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
        drop_gguf_quantizer(model)
        progress_lines.info("source: converting %s: writing %.0f MB of float32 weights", spec,
                            sum(p.numel() for p in model.parameters()) * 4 / 1e6)
        with atomic_folder(out, replace=replace) as staging:
            model.save_pretrained(staging, safe_serialization=True)
            tokenizer.save_pretrained(staging)
            stats = {
                "source": spec,
                "file": path.name,
                "file_sha256": expected_sha256(spec),
                "package": wheel.distribution,
                "package_version": metadata.version(wheel.distribution),
                "conversion_version": CONVERSION_VERSION,
                "architecture": type(model).__name__,
                "n_params": int(sum(p.numel() for p in model.parameters())),
                "vocab_size": len(tokenizer),
                "tokenizer_family": wheel.family,
                "licence": wheel.licence,
                "note": "weights are the GGUF file's quantized values, dequantized by transformers to float32",
            }
            write_source_record(staging, stats)
    log.info("converted %s to %s", spec, out)
    return stats


def resolve_gguf_source(spec: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The converted folder of ``spec``, converting it once."""
    folder = converted_folder(spec, cache_dir)
    if has_source_record(folder) and (folder / "model.safetensors").is_file():
        return folder
    convert_gguf_source(spec, folder, replace=True)
    return folder
