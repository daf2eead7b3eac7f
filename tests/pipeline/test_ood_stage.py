"""Text of another domain of the language: the evaluation tasks' test sentences, or a file the user names."""

from __future__ import annotations

from focusflow.config import build_config
from focusflow.corpus.io import read_texts
from focusflow.pipeline import params_for, run_stage
from focusflow.pipeline.ood_stage import OOD_FILE, OodRecord, wanted
from focusflow.storage import ArtifactStore


def test_the_users_file_or_the_tasks_test_sentences_are_the_other_domain(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    news = tmp_path / "news.txt"
    news.write_text("Habari za leo ni njema.\n\nMvua imenyesha sana jana.\n", encoding="utf-8")
    cfg = build_config({"language": "sw", "evaluation": {"ood_text": str(news)}})
    assert wanted(cfg)
    texts = run_stage(store, "ood-text", params_for("ood-text", cfg))
    assert list(read_texts(store.fetch(texts) / OOD_FILE)) == ["Habari za leo ni njema.", "Mvua imenyesha sana jana."]
    task = tmp_path / "topics"
    task.mkdir()
    for split, rows in (("train", ["a b c\tone"] * 4), ("dev", ["d e f\tone"]), ("test", ["g h i\ttwo", "j k l\tone"])):
        (task / f"{split}.tsv").write_text("text\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
    tasked = build_config({"language": "sw", "evaluation": {"tasks": [f"cls:{task}"]}})
    from_tasks = run_stage(store, "ood-text", params_for("ood-text", tasked))
    assert list(read_texts(store.fetch(from_tasks) / OOD_FILE)) == ["g h i", "j k l"]
    assert OodRecord.of(texts).for_choice and not OodRecord.of(from_tasks).for_choice, "a task's test text never chooses"
    assert not wanted(build_config({"language": "sw"}))
