"""The language a published model is for: the one its lineage records, else ``--language``, never a placeholder.

A run records its language (the corpus stage's parameter, every artifact's metadata, LAPT checkpoints' own
``language`` and ``lineage``); a model made by the stage commands (``focusflow transfer``, ``focusflow lapt``)
records none, so ``publish`` takes ``--language`` for it, and without one says so in one line. The card's YAML
``language`` and the run configuration's ``language`` are the chosen code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from huggingface_hub import ModelCard

from focusflow.storage import ArtifactStore
from tests.cli_runner import error_lines, run_cli
from tests.publish.conftest import store_stage_model

REPO = "someone/tiny-stage-model"


@pytest.fixture()
def store(tmp_path: Path) -> ArtifactStore:
    return ArtifactStore((tmp_path / "store").as_uri())


def publish(monkeypatch, capsys, store: ArtifactStore, address: str, out: Path, *args: str) -> tuple[int, str, str]:
    return run_cli(monkeypatch, capsys, "publish", address, "--repo-id", REPO, "--out", str(out), *args,
                   "--store", store.uri)


def card_language(out: Path) -> str:
    return ModelCard.load(out / "README.md").data.language


def config_language(out: Path) -> str:
    return yaml.safe_load((out / "focusflow_config.yaml").read_text(encoding="utf-8"))["language"]


def test_a_model_without_a_recorded_language_needs_the_language_option(monkeypatch, capsys, store, tmp_path,
                                                                       tiny_model_folder):
    lapt = store_stage_model(store, "lapt", tiny_model_folder, {"language": None, "lineage": {}})  # `focusflow lapt`
    out = tmp_path / "repo"
    code, _, err = publish(monkeypatch, capsys, store, lapt.uri, out)
    assert code == 2 and "Traceback" not in err
    assert error_lines(err) == [f"error: model lapt/{lapt.key[:12]} records no language (models built by the stage "
                                "commands record none): pass --language CODE, its ISO 639 code, e.g. --language sw"]
    assert not out.exists() and store.list("publish") == []  # nothing started, nothing committed


def test_the_error_names_a_checkpoint_with_its_step_whole_and_that_address_publishes_it(monkeypatch, capsys, store,
                                                                                        tmp_path, tiny_model_folder):
    from focusflow.pipeline.lapt_stage import checkpoint_key

    metadata = {"language": None, "lineage": {}, "total_steps": 50, "metrics": {}}
    step_40, _ = [store_stage_model(store, "lapt-checkpoint", tiny_model_folder, {**metadata, "step": step},
                                    marker=str(step), key=checkpoint_key("c" * 64, step)) for step in (40, 50)]
    code, _, err = publish(monkeypatch, capsys, store, step_40.uri, tmp_path / "repo")
    assert code == 2
    printed = f"lapt-checkpoint/{'c' * 12}…-step-00000040"  # not a 12-character prefix that names both steps
    assert error_lines(err) == [f"error: model {printed} records no language (models built by the stage commands "
                                "record none): pass --language CODE, its ISO 639 code, e.g. --language sw"]
    out = tmp_path / "repo"
    code, _, err = publish(monkeypatch, capsys, store, printed, out, "--language", "sw")
    assert code == 0, err
    lineage = json.loads((out / "lineage.json").read_text(encoding="utf-8"))
    assert lineage["artifacts"]["model"]["key"] == step_40.key


def test_the_language_option_is_the_language_of_a_model_that_records_none(monkeypatch, capsys, store, tmp_path,
                                                                          tiny_model_folder):
    init = store_stage_model(store, "init", tiny_model_folder, {"language": None})  # `focusflow transfer`
    out = tmp_path / "repo"
    code, stdout, err = publish(monkeypatch, capsys, store, init.uri, out, "--language", "sw")
    assert code == 0, err
    assert card_language(out) == "sw" and config_language(out) == "sw"
    assert "xx" not in (out / "README.md").read_text(encoding="utf-8").split("---")[1]  # no placeholder in the YAML
    [published] = store.list("publish")
    assert published.metadata["language"] == "sw" and published.params["language"] == "sw"
    assert f"repository folder: {out}" in stdout


@pytest.mark.parametrize("stage, metadata", [
    ("init", {"language": "ny"}),  # a run's stage records its language in the metadata
    ("lapt-checkpoint", {"language": "ny", "lineage": {}, "step": 2, "total_steps": 2, "metrics": {}}),
], ids=["init-metadata", "lapt-checkpoint-metadata"])
def test_a_recorded_language_is_the_card_language(monkeypatch, capsys, store, tmp_path, tiny_model_folder,
                                                  stage, metadata):
    model = store_stage_model(store, stage, tiny_model_folder, metadata)
    out = tmp_path / "repo"
    code, _, err = publish(monkeypatch, capsys, store, model.uri, out)
    assert code == 0, err
    assert card_language(out) == "ny" and config_language(out) == "ny"
    [published] = store.list("publish")
    assert "language" not in published.params  # recorded: not a parameter, so a run's publish keeps its key


def test_a_checkpoint_takes_the_language_its_lineage_records(monkeypatch, capsys, store, tmp_path,
                                                             tiny_model_folder):
    init = store_stage_model(store, "init", tiny_model_folder, {"language": "ny"}, marker="init")
    checkpoint = store_stage_model(store, "lapt-checkpoint", tiny_model_folder,
                                   {"lineage": {"model": init.uri}, "step": 2, "total_steps": 2, "metrics": {}},
                                   marker="checkpoint")
    out = tmp_path / "repo"
    code, _, err = publish(monkeypatch, capsys, store, checkpoint.uri, out)
    assert code == 0, err
    assert card_language(out) == "ny" and config_language(out) == "ny"


def test_a_language_option_must_agree_with_the_recorded_language(monkeypatch, capsys, store, tmp_path,
                                                                 tiny_model_folder):
    init = store_stage_model(store, "init", tiny_model_folder, {"language": "sw"})
    code, _, err = publish(monkeypatch, capsys, store, init.uri, tmp_path / "same", "--language", "swa")
    assert code == 0, err  # the same language under another code
    assert card_language(tmp_path / "same") == "sw"
    out = tmp_path / "other"
    code, _, err = publish(monkeypatch, capsys, store, init.uri, out, "--language", "ha")
    assert code == 2 and "Traceback" not in err
    assert error_lines(err) == [f"error: --language ha contradicts the language 'sw' that model init/{init.key[:12]} "
                                "records: drop --language (or pass --language sw)"]
    assert not out.exists()


def test_an_unknown_language_code_is_one_error_line(monkeypatch, capsys, store, tmp_path, tiny_model_folder):
    init = store_stage_model(store, "init", tiny_model_folder, {"language": None})
    out = tmp_path / "repo"
    code, _, err = publish(monkeypatch, capsys, store, init.uri, out, "--language", "xx")
    assert code == 2 and "Traceback" not in err
    assert error_lines(err) == ["error: --language: 'xx' is not a known ISO 639 language code; use e.g. 'sw', 'ha', "
                                "'ny' or 'nya'"]
    assert not out.exists() and store.list("publish") == []
