"""Unit tests of the LAPT building blocks: pretokenized data, sample order, masking, objectives, FLOPs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

from focusflow.corpus.io import read_texts
from focusflow.models.lm_stats import IGNORE_INDEX, Masker, special_token_table, word_start_table
from focusflow.training.data import PackedSequences, SampleOrder, iter_sample_ranges, pretokenize
from focusflow.training.flops import flops_per_token, mfu, peak_flops
from focusflow.training.lm_loss import LossModel


def test_pretokenize_concatenates_documents_with_separators_and_reuses_the_file(tiny_dirs, lapt_corpus, tmp_path):
    train, _ = lapt_corpus
    tokenizer = AutoTokenizer.from_pretrained(tiny_dirs("xlmr"))
    out = tmp_path / "ids.npy"
    meta = pretokenize(train, tokenizer, out)
    ids = np.load(out)
    expected = [t for text in read_texts(train) for t in tokenizer(text)["input_ids"]]
    assert ids.dtype == np.uint16 and ids.tolist() == expected
    assert meta["tokens"] == len(expected) and meta["documents"] == 800
    assert expected[0] == tokenizer.cls_token_id and expected[-1] == tokenizer.sep_token_id
    stamp = out.stat().st_mtime_ns
    pretokenize(train, tokenizer, out)
    assert out.stat().st_mtime_ns == stamp  # same corpus + tokenizer: reused

    packed = PackedSequences(out, 64)
    assert len(packed) == len(expected) // 64
    assert packed.blocks(np.array([2])).tolist() == [expected[128:192]]


def test_decoder_documents_end_with_eos(tiny_dirs, lapt_corpus, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_dirs("gpt2"))
    pretokenize(lapt_corpus[1], tokenizer, tmp_path / "ids.npy")
    ids = np.load(tmp_path / "ids.npy")
    assert (ids == tokenizer.eos_token_id).sum() == 100  # one per held-out document


def test_sample_order_is_a_seeded_permutation_per_epoch_and_ranks_split_the_global_batch():
    order = SampleOrder(10, seed=1)
    first, second = order.blocks_for(np.arange(10)), order.blocks_for(np.arange(10, 20))
    assert sorted(first.tolist()) == list(range(10)) and sorted(second.tolist()) == list(range(10))
    assert first.tolist() != second.tolist()
    assert SampleOrder(10, seed=1).blocks_for(np.array([13, 3])).tolist() == [second[3], first[3]]
    steps = [list(iter_sample_ranges(32, 2, 16, 2, rank, 4)) for rank in (0, 1)]
    for step in range(2):
        together = np.concatenate([mb for rank in (0, 1) for mb in steps[rank][step]])
        assert together.tolist() == list(range(32 + 16 * step, 48 + 16 * step))
        assert all(len(mb) == 4 for mb in steps[0][step])


def test_masking_follows_15_percent_80_10_10_and_never_touches_special_tokens():
    vocab, special = 1000, np.zeros(1000, dtype=bool)
    special[:4] = True
    masker = Masker(mask_token_id=3, vocab_size=vocab, special=special, probability=0.15, seed=5)
    rng = np.random.default_rng(0)
    ids = rng.integers(4, vocab, size=(64, 512))
    ids[:, 0], ids[:, -1] = 0, 2
    inputs, labels = masker(ids, np.arange(64))
    selected = labels != IGNORE_INDEX
    assert abs(selected.mean() - 0.15) < 0.005
    assert not selected[:, 0].any() and not selected[:, -1].any()
    assert (labels[selected] == ids[selected]).all()
    masked = inputs[selected] == 3
    unchanged = inputs[selected] == ids[selected]
    assert abs(masked.mean() - 0.8) < 0.02 and abs(unchanged.mean() - 0.1 - 0.1 / vocab) < 0.015
    assert (inputs[~selected] == ids[~selected]).all()
    assert not special[inputs[selected & ~(inputs == 3)]].any()  # random replacements are regular tokens
    # A sample's mask depends only on (seed, sample index), not on its batch position.
    again_inputs, again_labels = masker(ids[[5, 2]], np.array([5, 2]))
    assert (again_labels == labels[[5, 2]]).all() and (again_inputs == inputs[[5, 2]]).all()


@pytest.mark.parametrize("family", ["xlmr", "bert"])
def test_whole_word_masking_masks_all_pieces_of_a_word(tiny_dirs, lapt_corpus, family):
    tokenizer = AutoTokenizer.from_pretrained(tiny_dirs(family))
    starts = word_start_table(tokenizer)
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    marker = "##" if family == "bert" else "▁"
    assert all(starts[i] == (not p.startswith("##") if family == "bert" else p.startswith("▁"))
               for i, p in enumerate(pieces) if i not in tokenizer.all_special_ids and marker in p)
    texts = list(read_texts(lapt_corpus[0], limit=40))
    ids = np.array([tokenizer(" ".join(texts))["input_ids"][:256]])
    masker = Masker.for_tokenizer(tokenizer, 0.3, whole_word=True, seed=0)
    _, labels = masker(ids, np.array([0]))
    word = np.cumsum(starts[ids[0]])
    selected = labels[0] != IGNORE_INDEX
    for w in np.unique(word[selected]):
        members = (word == w) & ~masker.special[ids[0]]
        assert selected[members].all(), "a word was only partly masked"
    assert (starts[ids[0]] == 0).sum() > 5  # the text really has multi-piece words


def test_whole_word_masking_takes_a_block_without_a_word_start(tiny_dirs):
    """A block of continuation pieces only (a run of Thai or Chinese, a word cut by the block's edge) crashed the
    loader thread (IndexError); the pieces before the first start shared the first word's draw."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_dirs("xlmr"))
    starts = word_start_table(tokenizer)
    continuation = np.flatnonzero(~starts & ~special_token_table(tokenizer))[:20]
    masker = Masker.for_tokenizer(tokenizer, 0.5, whole_word=True, seed=0)
    inputs, selected = masker.mask(continuation, masker.special[continuation], np.random.default_rng(0))
    assert selected.all() or not selected.any(), "one word: masked whole or not at all"
    assert masker.mask(continuation[:0], masker.special[continuation[:0]], np.random.default_rng(0))[1].size == 0


def _mlm_batch(tokenizer, texts, seq_len=48, batch=4):
    ids = np.array(tokenizer(" ".join(texts))["input_ids"][: seq_len * batch]).reshape(batch, seq_len)
    masker = Masker.for_tokenizer(tokenizer, 0.15, whole_word=False, seed=1)
    inputs, labels = masker(ids, np.arange(batch))
    return torch.from_numpy(inputs), torch.from_numpy(labels)


@pytest.mark.parametrize("family", ["xlmr", "bert"])
def test_masked_only_projection_gives_the_full_projection_loss_and_gradients(tiny_dirs, lapt_corpus, family):
    folder = tiny_dirs(family)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    inputs, labels = _mlm_batch(tokenizer, list(read_texts(lapt_corpus[0], limit=60)))
    results = []
    for masked_only in (True, False):
        model = AutoModelForMaskedLM.from_pretrained(folder).eval()
        loss_sum, count = LossModel(model, "mlm", masked_only=masked_only)(inputs, labels)
        (loss_sum / count).backward()
        results.append((float((loss_sum / count).detach()), model.get_input_embeddings().weight.grad.clone()))
        reference = model(input_ids=inputs, labels=labels).loss  # Hugging Face's own MLM loss
        assert float((loss_sum / count).detach()) == pytest.approx(float(reference.detach()), rel=1e-5)
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-6)
    torch.testing.assert_close(results[0][1], results[1][1], rtol=1e-4, atol=1e-7)
    assert int(count) == int((labels != IGNORE_INDEX).sum()) > 0


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_causal_objective_matches_hugging_face_next_token_loss(tiny_dirs, lapt_corpus, family):
    folder = tiny_dirs(family)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    ids = torch.tensor(tokenizer(" ".join(read_texts(lapt_corpus[0], limit=60)))["input_ids"][:3 * 40]).reshape(3, 40)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    loss_sum, count = LossModel(model, "clm")(ids)
    assert int(count) == 3 * 39
    reference = float(model(input_ids=ids, labels=ids).loss.detach())
    assert float((loss_sum / count).detach()) == pytest.approx(reference, rel=1e-5)


