"""What a model folder holds and how to load it: the one place that tells encoders from decoders.

A model's kind is read from its config alone (no weights): the language-model loss its head supports
(``mlm`` for ``*ForMaskedLM``, ``clm`` for ``*ForCausalLM``/``*LMHeadModel`` and bare decoders,
none for a bare encoder such as e5: ``lm_loss``), which decides the class it loads with, the loss LAPT trains
and the intrinsic LM metrics.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from focusflow.errors import FocusflowError
from focusflow.logs import quiet_transformers_progress
from focusflow.models.model_type import config_is_decoder

if TYPE_CHECKING:
    import torch


class SourceModelError(FocusflowError, ValueError):
    """The source model cannot be found or loaded; the message says what to pass instead."""


@dataclass(frozen=True)
class SourceInfo:
    """What a model folder holds: which language-model loss its head supports (``mlm``, ``clm`` or none)."""

    architecture: str
    model_type: str
    lm_loss: str | None  # "mlm", "clm", or None for a bare encoder (train a head first)
    is_encoder: bool
    vocab_size: int
    hidden_size: int

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def trained_lm_loss(self) -> str:
        """The LM loss LAPT trains it with: a bare encoder trains a new MLM head."""
        return self.lm_loss or "mlm"


def describe_config(config: Any, name: str = "model") -> SourceInfo:
    """Classify a transformers config (see the module docstring); ``name`` only labels the error."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    architectures = list(getattr(config, "architectures", None) or [])
    architecture = architectures[0] if architectures else ""
    model_type = config.model_type
    if architecture.endswith("ForMaskedLM"):
        lm_loss = "mlm"
    elif architecture.endswith(("ForCausalLM", "LMHeadModel")):
        lm_loss = "clm"
    else:
        lm_loss = None
    is_encoder = not config_is_decoder(config)
    family = MODEL_FOR_MASKED_LM_MAPPING_NAMES if is_encoder else MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    if lm_loss is None and model_type not in family:
        raise SourceModelError(f"{name}: {model_type}/{architecture} is neither a masked nor a causal LM family")
    if lm_loss is None and not is_encoder:
        lm_loss = "clm"  # bare decoders share weights with their LM head class
    hidden = getattr(config, "hidden_size", None) or getattr(config, "n_embd", None) or 0
    return SourceInfo(architecture or model_type, model_type, lm_loss, is_encoder,
                      int(config.vocab_size), int(hidden))


# Families that number positions from ``pad_token_id + 1`` (fairseq's RoBERTa convention): the first
# ``pad_token_id + 1`` rows of their position table are never used by a token.
PADDING_OFFSET_MODEL_TYPES = frozenset({"roberta", "xlm-roberta", "xlm-roberta-xl", "roberta-prelayernorm",
                                        "camembert", "xmod", "data2vec-text"})


def uses_padding_offset(config: Any) -> bool:
    """Whether the model numbers its positions after the padding index (RoBERTa-like)."""
    return getattr(config, "model_type", None) in PADDING_OFFSET_MODEL_TYPES


def usable_positions(config: Any) -> int | None:
    """The longest sequence (in tokens, specials included) the model's positions allow; None when it has no limit.

    The position table's size (``max_position_embeddings``, GPT-2's ``n_positions``) less the rows a RoBERTa-like
    model spends before its first position.
    """
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if not limit:
        return None
    if uses_padding_offset(config):
        limit -= (getattr(config, "pad_token_id", None) or 0) + 1
    return int(limit)


WEIGHT_PATTERNS = ("*.safetensors", "*.safetensors.index.json", "pytorch_model*.bin", "pytorch_model.bin.index.json")


def require_weights(folder: str | os.PathLike[str]) -> None:
    """A local model folder must hold weights: loading one without them would start from random values."""
    path = Path(folder)
    if path.is_dir() and not any(any(path.glob(pattern)) for pattern in WEIGHT_PATTERNS):
        raise SourceModelError(f"model folder {path} has no weights (model.safetensors or pytorch_model.bin); "
                          "pass a folder written by save_pretrained")


#: modules a checkpoint may lack and a loader may build fresh: task and LM heads, BERT's pooler (a masked-LM
#: checkpoint has none); every other missing weight is part of the body the model was trained as
HEAD_MODULES = ("classifier", "qa_outputs", "score", "pooler", "lm_head", "cls.")


