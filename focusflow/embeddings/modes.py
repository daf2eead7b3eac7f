"""Vocabulary edits for the extend and prune modes (tokenizer.json surgery, ids stay consistent)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import numpy as np

from focusflow.errors import InputError
from focusflow.tokenizer.canonical import (
    CanonicalToken,
    backend_spec,
    bytes_to_unicode,
    detect_scheme,
)
from focusflow.tokenizer.pipeline import isolates_digits


def _wrap(tokenizer: Any, spec: dict[str, Any]):
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    specials = {name: str(getattr(tokenizer, name)) for name in
                ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
                if getattr(tokenizer, name, None) is not None}
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(spec, ensure_ascii=False)), **specials)


def count_token_ids(tokenizer: Any, texts: Iterable[str], batch_size: int = 1000) -> np.ndarray:
    """How often each id of ``tokenizer`` occurs in ``texts``."""
    counts = np.zeros(len(tokenizer), np.int64)
    batch: list[str] = []

    def flush() -> None:
        for encoding in tokenizer.backend_tokenizer.encode_batch(batch, add_special_tokens=False):
            np.add.at(counts, np.asarray(encoding.ids, np.int64), 1)

    for text in texts:
        batch.append(text)
        if len(batch) >= batch_size:
            flush()
            batch = []
    if batch:
        flush()
    return counts


def _remap_post_processor(node: Any, remap: dict[int, int]) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key in ("sep", "cls") and isinstance(value, list) and len(value) == 2 and isinstance(value[1], int):
                out[key] = [value[0], remap[value[1]]]
            elif key == "ids" and isinstance(value, list):
                out[key] = [remap[v] for v in value]
            else:
                out[key] = _remap_post_processor(value, remap)
        return out
    if isinstance(node, list):
        return [_remap_post_processor(v, remap) for v in node]
    return node


def prune_tokenizer(tokenizer: Any, keep: np.ndarray) -> tuple[Any, np.ndarray]:
    """A tokenizer with only ``keep`` ids (plus what the model needs to reach them), renumbered in order.

    Returns (pruned tokenizer, kept old ids in new-id order). Kept always: special/added tokens, the
    byte alphabet of byte-level BPE, ``<0xNN>`` pieces, and for BPE every merge ingredient of a kept token.
    """
    spec = backend_spec(tokenizer)
    model = spec["model"]
    scheme, _ = detect_scheme(spec)
    vocab = tokenizer.get_vocab()
    keep_set = set(int(i) for i in keep)
    keep_set |= {entry["id"] for entry in spec.get("added_tokens") or []}
    if model.get("unk_id") is not None:
        keep_set.add(model["unk_id"])
    if model.get("unk_token") in vocab:
        keep_set.add(vocab[model["unk_token"]])
    if scheme == "byte_level":
        keep_set |= {vocab[c] for c in bytes_to_unicode().values() if c in vocab}
    keep_set |= {i for t, i in vocab.items() if len(t) == 6 and t.startswith("<0x") and t.endswith(">")}
    if model["type"] == "BPE":
        merges = [m.split(" ", 1) if isinstance(m, str) else m for m in model.get("merges", [])]
        made_by = {a + b: (a, b) for a, b in merges}
        by_id = {i: t for t, i in vocab.items()}
        stack = [by_id[i] for i in keep_set if i in by_id]
        while stack:
            parts = made_by.get(stack.pop())
            if parts:
                for part in parts:
                    if part in vocab and vocab[part] not in keep_set:
                        keep_set.add(vocab[part])
                        stack.append(part)
    kept = np.asarray(sorted(keep_set), np.int64)
    remap = {int(old): new for new, old in enumerate(kept.tolist())}
    if model["type"] == "Unigram":
        model["vocab"] = [model["vocab"][old] for old in kept.tolist() if old < len(model["vocab"])]
        if model.get("unk_id") is not None:
            model["unk_id"] = remap[model["unk_id"]]
    elif model["type"] in ("WordPiece", "BPE", "WordLevel"):
        kept_tokens = {t for t, i in model["vocab"].items() if i in remap}
        model["vocab"] = {t: remap[i] for t, i in sorted(model["vocab"].items(), key=lambda x: x[1]) if i in remap}
        if model["type"] == "BPE":
            model["merges"] = [[a, b] for a, b in merges if a in kept_tokens and b in kept_tokens and a + b in kept_tokens]
    else:
        raise InputError(f"cannot prune a {model['type']} tokenizer")
    for entry in spec.get("added_tokens") or []:
        entry["id"] = remap[entry["id"]]
    spec["post_processor"] = _remap_post_processor(spec.get("post_processor"), remap)
    return _wrap(tokenizer, spec), kept


def _spelling(form: CanonicalToken, scheme: str, options: dict[str, Any]) -> str | None:
    """How the source tokenizer's model would spell a canonical token."""
    text = form.text
    if scheme == "byte_level":
        table = bytes_to_unicode()
        return "".join(table[b] for b in ((b" " if form.word_start else b"") + form.data))
    if text is None:
        return None
    if scheme == "wordpiece":
        return text if form.word_start else options["prefix"] + text
    if scheme == "sentencepiece":
        return (options["space"] if form.word_start else "") + text.replace(" ", options["space"])
    return text


