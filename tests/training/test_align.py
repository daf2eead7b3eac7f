"""Embedding alignment: word-span indexing and pooling, recovery of scrambled rows, what may change, resume."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

from focusflow.corpus.io import read_texts
from focusflow.errors import InputError
from focusflow.models.lm_stats import length_batches
from focusflow.training.align import AlignSpec, align_embeddings, first_layers, next_token_kl
from focusflow.training.wordpool import flat_word_index, pool_words, shared_words, word_span_array
from tests.tiny_models import sample_texts, train_tokenizer

STRINGS = ["Habari, rafiki wangu!", "Kanawa 2024 tozi... mu?", "  spaces   around  ", "wa-zi (kuta)"]


def reference_spans(text: str) -> list[tuple[int, int]]:
    """Whitespace-separated words, character by character."""
    spans, start = [], None
    for index, char in enumerate(text + " "):
        if not char.isspace() and start is None:
            start = index
        elif char.isspace() and start is not None:
            spans.append((start, index))
            start = None
    return spans


def reference_shared(text: str, *sides_offsets: list[tuple[int, int]]) -> tuple[list[int], ...]:
    """Per token and side, its shared word (-1: none), by plain loops over words and tokens."""
    spans = reference_spans(text)
    owners = [[next((w for w, (s, e) in enumerate(spans) if begin < e and end > s and end > begin), -1)
               for begin, end in offsets] for offsets in sides_offsets]
    kept = []
    for word, (_, word_end) in enumerate(spans):
        ok = True
        for side, offsets in zip(owners, sides_offsets, strict=False):
            covered = max((e for (_, e), o in zip(offsets, side, strict=False) if o >= 0), default=0)
            ok = ok and word in side and word_end <= covered
        kept.append(ok)
    compact = {w: i for i, w in enumerate(w for w in range(len(spans)) if kept[w])}
    return tuple([compact.get(o, -1) for o in side] for side in owners)


def test_word_index_on_hand_made_offsets():
    text = "Hi, wa-zi kuta!"  # words: "Hi," "wa-zi" "kuta!"
    # source: "wa-zi" in three pieces, punctuation split off, specials at (0, 0)
    source = [(0, 0), (0, 2), (2, 3), (4, 6), (6, 7), (7, 9), (10, 14), (14, 15), (0, 0)]
    # target: "wa-zi" as one byte-level token that includes the space before it
    target = [(0, 3), (3, 9), (9, 14), (14, 15)]
    words = shared_words(text, np.array(source), np.array(target))
    assert words.n_words == 3
    assert words.source.tolist() == [-1, 0, 0, 1, 1, 1, 2, 2, -1]
    assert words.target.tolist() == [0, 1, 2, 2]
    # truncation cut "kuta!" on the target side: the word is dropped on both sides
    cut = shared_words(text, np.array(source), np.array(target[:3]))
    assert cut.n_words == 2 and cut.source.tolist() == [-1, 0, 0, 1, 1, 1, -1, -1, -1] and cut.target.tolist() == [0, 1, -1]
    # a word with no token on one side is dropped and the ids stay compact
    gap = shared_words(text, np.array(source), np.array([(0, 3), (10, 15)]))
    assert gap.n_words == 2 and gap.source.tolist() == [-1, 0, 0, -1, -1, -1, 1, 1, -1] and gap.target.tolist() == [0, 1]
    assert word_span_array("  a  bc ").tolist() == [[2, 3], [5, 7]]
    # a run written without spaces is one word: cut into units, a token crossing a cut would pool different
    # characters on the two sides
    thai = "ภาษาไทยเป็นภาษา"
    source, target = np.array([(0, 7), (7, 11), (11, 15)]), np.array([(0, 4), (4, 7), (7, 15)])
    assert shared_words(thai, source, target).n_words == 1


@pytest.mark.parametrize("families", [("xlmr", "gpt2"), ("bert", "llama")])
def test_word_index_of_real_tokenizers_matches_a_per_word_reference(families):
    tokenizers = [train_tokenizer(family, sample_texts(300, seed=1), 200) for family in families]
    for text, cut in [(text, cut) for text in STRINGS for cut in (None, 6)]:  # 6: the target side is truncated
        offsets = [tokenizers[0](text, return_offsets_mapping=True)["offset_mapping"],
                   tokenizers[1](text, return_offsets_mapping=True, truncation=cut is not None,
                                 max_length=cut)["offset_mapping"]]
        words = shared_words(text, np.array(offsets[0]).reshape(-1, 2), np.array(offsets[1]).reshape(-1, 2))
        expected_source, expected_target = reference_shared(text, *offsets)
        assert words.source.tolist() == expected_source, (text, offsets[0])
        assert words.target.tolist() == expected_target, (text, offsets[1])
        assert words.n_words == len(set(expected_source) - {-1}) == len(set(expected_target) - {-1})


def test_pooling_is_the_mean_over_each_words_tokens_or_its_last_token():
    rows = [np.array([-1, 0, 0, 1, -1]), np.array([0, 1, 1, 1, 2, 2, -1])]
    counts = np.array([2, 3])
    positions, segments, sentence = flat_word_index(rows, counts, length=7)
    assert sentence.tolist() == [0, 0, 1, 1, 1]
    hidden = torch.randn(2, 7, 4)
    index = torch.from_numpy(positions), torch.from_numpy(segments)
    pooled = pool_words(hidden, *index, 5)
    expected = torch.stack([hidden[0, 1:3].mean(0), hidden[0, 3], hidden[1, 0], hidden[1, 1:4].mean(0),
                            hidden[1, 4:6].mean(0)])
    torch.testing.assert_close(pooled, expected)
    last = pool_words(hidden, *index, 5, pool="last")  # what a decoder has read once the word is complete
    torch.testing.assert_close(last, torch.stack([hidden[0, 2], hidden[0, 3], hidden[1, 0], hidden[1, 3], hidden[1, 5]]))


def test_length_batches_cover_every_text_once_within_the_token_budget():
    lengths = np.random.default_rng(0).integers(3, 60, size=200)
    batches = length_batches(lengths, batch_tokens=256)
    assert sorted(np.concatenate(batches).tolist()) == list(range(200))
    assert all(len(b) * lengths[b].max() <= 256 for b in batches)
    assert length_batches(np.array([300, 5]), batch_tokens=256)[-1].tolist() == [0]  # a long text goes alone


# ---------------------------------------------------------------- runs on tiny models
def scrambled_copy(source: Path, out: Path, seed: int = 0) -> np.ndarray:
    """The source model with a third of its non-special input-embedding rows redrawn, and a transfer report
    that marks those rows ``random`` and the rest ``copied_exact``; returns the scrambled ids."""
    from focusflow.models.loading import load_source

    model, tokenizer, _ = load_source(source)
    weight = model.get_input_embeddings().weight.data
    rng = np.random.default_rng(seed)
    ordinary = np.setdiff1d(np.arange(len(tokenizer)), tokenizer.all_special_ids)
    rows = np.sort(rng.choice(ordinary, size=len(ordinary) // 3, replace=False))
    generator = torch.Generator().manual_seed(seed)
    weight[rows] = torch.randn(len(rows), weight.shape[1], generator=generator) * weight.std() + weight.mean()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    fate = np.where(np.isin(np.arange(len(tokenizer)), rows), "random", "copied_exact")
    pd.DataFrame({"target_id": np.arange(len(tokenizer)), "fate": fate}).to_parquet(out / "transfer_report.parquet")
    return rows


def spec(**changes) -> AlignSpec:
    base = dict(steps=80, lr=1e-2, batch_tokens=512, eval_every=40, log_every=20, checkpoint_every=40, precision="fp32")
    return AlignSpec(**{**base, **changes})


@pytest.fixture(scope="module")
def aligned(tiny_dirs, lapt_corpus, tmp_path_factory):
    """family -> (source, scrambled init, scrambled rows, run folder, summary) of one 80-step alignment."""
    built = {}

    def get(family: str):
        if family not in built:
            root = tmp_path_factory.mktemp(f"align-{family}")
            rows = scrambled_copy(tiny_dirs(family), root / "init")
            # the mechanics of aligning: every step's state is the result (keep_best: test_keep_best_* below)
            summary = align_embeddings(root / "init", tiny_dirs(family), lapt_corpus[0], root / "run",
                                       spec(keep_best=False), heldout_file=lapt_corpus[1])
            built[family] = (tiny_dirs(family), root / "init", rows, root / "run", summary)
        return built[family]

    return get


def last_layer_cosine(model_dir: Path, source_dir: Path, texts: list[str]) -> float:
    """Mean cosine between the two models' final hidden states, token by token (both use the same tokenizer)."""
    tokenizer = AutoTokenizer.from_pretrained(source_dir)
    models = [AutoModel.from_pretrained(folder).eval() for folder in (model_dir, source_dir)]
    cosines = []
    with torch.no_grad():
        for text in texts:
            ids = tokenizer(text, return_tensors="pt")["input_ids"]
            states = [model(input_ids=ids).last_hidden_state[0] for model in models]
            cosines.append(torch.nn.functional.cosine_similarity(*states, dim=-1))
    return float(torch.cat(cosines).mean())


