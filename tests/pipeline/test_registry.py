"""One pipeline, one cache: every entry point runs stages through the registry and the store.

- the Prefect tasks' cache key is the registry's artifact key, for every registered stage;
- stages computed by the CLI are cache hits for the pipeline graph (what the flows run), and the other way round;
- ``focusflow compare`` is the same graph: its report lands in the store beside the stages it reused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from focusflow.cli import app
from focusflow.config import load_config
from focusflow.pipeline import STAGES, get_stage, params_for, run_stage, stage_key
from focusflow.pipeline.graph import LocalStage
from focusflow.storage import ArtifactStore
from tests.tiny_models import sample_texts


def _cli(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.output[result.output.index("{"):])


@pytest.fixture()
def corpus_config(tmp_path: Path) -> Path:
    raw = tmp_path / "raw.txt"
    texts = sample_texts(800, seed=5)
    raw.write_text("\n".join(texts + texts[:50]) + "\n", encoding="utf-8")
    config = tmp_path / "run.yaml"
    config.write_text(f"language: sw\ncorpus:\n  source: local\n  paths: ['{raw}']\ncleaning:\n  min_chars: 10\n"
                      "split:\n  min_heldout_documents: 20\ndedup:\n  workers: 1\n", encoding="utf-8")
    return config


class Recording(LocalStage):
    """A graph caller that records which artifacts it returned."""

    calls: list[tuple[str, str]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        uri = super().__call__(*args, **kwargs)
        Recording.calls.append((self.stage, uri))
        return uri


def _graph_corpus_stages(config: Path, store: ArtifactStore) -> dict[str, str]:
    """corpus → dedup → split as the flows' graph wires them."""
    cfg = load_config(config)
    corpus = LocalStage("corpus")(store.uri, params_for("corpus", cfg), {}, language=cfg.language)
    dedup = LocalStage("dedup")(store.uri, params_for("dedup", cfg), {"corpus": corpus})
    split = LocalStage("split")(store.uri, params_for("split", cfg), {"dedup": dedup})
    return {"corpus": corpus, "dedup": dedup, "split": split}


def _manifests(store: ArtifactStore) -> set[str]:
    return {a.uri for a in store.list()}


def test_cli_stages_are_cache_hits_for_the_graph(corpus_config, tmp_path):
    store = ArtifactStore(tmp_path / "store")
    corpus = _cli("corpus", "--config", str(corpus_config), "--store", store.uri, "--out", str(tmp_path / "c"))
    dedup = _cli("dedup", corpus["artifact"], "--config", str(corpus_config), "--store", store.uri)
    split = _cli("split", dedup["artifact"], "--config", str(corpus_config), "--store", store.uri)
    assert (tmp_path / "c" / "documents.jsonl").is_file()  # --out is an export of the stored artifact
    before = _manifests(store)
    graph = _graph_corpus_stages(corpus_config, store)
    assert _manifests(store) == before  # nothing new was built
    assert graph == {"corpus": corpus["artifact"], "dedup": dedup["artifact"], "split": split["artifact"]}


def test_graph_stages_are_cache_hits_for_the_cli(corpus_config, tmp_path):
    store = ArtifactStore(tmp_path / "store")
    graph = _graph_corpus_stages(corpus_config, store)
    before = _manifests(store)
    assert _cli("corpus", "--config", str(corpus_config), "--store", store.uri)["artifact"] == graph["corpus"]
    # a stored artifact's folder (what --out or a file manager shows) is accepted as the input
    corpus_folder = store.fetch(store.resolve(graph["corpus"]))
    assert _cli("dedup", str(corpus_folder), "--config", str(corpus_config), "--store", store.uri)["artifact"] \
        == graph["dedup"]
    assert _manifests(store) == before


