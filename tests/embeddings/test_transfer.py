from __future__ import annotations

import json
from pathlib import Path

import entmax
import numpy as np
import pandas as pd
import pytest
import torch

from focusflow.embeddings import AuxVectors, compute_overlap, initialize_model, load_aux_vectors, transfer_embeddings
from focusflow.tokenizer.canonical import canonical_vocab
from tests.tiny_models import sample_texts, train_tokenizer


@pytest.fixture(scope="module")
def pair():
    source = train_tokenizer("xlmr", sample_texts(600, seed=0), vocab_size=400)
    target = train_tokenizer("xlmr", sample_texts(600, seed=1), vocab_size=300)
    rng = np.random.default_rng(0)
    matrices = {"embeddings": rng.standard_normal((len(source), 12)).astype(np.float32),
                "output_bias": rng.standard_normal(len(source)).astype(np.float32)}
    tokens = [t for t, _ in sorted(target.get_vocab().items(), key=lambda x: x[1])]
    has_vector = [t for i, t in enumerate(tokens) if i % 7 != 3]  # every 7th token is 'rare' (no vector)
    aux = AuxVectors.from_arrays(has_vector, rng.standard_normal((len(has_vector), 8)))
    return source, target, matrices, aux


def test_focus_rows_by_hand(pair) -> None:
    """The paper's FOCUS (rare_tokens=random): rows without a fastText vector drawn from N(mean, std)."""
    source, target, matrices, aux = pair
    result = transfer_embeddings(source, target, matrices, "focus", aux=aux, seed=3, rare_tokens="random")
    overlap = compute_overlap(source, target)
    copies = overlap.as_dict()
    E, bias = matrices["embeddings"], matrices["output_bias"]
    for t, s in copies.items():
        assert np.array_equal(result.embeddings[t], E[s]) and result.matrices["output_bias"][t] == bias[s]
    anchors = [t for t in overlap.target_ids.tolist() if aux.index.get(target.convert_ids_to_tokens(t)) is not None
               and t not in target.all_special_ids]  # specials are never anchors
    anchor_vectors = aux.vectors[[aux.index[target.convert_ids_to_tokens(t)] for t in anchors]]
    anchor_sources = [copies[t] for t in anchors]
    combined = np.flatnonzero(result.plan.fate == "combined")
    assert len(combined) > 50
    for t in combined[:40].tolist():
        x = aux.vectors[aux.index[target.convert_ids_to_tokens(t)]]
        cos = anchor_vectors @ x / (np.linalg.norm(anchor_vectors, axis=1) * np.linalg.norm(x))
        w = entmax.sparsemax(torch.from_numpy(cos.astype(np.float64)), dim=0).numpy()
        np.testing.assert_allclose(result.embeddings[t], w @ E[anchor_sources], atol=1e-5)
        np.testing.assert_allclose(result.matrices["output_bias"][t], w @ bias[anchor_sources], atol=1e-5)  # same weights
        assert result.plan.support[t] == (w > 0).sum()
    rare = np.flatnonzero(result.plan.fate == "random")
    assert len(rare) >= 15  # rare new tokens (overlap tokens without a vector are still copied)
    again = transfer_embeddings(source, target, matrices, "focus", aux=aux, seed=3, rare_tokens="random")
    assert np.array_equal(again.embeddings, result.embeddings)  # deterministic for a seed
    other = transfer_embeddings(source, target, matrices, "focus", aux=aux, seed=4, rare_tokens="random")
    assert not np.array_equal(other.embeddings[rare], result.embeddings[rare])
    assert np.array_equal(other.embeddings[combined], result.embeddings[combined])
    report = result.report
    assert set(report["fate"]) <= {"copied_exact", "copied_fuzzy", "copied_special", "combined", "random"}
    assert report.loc[combined[0], "top_anchors"].count(":") >= 1
    assert result.totals["combined"] == len(combined) and result.totals["random"] == len(rare)


def test_rare_rows_follow_source_statistics() -> None:
    source = train_tokenizer("xlmr", sample_texts(600, seed=0), vocab_size=400)
    target = train_tokenizer("xlmr", sample_texts(3000, seed=5), vocab_size=2000)
    E = (np.random.default_rng(1).standard_normal((len(source), 6)) * [1, 2, 3, 4, 5, 6] + 10).astype(np.float32)
    result = transfer_embeddings(source, target, E, "focus", aux=AuxVectors.from_arrays(["▁ka"], np.ones((1, 4))),
                                 rare_tokens="random")
    rare = result.embeddings[result.plan.fate == "random"]
    assert len(rare) > 500
    np.testing.assert_allclose(rare.mean(axis=0), E.mean(axis=0), atol=0.3)
    np.testing.assert_allclose(rare.std(axis=0), E.std(axis=0), rtol=0.1)


