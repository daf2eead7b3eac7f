"""A downstream task spec as the Hub's model-index names it: built offline, never a question to the Hub, never a crash
on a placeholder nothing offline fills (SIB-200's ``{code}``, issue 47)."""

from __future__ import annotations

import pytest

from focusflow.evaluation.downstream import sources
from focusflow.publish.tasks import task_dataset


@pytest.fixture(autouse=True)
def _no_hub(monkeypatch):
    """A card is built offline: asking the Hub for SIB-200's configs fails the test."""
    def asked(info):
        raise AssertionError(f"the card asked the Hub for the configs of {info.repo}")

    monkeypatch.setattr(sources, "_hub_configs", asked)


def test_a_sib200_task_named_by_its_flores_code_names_the_dataset_and_that_config():
    dataset = task_dataset("cls:sib200:swh_Latn")
    assert (dataset.dataset_type, dataset.hub_id, dataset.dataset_config) == ("Davlan/sib200", "Davlan/sib200",
                                                                              "swh_Latn")
    assert (dataset.task_type, dataset.dataset_name) == ("text-classification", "sib200 (swh_Latn)")


def test_a_sib200_task_named_by_its_iso_code_takes_the_config_from_the_local_copy_the_run_read():
    assert task_dataset("cls:sib200:sw", folders=["swh_Latn"]).dataset_config == "swh_Latn"
    assert task_dataset("cls:sib-200:swa", folders=["swh_Latn"]).dataset_config == "swh_Latn"  # an alias, ISO 639-3


@pytest.mark.parametrize("folders", [(), ["sw"], ["hau_Latn"], ["ace_Arab", "ace_Latn"]],
                         ids=["read-from-the-hub", "iso-named-copy", "another-language", "no-copy-of-it"])
def test_a_sib200_config_nothing_offline_names_is_left_out_not_guessed(folders):
    dataset = task_dataset("cls:sib200:sw", folders=folders)
    assert dataset.hub_id == "Davlan/sib200" and dataset.dataset_config is None


def test_a_language_in_two_scripts_takes_neither_script():
    assert task_dataset("cls:sib200:ace", folders=["ace_Arab", "ace_Latn"]).dataset_config is None


def test_the_other_known_datasets_keep_their_iso_configs_and_a_folder_task_has_no_dataset_id():
    assert task_dataset("ner:masakhaner2:sw").dataset_config == "swa"
    assert task_dataset("nli:xnli:swa").dataset_config == "sw"
    assert task_dataset("qa:tydiqa:sw").dataset_config == "secondary_task"
    folder = task_dataset("ner:/home/alice/data/my-ner", language="sw")  # a public card holds no local path
    assert folder.hub_id is None and folder.dataset_name == "my-ner (local files)" and folder.dataset_type == "ner:my-ner"
