"""A pruned source reads new text of its language as the source does: it keeps the corpus's pieces and then the
pieces new text is likeliest to need (other casings, numbers, pieces inside the corpus's words, then the most
probable), written with the corpus's characters, as far as its parameter budget allows."""

from __future__ import annotations

import json

import pytest

from focusflow.corpus.io import write_texts
from focusflow.embeddings import initialize_model
from focusflow.embeddings.reading import corpus_characters, corpus_spelling, probability_order, reading_pieces, spelled_with
from focusflow.tokenizer.canonical import canonical_vocab
from focusflow.tokenizer.metrics import segmentation_agreement
from tests.tiny_models import sample_texts


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A small corpus of the language (a few of its words) and held-out text that also uses words it never held."""
    root = tmp_path_factory.mktemp("prune")
    language = sample_texts(400, seed=0)  # the texts the tiny sources' tokenizers were trained on
    train = [text for text in language if len(text.split()) < 9][:60]
    write_texts(root / "train.jsonl", train)
    write_texts(root / "heldout.jsonl", [text for text in language if len(text.split()) >= 12][:80])
    return root


def _pruned(source, corpus, out, budget):
    from transformers import AutoTokenizer

    totals = initialize_model(source, None, out, "mean", mode="prune", train=corpus / "train.jsonl",
                              prune_budget=budget)
    return totals, AutoTokenizer.from_pretrained(out)


@pytest.mark.parametrize("family", ["xlmr", "gpt2", "bert"])
def test_a_pruned_vocabulary_with_room_cuts_new_text_as_the_source_does(tiny_sources, corpus, tmp_path, family):
    from transformers import AutoTokenizer

    source = AutoTokenizer.from_pretrained(tiny_sources[family])
    language = sample_texts(400, seed=0)
    alphabet = corpus_characters([line for line in language if len(line.split()) < 9][:60])  # the corpus's
    new_text = [line for line in language if len(line.split()) >= 12 and set(line) - {" "} <= alphabet]
    assert len(new_text) > 20
    corpus_only, narrow = _pruned(tiny_sources[family], corpus, tmp_path / "narrow", budget=0.0)
    room, wide = _pruned(tiny_sources[family], corpus, tmp_path / "wide", budget=1.0)
    assert corpus_only["reading_pieces"] <= 3 and room["reading_pieces"] > 0 and len(narrow) < len(wide)
    assert segmentation_agreement(source, narrow, new_text)["sentences"] < 1.0, "the corpus alone misses pieces"
    assert segmentation_agreement(source, wide, new_text) | {"texts": 0, "word_count": 0} == \
        {"sentences": 1.0, "words": 1.0, "texts": 0, "word_count": 0}
    assert room["reads_as_source"]["sentences"] > corpus_only["reads_as_source"]["sentences"]


def test_the_budget_bounds_the_parameters_and_fills_with_the_most_probable_pieces_first(tiny_sources, corpus,
                                                                                       tmp_path):
    import numpy as np
    from transformers import AutoTokenizer

    from focusflow.models.loading import load_source

    model, _, _ = load_source(tiny_sources["xlmr"])
    total = sum(p.numel() for p in model.parameters())
    corpus_only, _ = _pruned(tiny_sources["xlmr"], corpus, tmp_path / "a", budget=0.0)
    half_way = (corpus_only["n_params"] / total + 1.0) / 2
    totals, _ = _pruned(tiny_sources["xlmr"], corpus, tmp_path / "b", budget=half_way)
    assert corpus_only["n_params"] < totals["n_params"] <= half_way * total and totals["within_budget"] is True
    tight, _ = _pruned(tiny_sources["xlmr"], corpus, tmp_path / "c", budget=0.01)
    assert tight["within_budget"] is False, "the corpus's pieces are kept over a budget too small for them: said"

    source = AutoTokenizer.from_pretrained(tiny_sources["xlmr"])
    characters = corpus_characters(sample_texts(400, seed=0))
    eligible = spelled_with(canonical_vocab(source), characters)
    ranked = [int(i) for i in probability_order(source) if eligible[i]]
    scores = [score for _, score in json.loads(source.backend_tokenizer.to_str())["model"]["vocab"]]
    assert len(ranked) > 10 and [scores[i] for i in ranked] == sorted((scores[i] for i in ranked), reverse=True)
    used = np.asarray(ranked[-3:])
    kept = reading_pieces(source, used, characters, rows=len(used) + 4, classes=())  # rule 1: by probability
    assert kept.tolist() == sorted([*used.tolist(), *ranked[:4]])
    assert len(reading_pieces(source, used, characters, rows=len(used) + 4)) == 7, "rule 2 keeps the same count"


def _unigram(pieces: list[tuple[str, float]]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.Unigram(pieces, unk_id=0))
    backend.pre_tokenizer, backend.decoder = pre_tokenizers.Metaspace(), decoders.Metaspace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>")


def test_after_the_corpuss_pieces_come_its_other_casings_numbers_pieces_inside_its_words_then_the_most_probable():
    """The order in which new text of a language needs the source's pieces (measured on SIB-200 in three languages):
    a capitalized word, a number, another form of a word it has; only then the source's most probable pieces."""
    import numpy as np

    pieces = [("<unk>", 0.0), ("\u2581", -2.0), *[(char, -3.0) for char in "abkuwK12é"],
              ("\u2581kwa", -5.0), ("\u2581caf\u00e9", -3.5), ("\u2581wawa", -4.0), ("\u2581abu", -4.5),
              ("\u2581Kwa", -9.0), ("\u258112", -9.5), ("bu", -9.8)]
    source = _unigram(pieces)
    ids = source.get_vocab()
    spelling = corpus_spelling(["kwa kabu 12", "Kabu kwa 1 2", "kabu K"])  # each character twice or more
    assert spelling.words[0] == "kwa" and "é" not in spelling.characters
    used = np.asarray([ids[piece] for piece in ["\u2581", "\u2581kwa", *"abkuwK12"]])
    order = ["\u2581Kwa", "\u258112", "bu", "\u2581wawa", "\u2581abu"]  # "abu" is inside "kabu", not at its start
    for extra in range(1, len(order) + 2):
        kept = set(reading_pieces(source, used, spelling, rows=len(used) + extra).tolist())
        assert kept == set(used.tolist()) | {ids[piece] for piece in order[:extra]}, extra
    assert ids["\u2581caf\u00e9"] not in kept, "a piece written with a character the corpus lacks is never kept"


