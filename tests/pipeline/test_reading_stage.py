"""The reading stage: how much of the tasks' text a vocabulary from the source's cuts as the source does."""

from __future__ import annotations

from focusflow.config import build_config
from focusflow.corpus.io import write_texts
from focusflow.embeddings import initialize_model
from focusflow.evaluation.records import ReadingRecord
from focusflow.pipeline import params_for, run_stage
from focusflow.storage import ArtifactStore
from tests.tiny_models import sample_texts, save_tiny


def test_a_pruned_vocabulary_is_measured_on_every_split_of_each_task(tmp_path):
    source = save_tiny("xlmr", tmp_path / "source")
    write_texts(tmp_path / "train.jsonl", [t for t in sample_texts(400, seed=0) if len(t.split()) < 9][:60])
    initialize_model(source, None, tmp_path / "pruned", "mean", mode="prune", train=tmp_path / "train.jsonl")
    task = tmp_path / "topics"
    task.mkdir()
    texts = sample_texts(30, seed=0)
    for split, rows in (("train", texts[:20]), ("dev", texts[20:25]), ("test", texts[25:])):
        labelled = "".join(f"{text}\t{i % 2}\n" for i, text in enumerate(rows))
        (task / f"{split}.tsv").write_text("text\tlabel\n" + labelled, encoding="utf-8")
    store = ArtifactStore(tmp_path / "store")
    cfg = build_config({"language": "sw", "evaluation": {"tasks": [f"cls:{task}"]}})
    read = run_stage(store, "reading", params_for("reading", cfg),
                     {"source": store.put_dir("source", "s" * 64, source),
                      "model": store.put_dir("init", "p" * 64, tmp_path / "pruned")})
    (agreement,) = ReadingRecord.of(read).tasks.values()
    assert agreement["texts"] == 30 and 0 < agreement["sentences"] < 1 and agreement["words"] > agreement["sentences"]