def require_body_weights(missing_keys: Any, name: str | os.PathLike[str], *, head_allowed: bool = True) -> None:
    """The checkpoint must hold every weight of the model's body: transformers fills a missing one with random values
    and only logs it, so a truncated or mismatched checkpoint would be evaluated, fine-tuned or specialized as if it
    were the model. ``head_allowed``: a missing head (one the loader adds) is no error; without it a missing head is
    one (an untied output layer left out of the checkpoint would predict at random)."""
    keys = sorted(str(key) for key in missing_keys or ())
    heads = [key for key in keys if any(head in key for head in HEAD_MODULES)]
    body = [key for key in keys if key not in heads]
    if body:
        raise SourceModelError(f"{name}: {len(body)} weights of the model's body were not found in its checkpoint "
                               f"(e.g. {body[:3]}); it would run with random values in their place. Save the whole "
                               "model (save_pretrained) or point at the folder that holds its weights")
    if heads and not head_allowed:
        raise SourceModelError(f"{name}: {len(heads)} weights of the model's output layer were not found in its "
                               f"checkpoint (e.g. {heads[:3]}), and its config does not tie that layer to the input "
                               "embeddings: it would predict with random values. Give the checkpoint of the model with "
                               "its language-model head (save_pretrained of the ...ForCausalLM or ...ForMaskedLM "
                               "model), not of its body alone")


def require_vocabulary_fits(model: Any, tokenizer: Any, name: str | os.PathLike[str]) -> None:
    """Every token id the tokenizer can produce must have an embedding row (else an index error mid-run)."""
    rows = model.get_input_embeddings().num_embeddings
    if len(tokenizer) > rows:
        raise SourceModelError(f"{name}: the tokenizer has {len(tokenizer)} tokens but the model's embedding matrix only "
                          f"{rows} rows; save the tokenizer that belongs to this model (or initialize the model for "
                          "this tokenizer with `focusflow init`)")


def describe_source(folder: str | os.PathLike[str]) -> SourceInfo:
    """Read config.json (no weights) and classify the model."""
    from transformers import AutoConfig

    return describe_config(AutoConfig.from_pretrained(folder), str(folder))


def model_class(info: SourceInfo, with_head: bool = True, add_head: bool = False):
    """The transformers auto class for a model of kind ``info``.

    With ``with_head`` the LM class its head supports, else the bare body; ``add_head`` gives a
    bare encoder a freshly initialized MLM head (what LAPT trains).
    """
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM

    quiet_transformers_progress()  # every focusflow model load passes here
    lm_loss = info.trained_lm_loss if add_head else info.lm_loss
    if not with_head or lm_loss is None:
        return AutoModel
    return AutoModelForMaskedLM if lm_loss == "mlm" else AutoModelForCausalLM


def load_source(folder: str | os.PathLike[str], with_head: bool = True, *, add_head: bool = False, **options: Any):
    """``(model, tokenizer, info)`` in float32 and eval mode; ``options`` go to ``from_pretrained``.

    The LM class when the folder has a head and ``with_head`` (``add_head``: a new MLM head for a
    bare encoder), else the bare model.
    """
    import torch
    from transformers import AutoModel, AutoTokenizer

    require_weights(folder)
    info = describe_source(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    loader = model_class(info, with_head, add_head)
    model, loading = loader.from_pretrained(folder, output_loading_info=True, **{"dtype": torch.float32, **options})
    missing = loading.get("missing_keys") or ()
    if add_head:  # the new head is all missing; the body (under the base model's prefix) must not be
        missing = [key for key in missing if str(key).startswith(f"{model.base_model_prefix}.")]
    # the source's own language-model head is part of the model: only a bare body may lack one (a pooler)
    require_body_weights(missing, folder, head_allowed=add_head or loader is AutoModel)
    return model.eval(), tokenizer, info


def lm_head(model: torch.nn.Module) -> torch.nn.Module | None:
    """The row-wise module mapping hidden states to vocabulary logits (BERT ``cls``, RoBERTa ``lm_head``).

    It is the model's one child besides its base model; None when the head is spread over
    several children (callers then use the full forward pass).
    """
    base = model.base_model
    others = [module for module in model.children() if module is not base]
    return others[0] if len(others) == 1 else None
