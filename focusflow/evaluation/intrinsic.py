"""Intrinsic evaluation right after initialization: representation fidelity and masked/causal LM.

* **Representation fidelity** (any encoder or decoder, no head needed): held-out sentences
  through the adapted model with its tokenizer and through the source model with its own;
  mean cosine of the mean-pooled, L2-normalized sentence embeddings, and top-1 retrieval
  (does adapted sentence i find source sentence i among all N), each beside its chance level and after removing
  the mean direction. They measure closeness to the source, not quality: bits per byte (and the LM loss) rank
  methods.
* **Masked LM**: 15% of the non-special positions of each held-out document, 80% ``<mask>`` /
  10% random token / 10% unchanged, drawn from a generator seeded by ``(seed, document
  index)``: the same tokenizer gives the same positions and replacements for every method,
  whatever the batching. Reported: loss (nats/token), accuracy, bits per byte (sum of the
  masked tokens' losses in bits / UTF-8 bytes those tokens cover), and the unigram reference.
* **Causal LM**: every next-token prediction, same metrics; and a few greedy continuations of held-out
  prompts for a person to read (``continuations``, :mod:`focusflow.evaluation.continuations`).

Bytes a token covers are the UTF-8 bytes of the non-whitespace characters in its offset
span, so tokenizers that attach spaces to tokens (``▁``, ``Ġ``) and those that split on them
are measured alike. Everything runs under ``torch.no_grad`` in length-sorted batches, and
vocabulary logits are computed only at the scored positions, in chunks. The forward passes run
under ``precision`` (``focusflow.precision``); pooling, losses and metrics are float32.
"""

from __future__ import annotations

import logging
import math
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from focusflow.config import PrecisionName
from focusflow.corpus.io import read_documents
from focusflow.errors import InputError
from focusflow.evaluation.records import finite_or_none
from focusflow.languages import word_count
from focusflow.models.lm_stats import Masker, pad_rows, unigram_counts, unigram_log_probs
from focusflow.models.loading import lm_head, load_source, usable_positions
from focusflow.precision import resolve_precision
from focusflow.stopping import check_stop
from focusflow.tokenizer.metrics import tokenizer_metrics
from focusflow.training.distributed import compute_device

log = logging.getLogger(__name__)

LN2 = math.log(2.0)


@dataclass
class EncodedTexts:
    """Token ids per document plus the bytes each token covers (0 for special tokens)."""

    ids: list[np.ndarray]
    token_bytes: list[np.ndarray]
    special: list[np.ndarray]


def encode_texts(tokenizer, texts: Sequence[str], max_length: int = 128, add_special_tokens: bool = True
                 ) -> EncodedTexts:
    """Tokenize documents (truncated to ``max_length``) and measure the bytes behind every token."""
    encoded = tokenizer(list(texts), add_special_tokens=add_special_tokens, truncation=True, max_length=max_length,
                        return_offsets_mapping=True, return_special_tokens_mask=True)
    ids, token_bytes, special = [], [], []
    for text, row_ids, offsets, special_mask in zip(texts, encoded["input_ids"], encoded["offset_mapping"],
                                                    encoded["special_tokens_mask"], strict=False):
        sizes = _token_bytes(text, offsets, special_mask)
        ids.append(np.asarray(row_ids, dtype=np.int64))
        token_bytes.append(sizes)
        special.append(np.asarray(special_mask, dtype=bool))
    return EncodedTexts(ids, token_bytes, special)


def _with_document_start(encoded: EncodedTexts, tokenizer) -> EncodedTexts:
    """Each row that does not start with a special token gets the tokenizer's BOS (else its EOS, the end-of-text
    token a byte-level decoder separates documents with) before it, as context, never a target."""
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    if start is None:
        return encoded
    ids, token_bytes, special = [], [], []
    for row_ids, row_bytes, row_special in zip(encoded.ids, encoded.token_bytes, encoded.special, strict=True):
        if len(row_ids) and not row_special[0]:
            row_ids, row_bytes = np.r_[start, row_ids], np.r_[0, row_bytes]
            row_special = np.r_[True, row_special]
        ids.append(row_ids)
        token_bytes.append(row_bytes)
        special.append(row_special)
    return EncodedTexts(ids, token_bytes, special)


