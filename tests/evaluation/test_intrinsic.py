"""Intrinsic metrics checked against hand computations and the models' own full forward passes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from focusflow.evaluation.intrinsic import (
    encode_texts,
    evaluate_clm,
    evaluate_mlm,
    representation_fidelity,
    select_heldout_sentences,
    sentence_embeddings,
)
from focusflow.models.lm_stats import Masker, unigram_counts, unigram_log_probs
from tests.tiny_models import sample_texts, tiny_model, train_tokenizer


@pytest.fixture(scope="module")
def xlmr():
    tokenizer = train_tokenizer("xlmr", sample_texts(300), 300)
    return tiny_model("xlmr", tokenizer).eval(), tokenizer


@pytest.fixture(scope="module")
def gpt2():
    tokenizer = train_tokenizer("gpt2", sample_texts(300), 400)
    return tiny_model("gpt2", tokenizer).eval(), tokenizer


def test_masking_rates_specials_and_determinism():
    ids = np.arange(20_000) % 500 + 5
    special = np.zeros(len(ids), dtype=bool)
    special[::10] = True
    masker = Masker(mask_token_id=4, vocab_size=505, special=np.zeros(505, dtype=bool), random_from_any_token=True)
    inputs, selected = masker.mask(ids, special, np.random.default_rng([0, 7]))
    assert not selected[special].any()
    assert abs(selected.sum() / (~special).sum() - 0.15) < 0.01
    masked = (inputs == 4) & selected
    unchanged = (inputs == ids) & selected
    assert abs(masked.sum() / selected.sum() - 0.8) < 0.03
    assert abs(unchanged.sum() / selected.sum() - 0.1 - 0.1 / 505) < 0.02  # 10% kept + random picks of the same id
    again = masker.mask(ids, special, np.random.default_rng([0, 7]))
    assert np.array_equal(again[0], inputs) and np.array_equal(again[1], selected)
    assert (inputs[~selected] == ids[~selected]).all()


@pytest.mark.parametrize("family", ["xlmr", "gpt2", "bert"])
def test_token_bytes_cover_the_non_space_bytes(family):
    tokenizer = train_tokenizer(family, sample_texts(300), 300)
    texts = ["Kata nama 12, héllo.", "Ni ma ka ta ka"]
    encoded = encode_texts(tokenizer, texts)
    for text, sizes, special in zip(texts, encoded.token_bytes, encoded.special, strict=False):
        assert sizes.sum() == len(text.replace(" ", "").encode("utf-8"))
        assert (sizes[special] == 0).all()


def test_mlm_loss_equals_the_full_forward_pass(xlmr):
    model, tokenizer = xlmr
    texts = sample_texts(40, seed=3)
    result = evaluate_mlm(model, tokenizer, texts, seed=5, max_tokens_per_batch=300)
    # recompute with the model's own forward on the same fixed masks, one document at a time
    encoded = encode_texts(tokenizer, texts)
    loss = correct = count = nbytes = 0.0
    masker = Masker.for_tokenizer(tokenizer, random_from_any_token=True)
    for index, (ids, special, sizes) in enumerate(zip(encoded.ids, encoded.special, encoded.token_bytes, strict=False)):
        inputs, selected = masker.mask(ids, special, np.random.default_rng([5, index]))
        with torch.no_grad():
            logits = model(input_ids=torch.from_numpy(inputs)[None]).logits[0]
        target = torch.from_numpy(ids)[torch.from_numpy(selected)]
        picked = logits[torch.from_numpy(selected)]
        loss += float(torch.nn.functional.cross_entropy(picked, target, reduction="sum"))
        correct += float((picked.argmax(-1) == target).sum())
        count += len(target)
        nbytes += sizes[selected].sum()
    assert result["n_scored"] == count and result["n_bytes"] == nbytes
    assert result["loss"] == pytest.approx(loss / count, rel=1e-4)
    assert result["accuracy"] == pytest.approx(correct / count)
    assert result["bits_per_byte"] == pytest.approx(loss / math.log(2) / nbytes, rel=1e-4)


def test_same_positions_for_models_sharing_a_vocabulary(xlmr):
    model, tokenizer = xlmr
    other = tiny_model("xlmr", tokenizer, seed=1).eval()
    texts = sample_texts(30, seed=4)
    a = evaluate_mlm(model, tokenizer, texts, seed=0, max_tokens_per_batch=200)
    b = evaluate_mlm(other, tokenizer, texts, seed=0, max_tokens_per_batch=5000)
    assert (a["n_scored"], a["n_bytes"]) == (b["n_scored"], b["n_bytes"])
    assert a["loss"] != b["loss"]


def test_a_head_that_outputs_unigram_log_probs_scores_the_unigram_loss(xlmr):
    _, tokenizer = xlmr
    model = tiny_model("xlmr", tokenizer, seed=2).eval()
    texts = sample_texts(60, seed=9)
    unigram = unigram_log_probs(unigram_counts(tokenizer, sample_texts(300)))
    with torch.no_grad():
        model.lm_head.dense.weight.zero_()
        model.lm_head.dense.bias.zero_()
        model.lm_head.bias.copy_(torch.from_numpy(unigram))
    result = evaluate_mlm(model, tokenizer, texts, unigram=unigram, precision="fp32")  # exact arithmetic, not bf16
    assert result["loss"] == pytest.approx(result["unigram_loss"], rel=1e-4)
    assert result["bits_per_byte"] == pytest.approx(result["unigram_bits_per_byte"], rel=1e-4)


def test_unigram_counts_and_smoothing():
    class Whitespace:
        def __len__(self):
            return 4

        def __call__(self, texts, add_special_tokens=False, verbose=True):  # the HF signature we use
            return {"input_ids": [[int(w) for w in t.split()] for t in texts]}

    counts = unigram_counts(Whitespace(), ["0 1 1", "1 2"])
    assert counts.tolist() == [1, 3, 1, 0]
    probs = np.exp(unigram_log_probs(counts, smoothing=0.5))
    np.testing.assert_allclose(probs, np.array([1.5, 3.5, 1.5, 0.5]) / 7.0, rtol=1e-6)


def test_clm_loss_equals_the_models_own_loss(gpt2):
    model, tokenizer = gpt2
    text = sample_texts(1, seed=11)[0]
    result = evaluate_clm(model, tokenizer, [text])
    assert tokenizer(text)["input_ids"][0] != tokenizer.eos_token_id, "this tokenizer adds no BOS"
    ids = torch.tensor([[tokenizer.eos_token_id, *tokenizer(text)["input_ids"]]])  # the document starts after EOS
    with torch.no_grad():
        expected = float(model(input_ids=ids, labels=ids).loss)
    assert result["n_scored"] == ids.shape[1] - 1, "every token scored, the first too"
    assert result["loss"] == pytest.approx(expected, rel=1e-4)
    assert result["n_bytes"] == len("".join(text.split()).encode()), "every byte of the text"
    batched = evaluate_clm(model, tokenizer, sample_texts(20, seed=11), max_tokens_per_batch=64)
    assert batched["n_documents"] == 20 and 0 < batched["accuracy"] < 1


def test_sentence_embeddings_ignore_padding_and_are_normalized(xlmr):
    model, tokenizer = xlmr
    texts = sample_texts(12, seed=1)
    together = sentence_embeddings(model, tokenizer, texts)
    alone = np.stack([sentence_embeddings(model, tokenizer, [t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)


def test_fidelity_and_retrieval_by_hand():
    source = np.eye(4, dtype=np.float32)
    same = representation_fidelity(source, source)
    assert same["fidelity"] == pytest.approx(1.0) and same["retrieval_top1"] == 1.0
    rolled = representation_fidelity(np.roll(source, 1, axis=0), source)
    assert rolled["fidelity"] == pytest.approx(0.0) and rolled["retrieval_top1"] == 0.0
    half = source.copy()
    half[2], half[3] = source[3], source[2]  # two of four swapped
    assert representation_fidelity(half, source)["retrieval_top1"] == 0.5
    with pytest.raises(ValueError, match="shapes differ"):
        representation_fidelity(source, source[:3])


def test_an_anisotropic_space_reports_its_chance_level_and_the_centered_scores():
    """Sentence vectors that share one big direction (a decoder's): a high raw fidelity is near its chance level,
    and only the centered scores tell a model that keeps each sentence's own direction from one that does not."""
    rng = np.random.default_rng(0)
    common = np.ones(64, dtype=np.float32) * 3.0
    own = rng.normal(size=(50, 64)).astype(np.float32)

    def normalize(x: np.ndarray) -> np.ndarray:
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    source = normalize(common + own)
    faithful = normalize(common + own + 0.3 * rng.normal(size=own.shape).astype(np.float32))
    unrelated = normalize(common + rng.normal(size=own.shape).astype(np.float32))
    good, bad = representation_fidelity(faithful, source), representation_fidelity(unrelated, source)
    assert bad["fidelity"] > 0.8 and bad["fidelity"] - bad["fidelity_chance"] < 0.02  # high, and at chance
    assert abs(bad["fidelity_centered"]) < 0.1 and good["fidelity_centered"] > 0.9
    assert good["retrieval_top1_centered"] == 1.0 and bad["retrieval_chance"] == pytest.approx(1 / 50)
    pairs = faithful @ source.T
    mismatched = pairs[~np.eye(50, dtype=bool)].mean()
    assert good["fidelity_chance"] == pytest.approx(float(mismatched), abs=1e-5)


def test_heldout_selection_fits_every_tokenizer_and_is_distinct(xlmr, gpt2):
    texts = ["a b c", "a b c"] + sample_texts(200, seed=2) + [" ".join(sample_texts(30))]
    chosen = select_heldout_sentences(texts, [xlmr[1], gpt2[1]], max_sentences=50, max_length=24, seed=1)
    assert len(chosen) == 50 and len(set(chosen)) == 50
    for tokenizer in (xlmr[1], gpt2[1]):
        assert max(len(ids) for ids in tokenizer(chosen)["input_ids"]) <= 24
    assert chosen == select_heldout_sentences(texts, [xlmr[1], gpt2[1]], max_sentences=50, max_length=24, seed=1)


def test_sentences_chosen_without_a_tokenizer_fit_every_tokenizer(xlmr, gpt2):
    """The source's reference and each model's chose their sentences under their own tokenizers (75 of 100 in
    common): chosen to fit any tokenizer, they are one text for every model of a run."""
    texts = sample_texts(300, seed=4) + ["ሰላም ለዓለም ሁሉ ይሁን " * 3]
    chosen = select_heldout_sentences(texts, max_sentences=40, max_length=64, seed=2)
    assert len(chosen) == 40 and chosen == select_heldout_sentences(texts, max_sentences=40, max_length=64, seed=2)
    for tokenizer in (xlmr[1], gpt2[1]):
        assert max(len(ids) for ids in tokenizer(chosen)["input_ids"]) <= 64


def test_a_script_of_three_bytes_a_character_keeps_its_ordinary_sentences():
    """Bounded at 256 tokens, not one of 600 ordinary Hindi sentences (440 bytes each) fit; a reference takes up to
    512 (the source's positions permitting)."""
    from focusflow.evaluation.intrinsic import fits_every_tokenizer

    hindi = ("भारत एक विशाल देश है जिसमें अनेक भाषाएँ बोली जाती हैं और हर राज्य की अपनी संस्कृति है, "
             "लोग त्योहार मिलकर मनाते हैं और एक दूसरे की मदद करते हैं।")
    assert 300 < len(hindi.encode()) < 480
    assert fits_every_tokenizer(hindi, 512) and not fits_every_tokenizer(hindi, 256)
    assert not fits_every_tokenizer("\ufdfa" * 70, 512), "NFKC expands it: its bytes there count"


def test_heldout_lines_without_spaces_are_sentences_too(xlmr):
    """A held-out split of Thai or Chinese (no spaces between words) yields sentences, not zero."""
    lines = ["วันนี้อากาศดีมากครับเราจะไปโรงเรียนกัน", "我们今天去北京大学看书。", "ok"]
    assert set(select_heldout_sentences(lines, [xlmr[1]], max_sentences=5, max_length=128)) == set(lines[:2])


def test_a_reference_gives_the_same_metrics_as_evaluating_against_the_source(tmp_path):
    """The reference stores the held-out sentences and the source's embeddings once; evaluating a model
    against it equals evaluating it against the source model directly on the same sentences."""
    import json

    from focusflow.corpus.io import write_texts
    from focusflow.evaluation.intrinsic import build_reference, evaluate_against_reference, evaluate_model
    from tests.tiny_models import save_tiny

    source = save_tiny("xlmr", tmp_path / "source")
    target = save_tiny("xlmr", tmp_path / "target", texts=sample_texts(300, seed=5), vocab_size=300)
    write_texts(tmp_path / "heldout.jsonl", sample_texts(80, seed=21))
    record = build_reference(source, tmp_path / "heldout.jsonl", tmp_path / "reference", tokenizer_dir=target,
                             max_sentences=30)
    sentences = json.loads((tmp_path / "reference" / "sentences.json").read_text())
    assert record["n_sentences"] == len(sentences) == 30
    metrics = evaluate_against_reference(target, tmp_path / "reference", tmp_path / "out")
    assert json.loads((tmp_path / "out" / "metrics.json").read_text()) == metrics
    dev = json.loads((tmp_path / "reference" / "dev_sentences.json").read_text())
    assert dev and metrics == evaluate_model(target, source, sentences, dev_sentences=dev)
    assert metrics["dev_sentences"] == len(dev) and metrics["dev_bits_per_byte"] > 0, "an encoder is scored there too"
    assert metrics["n_sentences"] == 30 and metrics["lm_loss"] == "mlm" and metrics["unigram_source"] == "heldout"


def test_the_source_evaluated_against_its_own_reference_is_faithful(tmp_path):
    from focusflow.corpus.io import write_texts
    from focusflow.evaluation.intrinsic import build_reference, evaluate_against_reference
    from tests.tiny_models import save_tiny

    source = save_tiny("xlmr", tmp_path / "source")
    write_texts(tmp_path / "heldout.jsonl", sample_texts(80, seed=21))
    build_reference(source, tmp_path / "heldout.jsonl", tmp_path / "reference", max_sentences=30)
    metrics = evaluate_against_reference(source, tmp_path / "reference", tmp_path / "out")
    assert metrics["retrieval_top1"] == 1.0 and metrics["fidelity"] == pytest.approx(1.0, abs=1e-5)


def test_a_model_with_another_tokenizer_is_refused_by_a_reference(tmp_path):
    from focusflow.corpus.io import write_texts
    from focusflow.errors import InputError
    from focusflow.evaluation.intrinsic import build_reference, evaluate_against_reference
    from tests.tiny_models import save_tiny

    source = save_tiny("xlmr", tmp_path / "source")
    other = save_tiny("xlmr", tmp_path / "other", texts=sample_texts(300, seed=5), vocab_size=300)
    write_texts(tmp_path / "heldout.jsonl", sample_texts(80, seed=21))
    build_reference(source, tmp_path / "heldout.jsonl", tmp_path / "reference", max_sentences=30)
    with pytest.raises(InputError, match="does not tokenize the reference's held-out sentences"):
        evaluate_against_reference(other, tmp_path / "reference", tmp_path / "out")


def test_a_model_of_another_width_is_refused_by_a_reference(tmp_path):
    """A model of another size that shares the source's tokenizer (e5-small and e5-base) passes the tokenization
    check; its states cannot be compared with the reference's, and the message says so before any forward pass."""
    from transformers import AutoTokenizer, XLMRobertaConfig, XLMRobertaForMaskedLM

    from focusflow.corpus.io import write_texts
    from focusflow.errors import InputError
    from focusflow.evaluation.intrinsic import build_reference, evaluate_against_reference
    from tests.tiny_models import save_tiny

    source = save_tiny("xlmr", tmp_path / "source")
    tokenizer = AutoTokenizer.from_pretrained(source)
    wider = XLMRobertaForMaskedLM(XLMRobertaConfig.from_pretrained(source, hidden_size=48, intermediate_size=96))
    wider.save_pretrained(tmp_path / "wider")
    tokenizer.save_pretrained(tmp_path / "wider")
    write_texts(tmp_path / "heldout.jsonl", sample_texts(80, seed=21))
    build_reference(source, tmp_path / "heldout.jsonl", tmp_path / "reference", max_sentences=30)
    with pytest.raises(InputError, match="48-wide states but the reference's source embeddings are 32 wide"):
        evaluate_against_reference(tmp_path / "wider", tmp_path / "reference", tmp_path / "out")


def test_bf16_evaluation_stays_close_to_fp32(xlmr, gpt2):
    """bf16 autocast changes the numbers (so it is applied) but not what they say."""
    model, tokenizer = xlmr
    texts = sample_texts(40, seed=3)
    fp32 = evaluate_mlm(model, tokenizer, texts, precision="fp32")
    bf16 = evaluate_mlm(model, tokenizer, texts, precision="bf16")
    assert bf16["loss"] != fp32["loss"] and bf16["loss"] == pytest.approx(fp32["loss"], rel=0.01)
    assert bf16["n_scored"] == fp32["n_scored"]
    model, tokenizer = gpt2
    assert evaluate_clm(model, tokenizer, texts, precision="bf16")["loss"] == pytest.approx(
        evaluate_clm(model, tokenizer, texts, precision="fp32")["loss"], rel=0.01)
    low = sentence_embeddings(model, tokenizer, texts, precision="bf16")
    high = sentence_embeddings(model, tokenizer, texts, precision="fp32")
    assert low.dtype == np.float32 and not np.array_equal(low, high)
    assert representation_fidelity(low, high)["fidelity_min"] > 0.99


def test_a_decoder_is_also_scored_on_a_dev_half_and_on_another_domain_and_its_speed_is_no_content(tmp_path):
    """Issue 48: a choice between decoders looks at a dev half the report never scores; text of another domain says
    which gain survives; the generation speed is a measurement (the manifest's), not the artifact's content."""
    import json

    from focusflow.corpus.io import write_texts
    from focusflow.evaluation.intrinsic import GENERATION_SPEED, build_reference, evaluate_against_reference
    from tests.tiny_decoders import save_tiny_gemma

    source = save_tiny_gemma(tmp_path / "source", sample_texts(300, seed=1))
    write_texts(tmp_path / "heldout.jsonl", sample_texts(90, seed=21))
    record = build_reference(source, tmp_path / "heldout.jsonl", tmp_path / "reference", max_sentences=30,
                             ood_texts=sample_texts(40, seed=77), ood_for_choice=True)
    scored, dev = (json.loads((tmp_path / "reference" / name).read_text()) for name in ("sentences.json",
                                                                                         "dev_sentences.json"))
    assert (record["n_sentences"], record["n_dev"], record["n_ood"]) == (30, 15, 30) and not set(scored) & set(dev)
    metrics = evaluate_against_reference(source, tmp_path / "reference", tmp_path / "out")
    assert metrics["dev_sentences"] == 15 and metrics["ood_sentences"] == 30
    assert metrics["dev_bits_per_byte"] > 0 and metrics["ood_bits_per_byte"] > 0 and metrics[GENERATION_SPEED] > 0
    ood, ood_dev = (json.loads((tmp_path / "reference" / name).read_text()) for name in ("ood_sentences.json",
                                                                                          "ood_dev_sentences.json"))
    assert record["n_ood_dev"] == len(ood_dev) > 0 and not set(ood) & set(ood_dev), "a choice never sees scored text"
    assert metrics["ood_dev_sentences"] == len(ood_dev) and metrics["ood_dev_bits_per_byte"] > 0
    stored = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert GENERATION_SPEED not in stored and stored["dev_bits_per_byte"] == metrics["dev_bits_per_byte"]
    tasks = build_reference(source, tmp_path / "heldout.jsonl", tmp_path / "tasks", max_sentences=30,
                            ood_texts=sample_texts(40, seed=77))  # a task's test sentences: all scored, none chosen on
    assert tasks["n_ood_dev"] == 0 and not (tmp_path / "tasks" / "ood_dev_sentences.json").exists()
    assert set(ood_dev) & set(json.loads((tmp_path / "tasks" / "ood_sentences.json").read_text())), "scored here"
    smaller = build_reference(source, tmp_path / "heldout.jsonl", tmp_path / "again", max_sentences=30)
    assert json.loads((tmp_path / "again" / "sentences.json").read_text()) == scored and smaller["n_ood"] == 0
    other = save_tiny_gemma(tmp_path / "other", sample_texts(300, seed=5), vocab_size=400, seed=1)
    build_reference(source, tmp_path / "heldout.jsonl", tmp_path / "theirs", tokenizer_dir=other, max_sentences=30,
                    ood_texts=sample_texts(40, seed=77), ood_for_choice=True)
    for name in ("dev_sentences.json", "ood_sentences.json", "ood_dev_sentences.json"):  # every model's the same
        assert json.loads((tmp_path / "theirs" / name).read_text()) == json.loads((tmp_path / "reference" / name)
                                                                                  .read_text())


def test_every_model_of_an_intrinsic_evaluation_runs_on_the_compute_device(tmp_path, monkeypatch):
    """A GPU worker evaluated on its CPU: the evaluated model, the source and the reference's source now go where
    ``training.distributed.compute_device`` says (on a GPU, ``tests/training/test_on_gpu.py`` runs them there)."""
    import torch

    import focusflow.evaluation.intrinsic as intrinsic
    from focusflow.corpus.io import write_texts
    from tests.tiny_models import save_tiny

    placed = []
    monkeypatch.setattr(torch.nn.Module, "to", lambda self, *a, **k: placed.append(a) or self)
    monkeypatch.setattr(intrinsic, "compute_device", lambda: torch.device("cpu"))
    source = save_tiny("xlmr", tmp_path / "source")
    write_texts(tmp_path / "heldout.jsonl", sample_texts(40, seed=21))
    intrinsic.build_reference(source, tmp_path / "heldout.jsonl", tmp_path / "reference", max_sentences=10)
    assert placed == [(torch.device("cpu"),)], "the reference's source"
    placed.clear()
    intrinsic.evaluate_model(source, source, sample_texts(10, seed=3))
    assert placed == [(torch.device("cpu"),)] * 2, "the model and its source"


def test_the_unigram_level_does_not_depend_on_the_vocabularys_unused_rows():
    """Add-0.5 over every row: the same tokens' unigram loss was 4.1 nats with 712 rows and 6.3 with 250,000, so a
    large-vocabulary model could be 2 nats worse than token frequencies and not be flagged."""
    from focusflow.models.lm_stats import unigram_log_probs

    rng = np.random.default_rng(0)
    tokens = rng.zipf(1.3, 15_000) % 700
    losses = []
    for size in (712, 30_712, 250_000):
        counts = np.bincount(tokens, minlength=size)
        losses.append(-float(unigram_log_probs(counts, per_seen_type=True)[tokens].mean()))
    assert max(losses) - min(losses) < 0.05, losses
