"""Tiny decoders shaped like real ones: Gemma-3-like and SmolLM2/Llama-3-like (byte-level BPE) tokenizers and models."""

from __future__ import annotations

import json
from pathlib import Path

from transformers import PreTrainedTokenizerFast

GEMMA_HEAD = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "[multimodal]", "<unused0>", "<unused1>",
              "<start_of_turn>", "<end_of_turn>", "\n", "\n\n"]
def gemma_like_tokenizer(texts: list[str], vocab_size: int = 500) -> PreTrainedTokenizerFast:
    """A Gemma-3-shaped tokenizer: its tokenizer.json schema, special layout and byte fallback, tiny vocabulary."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    byte_pieces = [f"<0x{i:02X}>" for i in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "▁")
    # only to train: word pieces, digits never merged (Gemma's SentencePiece split_digits)
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.Split("▁", "merged_with_next")])
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=GEMMA_HEAD + byte_pieces,
                                                       initial_alphabet=["▁"]))
    data = json.loads(tok.to_str())
    data["pre_tokenizer"] = {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                             "invert": False}  # what transformers writes for Gemma: a no-op after the normalizer
    tok = Tokenizer.from_str(json.dumps(data))
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens([f"<unused{i}>" for i in range(2, 40)] + ["<start_of_image>"])  # upper half, like Gemma
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", pair="<bos> $A <bos> $B",
                                                       special_tokens=[("<bos>", 2)])
    data = json.loads(tok.to_str())
    data["added_tokens"] = [entry for entry in data["added_tokens"] if not entry["content"].startswith("<0x")]
    for entry in data["added_tokens"]:  # Gemma marks its newline runs and [multimodal] as plain added tokens
        entry["special"] = entry["content"] not in ("\n", "\n\n", "[multimodal]")
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(data)), bos_token="<bos>",
                                   eos_token="<eos>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>")


def byte_level_tokenizer(texts: list[str], vocab_size: int = 500) -> PreTrainedTokenizerFast:
    """A SmolLM2/Llama-3-shaped byte-level BPE: control tokens first, the GPT-2 regex, no unknown token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    controls = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>"]
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=controls,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                   pad_token="<|im_end|>", unk_token="<|endoftext|>")


def save_tiny_gemma(folder: Path, texts: list[str], vocab_size: int = 500, seed: int = 0) -> Path:
    """A tiny ``Gemma3ForCausalLM`` (tied, scaled embeddings) with a Gemma-like tokenizer, saved to ``folder``."""
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    tokenizer = gemma_like_tokenizer(texts, vocab_size)
    torch.manual_seed(seed)
    config = Gemma3TextConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=256,
                              sliding_window=32, pad_token_id=0, eos_token_id=1, bos_token_id=2)
    Gemma3ForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def save_tiny_smollm(folder: Path, texts: list[str], vocab_size: int = 500, seed: int = 0) -> Path:
    """A tiny SmolLM2-shaped decoder: ``LlamaForCausalLM`` with tied embeddings and a byte-level BPE, saved to
    ``folder``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = byte_level_tokenizer(texts, vocab_size)
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                         tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