#: Which new tokens extend mode (and prune+extend) adds, in the init key: 1 the language tokenizer's most frequent,
#: 2 the same among those the corpus uses (a piece it never uses is no longer added).
EXTEND_RULE = 2


def extend_tokenizer(tokenizer: Any, new_forms: list[CanonicalToken], scores: dict[int, float] | None = None,
                     limit: int | None = None):
    """The source tokenizer plus ``new_forms`` appended at the end (ids len(tokenizer), ...); every source id stays.

    Unigram: appended pieces with their target scores (so Viterbi uses them); WordPiece: appended to
    the vocabulary (greedy longest match uses them); BPE: each appended piece comes with a merge of two
    existing pieces, ranked after every source merge (see ``_append_bpe``). At most ``limit`` forms
    are added (default: all). Returns (tokenizer, the appended forms actually added).
    """
    spec = backend_spec(tokenizer)
    model = spec["model"]
    scheme, options = detect_scheme(spec)
    if model["type"] not in ("Unigram", "WordPiece", "BPE"):
        raise InputError(f"extend mode supports Unigram, WordPiece and BPE source tokenizers, not "
                         f"{model['type']}; use mode=replace for this source")
    # Added tokens past the model vocabulary (e.g. <mask> added after training) keep their ids only if the model
    # vocabulary holds them there: tokenizers gives an added token the id of its vocabulary entry, or else the next
    # free id, which would be after the appended pieces. So they move into the vocabulary at their own ids.
    past = sorted((entry["id"], entry["content"]) for entry in spec.get("added_tokens") or []
                  if entry["id"] >= _model_size(model))
    if [token_id for token_id, _ in past] != list(range(_model_size(model), _model_size(model) + len(past))):
        raise InputError(f"extend mode needs contiguous token ids; the added tokens past the model vocabulary "
                         f"({_model_size(model)} entries) have ids {[token_id for token_id, _ in past]}")
    existing = set(tokenizer.get_vocab())
    # a source that never joins digits (decoder LLMs) keeps numbers in single digits
    single_digits = model["type"] == "BPE" and isolates_digits(model, spec.get("added_tokens") or [])
    candidates: list[tuple[str, CanonicalToken]] = []
    for form in new_forms:
        piece = _spelling(form, scheme, options)
        if piece is None or piece in existing or not _one_word(tokenizer, form, piece, scheme):
            continue
        if single_digits and len(piece) > 1 and any(char in "0123456789" for char in piece):
            continue
        existing.add(piece)
        candidates.append((piece, form))
    if model["type"] == "BPE":
        for _, content in past:
            model["vocab"][content] = len(model["vocab"])
        chosen = _append_bpe(model, candidates, limit)
    else:
        chosen = candidates[:limit]
    spellings = [piece for piece, _ in chosen]
    added = [form for _, form in chosen]
    if model["type"] == "Unigram":
        floor = min((score for _, score in model["vocab"]), default=-20.0)
        model["vocab"] += [[content, floor - 10.0] for _, content in past]
        model["vocab"] += [[piece, (scores or {}).get(form.id, floor)]
                           for piece, form in zip(spellings, added, strict=False)]
    elif model["type"] == "WordPiece":
        for piece in [content for _, content in past] + spellings:
            model["vocab"][piece] = len(model["vocab"])
    extended = _wrap(tokenizer, spec)
    n_source = len(tokenizer)
    source_vocab, extended_vocab = tokenizer.get_vocab(), extended.get_vocab()
    if not source_vocab.items() <= extended_vocab.items() or \
            extended.convert_tokens_to_ids(spellings) != list(range(n_source, n_source + len(spellings))):
        moved = [token for token, token_id in source_vocab.items() if extended_vocab.get(token) != token_id]
        raise RuntimeError(f"extending the tokenizer moved source ids ({moved[:5]}) or misplaced the new pieces")
    return extended, added