@pytest.mark.parametrize("family", ["xlmr", "llama"])
def test_align_recovers_the_source_states_of_scrambled_rows(aligned, family):
    source, init, _, run, summary = aligned(family)
    # an encoder: a third of the depth (rounded up), word means; a decoder: its last layer at each word's last token
    expected = {"xlmr": (1, "mean", "cosine"), "llama": (2, "last", "mse")}[family]
    assert (summary["layer"], summary["pool"], summary["loss"]) == expected and summary["depth"] == 2
    assert summary["trainable_from"] == "rows not copied exactly (transfer_report.parquet)"
    assert 0 < summary["work_seconds"], "its cost on a minutes budget's clock (CPU time over threads)"
    assert summary["initial_heldout_loss"] > 0.05, summary
    assert summary["final_heldout_loss"] < min(0.01, summary["initial_heldout_loss"] / 20) if family == "xlmr" \
        else summary["final_heldout_loss"] < summary["initial_heldout_loss"] / 20, summary  # mse: its own scale
    texts = sample_texts(40, seed=11)  # unseen sentences; fidelity at the last layer (not aligned on the encoder)
    before, after = last_layer_cosine(init, source, texts), last_layer_cosine(run / "final", source, texts)
    assert after > 0.98 and after > before + 0.05, (before, after)
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert [r["step"] for r in rows if r["heldout_loss"]] == ["0", "40", "80"]
    assert (run / "final" / "transfer_report.parquet").is_file()


