"""Task adapters with real tokenizers: first-sub-token alignment, doc-stride windows, span
extraction, and the whole predict→score path driven by an oracle model (must score 1.0)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from focusflow.evaluation.downstream.datasets import NerExample, NliExample, QaExample, TaskData, ner_label_set
from focusflow.evaluation.downstream.ner import NerTask
from focusflow.evaluation.downstream.nli import NliTask
from focusflow.evaluation.downstream.qa import QaTask
from focusflow.evaluation.downstream.runner import load_task_model, load_task_tokenizer
from tests.tiny_models import sample_texts, save_tiny


@pytest.fixture(scope="module")
def tiny_xlmr(tmp_path_factory) -> Path:
    return save_tiny("xlmr", tmp_path_factory.mktemp("models") / "xlmr")


@pytest.fixture(scope="module")
def tokenizer(tiny_xlmr):
    return load_task_tokenizer(tiny_xlmr)


class Oracle(torch.nn.Module):
    """Returns, for each input sequence, logits looked up by its token ids (a perfect model)."""

    def __init__(self, table: dict[tuple[int, ...], np.ndarray], qa: bool = False) -> None:
        super().__init__()
        self.table, self.qa = table, qa
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        rows = []
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist(), strict=True):
            key = tuple(i for i, m in zip(ids, mask, strict=True) if m)
            logits = self.table[key]
            pad = np.full((len(ids) - len(key),) + logits.shape[1:], -1e4, dtype=np.float32)
            rows.append(np.concatenate([logits, pad]))
        out = torch.from_numpy(np.stack(rows))
        if self.qa:
            return SimpleNamespace(start_logits=out[..., 0], end_logits=out[..., 1])
        return SimpleNamespace(logits=out)


def ner_data() -> TaskData:
    words = [sentence.rstrip(".?!,").split() for sentence in sample_texts(30, seed=3)]
    examples = []
    for sentence in words:
        tags = ["B-LOC" if w.lower().startswith("ka") else "I-LOC" if i and sentence[i - 1].lower().startswith("ka")
                else "O" for i, w in enumerate(sentence)]
        examples.append(NerExample(tuple(sentence), tuple(tags)))
    return TaskData("ner", "toy", "xx", examples[:10], examples[10:20], examples[20:], ner_label_set(examples))


def test_ner_labels_sit_on_the_first_sub_token_only(tokenizer):
    task = NerTask(ner_data(), tokenizer)
    for example, feature in zip(task.data.train, task.train_features(), strict=True):
        labelled = [(p, label) for p, label in enumerate(feature["labels"]) if label != -100]
        assert len(labelled) == len(example.words)
        encoding = tokenizer(list(example.words), is_split_into_words=True)
        word_ids = encoding.word_ids()
        for (position, label), word in zip(labelled, range(len(example.words)), strict=True):
            assert word_ids[position] == word and (position == 0 or word_ids[position - 1] != word)
            assert task.data.labels[label] == example.tags[word]


def test_ner_reads_the_running_text_and_a_decoder_labels_each_words_last_piece(tmp_path):
    """Word by word, a byte-level tokenizer dropped each word's leading space (``Obama``, not ``ĠObama``): input the
    model never read. A causal model's first piece of a word has not seen the rest of it: it is labelled last."""
    from transformers import AutoConfig

    folder = save_tiny("gpt2", tmp_path / "gpt2")
    tokenizer = load_task_tokenizer(folder)
    data = ner_data()
    encoder_like = NerTask(data, tokenizer)
    decoder = NerTask(data, tokenizer, config=AutoConfig.from_pretrained(folder))
    assert decoder.label_last and not encoder_like.label_last
    for task in (encoder_like, decoder):
        for example, feature in zip(data.train, task.train_features(), strict=True):
            text = " ".join(example.words)
            assert feature["input_ids"] == tokenizer(text)["input_ids"], "the running text, its spaces kept"
    multi_piece = 0
    for example, first, last in zip(data.train, encoder_like._encode("train")[1], decoder._encode("train")[1],
                                    strict=True):
        encoding = tokenizer(" ".join(example.words), return_offsets_mapping=True)
        offsets = encoding["offset_mapping"]
        starts = np.cumsum([0] + [len(w) + 1 for w in example.words[:-1]])
        for word, (a, b) in enumerate(zip(first.tolist(), last.tolist(), strict=True)):
            assert a <= b and offsets[a][1] > starts[word] and offsets[b][0] < starts[word] + len(example.words[word])
            multi_piece += a < b
    assert multi_piece > 0, "some word has several pieces: first and last differ"


