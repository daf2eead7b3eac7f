import pytest

from focusflow.corpus.io import one_line, read_documents, read_texts, write_texts
from focusflow.errors import InputError


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


def test_text_check_counts_invalid_bytes_and_control_characters_exactly():
    from focusflow.corpus.io import TextCheck

    check = TextCheck("t.txt")
    assert check.decode("caf\ufffd ok\n".encode()) == "caf\ufffd ok\n"  # a real U+FFFD is text
    assert check.replaced_bytes == 0
    assert check.decode(b"caf\xe9 \xff\xfe ok\x00\n") == "caf\ufffd \ufffd\ufffd ok\x00\n"
    assert (check.replaced_bytes, check.control_chars, check.bytes) == (3, 1, 22)
    assert check.not_text_share == pytest.approx(4 / 22)


@pytest.mark.parametrize("content", [bytes(range(256)) * 20, ("Habari ya leo.\n" * 50).encode("utf-16")],
                         ids=["binary", "utf-16"])
def test_a_file_that_is_not_text_is_refused_naming_it_and_the_share(tmp_path, content):
    for name in ("corpus.txt", "corpus.jsonl", "notes.md"):
        (tmp_path / name).write_bytes(content)
        reader = read_documents if name == "notes.md" else read_texts
        with pytest.raises(InputError, match=rf"{name} is not UTF-8 text: \d+\.\d% of \d+ bytes read .* convert"):
            list(reader(tmp_path / name))


def test_a_few_bad_bytes_are_replaced_and_warned_about(tmp_path, caplog):
    """A UTF-8 file (its ’ written as UTF-8) with one stray byte: read, the byte replaced and counted."""
    file = tmp_path / "t.txt"
    file.write_bytes("Ng’ombe za asubuhi ndugu yangu mpendwa.\n".encode() * 30 + b"caf\xe9 nzuri sana leo kwetu.\n")
    with caplog.at_level("WARNING"):
        texts = list(read_texts(file))
    assert texts[-1] == "caf\ufffd nzuri sana leo kwetu." and len(texts) == 31
    assert "t.txt: 1 invalid UTF-8 bytes replaced" in caplog.text


def test_a_windows_1252_file_is_refused_however_few_its_bytes_beyond_ascii(tmp_path):
    """Its one ’ under the 1% share was replaced and then cleaned away: ``ng’ombe`` read as ``ngombe``, silently."""
    file = tmp_path / "cp1252.txt"
    file.write_bytes("Habari za asubuhi ndugu yangu mpendwa.\n".encode() * 300 + "Ng’ombe wa leo.\n".encode("cp1252"))
    with pytest.raises(InputError, match=r"cp1252.txt is not UTF-8 text: none of its 1 bytes beyond ASCII .* "
                                         r"Windows-1252 .* iconv -f CP1252 -t UTF-8"):
        list(read_texts(file))


def test_a_users_text_file_reads_as_the_corpus_stage_reads_it_bom_suffix_case_and_ndjson(tmp_path):
    bom_lines = tmp_path / "ood.jsonl"
    bom_lines.write_bytes(b'\xef\xbb\xbf{"text": "a b c"}\r\n{"text": "d e"}\r\n')
    assert list(read_texts(bom_lines)) == ["a b c", "d e"]
    (tmp_path / "OOD.TXT").write_bytes(b"\xef\xbb\xbfline one\n\n\nline two\n")
    assert list(read_texts(tmp_path / "OOD.TXT")) == ["line one", "line two"]
    assert list(read_texts(tmp_path / "OOD.TXT", limit=2)) == ["line one", "line two"], "limit counts documents"
    assert read_documents(tmp_path / "OOD.TXT") == ["line one", "line two"]
    (tmp_path / "x.ndjson").write_text('{"text": "n d"}\n', encoding="utf-8")
    (tmp_path / "x.text").write_text("plain\n", encoding="utf-8")
    assert list(read_texts(tmp_path / "x.ndjson")) == ["n d"] and list(read_texts(tmp_path / "x.text")) == ["plain"]
    assert read_documents(tmp_path / "x.ndjson") == ["n d"]


def test_a_users_compressed_text_file_is_read_whatever_its_compression_and_case(tmp_path):
    import gzip

    import zstandard

    (tmp_path / "OOD.TXT.GZ").write_bytes(gzip.compress("mstari mmoja\nmstari wa pili\n".encode()))
    (tmp_path / "x.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(b'{"text": "a b"}\n{"text": "c"}\n'))
    assert list(read_texts(tmp_path / "OOD.TXT.GZ")) == ["mstari mmoja", "mstari wa pili"]
    assert list(read_texts(tmp_path / "x.jsonl.zst")) == ["a b", "c"]


def test_a_utf8_file_whose_first_multibyte_character_comes_late_is_read(tmp_path, caplog):
    """The legacy-encoding judgement waits for the whole file: mostly-ASCII Swahili with a stray byte early and its
    curly quotes later is UTF-8 (refused at 64 KiB, its iconv hint would have garbled every ’)."""
    file = tmp_path / "late.txt"
    file.write_bytes(b"Habari za asubuhi ndugu yangu.\n" * 2500 + b"stray \x92 byte\n"
                     + "Ng’ombe – “leo” café\n".encode() * 100)
    with caplog.at_level("WARNING"):
        texts = list(read_texts(file))
    assert len(texts) == 2601 and texts[-1] == "Ng’ombe – “leo” café"
    assert "1 invalid UTF-8 bytes replaced" in caplog.text
