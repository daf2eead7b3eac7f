"""A LAPT budget in minutes: timed once on the machine that trains, stored as a step count, keyed; the run then
trains exactly those steps, and its checkpoints at the given minutes stay in the store."""

from __future__ import annotations

import json

import pytest

from focusflow.config import AlignSpec, LaptSpec, load_config
from focusflow.errors import InputError
from focusflow.pipeline import params_for, run_stage, stage_key
from focusflow.pipeline.lapt_stage import CHECKPOINT_STAGE, stored_checkpoints
from focusflow.storage import ArtifactStore
from focusflow.training import lapt_budget
from focusflow.training.lapt_budget import steps_for_minutes
from tests.training.test_distill import _scrambled
from tests.training.test_lapt_run import small_spec


def _store_with_split(lapt_corpus, tmp_path, monkeypatch) -> tuple[ArtifactStore, dict]:
    """A store holding the tiny corpus's split; step times faked to 1.5 s so a plan is known exactly."""
    monkeypatch.setenv("FOCUSFLOW_WORK_DIR", str(tmp_path / "work"))
    monkeypatch.setattr(lapt_budget, "time_steps", lambda run, first, count, clock, bar=None: 1.5)
    store = ArtifactStore(tmp_path / "store")
    split_dir = tmp_path / "split"
    split_dir.mkdir()
    for file in lapt_corpus:
        (split_dir / file.name).write_bytes(file.read_bytes())
    return store, {"split": store.put_dir("split", "s" * 64, split_dir)}


@pytest.fixture()
def staged(tiny_dirs, lapt_corpus, tmp_path, monkeypatch):
    """A store holding a tiny MLM model and a split."""
    store, inputs = _store_with_split(lapt_corpus, tmp_path, monkeypatch)
    return store, {"model": store.put_dir("init", "m" * 64, tiny_dirs("xlmr")), **inputs}


def _params(**lapt) -> dict:
    spec = small_spec(steps=0, **lapt)
    return {"lapt": spec.model_dump(mode="json"), "_lineage": {}}


def test_minutes_become_the_steps_that_fit_at_the_timed_speed():
    assert steps_for_minutes(1.0, 1.5) == 40 and steps_for_minutes(0.5, 1.5) == 20
    assert steps_for_minutes(0.001, 30.0) == 1, "a budget trains at least one step"


def test_a_minutes_run_trains_the_planned_steps_and_keeps_its_minute_checkpoints(staged):
    store, inputs = staged
    params = _params(minutes=0.4, checkpoint_minutes=[0.1, 0.2], keep_last=1, checkpoint_every=1000)
    budget = run_stage(store, "lapt-budget", {"lapt": params["lapt"]}, inputs)
    plan = json.loads(store.read_bytes(budget, "budget.json"))
    assert plan == {"minutes": 0.4, "steps": 16, "checkpoint_minutes": [0.1, 0.2], "checkpoint_steps": [4, 8],
                    "clock": "cpu"}
    assert budget.metadata["seconds_per_step"] == 1.5 and budget.metadata["machine"]["cpu"]
    lapt = run_stage(store, "lapt", params, {**inputs, "budget": budget})
    assert lapt.metadata["steps"] == 16 and lapt.metadata["budget"]["minutes"] == 0.4
    kept = stored_checkpoints(store, lapt.key)
    assert [(a.metadata["step"], a.metadata.get("lapt_minutes")) for a in kept] == [(4, 0.1), (8, 0.2), (16, None)]
    assert all(a.metadata["metrics"].get("heldout_loss") is not None for a in kept), "each point of the curve evaluated"
    assert run_stage(store, "lapt", params, {**inputs, "budget": budget}).uri == lapt.uri, "a rerun is a cache hit"


def test_the_plan_is_keyed_by_the_machine_that_timed_it(staged, monkeypatch):
    store, inputs = staged
    params = {"lapt": _params(minutes=0.2)["lapt"]}
    here = stage_key(store, "lapt-budget", params, inputs)
    assert stage_key(store, "lapt-budget", params, inputs) == here
    real = lapt_budget.machine_fingerprint()
    monkeypatch.setattr(lapt_budget, "machine_fingerprint", lambda: {**real, "cpu": "another processor"})
    assert stage_key(store, "lapt-budget", params, inputs) != here