def _token_bytes(text: str, offsets, special_mask) -> np.ndarray:
    """Non-whitespace UTF-8 bytes per token; a character split over several tokens (byte-level BPE) counts once."""
    sizes = np.zeros(len(offsets), dtype=np.int64)
    covered = 0
    for position, ((start, end), special) in enumerate(zip(offsets, special_mask, strict=False)):
        if special or end <= covered:
            continue
        sizes[position] = len("".join(text[max(start, covered):end].split()).encode("utf-8"))
        covered = end
    return sizes


def _batches(order: np.ndarray, lengths: np.ndarray, max_tokens: int):
    """Length-sorted batches holding at most ``max_tokens`` padded tokens."""
    batch: list[int] = []
    for index in order:
        longest = max([lengths[i] for i in batch] + [lengths[index]])
        if batch and longest * (len(batch) + 1) > max_tokens:
            check_stop("in an evaluation")
            yield batch
            batch = []
        batch.append(int(index))
    if batch:
        yield batch


def _pad(rows: list[np.ndarray], value: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids, mask = pad_rows(rows, value)
    return torch.from_numpy(ids), torch.from_numpy(mask)


def _model_device(model) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def evaluate_mlm(model, tokenizer, texts: Sequence[str], *, max_length: int = 128, seed: int = 0,
                 probability: float = 0.15, max_tokens_per_batch: int = 4096, unigram: np.ndarray | None = None,
                 logits_chunk: int = 512, precision: PrecisionName = "auto") -> dict:
    """Held-out masked-LM metrics with fixed masks; ``unigram`` (log-probs per id) adds the reference row."""
    masker = Masker.for_tokenizer(tokenizer, probability, random_from_any_token=True)
    model.eval()
    device = _model_device(model)
    autocast = resolve_precision(precision, device).autocast
    encoded = encode_texts(tokenizer, texts, max_length=max_length)
    inputs, selected = [], []
    for index, (ids, special) in enumerate(zip(encoded.ids, encoded.special, strict=False)):
        masked, chosen = masker.mask(ids, special, np.random.default_rng([seed, index]))
        inputs.append(masked)
        selected.append(chosen)
    head = lm_head(model)
    lengths = np.array([len(r) for r in inputs])
    loss_sum = correct = count = byte_sum = 0.0
    unigram_sum = 0.0
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    for batch in _batches(np.argsort(-lengths, kind="stable"), lengths, max_tokens_per_batch):
        input_ids, attention = _pad([inputs[i] for i in batch], pad_id)
        chosen = _pad([selected[i].astype(np.int64) for i in batch], 0)[0].bool()
        if not chosen.any():
            continue
        labels = _pad([encoded.ids[i] for i in batch], pad_id)[0][chosen]
        with autocast():
            if head is not None:
                hidden = model.base_model(input_ids=input_ids.to(device),
                                          attention_mask=attention.to(device)).last_hidden_state
                picked = hidden[chosen.to(device)]
                logits_of = lambda s: head(picked[s])  # noqa: E731, B023 (used in this iteration)
            else:
                full = model(input_ids=input_ids.to(device), attention_mask=attention.to(device)).logits
                picked = full[chosen.to(device)]
                logits_of = lambda s: picked[s]  # noqa: E731, B023 (used in this iteration)
        for start in range(0, len(labels), logits_chunk):
            part = slice(start, start + logits_chunk)
            with autocast():
                logits = logits_of(part).float()
            target = labels[part].to(device)
            loss_sum += float(torch.nn.functional.cross_entropy(logits, target, reduction="sum"))
            correct += float((logits.argmax(-1) == target).sum())
        count += len(labels)
        byte_sum += float(_pad([encoded.token_bytes[i] for i in batch], 0)[0][chosen].sum())
        if unigram is not None:
            unigram_sum -= float(unigram[labels.numpy()].sum())
    return _lm_report(loss_sum, correct, count, byte_sum, unigram_sum if unigram is not None else None,
                      n_documents=len(texts))


def _lm_report(loss_sum: float, correct: float, count: float, byte_sum: float, unigram_sum: float | None,
               n_documents: int) -> dict:
    if count == 0:
        raise InputError("no positions were scored: the held-out texts are empty or too short")
    report = {
        "loss": loss_sum / count,
        "accuracy": correct / count,
        "bits_per_byte": loss_sum / LN2 / max(byte_sum, 1.0),
        "n_scored": int(count),
        "n_bytes": int(byte_sum),
        "n_documents": n_documents,
    }
    if unigram_sum is not None:
        report["unigram_loss"] = unigram_sum / count
        report["unigram_bits_per_byte"] = unigram_sum / LN2 / max(byte_sum, 1.0)
    return report


@torch.no_grad()
def evaluate_clm(model, tokenizer, texts: Sequence[str], *, max_length: int = 128, max_tokens_per_batch: int = 4096,
                 unigram: np.ndarray | None = None, logits_chunk: int = 512, precision: PrecisionName = "auto") -> dict:
    """Held-out causal-LM metrics: every next-token prediction of each document. A document starts with the
    tokenizer's BOS, or where it adds none (SmolLM2) with its end-of-text token, so that its first token is scored
    too: left out, the bytes scored would depend on the tokenizer (a longer first token, fewer bytes)."""
    model.eval()
    device = _model_device(model)
    autocast = resolve_precision(precision, device).autocast
    encoded = _with_document_start(encode_texts(tokenizer, texts, max_length=max_length - 1), tokenizer)
    lengths = np.array([len(r) for r in encoded.ids])
    head = model.get_output_embeddings()
    loss_sum = correct = count = byte_sum = 0.0
    unigram_sum = 0.0
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    for batch in _batches(np.argsort(-lengths, kind="stable"), lengths, max_tokens_per_batch):
        input_ids, attention = _pad([encoded.ids[i] for i in batch], pad_id)
        # a position is scored when its target is a real, non-special token
        target_ok = _pad([~encoded.special[i] for i in batch], 0)[0].bool() & attention.bool()
        scored = target_ok[:, 1:]
        if not scored.any():
            continue
        with autocast():
            hidden = model.base_model(input_ids=input_ids.to(device),
                                      attention_mask=attention.to(device)).last_hidden_state
        picked = hidden[:, :-1][scored.to(device)]
        labels = input_ids[:, 1:][scored]
        for start in range(0, len(labels), logits_chunk):
            part = slice(start, start + logits_chunk)
            with autocast():
                logits = head(picked[part]).float()
            target = labels[part].to(device)
            loss_sum += float(torch.nn.functional.cross_entropy(logits, target, reduction="sum"))
            correct += float((logits.argmax(-1) == target).sum())
        count += len(labels)
        byte_sum += float(_pad([encoded.token_bytes[i] for i in batch], 0)[0][:, 1:][scored].sum())
        if unigram is not None:
            unigram_sum -= float(unigram[labels.numpy()].sum())
    return _lm_report(loss_sum, correct, count, byte_sum, unigram_sum if unigram is not None else None,
                      n_documents=len(texts))


@torch.no_grad()
def sentence_embeddings(model, tokenizer, texts: Sequence[str], *, prefix: str = "", max_length: int = 128,
                        max_tokens_per_batch: int = 8192, precision: PrecisionName = "auto") -> np.ndarray:
    """Mean-pooled (over the attention mask), L2-normalized last hidden states, float32 ``[N, hidden]``."""
    model.eval()
    device = _model_device(model)
    autocast = resolve_precision(precision, device).autocast
    encoded = tokenizer([prefix + t for t in texts], truncation=True, max_length=max_length)["input_ids"]
    rows = [np.asarray(r, dtype=np.int64) for r in encoded]
    lengths = np.array([len(r) for r in rows])
    out = np.zeros((len(rows), model.config.hidden_size), dtype=np.float32)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    for batch in _batches(np.argsort(-lengths, kind="stable"), lengths, max_tokens_per_batch):
        input_ids, attention = _pad([rows[i] for i in batch], pad_id)
        with autocast():
            hidden = model.base_model(input_ids=input_ids.to(device),
                                      attention_mask=attention.to(device)).last_hidden_state.float()
        weights = attention.to(device).unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1)
        out[batch] = torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy()
    return out


