"""The source stage's model (``prepare_source``): a masked or causal LM as it is, and an MLM head trained on a
frozen encoder that ships without one (multilingual-e5 small, base and large, a sentence encoder, …).

The head is its family's own (``AutoModelForMaskedLM``): dense → GELU → LayerNorm → decoder tied to the input
embeddings + a bias per token, whether the family names it BERT's way (``cls.predictions``: BERT, DeBERTa-v2) or
RoBERTa's (``lm_head``: XLM-R, whose encoders e5-base and e5-large are). With the encoder frozen, the encoder's
hidden states at masked positions do not change during training, so they are computed once (``feature_sequences``
masked sequences) and the head is then trained for ``steps`` on minibatches of those cached positions: a step costs
one vocabulary matmul, not a transformer pass. The bias starts at the log unigram frequencies of the training text
(so step 0 is already the unigram model) and the softmax runs over the tokens the training text uses (a fixed
candidate set; tokens it never uses keep their smoothed unigram bias). The result is saved as the family's MLM class
(``BertForMaskedLM`` for e5-small): ``AutoModelForMaskedLM.from_pretrained(out_dir)`` loads encoder + head.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from focusflow.config import MlmHeadSpec
from focusflow.corpus.io import read_documents
from focusflow.errors import InputError
from focusflow.logs import ProgressBar
from focusflow.models.lm_stats import Masker, unigram_counts, unigram_log_probs
from focusflow.models.loading import describe_source, lm_head, load_source
from focusflow.models.source import resolve_source, source_stats
from focusflow.precision import Precision, resolve_precision
from focusflow.stopping import check_stop
from focusflow.storage.atomic import atomic_folder
from focusflow.tokenizer.source_record import read_source_record, write_source_record
from focusflow.training.distributed import compute_device
from focusflow.training.fit import FitRecipe, fit
from focusflow.training.optimization import Optimization
from focusflow.training.schedules import WarmupSchedule

log = logging.getLogger(__name__)


def _pack_sequences(tokenizer, texts: Sequence[str], seq_len: int, limit: int) -> list[np.ndarray]:
    """Concatenate documents (separated by </s>) into ``<s> ... </s>`` blocks of ``seq_len`` tokens."""
    body = seq_len - 2
    separator = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    stream: list[int] = []
    sequences: list[np.ndarray] = []
    for start in range(0, len(texts), 512):
        for ids in tokenizer(list(texts[start:start + 512]), add_special_tokens=False, verbose=False)["input_ids"]:
            stream.extend(ids)
            if separator is not None:
                stream.append(separator)
        while len(stream) >= body and len(sequences) < limit:
            sequences.append(np.asarray([tokenizer.cls_token_id, *stream[:body], separator], dtype=np.int64))
            del stream[:body]
        if len(sequences) >= limit:
            break
    if not sequences and stream:
        sequences.append(np.asarray([tokenizer.cls_token_id, *stream[:body], separator], dtype=np.int64))
    return sequences


@torch.no_grad()
def _encode_masked(encoder, tokenizer, sequences: list[np.ndarray], spec: MlmHeadSpec, precision: Precision
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Hidden states (float32) and labels at the masked positions of every sequence (80/10/10 masking)."""
    masker = Masker.for_tokenizer(tokenizer, spec.mlm_probability, random_from_any_token=True)
    features, labels = [], []
    batch_size = 16
    device = next(encoder.parameters()).device
    with ProgressBar("source: encoding masked sequences (frozen encoder)", len(sequences), show_loss=False) as bar:
        for start in range(0, len(sequences), batch_size):
            check_stop("in the source stage, encoding for the MLM head (nothing of it is kept)")
            rows = sequences[start:start + batch_size]
            inputs, chosen = [], []
            for offset, ids in enumerate(rows):
                rng = np.random.default_rng([spec.seed, start + offset])
                masked, selected = masker.mask(ids, masker.special[ids], rng)
                inputs.append(masked)
                chosen.append(selected)
            width = max(len(r) for r in rows)
            input_ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
            attention = torch.zeros((len(rows), width), dtype=torch.long)
            selected_mask = torch.zeros((len(rows), width), dtype=torch.bool)
            targets = torch.zeros((len(rows), width), dtype=torch.long)
            for i, (row, sel, ids) in enumerate(zip(inputs, chosen, rows, strict=False)):
                input_ids[i, : len(row)] = torch.from_numpy(row)
                attention[i, : len(row)] = 1
                selected_mask[i, : len(row)] = torch.from_numpy(sel)
                targets[i, : len(row)] = torch.from_numpy(ids)
            with precision.autocast():
                hidden = encoder(input_ids=input_ids.to(device), attention_mask=attention.to(device)).last_hidden_state
            features.append(hidden[selected_mask.to(device)].float().cpu())  # the head trains on the CPU
            labels.append(targets[selected_mask])
            bar.update(start + len(rows))
    return torch.cat(features), torch.cat(labels)


