"""A stage task runs its stage through the registry with progress on: a long training stage in a flow is never
silent (a bar on a terminal, a line every 30 s in a log)."""

from __future__ import annotations

from types import SimpleNamespace

import focusflow.tasks.stages as stage_tasks
from focusflow.tasks import tasks_for


def test_a_stage_task_asks_for_progress(tmp_path, monkeypatch):
    seen = {}

    def fake_run_stage(store, spec, params, inputs, **options):
        seen.update(options, stage=spec.name)
        return SimpleNamespace(uri="file:///artifact")

    monkeypatch.setattr(stage_tasks, "run_stage", fake_run_stage)
    task = tasks_for((tmp_path / "store").as_uri())["lapt"]
    assert task.fn((tmp_path / "store").as_uri(), {"lapt": {"steps": 1}}, {}) == "file:///artifact"
    assert seen["stage"] == "lapt" and seen["progress"] is True


def test_a_stage_task_reads_its_inputs_and_computes_its_key_once(prefect_server, tmp_path, monkeypatch):
    """The cache policy identifies the call (inputs resolved, key computed) and hands it to the stage: before, a task
    computed its key three times and read its inputs' manifests twice."""
    from prefect import flow

    import focusflow.pipeline.registry as registry
    from focusflow.config import load_config
    from focusflow.corpus.io import write_texts
    from focusflow.pipeline import params_for
    from focusflow.storage import ArtifactStore
    from tests.tiny_models import sample_texts

    corpus = tmp_path / "corpus.jsonl"
    write_texts(corpus, sample_texts(200, seed=1))
    cfg = load_config(language="sw", corpus={"source": "local", "paths": [str(corpus)]})
    store = (tmp_path / "store").as_uri()
    counted = {"keys": 0, "resolutions": 0}
    key, resolve = ArtifactStore.key, registry.resolve_inputs

    def counting_key(self, *args, **kwargs):
        counted["keys"] += 1
        return key(self, *args, **kwargs)

    def counting_resolve(*args, **kwargs):
        counted["resolutions"] += 1
        return resolve(*args, **kwargs)

    @flow
    def two_stages() -> str:
        tasks = tasks_for(store)  # cached results in this store
        documents = tasks["corpus"](store, params_for("corpus", cfg), {}, language="sw")
        counted.update(keys=0, resolutions=0)
        monkeypatch.setattr(ArtifactStore, "key", counting_key)
        monkeypatch.setattr(registry, "resolve_inputs", counting_resolve)
        return tasks["dedup"](store, params_for("dedup", cfg), {"corpus": documents}, language="sw")

    assert ArtifactStore(store).resolve(two_stages()).stage == "dedup"
    assert counted == {"keys": 1, "resolutions": 1}


def test_a_flow_run_again_says_what_it_took_from_the_store(prefect_server, tmp_path):
    """Prefect answers a cached task without running it (so without ``run_stage``): the task says the same stage line,
    with its branch label, so a second run of a flow is not silent."""
    import logging

    from prefect import flow

    from focusflow.config import load_config
    from focusflow.corpus.io import write_texts
    from focusflow.logs import STAGE_LOGGER
    from focusflow.pipeline import params_for
    from tests.tiny_models import sample_texts

    corpus = tmp_path / "corpus.jsonl"
    write_texts(corpus, sample_texts(200, seed=2))
    cfg = load_config(language="sw", corpus={"source": "local", "paths": [str(corpus)]})
    store = (tmp_path / "store").as_uri()

    @flow
    def two_stages() -> str:
        tasks = tasks_for(store)
        documents = tasks["corpus"](store, params_for("corpus", cfg), {}, language="sw")
        return tasks["dedup"](store, params_for("dedup", cfg), {"corpus": documents}, language="sw", label="mine")

    lines: list[str] = []

    class Lines(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger, handler = logging.getLogger(STAGE_LOGGER), Lines()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        first = two_stages()
        said_first = [line.split(" (")[0].split(" in ")[0] for line in lines]
        lines.clear()
        assert two_stages() == first
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert said_first == ["corpus: started", "corpus: done", "dedup[mine]: started", "dedup[mine]: done"]
    key = first.rsplit("/", 1)[1]
    assert lines == [lines[0], f"dedup[mine]: cache hit (dedup/{key[:12]})"]
    assert lines[0].startswith("corpus: cache hit (corpus/")


def test_an_artifact_deleted_by_hand_is_made_again_not_answered_from_its_cache_record(prefect_server, tmp_path):
    """Deleted without ``store rm`` (by hand, or by an ``rm`` killed before its hooks ran), an artifact's Prefect cache
    record stayed: every later run was a cache hit returning the address of nothing."""
    import shutil
    from pathlib import Path

    from prefect import flow

    from focusflow.storage import ArtifactStore
    from focusflow.tasks.common import result_storage_for

    store = ArtifactStore((tmp_path / "store").as_uri())
    text = store.put_bytes("import", "k" * 64, "documents.jsonl", b'{"text": "a b c d"}\n{"text": "e f g"}\n')
    params = {"split": {"min_heldout_documents": 1}}

    @flow(result_storage=result_storage_for(store.uri))
    def one_split() -> str:
        return tasks_for(store.uri)["split"](store.uri, params, {"dedup": text.uri})

    first = one_split()
    shutil.rmtree(Path(store.root) / "split")
    second = one_split()
    assert second == first and store.resolve(second).stage == "split", "made again, under the same key"