def representation_fidelity(adapted: np.ndarray, source: np.ndarray, chunk: int = 2048) -> dict:
    """Mean cosine of paired embeddings and top-1 retrieval of pair i among all N source sentences, each beside
    its chance level and again after removing each side's mean direction.

    Why: a decoder's mean-pooled states all point nearly the same way (Gemma 3: mismatched sentence pairs score
    0.94), so a raw fidelity of 0.96 says little. ``fidelity_chance`` is the mean cosine of mismatched pairs and
    ``retrieval_chance`` is 1/N; the ``*_centered`` values subtract each side's mean embedding first, which leaves
    what distinguishes one sentence from another."""
    if adapted.shape != source.shape:
        raise ValueError(f"embedding shapes differ: {adapted.shape} vs {source.shape}")
    raw = _paired_scores(adapted, source, chunk)
    n = len(adapted)
    mismatched = (float(adapted.sum(0) @ source.sum(0)) - raw["cosines"].sum()) / max(n * (n - 1), 1)
    centered = _paired_scores(_center(adapted), _center(source), chunk)
    return {"fidelity": float(raw["cosines"].mean()), "fidelity_min": float(raw["cosines"].min()),
            "retrieval_top1": raw["top1"], "fidelity_chance": float(mismatched), "retrieval_chance": 1.0 / n,
            "fidelity_centered": float(centered["cosines"].mean()), "retrieval_top1_centered": centered["top1"],
            "n_sentences": n}