def test_baselines(pair) -> None:
    source, target, matrices, aux = pair
    E = matrices["embeddings"]
    copies = compute_overlap(source, target).as_dict()
    mean = transfer_embeddings(source, target, E, "mean")
    rows = np.flatnonzero(mean.plan.fate == "mean")
    np.testing.assert_allclose(mean.embeddings[rows], np.broadcast_to(E.mean(axis=0), (len(rows), 12)), atol=1e-6)
    random = transfer_embeddings(source, target, E, "random", seed=1)
    random_rows = np.flatnonzero(random.plan.fate == "random")
    source_rows = {row.tobytes() for row in E}
    assert all(random.embeddings[r].tobytes() in source_rows for r in random_rows)  # permuted source rows
    fvt = transfer_embeddings(source, target, E, "fvt")
    forms = canonical_vocab(target)
    for t in np.flatnonzero(fvt.plan.fate == "combined")[:20].tolist():
        text = (" " if forms[t].word_start else "") + forms[t].text
        ids = source.backend_tokenizer.encode(text, add_special_tokens=False).ids
        np.testing.assert_allclose(fvt.embeddings[t], E[ids].mean(axis=0), atol=1e-6)
    for t, s in copies.items():
        assert np.array_equal(fvt.embeddings[t], E[s])
    avg = transfer_embeddings(source, target, E, "avg-eg")
    assert (avg.plan.fate == "combined").sum() > 20
    symbolic = transfer_embeddings(source, target, E, "focus-symbolic", aux=aux)
    assert symbolic.totals["copied_exact"] < transfer_embeddings(source, target, E, "focus", aux=aux).totals["copied_exact"]
    with pytest.raises(ValueError, match="needs auxiliary vectors"):
        transfer_embeddings(source, target, E, "focus")
    with pytest.raises(ValueError, match="unknown method"):
        transfer_embeddings(source, target, E, "magic")


def _wechsel_files(folder: Path) -> tuple[Path, Path]:
    """A small fastText ``.bin`` of word vectors and an identity dictionary TSV over its first 50 words."""
    import fasttext

    (folder / "words.txt").write_text("\n".join(sample_texts(400, seed=0)), encoding="utf-8")
    model = fasttext.train_unsupervised(str(folder / "words.txt"), dim=8, minCount=1, epoch=2, thread=1, verbose=0)
    model.save_model(str(folder / "v.bin"))
    (folder / "dict.tsv").write_text("\n".join(f"{w}\t{w}" for w in model.get_words()[:50]), encoding="utf-8")
    return folder / "v.bin", folder / "dict.tsv"


def test_wechsel_with_user_vectors(tmp_path, pair) -> None:
    source, target, matrices, _ = pair
    vectors, dictionary = _wechsel_files(tmp_path)
    result = transfer_embeddings(source, target, matrices["embeddings"], "wechsel", wechsel_source_vectors=vectors,
                                 wechsel_target_vectors=vectors, wechsel_dictionary=dictionary)
    combined = result.plan.fate == "combined"
    assert combined.sum() > 200 and np.all(result.plan.support[combined] == 10)
    np.testing.assert_allclose(np.add.reduceat(result.plan.weights, result.plan.indptr[:-1])[combined], 1, atol=1e-5)
    with pytest.raises(ValueError, match="wechsel_source_vectors"):
        transfer_embeddings(source, target, matrices["embeddings"], "wechsel")