def test_a_minutes_budget_without_its_plan_is_refused(staged):
    store, inputs = staged
    with pytest.raises(InputError, match="lapt-budget"):
        run_stage(store, "lapt", _params(minutes=0.2), inputs)
    assert store.list("lapt") == [] and store.list(CHECKPOINT_STAGE) == []


def test_a_plan_made_for_other_minutes_is_refused(staged):
    store, inputs = staged
    budget = run_stage(store, "lapt-budget", {"lapt": _params(minutes=0.2)["lapt"]}, inputs)
    with pytest.raises(InputError, match="plans 0.2 minutes"):
        run_stage(store, "lapt", _params(minutes=0.3), {**inputs, "budget": budget})


def test_the_real_probe_times_the_runs_own_steps(tiny_dirs, lapt_corpus, tmp_path):
    plan = lapt_budget.plan_lapt_budget(tiny_dirs("xlmr"), *lapt_corpus, small_spec(steps=0, minutes=0.05,
                                        embeddings_only_fraction=0.5, budget_probe_steps=2), work_dir=tmp_path)
    assert set(plan.stage_seconds_per_step) == {"embeddings", "full"} and plan.seconds_per_step > 0
    assert plan.steps == steps_for_minutes(0.05, plan.seconds_per_step) and plan.clock == "cpu"
    assert list(tmp_path.iterdir()) == [], "the probe leaves nothing behind"


def test_a_two_stage_runs_checkpoints_are_at_its_minutes_not_at_the_average_steps():
    """Embeddings-only steps at 1 s, full steps at 3 s, half of 900 steps each: the checkpoint labelled 10 minutes
    sat at step 300, 5 minutes into the training, and the 20-minute one 15 minutes in."""
    from focusflow.training.lapt_budget import step_at_minutes

    assert step_at_minutes(10, 450, 1.0, 3.0) == 450 + 50 and step_at_minutes(20, 450, 1.0, 3.0) == 450 + 250
    assert step_at_minutes(5, 450, 1.0, 3.0) == 300, "inside the first stage"
    assert step_at_minutes(10, 0, 0.0, 2.0) == steps_for_minutes(10, 2.0), "one stage: as before"


def test_minutes_settings_are_checked():
    with pytest.raises(ValueError, match="only one LAPT budget"):
        LaptSpec(steps=10, minutes=5)
    with pytest.raises(ValueError, match="checkpoint_minutes needs"):
        LaptSpec(steps=10, checkpoint_minutes=[1])
    with pytest.raises(ValueError, match=r"must lie in \(0, minutes"):
        LaptSpec(minutes=5, checkpoint_minutes=[6])
    assert LaptSpec(minutes=5).has_budget and not LaptSpec().has_budget


def test_the_flow_plans_a_minutes_budget_before_each_lapt(tmp_path):
    from focusflow.pipeline.graph import specialize
    from tests.pipeline.recording import RecordingStage
    from tests.pipeline.test_graph import STAGES, _config

    cfg = _config(tmp_path, "replace", lapt={"minutes": 5, "checkpoint_minutes": [1, 2]},
                  orchestration={"lapt_methods": ["focus", "mean"]})
    calls: list = []
    specialize(cfg, cfg.store, {name: RecordingStage(name, calls) for name in (*STAGES, "lapt-budget")})
    assert [inputs["budget"] for stage, _, inputs in calls if stage == "lapt"] == ["lapt-budget:focus",
                                                                                  "lapt-budget:mean"]
    assert [params for stage, params, _ in calls if stage == "lapt-budget"][0] == params_for("lapt-budget", cfg)
    assert params_for("lapt", cfg)["lapt"]["minutes"] == 5
    assert load_config(language="sw", lapt={"steps": 0}).lapt.minutes is None


def test_a_plan_turns_minutes_into_its_steps_and_keeps_the_users_checkpoints():
    from focusflow.training.records import BudgetPlan

    spec = LaptSpec(minutes=5, checkpoint_minutes=[1], checkpoint_steps=[3])
    planned = lapt_budget.planned_spec(spec, BudgetPlan(minutes=5, steps=40, checkpoint_minutes=[1],
                                                        checkpoint_steps=[8]))
    assert (planned.minutes, planned.steps, planned.checkpoint_steps, planned.needs_plan) == (None, 40, [3, 8], False)
    with pytest.raises(ValueError, match=r"checkpoint_steps \[50\] lie past the 40 steps"):
        lapt_budget.planned_spec(spec.model_copy(update={"checkpoint_steps": [50]}),
                                 BudgetPlan(minutes=5, steps=40, checkpoint_minutes=[1]))


