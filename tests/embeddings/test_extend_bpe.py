"""``extend`` on BPE sources: appended pieces come with merges, so the tokenizer uses them, and the source's
segmentation of any text is kept (new tokens only join neighbouring source pieces)."""

from __future__ import annotations

import numpy as np
import pytest

from focusflow.embeddings import initialize_model


def _expand(tokens: list[str], source, extended) -> list[str]:
    """Each token of the extended tokenizer replaced by the source model's pieces for it."""
    n_source = len(source)
    model = source.backend_tokenizer.model
    out: list[str] = []
    for token in tokens:
        if extended.convert_tokens_to_ids(token) < n_source:
            out.append(token)
        else:
            out.extend(piece.value for piece in model.tokenize(token))
    return out


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_extend_bpe_adds_merges_that_fire_and_keeps_the_source_segmentation(family, tiny_sources, transfer_case,
                                                                            tmp_path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from focusflow.models.loading import load_source

    _, source, _ = load_source(tiny_sources[family])
    totals = initialize_model(tiny_sources[family], transfer_case["target_dir"], tmp_path / "ext", "focus",
                              mode="extend", aux_dir=transfer_case["aux_dir"], train=transfer_case["train"],
                              extend_top_n=40)
    extended = AutoTokenizer.from_pretrained(tmp_path / "ext")
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "ext")
    assert totals["added"] == 40 and len(extended) == len(source) + 40 == model.config.vocab_size
    ids = list(range(len(source)))
    assert extended.convert_ids_to_tokens(ids) == source.convert_ids_to_tokens(ids)
    new_tokens = extended.convert_ids_to_tokens(list(range(len(source), len(extended))))
    # every appended token is reachable: the model builds it from its own string
    for token in new_tokens:
        assert [piece.value for piece in extended.backend_tokenizer.model.tokenize(token)] == [token]
    texts = transfer_case["texts"]
    fired = {t for text in texts for t in extended.tokenize(text)} & set(new_tokens)
    assert len(fired) > 20
    assert sum(len(extended.tokenize(t)) for t in texts) < sum(len(source.tokenize(t)) for t in texts)
    # the source's segmentation survives: expanding new tokens gives exactly the source's pieces, and text in
    # which no new token occurs tokenizes exactly as before
    for text in texts[:200] + ["The quick brown fox jumps over 13 lazy dogs!"]:
        tokens = extended.tokenize(text)
        assert _expand(tokens, source, extended) == source.tokenize(text)
        assert extended.decode(extended(text, add_special_tokens=False)["input_ids"]) == \
            source.decode(source(text, add_special_tokens=False)["input_ids"])
    english = "The quick brown fox jumps over the lazy dog"
    if not set(extended.tokenize(english)) & set(new_tokens):
        assert extended.tokenize(english) == source.tokenize(english)
    assert np.isfinite(model.get_input_embeddings().weight.detach().numpy()).all()


@pytest.mark.slow
def test_extend_real_smollm2_with_swahili_keeps_english_segmentation(shared_data, tmp_path) -> None:
    """SmolLM2 (byte-level BPE) + 1000 Swahili pieces: Swahili gets shorter, English SIB-200 text barely moves."""
    from transformers import AutoTokenizer

    from focusflow.config import TokenizerSpec
    from focusflow.corpus.io import read_texts, write_texts
    from focusflow.embeddings.modes import extend_tokenizer, frequency_order
    from focusflow.tokenizer import load_tokenizer, train_tokenizer
    from focusflow.tokenizer.canonical import canonical_vocab
    from focusflow.tokenizer.gguf_wheels import GgufSourceError

    try:
        source = load_tokenizer("smollm2:135m")
    except GgufSourceError as exc:
        pytest.skip(str(exc))
    lines = [line for line in (shared_data / "text" / "sw.txt").read_text(encoding="utf-8").splitlines() if line]
    write_texts(tmp_path / "train.jsonl", ["\n".join(lines[i:i + 20]) for i in range(0, 20_000, 20)])
    train_tokenizer(tmp_path / "train.jsonl", TokenizerSpec(vocab_size="auto"), tmp_path / "tok", source)
    language = AutoTokenizer.from_pretrained(tmp_path / "tok")
    forms = canonical_vocab(language)
    known = {form.key for form in canonical_vocab(source)}
    order = frequency_order(language, read_texts(tmp_path / "train.jsonl"))
    new = [forms[i] for i in order.tolist() if forms[i].kind != "special" and forms[i].key not in known]
    extended, added = extend_tokenizer(source, new, limit=1000)
    assert len(added) == 1000

    english = [row.split("\t", 2)[2] for row in
               (shared_data / "cls" / "sib200" / "eng_Latn" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    changed = [text for text in english if extended.tokenize(text) != source.tokenize(text)]
    assert len(changed) <= 0.03 * len(english), changed[:5]
    for text in changed:  # where a shared word (e.g. "safari") now is one piece, the source's pieces are still there
        assert _expand(extended.tokenize(text), source, extended) == source.tokenize(text)
    heldout = lines[-500:]
    words = sum(len(text.split()) for text in heldout)
    before = sum(len(source.tokenize(text)) for text in heldout) / words
    after = sum(len(extended.tokenize(text)) for text in heldout) / words
    assert after < 0.92 * before, (before, after)


@pytest.mark.parametrize("family", ["xlmr", "gpt2"])
def test_extend_adds_only_new_pieces_the_corpus_uses(family, tiny_sources, transfer_case, tmp_path) -> None:
    """A piece of the language tokenizer that the run's corpus never uses carries nothing, and one the source cannot
    spell would be drawn at random (SmolLM2 lacks 23 bytes: such rows won greedy decoding over every real token):
    extend mode, asked for more than the corpus uses, adds the used pieces and stops."""
    from transformers import AutoTokenizer

    from focusflow.corpus.io import write_texts
    from focusflow.embeddings.modes import count_token_ids
    from focusflow.models.loading import load_source
    from focusflow.tokenizer.canonical import canonical_vocab

    subset = transfer_case["texts"][:40]  # the language tokenizer was trained on 800: some of its pieces go unused
    write_texts(tmp_path / "train.jsonl", subset)
    language = transfer_case["target"]
    counts = count_token_ids(language, subset)
    source_keys = {form.key for form in canonical_vocab(load_source(tiny_sources[family])[1])}
    new = {form.key: counts[form.id] for form in canonical_vocab(language)
           if form.kind != "special" and form.key not in source_keys}
    assert any(count == 0 for count in new.values()) and any(count > 0 for count in new.values())
    totals = initialize_model(tiny_sources[family], transfer_case["target_dir"], tmp_path / "ext", "focus",
                              mode="extend", aux_dir=transfer_case["aux_dir"], train=tmp_path / "train.jsonl",
                              extend_top_n=10_000)
    extended = canonical_vocab(AutoTokenizer.from_pretrained(tmp_path / "ext"))
    added = {form.key for form in extended[len(extended) - totals["added"]:]}
    assert added and all(new[key] > 0 for key in added)
