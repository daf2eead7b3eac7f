"""Readers of the published formats, split completion, task specs and their clear errors."""

from __future__ import annotations

import json
from operator import itemgetter
from pathlib import Path

import pytest

from focusflow.errors import InputError, UnavailableError
from focusflow.evaluation.downstream import sources
from focusflow.evaluation.downstream.datasets import (
    DataFormatError,
    complete_splits,
    ner_label_set,
    read_conll,
    read_nli_tsv,
    read_squad_json,
    split_off,
    subsample,
)
from focusflow.evaluation.downstream.sources import load_folder, parse_task, resolve_task


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_read_conll_sentences_and_label_set(tmp_path):
    path = write(tmp_path / "train.txt", "-DOCSTART- O\n\nJuma B-PER\nalikwenda O\nDodoma B-LOC\n\n\nLeo B-DATE\n"
                                         "Shirika B-ORG\nla I-ORG\n")
    sentences = read_conll(path)
    assert [s.words for s in sentences] == [("Juma", "alikwenda", "Dodoma"), ("Leo", "Shirika", "la")]
    assert sentences[1].tags == ("B-DATE", "B-ORG", "I-ORG")
    assert ner_label_set(sentences) == ["O", "B-DATE", "I-DATE", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER",
                                        "I-PER"]


def test_read_conll_reports_the_line_of_a_malformed_line(tmp_path):
    path = write(tmp_path / "train.txt", "Juma B-PER\nalikwenda O\n\nDodoma\n")
    with pytest.raises(DataFormatError, match=r"train.txt:4: expected 'word TAG'"):
        read_conll(path)
    path = write(tmp_path / "dev.txt", "Juma B-PER\nalikwenda PER\n")
    with pytest.raises(DataFormatError, match=r"dev.txt:2: tag 'PER' is not a BIO"):
        read_conll(path)


def test_read_conll_accepts_an_empty_word_as_the_official_loader_does_and_counts_it(tmp_path, caplog):
    """MasakhaNER's loader splits ' O' at the space into the word '' and the tag O: we read it the same way."""
    path = write(tmp_path / "train.txt", "Juma B-PER\n O\nni O\n\n\tB-LOC\nDodoma I-LOC\n")
    with caplog.at_level("WARNING"):
        sentences = read_conll(path)
    assert [s.words for s in sentences] == [("Juma", "", "ni"), ("", "Dodoma")]
    assert [s.tags for s in sentences] == [("B-PER", "O", "O"), ("B-LOC", "I-LOC")]
    assert "2 line(s) with an empty word" in caplog.text and "first at line 2" in caplog.text


def test_an_encoding_error_names_the_file_and_line(tmp_path):
    path = tmp_path / "test.txt"
    path.write_bytes(b"Juma B-PER\n\nn\xe9 O\n")
    with pytest.raises(DataFormatError, match=r"test.txt:3: not UTF-8 text \(byte 0xe9"):
        read_conll(path)


def test_empty_files_are_errors(tmp_path):
    for reader, name in ((read_conll, "a.txt"), (read_nli_tsv, "b.tsv"), (read_squad_json, "c.json")):
        with pytest.raises(DataFormatError, match="is empty"):
            reader(write(tmp_path / name, "\n \n"))


def test_read_nli_tsv_labels_header_and_errors(tmp_path):
    path = write(tmp_path / "dev.tsv", "premise\thypothesis\tlabel\nA\tB\tEntailment\nC\tD\tneutral\n")
    examples = read_nli_tsv(path)
    assert [(e.premise, e.label) for e in examples] == [("A", "entailment"), ("C", "neutral")]
    with pytest.raises(DataFormatError, match=r"x.tsv:2: label 'maybe' is not one of"):
        read_nli_tsv(write(tmp_path / "x.tsv", "A\tB\tneutral\nC\tD\tmaybe\n"))
    with pytest.raises(DataFormatError, match=r"y.tsv:1: expected 3 tab-separated columns"):
        read_nli_tsv(write(tmp_path / "y.tsv", "A B neutral\n"))


def test_an_nli_header_names_its_columns_in_any_order_and_a_trailing_tab_is_no_fourth_column(tmp_path):
    expected = [("A", "B", "entailment"), ("C", "D", "neutral")]
    for name, text in {"label_first.tsv": "label\tpremise\thypothesis\nentailment\tA\tB\nneutral\tC\tD\n",
                       "swapped.tsv": "hypothesis\tpremise\tlabel\nB\tA\tentailment\nD\tC\tneutral\n",
                       "trailing.tsv": "premise\thypothesis\tlabel\t\nA\tB\tentailment\t\nC\tD\tneutral\t\n"}.items():
        examples = read_nli_tsv(write(tmp_path / name, text))
        assert [(e.premise, e.hypothesis, e.label) for e in examples] == expected, name


def squad(paragraphs: list[tuple[str, list[tuple[str, str, int]]]]) -> str:
    data = [{"paragraphs": [{"context": context, "qas": [
        {"id": qid, "question": "swali?", "answers": [{"text": text, "answer_start": start}] if text is not None
         else []} for qid, text, start in questions]} for context, questions in paragraphs]}]
    return json.dumps({"version": "1.1", "data": data})


def test_read_squad_drops_unanswered_and_relocates_answers(tmp_path):
    context = "Mji mkuu wa Tanzania ni Dodoma, si Dar es Salaam."
    path = write(tmp_path / "train.json", squad([(context, [
        ("q1", "Dodoma", 24), ("q2", "Dodoma", 3), ("q3", "", 0), ("q4", "Nairobi", 5)])]))
    examples, stats = read_squad_json(path)
    assert [e.id for e in examples] == ["q1", "q2", "q4"]
    assert examples[1].answers == (("Dodoma", 24),)  # moved to where the text is
    assert examples[2].answers == (("Nairobi", -1),)  # kept for scoring, not for training
    assert (stats.questions, stats.unanswered, stats.relocated, stats.unlocatable) == (4, 1, 1, 1)
    with pytest.raises(DataFormatError, match="not valid JSON"):
        read_squad_json(write(tmp_path / "bad.json", '{"data": [}'))


def test_questions_that_share_an_id_are_each_scored(tmp_path):
    """A converted TyDiQA copy numbers its questions per article ("0", "1", … again and again): matched by id, two
    questions under one id would be scored as one, so each gets an id of its own (and a missing id one too)."""
    from focusflow.evaluation.downstream.datasets import qa_examples_from_records

    context = "Mji mkuu wa Tanzania ni Dodoma, si Dar es Salaam."
    path = write(tmp_path / "test.json", squad([(context, [("0", "Dodoma", 24), ("1", "Dar es Salaam", 35)]),
                                                (context, [("0", "Tanzania", 12), ("0#1", "Dodoma", 24)])]))
    examples, stats = read_squad_json(path)
    assert [e.id for e in examples] == ["0", "1", "0#1", "0#1#1"] and stats.renamed == 2  # a taken id is never reused
    records = [{"id": None, "question": "Mji mkuu?", "context": context, "answers": {"text": ["Dodoma"],
                                                                                       "answer_start": [24]}}] * 2
    assert len({e.id for e in qa_examples_from_records(records, "hub:sw")}) == 2


