"""Same inputs, same keys, all the way down: artifact content is deterministic, timings live in the manifest."""

from __future__ import annotations

import json
from pathlib import Path

from focusflow.corpus.io import VOLATILE_KEYS, stable_stats
from focusflow.pipeline.stages import run_stage
from focusflow.storage import ArtifactStore
from tests.tiny_models import sample_texts


def _params(raw: Path) -> dict[str, dict]:
    return {
        "corpus": {"corpus": {"source": "local", "paths": [str(raw)]}, "cleaning": {"min_chars": 10},
                   "language": "sw"},
        "dedup": {"dedup": {"workers": 1}},
        "split": {"split": {}},
    }


def _all_keys(value: object) -> set[str]:
    if isinstance(value, dict):
        return set(value).union(*(_all_keys(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_all_keys(v) for v in value))
    return set()


def _chain(store: ArtifactStore, params: dict[str, dict]) -> dict[str, object]:
    corpus = run_stage(store, "corpus", params["corpus"])
    dedup = run_stage(store, "dedup", params["dedup"], {"corpus": corpus})
    split = run_stage(store, "split", params["split"], {"dedup": dedup})
    return {"corpus": corpus, "dedup": dedup, "split": split}


def test_stable_stats_drops_volatile_keys_at_any_depth():
    stats = {"documents": 3, "seconds": 1.5, "document": {"kept": 2, "seconds": 0.1}, "runs": [{"host": "a", "n": 1}]}
    assert stable_stats(stats) == {"documents": 3, "document": {"kept": 2}, "runs": [{"n": 1}]}
    assert stats["seconds"] == 1.5, "the caller's stats keep their timings"
    assert "seconds" in VOLATILE_KEYS


def test_recomputed_artifact_keeps_its_key_and_hash_and_downstream_is_a_cache_hit(tmp_path: Path):
    texts = sample_texts(400, seed=5)
    raw = tmp_path / "raw.txt"
    raw.write_text("\n".join(texts + texts[:20]) + "\n", encoding="utf-8")
    store = ArtifactStore(tmp_path / "store", cache_dir=tmp_path / "cache")
    params = _params(raw)
    first = _chain(store, params)
    for artifact in first.values():
        stats_file = store.fetch(artifact) / "stats.json"
        assert not VOLATILE_KEYS & _all_keys(json.loads(stats_file.read_text(encoding="utf-8"))), stats_file
        assert {"build_seconds", "host"} <= set(artifact.metadata), "timings live in the manifest, outside the hash"
    assert "seconds" in first["corpus"].metadata and "seconds" in first["dedup"].metadata

    store.delete("corpus", first["corpus"].key)
    assert store.find("corpus", first["corpus"].key) is None
    second = _chain(store, params)

    assert second["corpus"].key == first["corpus"].key
    assert second["corpus"].content_hash == first["corpus"].content_hash
    assert second["corpus"].manifest["created"] != first["corpus"].manifest["created"], "the corpus was rebuilt"
    for stage in ("dedup", "split"):
        assert second[stage].key == first[stage].key
        assert second[stage].manifest["created"] == first[stage].manifest["created"], f"{stage} was rebuilt"
        assert second[stage].data_dir == first[stage].data_dir
    assert [len(store.list(stage)) for stage in ("corpus", "dedup", "split")] == [1, 1, 1]