def test_init_command_runs_wechsel_with_its_files(tmp_path, tiny_sources, transfer_case) -> None:
    """The flow refuses wechsel (it cannot make aligned vectors); ``focusflow init`` given them runs it."""
    from typer.testing import CliRunner

    from focusflow.cli import app

    vectors, dictionary = _wechsel_files(tmp_path)
    result = CliRunner().invoke(app, [
        "init", "--source", str(tiny_sources["xlmr"]), "--target-tokenizer", str(transfer_case["target_dir"]),
        "--method", "wechsel", "--wechsel-source-vectors", str(vectors), "--wechsel-target-vectors", str(vectors),
        "--wechsel-dictionary", str(dictionary), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    totals = json.loads((tmp_path / "out" / "transfer_totals.json").read_text())
    assert totals["method"] == "wechsel" and totals["combined"] > 0


def test_aux_files(transfer_case) -> None:
    import fasttext

    aux = load_aux_vectors(transfer_case["aux_dir"])
    model = fasttext.load_model(str(transfer_case["aux_dir"] / "fasttext.bin"))
    for token in aux.tokens[:20]:
        np.testing.assert_allclose(aux.vectors[aux.index[token]], model.get_word_vector(token), atol=1e-6)
    assert transfer_case["aux_stats"]["target_vocab_coverage"] > 0.5
    assert any(t.startswith("▁") for t in aux.tokens)  # trained on target-tokenized text


def test_fasttext_is_reproducible_for_a_seed_and_skipgram_is_available(transfer_case, tmp_path) -> None:
    """threads=1: two trainings give the same vectors (fastText's generator is seeded internally; its Python API
    takes no seed); the skipgram objective trains too."""
    from focusflow.config import FastTextSpec
    from focusflow.embeddings import train_aux_embeddings

    def vectors(name: str, **spec) -> np.ndarray:
        train_aux_embeddings(transfer_case["target_dir"], transfer_case["train"],
                             FastTextSpec(dim=8, min_count=2, epochs=1, threads=1, **spec), tmp_path / name)
        return load_aux_vectors(tmp_path / name).vectors

    first, again = vectors("a"), vectors("b")
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, vectors("sg", model="skipgram"))


@pytest.mark.parametrize("family", ["xlmr", "bert", "gpt2", "llama"])
def test_initialize_model_loads(family, tiny_sources, transfer_case, tmp_path) -> None:
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

    from focusflow.models.loading import load_source
    from focusflow.models.surgery import token_parameters

    out = tmp_path / "out"
    totals = initialize_model(tiny_sources[family], transfer_case["target_dir"], out, "focus",
                              aux_dir=transfer_case["aux_dir"])
    cls = AutoModelForCausalLM if family in ("gpt2", "llama") else AutoModelForMaskedLM
    model = cls.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    target = transfer_case["target"]
    assert len(tokenizer) == len(target) == model.config.vocab_size == totals["vocab_size"]
    assert model.config.pad_token_id == target.pad_token_id and model.config.bos_token_id == target.bos_token_id
    report = pd.read_parquet(out / "transfer_report.parquet")
    assert len(report) == len(target)
    assert json.loads((out / "transfer_totals.json").read_text())["combined"] == totals["combined"] > 0
    source_model, _, _ = load_source(tiny_sources[family])
    before, after = token_parameters(source_model).matrices, token_parameters(model).matrices
    assert set(before) == set(after)  # bias and untied output embeddings carried over
    copied = report[report["fate"].str.startswith("copied")]
    for name in before:
        np.testing.assert_allclose(after[name][copied["target_id"]], before[name][copied["source_id"]], atol=1e-6)
    with torch.no_grad():
        logits = model(**tokenizer(transfer_case["texts"][:2], return_tensors="pt", padding=True)).logits
    assert logits.shape[-1] == len(target) and torch.isfinite(logits).all()


def test_decoder_with_a_padded_embedding_matrix(tiny_sources, transfer_case, tmp_path) -> None:
    """Decoders often round their matrix up past the tokenizer (multiples of 64): the extra rows are ignored."""
    from transformers import AutoModelForCausalLM

    from focusflow.models.loading import load_source
    from focusflow.models.surgery import token_parameters

    model, tokenizer, _ = load_source(tiny_sources["llama"])
    model.resize_token_embeddings(len(tokenizer) + 7)
    model.save_pretrained(tmp_path / "padded")
    tokenizer.save_pretrained(tmp_path / "padded")
    totals = initialize_model(tmp_path / "padded", transfer_case["target_dir"], tmp_path / "out", "focus",
                              aux_dir=transfer_case["aux_dir"])
    result = AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    assert result.config.vocab_size == len(transfer_case["target"]) == totals["vocab_size"]
    report = pd.read_parquet(tmp_path / "out" / "transfer_report.parquet")
    copied = report[report["fate"].str.startswith("copied")]
    before = token_parameters(model).matrices
    after = token_parameters(result).matrices
    for name in ("embeddings", "output_embeddings"):
        np.testing.assert_allclose(after[name][copied["target_id"]], before[name][copied["source_id"]], atol=1e-6)


def test_prune_and_extend(tiny_sources, transfer_case, tmp_path) -> None:
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from focusflow.models.loading import load_source
    from focusflow.models.surgery import token_parameters

    source_model, source_tok, _ = load_source(tiny_sources["xlmr"])
    E = token_parameters(source_model).matrices["embeddings"]
    texts = transfer_case["texts"]
    pruned = initialize_model(tiny_sources["xlmr"], None, tmp_path / "pruned", "focus", mode="prune",
                              train=transfer_case["train"])
    tok = AutoTokenizer.from_pretrained(tmp_path / "pruned")
    model = AutoModelForMaskedLM.from_pretrained(tmp_path / "pruned")
    assert pruned["kept"] == len(tok) < len(source_tok)
    for text in texts[:50]:  # same segmentation, same vectors
        assert tok.tokenize(text) == source_tok.tokenize(text)
        np.testing.assert_array_equal(model.get_input_embeddings().weight[tok(text)["input_ids"]].detach().numpy(),
                                      E[source_tok(text)["input_ids"]])
    extended = initialize_model(tiny_sources["xlmr"], transfer_case["target_dir"], tmp_path / "ext", "focus", mode="extend",
                                aux_dir=transfer_case["aux_dir"], train=transfer_case["train"], extend_top_n=40)
    tok = AutoTokenizer.from_pretrained(tmp_path / "ext")
    model = AutoModelForMaskedLM.from_pretrained(tmp_path / "ext")
    assert extended["added"] == 40 and len(tok) == len(source_tok) + 40
    # every source token keeps its id (<mask>, added after training, included) and its row
    assert tok.convert_ids_to_tokens(list(range(len(source_tok)))) == source_tok.convert_ids_to_tokens(
        list(range(len(source_tok))))
    assert tok.mask_token_id == source_tok.mask_token_id
    np.testing.assert_array_equal(model.get_input_embeddings().weight[: len(source_tok)].detach().numpy(), E)
    # every appended token sits at the id its row was written for: the FOCUS row of the same language token
    language = transfer_case["target"]
    focus = transfer_embeddings(source_tok, language, E, "focus", aux=load_aux_vectors(transfer_case["aux_dir"]))
    report = pd.read_parquet(tmp_path / "ext" / "transfer_report.parquet")
    appended = report[report["fate"] != "kept"]
    assert len(appended) == 40 and appended["target_id"].tolist() == list(range(len(source_tok), len(tok)))
    assert tok.convert_ids_to_tokens(appended["target_id"].tolist()) == appended["token"].tolist()
    np.testing.assert_array_equal(model.get_input_embeddings().weight[len(source_tok):].detach().numpy(),
                                  focus.embeddings[language.convert_tokens_to_ids(appended["token"].tolist())])
    assert np.mean([len(tok.tokenize(t)) for t in texts]) < np.mean([len(source_tok.tokenize(t)) for t in texts])


def test_cli_init(tiny_sources, transfer_case, tmp_path) -> None:
    from typer.testing import CliRunner

    from focusflow.cli import app

    result = CliRunner().invoke(app, ["init", "--source", str(tiny_sources["bert"]), "--target-tokenizer",
                                      str(transfer_case["target_dir"]), "--method", "fvt", "--out", str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    totals = json.loads(result.output[result.output.index("{"):])
    assert totals["method"] == "fvt" and totals["vocab_size"] == len(transfer_case["target"])
    assert totals["artifact"].startswith("file://") and (tmp_path / "m" / "transfer_totals.json").is_file()
    bad = CliRunner().invoke(app, ["init", "--source", str(tiny_sources["bert"]), "--target-tokenizer",
                                   str(transfer_case["target_dir"]), "--method", "focus", "--out", str(tmp_path / "n")])
    assert bad.exit_code == 2 and "auxiliary vectors" in bad.output
    missing = CliRunner().invoke(app, ["init", "--source", str(tiny_sources["bert"]), "--target-tokenizer",
                                       str(transfer_case["target_dir"]), "--method", "focus", "--aux",
                                       str(tmp_path / "no-aux"), "--out", str(tmp_path / "o")])
    assert missing.exit_code == 2 and "no-aux does not exist" in missing.output
    assert isinstance(missing.exception, SystemExit)  # one clear line, no traceback
    text = tmp_path / "corpus.txt"  # a plain-text corpus works where a .jsonl does (prune keeps the tokens it uses)
    text.write_text("\n".join(transfer_case["texts"][:200]), encoding="utf-8")
    pruned = CliRunner().invoke(app, ["init", "--source", str(tiny_sources["xlmr"]), "--corpus", str(text),
                                      "--mode", "prune", "--out", str(tmp_path / "p")])
    assert pruned.exit_code == 0, pruned.output