def test_unlabelled_qa_split_is_ignored_with_a_note(tmp_path):
    context = "Mji mkuu wa Tanzania ni Dodoma."
    write(tmp_path / "qa" / "train.json", squad([(context, [(f"t{i}", "Dodoma", 24) for i in range(20)])]))
    write(tmp_path / "qa" / "dev.json", squad([(context, [(f"d{i}", "", 0) for i in range(5)])]))
    data = load_folder("qa", tmp_path / "qa", "toy", "sw")
    assert data.sizes() == {"train": 14, "dev": 2, "test": 4}
    assert "0 of 5 questions have a gold answer" in data.provenance["note_dev"]


def test_complete_splits_rules_are_deterministic_and_disjoint():
    items = list(range(100))
    train, dev, test, provenance = complete_splits(items, None, None, seed=0)
    assert (len(train), len(dev), len(test)) == (70, 10, 20)
    assert sorted(train + dev + test) == items
    assert complete_splits(items, None, None, seed=0)[:3] == (train, dev, test)
    assert complete_splits(items, None, None, seed=1)[2] != test
    assert provenance["test"] == "20% of train"
    train, dev, test, provenance = complete_splits(items, None, [-1], seed=0)  # no dev: 10% of train
    assert (len(train), len(dev), test) == (90, 10, [-1]) and provenance["dev"] == "10% of train"
    train, dev, test, provenance = complete_splits(items, [-2], None, seed=0)  # no test: published dev → test
    assert test == [-2] and len(dev) == 10 and "used as test" in provenance["test"]
    assert subsample(items, 5, 0) == subsample(items, 5, 0) and len(subsample(items, 5, 0)) == 5


def test_a_premise_and_its_hypotheses_stay_in_one_split(shared_data):
    """XNLI's dev file alone (the README's way to evaluate NLI) is split 70/10/20: split pair by pair, 447 of 498
    test pairs had their premise in train, and 226 had their label given away by its two training pairs."""
    data = resolve_task("nli:xnli:sw", shared_data)
    premises = {name: {example.premise for example in getattr(data, name)} for name in ("train", "dev", "test")}
    assert not premises["train"] & premises["test"] and not premises["train"] & premises["dev"]
    assert not premises["dev"] & premises["test"]
    total = sum(data.sizes().values())
    assert abs(data.sizes()["test"] / total - 0.2) < 0.01 and abs(data.sizes()["dev"] / total - 0.1) < 0.01


def test_a_grouped_split_keeps_every_group_whole_and_never_empties_a_part():
    items = [(group, member) for group in range(30) for member in range(3)]
    train, dev, test, _ = complete_splits(items, None, None, seed=0, group=itemgetter(0))
    parts = [{group for group, _ in part} for part in (train, dev, test)]
    assert not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
    assert (len(train), len(dev), len(test)) == (63, 9, 18) and sorted(train + dev + test) == items
    assert complete_splits(list(range(100)), None, None, seed=0, group=lambda x: x)[:3] == \
        complete_splits(list(range(100)), None, None, seed=0)[:3], "groups of one: the split as before"
    one_passage = [("p", n) for n in range(10)]
    assert complete_splits(one_passage, None, None, seed=0, group=itemgetter(0))[:3] == \
        complete_splits(one_passage, None, None, seed=0)[:3], "one passage's questions only: parted one by one"
    rest, held = split_off([("a", 1), ("a", 2), ("b", 3)], 0.9, seed=0, group=itemgetter(0))
    assert rest and held, "the last group stays in the rest"
    uneven = [("big", n) for n in range(40)] + [(f"one{n}", n) for n in range(60)]
    for seed in range(5):  # a group that would overshoot by more than it fills is passed over
        assert 15 <= len(split_off(uneven, 0.2, seed=seed, group=itemgetter(0))[1]) <= 25, seed
    train, dev, test, provenance = complete_splits(uneven, None, None, seed=0, group=itemgetter(0))
    assert provenance == {split: f"{round(100 * len(part) / 100)}% of train"
                          for split, part in (("train", train), ("dev", dev), ("test", test))}, "the shares made"


def test_parse_task_forms_and_errors(tmp_path):
    spec = parse_task("ner:MasakhaNER2:swa")
    assert (spec.kind, spec.dataset, spec.language, spec.path) == ("ner", "masakhaner2", "swa", None)
    assert parse_task("ner:MasakhaNER:swa").dataset == parse_task("ner:masakhaner-1:swa").dataset == "masakhaner"
    assert parse_task("qa:tydiqa-goldp:sw").dataset == "tydiqa"
    folder = tmp_path / "my_ner"
    folder.mkdir()
    spec = parse_task(f"ner:{folder}")
    assert spec.path == folder.resolve() and spec.dataset == "my_ner"
    for bad, message in (("pos:ud:sw", "kind:dataset:lang"), ("ner:conll03:en", "unknown dataset"),
                         ("nli:wikiann:sw", "is a ner dataset"), ("ner:wikiann", "needs a language")):
        with pytest.raises(ValueError, match=message):
            parse_task(bad)
    with pytest.raises(FileNotFoundError):
        parse_task(f"ner:{tmp_path / 'missing'}/")


def test_local_copy_is_found_under_any_iso_spelling(shared_data):
    ner = resolve_task("ner:wikiann:sw", data_root=shared_data)  # the folder is named swa
    assert ner.sizes() == {"train": 1000, "dev": 1000, "test": 1000}
    assert ner.labels == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    nli = resolve_task("nli:xnli:swa", data_root=shared_data)
    assert nli.sizes() == {"train": 1743, "dev": 249, "test": 498}
    assert {e.label for e in nli.test} == {"entailment", "neutral", "contradiction"}
    qa = resolve_task("qa:tydiqa:sw", data_root=shared_data)  # dev.json there has no gold answers
    assert sum(qa.sizes().values()) == 2755 and "note_dev" in qa.provenance


