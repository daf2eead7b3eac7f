"""``docs/ARCHITECTURE.md`` "Where things go", checked against the tables it names: a new task kind is one
``KINDS`` entry (with its adapter), a new offline GGUF source is one ``GGUF_SOURCES`` row, a new initialization
method is one ``INIT_METHODS`` row (``tests/test_methods.py``), a new stage is one registry row
(``tests/pipeline/test_registry.py``). Every place that needs the addition reads it from its table."""

from __future__ import annotations

from pathlib import Path

import pytest

from focusflow.evaluation.downstream.kinds import KINDS, require_task_head, task_kind
from focusflow.evaluation.downstream.sources import parse_task
from focusflow.models.model_type import source_model_type
from focusflow.tokenizer.gguf_wheels import GGUF_SOURCES, is_gguf_source
from focusflow.tokenizer.source_ids import source_licence

ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "ARCHITECTURE.md"


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_task_kind_is_one_entry_that_every_reader_of_tasks_knows(kind: str, tmp_path: Path):
    entry = task_kind(kind)
    folder = tmp_path / "data"
    folder.mkdir()
    assert parse_task(f"{kind}:{folder}").kind == kind  # task strings (run configuration, CLI, plan check)
    assert {"lr", "epochs", "max_length"} <= set(entry.settings("any"))  # its fine-tuning defaults
    assert callable(entry.make_adapter) and callable(entry.read_split) and callable(entry.label_set)
    require_task_head("xlm-roberta", kind, "a source")  # its task model exists for the encoder family


@pytest.mark.parametrize("spec", list(GGUF_SOURCES))
def test_an_offline_gguf_source_is_one_row_that_resolving_and_the_plan_read(spec: str):
    row = GGUF_SOURCES[spec]
    assert is_gguf_source(spec)  # resolve_source and load_tokenizer take it as a GGUF source
    assert source_model_type(spec) == row.model_type  # the plan check knows its family without converting it
    assert row.install and row.file_name.endswith(".gguf")
    licence = source_licence(spec)  # the card's licence and the copy its weights come from, from the row
    assert (licence.hub_id, licence.licence) == (row.hub_id, row.licence_id) and row.file_name in licence.copy


def test_the_architecture_document_names_the_tables_it_promises():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    for table in ("evaluation/downstream/kinds.py", "gguf_wheels.py", "focusflow/methods.py", "from_config",
                  "embeddings/builders.py", "tokenizer/source_ids.py", "tests/embeddings/test_builders.py"):
        assert table in text
