"""Keys count the evaluation data by the files a run reads: another task's folder appearing beside them
changes no key, an edit of a file it reads changes exactly the stages that read it."""

from __future__ import annotations

from pathlib import Path

import pytest

from focusflow.storage.keys import artifact_key
from tests.pipeline.artifact_keys import FILES, UNRELATED, fixed_run_keys, write_tree

READS_EVALUATION_DATA = {"decontaminate", "downstream"}


def _changed(before: list[tuple[str, str, str]], after: list[tuple[str, str, str]]) -> set[str]:
    assert [row[:2] for row in before] == [row[:2] for row in after]  # the same stages in the same order
    return {b[0] for b, a in zip(before, after, strict=True) if b[2] != a[2]}


def test_a_folder_of_another_task_beside_the_data_changes_no_key(tmp_path: Path):
    before = fixed_run_keys(tmp_path)
    write_tree(tmp_path / "data", UNRELATED)
    assert _changed(before, fixed_run_keys(tmp_path, unrelated=True)) == set()


def test_editing_a_file_the_run_reads_recomputes_the_stages_that_read_it(tmp_path: Path):
    before = fixed_run_keys(tmp_path)
    name = next(iter(FILES))
    (tmp_path / "data" / name).write_text(FILES[name] + "Mombasa B-LOC\n", encoding="utf-8")
    changed_file = fixed_run_keys(tmp_path)
    # the content-only walk: the stages that read the data get new keys, what they feed follows by content
    assert READS_EVALUATION_DATA <= _changed(before, changed_file)
    assert "corpus" not in _changed(before, changed_file) and "source" not in _changed(before, changed_file)


def test_the_data_fingerprint_follows_the_files_read_not_where_they_lie(tmp_path: Path):
    from focusflow.pipeline.evaluation_stages import data_fingerprint

    tasks = ["ner:masakhaner2:swa", "nli:xnli:sw"]
    here, there = write_tree(tmp_path / "a", FILES), write_tree(tmp_path / "b", {**FILES, **UNRELATED})
    assert data_fingerprint(tasks, here) == data_fingerprint(tasks, there)
    assert data_fingerprint(tasks[:1], here) != data_fingerprint(tasks, here)
    assert data_fingerprint(tasks, None) is None


def test_a_task_whose_data_means_something_else_now_is_keyed_anew_and_no_other(monkeypatch, tmp_path: Path):
    """``TASK_VERSIONS``: results and texts of a QA task (questions sharing an id were scored as one) or of
    ``ner:masakhaner`` (now MasakhaNER 1.0, before an alias of 2.0) are keyed by that version, in every stage that
    reads the tasks; other tasks keep their keys. A path task needs no folder to be keyed."""
    from focusflow.config import load_config
    from focusflow.evaluation.downstream import sources
    from focusflow.pipeline import params_for
    from focusflow.pipeline.evaluation_stages import _downstream_key

    def key(*tasks: str) -> dict:
        return _downstream_key({"evaluation": {"tasks": list(tasks)}, "name": "focus"})

    qa, cls = key("qa:tydiqa:sw", "cls:sib200:sw"), key("cls:sib200:sw")
    assert qa["versions"] == {"qa": 4} and "versions" not in cls and "versions" not in key("ner:masakhaner2:swa")
    assert key("ner:MasakhaNER:swa")["versions"] == {"ner:masakhaner": 2}
    assert key("qa:/no/such/folder")["versions"] == {"qa": 4}
    for stage in ("decontaminate", "reading", "ood-text"):
        cfg = load_config(language="sw", evaluation={"tasks": ["qa:tydiqa:sw", "cls:sib200:sw"]})
        assert params_for(stage, cfg)["versions"] == {"qa": 4}, stage
        plain = load_config(language="sw", evaluation={"tasks": ["cls:sib200:sw"]})
        assert "versions" not in params_for(stage, plain), stage
    monkeypatch.setitem(sources.TASK_VERSIONS, "qa", 5)
    assert key("qa:tydiqa:sw", "cls:sib200:sw") != qa and key("cls:sib200:sw") == cls


def test_extensionless_files_count_in_the_fingerprint_only_when_a_reader_reads_them(tmp_path: Path):
    """WikiANN's original ``train``/``dev``/``test`` are read, so they count; a LICENSE beside them is not."""
    from focusflow.pipeline.evaluation_stages import data_fingerprint

    folder = tmp_path / "ner" / "wikiann" / "swa"
    folder.mkdir(parents=True)
    (folder / "train").write_text("sw:Juma\tB-PER\n", encoding="utf-8")
    before = data_fingerprint(["ner:wikiann:swa"], tmp_path)
    (folder / "LICENSE").write_text("CC BY\n", encoding="utf-8")
    assert data_fingerprint(["ner:wikiann:swa"], tmp_path) == before
    (folder / "train").write_text("sw:Juma\tB-PER\nsw:yuko\tO\n", encoding="utf-8")
    assert data_fingerprint(["ner:wikiann:swa"], tmp_path) != before