def test_the_provenance_names_the_local_copy_a_task_was_read_from_and_not_the_hub(tmp_path):
    """What a model card reads to name SIB-200's config offline (``publish.tasks``): the folder of the local copy."""
    folder = tmp_path / "cls" / "sib200" / "swh_Latn"
    write(folder / "labels.txt", "sports\nhealth\n")
    rows = "\n".join(f"{i}\t{'sports' if i % 2 else 'health'}\tsentensi {i}" for i in range(12))
    write(folder / "train.tsv", "index_id\tcategory\ttext\n" + rows + "\n")  # no dev, no test: split from train
    data = resolve_task("cls:sib200:sw", data_root=tmp_path)
    assert sources.provenance_folders(data.provenance) == ["swh_Latn"]
    hub = {"train": "train [Davlan/sib200@refs/convert/parquet]", "test": "test [facebook/xnli]"}
    assert sources.provenance_folders(hub) == []

def test_hub_failure_says_what_to_do(tmp_path, monkeypatch):
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("offline")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    monkeypatch.setattr(sources, "check_hub_serves", lambda spec: None)  # the Hub answers, its download fails
    with pytest.raises(RuntimeError, match="--data-root"):
        resolve_task("ner:wikiann:sw")
    (tmp_path / "ner" / "wikiann" / "swa").mkdir(parents=True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    with pytest.raises(RuntimeError, match="no local copy of ner:wikiann:yo .*it holds swa.*did not give it") as told:
        resolve_task("ner:wikiann:yo", data_root=tmp_path)
    assert "Pass --data-root" not in str(told.value), "a --data-root was given: the advice would mislead"


def test_an_unreachable_hub_is_one_probe_and_one_line_not_a_storm_of_retries(tmp_path, monkeypatch, closed_port):
    """Without offline mode and without a local copy, the Hub is asked once, without retries, and says why not."""
    import time

    import datasets

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port}")
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: pytest.fail("an unreachable Hub is not downloaded"))
    (tmp_path / "ner" / "masakhaner2" / "swa").mkdir(parents=True)
    started = time.perf_counter()
    with pytest.raises(InputError, match="no local copy of ner:masakhaner2:zul .*it holds swa.*cannot be reached"):
        resolve_task("ner:masakhaner2:zul", data_root=tmp_path)
    with pytest.raises(UnavailableError, match="cannot be reached for cls:masakhanews:swa"):
        resolve_task("cls:masakhanews:swa")
    assert time.perf_counter() - started < 10


def test_a_hub_without_the_language_is_one_line_naming_it(monkeypatch):
    from huggingface_hub import HfApi
    from huggingface_hub.errors import EntryNotFoundError

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    monkeypatch.setattr(HfApi, "dataset_info", lambda self, *a, **k: None)

    def no_folder(self, repo, path=None, **kwargs):
        raise EntryNotFoundError(f"{repo}/{path} not found")

    monkeypatch.setattr(HfApi, "list_repo_tree", no_folder)
    with pytest.raises(InputError, match="masakhane/masakhaner2 has no data for 'xyz'"):
        sources.check_hub_serves(parse_task("ner:masakhaner2:xyz"))


def test_a_task_missing_from_the_local_copy_is_said_at_once_when_the_hub_is_off(tmp_path, monkeypatch):
    import datasets

    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: pytest.fail("the Hub is off: never tried"))
    (tmp_path / "cls" / "sib200" / "swh_Latn").mkdir(parents=True)
    with pytest.raises(InputError, match="no local copy of cls:sib200:yo .*it holds swh_Latn.*switched off"):
        resolve_task("cls:sib200:yo", data_root=tmp_path)
    with pytest.raises(InputError, match="'xx' is not a known ISO 639"):
        resolve_task("cls:sib200:xx", data_root=tmp_path)


def test_hub_loaders_convert_the_hub_layouts(monkeypatch):
    """The Hub code path with in-memory stand-ins of the real schemas (ids, configs, splits checked)."""
    import datasets
    from datasets import ClassLabel, Dataset, Features, List, Value

    calls = []
    ner_features = Features({"tokens": List(Value("string")),
                             "ner_tags": List(ClassLabel(names=["O", "B-PER", "I-PER", "B-ORG", "I-ORG",
                                                                "B-LOC", "I-LOC"]))})
    nli_features = Features({"premise": Value("string"), "hypothesis": Value("string"),
                             "label": ClassLabel(names=["entailment", "neutral", "contradiction"])})
    qa_rows = [{"id": f"{lang}-{i}", "title": "t", "context": "Mji mkuu ni Dodoma.", "question": "Mji mkuu?",
                "answers": {"text": ["Dodoma"], "answer_start": [11]}} for lang in ("swahili", "finnish")
               for i in range(12)]

    def fake_load(repo, config=None, split=None, **kwargs):
        calls.append((repo, config, split, kwargs.get("revision"), kwargs.get("data_dir")))
        if repo == "facebook/xnli":
            return Dataset.from_dict({"premise": ["a"] * 12, "hypothesis": ["b"] * 12, "label": [0, 1, 2] * 4},
                                     features=nli_features)
        if repo == "google-research-datasets/tydiqa":
            return Dataset.from_list(qa_rows)
        return Dataset.from_dict({"tokens": [["Juma", "yuko", "Dodoma"]] * 12, "ner_tags": [[1, 0, 5]] * 12},
                                 features=ner_features)

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    monkeypatch.setattr(sources, "check_hub_serves", lambda spec: None)
    ner = resolve_task("ner:wikiann:swa")
    assert calls[-3:] == [("unimelb-nlp/wikiann", "sw", s, None, None) for s in ("train", "validation", "test")]
    assert ner.train[0].tags == ("B-PER", "O", "B-LOC") and ner.labels[0] == "O"
    resolve_task("ner:masakhaner2:sw")
    assert calls[-1] == ("masakhane/masakhaner2", None, "test", "refs/convert/parquet", "swa")
    resolve_task("ner:masakhaner:sw")  # 1.0: its own data set (other sentences), never 2.0 under its name
    assert calls[-1] == ("masakhane/masakhaner", None, "test", "refs/convert/parquet", "swa")
    nli = resolve_task("nli:xnli:sw")
    assert calls[-1][:3] == ("facebook/xnli", "sw", "test") and nli.test[2].label == "contradiction"
    qa = resolve_task("qa:tydiqa:swa")
    assert calls[-2:] == [("google-research-datasets/tydiqa", "secondary_task", s, None, None)
                          for s in ("train", "validation")]
    assert {e.id.split("-")[0] for e in qa.train + qa.dev + qa.test} == {"swahili"}
    assert qa.sizes() == {"train": 11, "dev": 1, "test": 12} and "used as test" not in qa.provenance["test"]


