"""End-to-end LAPT runs on tiny models: loss drops, outputs, two-stage freezing, LoRA, kill -9 + resume."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

from focusflow.config import LaptSpec
from focusflow.training import latest_checkpoint, run_lapt
from focusflow.training.checkpoint import load_tensors, load_trainer_state
from focusflow.training.lapt import LaptRecipe
from focusflow.training.loop import TrainingRun

ROOT = Path(__file__).resolve().parents[2]


def small_spec(**changes) -> LaptSpec:
    """The model's own LM loss, small (``objective: auto`` would distill an encoder from a source these runs lack)."""
    base = dict(steps=16, batch_size=16, micro_batch_size=8, seq_len=64, lr=2e-3, warmup_fraction=0.1,
                eval_every=8, checkpoint_every=8, log_every=4, eval_sequences=32, objective="mlm")
    return LaptSpec(**{**base, **changes})


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(folder / "model.safetensors")


@pytest.mark.parametrize("family", ["xlmr", "gpt2", "llama"])
def test_tiny_model_heldout_loss_drops_and_outputs_are_complete(tiny_dirs, lapt_corpus, tmp_path, family):
    calls = []
    out = tmp_path / "run"
    summary = run_lapt(tiny_dirs(family), *lapt_corpus, small_spec(keep_last=1), out,
                       on_checkpoint=lambda folder, step, metrics: calls.append((folder, step, dict(metrics))))
    assert summary["lm_loss"] == ("mlm" if family == "xlmr" else "clm") and summary["objective"] == "mlm"
    assert summary["steps"] == 16 and summary["tokens"] == 16 * 16 * 64
    assert not summary["compile"]["compiled"] and "too short" in summary["compile"]["reason"], "compile: auto"
    assert summary["final_heldout_loss"] < summary["initial_heldout_loss"] - 0.3, summary
    assert [step for _, step in [(c[0], c[1]) for c in calls]] == [8, 16]
    assert calls[-1][0] == out / "checkpoints" / "step-00000016" and "train_loss" in calls[-1][2]
    assert sorted(p.name for p in (out / "checkpoints").glob("step-*")) == ["step-00000016"]  # keep_last=1
    assert (out / "checkpoints" / "latest").read_text().strip() == "step-00000016"
    auto = AutoModelForMaskedLM if family == "xlmr" else AutoModelForCausalLM
    final = auto.from_pretrained(out / "final")
    initial = auto.from_pretrained(tiny_dirs(family))
    assert not torch.equal(final.get_input_embeddings().weight, initial.get_input_embeddings().weight)
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert rows[0]["step"] == "0" and float(rows[0]["heldout_loss"]) == pytest.approx(summary["initial_heldout_loss"])
    assert float(rows[-1]["heldout_loss"]) == pytest.approx(summary["final_heldout_loss"])
    assert (out / "loss_curve.png").stat().st_size > 5000
    assert json.loads((out / "summary.json").read_text())["steps"] == 16
    # on a CPU, MFU against this machine's calibrated ceiling for the run's precision
    assert summary["tokens_per_s"] > 0 and 0 < summary["mfu"] < 1.5
    assert summary["peak_source"].startswith("calibrated: CPU") and summary["peak_tflops"] > 0


def test_two_stage_trains_exactly_the_embeddings_and_head_first(tiny_dirs, lapt_corpus, tmp_path):
    spec = small_spec(steps=4, embeddings_only_fraction=0.5)
    run = TrainingRun(LaptRecipe(tiny_dirs("xlmr"), *lapt_corpus, spec, tmp_path / "run", False), resume=True)
    batch = next(run.step_batches(0))

    def grads_after_backward(step: int) -> set[str]:
        run._set_stage(step)
        run.optimization.optimizer.zero_grad(set_to_none=True)
        for micro in batch:
            loss, _ = run.loss_model(micro.input_ids, micro.labels)
            loss.backward()
        return {name for name, p in run.hf_model.named_parameters() if p.grad is not None}

    stage_one = grads_after_backward(0)
    assert stage_one == {"lm_head.bias", "lm_head.dense.weight", "lm_head.dense.bias", "lm_head.layer_norm.weight",
                         "lm_head.layer_norm.bias", "lm_head.decoder.weight"}  # decoder is tied to the word embeddings
    assert run.hf_model.get_input_embeddings().weight.grad is not None
    assert run.hf_model.roberta.embeddings.position_embeddings.weight.grad is None
    assert run.recipe.stage1_steps == 2
    everything = {name for name, _ in run.hf_model.named_parameters()}
    assert grads_after_backward(2) == everything


