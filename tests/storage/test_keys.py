"""Same inputs, same keys, all the way down: artifact content is deterministic, timings live in the manifest."""

from __future__ import annotations

import json
from pathlib import Path

from focusflow.corpus.io import VOLATILE_KEYS, stable_stats
from focusflow.pipeline import run_stage
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


def test_tokenizer_files_do_not_depend_on_where_the_source_folder_lies(tmp_path: Path):
    """Fetched inputs live in store- and machine-specific folders; the artifact must not record them."""
    from focusflow.config import TokenizerSpec
    from focusflow.corpus.io import write_texts
    from focusflow.tokenizer import train_tokenizer
    from tests.tiny_models import train_tokenizer as tiny_tokenizer

    train = tmp_path / "train.jsonl"
    write_texts(train, sample_texts(1500, seed=2))
    source = tiny_tokenizer("xlmr", sample_texts())
    for place in ("here", "there"):
        source.save_pretrained(tmp_path / place / "source")
    spec = TokenizerSpec(vocab_size=300, character_coverage=1.0)
    stats = [train_tokenizer(train, spec, tmp_path / place / "tok", tmp_path / place / "source")
             for place in ("here", "there")]
    here, there = (sorted((tmp_path / p / "tok").iterdir()) for p in ("here", "there"))
    assert [f.name for f in here] == [f.name for f in there]
    assert [f.read_bytes() for f in here] == [f.read_bytes() for f in there]
    assert stats[0]["source_path"] == str(tmp_path / "here" / "source"), "the path stays in the returned stats"


def test_whole_chain_in_two_stores_gives_the_same_keys_and_content(tmp_path: Path):
    """corpus → … → init → intrinsic in two stores at different paths: every key and every file agree."""
    from focusflow.corpus.io import write_texts
    from focusflow.pipeline.source_stage import SourceSettings
    from tests.tiny_models import save_tiny

    corpus = tmp_path / "corpus.jsonl"
    write_texts(corpus, sample_texts(1500, seed=1))
    source = save_tiny("xlmr", tmp_path / "source")
    results = []
    for name in ("one", "two"):
        store = ArtifactStore(tmp_path / name / "store", cache_dir=tmp_path / name / "cache")
        a = {"corpus": run_stage(store, "corpus", {"language": "sw", "cleaning": {"min_chars": 10},
                                                   "corpus": {"source": "local", "paths": [str(corpus)]}})}
        a["dedup"] = run_stage(store, "dedup", {"dedup": {"workers": 1}}, {"corpus": a["corpus"]})
        a["split"] = run_stage(store, "split", {"split": {"min_heldout_documents": 40}}, {"dedup": a["dedup"]})
        a["source"] = run_stage(store, "source", SourceSettings.for_model(str(source)).to_params(), {"split": a["split"]})
        a["tokenizer"] = run_stage(store, "tokenizer", {"tokenizer": {"vocab_size": 300}},
                                   {"split": a["split"], "source": a["source"]})
        a["fasttext"] = run_stage(store, "fasttext", {"fasttext": {"dim": 16, "epochs": 2, "min_count": 1,
                                                                   "threads": 1}},
                                  {"tokenizer": a["tokenizer"], "split": a["split"]})
        a["init"] = run_stage(store, "init", {"method": "focus", "mode": "replace", "seed": 0, "options": {}},
                              {name: a[name] for name in ("source", "tokenizer", "fasttext", "split")})
        a["reference"] = run_stage(store, "reference", {"max_sentences": 20, "seed": 0},
                                   {"source": a["source"], "split": a["split"], "tokenizer": a["tokenizer"]})
        a["intrinsic"] = run_stage(store, "intrinsic", {"max_sentences": 20, "seed": 0},
                                   {"model": a["init"], "reference": a["reference"]})
        results.append({stage: (artifact.key, artifact.files) for stage, artifact in a.items()})
    for stage in results[0]:
        assert results[0][stage] == results[1][stage], stage