def test_read_conll_germeval_layout_takes_the_outer_layer(tmp_path):
    """GermEval 2014's TSV: '#' source lines, then index, word, outer tag, inner tag."""
    path = write(tmp_path / "germeval.tsv",
                 "#\thttp://de.wikipedia.org/wiki/Manfred_Korfmann [2009-10-17]\n"
                 "1\tAufgrund\tO\tO\n2\tseiner\tO\tO\n3\tDeutschland\tB-LOC\tO\n4\tLondoner\tB-LOCderiv\tB-LOC\n\n"
                 "# http://de.wikipedia.org/wiki/Bonn [2009-10-17]\n1\tBonn\tB-LOC\tO\n")
    sentences = read_conll(path)
    assert [s.words for s in sentences] == [("Aufgrund", "seiner", "Deutschland", "Londoner"), ("Bonn",)]
    assert sentences[0].tags == ("O", "O", "B-LOC", "B-LOCderiv") and sentences[1].tags == ("B-LOC",)


def test_read_conll_keeps_unicode_spaces_inside_words_and_true_line_numbers(tmp_path):
    """Only space and tab separate columns, only '\\n' separates lines: a word holding U+00A0 or U+2028 stays
    one word, and an error after it names the right line."""
    path = write(tmp_path / "train.txt", "10\u00a0000 O\nab\u2028cd O\n# B-PER\n\nJuma B-PER\nbad\n")
    with pytest.raises(DataFormatError, match=r"train.txt:6: expected 'word TAG'"):
        read_conll(path)
    sentences = read_conll(write(tmp_path / "ok.txt", "10\u00a0000 O\nab\u2028cd O\n# B-PER\n"))
    assert sentences[0].words == ("10\u00a0000", "ab\u2028cd", "#") and sentences[0].tags == ("O", "O", "B-PER")


def test_read_nli_tsv_reads_the_xnli_mt_label_spelling(tmp_path):
    examples = read_nli_tsv(write(tmp_path / "train.tsv", "A\tB\tcontradictory\nC\tD\tcontradiction\n"))
    assert [e.label for e in examples] == ["contradiction", "contradiction"]


def test_results_std_is_the_sample_std_over_seeds():
    import pandas as pd

    from focusflow.evaluation.downstream.report import aggregate

    runs = pd.DataFrame({"model": "m", "task": "ner:x", "kind": "ner", "dataset": "x", "language": "sw",
                         "metric": "f1", "main": True, "seed": [1, 2, 3], "value": [0.5, 0.7, 0.9],
                         "dev": 0.0, "seconds": 1.0, "train_tokens_per_s": 1.0, "n_train": 1, "n_dev": 1, "n_test": 1})
    row = aggregate(runs).iloc[0]
    assert row["mean"] == pytest.approx(0.7) and row["std"] == pytest.approx(0.2)  # ddof=1 (ddof=0: 0.163)
    assert row["n_seeds"] == 3 and row["seeds"] == "1 2 3"
    assert aggregate(runs.iloc[:1]).iloc[0]["std"] == 0.0


def test_model_signature_is_the_content_of_a_local_model(tmp_path):
    """A model retrained into the same folder must not reuse the earlier runs' results; the same files copied to
    another folder (another machine, another checkout of the store) are the same model, whatever their times."""
    import os
    import shutil

    from focusflow.evaluation.downstream.runner import model_signature

    folder = tmp_path / "model"
    write(folder / "config.json", "{}")
    write(folder / "model.safetensors", "weights")
    before = model_signature(folder)
    os.utime(folder / "model.safetensors", ns=(1, 1))
    assert model_signature(folder) == before
    shutil.copytree(folder, tmp_path / "copy")
    assert model_signature(tmp_path / "copy") == before
    write(folder / "model.safetensors", "retrained")
    assert model_signature(folder) != before
    assert model_signature("FacebookAI/xlm-roberta-base") == "FacebookAI/xlm-roberta-base"


def test_a_stored_model_and_any_copy_of_it_are_one_identity_read_from_the_manifest_where_unchanged(tmp_path):
    """A model fetched from the store is named by the hash the store recorded when it committed it (no rehash of its
    weights); a copy elsewhere (a remote store's fetch cache, an export) hashes to the same; a data folder whose files
    changed after the commit (another file, the weights rewritten in place at the same size) is hashed anew."""
    import os
    import shutil

    from focusflow.evaluation.downstream.runner import model_signature
    from focusflow.storage import ArtifactStore

    model = tmp_path / "model"
    write(model / "config.json", "{}")
    write(model / "model.safetensors", "weights")
    store = ArtifactStore(str(tmp_path / "store"))
    artifact = store.put_dir("init", "k" * 64, model)
    folder = store.fetch(artifact)
    assert model_signature(folder) == artifact.content_hash == model_signature(model)
    shutil.copytree(folder, tmp_path / "elsewhere")
    assert model_signature(tmp_path / "elsewhere") == artifact.content_hash
    manifest_time = (folder.parent / "_manifest.json").stat().st_mtime_ns
    write(folder / "model.safetensors", "retrain")  # the same size, after the commit
    os.utime(folder / "model.safetensors", ns=(manifest_time + 10**9, manifest_time + 10**9))
    assert model_signature(folder) != artifact.content_hash
    write(folder / "model.safetensors", "weights")
    os.utime(folder / "model.safetensors", ns=(manifest_time, manifest_time))
    write(folder / "extra.bin", "x")
    assert model_signature(folder) not in (artifact.content_hash, model_signature(model))