def ner_oracle(task: NerTask, split: str, perfect: bool) -> Oracle:
    features, _ = task._encode(split)
    table = {}
    for feature in features:
        logits = np.zeros((len(feature["input_ids"]), len(task.data.labels)), dtype=np.float32)
        for position, label in enumerate(feature["labels"]):
            logits[position, label if perfect and label >= 0 else 0] = 5.0
        table[tuple(feature["input_ids"])] = logits
    return Oracle(table)


def test_ner_prediction_path_scores_one_for_an_oracle_and_zero_for_all_O(tokenizer):
    task = NerTask(ner_data(), tokenizer)
    assert task.evaluate(ner_oracle(task, "test", perfect=True), "test", 4)["f1"] == 1.0
    assert task.evaluate(ner_oracle(task, "test", perfect=False), "test", 4)["f1"] == 0.0


def test_ner_words_past_the_window_count_against_recall(tokenizer):
    sentence = ("Kama", "ni") * 40
    tags = tuple("B-LOC" if w == "Kama" else "O" for w in sentence)
    data = TaskData("ner", "toy", "xx", [NerExample(sentence, tags)], [NerExample(sentence, tags)],
                    [NerExample(sentence, tags)], ["O", "B-LOC", "I-LOC"])
    task = NerTask(data, tokenizer, max_length=32)
    scores = task.evaluate(ner_oracle(task, "test", perfect=True), "test", 4)
    word_ids = tokenizer(list(sentence), is_split_into_words=True, truncation=True, max_length=32).word_ids()
    words_kept = len({w for w in word_ids if w is not None})
    kept = sum(1 for w in range(words_kept) if sentence[w] == "Kama")
    assert 0 < words_kept < len(sentence)
    assert task.stats["truncated_words"] == len(sentence) - words_kept
    assert scores["precision"] == 1.0
    assert scores["recall"] == pytest.approx(kept / 40)


def test_a_word_without_tokens_inside_an_entity_does_not_cut_it_in_two(tokenizer):
    """A zero-width space alone is a "word" e5's tokenizer encodes as nothing (this tiny one: an empty word):
    predicted O inside a predicted entity, it cut a right entity into two wrong ones (precision 0 for a perfect
    model)."""
    sentence = ("Kama", "", "Dodoma", "ni", "mji")
    tags = ("B-LOC", "I-LOC", "I-LOC", "O", "O")
    example = NerExample(sentence, tags)
    data = TaskData("ner", "toy", "xx", [example], [example], [example], ["O", "B-LOC", "I-LOC"])
    task = NerTask(data, tokenizer)
    assert task._encode("test")[1][0][1] == -1, "the word has no token"
    assert task.evaluate(ner_oracle(task, "test", perfect=True), "test", 4)["f1"] == 1.0
    assert task.stats["untokenized_words"] == 1


def test_nli_rejects_labels_outside_the_set(tokenizer):
    bad = [NliExample("a", "b", "maybe")]
    good = [NliExample("a", "b", "neutral")]
    data = TaskData("nli", "toy", "xx", good, good, bad, ["entailment", "neutral", "contradiction"])
    with pytest.raises(ValueError, match="test pair 0: label 'maybe'"):
        NliTask(data, tokenizer)


def qa_data() -> TaskData:
    filler = " ".join(sample_texts(40, seed=5))
    examples = []
    for i, answer in enumerate(["Dodoma 1964", "Kilimanjaro", "Ziwa Victoria"]):
        context = filler[: 300 + 400 * i] + f" jibu ni {answer} kweli. " + filler[:200]
        start = context.index(answer)
        examples.append(QaExample(f"q{i}", "Jibu ni nini?", context, ((answer, start),)))
    return TaskData("qa", "toy", "xx", examples, examples, examples, [])