def test_a_truncated_plan_is_a_damaged_artifact_not_a_zero_budget(staged):
    from focusflow.storage import CorruptArtifactError

    store, inputs = staged
    budget = store.put_bytes("lapt-budget", "b" * 16, "budget.json", b'{"checkpoint_minutes": []}')
    with pytest.raises(CorruptArtifactError, match="budget.json is not a step plan.*minutes"):
        run_stage(store, "lapt", _params(minutes=0.2), {**inputs, "budget": budget})


def test_a_cpu_minute_counts_the_processs_own_cpu_time_not_another_jobs_time_slices():
    """A probe on a busy machine planned 104 steps for 20 minutes, which then trained in 9.8: time the process's CPU
    time (over its threads) on a CPU, so that waiting for the processor does not count as a step's cost."""
    import time

    from focusflow.training.machine import StepClock

    clock = StepClock("cpu")
    assert clock.kind == "cpu" and StepClock("meta").kind == "wall"
    began = clock.now()
    time.sleep(0.3)  # as if another job held the cores
    assert clock.now() - began < 0.05
    began, spin = clock.now(), time.process_time()
    while time.process_time() - spin < 0.2:  # 0.2 s of this process's work, however long the machine takes for it
        pass
    assert clock.now() - began == pytest.approx(0.2 / clock.threads, rel=0.25)


def test_timing_a_budget_shows_its_steps(tiny_dirs, lapt_corpus, tmp_path, monkeypatch, caplog):
    """A distillation's timed steps took a minute or more with nothing said: with progress on, they are counted on a
    bar (off a terminal, its lines; here one a step)."""
    import logging

    from focusflow import logs

    monkeypatch.setattr(logs, "PROGRESS_LINE_S", 0.0)
    caplog.set_level(logging.INFO, logger=logs.progress_lines.name)
    lapt_budget.plan_lapt_budget(tiny_dirs("xlmr"), *lapt_corpus, small_spec(steps=0, minutes=0.05,
                                 embeddings_only_fraction=0.5, budget_probe_steps=2), work_dir=tmp_path, progress=True)
    said = [r.getMessage().split(",")[0] for r in caplog.records if r.name == logs.progress_lines.name]
    assert said == [f"LAPT budget: timing the first steps: {step}/6" for step in range(1, 6)]


# ---------------------------------------------------------------- the align refinement's minutes (init.refine.minutes)
@pytest.fixture()
def staged_align(tiny_dirs, lapt_corpus, tmp_path, monkeypatch):
    """A store holding a tiny decoder as both the model to refine and its source, and a split."""
    store, inputs = _store_with_split(lapt_corpus, tmp_path, monkeypatch)
    return store, {"model": store.put_dir("init", "m" * 64, tiny_dirs("llama")),
                   "source": store.put_dir("source", "o" * 64, tiny_dirs("llama")), **inputs}


def _align_params(**changes) -> dict:
    spec = AlignSpec(**{"batch_tokens": 256, "eval_every": 4, "checkpoint_every": 4, "precision": "fp32", **changes})
    return {"align": spec.model_dump(mode="json")}


def test_an_align_minutes_budget_is_planned_once_and_refines_exactly_its_steps(staged_align):
    store, inputs = staged_align
    params = _align_params(minutes=0.15)
    budget = run_stage(store, "align-budget", params, inputs)
    assert json.loads(store.read_bytes(budget, "budget.json")) == {"minutes": 0.15, "steps": 6,
                                                                    "checkpoint_minutes": [], "checkpoint_steps": [],
                                                                    "clock": "cpu"}
    aligned = run_stage(store, "align", params, {**inputs, "budget": budget})
    assert aligned.metadata["align"]["steps"] == 6
    assert run_stage(store, "align", params, {**inputs, "budget": budget}).uri == aligned.uri, "a rerun is a cache hit"
    with pytest.raises(InputError, match="align-budget"):
        run_stage(store, "align", params, inputs)
    with pytest.raises(InputError, match="plans 0.15 minutes"):
        run_stage(store, "align", _align_params(minutes=0.3), {**inputs, "budget": budget})