def test_an_unreachable_hub_with_a_local_cache_of_the_dataset_reads_the_cache(tmp_path, monkeypatch, closed_port):
    """An earlier download (the Hub's file cache) lets a run go on offline: a warning, not an error."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port}")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets"))
    with pytest.raises(UnavailableError, match="no local cache of masakhane/masakhanews"):
        sources.check_hub_serves(parse_task("cls:masakhanews:swa"))
    (tmp_path / "hub" / "datasets--masakhane--masakhanews").mkdir(parents=True)
    sources.check_hub_serves(parse_task("cls:masakhanews:swa"))


def test_a_local_copy_of_one_masakhaner_is_never_read_as_the_other(tmp_path):
    """1.0 and 2.0 are different data sets (swa: 2,109 against 6,593 training sentences): a data root holding one
    answers for that one only, and a result says which it measured."""
    sentence = "Juma B-PER\nyuko O\nDodoma B-LOC\n\n"
    for split in ("train", "dev", "test"):
        write(tmp_path / "ner" / "masakhaner" / "swa" / f"{split}.txt", sentence * 4)
    assert resolve_task("ner:masakhaner:swa", data_root=tmp_path).name == "masakhaner"
    with pytest.raises(InputError, match="no local copy of ner:masakhaner2:swa"):
        resolve_task("ner:masakhaner2:swa", data_root=tmp_path)


def test_wikiann_original_files_read_as_its_own_loader_reads_them(tmp_path):
    """Rahimi et al.'s files behind the old ``wikiann`` loader: named train/dev/test without an extension, every word
    prefixed with its language (``sw:Khalid``), a test line now and then without a tag (read as O)."""
    folder = tmp_path / "ner" / "wikiann" / "swa"
    write(folder / "train", "sw:Khalid\tB-PER\nsw:yuko\tO\nsw:Dodoma\tB-LOC\n\n" * 6)
    write(folder / "dev", "sw:Juma\tB-PER\nsw:yuko\tO\n\n" * 3)
    write(folder / "test", "sw:Juma\tB-PER\nsw:yuko\n\n" * 3)
    data = resolve_task("ner:wikiann:swa", data_root=tmp_path)
    assert data.train[0].words == ("Khalid", "yuko", "Dodoma") and data.test[0].tags == ("B-PER", "O")
    with pytest.raises(DataFormatError, match=r"plain:2: expected 'word TAG'"):
        read_conll(write(tmp_path / "plain", "Juma B-PER\nyuko\n"))  # a tagless line anywhere else is an error
    other = read_conll(write(tmp_path / "be", "be-x-old:Мінск\tB-LOC\n\tO\nbe-x-old:горад\n"))  # an empty word too
    assert other[0].words == ("Мінск", "", "горад") and other[0].tags == ("B-LOC", "O", "O")


def test_a_byte_order_mark_inside_a_file_is_not_part_of_a_word(tmp_path):
    """Files joined with ``cat`` carry the second file's BOM into a line of the first (MasakhaNER's transfer corpora)."""
    examples = read_conll(write(tmp_path / "joined.txt", "\ufeffJuma B-PER\nyuko O\n\n\ufeffJii B-LOC\n"))
    assert [e.words for e in examples] == [("Juma", "yuko"), ("Jii",)]


def test_xnli_published_dev_and_test_files_read_by_their_header(tmp_path):
    """XNLI 1.0's ``xnli.dev.tsv``: 19 named columns; rows read by name with their language (a task keeps its own:
    the next test)."""
    header = ("language\tgold_label\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
              "sentence2_parse\tsentence1\tsentence2\tpromptID\tpairID\tgenre\tlabel1\tlabel2\tlabel3\tlabel4\t"
              "label5\tsentence1_tokenized\tsentence2_tokenized\tmatch")

    def row(language: str, label: str) -> str:
        cells = [language, label, "", "", "", "", "Mvua inanyesha.", "Kuna mvua.", "1", "2", "facetoface",
                 label, label, label, label, label, "Mvua inanyesha .", "Kuna mvua .", "True"]
        return "\t".join(cells)

    one = write(tmp_path / "sw" / "dev.tsv", "\n".join([header, row("sw", "entailment"), row("sw", "neutral")]) + "\n")
    assert [(e.premise, e.hypothesis, e.label) for e in read_nli_tsv(one)] == [
        ("Mvua inanyesha.", "Kuna mvua.", "entailment"), ("Mvua inanyesha.", "Kuna mvua.", "neutral")]
    every = write(tmp_path / "all" / "dev.tsv", "\n".join([header, row("ar", "neutral"), row("sw", "neutral")]) + "\n")
    assert [e.language for e in read_nli_tsv(every)] == ["ar", "sw"]


def test_a_local_tydiqa_file_of_every_language_gives_the_tasks_questions(tmp_path):
    """The published ``tydiqa-goldp-v1.1-train.json`` holds all nine languages; copied in as a language's train file
    it trains on that language's questions only (ids name the language), as the Hub path does."""
    context = "Mji mkuu wa Tanzania ni Dodoma."
    questions = [(f"{language}-{i}", "Dodoma", 24) for language in ("swahili", "finnish") for i in range(10)]
    write(tmp_path / "qa" / "tydiqa" / "sw" / "tydiqa-goldp-v1.1-train.json", squad([(context, questions)]))  # as named
    data = resolve_task("qa:tydiqa:sw", data_root=tmp_path)
    assert {e.id.split("-")[0] for e in data.train + data.dev + data.test} == {"swahili"}
    assert len(data.train + data.dev + data.test) == 10


def test_a_folder_task_of_tydiqa_files_of_every_language_says_so(tmp_path, caplog):
    """``qa:PATH`` has no language to keep: it reads every question, and the log says which languages it mixed."""
    context = "Mji mkuu wa Tanzania ni Dodoma."
    questions = [(f"{language}-{i}", "Dodoma", 24) for language in ("swahili", "finnish") for i in range(10)]
    write(tmp_path / "qa" / "train.json", squad([(context, questions)]))
    with caplog.at_level("WARNING"):
        data = load_folder("qa", tmp_path / "qa", "qa", "")
    assert len(data.train + data.dev + data.test) == 20
    assert "TyDiQA's of 2 languages (fi, sw)" in caplog.text and "qa:tydiqa:<language>" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        resolve_task("qa:tydiqa:sw", data_root=_tydiqa_root(tmp_path, context, questions))
    assert "languages" not in caplog.text  # the named task keeps its language's questions


def _tydiqa_root(tmp_path: Path, context: str, questions: list) -> Path:
    write(tmp_path / "root" / "qa" / "tydiqa" / "sw" / "train.json", squad([(context, questions)]))
    return tmp_path / "root"


def test_classification_files_as_their_datasets_publish_them(tmp_path):
    """Column names, split file names and label encodings of published classification sets: AmharicNews's
    article (after its headline, not the headline alone), AfriSenti's unlabelled or header-only splits (completed
    from the others, with a note), uds-lsv's ``train_clean``/Zindi's ``Train.csv``, a Hub export's label indices
    named by ``labels.txt``, Parquet and JSON exports."""
    from focusflow.evaluation.downstream.datasets import read_cls_file

    amharic = write(tmp_path / "am.csv", "headline,category,date,views,article,link\n"
                                         "ርዕስ,ስፖርት,2020,3,ሙሉ ዜና እዚህ,http://x\n")
    assert read_cls_file(amharic)[0].text == "ርዕስ\nሙሉ ዜና እዚህ"
    folder = tmp_path / "afrisenti"
    rows = "".join(f"id{i}\ttweet number {i}\t{('positive', 'negative')[i % 2]}\n" for i in range(30))
    write(folder / "hau_train.tsv", "ID\ttweet\tlabel\n" + rows)
    write(folder / "hau_dev.tsv", "ID\ttweet\n" + "".join(f"d{i}\tdev tweet {i}\n" for i in range(5)))
    write(folder / "hau_test.tsv", "ID\ttweet\tlabel\n")
    data = load_folder("cls", folder, "afrisenti", "ha")
    assert sum(data.sizes().values()) == 30 and "no label column" in data.provenance["note_dev"]
    assert "no examples" in data.provenance["note_test"]
    indexed = tmp_path / "indexed"
    write(indexed / "Train.csv", "text,label\n" + "".join(f"maandishi {i},{i % 3}\n" for i in range(30)))
    write(indexed / "labels.txt", "siasa\nmichezo\nafya\n")
    data = load_folder("cls", indexed, "news", "sw")
    assert data.labels == ["siasa", "michezo", "afya"] and {e.label for e in data.train} == set(data.labels)
    write(indexed / "train_clean.csv", "text,label\nx,0\n")  # an exact name wins over a name holding the word
    assert load_folder("cls", indexed, "news", "sw").sizes() == data.sizes()
    (indexed / "Train.csv").rename(indexed / "train_raw.csv")
    with pytest.raises(InputError, match="2 files could be the train split"):
        load_folder("cls", indexed, "news", "sw")
    (indexed / "train_clean.csv").rename(indexed / "train_dev.csv")  # two splits' words: neither split's file
    assert load_folder("cls", indexed, "news", "sw").provenance["dev"].startswith("10% of train")
    import pandas as pd

    exported = tmp_path / "export"
    exported.mkdir()
    pd.DataFrame({"text": [f"sentensi {i}" for i in range(20)], "label": ["a", "b"] * 10}).to_parquet(
        exported / "train.parquet")
    write(exported / "test.json", "".join(json.dumps({"text": f"t {i}", "label": "ab"[i % 2]}) + "\n" for i in range(6)))
    assert load_folder("cls", exported, "export", "sw").sizes() == {"train": 18, "dev": 2, "test": 6}