def _center(vectors: np.ndarray) -> np.ndarray:
    """Rows minus their mean, L2-normalized again."""
    centered = vectors - vectors.mean(axis=0, keepdims=True)
    return centered / np.maximum(np.linalg.norm(centered, axis=1, keepdims=True), 1e-12)


def _paired_scores(adapted: np.ndarray, source: np.ndarray, chunk: int) -> dict[str, Any]:
    cosines = (adapted * source).sum(axis=1)
    hits = 0
    for start in range(0, len(adapted), chunk):
        similarity = adapted[start:start + chunk] @ source.T
        hits += int((similarity.argmax(axis=1) == np.arange(start, start + len(similarity))).sum())
    return {"cosines": cosines, "top1": hits / len(adapted)}


#: Tokens a tokenizer adds to a text (its specials: ``<s>``, ``</s>``, a BOS) beyond those that cover its bytes
SPECIAL_ALLOWANCE = 4


def fits_every_tokenizer(line: str, max_length: int, prefix: str = "") -> bool:
    """Whether every tokenizer the project builds or reads encodes ``prefix + line`` within ``max_length`` tokens,
    without asking one: a token covers at least one UTF-8 byte (byte-level BPE, byte fallback, an unknown character)
    of the text or of its NFKC form (a normalizer may expand it), or is a word-start marker alone (at most one per
    word), and a few specials are added."""
    text = prefix + line
    size = max(len(text.encode("utf-8")), len(unicodedata.normalize("NFKC", text).encode("utf-8")))
    return size + len(text.split()) + SPECIAL_ALLOWANCE <= max_length


