"""The run as a value (issue 46): which models a run makes and what each is called, decided once from the
configuration; the graph, the product choice, publishing and ``focusflow plan`` read it."""

from __future__ import annotations

import pytest

from focusflow.config import build_config
from focusflow.errors import InputError
from focusflow.pipeline.run_plan import Branch, RunPlan


def test_the_default_run_makes_its_methods_its_candidates_and_their_distillations():
    plan = RunPlan.from_config(build_config({"language": "sw", "init": {"methods": ["focus", "fvt"]}}))
    assert plan.objective == "distill" and plan.teacher, "e5-small is an encoder: lapt.objective=auto distills"
    assert plan.trained == ("focus", "prune+extend")
    assert [b.name for b in plan.branches] == ["focus", "fvt", "prune", "prune+extend", "focus+distill",
                                               "prune+extend+distill"]
    assert plan.branch("prune+extend+distill") == Branch("prune+extend+distill", "prune+extend", candidate=True,
                                                         trained=True)
    assert plan.branch("fvt").stage == "init" and plan.branch("focus+distill").stage == "lapt"
    assert plan.branch("prune").stage == "init"
    refined = RunPlan.from_config(build_config({"language": "sw", "init": {"methods": ["focus+align"]}}))
    assert refined.branch("focus+align").stage == "align", "a refined method is the align stage's model"
    assert plan.shippable() == ["focus+distill", "prune+extend+distill", "prune", "prune+extend"]
    assert plan.shippable(trained=False) == ["focus", "fvt", "prune", "prune+extend"]


def test_a_name_the_run_does_not_make_is_refused_naming_those_it_makes():
    plan = RunPlan.from_config(build_config({"language": "sw", "init": {"methods": ["focus"], "candidates": []},
                                             "lapt": {"steps": 0}}))
    assert plan.objective is None and not plan.teacher and plan.trained == ()
    with pytest.raises(InputError, match="no model 'focus\\+lapt'; it makes focus"):
        plan.branch("focus+lapt")


def test_a_decoder_trains_its_causal_lm_without_a_teacher_and_names_it_so():
    plan = RunPlan.from_config(build_config({"language": "sw", "source_model": "gemma3:270m",
                                             "init": {"methods": ["focus+align"]}, "lapt": {"steps": 5},
                                             "orchestration": {"lapt_methods": ["focus+align", "focus+align"]}}))
    assert plan.objective == "mlm" and not plan.teacher
    assert plan.trained == ("focus+align",), "a model named twice is trained once"
    assert plan.branch("focus+align+lapt").start == "focus+align"