def test_a_header_of_unknown_names_is_not_read_as_an_example(tmp_path):
    from focusflow.evaluation.downstream.datasets import read_cls_file

    rows = "".join(f"{('chanya', 'hasi')[i % 2]}\tmaandishi {i}\n" for i in range(12))
    with pytest.raises(DataFormatError, match="looks like a header"):
        read_cls_file(write(tmp_path / "named.tsv", "Hisia\tMaandishi\n" + rows))
    assert len(read_cls_file(write(tmp_path / "plain.tsv", rows))) == 12  # label<TAB>text lines still read


def test_a_headerless_two_column_file_reads_its_labels_from_the_column_that_repeats(tmp_path):
    """text<TAB>label (a common export) is not read as label<TAB>text: every text would become a label."""
    from focusflow.evaluation.downstream.datasets import read_cls_file

    rows = [(f"sentensi namba {i} hapa", ("chanya", "hasi")[i % 2]) for i in range(30)]
    text_first = read_cls_file(write(tmp_path / "text_first.tsv", "".join(f"{t}\t{lab}\n" for t, lab in rows)))
    label_first = read_cls_file(write(tmp_path / "label_first.tsv", "".join(f"{lab}\t{t}\n" for t, lab in rows)))
    assert [(e.text, e.label) for e in text_first] == [(e.text, e.label) for e in label_first] == rows
    named = read_cls_file(write(tmp_path / "named.tsv", "tweet_text\tlabel_name\nA good day\tpositive\nBad\tnegative\n"))
    assert [(e.text, e.label) for e in named] == [("A good day", "positive"), ("Bad", "negative")], \
        "a header whose names hold ours as words is a header, in either order"
    unique = "".join(f"neno {i}\tsentensi {i}\n" for i in range(30))
    with pytest.raises(DataFormatError, match="neither holds repeating labels"):
        read_cls_file(write(tmp_path / "unique.tsv", unique))
    intents = "".join(f"intent{i % 20}\tombi namba {i} tafadhali\n" for i in range(30))  # many classes, few rows
    assert read_cls_file(write(tmp_path / "intents.tsv", intents))[0].label == "intent0"
    two = read_cls_file(write(tmp_path / "two.tsv", "filamu nzuri sana\tchanya\nfilamu mbaya\thasi\n"))
    assert [e.label for e in two] == ["chanya", "hasi"], "a tie of a few rows: the shorter column holds the labels"


def test_a_quote_that_never_closes_is_an_error_naming_its_line_not_the_rest_of_the_file_as_one_text(tmp_path):
    from focusflow.evaluation.downstream.datasets import read_cls_file

    lines = [f"{('chanya', 'hasi')[i % 2]}\tmaandishi {i}" for i in range(20)]
    lines[4] = 'chanya\t"Imeanza na nukuu tu'
    with pytest.raises(DataFormatError, match=r"unclosed.tsv:5: a quote opened on this line never closes"):
        read_cls_file(write(tmp_path / "unclosed.tsv", "\n".join(lines) + "\n"))
    lines[4] = 'chanya\t"Nukuu" alisema'  # a quoted start that closes: read as pandas reads it
    assert read_cls_file(write(tmp_path / "closed.tsv", "\n".join(lines) + "\n"))[4].text == "Nukuu alisema"
    lines[-1] = 'hasi\t"mistari\nmiwili" na inchi 5" tu'  # a quoted field over two lines, then a stray quote
    assert read_cls_file(write(tmp_path / "stray.tsv", "\n".join(lines) + "\n"))[-1].text.startswith("mistari\nmiwili")


# --------------------------------------------------------------------------- quirks of real and converted files


def test_a_tab_separated_word_keeps_its_spaces_and_a_tag_drops_a_no_break_space(tmp_path):
    """WikiANN's loader splits its lines at tabs only: 'New York' is one word; a no-break space after a tag (a
    converted file) is no part of the tag, which would else be an entity type of its own."""
    wikiann = read_conll(write(tmp_path / "wikiann", "sw:New York\tB-LOC\nsw:ni\tO\n\nsw:Juma \tB-PER\n"))
    assert [s.words for s in wikiann] == [("New York", "ni"), ("Juma",)]
    sentences = read_conll(write(tmp_path / "train.txt", "John B-PER\u00a0\nni O\n\n\u00a0 O\nni O\n"))
    assert [s.words for s in sentences] == [("John", "ni"), ("\u00a0", "ni")]
    assert ner_label_set(wikiann, sentences) == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]


def test_entity_types_written_in_two_cases_are_refused_not_scored_as_two(tmp_path):
    train = read_conll(write(tmp_path / "train.txt", "Nairobi B-LOC\nKenya I-LOC\n\nJohn B-PER\n"))
    test = read_conll(write(tmp_path / "test.txt", "Nairobi B-Loc\n\nJohn B-PER\n"))
    with pytest.raises(DataFormatError, match="two cases: LOC / Loc"):
        ner_label_set(train, test)
    germeval = read_conll(write(tmp_path / "g.txt", "Berlin B-LOCderiv\nBerlin B-LOC\n"))
    assert ner_label_set(germeval) == ["O", "B-LOC", "I-LOC", "B-LOCderiv", "I-LOCderiv"]  # a type's own case kept


