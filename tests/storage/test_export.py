"""``--out``: an export or an output folder is written into a new, empty or focusflow's own earlier folder; anything
else is refused, nothing touched."""

from __future__ import annotations

import json
import os
from hashlib import sha256
from pathlib import Path

import pytest

from focusflow.storage.atomic import FolderInUseError, atomic_folder
from focusflow.storage.export import EXPORT_MARKER, OutputFolder, check_export_target, export_files


def artifact_files(tmp_path: Path, names: dict[str, str]) -> dict[str, Path]:
    source = tmp_path / "artifact"
    files = {}
    for name, text in names.items():
        path = source / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        files[name] = path
    return files


def tree(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_an_export_fills_a_new_folder_and_marks_what_it_wrote(tmp_path):
    out = tmp_path / "out"
    export_files(out, artifact_files(tmp_path, {"a.txt": "A", "sub/b.txt": "B"}), artifact="file:///s/lapt/k1")
    assert tree(out) == {EXPORT_MARKER: (out / EXPORT_MARKER).read_text(), "a.txt": "A", "sub/b.txt": "B"}
    marker = json.loads((out / EXPORT_MARKER).read_text())
    assert marker == {"format": 2, "artifact": "file:///s/lapt/k1",
                      "files": {"a.txt": sha256(b"A").hexdigest(), "sub/b.txt": sha256(b"B").hexdigest()}}


def test_an_empty_folder_is_filled(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    export_files(out, artifact_files(tmp_path, {"a.txt": "A"}), artifact="k")
    assert (out / "a.txt").read_text() == "A"


def test_an_earlier_export_is_replaced_whole(tmp_path):
    out = tmp_path / "out"
    export_files(out, artifact_files(tmp_path, {"old.txt": "old", "sub/x.txt": "x"}), artifact="k1")
    export_files(out, artifact_files(tmp_path / "2", {"new.txt": "new"}), artifact="k2")
    assert sorted(tree(out)) == [EXPORT_MARKER, "new.txt"]


def test_a_folder_with_the_users_files_is_refused_and_untouched(tmp_path):
    out = tmp_path / "k"
    (out / "sub").mkdir(parents=True)
    (out / "thesis.txt").write_text("years of work")
    (out / "sub" / "notes.md").write_text("notes")
    with pytest.raises(FolderInUseError, match="thesis.txt"):
        export_files(out, artifact_files(tmp_path, {"a.txt": "A"}), artifact="k")
    assert tree(out) == {"sub/notes.md": "notes", "thesis.txt": "years of work"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["artifact", "k"], "no staging folder left behind"


def test_a_file_the_user_added_to_an_earlier_export_is_kept(tmp_path):
    out = tmp_path / "out"
    export_files(out, artifact_files(tmp_path, {"a.txt": "A"}), artifact="k1")
    (out / "my-eval.csv").write_text("mine")
    with pytest.raises(FolderInUseError, match="my-eval.csv"):
        export_files(out, artifact_files(tmp_path / "2", {"b.txt": "B"}), artifact="k2")
    assert (out / "my-eval.csv").read_text() == "mine" and (out / "a.txt").read_text() == "A"


def test_a_broken_marker_protects_like_no_marker(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / EXPORT_MARKER).write_text("{not json")
    (out / "mine.txt").write_text("x")
    with pytest.raises(FolderInUseError):
        check_export_target(out)


def test_a_folder_under_a_file_is_refused_in_one_line_not_a_traceback(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(FolderInUseError, match=r"lies under .*afile, which is a file"):
        check_export_target(tmp_path / "afile" / "sub" / "deeper")


def test_the_current_directory_and_the_folders_above_it_are_refused(tmp_path, monkeypatch):
    here = tmp_path / "work" / "here"
    here.mkdir(parents=True)
    monkeypatch.chdir(here)
    for out in (".", "..", str(tmp_path)):
        with pytest.raises(FolderInUseError, match="current directory"):
            check_export_target(out)


def test_an_empty_current_directory_is_refused_too(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FolderInUseError, match="current directory"):
        export_files(".", artifact_files(tmp_path / "elsewhere", {"a.txt": "A"}), artifact="k")


@pytest.mark.parametrize("where", ["root", "inside", "above"])
def test_a_store_is_never_an_export_target(tmp_path, monkeypatch, where):
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "stores" / "store"
    store.mkdir(parents=True)
    out = {"root": store, "inside": store / "lapt" / "new", "above": tmp_path / "stores"}[where]
    with pytest.raises(FolderInUseError, match="artifact store"):
        check_export_target(out, [store])


def test_a_file_in_the_way_is_refused(tmp_path):
    (tmp_path / "out").write_text("x")
    with pytest.raises(FolderInUseError, match="not a folder"):
        check_export_target(tmp_path / "out")


def test_atomic_folder_refuses_to_replace_a_folder_it_was_not_told_it_owns(tmp_path):
    out = tmp_path / "tok"
    out.mkdir()
    (out / "mine.txt").write_text("x")
    with pytest.raises(FolderInUseError, match="already holds files"):
        with atomic_folder(out) as staging:
            (staging / "tokenizer.json").write_text("{}")
    assert tree(out) == {"mine.txt": "x"}
    with atomic_folder(out, replace=True) as staging:  # a folder focusflow owns (a checkpoint, a cache)
        (staging / "tokenizer.json").write_text("{}")
    assert tree(out) == {"tokenizer.json": "{}"}


def test_a_file_the_user_edited_since_the_export_is_kept(tmp_path):
    out = tmp_path / "out"
    export_files(out, artifact_files(tmp_path, {"model.safetensors": "weights", "card.md": "card"}), artifact="k1")
    (out / "card.md").write_text("my edits")
    with pytest.raises(FolderInUseError, match="changed since its export.*card.md"):
        export_files(out, artifact_files(tmp_path / "2", {"model.safetensors": "new"}), artifact="k2")
    assert tree(out)["card.md"] == "my edits" and tree(out)["model.safetensors"] == "weights"


def test_a_marker_that_lists_a_users_file_does_not_get_it_deleted(tmp_path):
    """A marker copied from another export (or edited) names thesis.txt: its bytes are not what focusflow wrote."""
    first = tmp_path / "first"
    export_files(first, artifact_files(tmp_path, {"thesis.txt": "focusflow's thesis.txt"}), artifact="k1")
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.txt").write_text("years of work")
    (out / EXPORT_MARKER).write_bytes((first / EXPORT_MARKER).read_bytes())
    with pytest.raises(FolderInUseError, match="thesis.txt"):
        export_files(out, artifact_files(tmp_path / "2", {"a.txt": "A"}), artifact="k2")
    assert (out / "thesis.txt").read_text() == "years of work"


def test_a_marker_of_names_only_replaces_nothing(tmp_path):
    """An export by an older focusflow (its marker lists names, no hashes) cannot tell an edit from its own bytes."""
    out = tmp_path / "old"
    out.mkdir()
    (out / "a.txt").write_text("A, or the user's edit of it")
    (out / EXPORT_MARKER).write_text(json.dumps({"artifact": "k0", "files": ["a.txt"]}))
    with pytest.raises(FolderInUseError, match="names only.*new or empty folder"):
        export_files(out, artifact_files(tmp_path, {"a.txt": "new"}), artifact="k1")
    assert (out / "a.txt").read_text() == "A, or the user's edit of it"


def test_a_symlinked_out_is_named_a_symlink_and_not_followed(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    os.symlink(real, link)
    with pytest.raises(FolderInUseError, match=r"is a symlink \(to .*real\).*does not follow it"):
        export_files(link, artifact_files(tmp_path, {"a.txt": "A"}), artifact="k")
    assert list(real.iterdir()) == [] and link.is_symlink()


# An output folder: filled file by file over a long run (evaluate), under the same rule.
def run_file(name: str, path: Path) -> bool:
    """A stand-in own format: ``runs/*.json`` holding a fingerprint."""
    return name.startswith("runs/") and "fingerprint" in path.read_text(encoding="utf-8")


def test_an_output_folder_records_every_file_it_writes_and_takes_its_own_output_again(tmp_path):
    out = tmp_path / "eval"
    folder = OutputFolder(out, "evaluate", own_format=run_file)
    assert not out.exists(), "checking creates nothing: a run that fails on its inputs leaves no folder"
    folder.write("runs/a/seed1.json", '{"fingerprint": "f1"}')
    folder.write("results.csv", "model,mean\na,0.5\n")
    marker = json.loads((out / EXPORT_MARKER).read_text())
    assert marker["output"] == "evaluate" and marker["files"] == {
        "results.csv": sha256(b"model,mean\na,0.5\n").hexdigest(),
        "runs/a/seed1.json": sha256(b'{"fingerprint": "f1"}').hexdigest()}
    again = OutputFolder(out, "evaluate", own_format=run_file)  # the same command goes on
    again.write("results.csv", "model,mean\na,0.6\n")
    assert tree(out)["results.csv"] == "model,mean\na,0.6\n"
    OutputFolder(out, "evaluate", own_format=run_file)


def test_an_output_folder_refuses_the_users_files_and_files_edited_since_and_touches_nothing(tmp_path):
    users = tmp_path / "thesis"
    users.mkdir()
    (users / "results.csv").write_text("my own table")
    (users / "thesis.txt").write_text("years of work")
    with pytest.raises(FolderInUseError, match=r"holds files that focusflow did not write or that changed since it "
                                               r"wrote them \(results.csv, thesis.txt\).*move those files away"):
        OutputFolder(users, "evaluate", own_format=run_file)
    assert tree(users) == {"results.csv": "my own table", "thesis.txt": "years of work"}

    out = tmp_path / "eval"
    OutputFolder(out, "evaluate", own_format=run_file).write("results.md", "# focusflow's table")
    (out / "results.md").write_text("# focusflow's table, with my notes")
    with pytest.raises(FolderInUseError, match=r"changed since it wrote them \(results.md\)"):
        OutputFolder(out, "evaluate", own_format=run_file)
    (out / "runs").mkdir()
    (out / "runs" / "notes.json").write_text("{}")  # under runs/, yet not a run file
    with pytest.raises(FolderInUseError, match=r"results.md, runs/notes.json"):
        OutputFolder(out, "evaluate", own_format=run_file)


def test_an_output_folder_takes_run_files_of_its_format_copied_in_from_elsewhere(tmp_path):
    """The merge of a comparison split across machines: their runs/ copied into one folder, then run again."""
    out = tmp_path / "eval"
    (out / "runs" / "b").mkdir(parents=True)
    (out / "runs" / "b" / "seed2.json").write_text('{"fingerprint": "f2"}')
    with pytest.raises(FolderInUseError, match="already holds files .*runs"):  # an export knows no run files
        check_export_target(out)
    OutputFolder(out, "evaluate", own_format=run_file).write("results.csv", "t")
    (out / "runs" / "b" / "seed3.json").write_text('{"fingerprint": "f3"}')  # another machine's, after a first call
    OutputFolder(out, "evaluate", own_format=run_file)


def test_an_export_never_replaces_an_output_folder_and_an_output_folder_may_follow_an_export(tmp_path):
    out = tmp_path / "out"
    OutputFolder(out, "evaluate").write("results.csv", "t")
    with pytest.raises(FolderInUseError, match="holds what focusflow evaluate wrote there over its run"):
        export_files(out, artifact_files(tmp_path, {"a.txt": "A"}), artifact="k")
    assert tree(out) == {EXPORT_MARKER: (out / EXPORT_MARKER).read_text(), "results.csv": "t"}
    exported = tmp_path / "exported"
    export_files(exported, artifact_files(tmp_path / "2", {"a.txt": "A"}), artifact="k")
    OutputFolder(exported, "evaluate").write("results.csv", "t")  # beside the export's files, which stay
    assert sorted(tree(exported)) == [EXPORT_MARKER, "a.txt", "results.csv"]


def test_an_output_folder_may_be_the_current_directory_when_it_is_new_to_it(tmp_path, monkeypatch):
    """It writes files into the folder, never replaces the folder: the current directory is no risk."""
    monkeypatch.chdir(tmp_path)
    OutputFolder(".", "evaluate").write("results.csv", "t")
    assert (tmp_path / "results.csv").read_text() == "t"