def test_qa_windows_cover_long_contexts_and_train_positions_decode_to_the_answer(tokenizer):
    task = QaTask(qa_data(), tokenizer, max_length=64, stride=16)
    features, windows = task._encode("train")
    assert len(features) > len(task.data.train)  # contexts longer than a window are split
    answered = 0
    for feature, window in zip(features, windows, strict=True):
        start, end = feature["start_positions"], feature["end_positions"]
        if start == 0:
            continue
        answered += 1
        example = task.data.train[window["example"]]
        offsets = window["offsets"]
        assert example.context[offsets[start, 0]:offsets[end, 1]].strip() == example.answers[0][0]
    assert answered >= len(task.data.train)


def test_qa_best_span_over_windows_scores_one_for_an_oracle(tokenizer):
    task = QaTask(qa_data(), tokenizer, max_length=64, stride=16)
    features, windows = task._encode("test")
    table = {}
    for feature, window in zip(features, windows, strict=True):
        start, end = task._answer_positions(task.data.test[window["example"]], window["offsets"], window["context"])
        logits = np.zeros((len(feature["input_ids"]), 2), dtype=np.float32)
        if start:
            logits[start, 0] = logits[end, 1] = 20.0
        table[tuple(feature["input_ids"])] = logits
    assert task.stats["test_questions_over_one_window"] == 3
    assert task.evaluate(Oracle(table, qa=True), "test", 4) == {"f1": 1.0, "exact_match": 1.0}


def qa_oracle(task: QaTask, split: str) -> Oracle:
    features, windows = task._encode(split)
    table = {}
    for feature, window in zip(features, windows, strict=True):
        start, end = task._answer_positions(getattr(task.data, split)[window["example"]], window["offsets"],
                                            window["context"])
        logits = np.zeros((len(feature["input_ids"]), 2), dtype=np.float32)
        if start:
            logits[start, 0] = logits[end, 1] = 20.0
        table[tuple(feature["input_ids"])] = logits
    return Oracle(table, qa=True)


def test_an_answer_longer_than_thirty_tokens_can_be_predicted(tokenizer):
    """A byte-level tokenizer spends 36-87 tokens on a 3-4-word Telugu answer: a fixed cap of 30 tokens scored a
    perfect model 0. The cap is the longest training answer in this tokenizer's tokens."""
    answer = " ".join(sample_texts(6, seed=9)).rstrip(".")
    filler = " ".join(sample_texts(8, seed=5))
    context = f"{filler} jibu ni {answer} kweli."
    example = QaExample("long", "Jibu ni nini?", context, ((answer, context.index(answer)),))
    data = TaskData("qa", "toy", "xx", [example], [example], [example], [])
    task = QaTask(data, tokenizer, max_length=256, stride=64)
    assert len(tokenizer(answer, add_special_tokens=False)["input_ids"]) > 30
    assert task.answer_cap() == task.stats["longest_train_answer_tokens"] > 30
    assert task.evaluate(qa_oracle(task, "test"), "test", 4) == {"f1": 1.0, "exact_match": 1.0}
    assert QaTask(data, tokenizer, max_length=256, stride=64, max_answer_tokens=30).evaluate(
        qa_oracle(task, "test"), "test", 4)["exact_match"] == 0.0, "the old fixed cap"


def test_a_pair_whose_template_puts_nothing_between_its_texts_gets_a_line_break(tmp_path):
    """SmolLM2's pair template adds no token: a premise and its hypothesis (a question and its context) ran together
    as one run-on sentence. A line break goes between them, and QA's answers still come out of their context."""
    from focusflow.evaluation.downstream.base import PAIR_BREAK, pair_separator

    tokenizer = load_task_tokenizer(save_tiny("gpt2", tmp_path / "gpt2"))
    assert tokenizer.num_special_tokens_to_add(pair=True) == 0 and pair_separator(tokenizer) == PAIR_BREAK
    nli = NliTask(TaskData("nli", "toy", "xx", *[[NliExample("Paka alikaa.", "Mbwa alikimbia.", "neutral")]] * 3,
                           ["entailment", "neutral", "contradiction"]), tokenizer)
    ids = nli.train_features()[0]["input_ids"]
    assert ids == tokenizer("Paka alikaa.", "\nMbwa alikimbia.")["input_ids"] != tokenizer("Paka alikaa.",
                                                                                            "Mbwa alikimbia.")["input_ids"]
    task = QaTask(qa_data(), tokenizer, max_length=64, stride=16)
    assert task.evaluate(qa_oracle(task, "test"), "test", 4) == {"f1": 1.0, "exact_match": 1.0}
    assert pair_separator(load_task_tokenizer(save_tiny("xlmr", tmp_path / "xlmr"))) == "", "</s></s> separates"


