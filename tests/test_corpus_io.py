from focusflow.corpus.io import one_line, read_texts, write_texts


def test_documents_with_newlines_survive_round_trip(tmp_path):
    docs = ["first line\nsecond line", "ünïcödé ✓", "tab\tinside"]
    assert write_texts(tmp_path / "c.jsonl", docs) == 3
    assert list(read_texts(tmp_path / "c.jsonl")) == docs
    assert list(read_texts(tmp_path / "c.jsonl", limit=1)) == docs[:1]
    assert one_line(docs[0]) == "first line second line"