def test_old_mac_line_ends_are_lines(tmp_path):
    path = tmp_path / "train.txt"
    path.write_bytes(b"John B-PER\rSmith I-PER\r\rNairobi B-LOC\rni O")
    assert [s.words for s in read_conll(path)] == [("John", "Smith"), ("Nairobi", "ni")]


def test_gzip_compressed_task_files_are_read_and_found(tmp_path):
    import gzip

    folder = tmp_path / "ner"
    folder.mkdir()
    for split in ("train", "dev", "test"):
        (folder / f"{split}.txt.gz").write_bytes(gzip.compress("Juma B-PER\nni O\n\nDodoma B-LOC\n".encode()))
    assert [s.words for s in read_conll(folder / "train.txt.gz")] == [("Juma", "ni"), ("Dodoma",)]
    data = load_folder("ner", folder, "toy", "sw")
    assert data.sizes() == {"train": 2, "dev": 2, "test": 2}
    (folder / "train.txt.gz").write_bytes(b"not gzip at all")
    with pytest.raises(InputError, match=r"train.txt.gz is corrupt or not gzip data"):
        read_conll(folder / "train.txt.gz")


def test_an_answer_written_composed_is_found_in_a_context_written_decomposed(tmp_path, caplog):
    """An answer nobody can locate scores 0 for every model: reading both in one Unicode form finds it."""
    import unicodedata

    from focusflow.evaluation.downstream.metrics import squad_scores

    context = unicodedata.normalize("NFD", "Mji wa Hà Nội ni mkuu.")
    path = write(tmp_path / "test.json", squad([(context, [("q1", "Hà Nội", 7), ("q2", "Nairobi", 0)])]))
    examples, stats = read_squad_json(path)
    (text, start), = examples[0].answers
    assert (text, start) == ("Hà Nội", 7) and examples[0].context[start:start + len(text)] == text
    assert squad_scores({"q1": [text]}, {"q1": examples[0].context[7:13]})["exact_match"] == 1.0
    with caplog.at_level("WARNING"):
        stats.warn(path)
    assert "1 gold answers (of 2 questions) have a text that is nowhere in the context" in caplog.text


def test_flat_qa_records_read_as_json_lines_an_array_or_a_data_list(tmp_path):
    """A Hugging Face export (JSON Lines under .json or .jsonl), an array, transformers' run_qa 'data' list; a
    start left out is looked up, an answer given without its list is one answer."""
    context = "Mji mkuu wa Tanzania ni Dodoma."
    records = [{"id": "a", "question": "Mji mkuu?", "context": context,
                "answers": {"text": ["Dodoma"], "answer_start": [24]}},
               {"id": "b", "question": "Nchi?", "context": context, "answers": {"text": ["Tanzania"]}},
               {"id": "c", "question": "Mji?", "context": context, "answers": {"text": "Dodoma", "answer_start": 24}}]
    lines = "\n".join(json.dumps(record) for record in records) + "\n"
    for path in (write(tmp_path / "train.json", lines), write(tmp_path / "x" / "train.jsonl", lines),
                 write(tmp_path / "array.json", json.dumps(records)),
                 write(tmp_path / "data.json", json.dumps({"data": records}))):
        examples, _ = read_squad_json(path)
        assert [(e.id, e.answers) for e in examples] == [("a", (("Dodoma", 24),)), ("b", (("Tanzania", 12),)),
                                                         ("c", (("Dodoma", 24),))], path
    write(tmp_path / "x" / "test.jsonl", lines)
    assert load_folder("qa", tmp_path / "x", "toy", "sw").sizes()["test"] == 3


@pytest.mark.parametrize(("record", "message"), [
    ({"question": None, "answers": {"text": ["Dodoma"], "answer_start": [0]}}, "question is NoneType"),
    ({"question": "Mji?", "answers": {"text": [["Dodoma"]], "answer_start": [0]}}, "answer text is list"),
    ({"question": "Mji?", "answers": "Dodoma"}, "answers 'Dodoma' are neither"),
    ({"question": "Mji?", "answers": {"text": ["Dodoma"], "answer_start": ["x"]}}, "answer_start 'x' is not a number"),
])
def test_a_qa_field_of_the_wrong_type_is_an_error_naming_file_and_question(tmp_path, record, message):
    path = write(tmp_path / "train.json", json.dumps([{"id": "q7", "context": "Dodoma.", **record}]))
    with pytest.raises(DataFormatError, match=rf"train.json: question q7: .*{message}"):
        read_squad_json(path)


def test_bioes_tags_read_as_the_bio_tags_they_stand_for(tmp_path):
    path = write(tmp_path / "train.txt", "Juma S-PER\nalikwenda O\nDar B-LOC\nes I-LOC\nSalaam E-LOC\n")
    assert read_conll(path)[0].tags == ("B-PER", "O", "B-LOC", "I-LOC", "I-LOC")


def test_an_answer_start_moves_with_the_normalized_context_to_its_own_occurrence():
    """A decomposed context is shorter once composed: the start is the same place in it, not the nearest copy."""
    from focusflow.evaluation.downstream.datasets import QaReadStats, qa_examples_from_records

    decomposed = "e\u0301" * 10
    context = decomposed + "cat" + "x" * 7 + "cat"  # the gold "cat" is the first, at 20 before composing
    stats = QaReadStats()
    example, = qa_examples_from_records([{"id": "q", "question": "?", "context": context,
                                          "answers": {"text": ["cat"], "answer_start": [20]}}], "t", stats)
    assert example.answers == (("cat", 10),) and stats.relocated == 0


def test_conll_comment_and_one_column_lines_are_not_read_as_bioes_tags(tmp_path):
    path = write(tmp_path / "train.txt", "# contact us by E-mail\nKhalid B-PER\nni O\n")
    assert read_conll(path)[0].words == ("Khalid", "ni")
    with pytest.raises(DataFormatError, match="expected 'word TAG'"):
        read_conll(write(tmp_path / "dev.txt", "Khalid B-PER\n E-mail\n"))
    wikiann = read_conll(write(tmp_path / "test", "sw:Khalid\tB-PER\nsw:\u00a0\n"))  # a tagless WikiANN line
    assert wikiann[0].words == ("Khalid", "\u00a0") and wikiann[0].tags == ("B-PER", "O")


def test_a_published_gzip_beside_its_unpacked_copy_reads_the_copy(tmp_path):
    import gzip

    folder = tmp_path / "ner"
    write(folder / "hau_train.txt", "Juma B-PER\n\nni O\n")
    (folder / "hau_train.txt.gz").write_bytes(gzip.compress(b"Dodoma B-LOC\n\nna O\n"))
    write(folder / "hau_test.txt", "Juma B-PER\n\nDodoma B-LOC\n")
    data = load_folder("ner", folder, "toy", "ha")
    assert {example.words for example in data.train + data.dev} == {("Juma",), ("ni",)}


