"""Target tokenizers of a decoder LLM's family: Gemma-style SentencePiece BPE with byte fallback, byte-level BPE.

The tiny sources are built here with the layout of the real ones (Gemma: ``<pad> <eos> <bos> <unk> <mask>``,
reserved and chat-turn tokens, newline runs as added tokens, ``<0xNN>`` byte pieces, spaces written as
``▁`` by the normalizer and nothing split before the model; SmolLM2/GPT-2: byte-level BPE with control tokens
first). The real converted tokenizers run in the slow test at the end.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from focusflow.config import TokenizerSpec
from focusflow.corpus.io import read_texts, write_texts
from focusflow.tokenizer import train_tokenizer
from tests.tiny_models import sample_texts

GEMMA_HEAD = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "[multimodal]", "<unused0>", "<unused1>",
              "<start_of_turn>", "<end_of_turn>", "\n", "\n\n"]
ROUND_TRIP = ["Habari ya asubuhi, rafiki.", "ñ 😀", "Mwaka 2024 na 17.", "mstari\nwa pili\n\nna wa tatu",
              " kuanza na nafasi", "nafasi  mbili   tatu", "tab\tni hii", "Kamata ✓ ß Ω"]


def gemma_like_tokenizer(texts: list[str], vocab_size: int = 500) -> PreTrainedTokenizerFast:
    """A Gemma-3-shaped tokenizer: its tokenizer.json schema, special layout and byte fallback, tiny vocabulary."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    byte_pieces = [f"<0x{i:02X}>" for i in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.pre_tokenizer = pre_tokenizers.Split("▁", "merged_with_next")  # only to train word pieces
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


@pytest.fixture(scope="module")
def target_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Pseudo-language text with non-ASCII letters (so the alphabet is not only ASCII)."""
    texts = [t.replace("ka", "ñã").replace("mo", "mö") for t in sample_texts(600, seed=3)]
    path = tmp_path_factory.mktemp("decoder-tok") / "train.jsonl"
    write_texts(path, texts)
    return path


def assert_round_trips_without_unk(target, texts: list[str]) -> None:
    for text in texts:
        ids = target(text, add_special_tokens=False)["input_ids"]
        assert target.unk_token_id is None or target.unk_token_id not in ids, text
        assert target.decode(ids) == text, (text, target.convert_ids_to_tokens(ids))
        assert target.decode(target(text)["input_ids"], skip_special_tokens=True) == text


def test_gemma_like_source_gives_a_byte_fallback_bpe_with_spaces_and_its_special_ids(target_corpus, tmp_path):
    source = gemma_like_tokenizer(sample_texts(400))
    stats = train_tokenizer(target_corpus, TokenizerSpec(vocab_size=700, chars_per_vocab_entry=1), tmp_path / "t", source)
    target = AutoTokenizer.from_pretrained(tmp_path / "t")
    backend = json.loads(target.backend_tokenizer.to_str())
    assert stats["algorithm"] == "bpe" and backend["model"]["type"] == "BPE" and backend["model"]["byte_fallback"]
    assert backend["normalizer"] == json.loads(source.backend_tokenizer.to_str())["normalizer"]
    # every special and control token of Gemma's leading block keeps its id; reserved placeholders of the upper
    # half are dropped, the real upper-half specials move to the end
    assert target.convert_ids_to_tokens(list(range(len(GEMMA_HEAD)))) == GEMMA_HEAD
    assert "<unused5>" not in target.get_vocab() and target.convert_tokens_to_ids("<start_of_image>") == len(target) - 1
    assert (target.bos_token, target.eos_token, target.pad_token, target.unk_token, target.mask_token) == \
        ("<bos>", "<eos>", "<pad>", "<unk>", "<mask>")
    pieces = target.tokenize("Habari ya asubuhi")
    assert any(piece.startswith("▁") for piece in pieces)  # words carry the space marker, as in Gemma
    assert target("ya")["input_ids"][0] == 2  # <bos> first, at Gemma's id
    assert_round_trips_without_unk(target, ROUND_TRIP + list(read_texts(target_corpus))[:50])
    assert "<0xF0>" in target.tokenize("😀")  # an unseen character falls back to bytes
    # the new vocabulary fits the target text better than the source's
    texts = list(read_texts(target_corpus))[:200]
    assert sum(len(target.tokenize(t)) for t in texts) < sum(len(source.tokenize(t)) for t in texts)


def test_byte_level_source_gives_a_byte_level_bpe_with_its_regex_and_controls(target_corpus, tmp_path):
    source = byte_level_tokenizer(sample_texts(400))
    stats = train_tokenizer(target_corpus, TokenizerSpec(vocab_size=700, chars_per_vocab_entry=1), tmp_path / "t", source)
    target = AutoTokenizer.from_pretrained(tmp_path / "t")
    backend = json.loads(target.backend_tokenizer.to_str())
    assert stats["algorithm"] == "bpe" and backend["model"]["type"] == "BPE"
    assert backend["pre_tokenizer"] == json.loads(source.backend_tokenizer.to_str())["pre_tokenizer"]
    assert target.convert_ids_to_tokens([0, 1, 2, 3]) == ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>"]
    vocab = target.get_vocab()
    assert all(char in vocab for char in "ĠĊ") and all(digit in vocab for digit in "0123456789")
    assert target.tokenize("2024") == ["2", "0", "2", "4"]  # the source's digit split is kept
    assert_round_trips_without_unk(target, ROUND_TRIP)


@pytest.mark.slow
@pytest.mark.parametrize("spec,controls", [
    ("gemma3:270m", ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>", "\n"]),
    ("smollm2:135m", ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])])
def test_real_decoder_tokenizers_on_swahili(spec, controls, shared_data: Path, tmp_path: Path) -> None:
    """The converted Gemma 3 / SmolLM2 tokenizers as sources, Swahili text: round trip, no <unk>, ids kept."""
    from focusflow.tokenizer import load_tokenizer
    from focusflow.tokenizer.gguf_wheels import GGUF_SOURCES, GgufSourceError

    try:
        source = load_tokenizer(spec)
    except GgufSourceError as exc:
        pytest.skip(f"{spec}: {exc} ({GGUF_SOURCES[spec].install})")
    lines = [line for line in (shared_data / "text" / "sw.txt").read_text(encoding="utf-8").splitlines() if line]
    write_texts(tmp_path / "train.jsonl", ["\n".join(lines[i:i + 20]) for i in range(0, 8000, 20)])
    heldout = lines[-300:]
    train_tokenizer(tmp_path / "train.jsonl", TokenizerSpec(vocab_size="auto"), tmp_path / "t", source)
    target = AutoTokenizer.from_pretrained(tmp_path / "t")
    for token in controls:
        assert target.convert_tokens_to_ids(token) == source.convert_tokens_to_ids(token), token
    assert_round_trips_without_unk(target, ROUND_TRIP + heldout + ["\n".join(heldout[:5])])
    words = sum(len(line.split()) for line in heldout)
    fertility = {name: sum(len(tok.tokenize(line)) for line in heldout) / words
                 for name, tok in (("source", source), ("target", target))}
    assert fertility["target"] < fertility["source"], fertility
