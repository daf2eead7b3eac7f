from __future__ import annotations

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from focusflow.embeddings import compute_overlap
from focusflow.tokenizer.canonical import bytes_to_unicode, canonical_vocab, is_symbolic
from tests.tiny_models import sample_texts, train_tokenizer

B2U = bytes_to_unicode()


def _bytelevel(tokens: list[str]) -> PreTrainedTokenizerFast:
    vocab = {"<|endoftext|>": 0, **{t: i + 1 for i, t in enumerate(tokens)}}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>")


def _sentencepiece(pieces: list[str], byte_fallback: bool = True) -> PreTrainedTokenizerFast:
    vocab = [("<unk>", 0.0), ("<s>", 0.0), ("</s>", 0.0)] + [(p, -1.0 - i / 100) for i, p in enumerate(pieces)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=0, byte_fallback=byte_fallback))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace()])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")


def _bl(text: bytes) -> str:
    return "".join(B2U[b] for b in text)


def test_golden_byte_level_vs_sentencepiece_overlap() -> None:
    """Golden pairs: same bytes at the same word position match; partial UTF-8 never collapses."""
    source = _bytelevel([_bl(b" kitabu"), _bl(b"bu"), _bl("é".encode()[:1]), _bl("é".encode()[1:]),
                         _bl(" 😀".encode()[:3]), _bl(b" "), _bl(b"!"), _bl(b" Hello"), _bl(b"\xe2\x80\x9c")])
    target = _sentencepiece(["▁kitabu", "bu", "<0xC3>", "<0xA9>", "▁", "!", "▁hello", "“", "▁kitab", "<0xF0>"])
    overlap = compute_overlap(source, target).as_dict()
    tid = target.convert_tokens_to_ids
    sid = source.convert_tokens_to_ids
    expected = {
        tid("▁kitabu"): sid(_bl(b" kitabu")),
        tid("bu"): sid(_bl(b"bu")),
        tid("<0xC3>"): sid(_bl(b"\xc3")),          # partial UTF-8 lead byte <-> GPT-2 'Ã'
        tid("<0xA9>"): sid(_bl(b"\xa9")),          # continuation byte
        tid("▁"): sid(_bl(b" ")),
        tid("!"): sid(_bl(b"!")),
        tid("“"): sid(_bl(b"\xe2\x80\x9c")),      # multi-byte punctuation
        tid("<s>"): sid("<|endoftext|>"),          # start role (bos) <-> bos
        tid("</s>"): sid("<|endoftext|>"),         # end role (eos) <-> eos
    }
    assert overlap == expected
    # '▁hello' vs ' Hello' is not symbolic: case matters; '▁kitab' is not in the source; <0xF0> has no single-byte source token
    assert tid("▁hello") not in overlap and tid("▁kitab") not in overlap and tid("<0xF0>") not in overlap
    # the partial-UTF-8 source token keeps its three raw bytes (decode() would give U+FFFD)
    forms = canonical_vocab(source)
    assert forms[sid(_bl(" 😀".encode()[:3]))].data == "😀".encode()[:2] and forms[sid(_bl(" 😀".encode()[:3]))].word_start


def test_wordpiece_and_fuzzy_symbols() -> None:
    bert = train_tokenizer("bert", sample_texts())
    forms = canonical_vocab(bert)
    by_token = {f.token: f for f in forms}
    continuation = next(f for f in forms if f.token.startswith("##"))
    assert not continuation.word_start and continuation.data == continuation.token[2:].encode()
    assert by_token["[CLS]"].role == "start" and by_token["[SEP]"].role == "end" and by_token["[MASK]"].role == "mask"
    xlmr = train_tokenizer("xlmr", sample_texts())
    overlap = compute_overlap(bert, xlmr)
    pairs = overlap.as_dict()
    kinds = dict(zip(overlap.target_ids.tolist(), overlap.kinds.tolist()))
    # XLM-R '.' is a continuation, BERT '.' a word: matched fuzzily (symbolic)
    dot = xlmr.convert_tokens_to_ids(".")
    assert pairs[dot] == bert.convert_tokens_to_ids(".") and kinds[dot] == "fuzzy"
    assert pairs[xlmr.convert_tokens_to_ids("<s>")] == bert.convert_tokens_to_ids("[CLS]")
    assert pairs[xlmr.convert_tokens_to_ids("<mask>")] == bert.convert_tokens_to_ids("[MASK]")
    # symbolic-only overlap keeps specials and symbols only
    symbolic = compute_overlap(bert, xlmr, match="symbolic")
    assert set(symbolic.kinds) <= {"special", "exact", "fuzzy"}
    for target_id, kind in zip(symbolic.target_ids.tolist(), symbolic.kinds.tolist()):
        form = canonical_vocab(xlmr)[target_id]
        assert kind == "special" or is_symbolic(form.text)
    assert len(symbolic) < len(overlap)


def test_is_symbolic_unicode() -> None:
    assert is_symbolic("2024") and is_symbolic("«»") and is_symbolic("...") and is_symbolic(" ")
    assert not is_symbolic("a1") and not is_symbolic(None)
    assert np.all([is_symbolic(c) for c in "٣،$+"])