@pytest.mark.parametrize("masked_only", [False, True])
def test_flop_formula_matches_torch_flop_counter(tiny_dirs, lapt_corpus, masked_only):
    from torch.utils.flop_counter import FlopCounterMode

    folder = tiny_dirs("xlmr")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    inputs, labels = _mlm_batch(tokenizer, list(read_texts(lapt_corpus[0], limit=60)), seq_len=64)
    model = AutoModelForMaskedLM.from_pretrained(folder, attn_implementation="eager")
    loss_model = LossModel(model, "mlm", masked_only=masked_only)
    with FlopCounterMode(display=False) as counter:
        loss_sum, count = loss_model(inputs, labels)
        loss_sum.backward()
    measured = counter.get_total_flops() / inputs.numel()
    fraction = float((labels != IGNORE_INDEX).float().mean())
    formula = flops_per_token(model, 64, "mlm", masked_only, mlm_probability=fraction)
    assert formula == pytest.approx(measured, rel=0.02)
    # hand check of the full-projection count: 2 layers, d=32, ffn=64, |V|, T=64
    if not masked_only:
        d, ffn, vocab, layers, seq = 32, 64, model.config.vocab_size, 2, 64
        body = layers * (4 * d * d + 2 * d * ffn)
        assert formula == pytest.approx(3 * (2 * body + 4 * layers * seq * d + 2 * (d * d + d * vocab)))