@pytest.mark.parametrize("family", ["xlmr", "llama"])
def test_only_the_rows_not_copied_exactly_change(aligned, lapt_corpus, family):
    _, init, rows, run, summary = aligned(family)
    before, after = load_file(init / "model.safetensors"), load_file(run / "final" / "model.safetensors")
    assert set(before) == set(after)
    embedding = next(name for name in before if "embed_tokens" in name or "word_embeddings" in name)
    changed = {name for name in before if not torch.equal(before[name], after[name])}
    assert changed == {embedding}, changed  # body, untied output embeddings (llama) and MLM bias (xlmr) untouched
    exact = np.setdiff1d(np.arange(len(before[embedding])), rows)
    assert torch.equal(before[embedding][exact], after[embedding][exact])
    moved = (before[embedding][rows] != after[embedding][rows]).any(dim=1).numpy()
    texts = list(read_texts(lapt_corpus[0]))
    used = np.unique(np.concatenate(AutoTokenizer.from_pretrained(init)(texts)["input_ids"]))
    assert (moved == np.isin(rows, used)).all()  # every scrambled row the text uses, and no other, was trained
    assert moved.sum() > 20 and summary["trainable_rows"] == len(rows)


@pytest.mark.parametrize(("family", "loss"), [("xlmr", "layers"), ("llama", "layers"), ("llama", "kl")])
def test_the_several_layer_and_next_token_losses_also_pull_scrambled_rows_back(tiny_dirs, lapt_corpus, tmp_path,
                                                                                family, loss):
    source = tiny_dirs(family)
    scrambled_copy(source, tmp_path / "init")
    summary = align_embeddings(tmp_path / "init", source, lapt_corpus[0], tmp_path / "run",
                               spec(loss=loss, steps=60, keep_best=False), heldout_file=lapt_corpus[1])
    # layers: a third, two thirds and all of the depth (1 and 2 of 2); kl: the last state at each word's end
    assert summary["loss"] == loss and summary["layers"] == ([1, 2] if loss == "layers" else [2])
    assert summary["pool"] == ("last" if family == "llama" else "mean")
    assert summary["final_heldout_loss"] < summary["initial_heldout_loss"] / 4, summary
    texts = sample_texts(40, seed=11)
    before, after = last_layer_cosine(tmp_path / "init", source, texts), last_layer_cosine(tmp_path / "run" / "final",
                                                                                           source, texts)
    assert after > before + 0.03, (before, after)