def select_heldout_sentences(texts: Sequence[str], tokenizers: Sequence | None = None, *, max_sentences: int = 500,
                             max_length: int = 128, min_words: int = 3, seed: int = 0, prefix: str = "") -> list[str]:
    """Distinct held-out lines that fit into ``max_length`` tokens, sampled with ``seed``: under each of
    ``tokenizers``, or with none given under every tokenizer (:func:`fits_every_tokenizer`), so that every model of a
    run, whatever its tokenizer, is scored on the same sentences.

    Fidelity pairs sentence i of two models, so no model may see a truncated sentence, and
    duplicates would make retrieval ambiguous.
    """
    lines = list(dict.fromkeys(" ".join(line.split()) for text in texts for line in text.split("\n")))
    lines = [line for line in lines if word_count(line) >= min_words]  # a line of Thai or Chinese has its words too
    if tokenizers is None:
        lines = [line for line in lines if fits_every_tokenizer(line, max_length, prefix)]
    order = np.random.default_rng(seed).permutation(len(lines))
    chosen: list[str] = []
    for start in range(0, len(order), max(4 * max_sentences, 256)):
        candidates = [lines[i] for i in order[start:start + max(4 * max_sentences, 256)]]
        fits = np.ones(len(candidates), dtype=bool)
        for tokenizer in tokenizers or ():
            lengths = np.array([len(ids) for ids in tokenizer(candidates, verbose=False)["input_ids"]])
            fits &= lengths <= max_length
        chosen.extend(c for c, ok in zip(candidates, fits, strict=False) if ok)
        if len(chosen) >= max_sentences:
            break
    return chosen[:max_sentences]