def test_local_input_files_are_imported_by_content(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    text = "\n".join(sample_texts(300, seed=9))
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text(text, encoding="utf-8")
    first = _cli("split", str(tmp_path / "a.txt"), "--store", store.uri, "--set", "split.min_heldout_documents=5")
    second = _cli("split", str(tmp_path / "b.txt"), "--store", store.uri, "--set", "split.min_heldout_documents=5")
    assert first["artifact"] == second["artifact"]  # same bytes elsewhere: same input, same key
    assert len(store.list("import")) == 1


def test_task_cache_key_is_the_store_key_for_every_stage(tmp_path):
    from focusflow.tasks.common import ArtifactKeyPolicy, cache_record_name
    from focusflow.tasks.stages import STAGE_TASKS

    store = ArtifactStore(tmp_path / "store")
    assert set(STAGE_TASKS) == set(STAGES)
    artifact = store.put_bytes("import", "k" * 64, "documents.jsonl", b'{"text": "a b c d"}\n{"text": "e f g"}\n')
    params = {"split": {"min_heldout_documents": 1}, "language": "sw", "_location": "/anywhere"}
    for name, task in STAGE_TASKS.items():
        spec = get_stage(name)
        policy = task.cache_policy
        assert isinstance(policy, ArtifactKeyPolicy) and policy.stage == name
        names = spec.inputs if spec.inputs is not None else ("stage:any",)
        inputs = {input_name: artifact.uri for input_name in names}
        given = {"evaluation": {"tasks": []}, **params} if name == "downstream" else params
        key = policy.compute_key(None, {"store_uri": store.uri, "params": given, "inputs": inputs}, {})
        assert key == cache_record_name(name, spec.version, stage_key(store, name, given, inputs))
    # and run_stage stores under that key
    split = run_stage(store, "split", params, {"dedup": artifact})
    assert split.key == stage_key(store, "split", params, {"dedup": artifact.uri})


def test_runtime_only_parameters_do_not_change_keys(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    params = {"source_model": "local", "fingerprint": "abc", "options": {}}
    assert stage_key(store, "source", {**params, "_location": "/a"}) == stage_key(store, "source",
                                                                                {**params, "_location": "/b"})


def test_wrong_inputs_are_refused_by_name(tmp_path):
    from focusflow.pipeline import StageInputError

    with pytest.raises(StageInputError, match="missing \\['corpus'\\]"):
        run_stage(ArtifactStore(tmp_path / "store"), "dedup", {"dedup": {}}, {})


def test_the_report_shows_where_the_time_went(corpus_config, tmp_path):
    store = ArtifactStore(tmp_path / "store")
    graph = _graph_corpus_stages(corpus_config, store)
    report = run_stage(store, "report", {"language": "sw"}, {f"stage:{name}": uri for name, uri in graph.items()})
    for _name, uri in graph.items():  # every build records its wall time and host in the manifest, not in the files
        assert store.resolve(uri).metadata["build_seconds"] >= 0
    import pandas as pd

    times = pd.read_csv(store.fetch(report) / "stage_times.csv")
    assert set(times["stage"]) == {"corpus", "dedup", "split"}
    corpus = times.set_index("stage").loc["corpus"]
    assert corpus["unit"] == "bytes" and corpus["work"] == store.resolve(graph["corpus"]).metadata["bytes"]
    assert corpus["per_second"] == pytest.approx(corpus["work"] / corpus["seconds"])
    assert "## Where the time went" in store.read_bytes(report, "report.md").decode()


def test_a_build_receives_its_parameters_parsed_into_the_rows_settings(tmp_path):
    from pydantic import Field

    from focusflow.pipeline import Stage, StageSettings
    from focusflow.pipeline.registry import StageSettingsError

    class Settings(StageSettings):
        steps: int
        work_root: str | None = Field(None, alias="_work_root")

    seen = []

    def build(run):
        seen.append(run.settings)
        (run.out / "steps.txt").write_text(str(run.settings.steps), encoding="utf-8")

    stage = Stage("typed", 1, (), build, settings=Settings)
    store = ArtifactStore(tmp_path / "store")
    run_stage(store, stage, {"steps": 3, "_work_root": str(tmp_path / "scratch")})
    assert seen == [Settings(steps=3, work_root=str(tmp_path / "scratch"))]
    with pytest.raises(StageSettingsError, match="stage typed: invalid parameters \\(steps: "):
        run_stage(store, stage, {"steps": "many"})
    assert all(spec.settings is not None for spec in STAGES.values())  # every stage reads typed settings


def test_two_runs_of_one_stage_at_once_build_it_once_and_the_second_waits_for_it(tmp_path, caplog):
    """Two runs of one configuration on one store: the first to reach a stage claims it, the other waits and
    returns the artifact the first committed; a stage with a work folder gets it, claimed, under the work root."""
    import logging
    import threading
    import time

    from pydantic import Field

    from focusflow.logs import STAGE_LOGGER
    from focusflow.pipeline import Stage, StageSettings

    class Settings(StageSettings):
        work_root: str | None = Field(None, alias="_work_root")

    builds, folders = [], []

    def build(run):
        builds.append(run.key)
        folders.append(run.work)
        run.work.mkdir(parents=True, exist_ok=True)
        (run.work / "checkpoint").write_text(str(len(builds)), encoding="utf-8")  # one writer at a time
        time.sleep(1.0)
        (run.out / "model.txt").write_text("trained", encoding="utf-8")

    stage = Stage("slow", 1, (), build, settings=Settings, work_folder=True)
    store = ArtifactStore(tmp_path / "store")
    params = {"_work_root": str(tmp_path / "work")}
    results: list[str] = []
    caplog.set_level(logging.INFO, logger=STAGE_LOGGER)
    runs = [threading.Thread(target=lambda: results.append(run_stage(store, stage, params).uri)) for _ in range(2)]
    for run in runs:
        run.start()
        time.sleep(0.2)
    for run in runs:
        run.join()
    assert len(builds) == 1 and results[0] == results[1]
    assert folders == [tmp_path / "work" / "slow" / builds[0]]
    lines = [record.getMessage() for record in caplog.records if record.name == STAGE_LOGGER]
    assert any(line.startswith("slow: waiting for process") for line in lines), lines
    assert sum(line.startswith("slow: cache hit") for line in lines) == 1, lines


def test_each_stage_task_runs_as_its_row_says():
    from focusflow.tasks.stages import STAGE_TASKS

    for name, task in STAGE_TASKS.items():
        hints = get_stage(name).hints
        assert (task.retries, task.timeout_seconds, "gpu" in task.tags) == (hints.retries, hints.timeout_s, hints.gpu)
    assert get_stage("corpus").hints.retries == get_stage("source").hints.retries == 2
    assert get_stage("lapt").hints.checkpoints and get_stage("lapt").hints.gpu and get_stage("downstream").hints.gpu
    assert get_stage("tokenizer").hints.retries == 0


#: What a stage's settings need beyond the configuration: the branch they are for.
VARIANTS = {"init": {"method": "focus"}, "downstream": {"name": "focus"}, "publish": {"model": "focus"},
            "lapt": {"lineage": {"source": "file:///store/source/abc"}}}


def test_every_stage_builds_its_parameters_from_a_run_configuration_and_reads_them_back_unchanged(tmp_path):
    """One place per stage: its settings class builds the parameters (``from_config``), and the typed settings
    the build reads give back exactly the parameters that were keyed."""
    from focusflow.config import load_config

    cfg = load_config(language="sw", evaluation={"tasks": ["cls:sib200:sw"], "data_root": str(tmp_path)},
                      publish={"repo_id": "me/e5-{language}-{model}", "models": ["focus"]})
    for name, spec in STAGES.items():
        assert spec.settings is not None, f"stage {name} has no settings class"
        params = params_for(name, cfg, **VARIANTS.get(name, {}))
        assert spec.parse(params).to_params() == params, name
    assert params_for("lapt", cfg, **VARIANTS["lapt"])["_lineage"] == VARIANTS["lapt"]["lineage"]
    assert "fingerprint" not in params_for("source", cfg)  # a hub id: only a local folder counts by content


def test_every_registered_stage_has_its_task_and_its_in_process_caller():
    """What a new stage's row gives without another file: the Prefect task (configured from its hints) and the
    caller ``focusflow compare`` and the benchmarks use."""
    from focusflow.pipeline.graph import local_tasks
    from focusflow.tasks.stages import STAGE_TASKS

    assert set(STAGE_TASKS) == set(local_tasks()) == set(STAGES)
    for name, spec in STAGES.items():
        assert STAGE_TASKS[name].retries == spec.hints.retries and f"stage:{name}" in STAGE_TASKS[name].tags


def test_every_stage_names_the_record_its_readers_read():
    """A stage's row names its output type, and it is the record its readers validate: every record class that
    names a registered stage is that stage's record or one it extends (``LaptRecord`` extends ``ModelRecord``)."""
    from focusflow.storage.records import StageRecord

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    for name, spec in STAGES.items():
        assert spec.record is StageRecord or name in spec.record.stages, f"{name}: {spec.record.__name__}"
    for record in subclasses(StageRecord):
        for name in set(record.stages) & set(STAGES):
            assert issubclass(STAGES[name].record, record), f"{name} records {STAGES[name].record.__name__}, " \
                                                            f"its readers read {record.__name__}"


def test_a_build_whose_metadata_is_not_its_record_stores_nothing(tmp_path):
    """The output port is checked at the build's end: a field of another type is one error naming the stage and
    the field, and nothing is committed (the stage runs again once mended)."""
    from focusflow.pipeline import Stage
    from focusflow.pipeline.registry import StageOutputError, StageSettings
    from focusflow.storage.records import StageRecord

    class Counted(StageRecord):
        stages = ("counted",)
        documents: int | None = None

    recorded = {"documents": "many"}

    def build(run):
        (run.out / "data.txt").write_text("x", encoding="utf-8")
        return dict(recorded)

    stage = Stage("counted", 1, (), build, settings=StageSettings, record=Counted)
    store = ArtifactStore(tmp_path / "store")
    with pytest.raises(StageOutputError, match=r"stage counted: .* not a Counted \(documents: "):
        run_stage(store, stage, {})
    assert store.find("counted", stage_key(store, stage, {})) is None
    recorded["documents"] = 3
    assert Counted.of(run_stage(store, stage, {})).documents == 3