def test_the_next_token_divergence_is_the_kl_of_the_source_heads_distributions_in_any_chunks():
    torch.manual_seed(0)
    head, teacher = torch.randn(50, 8), torch.randn(6, 8)
    student = (teacher + 0.3 * torch.randn(6, 8)).requires_grad_(True)
    expected = torch.nn.functional.kl_div((student @ head.T).log_softmax(-1), (teacher @ head.T).log_softmax(-1),
                                          log_target=True, reduction="sum")
    assert float(next_token_kl(teacher.clone(), teacher, head)) == pytest.approx(0.0, abs=1e-5)
    assert float(next_token_kl(student, teacher, head, chunk=4).detach()) == pytest.approx(float(expected), rel=1e-5)
    next_token_kl(student, teacher, head, chunk=4).backward()  # recomputed chunks still carry the gradient
    assert student.grad is not None and float(student.grad.abs().sum()) > 0
    capped = float(next_token_kl(student, teacher, head, softcap=1.0).detach())
    assert capped < float(expected.detach())  # soft-capped logits are flatter: the distributions differ less


def test_the_next_token_loss_runs_under_bf16_autocast_with_the_head_cast_once(tiny_dirs, lapt_corpus, tmp_path):
    summary = align_embeddings(tiny_dirs("llama"), tiny_dirs("llama"), lapt_corpus[0], tmp_path / "run",
                               spec(loss="kl", steps=2, precision="bf16", keep_best=False))
    assert summary["precision"] == "bfloat16" and summary["steps"] == 2
    assert summary["initial_heldout_loss"] < 1e-2  # the model is its own teacher: its next tokens agree


def test_the_next_token_loss_needs_a_decoder_and_layers_need_their_loss(tiny_dirs, lapt_corpus, tmp_path):
    with pytest.raises(InputError, match="needs a decoder"):
        align_embeddings(tiny_dirs("xlmr"), tiny_dirs("xlmr"), lapt_corpus[0], tmp_path / "run", spec(loss="kl"))
    with pytest.raises(ValueError, match="loss=layers only"):
        AlignSpec(layers=[1, 2])
    with pytest.raises(InputError, match="exceeds the model's 2 layers"):
        align_embeddings(tiny_dirs("llama"), tiny_dirs("llama"), lapt_corpus[0], tmp_path / "run2",
                         spec(loss="layers", layers=[1, 3]))


def test_a_model_without_transfer_report_aligns_all_rows_within_a_time_budget(tiny_dirs, lapt_corpus, tmp_path):
    summary = align_embeddings(tiny_dirs("bert"), tiny_dirs("bert"), lapt_corpus[0], tmp_path / "run",
                               spec(seconds=1e-6, layer=2, loss="mse", sentence_weight=1.0))
    assert summary["trainable_from"] == "all rows (no transfer_report.parquet)"
    assert summary["trainable_rows"] == summary["rows"] and summary["layer"] == 2
    assert summary["steps"] == 1  # the time budget ends the run after its first step, with a checkpoint
    assert summary["initial_heldout_loss"] < 1e-6  # the model is its own teacher (cached in float16)
    assert (tmp_path / "run" / "checkpoints" / "step-00000001").is_dir()


