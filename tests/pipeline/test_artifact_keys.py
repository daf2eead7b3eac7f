"""Keys count the evaluation data by the files a run reads: another task's folder appearing beside them
changes no key, an edit of a file it reads changes exactly the stages that read it."""

from __future__ import annotations

from pathlib import Path

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


def test_a_mended_reader_of_one_task_kind_rescores_that_kind_only(monkeypatch):
    """``KIND_RUN_VERSIONS``: results holding a QA task are keyed by the QA reader's version (questions sharing an id
    were scored as one before version 2); results of the other kinds keep their keys."""
    from focusflow.evaluation.downstream import runner
    from focusflow.pipeline.evaluation_stages import _downstream_key

    def key(*tasks: str) -> dict:
        return _downstream_key({"evaluation": {"tasks": list(tasks)}, "name": "focus"})

    qa, cls = key("qa:tydiqa:sw", "cls:sib200:sw"), key("cls:sib200:sw")
    assert qa["kind_versions"] == {"qa": 2} and "kind_versions" not in cls
    monkeypatch.setitem(runner.KIND_RUN_VERSIONS, "qa", 3)
    assert key("qa:tydiqa:sw", "cls:sib200:sw") != qa and key("cls:sib200:sw") == cls