def test_qa_question_longer_than_the_window_is_cut(tokenizer):
    data = qa_data()
    long_question = QaExample("long", "swali " * 200, data.test[0].context, data.test[0].answers)
    data = TaskData("qa", "toy", "xx", [long_question], [long_question], [long_question], [])
    task = QaTask(data, tokenizer, max_length=64, stride=16)
    assert task.train_features() and task.stats["questions_cut"] == 1


def test_model_without_encoder_weights_is_an_error(tmp_path, tiny_xlmr, tokenizer):
    import shutil

    from safetensors.torch import save_file

    broken = tmp_path / "broken"
    shutil.copytree(tiny_xlmr, broken)
    save_file({"lm_head.bias": torch.zeros(len(tokenizer))}, str(broken / "model.safetensors"))
    with pytest.raises(ValueError, match="weights of the model.s body were not found"):
        load_task_model(broken, "ner", tokenizer, num_labels=3)


def test_an_architecture_without_the_kinds_head_is_one_clear_line(tmp_path):
    from focusflow.errors import InputError
    from tests.tiny_decoders import save_tiny_gemma

    gemma = save_tiny_gemma(tmp_path / "gemma", sample_texts(200))
    tokenizer = load_task_tokenizer(gemma)
    with pytest.raises(InputError, match="no AutoModelForTokenClassification head for gemma3_text models"):
        load_task_model(gemma, "ner", tokenizer, num_labels=3)
    assert load_task_model(gemma, "cls", tokenizer, num_labels=2).config.pad_token_id == tokenizer.pad_token_id


def test_model_without_a_fast_tokenizer_is_an_error(monkeypatch, tiny_xlmr):
    import transformers

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained",
                        classmethod(lambda cls, *a, **k: SimpleNamespace(is_fast=False)))
    with pytest.raises(ValueError, match="not a fast"):
        load_task_tokenizer(tiny_xlmr)


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_wordpiece_and_byte_level_families_encode_and_predict(family, tmp_path):
    from focusflow.evaluation.downstream.runner import make_adapter

    folder = save_tiny(family, tmp_path / family)
    tokenizer = load_task_tokenizer(folder)
    for kind, data in (("ner", ner_data()), ("qa", qa_data())):
        kwargs = {} if kind == "qa" else {"num_labels": len(data.labels)}
        model = load_task_model(folder, kind, tokenizer, **kwargs)
        adapter = make_adapter(data, tokenizer, model.config, {"max_length": 64, "stride": 16})
        assert adapter.train_features()
        scores = adapter.evaluate(model, "test", 8)
        assert set(scores) == ({"f1", "precision", "recall"} if kind == "ner" else {"f1", "exact_match"})
        assert all(0.0 <= value <= 1.0 for value in scores.values())


def test_finetune_ends_with_the_weights_of_the_best_dev_evaluation():
    """Dev rises then falls: the model handed to the test evaluation holds the weights of the best dev step."""
    from focusflow.evaluation.downstream.finetune import FinetuneSpec, finetune

    class Toy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(4))

        def forward(self, input_ids, attention_mask):
            return SimpleNamespace(loss=((self.weight - 1.0) ** 2).sum() + 0.0 * input_ids.sum())

    model = Toy()
    seen, scores = [], iter([0.1, 0.5, 0.9, 0.4, 0.2, 0.3, 0.1, 0.0])

    def dev() -> float:
        seen.append(model.weight.detach().clone())
        return next(scores)

    spec = FinetuneSpec(lr=0.05, epochs=8, batch_size=2, eval_every_fraction=0.125, seed=1)
    result = finetune(model, [{"input_ids": [1, 2, 3]}] * 16, dev, spec, pad_id=0)
    assert result.total_steps == 64 and [step for step, _ in result.history] == [8, 16, 24, 32, 40, 48, 56, 64]
    assert result.best_step == 24 and result.best_dev == 0.9
    assert not torch.equal(seen[2], seen[-1])  # training went on after the best step
    assert torch.equal(model.weight.detach(), seen[2])