def evaluate_model(model_dir, source_dir, sentences: Sequence[str], *, seed: int = 0, max_length: int = 128,
                   unigram_texts: Sequence[str] | None = None, source_embeddings: np.ndarray | None = None,
                   prefix: str = "", unigram: np.ndarray | None = None, precision: PrecisionName = "auto",
                   prompts: Sequence[dict[str, str]] = (), dev_sentences: Sequence[str] = (),
                   ood_sentences: Sequence[str] = (), ood_dev_sentences: Sequence[str] = ()) -> dict:
    """Fidelity against the source plus the LM metrics its head supports, for one model folder; every forward
    pass (the source's too) runs under ``precision``. A causal LM also continues ``prompts`` (``held_out_prompts``)
    greedily (``generated_bytes_per_s``: how fast, a measurement of this machine). Every model is also scored on
    ``dev_sentences`` (``dev_bits_per_byte``: what a decoder run's choice looks at, never the reported text) and on
    ``ood_sentences`` (``ood_bits_per_byte``: text of another domain; a masked LM's compares with its own source's,
    not across tokenizers) and ``ood_dev_sentences`` (``ood_dev_bits_per_byte``: the other domain's text a choice
    may look at, never the scored part)."""
    model, tokenizer, info = load_source(model_dir)
    model.to(compute_device())  # every forward pass below runs where the model is
    if source_embeddings is not None and source_embeddings.shape[1:] != (model.config.hidden_size,):
        raise InputError(f"{model_dir} has {model.config.hidden_size}-wide states but the reference's source embeddings "
                         f"are {source_embeddings.shape[1]} wide: build the reference with this model's own source "
                         "model (one with the same tokenizer is not enough)")
    if source_embeddings is None:
        source_model, source_tokenizer, _ = load_source(source_dir, with_head=False)
        source_model.to(compute_device())
        source_embeddings = sentence_embeddings(source_model, source_tokenizer, sentences, prefix=prefix,
                                                max_length=max_length, precision=precision)
        del source_model
    metrics: dict = {"lm_loss": info.lm_loss, "vocab_size": len(tokenizer),
                     "n_params": int(sum(p.numel() for p in model.parameters())),
                     # what inference costs with this model's own tokenizer (a pruned or extended one is its own)
                     "tokens_per_word": tokenizer_metrics(tokenizer, sentences)["tokens_per_word"]}
    adapted = sentence_embeddings(model, tokenizer, sentences, prefix=prefix, max_length=max_length,
                                  precision=precision)
    metrics.update(representation_fidelity(adapted, source_embeddings))
    given_unigram = unigram
    if unigram is None:
        unigram = unigram_log_probs(unigram_counts(tokenizer, unigram_texts if unigram_texts is not None else sentences),
                                    per_seen_type=True)
    if info.lm_loss == "mlm":
        lm = evaluate_mlm(model, tokenizer, sentences, max_length=max_length, seed=seed, unigram=unigram,
                          precision=precision)
    elif info.lm_loss == "clm":
        lm = evaluate_clm(model, tokenizer, sentences, max_length=max_length, unigram=unigram, precision=precision)
    else:
        lm = {}
    metrics.update({("mlm_" if info.lm_loss == "mlm" else "clm_") + k if k in ("loss", "accuracy") else k: v
                    for k, v in lm.items()})
    metrics["unigram_source"] = "train" if unigram_texts is not None else "heldout" if given_unigram is None else "given"
    for name, texts in (("dev", dev_sentences), ("ood", ood_sentences), ("ood_dev", ood_dev_sentences)):
        if texts and info.lm_loss in ("mlm", "clm"):
            scored = (evaluate_mlm(model, tokenizer, texts, max_length=max_length, seed=seed, precision=precision)
                      if info.lm_loss == "mlm" else
                      evaluate_clm(model, tokenizer, texts, max_length=max_length, precision=precision))
            metrics.update({f"{name}_bits_per_byte": scored.get("bits_per_byte"),
                            f"{name}_{info.lm_loss}_loss": scored.get("loss"), f"{name}_sentences": len(texts)})
    if info.lm_loss == "clm" and prompts:
        import time

        from focusflow.evaluation.continuations import greedy_continuations

        started = time.perf_counter()
        metrics["continuations"] = greedy_continuations(model, tokenizer, prompts, precision=precision)
        seconds = time.perf_counter() - started
        written = sum(len(item.get("continuation", "").encode("utf-8")) for item in metrics["continuations"])
        metrics[GENERATION_SPEED] = written / seconds if seconds > 0 else None
    return metrics


#: A decoder's greedy generation speed on this machine: a measurement, kept out of the artifact's content.
GENERATION_SPEED = "generated_bytes_per_s"


def above_unigram(metrics: Mapping[str, Any]) -> str | None:
    """Why a model's held-out LM loss (masked or causal) is not below its own tokenizer's unigram loss, in bits per
    byte where measured (the same held-out bytes for both); None when it is below or not measured."""
    loss = next((metrics.get(k) for k in ("mlm_loss", "clm_loss") if finite_or_none(metrics.get(k)) is not None), None)
    unigram = finite_or_none(metrics.get("unigram_loss"))
    if loss is None or unigram is None or loss < unigram:
        return None
    bpb, unigram_bpb = finite_or_none(metrics.get("bits_per_byte")), finite_or_none(metrics.get("unigram_bits_per_byte"))
    if bpb is not None and unigram_bpb is not None:
        return (f"held-out {bpb:.4g} bits per byte is not below its tokenizer's unigram level ({unigram_bpb:.4g}; "
                f"loss {loss:.4g} vs {unigram:.4g} nats/token): it predicts no better than token frequencies")
    return (f"held-out LM loss {loss:.4g} is not below the unigram loss of its tokenizer ({unigram:.4g}): it predicts "
            "no better than token frequencies")


