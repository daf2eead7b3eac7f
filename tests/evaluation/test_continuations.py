"""A decoder's intrinsic evaluation carries a few greedy continuations of held-out prompts; an encoder's none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from focusflow.corpus.io import write_texts
from focusflow.evaluation.continuations import N_PROMPTS, PROMPT_WORDS, held_out_prompts
from focusflow.evaluation.intrinsic import build_reference, evaluate_against_reference
from tests.tiny_decoders import save_tiny_gemma
from tests.tiny_models import sample_texts, save_tiny


@pytest.fixture(scope="module")
def decoders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny Gemma-like source, a tiny Gemma-like model with another tokenizer, and the held-out text."""
    root = tmp_path_factory.mktemp("decoders")
    write_texts(root / "heldout.jsonl", sample_texts(80, seed=21))
    return {"source": save_tiny_gemma(root / "source", sample_texts(300, seed=1)),
            "target": save_tiny_gemma(root / "target", sample_texts(300, seed=5), vocab_size=400, seed=1),
            "heldout": root / "heldout.jsonl", "root": root}


def test_prompts_are_the_first_words_of_the_first_long_enough_sentences():
    long = [" ".join(f"w{i}{j}" for j in range(12)) for i in range(5)]
    prompts = held_out_prompts(["too short here", *long])
    assert len(prompts) == N_PROMPTS
    assert prompts[0] == {"prompt": " ".join(long[0].split()[:PROMPT_WORDS]),
                          "heldout": " ".join(long[0].split()[PROMPT_WORDS:])}
    assert [p["prompt"] for p in prompts] == [" ".join(s.split()[:PROMPT_WORDS]) for s in long[:N_PROMPTS]]
    assert held_out_prompts(["a b c", "d e f g"]) == []


def test_a_sentence_written_without_spaces_gives_a_prompt_of_its_first_words():
    """Thai or Chinese has no spaces: the prompt is its first words (languages.word_spans), the rest held out."""
    chinese = "我们今天去北京大学看书然后回家吃饭"
    (prompt,) = held_out_prompts([chinese], n=1)
    assert prompt == {"prompt": chinese[:PROMPT_WORDS], "heldout": chinese[PROMPT_WORDS:]}


def test_a_decoder_continues_held_out_prompts_greedily_and_the_same_twice(decoders, tmp_path):
    build_reference(decoders["source"], decoders["heldout"], tmp_path / "reference", max_sentences=30)
    first = evaluate_against_reference(decoders["source"], tmp_path / "reference", tmp_path / "a")
    again = evaluate_against_reference(decoders["source"], tmp_path / "reference", tmp_path / "b")
    sentences = json.loads((tmp_path / "reference" / "sentences.json").read_text(encoding="utf-8"))
    continuations = first["continuations"]
    assert [{k: c[k] for k in ("prompt", "heldout")} for c in continuations] == held_out_prompts(sentences)
    assert len(continuations) == N_PROMPTS
    assert all(isinstance(c["continuation"], str) for c in continuations)
    assert any(c["continuation"].strip() for c in continuations)  # a random tiny model still says something
    assert again["continuations"] == continuations  # greedy: deterministic
    assert (tmp_path / "a" / "metrics.json").read_bytes() == (tmp_path / "b" / "metrics.json").read_bytes()


def test_a_continuation_is_the_argmax_token_step_by_step_for_at_most_the_new_token_budget(decoders):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from focusflow.evaluation.continuations import greedy_continuations

    model = AutoModelForCausalLM.from_pretrained(decoders["source"]).eval()
    tokenizer = AutoTokenizer.from_pretrained(decoders["source"])
    prompt = {"prompt": "Kata nama sana", "heldout": "mawa"}
    ids = tokenizer(prompt["prompt"])["input_ids"]
    by_hand = list(ids)
    with torch.no_grad():
        for _ in range(3):
            by_hand.append(int(model(torch.tensor([by_hand])).logits[0, -1].argmax()))
            if by_hand[-1] == tokenizer.eos_token_id:
                break
    expected = tokenizer.decode(by_hand, skip_special_tokens=True)[len(tokenizer.decode(ids, skip_special_tokens=True)):]
    [got] = greedy_continuations(model, tokenizer, [prompt], new_tokens=3, precision="fp32")
    assert got == {**prompt, "continuation": expected}


def test_the_source_and_a_model_of_another_tokenizer_continue_the_same_prompts(decoders, tmp_path):
    """Each tokenizer has its own reference; their sentences come in the same seeded order, so the report can
    put every model's text under one prompt."""
    build_reference(decoders["source"], decoders["heldout"], tmp_path / "source-reference", max_sentences=30)
    build_reference(decoders["source"], decoders["heldout"], tmp_path / "target-reference",
                    tokenizer_dir=decoders["target"], max_sentences=30)
    original = evaluate_against_reference(decoders["source"], tmp_path / "source-reference", tmp_path / "o")
    adapted = evaluate_against_reference(decoders["target"], tmp_path / "target-reference", tmp_path / "t")
    assert [c["prompt"] for c in original["continuations"]] == [c["prompt"] for c in adapted["continuations"]]


def test_an_encoder_gets_no_continuations(tmp_path):
    source = save_tiny("xlmr", tmp_path / "source")
    write_texts(tmp_path / "heldout.jsonl", sample_texts(80, seed=21))
    build_reference(source, tmp_path / "heldout.jsonl", tmp_path / "reference", max_sentences=30)
    metrics = evaluate_against_reference(source, tmp_path / "reference", tmp_path / "out")
    assert metrics["lm_loss"] == "mlm" and "continuations" not in metrics
    assert "continuations" not in json.loads((tmp_path / "out" / "metrics.json").read_text(encoding="utf-8"))


def test_the_repetition_rate_counts_word_pairs_a_continuation_repeats():
    from focusflow.evaluation.continuations import repetition_rate

    assert repetition_rate(["weqonga weqonga weqonga weqonga weqonga"]) == 0.75  # 4 pairs, 1 distinct
    assert repetition_rate(["kila mtu ana haki sawa", "na uhuru wa kusema"]) == 0.0
    assert repetition_rate(["one", ""]) is None
    assert repetition_rate(["的的的的的"]) == 0.75, "a continuation without spaces repeats its own words too"