def test_a_compressed_task_file_is_in_the_data_fingerprint(tmp_path):
    import gzip

    from focusflow.pipeline.evaluation_stages import data_fingerprint

    folder = tmp_path / "ner" / "wikiann" / "sw"
    folder.mkdir(parents=True)
    (folder / "train.txt.gz").write_bytes(gzip.compress(b"Juma B-PER\n"))
    before = data_fingerprint(["ner:wikiann:sw"], tmp_path)
    (folder / "train.txt.gz").write_bytes(gzip.compress(b"Dodoma B-LOC\n"))
    assert data_fingerprint(["ner:wikiann:sw"], tmp_path) != before


def test_one_json_line_of_qa_and_a_misshapen_squad_file(tmp_path):
    record = {"id": "a", "question": "Mji?", "context": "Dodoma.", "answers": {"text": ["Dodoma"], "answer_start": [0]}}
    assert [e.id for e in read_squad_json(write(tmp_path / "one.jsonl", json.dumps(record) + "\n"))[0]] == ["a"]
    for data, message in (([{"paragraphs": {"context": "x"}}], "paragraphs is dict"),
                          ([{"paragraphs": [["x"]]}], "has no 'context' string"),
                          ([{"paragraphs": [{"context": "x", "qas": ["q"]}]}], "'qas' is not a list of question")):
        with pytest.raises(DataFormatError, match=message):
            read_squad_json(write(tmp_path / "bad.json", json.dumps({"data": data})))


def test_a_run_is_found_again_by_the_data_it_was_scored_on_not_by_its_sizes(shared_data, tmp_path):
    """A rerun into the same results folder reused runs scored on other test sets: another ``split_seed``, a file
    rewritten with as many examples. The run fingerprint holds the data's content."""
    from dataclasses import replace

    from focusflow.evaluation.downstream.datasets import NliExample

    data = resolve_task("nli:xnli:sw", shared_data)
    other_split = resolve_task("nli:xnli:sw", shared_data, split_seed=1)
    assert other_split.sizes() == data.sizes() and other_split.content_hash() != data.content_hash()
    assert resolve_task("nli:xnli:sw", shared_data).content_hash() == data.content_hash(), "deterministic"
    first = data.test[0]
    relabelled = NliExample(first.premise, first.hypothesis, "neutral" if first.label != "neutral" else "entailment")
    changed = replace(data, test=[relabelled, *data.test[1:]])
    assert changed.sizes() == data.sizes() and changed.content_hash() != data.content_hash()


def test_a_carriage_return_inside_an_nli_line_is_a_space(tmp_path):
    """A cell edited on Windows: csv raised a bare "new-line character seen in unquoted field"."""
    path = tmp_path / "dev.tsv"
    path.write_bytes(b"a\rb\tc\tneutral\nd\te\tentailment\n")
    assert [(e.premise, e.label) for e in read_nli_tsv(path)] == [("a b", "neutral"), ("d", "entailment")]


def test_a_stray_quote_that_swallows_the_rows_after_it_is_refused_naming_its_line(tmp_path):
    """A text opening with " and no closing one read the next rows as part of it: 3 examples of 6, no warning."""
    from focusflow.evaluation.downstream.datasets import DataFormatError, read_cls_file

    path = tmp_path / "train.tsv"
    path.write_text('label\ttext\nsports\t"Goal! he shouted\npolitics\tThe president spoke\nsports\tThe team won\n'
                    'politics\t"We will win," he said, "and soon.\nhealth\tDoctors warn\nhealth\tNew vaccine\n',
                    encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"train\.tsv:2: a quote opened on this line"):
        read_cls_file(path)
    path.write_text('label\ttext\nsports\t"Goal!" he shouted\npolitics\tThe "president" spoke\n', encoding="utf-8")
    assert [e.text for e in read_cls_file(path)] == ['Goal! he shouted', 'The "president" spoke']


def test_hub_ner_tags_that_are_numbers_without_names_are_refused():
    from datasets import Dataset

    from focusflow.evaluation.downstream.datasets import DataFormatError

    unnamed = Dataset.from_dict({"tokens": [["Juma", "yuko"]], "ner_tags": [[5, 0]]})
    with pytest.raises(DataFormatError, match="numbers without their names"):
        sources._ner_from_hub(unnamed, parse_task("ner:wikiann:sw"))


def test_the_published_xnli_file_of_every_language_gives_the_tasks_pairs(tmp_path):
    """XNLI 1.0's ``xnli.dev.tsv`` holds all fifteen languages (its ``language`` column): ``nli:xnli:sw`` keeps the
    Swahili pairs, a language it lacks is one line naming those it has, a folder task of it is refused."""
    header = ["language", "gold_label", "sentence1_binary_parse", "sentence1", "sentence2", "promptID"]
    rows = ["\t".join(header)] + ["\t".join([lang, label, "", f'{lang} "premise" {i}', f"{lang} {label} {i}", str(i)])
                                  for lang in ("en", "sw", "ar") for i in range(20)
                                  for label in ("entailment", "neutral", "contradiction")]
    folder = tmp_path / "nli" / "xnli" / "sw"
    folder.mkdir(parents=True)
    (folder / "xnli.dev.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    data = resolve_task("nli:xnli:swa", tmp_path)
    assert sum(data.sizes().values()) == 60 and {e.language for e in data.train + data.dev + data.test} == {"sw"}
    assert data.train[0].premise.startswith('sw "premise"'), "quotes are text"
    with pytest.raises(sources.DataFormatError, match="3 languages \\(ar, en, sw\\).*nli:xnli:<language>"):
        resolve_task(f"nli:{folder}")
    with pytest.raises(InputError, match="holds no 'fr' pairs.*ar, en, sw"):
        sources._xnli_local(read_nli_tsv(folder / "xnli.dev.tsv"), parse_task("nli:xnli:fr"))


def test_an_nli_pair_without_a_text_is_left_out_and_said(tmp_path, caplog):
    """XNLI-MT's train files hold pairs with an empty side, which XNLI's own loader reads: one such row stopped the
    whole 392k-pair file."""
    path = tmp_path / "train.tsv"
    path.write_text("premise\thypo\tlabel\nMvua inanyesha.\tKuna mvua.\tentailment\n\tHakuna.\tneutral\n"
                    "Jua.\t\tcontradictory\n", encoding="utf-8")
    with caplog.at_level("WARNING"):
        examples = read_nli_tsv(path)
    assert [(e.premise, e.label) for e in examples] == [("Mvua inanyesha.", "entailment")]
    assert "2 pair(s) without a premise or a hypothesis left out (line 3, 4)" in caplog.text
