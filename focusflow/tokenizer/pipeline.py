"""The parts of a tokenizer that surround the vocabulary: normalizer, pre-tokenizer, decoder, post-processor, specials.

A new target tokenizer keeps these from the source tokenizer (read from its ``tokenizer.json``
backend), so an XLM-R target normalizes, splits and wraps text (``<s> … </s>``) exactly like
XLM-R, and special tokens keep their ids: the ones at the start of the source vocabulary stay
at the start, the ones at its end (XLM-R's ``<mask>``) move to the end of the new vocabulary.
Without a source, an XLM-R-like pipeline (SentencePiece ``nmt_nfkc`` normalization) or a
BERT-like one (WordPiece) is used.
"""

from __future__ import annotations

import copy
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from focusflow.errors import InputError

_BYTE_PIECE = re.compile(r"<0x[0-9A-F]{2}>")
_RESERVED = re.compile(r"<unused\d+>|\[unused\d+\]")  # placeholder ids that no text uses
ROLE_ATTRIBUTES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


@dataclass
class Pipeline:
    """Everything but the model: JSON fragments in the ``tokenizer.json`` schema plus the special-token layout."""

    normalizer: dict | None
    pre_tokenizer: dict | None
    decoder: dict | None
    post_processor: dict | None
    head_specials: list[str]  # ids 0..n-1 of the new vocabulary, in this order
    tail_specials: list[str]  # the last ids, in this order
    unk_token: str | None
    special_attributes: dict[str, str]  # bos_token → "<s>", ...
    added_token_flags: dict[str, dict] = field(default_factory=dict)  # lstrip/rstrip/normalized per special
    byte_fallback: bool = False
    model_type: str | None = None  # the source's tokenizers model: "BPE", "Unigram", "WordPiece"
    isolated_digits: bool = False  # the source never joins a digit to anything (Gemma, SmolLM2, Llama)
    wordpiece_prefix: str = "##"
    model_max_length: int = 512
    tokenizer_class: str | None = None
    source_name: str | None = None
    padding_side: str = "right"  # a decoder's source pads on the left (batched generation): kept
    chat_template: str | None = None  # an instruction-tuned source's (its special tokens are kept with their ids)

    @property
    def specials(self) -> list[str]:
        return self.head_specials + self.tail_specials

    def metaspace(self) -> bool:
        """True when words are marked SentencePiece-style (``▁``): the SentencePiece trainer applies."""
        return "Metaspace" in json.dumps(self.pre_tokenizer) and "ByteLevel" not in json.dumps(self.pre_tokenizer)

    def wordpiece_decoder(self) -> bool:
        """True when decoding joins ``##`` continuations (BERT-style sources)."""
        return "WordPiece" in json.dumps(self.decoder)

    def byte_level(self) -> bool:
        return "ByteLevel" in json.dumps(self.pre_tokenizer)

    def space_marker(self) -> bool:
        """True when the normalizer turns spaces into ``▁`` (Gemma, Llama-2 style SentencePiece BPE).

        Such sources mark words inside the normalized text and split nothing before the model, so
        a new vocabulary must hold ``▁``-pieces (a training pre-tokenizer splits before each ``▁``).
        """
        def replaces_space(node: Any) -> bool:
            if isinstance(node, dict):
                if node.get("type") == "Replace" and node.get("content") == "▁" and \
                        (node.get("pattern") or {}).get("String") == " ":
                    return True
                return any(replaces_space(value) for value in node.values())
            if isinstance(node, list):
                return any(replaces_space(value) for value in node)
            return False

        return not self.metaspace() and replaces_space(self.normalizer)

    def normalizer_object(self):
        """A ``tokenizers`` normalizer (or None) to normalize training text exactly as encoding will."""
        if self.normalizer is None:
            return None
        return _backend_with({"normalizer": self.normalizer}).normalizer


def _backend_with(parts: dict[str, Any]):
    from tokenizers import Tokenizer

    skeleton = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
                "pre_tokenizer": None, "post_processor": None, "decoder": None,
                "model": {"type": "WordLevel", "vocab": {"<unk>": 0}, "unk_token": "<unk>"}}
    skeleton.update(parts)
    return Tokenizer.from_str(json.dumps(skeleton))


# --------------------------------------------------------------------------- defaults

@lru_cache(maxsize=1)
def nmt_nfkc_charsmap() -> str:
    """SentencePiece's default ``nmt_nfkc`` normalization as a base64 ``precompiled_charsmap`` (what XLM-R ships).

    Read out of a throw-away SentencePiece model (its ModelProto's normalizer spec), so it is
    exactly the rule set of the installed sentencepiece.
    """
    import base64

    import sentencepiece as spm

    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "nfkc")
        spm.SentencePieceTrainer.train(sentence_iterator=iter(["abc def ghi"] * 8), model_prefix=prefix,
                                       vocab_size=12, model_type="char", normalization_rule_name="nmt_nfkc",
                                       minloglevel=2)
        proto = Path(prefix + ".model").read_bytes()
    charsmap = proto_field(proto_field(proto, 3), 2)  # ModelProto.normalizer_spec.precompiled_charsmap
    return base64.b64encode(charsmap).decode("ascii")