def test_mfu_and_peak_flops(monkeypatch, tmp_path):
    import focusflow.training.flops as flops

    assert mfu(1000.0, 1e9, None) is None and peak_flops("meta") is None
    monkeypatch.setenv("FOCUSFLOW_PEAK_TFLOPS", "989")
    assert peak_flops("cpu") == pytest.approx(989e12)
    assert flops.peak("cpu").to_dict() == {"peak_tflops": 989.0, "peak_source": "FOCUSFLOW_PEAK_TFLOPS"}
    monkeypatch.delenv("FOCUSFLOW_PEAK_TFLOPS")
    monkeypatch.setattr(flops, "cpu_ceiling", lambda dtype=None: 2.0e12 if dtype == torch.bfloat16 else 0.31e12)
    assert flops.peak("cpu", torch.bfloat16).flops == 2.0e12 and peak_flops("cpu") == 0.31e12
    assert flops.peak("cpu").source.startswith("calibrated: CPU float32")
    # XLM-R-base at 150k tokens/s with ~1.3 GFLOP/token ≈ 20% of an H100
    assert mfu(150_000, 1.32e9, 989e12) == pytest.approx(0.2, abs=0.005)


def test_a_cpu_ceiling_is_measured_once_per_machine_and_dtype(monkeypatch, tmp_path):
    """The best of three products, cached in the user cache under the machine's fingerprint and the dtype."""
    import focusflow.training.flops as flops

    measured: list[torch.dtype] = []
    real = flops.measure_matmul

    def small(dtype, shape=flops.CEILING_SHAPE, seconds=6.0):
        measured.append(dtype)
        return real(dtype, (256, 128, 128), seconds=0.05)

    monkeypatch.setattr(flops, "measure_matmul", small)
    first = flops.cpu_ceiling(torch.float32, cache_dir=tmp_path)
    assert first > 1e8 and flops.cpu_ceiling(torch.float32, cache_dir=tmp_path) == first
    flops.cpu_ceiling(torch.bfloat16, cache_dir=tmp_path)
    assert measured == [torch.float32, torch.bfloat16]
    cached = json.loads((tmp_path / flops.CEILING_FILE).read_text())
    assert len(cached) == 2 and all({"flops", "shape", "load", "measured"} <= set(v) for v in cached.values())


def test_lapt_dropout_replaces_the_body_s_dropout_while_training_and_the_config_keeps_its_own(tiny_dirs):
    from focusflow.training.lm_model import dropout_settings, load_model

    folder = tiny_dirs("xlmr")
    assert dropout_settings(folder, None) == {}
    assert dropout_settings(folder, 0.0) == {"attention_probs_dropout_prob": 0.0, "hidden_dropout_prob": 0.0}
    model, _ = load_model(folder, "sdpa", dropout=0.0)
    model.train()
    ids = torch.randint(5, 100, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=ids).logits, model(input_ids=ids).logits, rtol=0, atol=0)
    assert model.config.hidden_dropout_prob == 0.1 and model.config.attention_probs_dropout_prob == 0.1
    dropped, _ = load_model(folder, "sdpa")
    dropped.train()
    with torch.no_grad():
        assert not torch.equal(dropped(input_ids=ids).logits, dropped(input_ids=ids).logits)


def test_a_distillation_refuses_the_settings_it_would_ignore():
    """lora and embeddings_only_fraction were silently unused by a distillation (a full fine-tune keyed as LoRA or
    two-stage), and a decoder's mlm+distill learned no LM term."""
    from types import SimpleNamespace

    from focusflow.config import LaptSpec
    from focusflow.errors import InputError
    from focusflow.training.distill import refuse_unused_settings

    for setting in ({"lora": True}, {"embeddings_only_fraction": 0.3}):
        with pytest.raises(ValueError, match="apply to lapt.objective=mlm"):
            LaptSpec(steps=10, objective="distill", **setting)
        LaptSpec(steps=10, objective="mlm", **setting)  # where they apply
    resolved = SimpleNamespace(objective="distill", lora=True, embeddings_only_fraction=0.0)  # auto → distill
    with pytest.raises(InputError, match="lapt.lora apply to lapt.objective=mlm"):
        refuse_unused_settings(resolved, "mlm")
    both = SimpleNamespace(objective="mlm+distill", lora=False, embeddings_only_fraction=0.0)
    with pytest.raises(InputError, match="a causal decoder has not"):
        refuse_unused_settings(both, "clm")
    refuse_unused_settings(both, "mlm")
