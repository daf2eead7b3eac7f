from __future__ import annotations

import re

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
    # '▁hello' vs ' Hello' is not symbolic: case matters; '▁kitab' is not in the source;
    # <0xF0> has no single-byte source token
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
    kinds = dict(zip(overlap.target_ids.tolist(), overlap.kinds.tolist(), strict=False))
    # XLM-R '.' is a continuation, BERT '.' a word: matched fuzzily (symbolic)
    dot = xlmr.convert_tokens_to_ids(".")
    assert pairs[dot] == bert.convert_tokens_to_ids(".") and kinds[dot] == "fuzzy"
    assert pairs[xlmr.convert_tokens_to_ids("<s>")] == bert.convert_tokens_to_ids("[CLS]")
    assert pairs[xlmr.convert_tokens_to_ids("<mask>")] == bert.convert_tokens_to_ids("[MASK]")
    # symbolic-only overlap keeps specials and symbols only
    symbolic = compute_overlap(bert, xlmr, match="symbolic")
    assert set(symbolic.kinds) <= {"special", "exact", "fuzzy"}
    for target_id, kind in zip(symbolic.target_ids.tolist(), symbolic.kinds.tolist(), strict=False):
        form = canonical_vocab(xlmr)[target_id]
        assert kind == "special" or is_symbolic(form.text)
    assert len(symbolic) < len(overlap)


def test_is_symbolic_unicode() -> None:
    assert is_symbolic("2024") and is_symbolic("«»") and is_symbolic("...") and is_symbolic(" ")
    assert not is_symbolic("a1") and not is_symbolic(None)
    assert np.all([is_symbolic(c) for c in "٣،$+"])


def _per_token_form(token_id: int, token: str, scheme: str, options: dict) -> tuple:
    """The canonical-form rule for one regular token, spelled out token by token (the specification that the
    whole-vocabulary string operations of ``canonical_vocab`` must reproduce exactly)."""
    if scheme == "byte_level":
        to_byte = {char: byte for byte, char in B2U.items()}
        try:
            data = bytes([to_byte[char] for char in token])
        except KeyError:
            data = token.encode("utf-8")
        start = data.startswith(b" ")
        return (token_id, token, data[1:] if start else data, start, "regular", None)
    if scheme == "wordpiece":
        prefix = options["prefix"]
        if token.startswith(prefix) and len(token) > len(prefix):
            return (token_id, token, token[len(prefix):].encode("utf-8"), False, "regular", None)
        return (token_id, token, token.encode("utf-8"), True, "regular", None)
    if options.get("byte_fallback") and re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", token):
        return (token_id, token, bytes([int(token[3:5], 16)]), False, "byte", None)
    text = token.replace(options["space"], " ") if scheme == "sentencepiece" else token
    start = text.startswith(" ")
    return (token_id, token, (text[1:] if start else text).encode("utf-8"), start, "regular", None)


