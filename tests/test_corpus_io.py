from focusflow.corpus.io import one_line, read_documents, read_texts, write_texts


def test_documents_with_newlines_survive_round_trip(tmp_path):
    docs = ["first line\nsecond line", "ünïcödé ✓", "tab\tinside"]
    assert write_texts(tmp_path / "c.jsonl", docs) == 3
    assert list(read_texts(tmp_path / "c.jsonl")) == docs
    assert list(read_texts(tmp_path / "c.jsonl", limit=1)) == docs[:1]
    assert one_line(docs[0]) == "first line second line"


def test_read_texts_reads_plain_text_and_names_the_line_of_bad_json(tmp_path):
    import gzip

    import pytest

    from focusflow.corpus.io import read_texts

    (tmp_path / "c.txt").write_text("Habari ya asubuhi\n\n  nzuri sana  \r\n", encoding="utf-8")
    assert list(read_texts(tmp_path / "c.txt")) == ["Habari ya asubuhi", "  nzuri sana  "]
    with gzip.open(tmp_path / "c.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write("moja\nmbili\n")
    assert list(read_texts(tmp_path / "c.txt.gz")) == ["moja", "mbili"]
    (tmp_path / "bad.jsonl").write_text('{"text": "a"}\nplain words\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: expected JSON Lines"):
        list(read_texts(tmp_path / "bad.jsonl"))


def test_read_documents_takes_jsonl_or_plain_text(tmp_path):
    write_texts(tmp_path / "docs.jsonl", ["first doc", "", "second\ndoc"])
    assert read_documents(tmp_path / "docs.jsonl") == ["first doc", "second\ndoc"]
    (tmp_path / "plain.txt").write_text("línea uno\n\n  línea dos  \n", encoding="utf-8")
    assert read_documents(tmp_path / "plain.txt") == ["línea uno", "línea dos"]
    assert read_documents(tmp_path / "plain.txt", limit=1) == ["línea uno"]