def proto_field(message: bytes, number: int) -> bytes:
    """The first length-delimited field ``number`` of a serialized protobuf message (no protobuf dependency)."""
    at = 0
    while at < len(message):
        key, at = _varint(message, at)
        wire = key & 7
        if wire == 0:
            _, at = _varint(message, at)
        elif wire == 1:
            at += 8
        elif wire == 5:
            at += 4
        elif wire == 2:
            length, at = _varint(message, at)
            if key >> 3 == number:
                return message[at:at + length]
            at += length
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
    raise KeyError(f"protobuf field {number} not found")


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def default_pipeline(algorithm: str) -> Pipeline:
    """XLM-R-like for unigram/bpe (``<s> … </s>``, ``▁`` words), BERT-like for wordpiece (``[CLS] … [SEP]``)."""
    if algorithm == "wordpiece":
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        return Pipeline(
            normalizer={"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                        "strip_accents": False, "lowercase": False},
            pre_tokenizer={"type": "BertPreTokenizer"},
            decoder={"type": "WordPiece", "prefix": "##", "cleanup": True},
            post_processor={"type": "TemplateProcessing",
                            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                       {"Sequence": {"id": "A", "type_id": 0}},
                                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                     {"Sequence": {"id": "A", "type_id": 0}},
                                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                                     {"Sequence": {"id": "B", "type_id": 1}},
                                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
                            "special_tokens": {t: {"id": t, "ids": [i], "tokens": [t]}
                                               for i, t in enumerate(specials) if t in ("[CLS]", "[SEP]")}},
            head_specials=specials, tail_specials=[], unk_token="[UNK]",
            special_attributes={"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]",
                                "sep_token": "[SEP]", "mask_token": "[MASK]"},
            tokenizer_class="BertTokenizer")
    metaspace = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
    return Pipeline(
        normalizer={"type": "Sequence", "normalizers": [
            {"type": "Precompiled", "precompiled_charsmap": nmt_nfkc_charsmap()},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
        pre_tokenizer=metaspace,
        decoder=dict(metaspace),
        post_processor={"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0],
                        "trim_offsets": True, "add_prefix_space": True},
        head_specials=["<s>", "<pad>", "</s>", "<unk>"], tail_specials=["<mask>"], unk_token="<unk>",
        special_attributes={"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "sep_token": "</s>",
                            "pad_token": "<pad>", "cls_token": "<s>", "mask_token": "<mask>"},
        added_token_flags={"<mask>": {"lstrip": True}},
        tokenizer_class="XLMRobertaTokenizer")


# --------------------------------------------------------------------------- from a source tokenizer

def pipeline_from_source(source) -> Pipeline:
    """Read the pipeline and the special-token layout off a fast (``tokenizers``-backed) source tokenizer.

    The head keeps every special token and every added (control) token of the first half of the
    source's ids in id order, so a leading block such as Gemma's ``<pad> <eos> <bos> <unk> <mask>``
    … ``<start_of_turn> <end_of_turn>`` keeps its ids. The tail keeps the special tokens of the
    second half (XLM-R's ``<mask>``, Gemma's image markers) but not reserved placeholders
    (``<unused123>``, thousands in Gemma), which no text uses.
    """
    backend = getattr(source, "backend_tokenizer", None)
    if backend is None:
        raise InputError(f"{type(source).__name__} has no tokenizers backend; load the source with "
                        "AutoTokenizer.from_pretrained(...) (a fast tokenizer)")
    data = json.loads(backend.to_str())
    vocab_size = len(source)
    specials_by_id: dict[int, str] = {}
    for token in source.all_special_tokens:
        token_id = source.convert_tokens_to_ids(token)
        if token_id is not None and token_id >= 0:
            specials_by_id[token_id] = token
    added_entries = {entry["id"]: entry for entry in data.get("added_tokens", [])}
    for token_id, entry in added_entries.items():
        if _BYTE_PIECE.fullmatch(entry["content"]):
            continue  # byte-fallback pieces belong to the model's vocabulary, not to the special layout
        if token_id < vocab_size / 2 or (entry.get("special") and not _RESERVED.fullmatch(entry["content"])):
            specials_by_id.setdefault(token_id, entry["content"])
    ordered = sorted(specials_by_id.items())
    head = [t for i, t in ordered if i < vocab_size / 2]
    tail = [t for i, t in ordered if i >= vocab_size / 2]
    attributes = {}
    for attribute in ROLE_ATTRIBUTES:
        value = getattr(source, attribute, None)
        if isinstance(value, str) and value in specials_by_id.values():
            attributes[attribute] = value
    flags = {}
    for entry in added_entries.values():
        if entry["content"] in specials_by_id.values():
            flags[entry["content"]] = {k: entry[k] for k in ("single_word", "lstrip", "rstrip", "normalized")
                                       if k in entry}
            if not entry.get("special", True):
                flags[entry["content"]]["special"] = False
    model = data.get("model", {})
    max_length = getattr(source, "model_max_length", 512)
    return Pipeline(
        normalizer=copy.deepcopy(data.get("normalizer")),
        pre_tokenizer=copy.deepcopy(data.get("pre_tokenizer")),
        decoder=copy.deepcopy(data.get("decoder")),
        post_processor=copy.deepcopy(data.get("post_processor")),
        head_specials=head, tail_specials=tail,
        unk_token=getattr(source, "unk_token", None) if isinstance(getattr(source, "unk_token", None), str) else None,
        special_attributes=attributes,
        added_token_flags=flags,
        byte_fallback=bool(model.get("byte_fallback", False)),
        model_type=model.get("type"),
        isolated_digits=isolates_digits(model, added_entries.values()),
        wordpiece_prefix=model.get("continuing_subword_prefix") or "##",
        model_max_length=int(max_length) if max_length and max_length < 1e9 else 512,
        tokenizer_class=_class_name(source),
        source_name=getattr(source, "name_or_path", None) or None,
        padding_side=getattr(source, "padding_side", "right") or "right",
        chat_template=getattr(source, "chat_template", None) if isinstance(getattr(source, "chat_template", None), str)
        else None,
    )


#: Normalizers that put text in one Unicode form (a normalizer that starts with one needs no other).
UNICODE_FORMS = ("NFC", "NFKC", "NFD", "NFKD")


def composing_first(normalizer: dict | None) -> dict:
    """``normalizer`` with NFC in front: the corpus a new tokenizer learns from is composed (``cleaning.normalize``),
    so a decomposed input (``e`` + U+0301, Vietnamese or Yoruba as macOS writes it) met pieces it never saw, and a
    source normalizer that maps characters one by one (XLM-R's precompiled table) does not compose them: ``<unk>``
    where the source, which holds the combining marks as pieces, read them. Composed text is unchanged."""
    if normalizer is None:
        return {"type": "NFC"}
    first = (normalizer.get("normalizers") or [{}])[0] if normalizer.get("type") == "Sequence" else normalizer
    if first.get("type") in UNICODE_FORMS:
        return normalizer
    rest = normalizer["normalizers"] if normalizer.get("type") == "Sequence" else [normalizer]
    return {"type": "Sequence", "normalizers": [{"type": "NFC"}, *rest]}


def decoding_bytes(decoder: dict | None) -> dict:
    """``decoder`` followed by byte pieces turned back into text (``ByteFallback``, then ``Fuse``), as Llama's and
    Gemma's decoders do: ``tokenizer.byte_fallback: true`` on a source without it (XLM-R) decoded ``<0x6C><0x65>``
    where the text said ``le``. The source's steps come first: XLM-R's Metaspace works token by token, and on the
    fused string it would leave out the spaces between words."""
    steps = [{"type": "ByteFallback"}, {"type": "Fuse"}]
    if decoder is None:
        return {"type": "Sequence", "decoders": steps}
    rest = decoder["decoders"] if decoder.get("type") == "Sequence" else [decoder]
    return {"type": "Sequence", "decoders": [*rest, *steps]}


def isolates_digits(model: dict, added_tokens=()) -> bool:
    """True when no vocabulary piece longer than one character holds an ASCII digit (added and byte pieces aside).

    Decoder LLMs split numbers into single digits (SentencePiece ``split_digits``, a ``Digits``
    pre-tokenizer); a GGUF file keeps only the vocabulary, where the convention shows as the absence
    of any multi-character piece with a digit. A new vocabulary then must not learn ``2024`` either.
    """
    vocab = model.get("vocab")
    if not vocab:
        return False
    pieces = [entry[0] for entry in vocab] if isinstance(vocab, list) else list(vocab)
    added = {entry["content"] for entry in added_tokens}
    digits = set("0123456789")
    if not all(digit in set(pieces) for digit in digits):
        return False
    return not any(len(piece) > 1 and not digits.isdisjoint(piece) and piece not in added
                   and not _BYTE_PIECE.fullmatch(piece) for piece in pieces)


def _class_name(source) -> str | None:
    name = type(source).__name__
    if name in ("TokenizersBackend", "PreTrainedTokenizerFast"):
        return None
    return name.removesuffix("Fast")


def remap_post_processor(processor: dict | None, token_ids: dict[str, int]) -> dict | None:
    """The post-processor with every special token's id replaced by its id in the new vocabulary."""
    if processor is None:
        return None
    processor = copy.deepcopy(processor)

    def walk(node: Any, key: str | None = None) -> Any:
        if isinstance(node, dict):
            if isinstance(node.get("tokens"), list) and isinstance(node.get("ids"), list):
                node["ids"] = [_lookup(token_ids, t) for t in node["tokens"]]
            for k, v in node.items():
                node[k] = walk(v, k)
            return node
        if isinstance(node, list):
            if key in ("sep", "cls") and len(node) == 2 and isinstance(node[0], str) and isinstance(node[1], int):
                return [node[0], _lookup(token_ids, node[0])]
            return [walk(v) for v in node]
        return node

    return walk(processor)


def _lookup(token_ids: dict[str, int], token: str) -> int:
    if token not in token_ids:
        raise InputError(f"the post-processor uses {token!r}, which the new vocabulary lacks")
    return token_ids[token]