def test_embedding_lr_scale_gives_the_input_embeddings_their_own_scheduled_learning_rate(tiny_xlmr, tokenizer):
    from focusflow.evaluation.downstream.finetune import FinetuneSpec, _optimizer

    model = load_task_model(tiny_xlmr, "ner", tokenizer, num_labels=3)
    embeddings = model.get_input_embeddings().weight
    plain = _optimizer(model, FinetuneSpec(lr=1e-4))
    assert len(plain.param_groups) == 2 and {group["lr"] for group in plain.param_groups} == {1e-4}
    scaled = _optimizer(model, FinetuneSpec(lr=1e-4, embedding_lr_scale=10.0))
    fast = [group for group in scaled.param_groups if group["lr"] == pytest.approx(1e-3)]
    assert len(fast) == 1 and [id(p) for p in fast[0]["params"]] == [id(embeddings)]
    assert sum(len(group["params"]) for group in scaled.param_groups) == sum(
        len(group["params"]) for group in plain.param_groups)  # every parameter once
    from transformers import get_linear_schedule_with_warmup

    schedule = get_linear_schedule_with_warmup(scaled, 2, 10)
    for _ in range(5):
        scaled.step()
        schedule.step()
    lrs = sorted(group["lr"] for group in scaled.param_groups)
    assert lrs[-1] == pytest.approx(10 * lrs[0])  # the schedule keeps the ratio


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_finetune_runs_forward_passes_in_the_chosen_precision_with_float32_weights(tiny_xlmr, tokenizer, precision):
    """Training and dev evaluation compute in bf16 under bf16 autocast; the weights stay float32."""
    from focusflow.evaluation.downstream.finetune import FinetuneSpec, collate_features, finetune

    model = load_task_model(tiny_xlmr, "ner", tokenizer, num_labels=3)
    seen: list[torch.dtype] = []
    model.classifier.register_forward_hook(lambda module, args, output: seen.append(output.dtype))
    features = [{"input_ids": tokenizer(text)["input_ids"], "labels": [1] * len(tokenizer(text)["input_ids"])}
                for text in sample_texts(8)]
    spec = FinetuneSpec(lr=1e-3, epochs=1, batch_size=4, eval_every_fraction=0.5, precision=precision)
    dev_batch = collate_features(features[:2], 0)
    result = finetune(model, features, lambda: float(model(**dev_batch).logits.detach().float().mean()), spec, pad_id=0)
    expected = torch.bfloat16 if precision == "bf16" else torch.float32
    assert result.precision == str(expected).removeprefix("torch.")
    assert len(seen) == 2 + 2 and set(seen) == {expected}  # two training steps, two dev evaluations
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_compile_auto_on_a_fine_tuning_too_short_to_pay_leaves_it_eager_and_learning_exactly_the_same(tiny_xlmr,
                                                                                                     tokenizer):
    """The probe's timed steps leave no trace: the same weights as a run that never measured (dropout included)."""
    from focusflow.evaluation.downstream.finetune import FinetuneSpec, finetune

    features = [{"input_ids": tokenizer(text)["input_ids"], "labels": [1] * len(tokenizer(text)["input_ids"])}
                for text in sample_texts(8)]
    weights = {}
    for setting in (False, "auto"):
        torch.manual_seed(0)  # the new head's initialization
        model = load_task_model(tiny_xlmr, "ner", tokenizer, num_labels=3)
        spec = FinetuneSpec(lr=1e-3, epochs=2, batch_size=4, eval_every_fraction=0.5, precision="fp32",
                            compile=setting)
        result = finetune(model, features, lambda: 0.0, spec, pad_id=0)
        weights[setting] = {k: v.clone() for k, v in model.state_dict().items()}
    assert not result.compile.compiled and "too short" in result.compile.reason
    assert all(torch.equal(weights[False][k], weights["auto"][k]) for k in weights[False])