def test_a_time_budget_counts_the_runs_work_not_the_wall_clock(tiny_dirs, lapt_corpus, tmp_path, monkeypatch):
    """align.seconds ends a run on the budget's clock (CPU time over threads): time the machine spent on another
    process (here: a clock that sees no work at all) does not end it, however long the wall clock ran."""
    from focusflow.training import loop

    monkeypatch.setattr(loop.StepClock, "now", lambda self: 0.0)
    summary = align_embeddings(tiny_dirs("bert"), tiny_dirs("bert"), lapt_corpus[0], tmp_path / "run",
                               spec(seconds=1e-6, steps=3, layer=2, loss="mse"))
    assert summary["steps"] == 3 and summary["work_seconds"] == 0.0 and summary["train_seconds"] > 0


def test_bf16_autocast_aligns_and_keeps_float32_weights(tiny_dirs, lapt_corpus, tmp_path):
    """The CUDA default precision, exercised on CPU."""
    rows = scrambled_copy(tiny_dirs("xlmr"), tmp_path / "init")
    summary = align_embeddings(tmp_path / "init", tiny_dirs("xlmr"), lapt_corpus[0], tmp_path / "run",
                               spec(steps=10, precision="bf16", eval_every=10), heldout_file=lapt_corpus[1],
                               exact_rows=np.setdiff1d(np.arange(len(AutoTokenizer.from_pretrained(tmp_path / "init"))),
                                                       rows))
    assert summary["precision"] == "bfloat16"
    assert summary["trainable_from"] == "rows not copied exactly (the given exact rows)"
    assert summary["final_heldout_loss"] < summary["initial_heldout_loss"] / 2, summary
    weights = load_file(tmp_path / "run" / "final" / "model.safetensors")
    assert weights["roberta.embeddings.word_embeddings.weight"].dtype == torch.float32


def test_resume_from_a_middle_checkpoint_gives_the_uninterrupted_weights(aligned, lapt_corpus, tmp_path):
    """A run that died after its step-40 checkpoint (only that checkpoint is left) resumes to the same weights and
    metric history as the uninterrupted 80-step run."""
    source, init, _, run, summary = aligned("xlmr")
    resumed = tmp_path / "resumed"
    (resumed / "checkpoints").mkdir(parents=True)
    shutil.copytree(run / "checkpoints" / "step-00000040", resumed / "checkpoints" / "step-00000040")
    (resumed / "checkpoints" / "latest").write_text("step-00000040\n")
    again = align_embeddings(init, source, lapt_corpus[0], resumed, spec(keep_best=False), heldout_file=lapt_corpus[1])
    assert again["resumed_from"].endswith("step-00000040") and again["steps"] == 80
    expected, got = load_file(run / "final" / "model.safetensors"), load_file(resumed / "final" / "model.safetensors")
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=1e-6, msg=name)
    assert again["final_heldout_loss"] == pytest.approx(summary["final_heldout_loss"], abs=1e-7)
    assert [r["step"] for r in csv.DictReader((resumed / "metrics.csv").open())] == \
        [r["step"] for r in csv.DictReader((run / "metrics.csv").open())]


def test_a_damaged_last_checkpoint_resumes_from_the_previous_good_one(aligned, lapt_corpus, tmp_path, caplog):
    source, init, _, run, summary = aligned("xlmr")
    damaged = tmp_path / "damaged"
    shutil.copytree(run / "checkpoints", damaged / "checkpoints")
    optimizer = damaged / "checkpoints" / "step-00000080" / "trainer" / "optimizer.pt"
    data = bytearray(optimizer.read_bytes())
    data[len(data) // 2] ^= 0xFF
    optimizer.write_bytes(bytes(data))
    with caplog.at_level("WARNING", logger="focusflow.training.checkpoint"):
        again = align_embeddings(init, source, lapt_corpus[0], damaged, spec(keep_best=False), heldout_file=lapt_corpus[1])
    assert "step-00000080" in caplog.text and "trainer/optimizer.pt" in caplog.text
    assert again["resumed_from"].endswith("step-00000040")
    expected, got = load_file(run / "final" / "model.safetensors"), load_file(damaged / "final" / "model.safetensors")
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=1e-6, msg=name)