def train_mlm_head(source_dir: str | os.PathLike[str], texts: Sequence[str], spec: MlmHeadSpec | None,
                   out_dir: str | os.PathLike[str]) -> dict:
    """Train the head on ``texts`` (source-tokenized) with the encoder frozen; save encoder + head to ``out_dir``.

    Returns training stats: steps, positions, the cached-position loss at step 0 (the unigram
    bias alone) and at the end, and the candidate-set size.
    """
    spec = spec or MlmHeadSpec()
    torch.manual_seed(spec.seed)
    encoder, tokenizer, _ = load_source(source_dir, with_head=False)
    if tokenizer.mask_token_id is None:
        raise InputError("the source tokenizer has no mask token; an MLM head cannot be trained for it")
    for parameter in encoder.parameters():
        parameter.requires_grad_(False)
    texts = [t for t in texts if t.strip()]
    sequences = _pack_sequences(tokenizer, texts, spec.seq_len, spec.feature_sequences)
    if not sequences:
        raise InputError("no training text for the MLM head: pass a non-empty list of documents")
    started = time.perf_counter()
    device = compute_device()  # the frozen encoder's pass over every sequence: the stage's long part
    precision = resolve_precision(spec.precision, device)
    features, labels = _encode_masked(encoder.to(device), tokenizer, sequences, spec, precision)
    encoder.cpu()
    precision = resolve_precision(spec.precision, torch.device("cpu"))  # the head's training and everything after
    log.info("encoded %d masked positions of %d sequences in %.0fs", len(labels), len(sequences),
             time.perf_counter() - started)

    model, head = with_new_head(encoder)
    embeddings = model.get_input_embeddings().weight.detach()

    counts = unigram_counts(tokenizer, texts)
    with torch.no_grad():
        head.bias.copy_(torch.from_numpy(unigram_log_probs(counts)) if spec.bias_init == "unigram"
                        else torch.zeros_like(head.bias))
    trained = fit_head(head, embeddings, features, labels, counts, spec, precision)
    stats = {"sequences": len(sequences), **trained, "spec": spec.model_dump()}
    _save(model, tokenizer, Path(out_dir), Path(source_dir), stats)
    return stats


def _save(model, tokenizer, out: Path, source_dir: Path, stats: dict) -> None:
    with atomic_folder(out) as staging:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        record = read_source_record(source_dir)
        record["architecture"] = type(model).__name__
        record["mlm_head"] = stats
        write_source_record(staging, record)


@dataclass(frozen=True)
class HeadParts:
    """What the head training trains, whatever its family calls it: the map from a hidden state to the vector whose
    dot product with each token's embedding is its logit (dense → GELU → LayerNorm), that map's LayerNorm, and the
    per-token bias."""

    transform: torch.nn.Module
    norm: torch.nn.LayerNorm
    bias: torch.nn.Parameter