def _wordlevel_bert_like(tokens: list[str]) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.WordPiece({"[UNK]": 0, **{t: i + 1 for i, t in enumerate(tokens)}}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")


def _edge_case_tokenizers() -> dict[str, PreTrainedTokenizerFast]:
    """Vocabularies that take every branch: separator fallback (tokens holding '\\n' and '\\x00'), byte-level
    tokens outside GPT-2's alphabet, a bare '##', byte pieces in mixed case, 0xFF bytes, empty-looking pieces."""
    families = {family: train_tokenizer(family, sample_texts(300, seed=7)) for family in ("xlmr", "bert", "gpt2", "llama")}
    return {
        **families,
        "sentencepiece_newlines": _sentencepiece(["▁a\nb", "x\x00", "▁", "▁▁", "a▁b", "<0x0a>", "<0xFf>", "<0x4>",
                                                  "<0x41>x", "▁<0x41>", "«»", "12"]),
        "sentencepiece_no_fallback": _sentencepiece(["<0x41>", "▁kitabu", "bu"], byte_fallback=False),
        "byte_level_outside": _bytelevel([_bl(b" kitabu"), "plain\u20acsign", "\u2581x", _bl(b"\xff"), _bl(b" \xff!"),
                                          _bl("é".encode()[:1]), "Ġ", _bl(b"12")]),
        "wordpiece_bare_prefix": _wordlevel_bert_like(["##", "##a", "a", "###", "##٣", "x##"]),
    }


def test_canonical_forms_equal_the_per_token_rule() -> None:
    from focusflow.tokenizer.canonical import detect_scheme, scheme_spec, special_roles

    for name, tokenizer in _edge_case_tokenizers().items():
        scheme, options = detect_scheme(scheme_spec(tokenizer))
        specials = special_roles(tokenizer)
        added = set(tokenizer.added_tokens_decoder) - set(specials)  # literal text, unless a byte piece (below)
        forms = canonical_vocab(tokenizer)
        assert len(forms) == len(tokenizer), name
        for position, form in enumerate(forms):
            assert form.id == position, (name, form)
            if form.id in specials:
                assert form.kind == "special" and form.role == specials[form.id], (name, form)
                continue
            expected = _per_token_form(form.id, tokenizer.convert_ids_to_tokens(form.id), scheme, options)
            if form.id in added and expected[4] != "byte":
                token = expected[1]
                expected = (form.id, token, token.removeprefix(" ").encode("utf-8"), token.startswith(" "), "regular", None)
            assert tuple(form) == expected, (name, form, expected)
            assert type(form.word_start) is bool


def test_fuzzy_keys_equal_the_per_token_rule() -> None:
    """Letter-free tokens are found by one regex pass over the decoded vocabulary; the result must equal fuzzy_key
    applied token by token (vocabularies with and without the byte 0xFF, which switches the separator)."""
    from focusflow.embeddings.overlap import _fuzzy_keys
    from focusflow.tokenizer.canonical import fuzzy_key

    for name, tokenizer in _edge_case_tokenizers().items():
        forms = canonical_vocab(tokenizer)
        expected = {f.id: fuzzy_key(f) for f in forms if f.kind != "special" and fuzzy_key(f) is not None}
        assert _fuzzy_keys(forms) == expected, name


def test_a_new_whitespace_token_copies_the_source_token_of_its_kind_of_space() -> None:
    """A byte-level vocabulary trained on the corpus holds runs of spaces and line ends the source has not: each
    took the row of the source's first whitespace token (a tab), whatever it held."""
    source = _bytelevel([_bl(b"\t"), _bl(b"\n"), _bl(b" "), "a", _bl(b"  ")])
    target = _bytelevel(["a", _bl(b"\n\n\n"), _bl(b" " * 7), _bl(b" \n"), _bl(b"\t\t")])
    pairs = compute_overlap(source, target).as_dict()
    ids = target.convert_tokens_to_ids
    assert pairs[ids(_bl(b"\n\n\n"))] == source.convert_tokens_to_ids(_bl(b"\n"))
    assert pairs[ids(_bl(b" " * 7))] == source.convert_tokens_to_ids(_bl(b" ")), "the lowest id of its kind"
    assert pairs[ids(_bl(b"\t\t"))] == source.convert_tokens_to_ids(_bl(b"\t"))
    assert ids(_bl(b" \n")) not in pairs, "a mix the source has no token for is not a copy of one"


def test_duplicate_canonical_keys_resolve_to_regular_then_lowest_id() -> None:
    """'▁ab' and a literal ' ab' piece spell the same bytes: the lower id wins; a regular token beats a byte piece."""
    source = _sentencepiece(["<0x21>", "x", " ab", "▁ab", "!", "▁ab▁"])
    target = _sentencepiece(["▁ab", "!", "ab▁"], byte_fallback=False)
    overlap = compute_overlap(source, target).as_dict()
    assert overlap[target.convert_tokens_to_ids("▁ab")] == source.convert_tokens_to_ids(" ab")
    assert overlap[target.convert_tokens_to_ids("!")] == source.convert_tokens_to_ids("!")


def test_golden_wordpiece_vs_sentencepiece_overlap() -> None:
    """WordPiece words are SentencePiece '▁' pieces and '##' continuations plain pieces: same bytes, same position."""
    source = _wordlevel_bert_like(["kitabu", "##bu", "bu", "##ki", "Ki"])
    target = _sentencepiece(["▁kitabu", "bu", "▁bu", "ki", "▁ki", "##bu"], byte_fallback=False)
    overlap = compute_overlap(source, target).as_dict()
    tid, sid = target.convert_tokens_to_ids, source.convert_tokens_to_ids
    assert overlap[tid("▁kitabu")] == sid("kitabu") and overlap[tid("bu")] == sid("##bu")
    assert overlap[tid("▁bu")] == sid("bu") and overlap[tid("ki")] == sid("##ki")
    assert tid("▁ki") not in overlap  # 'Ki' differs in case: only symbolic tokens match fuzzily
    assert tid("##bu") not in overlap  # a SentencePiece piece spelled '##bu' means the bytes '##bu'
