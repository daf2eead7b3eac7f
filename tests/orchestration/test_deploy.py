"""Language registry validation, deployment plans, prefect.yaml, and deploying to a real local Prefect server."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from focusflow.config import ConfigError, PipelineConfig
from focusflow.orchestration.apply import apply_plans, deploy, ensure_work_pool
from focusflow.orchestration.events import checkpoint_event_resource, emit_checkpoint_event
from focusflow.orchestration.plans import plan_deployments, render_prefect_yaml
from focusflow.orchestration.registry import WorkPoolSpec, load_registry, parse_registry
from focusflow.orchestration.server import server_command

REPO = Path(__file__).resolve().parents[2]
REGISTRY = REPO / "deployments" / "languages.yaml"
STUB_FLOWS = {"specialize": "tests.orchestration.deploy_stub_flows:specialize_language",
              "evaluate": "tests.orchestration.deploy_stub_flows:evaluate_checkpoint"}


def registry_data(*languages: dict, pools: str = "t", **extra) -> dict:
    return {"flows": dict(STUB_FLOWS),
            "work_pools": {"cpu": {"name": f"{pools}-cpu"}, "gpu": {"name": f"{pools}-gpu"}},
            "languages": list(languages) or [{"code": "sw"}], **extra}


def error_of(data: dict) -> str:
    with pytest.raises(ConfigError) as info:
        parse_registry(data)
    return str(info.value)


# ------------------------------------------------------------------------------ validation
def test_bad_language_code_is_named_with_its_field():
    message = error_of(registry_data({"code": "sw"}, {"code": "swahili"}))
    assert "languages.1.code" in message and "'swahili'" in message and "ISO 639" in message
    assert "languages.0.code" in error_of(registry_data({"code": "s1"}))


def test_unknown_method_is_named_with_its_field():
    message = error_of(registry_data({"code": "sw", "methods": ["focus", "magic"]}))
    assert "languages.0.methods.1" in message and "'magic'" in message and "'focus'" in message


@pytest.mark.parametrize(("data", "field"), [
    (registry_data({"code": "sw"}, {"code": "SW"}), "registered twice"),
    (registry_data({"code": "sw", "eval_suites": ["ner masakhaner"]}), "languages.0.eval_suites"),
    (registry_data({"code": "sw", "reevaluate_cron": "every day"}), "languages.0.reevaluate_cron"),
    (registry_data({"code": "sw"}, reevaluate={"cron": "0 4 * *"}), "reevaluate.cron"),
    (registry_data({"code": "sw", "tokenizer_size": 10}), "languages[0] (sw)"),      # PipelineConfig: ge=100
    (registry_data({"code": "sw", "lapt_steps": -5}), "lapt.steps"),
    (registry_data({"code": "sw", "config": {"lapt": {"stepz": 1}}}), "lapt.stepz"),
    ({**registry_data(), "langauges": []}, "langauges"),
    (registry_data(), None),
])
def test_registry_errors_name_the_field(data, field):
    if field is None:
        assert parse_registry(data).languages[0].code == "sw"
        return
    assert field in error_of(data)


def test_missing_or_malformed_registry_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_registry(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("languages: [code: sw", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_registry(tmp_path / "bad.yaml")
    (tmp_path / "twice.yaml").write_text("languages:\n  - code: sw\n    lapt_steps: 4\n    lapt_steps: 9\n",
                                         encoding="utf-8")
    with pytest.raises(ConfigError, match=r"twice.yaml is not valid YAML.*'languages\[0\].lapt_steps' is given twice "
                                          r"\(lines 3 and 4\)"):
        load_registry(tmp_path / "twice.yaml")


def test_run_config_merges_defaults_config_then_shorthand():
    registry = parse_registry(registry_data(
        {"code": "ha", "lapt_steps": 9, "tokenizer_size": 12000, "methods": ["fvt"],
         "corpus": {"source": "local", "paths": ["/data/ha.txt"], "max_bytes": 1000},
         "config": {"lapt": {"steps": 7, "lr": 1e-4}, "source_model": "some/model"}},
        defaults={"lapt": {"steps": 5, "seq_len": 64}, "source_model": "default/model"}))
    config = registry.run_config("ha")
    assert isinstance(config, PipelineConfig)
    assert (config.language, config.lapt.steps, config.lapt.lr, config.lapt.seq_len) == ("ha", 9, 1e-4, 64)
    assert (config.source_model, config.tokenizer.vocab_size, config.init.methods) == ("some/model", 12000, ["fvt"])
    assert (config.corpus.source, config.corpus.paths, config.corpus.max_bytes) == ("local", ["/data/ha.txt"], 1000)


# ----------------------------------------------------------------------------------- plans
def test_repository_registry_plans_two_deployments_per_language():
    registry = load_registry(REGISTRY)
    plans = plan_deployments(registry)
    codes = [entry.code for entry in registry.languages if entry.enabled]
    assert len(codes) >= 2 and len(plans) == 2 * len(codes)
    for code in codes:
        specialize, evaluate = [p for p in plans if p.language == code]
        assert (specialize.flow, evaluate.flow) == ("specialize", "evaluate")
        assert specialize.entrypoint == "focusflow.flows.specialize:specialize_language"
        assert evaluate.entrypoint == "focusflow.flows.evaluate:evaluate_checkpoint"
        # the parameter validates as the language's run config
        assert PipelineConfig.model_validate(specialize.parameters["config"]) == registry.run_config(code)
        assert specialize.parameters["language"] == code
        assert {"focusflow", f"language:{code}", "stage:specialize"} <= set(specialize.tags)
        assert evaluate.parameters == {"checkpoint_uri": "latest", "language": code,
                                       "suites": registry.run_config(code).evaluation.tasks}
        (trigger,) = evaluate.triggers
        assert trigger.expect == ["focusflow.checkpoint.updated"]
        assert trigger.match == {"prefect.resource.id": "focusflow.checkpoint.*", "focusflow.language": code}
        assert trigger.parameters["checkpoint_uri"] == "{{ event.resource['focusflow.checkpoint.uri'] }}"


def test_trigger_matches_the_event_lapt_emits_and_reads_its_uri():
    """The trigger is planned from the same event definition that the LAPT task emits."""
    from fnmatch import fnmatch

    registry = parse_registry(registry_data({"code": "sw"}))
    (trigger,) = next(p for p in plan_deployments(registry) if p.flow == "evaluate").triggers
    uri = "s3://user:secret@bucket/store/lapt-checkpoint/abc"
    resource = checkpoint_event_resource(uri, "sw")
    assert all(fnmatch(resource[label], pattern) for label, pattern in trigger.match.items())
    assert not fnmatch(checkpoint_event_resource(uri, "ha")["focusflow.language"], trigger.match["focusflow.language"])
    label = trigger.parameters["checkpoint_uri"].split("'")[1]
    assert resource[label] == "s3://bucket/store/lapt-checkpoint/abc"  # credentials never travel in events


def test_pools_follow_the_budget_and_can_be_overridden():
    registry = parse_registry(registry_data(
        {"code": "sw", "lapt_steps": 100}, {"code": "ha", "lapt_steps": 0},
        {"code": "yo", "lapt_steps": 100, "specialize_pool": "cpu", "evaluate_pool": "cpu"},
        {"code": "ig", "enabled": False}))
    pools = {(p.flow, p.language): p.work_pool for p in plan_deployments(registry)}
    assert pools == {("specialize", "sw"): "t-gpu", ("evaluate", "sw"): "t-gpu",
                     ("specialize", "ha"): "t-cpu", ("evaluate", "ha"): "t-gpu",
                     ("specialize", "yo"): "t-cpu", ("evaluate", "yo"): "t-cpu"}
    only = plan_deployments(registry, cpu_pool="other-cpu", languages=["ha"])
    assert [(p.language, p.work_pool) for p in only] == [("ha", "other-cpu"), ("ha", "t-gpu")]
    with pytest.raises(ConfigError, match="not in the registry"):
        plan_deployments(registry, languages=["zu"])


def test_schedules_inherit_override_or_disable():
    registry = parse_registry(registry_data(
        {"code": "sw"}, {"code": "ha", "reevaluate_cron": "30 2 * * 1"}, {"code": "yo", "reevaluate_cron": None},
        reevaluate={"cron": "0 5 * * *", "timezone": "Africa/Nairobi"}))
    crons = {p.language: (p.cron, p.timezone) for p in plan_deployments(registry) if p.flow == "evaluate"}
    assert crons == {"sw": ("0 5 * * *", "Africa/Nairobi"), "ha": ("30 2 * * 1", "Africa/Nairobi"),
                     "yo": (None, "Africa/Nairobi")}


def test_committed_prefect_yaml_is_generated_from_the_registry():
    registry = load_registry(REGISTRY)
    expected = render_prefect_yaml(registry, plan_deployments(registry))
    committed = (REPO / "deployments" / "prefect.yaml").read_text(encoding="utf-8")
    assert committed == expected, "regenerate: focusflow deploy --dry-run --write-prefect-yaml deployments/prefect.yaml"
    document = yaml.safe_load(committed)
    assert len(document["deployments"]) == 2 * len(registry.languages)
    triggers = [t for d in document["deployments"] for t in d.get("triggers", [])]
    assert len(triggers) == len(registry.languages)
    assert all(t["expect"] == ["focusflow.checkpoint.updated"] for t in triggers)


def test_cli_dry_run_needs_no_server(tmp_path, monkeypatch):
    from focusflow.cli import app

    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")  # nothing listens there
    registry = tmp_path / "languages.yaml"
    registry.write_text(yaml.safe_dump(registry_data({"code": "sw"}, {"code": "ha", "lapt_steps": 5})))
    out = tmp_path / "prefect.yaml"
    result = CliRunner().invoke(app, ["deploy", "--registry", str(registry), "--dry-run", "--json",
                                      "--work-pool-gpu", "big-gpus", "--write-prefect-yaml", str(out)])
    assert result.exit_code == 0, result.output
    plans = json.loads(result.stdout)
    assert [(p["flow"], p["language"], p["work_pool"]) for p in plans] == [
        ("specialize", "sw", "t-cpu"), ("evaluate", "sw", "big-gpus"),
        ("specialize", "ha", "big-gpus"), ("evaluate", "ha", "big-gpus")]
    assert [d["work_pool"]["name"] for d in yaml.safe_load(out.read_text())["deployments"]] == [
        p["work_pool"] for p in plans]


def test_cli_deploys_the_checkout_registry_from_any_directory(tmp_path, monkeypatch):
    from focusflow.cli import app

    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")  # nothing listens there
    monkeypatch.chdir(tmp_path)  # no deployments/ here
    result = CliRunner().invoke(app, ["deploy", "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    registry = load_registry(REGISTRY)
    assert [(p["flow"], p["language"]) for p in json.loads(result.stdout)] == [
        (p.flow, p.language) for p in plan_deployments(registry)]


def test_deploy_reads_the_checkout_registry_and_its_pool_templates_from_any_directory(tmp_path, monkeypatch):
    import focusflow.orchestration.apply as apply_module

    applied = {}
    monkeypatch.setattr(apply_module, "apply_plans", lambda registry, plans, **options: applied.update(
        registry=registry, plans=plans, **options))
    monkeypatch.chdir(tmp_path)
    deploy()
    assert applied["registry"] == load_registry(REGISTRY)
    assert applied["base_dir"] == REPO / "deployments"  # base_job_template files are relative to the registry


def test_a_registry_path_given_by_the_user_is_relative_to_the_current_directory(tmp_path, monkeypatch):
    from focusflow.cli import app

    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(registry_data({"code": "yo"})))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["deploy", "--registry", "mine.yaml", "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    assert [(p["flow"], p["language"]) for p in json.loads(result.stdout)] == [("specialize", "yo"), ("evaluate", "yo")]


def test_without_a_checkout_registry_the_current_directory_is_read_then_an_error_names_the_option(
        tmp_path, monkeypatch, capsys):
    """A wheel installed apart from the checkout (the image: /opt/venv, the registry in /app/deployments)."""
    import focusflow.orchestration.registry as registry_module
    from tests.cli_runner import error_lines, run_cli

    monkeypatch.setattr(registry_module, "PROJECT_ROOT", tmp_path / "site-packages")
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(monkeypatch, capsys, "deploy", "--dry-run")
    assert code == 2 and "Traceback" not in err
    [line] = error_lines(err)
    assert "no language registry" in line and "--registry FILE" in line
    (tmp_path / "deployments").mkdir()
    (tmp_path / "deployments" / "languages.yaml").write_text(yaml.safe_dump(registry_data({"code": "yo"})))
    code, out, err = run_cli(monkeypatch, capsys, "deploy", "--dry-run", "--json")
    assert code == 0, err
    assert {p["language"] for p in json.loads(out)} == {"yo"}


def test_cli_reports_registry_errors_in_one_line(tmp_path, monkeypatch, capsys):
    from focusflow.cli import main

    registry = tmp_path / "languages.yaml"
    registry.write_text(yaml.safe_dump(registry_data({"code": "sw", "methods": ["magic"]})))
    monkeypatch.setattr(sys, "argv", ["focusflow", "deploy", "--dry-run", "--registry", str(registry)])
    with pytest.raises(SystemExit) as info:
        main()
    assert info.value.code == 2
    assert "languages.0.methods.0" in capsys.readouterr().err


def test_server_command_is_offline_and_uses_the_given_home(tmp_path):
    argv, env = server_command("127.0.0.1", 4321, home=tmp_path)
    assert argv[1:5] == ["-m", "prefect", "server", "start"]
    assert argv[argv.index("--port") + 1] == "4321" and "--analytics-off" in argv and "--ui" in argv
    assert env["DO_NOT_TRACK"] == "1" and env["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"
    assert env["PREFECT_HOME"] == str(tmp_path)


# ------------------------------------------------------------------- against a real server
def _read_back(deployment_id: str):
    from prefect import get_client

    with get_client(sync_client=True) as client:
        deployment = client.read_deployment(uuid.UUID(deployment_id))
        automations = client.read_resource_related_automations(f"prefect.deployment.{deployment_id}")
        return deployment, automations


def _runs_of(deployment_id: str) -> list:
    from prefect import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:  # limit and sort explicit: the API rejects nulls
        return client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[uuid.UUID(deployment_id)])),
            limit=50, sort=FlowRunSort.EXPECTED_START_TIME_ASC)


def _emit_checkpoint(uri: str, language: str) -> None:
    """Through the emitter the LAPT task uses, then wait until the event has left this process."""
    from prefect.events.worker import EventsWorker

    assert emit_checkpoint_event(uri, language, step=10, metrics={"loss": 2.5}) is not None
    EventsWorker.drain_all()


def _wait_for_runs(deployment_id: str, count: int, timeout_s: float = 60) -> list:
    deadline = time.monotonic() + timeout_s
    while True:
        runs = _runs_of(deployment_id)
        if len(runs) >= count or time.monotonic() > deadline:
            return runs
        time.sleep(0.5)


def test_deploy_creates_pools_deployments_schedules_and_triggers(prefect_server, tmp_path):
    from prefect import get_client

    pools = f"deploy-{uuid.uuid4().hex[:6]}"
    registry_file = tmp_path / "languages.yaml"
    data = registry_data({"code": "sw", "lapt_steps": 50, "eval_suites": ["ner:masakhaner2:swa"]},
                         {"code": "ha", "lapt_steps": 0}, pools=pools, reevaluate={"cron": "15 3 * * *"})
    registry_file.write_text(yaml.safe_dump(data))
    result = deploy(registry_file)

    assert sorted(result.pools_created) == [f"{pools}-cpu", f"{pools}-gpu"]
    assert set(result.deployments) == {"stub-specialize-language/sw", "stub-evaluate-checkpoint/sw",
                                       "stub-specialize-language/ha", "stub-evaluate-checkpoint/ha"}
    with get_client(sync_client=True) as client:
        assert client.read_work_pool(f"{pools}-cpu").type == "process"
    deployment, automations = _read_back(result.deployments["stub-specialize-language/sw"])
    assert deployment.work_pool_name == f"{pools}-gpu" and deployment.schedules == [] and automations == []
    assert deployment.entrypoint == STUB_FLOWS["specialize"]
    assert deployment.parameters["config"]["lapt"]["steps"] == 50
    assert {"focusflow", "language:sw", "stage:specialize"} <= set(deployment.tags)
    assert _read_back(result.deployments["stub-specialize-language/ha"])[0].work_pool_name == f"{pools}-cpu"

    deployment, automations = _read_back(result.deployments["stub-evaluate-checkpoint/sw"])
    assert deployment.parameters == {"checkpoint_uri": "latest", "language": "sw", "suites": ["ner:masakhaner2:swa"]}
    (schedule,) = deployment.schedules
    assert (schedule.schedule.cron, schedule.schedule.timezone, schedule.active) == ("15 3 * * *", "UTC", True)
    (automation,) = automations
    assert automation.enabled and automation.trigger.expect == {"focusflow.checkpoint.updated"}
    assert automation.trigger.match.root == {"prefect.resource.id": "focusflow.checkpoint.*", "focusflow.language": "sw"}
    (action,) = automation.actions
    assert str(action.deployment_id) == result.deployments["stub-evaluate-checkpoint/sw"]
    assert action.parameters["checkpoint_uri"] == "{{ event.resource['focusflow.checkpoint.uri'] }}"

    # Adding a language and deploying again: its deployments appear, the others are updated in place
    # (same ids, still exactly one automation each); --prune removes a language taken out.
    data["languages"].append({"code": "yo", "lapt_steps": 0, "methods": ["focus", "mean"]})
    registry_file.write_text(yaml.safe_dump(data))
    again = deploy(registry_file)
    assert again.pools_created == []
    assert {k: v for k, v in again.deployments.items() if k.endswith(("/sw", "/ha"))} == result.deployments
    assert _read_back(again.deployments["stub-specialize-language/yo"])[0].parameters["config"]["init"] == {
        "methods": ["focus", "mean"]}
    assert len(_read_back(again.deployments["stub-evaluate-checkpoint/sw"])[1]) == 1

    data["languages"] = [entry for entry in data["languages"] if entry["code"] != "ha"]
    registry_file.write_text(yaml.safe_dump(data))
    pruned = deploy(registry_file, prune=True)
    assert "stub-specialize-language/ha" in pruned.pruned and "stub-evaluate-checkpoint/ha" in pruned.pruned
    assert not any(name.endswith("/sw") or name.endswith("/yo") for name in pruned.pruned)


def test_checkpoint_event_starts_evaluation_of_that_checkpoint(prefect_server):
    registry = parse_registry(registry_data({"code": "sw"}, {"code": "ha"}, pools=f"ev-{uuid.uuid4().hex[:6]}"))
    result = apply_plans(registry, plan_deployments(registry))
    sw_eval = result.deployments["stub-evaluate-checkpoint/sw"]
    ha_eval = result.deployments["stub-evaluate-checkpoint/ha"]
    before_sw, before_ha = len(_runs_of(sw_eval)), len(_runs_of(ha_eval))

    uri = f"file:///store/lapt-checkpoint/{uuid.uuid4().hex}"
    _emit_checkpoint(uri, "sw")
    runs = _wait_for_runs(sw_eval, before_sw + 1)
    matching = [r for r in runs if r.parameters.get("checkpoint_uri") == uri]
    assert len(matching) == 1, f"no evaluate run for {uri}: {[r.parameters for r in runs]}"
    assert matching[0].parameters == {"checkpoint_uri": uri, "language": "sw", "suites": []}
    assert len(_runs_of(ha_eval)) == before_ha  # the Hausa automation ignores a Swahili checkpoint


@pytest.mark.slow
def test_prefect_deploy_with_the_generated_prefect_yaml(prefect_server, tmp_path):
    """`prefect deploy --all` on a generated prefect.yaml creates the same deployments and triggers."""
    from prefect import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterTags

    pools = f"py-{uuid.uuid4().hex[:6]}"
    registry = parse_registry(registry_data({"code": "zu", "lapt_steps": 3}, pools=pools))
    prefect_yaml = tmp_path / "prefect.yaml"
    prefect_yaml.write_text(render_prefect_yaml(registry, plan_deployments(registry)))
    for pool in (registry.work_pools.cpu, registry.work_pools.gpu):
        ensure_work_pool(pool)
    env = {**os.environ, "PREFECT_API_URL": prefect_server.api_url, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--all",
                           "--prefect-file", str(prefect_yaml)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with get_client(sync_client=True) as client:
        found = client.read_deployments(deployment_filter=DeploymentFilter(
            tags=DeploymentFilterTags(all_=["language:zu"])), limit=10)
    by_flow = {d.entrypoint: d for d in found}
    evaluate = by_flow[STUB_FLOWS["evaluate"]]
    assert evaluate.work_pool_name == f"{pools}-gpu" and evaluate.parameters["checkpoint_uri"] == "latest"
    assert evaluate.schedules[0].schedule.cron == registry.reevaluate.cron
    (automation,) = _read_back(str(evaluate.id))[1]
    assert automation.actions[0].parameters["checkpoint_uri"] == "{{ event.resource['focusflow.checkpoint.uri'] }}"
    assert by_flow[STUB_FLOWS["specialize"]].parameters["config"]["lapt"] == {"steps": 3}


@pytest.mark.slow
@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("focusflow.flows.evaluate",
                                                                      "focusflow.flows.specialize")),
                    reason="focusflow.flows.evaluate / .specialize (the lead's flows) are not there yet")
def test_checkpoint_event_runs_the_served_evaluate_checkpoint(prefect_server, tmp_path):
    """The real flow, served: the event's run is created with the checkpoint and picked up by the runner."""
    registry_file = tmp_path / "languages.yaml"
    registry_file.write_text(yaml.safe_dump({"languages": [{"code": "ny", "eval_suites": ["intrinsic"]}],
                                             "reevaluate": {"cron": None}}))
    env = {**os.environ, "PREFECT_API_URL": prefect_server.api_url, "PYTHONPATH": str(REPO)}
    log = open(tmp_path / "serve.log", "wb")
    serving = subprocess.Popen([str(Path(sys.executable).with_name("focusflow")), "deploy", "--serve", "--registry",
                                str(registry_file), "--language", "ny"],
                               cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        from prefect import get_client

        deadline, deployment_id = time.monotonic() + 180, None
        while deployment_id is None and time.monotonic() < deadline:
            assert serving.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            with get_client(sync_client=True) as client:
                try:
                    deployment_id = str(client.read_deployment_by_name("evaluate-checkpoint/ny").id)
                except Exception:
                    time.sleep(1)
        assert deployment_id, (tmp_path / "serve.log").read_text()[-3000:]
        time.sleep(2)
        uri = f"file:///nowhere/lapt-checkpoint/{uuid.uuid4().hex}"
        _emit_checkpoint(uri, "ny")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            runs = [r for r in _runs_of(deployment_id) if r.parameters.get("checkpoint_uri") == uri]
            if runs and runs[0].state_type.value not in ("SCHEDULED", "PENDING"):
                break
            time.sleep(1)
        assert runs, (tmp_path / "serve.log").read_text()[-3000:]
        assert runs[0].state_type.value not in ("SCHEDULED", "PENDING"), "the served runner never picked the run up"
    finally:
        os.killpg(serving.pid, 15)
        serving.wait(timeout=30)
        log.close()


def test_kubernetes_gpu_pool_template_is_accepted(prefect_server):
    """deployments/work-pools/kubernetes-gpu.json: every placeholder declared; the API accepts the pool."""
    import re as _re

    from prefect import get_client

    template_file = REPO / "deployments" / "work-pools" / "kubernetes-gpu.json"
    template = json.loads(template_file.read_text())
    placeholders = set(_re.findall(r"\{\{\s*(\w+)\s*\}\}", json.dumps(template["job_configuration"])))
    assert {"gpu_count", "image", "command"} <= placeholders <= set(template["variables"]["properties"])
    name = f"k8s-gpu-{uuid.uuid4().hex[:6]}"
    spec = WorkPoolSpec(name=name, type="kubernetes", base_job_template="work-pools/kubernetes-gpu.json")
    assert ensure_work_pool(spec, base_dir=REPO / "deployments") is True
    assert ensure_work_pool(spec, base_dir=REPO / "deployments") is False  # idempotent
    with get_client(sync_client=True) as client:
        pool = client.read_work_pool(name)
    assert pool.type == "kubernetes"
    container = pool.base_job_template["job_configuration"]["job_manifest"]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "{{ gpu_count }}"