def test_corpora_whose_reading_changed_are_keyed_anew_and_no_other(tmp_path):
    """The corpus reader's version is in the key of local corpora and of a hub corpus's own variant codes (zh-Hant
    read zh-Hans before), never of the demo corpus or a hub corpus's base language: their stores stay valid."""
    from focusflow.pipeline import get_stage

    (tmp_path / "sw.txt").write_text("Habari ya asubuhi\n", encoding="utf-8")

    def key(source: str, language: str) -> dict:
        paths = [str(tmp_path / "sw.txt")] if source == "local" else []
        return get_stage("corpus").key_params({"language": language, "corpus": {"source": source, "paths": paths},
                                               "cleaning": {}})

    assert "reader" not in key("demo", "ny") and "reader" not in key("cc100", "sw") and "reader" not in key("mc4", "he")
    assert key("cc100", "zh-hant")["reader"] == key("mc4", "hi-latn")["reader"] == 2
    assert key("local", "sw")["reader"] == 3, "local files: dot names, READMEs, links, lone CRs, cut zstd (29 Nov)"


def test_a_local_corpus_is_keyed_by_what_its_files_hold_not_by_their_paths(tmp_path, monkeypatch):
    """A file rewritten, or another project's ``data/corpus.txt`` (a relative path, one store), is another corpus:
    keyed by the paths alone, the stored corpus of the old text was read again."""
    from focusflow.pipeline import get_stage

    def key() -> str:
        return artifact_key("corpus", get_stage("corpus").key_params({
            "language": "sw", "corpus": {"source": "local", "paths": ["data/corpus.txt"]}, "cleaning": {}}), {})

    for project, text in (("one", "Habari ya asubuhi\n"), ("two", "Mvua inanyesha sana\n")):
        (tmp_path / project / "data").mkdir(parents=True)
        (tmp_path / project / "data" / "corpus.txt").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path / "one")
    first = key()
    assert key() == first
    monkeypatch.chdir(tmp_path / "two")
    assert key() != first
    (tmp_path / "two" / "data" / "corpus.txt").write_text("Habari ya asubuhi\n", encoding="utf-8")
    assert key() == first, "the same text at the same path is the same corpus"
    (tmp_path / "two" / "data" / "corpus.txt").unlink()
    with pytest.raises(FileNotFoundError, match="corpus path 'data/corpus.txt' matches no file"):
        key()


def test_a_new_language_id_model_at_the_same_path_is_another_corpus(tmp_path):
    """A language-ID model was keyed by its path only: a newer lid.bin at that path kept the old model's corpus."""
    from focusflow.pipeline import get_stage

    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "sw.txt").write_text("Habari ya asubuhi\n", encoding="utf-8")
    model = tmp_path / "lid.bin"
    model.write_bytes(b"model one")

    def key(folder: str, langid: str | None = None) -> str:
        return artifact_key("corpus", get_stage("corpus").key_params({
            "language": "sw", "corpus": {"source": "local", "paths": [str(tmp_path / folder / "sw.txt")]},
            "cleaning": {"langid_model": langid}}), {})

    with_model = key("a", str(model))
    assert with_model != key("a")
    model.write_bytes(b"model two, retrained")
    assert key("a", str(model)) != with_model
    with pytest.raises(FileNotFoundError, match="langid_model .*not found"):
        key("a", str(tmp_path / "missing.bin"))


def test_precision_auto_is_keyed_as_what_it_means_on_the_machine(monkeypatch, tmp_path: Path):
    """Keyed ``auto``, one key held bf16 weights on an AMX machine and fp32 on another, and a run resumed elsewhere
    changed precision mid-run: the key holds what ``auto`` resolves to, so an explicit ``bf16`` is the same run."""
    from focusflow.pipeline import registry
    from focusflow.pipeline.registry import stage_key
    from focusflow.storage import ArtifactStore

    store = ArtifactStore((tmp_path / "store").as_uri())
    source = store.put_bytes("import", "s" * 64, "config.json", b"{}")

    def key(precision: str) -> str:
        return stage_key(store, "reference", {"max_sentences": 10, "seed": 0, "precision": precision},
                         {"source": source, "split": source})

    monkeypatch.setattr(registry, "auto_precision", lambda: "bf16")
    on_bf16 = key("auto")
    assert on_bf16 == key("bf16") != key("fp32")
    monkeypatch.setattr(registry, "auto_precision", lambda: "fp32")
    assert key("auto") == key("fp32") != on_bf16
    assert registry.machine_resolved({"lapt": {"precision": "auto", "steps": 3}}) == {"lapt": {"precision": "fp32",
                                                                                             "steps": 3}}