def test_changed_settings_refuse_to_resume(aligned, lapt_corpus):
    source, init, _, run, _ = aligned("xlmr")
    with pytest.raises(ValueError, match="different settings.*layer"):
        align_embeddings(init, source, lapt_corpus[0], run, spec(layer=2), heldout_file=lapt_corpus[1])


def test_first_layers_runs_the_truncated_stack_and_restores_it(tiny_dirs):
    body = AutoModel.from_pretrained(tiny_dirs("gpt2")).eval()
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        full = body(input_ids=ids, output_hidden_states=True)
        with first_layers(body, 1):
            one = body(input_ids=ids).last_hidden_state
    assert len(body.h) == 2
    torch.testing.assert_close(one, body.ln_f(full.hidden_states[1]))  # GPT-2's final norm applies to layer 1


@pytest.mark.parametrize(("scores", "kept"), [([1.0, 2.0, 3.0], 0), ([1.0, 0.5, 0.7], 40), ([1.0, 0.9, 0.8], 80)])
def test_keep_best_keeps_the_state_the_language_model_measures_best_its_start_included(
        tiny_dirs, lapt_corpus, tmp_path, monkeypatch, scores, kept):
    """The dev measure at steps 0, 40 and 80 decides which state is the result; a refinement that only makes the
    language model worse leaves the model as it was, and says so."""
    from focusflow.training import guard

    measured = iter(scores)
    monkeypatch.setattr(guard.LanguageModelDev, "__call__", lambda self, model: next(measured))
    rows = scrambled_copy(tiny_dirs("llama"), tmp_path / "init")
    summary = align_embeddings(tmp_path / "init", tiny_dirs("llama"), lapt_corpus[0], tmp_path / "run", spec(),
                               heldout_file=lapt_corpus[1])
    selection = summary["selection"]
    assert [step for step, _ in selection["history"]] == [0, 40, 80] and selection["kept_step"] == kept
    assert selection["at_start"] == 1.0 and selection["measure"].startswith("dev next-token loss")
    final = load_file(tmp_path / "run" / "final" / "model.safetensors")
    embedding = next(name for name in final if "embed_tokens" in name)
    expected = load_file((tmp_path / "init" if kept == 0 else tmp_path / "run" / "checkpoints" / f"step-{kept:08d}")
                         / "model.safetensors")
    assert torch.equal(final[embedding], expected[embedding])
    if kept == 0:
        assert "no step improved on the start" in selection["why"] and "left the model as it was" in selection["why"]
        assert len(rows) > 0


def test_the_language_model_dev_measure_is_fixed_and_finite(tiny_dirs, lapt_corpus):
    from focusflow.precision import resolve_precision
    from focusflow.training.guard import LanguageModelDev

    texts = list(read_texts(lapt_corpus[1]))[:16]
    for family, objective, auto in (("xlmr", "mlm", AutoModelForMaskedLM), ("llama", "clm", AutoModelForCausalLM)):
        folder = tiny_dirs(family)
        dev = LanguageModelDev(AutoTokenizer.from_pretrained(folder), texts, objective, 64,
                               resolve_precision("fp32", "cpu"), torch.device("cpu"))
        model = auto.from_pretrained(folder)
        first = dev(model)
        assert 0 < first < 20 and dev(model) == first and len(dev) == 16


@pytest.mark.parametrize(("family", "rate"), [("xlmr", 2e-3), ("llama", 3e-4)])
def test_a_library_call_with_lr_auto_refines_at_its_models_family_rate(tiny_dirs, lapt_corpus, tmp_path, family,
                                                                         rate):
    scrambled_copy(tiny_dirs(family), tmp_path / "init")
    align_embeddings(tmp_path / "init", tiny_dirs(family), lapt_corpus[0], tmp_path / "run",
                     spec(lr="auto", steps=4, eval_every=4, log_every=4, checkpoint_every=4, warmup_fraction=0.0),
                     heldout_file=lapt_corpus[1])
    rows = list(csv.DictReader((tmp_path / "run" / "metrics.csv").open()))
    assert float(rows[-1]["lr"]) == pytest.approx(rate)