REFERENCE_SENTENCES = "sentences.json"
REFERENCE_DEV = "dev_sentences.json"  # held-out sentences beside the scored ones: what a choice may look at
REFERENCE_OOD = "ood_sentences.json"  # text of another domain of the language (the evaluation tasks', a user's)
REFERENCE_OOD_DEV = "ood_dev_sentences.json"  # a third of that text, never scored: what a decoder's choice looks at
REFERENCE_EMBEDDINGS = "embeddings.safetensors"
REFERENCE_RECORD = "reference.json"


def tokenization_fingerprint(tokenizer, sentences: Sequence[str]) -> str:
    """sha256 of the token ids ``tokenizer`` gives ``sentences``: equal fingerprints, equal tokenization."""
    import hashlib

    digest = hashlib.sha256()
    for ids in tokenizer(list(sentences), verbose=False)["input_ids"]:
        digest.update(np.asarray(ids, dtype=np.int64).tobytes() + b"\xff")
    return digest.hexdigest()


def in_dev_half(line: str) -> bool:
    """Whether a held-out line belongs to the dev half (a third of the lines, by the hash of their text): the same
    lines for every model and reference, never the ones a report scores."""
    import hashlib

    return hashlib.sha256(" ".join(line.split()).encode("utf-8")).digest()[0] % 3 == 0