def test_embeddings_only_run_leaves_the_transformer_untouched(tiny_dirs, lapt_corpus, tmp_path):
    run_lapt(tiny_dirs("bert"), *lapt_corpus, small_spec(steps=4, embeddings_only_fraction=1.0), tmp_path / "run")
    before, after = _weights(tiny_dirs("bert")), _weights(tmp_path / "run" / "final")
    changed = {name for name in before if not torch.equal(before[name], after[name])}
    assert "bert.embeddings.word_embeddings.weight" in changed and "cls.predictions.transform.dense.weight" in changed
    assert not any(".encoder." in name or "position_embeddings" in name for name in changed), changed


def test_lora_trains_adapters_and_saves_a_merged_plain_model(tiny_dirs, lapt_corpus, tmp_path):
    spec = small_spec(steps=4, lora=True, lora_rank=4, lr=1e-2, checkpoint_every=2)
    summary = run_lapt(tiny_dirs("xlmr"), *lapt_corpus, spec, tmp_path / "run")
    assert summary["trainable_parameters"] < summary["parameters"]
    before, after = _weights(tiny_dirs("xlmr")), _weights(tmp_path / "run" / "final")
    assert set(before) == set(after)  # merged: no LoRA keys, loads as the plain architecture
    query = "roberta.encoder.layer.0.attention.self.query.weight"
    key = "roberta.encoder.layer.0.attention.self.key.weight"
    assert not torch.equal(before[query], after[query]) and torch.equal(before[key], after[key])
    AutoModelForMaskedLM.from_pretrained(tmp_path / "run" / "final")
    assert (latest_checkpoint(tmp_path / "run") / "trainer" / "trainable.safetensors").is_file()


def test_resume_refuses_a_run_folder_with_different_settings(tiny_dirs, lapt_corpus, tmp_path):
    run_lapt(tiny_dirs("xlmr"), *lapt_corpus, small_spec(steps=2, checkpoint_every=2), tmp_path / "run")
    with pytest.raises(ValueError, match="different settings.*lr"):
        run_lapt(tiny_dirs("xlmr"), *lapt_corpus, small_spec(steps=4, lr=1e-3), tmp_path / "run")


def test_a_checkpoint_of_an_earlier_version_resumes_its_settings_added_since_at_their_defaults(tiny_dirs, lapt_corpus,
                                                                                                tmp_path):
    """A checkpoint written before ``lapt.objective`` existed records no objective: it is the default, not a change
    (an upgrade mid-run resumed nothing: "holds a run with different settings (objective, ...)")."""
    import json

    from focusflow.training import checkpoint as ckpt

    run = tmp_path / "run"
    run_lapt(tiny_dirs("xlmr"), *lapt_corpus, small_spec(steps=2, checkpoint_every=2), run)
    folder = ckpt.latest_checkpoint(run)
    state = json.loads((folder / ckpt.STATE_FILE).read_text())
    for added in ("objective", "distill_mlm_weight", "distill_sentence_weight"):
        del state["spec"][added]
    del state["work_seconds"]  # counted since 29 Nov 2026: an older run's wall seconds stand in for its work
    state["seconds"] = 1000.0
    (folder / ckpt.STATE_FILE).write_text(json.dumps(state))
    ckpt.write_manifest(folder)
    summary = run_lapt(tiny_dirs("xlmr"), *lapt_corpus, small_spec(steps=4, checkpoint_every=2), run)
    assert summary["resumed_from"] == str(folder) and summary["steps"] == 4
    assert 1000.0 < summary["work_seconds"] < 1000.0 + 60
    with pytest.raises(ValueError, match="different settings.*objective"):
        run_lapt(tiny_dirs("xlmr"), *lapt_corpus, small_spec(steps=6, objective="distill"), run,
                 source_dir=tiny_dirs("xlmr"))


def test_bad_inputs_fail_with_clear_messages(tiny_dirs, lapt_corpus, tmp_path):
    with pytest.raises(ValueError, match="multiple of world_size"):
        run_lapt(tiny_dirs("xlmr"), *lapt_corpus, small_spec(micro_batch_size=5), tmp_path / "a")
    with pytest.raises(ValueError, match="exceeds the model's 128 positions"):
        run_lapt(tiny_dirs("xlmr"), *lapt_corpus, small_spec(seq_len=256), tmp_path / "b")
    with pytest.raises(ValueError, match="budget is zero"):
        run_lapt(tiny_dirs("xlmr"), *lapt_corpus, small_spec(steps=0), tmp_path / "c")