def with_new_head(encoder: torch.nn.Module) -> tuple[torch.nn.Module, HeadParts]:
    """``encoder``'s family's masked-LM model holding ``encoder``'s weights and a new head tied to its embeddings, and
    the head's parts. A family whose head is not dense → GELU → LayerNorm → tied decoder + bias is refused: the parts
    must compute the model's own logits (what is trained is what is saved)."""
    from transformers import AutoModelForMaskedLM

    config = encoder.config
    if getattr(config, "legacy", None) is False:
        config.legacy = True  # DeBERTa-v2's head under BERT's names (cls.predictions), the layout found below
    config.tie_word_embeddings = True
    try:
        model = AutoModelForMaskedLM.from_config(config)
    except ValueError as exc:  # transformers: no masked-LM class for this config
        raise InputError(f"{type(config).__name__} has no masked-LM model class to train a head for: give a source "
                         "with a trained masked-LM head") from exc
    config.architectures = [type(model).__name__]
    # the same base class on both sides: only what the MLM class leaves out (a pooler) is not loaded
    getattr(model, model.base_model_prefix).load_state_dict(encoder.state_dict(), strict=False)
    model.tie_weights()
    parts = _head_parts(model)
    _require_same_logits(model, parts)
    return model, parts


def _require_same_logits(model: torch.nn.Module, parts: HeadParts) -> None:
    """The parts found by name must be the head: the model's own head and ``transform(h) @ E.T + bias`` agree on
    random states, and the decoder is the input embeddings."""
    head, embeddings = lm_head(model), model.get_input_embeddings().weight
    output = model.get_output_embeddings()
    if head is None or output is None or output.weight.data_ptr() != embeddings.data_ptr():
        raise InputError(f"{type(model).__name__}'s MLM head is not one module with a decoder tied to the input "
                         "embeddings: give a source with a trained masked-LM head")
    states = torch.randn(3, embeddings.shape[1], generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        if not torch.allclose(head(states), parts.transform(states) @ embeddings.T + parts.bias, atol=1e-4):
            raise InputError(f"{type(model).__name__}'s MLM head computes something else than dense → GELU → "
                             "LayerNorm → tied decoder + bias: give a source with a trained masked-LM head")


def _head_parts(model: torch.nn.Module) -> HeadParts:
    predictions = getattr(getattr(model, "cls", None), "predictions", None)
    transform = getattr(predictions, "transform", None)
    norm = getattr(transform, "LayerNorm", None) or getattr(transform, "layer_norm", None)  # NomicBert's spelling
    if predictions is not None and norm is not None:  # BERT's layout (DeBERTa-v2's legacy head)
        return HeadParts(transform, norm, predictions.bias)
    head = getattr(model, "lm_head", None)
    if head is not None and all(hasattr(head, name) for name in ("dense", "layer_norm", "bias")):  # RoBERTa's
        from transformers.activations import ACT2FN

        return HeadParts(torch.nn.Sequential(head.dense, ACT2FN["gelu"], head.layer_norm), head.layer_norm, head.bias)
    raise InputError(f"{type(model).__name__}'s MLM head is laid out neither as BERT's (cls.predictions) nor as "
                     "RoBERTa's (lm_head): give a source with a trained masked-LM head")


def fit_head(head: HeadParts, embeddings: torch.Tensor, features: torch.Tensor, labels: torch.Tensor,
             counts: np.ndarray, spec: MlmHeadSpec, precision: Precision) -> dict:
    """Train the head's transform and bias in place on cached (hidden state, label) pairs; keep the best validation
    step.

    The logits are computed under ``precision``; the parameters, the bias and the loss stay float32.
    A tenth of the cached positions is held out; the state with the lowest held-out loss
    (checked every ``eval_every`` steps, step 0 included) is kept, so the head never ends
    worse than where it started: the unigram model when ``bias_init="unigram"``.
    """
    transform, bias = head.transform, head.bias
    generator = torch.Generator().manual_seed(spec.seed)
    order = torch.randperm(len(features), generator=generator)
    n_valid = max(1, len(order) // 10)
    valid, train = order[:n_valid], order[n_valid:]
    candidates = torch.arange(len(bias)) if spec.candidates == "all" else torch.from_numpy(np.flatnonzero(counts > 0))
    candidates = torch.unique(torch.cat([candidates, labels]))
    remap = torch.full((len(bias),), -1, dtype=torch.long)
    remap[candidates] = torch.arange(len(candidates))
    targets = remap[labels]
    candidate_embeddings = embeddings[candidates]
    candidate_bias = torch.nn.Parameter(bias.detach()[candidates].clone())
    with torch.no_grad():
        head.norm.weight.mul_(spec.transform_scale)

    def loss_on(index: torch.Tensor) -> torch.Tensor:
        with precision.autocast():
            logits = transform(features[index]) @ candidate_embeddings.T
        return torch.nn.functional.cross_entropy(logits.float() + candidate_bias, targets[index])

    def validation_loss() -> float:
        transform.eval()
        with torch.no_grad():
            total = sum(float(loss_on(valid[i:i + 1024])) * len(valid[i:i + 1024]) for i in range(0, len(valid), 1024))
        transform.train()
        return total / len(valid)

    parameters = [*transform.parameters(), candidate_bias]
    optimizer = torch.optim.AdamW([{"params": list(transform.parameters()), "weight_decay": spec.weight_decay},
                                   {"params": [candidate_bias], "weight_decay": 0.0}], lr=spec.lr)
    schedule = WarmupSchedule("cosine", max(1, int(spec.warmup_fraction * spec.steps)), spec.steps,
                              ramp="under").build(optimizer)
    recipe = FitRecipe("MLM head training",
                          lambda step: loss_on(train[torch.randint(0, len(train), (spec.positions_per_step,),
                                                                   generator=generator)]),
                          validation_loss, spec.lr, higher_is_better=False)
    started = time.perf_counter()
    transform.train()
    with ProgressBar("source: training the MLM head", spec.steps) as bar:
        fitted = fit(recipe, Optimization(optimizer, schedule), parameters, spec.steps, spec.eval_every,
                     evaluate_at_start=True, on_step=lambda step, loss, _: bar.update(step, float(loss)))
    history, best, best_step = fitted.history, fitted.best_score, fitted.best_step
    initial = history[0][1]
    transform.eval()  # it and the candidates' bias hold the best evaluation's state
    with torch.no_grad():
        full = bias.detach().clone()
        full[candidates] = candidate_bias.detach()
        bias.copy_(full)
    log.info("MLM head: %d steps over %d candidates in %.0fs; held-out cached loss %.3f at step 0 -> %.3f at step %d",
             spec.steps, len(candidates), time.perf_counter() - started, initial, best, best_step)
    return {"steps": spec.steps, "best_step": best_step, "positions_cached": int(len(features)),
            "candidates": int(len(candidates)), "valid_loss_step0": initial, "valid_loss_best": best,
            "valid_history": history}


def prepare_source(spec: str, out_dir: str | os.PathLike[str], *, head_train: str | os.PathLike[str] | None = None,
                   head_spec: dict | None = None, max_head_documents: int = 50_000,
                   cache_dir: str | os.PathLike[str] | None = None) -> dict:
    """The source stage: resolve ``spec`` and write a complete source folder into ``out_dir``.

    A masked or causal LM is copied as is. A bare encoder (e5) gets an MLM head trained on
    ``head_train`` (a corpus ``.jsonl`` or a plain text file, source-tokenized) with the encoder
    frozen; without ``head_train`` it is copied without a head (fidelity still works, MLM
    metrics do not). Returns the source's stats (and the head's training stats).
    """
    folder = resolve_source(spec, cache_dir)
    info = describe_source(folder)
    out = Path(out_dir)
    if info.lm_loss is None and head_train is not None:
        texts = read_documents(head_train, limit=max_head_documents)
        head_stats = train_mlm_head(folder, texts, MlmHeadSpec(**(head_spec or {})), out)
        return {**source_stats(out), "mlm_head": head_stats}
    with atomic_folder(out) as staging:
        for item in Path(folder).iterdir():
            if item.is_file():
                shutil.copy2(item, staging / item.name)
    return source_stats(out)