def build_reference(source_dir, heldout, out_dir, *, tokenizer_dir=None, max_sentences: int = 500, seed: int = 0,
                    max_length: int = 512, prefix: str = "", precision: PrecisionName = "auto",
                    ood_texts: Sequence[str] | None = None, ood_for_choice: bool = False) -> dict:
    """The held-out sentences every model of one tokenizer is evaluated on, and the source model's embeddings
    of them, computed once: every intrinsic evaluation against it skips loading and running the source.

    Sentences fit ``max_length`` tokens under any tokenizer (:func:`fits_every_tokenizer`: the same sentences for the
    source's reference and for ``tokenizer_dir``'s, whose tokenization the record holds), drawn from two thirds of
    the held-out lines; from the other third (:func:`in_dev_half`), up to half as many dev sentences (what a choice
    between models looks at, never the scored text) and, given ``ood_texts``, up to ``max_sentences`` of them (text
    of another domain of the language), both the same for every reference of a run; with ``ood_for_choice`` a third
    of those (by hash) is kept apart for a choice and never scored.
    """
    import json
    from pathlib import Path

    from safetensors.numpy import save_file
    from transformers import AutoTokenizer

    from focusflow.storage.atomic import atomic_path, atomic_write

    source_model, source_tokenizer, _ = load_source(source_dir, with_head=False)
    source_model.to(compute_device())
    # as long as the source's positions allow (its models' too): a sentence of a script of three bytes a character
    # (Devanagari, Thai) fits every tokenizer only with room for its bytes
    max_length = min(max_length, usable_positions(source_model.config) or max_length)
    target_tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir) if tokenizer_dir is not None else source_tokenizer
    documents = list(read_documents(heldout))
    scored_lines = [line for text in documents for line in text.split("\n") if not in_dev_half(line)]
    dev_lines = [line for text in documents for line in text.split("\n") if in_dev_half(line)]
    # every text is chosen without a tokenizer, to fit any (fits_every_tokenizer): the same sentences for every
    # reference of a run, so that the source's numbers and each model's are measured on one text, none of it cut
    fitting = {"max_length": max_length, "seed": seed, "prefix": prefix}
    sentences = select_heldout_sentences(scored_lines, max_sentences=max_sentences, **fitting)
    dev = select_heldout_sentences(dev_lines, max_sentences=max_sentences // 2, **fitting)
    # ``ood_for_choice`` (a user's text, never a task's test sentences): split as the held-out lines are, a third (by
    # hash) a choice may look at, the rest scored
    ood_texts = list(ood_texts or [])
    ood = select_heldout_sentences([t for t in ood_texts if not (ood_for_choice and in_dev_half(t))],
                                   max_sentences=max_sentences, **fitting)
    ood_dev = select_heldout_sentences([t for t in ood_texts if in_dev_half(t)], max_sentences=max_sentences // 2,
                                       **fitting) if ood_for_choice else []
    for name, chosen, wanted, given in (("held-out", sentences, max_sentences, scored_lines),
                                        ("other-domain", ood, max_sentences, ood_texts)):
        if given and len(chosen) < wanted:
            log.warning("%d %s sentences chosen of %d asked: all the lines of 3 words or more that fit every "
                        "tokenizer in %d tokens", len(chosen), name, wanted, max_length)
    if len(sentences) < 2:
        raise InputError(f"{heldout} yields {len(sentences)} usable held-out sentence(s); fidelity needs at least 2")
    embeddings = sentence_embeddings(source_model, source_tokenizer, sentences, prefix=prefix, max_length=max_length,
                                     precision=precision)
    out = Path(out_dir)
    record = {"n_sentences": len(sentences), "max_length": max_length, "prefix": prefix,
              "tokenization": tokenization_fingerprint(target_tokenizer, sentences), "n_dev": len(dev),
              "n_ood": len(ood), "n_ood_dev": len(ood_dev)}
    atomic_write(out / REFERENCE_SENTENCES, json.dumps(sentences, ensure_ascii=False))
    atomic_write(out / REFERENCE_DEV, json.dumps(dev, ensure_ascii=False))
    if ood:
        atomic_write(out / REFERENCE_OOD, json.dumps(ood, ensure_ascii=False))
    if ood_dev:
        atomic_write(out / REFERENCE_OOD_DEV, json.dumps(ood_dev, ensure_ascii=False))
    with atomic_path(out / REFERENCE_EMBEDDINGS) as staging:
        save_file({"embeddings": embeddings}, str(staging))
    atomic_write(out / REFERENCE_RECORD, json.dumps(record, indent=2))
    return record


def evaluate_against_reference(model_dir, reference_dir, out_dir, *, seed: int = 0,
                               precision: PrecisionName = "auto") -> dict:
    """The intrinsic stage: ``model_dir`` on a reference's sentences against its stored source embeddings (a
    decoder also continues the first of them greedily); writes metrics.json. The model's tokenizer must
    tokenize those sentences as the reference's did."""
    import json
    from pathlib import Path

    from safetensors.numpy import load_file
    from transformers import AutoTokenizer

    from focusflow.evaluation.continuations import held_out_prompts
    from focusflow.storage.atomic import atomic_write

    reference = Path(reference_dir)
    record = json.loads((reference / REFERENCE_RECORD).read_text(encoding="utf-8"))
    sentences = json.loads((reference / REFERENCE_SENTENCES).read_text(encoding="utf-8"))
    if tokenization_fingerprint(AutoTokenizer.from_pretrained(model_dir), sentences) != record["tokenization"]:
        raise InputError(f"{model_dir}'s tokenizer does not tokenize the reference's held-out sentences as the "
                         "tokenizer they were selected with: build the reference with this model's tokenizer")
    source_embeddings = load_file(str(reference / REFERENCE_EMBEDDINGS))["embeddings"]
    extra = {name: json.loads((reference / file).read_text(encoding="utf-8")) if (reference / file).is_file() else []
             for name, file in (("dev_sentences", REFERENCE_DEV), ("ood_sentences", REFERENCE_OOD),
                                ("ood_dev_sentences", REFERENCE_OOD_DEV))}
    metrics = evaluate_model(model_dir, None, sentences, seed=seed, max_length=record["max_length"],
                             source_embeddings=source_embeddings, prefix=record["prefix"], precision=precision,
                             prompts=held_out_prompts(sentences), **extra)
    content = {key: value for key, value in metrics.items() if key != GENERATION_SPEED}  # a timing: manifest only
    atomic_write(Path(out_dir) / "metrics.json", json.dumps(content, indent=2))
    return metrics