def test_only_pieces_written_with_the_corpuss_characters_are_eligible(tiny_sources):
    from transformers import AutoTokenizer

    source = AutoTokenizer.from_pretrained(tiny_sources["xlmr"])
    forms = canonical_vocab(source)
    eligible = spelled_with(forms, {"a", "b"})
    assert all(set(forms[i].text) <= {"a", "b"} for i in eligible.nonzero()[0])
    assert not any(eligible[i] for i, form in enumerate(forms) if form.kind != "regular")
    assert corpus_characters(["abca", "x"], min_count=2) == {"a"}


@pytest.mark.parametrize("shape", ["gemma", "smollm"])
def test_a_pruned_decoder_reads_and_writes_its_text_as_the_source_does_with_the_same_logits(corpus, tmp_path, shape):
    """Issue 48: a decoder's pruned source round-trips held-out lines, and on text its vocabulary covers it gives the
    source's logits over the kept vocabulary (its rows are the source's, its body untouched)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.tiny_decoders import save_tiny_gemma, save_tiny_smollm

    save = save_tiny_gemma if shape == "gemma" else save_tiny_smollm
    source = save(tmp_path / "source", sample_texts(400, seed=0))
    totals = initialize_model(source, None, tmp_path / "pruned", "mean", mode="prune", train=corpus / "train.jsonl",
                              prune_budget=0.0)
    theirs, ours = (AutoTokenizer.from_pretrained(folder) for folder in (source, tmp_path / "pruned"))
    assert len(ours) < len(theirs) and totals["reads_as_source"]["texts"] > 0
    held_out = [line for line in sample_texts(400, seed=0) if len(line.split()) >= 12][:30]
    for line in held_out:
        assert ours.decode(ours(line, add_special_tokens=False)["input_ids"]) == line
    source_model, pruned_model = (AutoModelForCausalLM.from_pretrained(folder).eval()
                                  for folder in (source, tmp_path / "pruned"))
    kept = theirs.convert_tokens_to_ids(ours.convert_ids_to_tokens(list(range(len(ours)))))
    covered = next(line for line in held_out if ours.tokenize(line) == theirs.tokenize(line))
    with torch.no_grad():
        expected = source_model(**theirs(covered, return_tensors="pt")).logits[0][:, kept]
        got = pruned_model(**ours(covered, return_tensors="pt")).logits[0]
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


def test_every_init_mode_is_a_row_and_the_config_accepts_exactly_the_rows():
    """Issue 46: the modes were an if/elif in embeddings.api, with MODES spelled in two places."""
    import typing

    from focusflow.config import InitSpec
    from focusflow.embeddings.api import INIT_MODES, MODES
    from focusflow.methods import CANDIDATES

    assert set(typing.get_args(InitSpec.model_fields["mode"].annotation)) == set(INIT_MODES) == set(MODES)
    assert all(callable(build) for build in INIT_MODES.values())
    assert {spec.mode for spec in CANDIDATES.values()} <= set(INIT_MODES)


def test_the_corpuss_words_are_counted_on_its_first_characters_and_an_unknown_class_is_refused():
    from focusflow.errors import InputError

    spelling = corpus_spelling(["aa bb", "cc cc", "dd dd dd"], max_words=2, sample_characters=10)
    assert spelling.words == ["cc", "aa"] and spelling.characters == {"a", "b", "c", "d"}, "the third text not read"
    source = _unigram([("<unk>", 0.0), ("\u2581", -1.0), ("a", -2.0)])
    with pytest.raises(InputError, match="unknown reading classes"):
        reading_pieces(source, [1], spelling, rows=3, classes=("names",))


def test_wordpiece_pieces_inside_words_are_placed_as_its_pre_tokenizer_cuts():
    """A WordPiece word starts without ``##`` and again after punctuation (``l'homme``: ``l``, ``'``, ``homme``);
    a ``##`` piece never starts one."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    pieces = ["[UNK]", "ka", "##bu", "bu", "##ka", "homme", "##homme", "l", "'", "##l", "mm", "##mm"]
    backend = Tokenizer(models.WordPiece({piece: i for i, piece in enumerate(pieces)}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    source = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")
    spelling = corpus_spelling(["kabu l'homme", "kabu l'homme"])
    ids = source.get_vocab()
    used = [ids["[UNK]"]]
    kept = set(reading_pieces(source, used, spelling, rows=len(used) + 6, classes=("inside_words",)).tolist())
    assert {ids[p] for p in ("ka", "##bu", "l", "'", "homme", "##mm")} == kept - set(used), \
        [pieces[i] for i in sorted(kept)]
