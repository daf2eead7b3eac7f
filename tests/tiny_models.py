"""Tiny, random, real-architecture models and tokenizers for tests (no downloads).

Four families cover the tokenizer and head variants focusflow must handle:
- ``xlmr``:  SentencePiece-Unigram (``▁``), XLMRobertaForMaskedLM (tied decoder + bias)
- ``bert``:  WordPiece (``##``), BertForMaskedLM
- ``gpt2``:  byte-level BPE (``Ġ``), GPT2LMHeadModel (tied)
- ``llama``: SentencePiece-BPE with ``<0xNN>`` byte fallback, LlamaForCausalLM (untied output)
"""

from __future__ import annotations

import random
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import (
    BertConfig,
    BertForMaskedLM,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    XLMRobertaConfig,
    XLMRobertaForMaskedLM,
)

FAMILIES = ("xlmr", "bert", "gpt2", "llama")
_SYLLABLES = ["ka", "ta", "na", "ma", "wa", "ki", "ni", "mu", "la", "sa", "ya", "zi", "ku", "po", "ha", "re", "to", "be"]


def sample_texts(n: int = 400, seed: int = 0) -> list[str]:
    """Deterministic pseudo-language sentences with a Zipf-like word distribution, digits and punctuation."""
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(300)]
    weights = [1.0 / (rank + 1) for rank in range(len(vocabulary))]
    sentences = []
    for _ in range(n):
        words = rng.choices(vocabulary, weights=weights, k=rng.randint(5, 18))
        if rng.random() < 0.3:
            words.insert(rng.randint(0, len(words)), str(rng.randint(1, 2024)))
        words[0] = words[0].capitalize()
        sentences.append(" ".join(words) + rng.choice([".", ".", "?", "!", ","]))
    return sentences


def train_tokenizer(family: str, texts: list[str], vocab_size: int = 400) -> PreTrainedTokenizerFast:
    """A real tokenizer of the family's kind, trained on ``texts``."""
    if family == "xlmr":
        specials = ["<s>", "<pad>", "</s>", "<unk>"]
        tok = Tokenizer(models.Unigram())
        tok.normalizer = normalizers.NFKC()
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        tok.train_from_iterator(texts, trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=specials,
                                                               unk_token="<unk>"))
        tok.add_special_tokens(["<mask>"])
        tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
        return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                       cls_token="<s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>")
    if family == "bert":
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=False)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        tok.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials))
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
        return PreTrainedTokenizerFast(tokenizer_object=tok, cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]",
                                       unk_token="[UNK]", mask_token="[MASK]")
    if family == "gpt2":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                                           initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                       unk_token="<|endoftext|>")
    if family == "llama":
        specials = ["<unk>", "<s>", "</s>"]
        tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace()])
        byte_pieces = [f"<0x{i:02X}>" for i in range(256)]
        tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size + 256,
                                                           special_tokens=specials + byte_pieces))
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                           special_tokens=[("<s>", tok.token_to_id("<s>"))])
        return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    raise ValueError(f"unknown family {family!r}; expected one of {FAMILIES}")


def tiny_model(family: str, tokenizer: PreTrainedTokenizerFast, seed: int = 0) -> PreTrainedModel:
    """A randomly initialized 2-layer, 32-wide model of the family, sized to the tokenizer."""
    import torch

    torch.manual_seed(seed)
    vocab = len(tokenizer)
    common = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    if family == "xlmr":
        config = XLMRobertaConfig(vocab_size=vocab, max_position_embeddings=130, pad_token_id=tokenizer.pad_token_id,
                                  bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, **common)
        return XLMRobertaForMaskedLM(config)
    if family == "bert":
        config = BertConfig(vocab_size=vocab, max_position_embeddings=128, pad_token_id=tokenizer.pad_token_id, **common)
        return BertForMaskedLM(config)
    if family == "gpt2":
        config = GPT2Config(vocab_size=vocab, n_embd=32, n_layer=2, n_head=2, n_positions=128,
                            bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
        return GPT2LMHeadModel(config)
    if family == "llama":
        config = LlamaConfig(vocab_size=vocab, max_position_embeddings=128, tie_word_embeddings=False,
                             num_key_value_heads=2, bos_token_id=tokenizer.bos_token_id,
                             eos_token_id=tokenizer.eos_token_id, **common)
        return LlamaForCausalLM(config)
    raise ValueError(f"unknown family {family!r}; expected one of {FAMILIES}")


def save_tiny(family: str, folder: Path, texts: list[str] | None = None, vocab_size: int = 400) -> Path:
    """Train a tokenizer, build the model, ``save_pretrained`` both into ``folder``; returns the folder."""
    texts = texts or sample_texts()
    tokenizer = train_tokenizer(family, texts, vocab_size)
    model = tiny_model(family, tokenizer)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