def _one_word(tokenizer: Any, form: CanonicalToken, piece: str, scheme: str) -> bool:
    """Whether the source's pre-tokenizer can hand ``piece`` to the model whole (byte-level regexes split
    letters from digits and punctuation: such a piece could never fire)."""
    if scheme != "byte_level" or form.text is None:
        return True
    pre_tokenizer = tokenizer.backend_tokenizer.pre_tokenizer
    text = (" " if form.word_start else "") + form.text
    return pre_tokenizer is None or [p for p, _ in pre_tokenizer.pre_tokenize_str(text)] == [piece]


def _append_bpe(model: dict[str, Any], candidates: list[tuple[str, CanonicalToken]],
                limit: int | None) -> list[tuple[str, CanonicalToken]]:
    """Append BPE pieces that one new merge can build, in candidate order, in passes until none can be added.

    A piece is added when the model (with the merges added so far) splits it into exactly two pieces
    ``a b``: the merge ``a b`` is appended after every existing merge, and a single character is
    added as it is. Because new merges rank last, they only fire once no source merge applies: any
    text's new tokenization is the source's, with some neighbouring pieces joined into new tokens.
    """
    merges = model.get("merges") or []
    as_strings = bool(merges) and isinstance(merges[0], str)
    ranks = {(tuple(m.split(" ", 1)) if as_strings else tuple(m)): rank for rank, m in enumerate(merges)}
    vocab: dict[str, int] = model["vocab"]
    chosen: list[tuple[str, CanonicalToken]] = []
    pending = candidates
    limit = len(candidates) if limit is None else limit
    while pending and len(chosen) < limit:
        waiting = []
        for piece, form in pending:
            if len(chosen) >= limit:
                break
            parts = [piece] if len(piece) == 1 else _bpe_segment(piece, ranks, vocab)
            if parts is None or len(parts) > 2:
                waiting.append((piece, form))
                continue
            if len(parts) == 2:
                ranks[(parts[0], parts[1])] = len(ranks)
                merges.append(f"{parts[0]} {parts[1]}" if as_strings else [parts[0], parts[1]])
            vocab[piece] = len(vocab)
            chosen.append((piece, form))
        if len(waiting) == len(pending):
            break
        pending = waiting
    model["merges"] = merges
    return chosen


def _bpe_segment(piece: str, ranks: dict[tuple[str, str], int], vocab: dict[str, int]) -> list[str] | None:
    """How a BPE model with ``ranks`` splits ``piece`` (None when a character is not in the vocabulary)."""
    parts = list(piece)
    if any(part not in vocab for part in parts):
        return None
    while len(parts) > 1:
        pairs = [ranks.get((a, b)) for a, b in zip(parts[:-1], parts[1:], strict=False)]
        best = min((rank for rank in pairs if rank is not None), default=None)
        if best is None:
            break
        at = pairs.index(best)
        parts[at:at + 2] = [parts[at] + parts[at + 1]]
    return parts


def _model_size(model: dict[str, Any]) -> int:
    return len(model["vocab"])


def frequency_order(tokenizer: Any, texts: Iterable[str] | None, used_only: bool = False) -> np.ndarray:
    """Ids ordered by corpus frequency (ties and no corpus: id order, i.e. merge rank / vocabulary order);
    ``used_only``: only the ids the corpus uses (with a corpus)."""
    if texts is None:
        return np.arange(len(tokenizer))
    counts = count_token_ids(tokenizer, texts)
    order = np.lexsort((np.arange(len(counts)), -counts))
    return order[counts[order] > 0] if used_only else order


__all__ = ["EXTEND_RULE", "count_token_ids", "extend_tokenizer", "frequency_order", "prune_tokenizer"]