def test_auto_takes_the_objective_of_the_models_family(tiny_dirs, lapt_corpus, tmp_path):
    """A library call's ``objective: auto``: a decoder trains its causal LM; an encoder distills, so without its
    source it is refused, saying what to give."""
    summary = run_lapt(tiny_dirs("gpt2"), *lapt_corpus, small_spec(steps=2, objective="auto"), tmp_path / "decoder")
    assert summary["lm_loss"] == "clm" and summary["objective"] == "mlm" and summary["steps"] == 2
    with pytest.raises(ValueError, match=r"objective=distill \(auto: an encoder distills\).*--source.*objective=mlm"):
        run_lapt(tiny_dirs("xlmr"), *lapt_corpus, small_spec(steps=2, objective="auto"), tmp_path / "encoder")


def _child(model: Path, corpus: tuple[Path, Path], out: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen([sys.executable, str(ROOT / "tests" / "training" / "lapt_child.py"), str(model),
                             *map(str, corpus), str(out)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_kill_9_between_checkpoints_then_resume_matches_an_uninterrupted_run(tiny_dirs, lapt_corpus, tmp_path):
    """The child process is SIGKILLed after its step-8 checkpoint; resuming in this process must reproduce the
    uninterrupted run (also in this process, one torch thread like the child) to float tolerance."""
    from tests.training.lapt_child import SPEC

    model = tiny_dirs("xlmr")  # dropout 0.1 is active: the RNG state must be restored too
    killed = _child(model, lapt_corpus, tmp_path / "killed")
    pointer = tmp_path / "killed" / "checkpoints" / "latest"
    deadline = time.time() + 240
    while time.time() < deadline and killed.poll() is None:
        if pointer.is_file() and pointer.read_text().strip() == "step-00000008":
            break
        time.sleep(0.005)
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait(timeout=30)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.read().decode()[-2000:]
    assert not (tmp_path / "killed" / "final").exists(), "the run finished before it could be killed"
    interrupted_at = json.loads((latest_checkpoint(tmp_path / "killed") / "trainer_state.json").read_text())["step"]
    assert interrupted_at < SPEC.total_steps

    summary = run_lapt(model, *lapt_corpus, SPEC, tmp_path / "killed", resume=True)
    assert summary["resumed_from"].endswith(f"step-{interrupted_at:08d}")
    reference_summary = run_lapt(model, *lapt_corpus, SPEC, tmp_path / "reference", resume=True)
    expected, got = _weights(tmp_path / "reference" / "final"), _weights(tmp_path / "killed" / "final")
    assert set(expected) == set(got)
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=1e-6, msg=name)
    initial = _weights(model)
    assert not torch.equal(initial["lm_head.dense.weight"], got["lm_head.dense.weight"])
    assert summary["final_heldout_loss"] == pytest.approx(reference_summary["final_heldout_loss"], abs=1e-6)
    # the resumed run's metric history equals the uninterrupted one (rows after the checkpoint are redone once)
    steps = [r["step"] for r in csv.DictReader((tmp_path / "killed" / "metrics.csv").open())]
    assert steps == [r["step"] for r in csv.DictReader((tmp_path / "reference" / "metrics.csv").open())]


def test_a_damaged_last_checkpoint_is_skipped_and_the_run_resumes_from_the_previous_good_one(tiny_dirs, lapt_corpus,
                                                                                            tmp_path, caplog):
    """Issue 20: a corrupted model.safetensors in the last checkpoint was loaded silently and the damaged run
    committed. Now the run warns, naming it, resumes from the step before and reaches the uninterrupted weights."""
    import shutil

    spec = small_spec(keep_last=2)
    reference = run_lapt(tiny_dirs("gpt2"), *lapt_corpus, spec, tmp_path / "reference")
    damaged = tmp_path / "damaged"
    shutil.copytree(tmp_path / "reference" / "checkpoints", damaged / "checkpoints")
    weights = damaged / "checkpoints" / "step-00000016" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-len(data) // 3] ^= 0xFF  # inside the tensor data: safetensors would load it without complaint
    weights.write_bytes(bytes(data))
    with caplog.at_level("WARNING", logger="focusflow.training.checkpoint"):
        summary = run_lapt(tiny_dirs("gpt2"), *lapt_corpus, spec, damaged)
    assert "step-00000016" in caplog.text and "failed verification" in caplog.text
    assert summary["resumed_from"].endswith("step-00000008") and summary["steps"] == 16
    expected, got = _weights(tmp_path / "reference" / "final"), _weights(damaged / "final")
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=1e-6, msg=name)
    assert summary["final_heldout_loss"] == pytest.approx(reference["final_heldout_loss"], abs=1e-6)


def test_cli_trains_from_a_split_folder(tiny_dirs, lapt_corpus, tmp_path):
    from typer.testing import CliRunner

    from focusflow.cli import app

    split = lapt_corpus[0].parent
    runner = CliRunner()
    arguments = ["lapt", "--model", str(tiny_dirs("bert")), "--corpus", str(split), "--out", str(tmp_path / "run"),
                 "--steps", "2", "--no-progress", "--set", "lapt.batch_size=8", "--set", "lapt.micro_batch_size=4",
                 "--set", "lapt.seq_len=32"]
    untaught = runner.invoke(app, arguments)  # an encoder's lapt.objective=auto distills: its teacher is asked for
    assert untaught.exit_code == 2 and "--source SOURCE" in untaught.output and "lapt.objective=mlm" in untaught.output
    result = runner.invoke(app, [*arguments, "--set", "lapt.objective=mlm"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output[result.output.index("{"):])
    assert summary["steps"] == 2 and summary["tokens"] == 2 * 8 * 32
    assert (tmp_path / "run" / "model.safetensors").is_file() and (tmp_path / "run" / "metrics.csv").is_file()
    assert summary["artifact"].startswith("file://") and "/lapt/" in summary["artifact"]
    missing = runner.invoke(app, ["lapt", "--model", str(tiny_dirs("bert")), "--corpus", str(lapt_corpus[0]),
                                  "--out", str(tmp_path / "x"), "--steps", "2"])
    assert missing.exit_code == 2 and "--heldout" in missing.output


def test_cli_distills_from_the_teacher_states_it_stores_once(tiny_dirs, lapt_corpus, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from focusflow.cli import app
    from focusflow.storage import ArtifactStore

    monkeypatch.setenv("FOCUSFLOW_STORE", str(tmp_path / "store"))
    source = tiny_dirs("xlmr")
    arguments = ["lapt", "--model", str(source), "--corpus", str(lapt_corpus[0].parent), "--source", str(source),
                 "--steps", "2", "--no-progress", "--set", "lapt.objective=distill", "--set", "lapt.batch_size=8",
                 "--set", "lapt.micro_batch_size=8", "--set", "lapt.seq_len=32"]
    result = CliRunner().invoke(app, [*arguments, "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output[result.output.index("{"):])
    assert summary["teacher"] == "stored states" and len(ArtifactStore(tmp_path / "store").list("teacher")) == 1
    again = CliRunner().invoke(app, [*arguments, "--set", "lapt.lr=2e-4", "--out", str(tmp_path / "again")])
    assert again.exit_code == 0 and len(ArtifactStore(tmp_path / "store").list("teacher")) == 1, "read once"


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_paths_train_and_checkpoint_the_scaler(tiny_dirs, lapt_corpus, tmp_path, precision):
    """bf16 autocast (the CUDA default) and fp16 + GradScaler (GPUs without bf16), exercised on CPU."""
    summary = run_lapt(tiny_dirs("xlmr"), *lapt_corpus, small_spec(steps=6, precision=precision, checkpoint_every=3),
                       tmp_path / "run")
    assert summary["precision"] == ("bfloat16" if precision == "bf16" else "float16")
    assert summary["final_heldout_loss"] < summary["initial_heldout_loss"]
    scaler = latest_checkpoint(tmp_path / "run") / "trainer" / "scaler.pt"
    assert scaler.is_file() == (precision == "fp16")
    # the master weights stay float32
    assert load_file(tmp_path / "run" / "final" / "model.safetensors")["lm_head.dense.weight"].dtype == torch.float32


def test_auto_precision_trains_in_bf16_on_a_cpu_that_has_it_and_keeps_float32_state(monkeypatch, tiny_dirs,
                                                                                      lapt_corpus, tmp_path):
    """``auto`` follows the CPU's capability query; master weights and AdamW moments stay float32."""
    monkeypatch.setattr("focusflow.precision.cpu_has_native_bf16", lambda: True)
    summary = run_lapt(tiny_dirs("bert"), *lapt_corpus, small_spec(steps=4, checkpoint_every=4), tmp_path / "run")
    assert summary["precision"] == "bfloat16"
    assert all(t.dtype == torch.float32 for t in _weights(tmp_path / "run" / "final").values())
    optimizer = load_tensors(latest_checkpoint(tmp_path / "run"), "optimizer")
    moments = [t for state in optimizer["state"].values() for t in (state["exp_avg"], state["exp_avg_sq"])]
    assert moments and all(t.dtype == torch.float32 for t in moments)
    monkeypatch.setattr("focusflow.precision.cpu_has_native_bf16", lambda: False)
    assert run_lapt(tiny_dirs("bert"), *lapt_corpus, small_spec(steps=2), tmp_path / "fp32")["precision"] == "float32"


def test_a_stop_checkpoints_the_step_it_reached_and_the_resume_equals_an_uninterrupted_run(tiny_dirs, lapt_corpus,
                                                                                           tmp_path, monkeypatch):
    """SIGTERM between logged rows (step 6; rows every 4, checkpoints every 8): a checkpoint at step 6, the
    StopRequested line naming it, and a resume whose weights and metric history equal the uninterrupted run's."""
    import focusflow.training.loop as loop
    from focusflow import stopping
    from focusflow.stopping import StopRequested

    model = tiny_dirs("xlmr")
    spec = small_spec(log_every=4, checkpoint_every=8)
    asked: list[int] = []
    real_stop_requested = loop.stop_requested

    def stop_at_step_six() -> bool:  # asked once after every step
        asked.append(1)
        return len(asked) == 6

    monkeypatch.setattr(loop, "stop_requested", stop_at_step_six)
    stopping.reset()
    try:
        with pytest.raises(StopRequested, match="kept LAPT's checkpoint at step 6 of 16"):
            run_lapt(model, *lapt_corpus, spec, tmp_path / "stopped", resume=True)
    finally:
        stopping.reset()
    assert latest_checkpoint(tmp_path / "stopped").name == "step-00000006"
    assert not (tmp_path / "stopped" / "final").exists()
    monkeypatch.setattr(loop, "stop_requested", real_stop_requested)

    at_stop = load_trainer_state(latest_checkpoint(tmp_path / "stopped"))["work_seconds"]
    resumed = run_lapt(model, *lapt_corpus, spec, tmp_path / "stopped", resume=True)
    assert resumed["resumed_from"].endswith("step-00000006")
    assert resumed["work_seconds"] > at_stop > 0  # the CPU-seconds of work count both sessions
    run_lapt(model, *lapt_corpus, spec, tmp_path / "reference", resume=True)
    expected, got = _weights(tmp_path / "reference" / "final"), _weights(tmp_path / "stopped" / "final")
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=1e-6, msg=name)

    def rows(folder: Path) -> list[dict[str, str]]:
        return [{k: v for k, v in row.items() if k in ("step", "train_loss", "heldout_loss", "lr")}
                for row in csv.DictReader((folder / "metrics.csv").open())]

    stopped_rows, reference_rows = rows(tmp_path / "stopped"), rows(tmp_path / "reference")
    assert [r["step"] for r in stopped_rows] == [r["step"] for r in reference_rows]
    for mine, theirs in zip(stopped_rows, reference_rows, strict=True):
        for column in ("train_loss", "heldout_loss", "lr"):
            if theirs[column]:
                assert float(mine[column]) == pytest.approx(float(theirs[column]), abs=1e-6), (column, mine, theirs)


@pytest.mark.slow
def test_compile_auto_measures_the_run_and_a_compiled_run_learns_what_an_eager_one_does(
        tiny_dirs, lapt_corpus, tmp_path, monkeypatch):
    """Inductor for real (a C++ compile): a run that compiles ends where the eager run ends, to float tolerance."""
    from focusflow.training import compile_probe

    monkeypatch.setenv(compile_probe.PROBE_SECONDS_ENV, "0")  # a tiny run is never long enough to pay
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    spec = small_spec(steps=6, eval_every=6, checkpoint_every=6, seq_len=32, dropout=0.0)
    eager = run_lapt(tiny_dirs("xlmr"), *lapt_corpus, spec.model_copy(update={"compile": False}), tmp_path / "e")
    assert eager["compile"] == {"compiled": False, "reason": "compile: false", "probe": None}
    compiled = run_lapt(tiny_dirs("xlmr"), *lapt_corpus, spec.model_copy(update={"compile": True}), tmp_path / "c")
    assert compiled["compile"]["compiled"]
    assert compiled["final_heldout_loss"] == pytest.approx(eager["final_heldout_loss"], rel=1e-3)
    auto = run_lapt(tiny_dirs("xlmr"), *lapt_corpus, spec, tmp_path / "a")
    probe = auto["compile"]["probe"]
    assert probe["error"] is None and probe["compiled_s"] > 0 and probe["difference"] <= 1e-3, auto["compile"]
    assert auto["final_heldout_loss"] == pytest.approx(eager["final_heldout_loss"], rel=1e-3)
    cached = list((tmp_path / "cache" / "focusflow").glob("compile-probes.json"))
    assert cached, "the measurement is kept for the next run of this shape on this machine"
