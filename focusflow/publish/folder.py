"""The Hub repository folder of a stored model: weights, tokenizer, configs, transfer report, card, lineage.

The folder is deterministic for a given lineage (no timestamps, no hosts): a stored ``publish``
artifact has the same content hash however often it is rebuilt.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

import yaml

from focusflow.methods import model_label
from focusflow.publish.card import LICENCE_FILE, NOTICE_FILE, build_card
from focusflow.publish.facts import gather_facts
from focusflow.publish.lineage import (
    LINEAGE_FILE,
    TRANSFER_REPORT,
    TRANSFER_TOTALS,
    Lineage,
    lineage_record,
    model_language,
)
from focusflow.storage import ArtifactStore
from focusflow.training.checkpoint import STATE_FILE
from focusflow.training.monitor import SUMMARY_FILE

if TYPE_CHECKING:
    from focusflow.models.weights import WeightCheck

CARD_FILE, CONFIG_FILE = "README.md", "focusflow_config.yaml"
# Files of a model artifact that belong on the Hub (top level only: checkpoints keep optimizer state in subfolders).
# transformers 5 saves a tokenizer's chat template as ``chat_template.jinja``.
MODEL_SUFFIXES = (".safetensors", ".json", ".model", ".parquet", ".txt", ".csv", ".png", ".tiktoken", ".jinja")
NOT_PUBLISHED = {STATE_FILE, SUMMARY_FILE}


def run_configuration(lineage: Lineage, language: str | None = None) -> dict[str, Any]:
    """The run configuration that produced the model, rebuilt from its lineage's stored parameters and validated.

    Its language is the recorded one, else ``language`` (:func:`~focusflow.publish.lineage.model_language`: neither
    is an error). Settings no stored stage depends on keep their defaults; a local source folder or evaluation data
    is named by its content hash (the path is not part of any key).
    """
    from focusflow.config import build_config

    a = lineage.ancestors
    data: dict[str, Any] = {"language": model_language(lineage, language)}
    if "corpus" in a:
        data.update({k: a["corpus"].params[k] for k in ("language", "corpus", "cleaning") if k in a["corpus"].params})
    for stage in ("dedup", "split", "tokenizer", "fasttext"):
        if stage in a and stage in a[stage].params:
            data[stage] = a[stage].params[stage]
    if "decontaminate" in a:
        data.setdefault("dedup", {}).update(decontaminate=True,
                                            decontamination_window=a["decontaminate"].params.get("window", 50))
    if "source" in a:
        source = a["source"].params
        data["source_model"] = (source["source_model"] if source.get("source_model") != "local"
                                else f"local-folder-sha256:{source.get('fingerprint', '')}")
        if source.get("options", {}).get("head_spec"):
            data["source_head"] = source["options"]["head_spec"]
    model_stages = {lineage.model.stage, *a}
    init = lineage.init
    if init is not None:
        options = init.params.get("options", {})
        pruned = (lineage.pruned_source or init).params.get("options", {})
        settings = {"seed": init.params.get("seed", 0),
                    **{k: options[k] for k in ("rare_tokens", "extend_top_n") if k in options},
                    **({"prune_budget": pruned["prune_budget"]} if "prune_budget" in pruned else {})}
        if lineage.candidate is not None:  # built beside the methods: the run that rebuilds it builds it alone
            name = lineage.candidate
            data["init"] = {"methods": [], "candidates": [name], **settings}
        else:
            name = model_label(str(init.params.get("method", "focus")), ("align",) if "align" in model_stages else ())
            data["init"] = {"methods": [name], "candidates": [], "mode": init.params.get("mode", "replace"),
                            **settings}
        align = a.get("align") or (lineage.model if lineage.model.stage == "align" else None)
        if align is not None:
            data["init"]["refine"] = align.params.get("align", {})
        lapt = a.get("lapt") or (lineage.model if lineage.model.stage == "lapt" else None)
        if lapt is not None:
            data["lapt"] = lapt.params.get("lapt", {})
            data["orchestration"] = {"lapt_methods": [name]}
        elif lineage.model.stage == "lapt-checkpoint":  # its run's settings are not in its parameters
            data["orchestration"] = {"lapt_methods": [name]}
        else:  # a model published at initialization: the run that rebuilds it trains none (not the default budget)
            data["lapt"] = {"steps": 0}
    evaluation: dict[str, Any] = {}
    if lineage.intrinsic is not None:
        evaluation.update(heldout_sentences=lineage.intrinsic.params.get("max_sentences", 500),
                          precision=lineage.intrinsic.params.get("precision", "auto"))
    if lineage.downstream is not None:
        evaluation.update({k: v for k, v in (lineage.downstream.params.get("evaluation") or {}).items()})
    if evaluation:
        data["evaluation"] = evaluation
    data.setdefault("orchestration", {})["evaluate_original"] = lineage.source_intrinsic is not None
    return build_config(data).model_dump(mode="json", exclude={"store"})


def _copy_model_files(store: ArtifactStore, lineage: Lineage, out: Path) -> list[str]:
    model = lineage.model
    names = [n for n in model.files if "/" not in n and n.endswith(MODEL_SUFFIXES) and n not in NOT_PUBLISHED]
    folder = store.fetch(model, files=names)
    for name in names:
        shutil.copyfile(folder / name, out / name)
    transfer = lineage.transfer
    if transfer is not None and transfer is not model:  # LAPT and align keep the initialization's report
        wanted = [n for n in (TRANSFER_REPORT, TRANSFER_TOTALS) if n in transfer.files]
        origin = store.fetch(transfer, files=wanted)
        for name in wanted:
            shutil.copyfile(origin / name, out / name)
        names += wanted
    return names


#: Where a published value holds a path of the machine that made the model: its last part is kept.
LOCAL_PLACEHOLDER = "<local>"
_TASK_PATH = re.compile(r"^([a-z]+):((?:/|~/|file://)\S*)$")


def without_local_paths(value: Any) -> Any:
    """``value`` with every absolute local path (a corpus file, a data root, a folder task, a local store's URI)
    reduced to ``<local>/<its name>``: a public repository names no one's home folder. Keys, hashes and Hub ids
    stay; the files are named by content elsewhere (the lineage's content hashes)."""
    if isinstance(value, dict):
        return {key: without_local_paths(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_local_paths(item) for item in value]
    if not isinstance(value, str):
        return value
    if value.startswith(("/", "~/", "file://")):
        name = PurePath(value.removeprefix("file://").rstrip("/")).name
        return f"{LOCAL_PLACEHOLDER}/{name}" if name else LOCAL_PLACEHOLDER
    task = _TASK_PATH.match(value)
    if task is not None:
        return f"{task.group(1)}:{without_local_paths(task.group(2))}"
    return value


#: The tokenizer's settings file, as transformers names it.
TOKENIZER_CONFIG = "tokenizer_config.json"
#: What transformers 5 writes of the machine that saved a tokenizer: no reader's business.
_LOCAL_TOKENIZER_KEYS = ("is_local", "local_files_only")


def _portable_tokenizer_config(path: Path, positions: int | None, source_unlimited: bool) -> None:
    """A tokenizer every reader of the Hub loads: transformers 5 names its generic fast tokenizer
    ``TokenizersBackend``, a class transformers 4 (and tools built on it: llama.cpp's converter, mlx-lm) does not
    know; ``PreTrainedTokenizerFast`` names the same class in both. The machine's own keys are left out.

    Its ``model_max_length`` is what the model's positions take (``positions``): a longer one truncates to more
    tokens than the model reads (an index error in its forward pass), and where the source's tokenizer set no limit
    (Gemma's, SmolLM2's) the new tokenizer's 512 would cut a user's text the model reads whole."""
    config = json.loads(path.read_text(encoding="utf-8"))
    if config.get("tokenizer_class") == "TokenizersBackend":
        config["tokenizer_class"] = "PreTrainedTokenizerFast"
    for key in _LOCAL_TOKENIZER_KEYS:
        config.pop(key, None)
    length = config.get("model_max_length")
    if positions is not None and (not isinstance(length, (int, float)) or length > positions or source_unlimited):
        config["model_max_length"] = positions
    path.write_text(json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


#: A tokenizer's ``model_max_length`` at or above this is transformers' "no limit" (``VERY_LARGE_INTEGER``).
UNLIMITED_LENGTH = 1e9


def _positions_and_source_limit(store: ArtifactStore, lineage: Lineage, out: Path) -> tuple[int | None, bool]:
    """The sequence length the published model's positions take, and whether its source's tokenizer set no limit."""
    from transformers import AutoConfig

    from focusflow.models.loading import usable_positions

    positions = usable_positions(AutoConfig.from_pretrained(out)) if (out / "config.json").is_file() else None
    source = lineage.source_model
    if source is None or TOKENIZER_CONFIG not in source.files:
        return positions, False
    folder = store.fetch(source, files=[TOKENIZER_CONFIG])
    length = json.loads((folder / TOKENIZER_CONFIG).read_text(encoding="utf-8")).get("model_max_length")
    return positions, not isinstance(length, (int, float)) or length >= UNLIMITED_LENGTH


def _generation_config(out: Path) -> None:
    """Decoders get ``generation_config.json`` (from their config) when the stored model has none."""
    from transformers import AutoConfig, GenerationConfig

    from focusflow.models.loading import describe_config

    if (out / "generation_config.json").exists():
        return
    config = AutoConfig.from_pretrained(out)
    if describe_config(config, str(out)).lm_loss == "clm":
        GenerationConfig.from_model_config(config).save_pretrained(out)


def write_repository(store: ArtifactStore, lineage: Lineage, repo_id: str, out: Path,
                     focusflow_version: str, language: str | None = None,
                     weights: WeightCheck | None = None) -> dict[str, Any]:
    """Fill ``out`` with the repository's files; returns what the stage records (files, card facts).

    ``language``: the model's language when its lineage records none; neither is an error before anything is written.
    ``weights``: the model's weight check; a failed one (published with ``--force``) is the card's first warning.
    """
    language = model_language(lineage, language)
    out.mkdir(parents=True, exist_ok=True)
    copied = _copy_model_files(store, lineage, out)
    if "config.json" in copied:
        _generation_config(out)
    if TOKENIZER_CONFIG in copied:
        _portable_tokenizer_config(out / TOKENIZER_CONFIG, *_positions_and_source_limit(store, lineage, out))
    facts = gather_facts(store, lineage, language)
    facts.weight_check = weights
    config = without_local_paths(run_configuration(lineage, language))
    (out / CONFIG_FILE).write_text(yaml.safe_dump(config, sort_keys=True, allow_unicode=True), encoding="utf-8")
    card = build_card(facts, repo_id, focusflow_version)
    card.save(out / CARD_FILE)
    terms = facts.source.terms
    if terms is not None and terms.notice:  # the notice the source's licence requires with every copy (Gemma's)
        (out / NOTICE_FILE).write_text(terms.notice + "\n", encoding="utf-8")
    text = facts.source.licence_text(facts.source_spec)
    if text is not None:  # the licence's text, which MIT and Apache 2.0 ask every copy to carry
        (out / LICENCE_FILE).write_text(text, encoding="utf-8")
    if facts.source.terms_file is not None:  # the terms as installed (Gemma's: a copy goes to every recipient)
        shutil.copyfile(facts.source.terms_file, out / facts.source.terms_file.name)
    # last: the record of the lineage and of the files this folder holds (what a later push may replace)
    files = sorted({item.name for item in out.iterdir() if item.is_file()} | {LINEAGE_FILE})
    (out / LINEAGE_FILE).write_text(json.dumps({**without_local_paths(lineage_record(lineage)), "files": files},
                                               indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    checked = {"weights_check": weights.to_dict()} if weights is not None else {}
    return {**checked, "repo_id": repo_id, "label": lineage.label, "language": facts.language,
            "license": facts.source.license, "base_model": facts.source.hub_id,
            "n_eval_results": len(card.data.eval_results or []),
            "files": sorted(p.name for p in out.iterdir())}
