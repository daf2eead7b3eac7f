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
from transformers import AutoTokenizer

from focusflow.config import TokenizerSpec
from focusflow.corpus.io import read_texts, write_texts
from focusflow.tokenizer import train_tokenizer
from focusflow.tokenizer.pipeline import composing_first
from tests.tiny_decoders import GEMMA_HEAD, byte_level_tokenizer, gemma_like_tokenizer
from tests.tiny_models import sample_texts

ROUND_TRIP = ["Habari ya asubuhi, rafiki.", "ñ 😀", "Mwaka 2024 na 17.", "mstari\nwa pili\n\nna wa tatu",
              " kuanza na nafasi", "nafasi  mbili   tatu", "tab\tni hii", "Kamata ✓ ß Ω"]


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
    assert backend["normalizer"] == composing_first(json.loads(source.backend_tokenizer.to_str())["normalizer"])
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
    assert target.tokenize("Mwaka 2024")[-5:] == ["▁", "2", "0", "2", "4"]  # digits stay single, as in Gemma
    assert not [piece for piece in target.get_vocab() if len(piece) > 1 and any(c.isdigit() for c in piece)
                and piece not in target.get_added_vocab() and not piece.startswith("<0x")]
    assert not [piece for piece in target.get_vocab() if piece.endswith("\n") and piece.strip()], \
        "a line's end is no part of its last word"
    # the new vocabulary fits the target text better than the source's
    texts = list(read_texts(target_corpus))[:200]
    assert sum(len(target.tokenize(t)) for t in texts) < sum(len(source.tokenize(t)) for t in texts)


def test_a_byte_level_vocabulary_too_small_for_any_merge_is_refused(target_corpus, tmp_path):
    """A byte-level BPE holds all 256 bytes first: a size below them and the specials trained no merge at all."""
    from focusflow.tokenizer import VocabularySizeError

    source = byte_level_tokenizer(sample_texts(400))
    with pytest.raises(VocabularySizeError, match="tokenizer.vocab_size=200 cannot hold"):
        train_tokenizer(target_corpus, TokenizerSpec(vocab_size=200, chars_per_vocab_entry=1), tmp_path / "t", source)


def test_a_decoders_left_padding_and_chat_template_are_kept(target_corpus, tmp_path):
    """SmolLM2-Instruct's template (its <|im_start|> and <|im_end|> keep their ids) and a decoder's left padding
    (batched generation) were left behind: the new tokenizer padded right and had no template."""
    source = byte_level_tokenizer(sample_texts(400))
    source.padding_side = "left"
    source.chat_template = "{% for m in messages %}<|im_start|>{{ m['content'] }}<|im_end|>{% endfor %}"
    train_tokenizer(target_corpus, TokenizerSpec(vocab_size=700, chars_per_vocab_entry=1), tmp_path / "t", source)
    target = AutoTokenizer.from_pretrained(tmp_path / "t")
    assert target.padding_side == "left" and target.chat_template == source.chat_template
    ids = target.apply_chat_template([{"role": "user", "content": "Habari"}], tokenize=True)
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    assert ids[0] == target.convert_tokens_to_ids("<|im_start|>") == 1


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
    assert not [piece for piece in target.get_vocab() if len(piece) > 1 and any(c.isdigit() for c in piece)
                and piece not in target.get_added_vocab()]
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
