"""The command line: version, help, store inspection, config validation."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from typer.testing import CliRunner

from focusflow import __version__
from focusflow.cli import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def test_version_and_help():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "store" in result.output


def test_store_ls_and_show(local_store, tmp_path):
    artifact = local_store.put_bytes("metrics", "k1", "m.json", b"{}", params={"a": 1})
    result = runner.invoke(app, ["store", "ls", "--store", local_store.uri])
    assert result.exit_code == 0 and "metrics" in result.output
    result = runner.invoke(app, ["store", "show", artifact.uri, "--verify"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output.split("\nverified")[0])
    assert shown["params"] == {"a": 1} and shown["files"]["m.json"]["size"] == 2


def test_config_validation_errors_are_clear(tmp_path):
    result = runner.invoke(app, ["config", "--language", "sw", "--set", "tokenizer.algorithm=word2vec"])
    assert result.exit_code == 2 and "tokenizer.algorithm" in result.output and "Traceback" not in result.output


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    commands = re.findall(r"```bash\n(.+?)\n```", readme, flags=re.S)
    test_commands = [c for c in commands if "pytest" in c]
    assert len(test_commands) == 1, "README has exactly one test command"
    assert test_commands[0].strip() in ci


def test_config_validates_a_run_file_without_a_language(tmp_path):
    """`focusflow run --language X --config run.yaml` supplies the language: `config run.yaml` checks the rest."""
    run_yaml = tmp_path / "run.yaml"
    run_yaml.write_text("tokenizer:\n  vocab_size: 8000\n", encoding="utf-8")
    result = runner.invoke(app, ["config", str(run_yaml), "--set", "tokenizer.vocab_size=32000"])
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.output)
    assert "language" not in printed and printed["tokenizer"]["vocab_size"] == 32000
    result = runner.invoke(app, ["config", str(run_yaml), "-l", "SWA"])
    assert result.exit_code == 0 and yaml.safe_load(result.output)["language"] == "swa"  # kept as typed: corpus key
    result = runner.invoke(app, ["config", str(run_yaml), "--set", "tokenizer.vocab_size=many"])
    assert result.exit_code == 2 and "tokenizer.vocab_size" in result.output