def test_the_real_align_probe_times_its_own_steps_and_the_library_call_plans_by_itself(tiny_dirs, lapt_corpus,
                                                                                        tmp_path):
    from focusflow.training.align import align_embeddings, plan_align_budget

    spec = AlignSpec(minutes=0.02, budget_probe_steps=2, batch_tokens=256, precision="fp32", keep_best=False)
    plan = plan_align_budget(tiny_dirs("llama"), tiny_dirs("llama"), lapt_corpus[0], spec,
                                         work_dir=tmp_path)
    assert plan.seconds_per_step > 0 and plan.clock == "cpu"
    assert plan.steps == steps_for_minutes(0.02, plan.seconds_per_step)
    assert list(tmp_path.iterdir()) == [], "the probe leaves nothing behind"
    summary = align_embeddings(tiny_dirs("llama"), tiny_dirs("llama"), lapt_corpus[0], tmp_path / "run",
                               spec.model_copy(update={"minutes": 0.005}))
    assert summary["steps"] == summary["budget"]["steps"] >= 1
    with pytest.raises(ValueError, match="give the align budget once"):
        AlignSpec(minutes=1, tokens=4096)


def test_the_flow_plans_an_align_minutes_budget_before_each_refinement(tmp_path):
    from focusflow.pipeline.graph import specialize
    from tests.pipeline.recording import RecordingStage
    from tests.pipeline.test_graph import STAGES, _config

    steps_only = _config(tmp_path, "replace")
    cfg = steps_only.model_copy(update={"init": steps_only.init.model_copy(update={
        "methods": ["focus", "focus+align", "fvt+align"], "refine": AlignSpec(minutes=2)})})
    calls: list = []
    specialize(cfg, cfg.store, {name: RecordingStage(name, calls) for name in (*STAGES, "align-budget")})
    planned = [inputs for stage, _, inputs in calls if stage == "align-budget"]
    assert planned == [{"model": "init:focus", "source": "source:", "split": "split:"},
                       {"model": "init:fvt", "source": "source:", "split": "split:"}]
    assert [inputs["budget"] for stage, _, inputs in calls if stage == "align"] == ["align-budget:focus+align",
                                                                                   "align-budget:fvt+align"]
    calls = []  # a step budget plans nothing
    specialize(steps_only, steps_only.store, {name: RecordingStage(name, calls) for name in (*STAGES, "align-budget")})
    assert not any(stage == "align-budget" for stage, _, _ in calls)


def test_a_distillation_is_timed_reading_stored_states_as_it_will_train(tiny_dirs, lapt_corpus, tmp_path, monkeypatch):
    """Its teacher's states are stored for the steps the plan fixes, so the plan cannot wait for them: the probe stores
    those of its own texts first and times steps that read them (a step that runs the teacher too costs more)."""
    import focusflow.training.distill as distill

    def no_teacher(*args, **kwargs):
        raise AssertionError("the timed steps ran the teacher model")

    monkeypatch.setattr(distill, "load_source", no_teacher)
    source = tiny_dirs("xlmr")
    plan = lapt_budget.plan_lapt_budget(_scrambled(source, tmp_path / "student"), *lapt_corpus,
                                        small_spec(steps=0, minutes=0.05, objective="distill", budget_probe_steps=2),
                                        work_dir=tmp_path, source_dir=source)
    assert plan.steps >= 1 and plan.seconds_per_step > 0


def test_a_distillations_plan_is_keyed_as_timed_on_stored_states():
    """Plans timed while the teacher ran in every step had the same inputs and settings: never found again."""
    from focusflow.pipeline.lapt_stage import budget_key_params

    assert budget_key_params({"lapt": {"objective": "distill"}})["teacher"] == "stored states"
    assert budget_key_params({"lapt": {"objective": "mlm+distill"}})["teacher"] == "stored states"
    assert "teacher" not in budget_key_params({"lapt": {"objective": "mlm"}}), "an MLM plan keeps its key"
