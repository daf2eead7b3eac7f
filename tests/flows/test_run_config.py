"""``focusflow run`` reads and layers its configuration once; the flow receives it whole, and the flows'
loader and the commands' loader agree on the same layers."""

from __future__ import annotations

from typing import Any

from typer.testing import CliRunner

from focusflow import config as config_module
from focusflow.cli import app
from focusflow.cli.stage_io import run_config
from focusflow.flows import specialize as specialize_module
from focusflow.flows.common import load_run_config


class _Flow:
    """Stands in for the specialize flow: records the arguments it is called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.configs: list[Any] = []

    def with_options(self, **options: Any) -> _Flow:
        return self

    def __call__(self, *args: Any) -> dict[str, Any]:
        self.calls.append(args)
        self.configs.append(load_run_config(*args))  # what the real flow does first
        return {"report": "file:///nowhere/report/k"}


def test_run_reads_its_configuration_once_and_the_flow_gets_it_whole(tmp_path, monkeypatch):
    path = tmp_path / "run.yaml"
    path.write_text("lapt: {steps: 6}\ninit: {methods: [focus, random]}\n", encoding="utf-8")
    reads: list[object] = []
    read = config_module._read_config_file
    monkeypatch.setattr(config_module, "_read_config_file", lambda p: reads.append(p) or read(p))
    flow = _Flow()
    monkeypatch.setattr(specialize_module, "specialize_language", flow)
    monkeypatch.setattr("focusflow.cli.flows._print_result", lambda store, result: None)
    validations: list[int] = []
    validate = config_module.PipelineConfig.model_validate

    def counted(*args: Any, **kwargs: Any) -> Any:
        validations.append(1)
        return validate(*args, **kwargs)

    monkeypatch.setattr(config_module.PipelineConfig, "model_validate", counted)
    store = (tmp_path / "store").as_uri()
    result = CliRunner().invoke(app, ["run", "-l", "sw", "--config", str(path), "--set", "lapt.lr=0.001",
                                      "--store", store])
    assert result.exit_code == 0, result.output
    assert len(reads) == 1 and len(flow.calls) == 1
    assert validations == [1]  # the command's: the flow took the validated configuration back
    expected = run_config(path, ["lapt.lr=0.001"], {"store": store}, language="sw")
    assert load_run_config(*flow.calls[0]) == expected == flow.configs[0]  # a loader outside the run rebuilds it
    assert (expected.lapt.steps, expected.lapt.lr, expected.init.methods) == (6, 0.001, ["focus", "random"])


def test_the_flows_and_the_commands_layer_alike(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("language: ha\ntokenizer: {vocab_size: 500}\n", encoding="utf-8")
    assert load_run_config("sw", {"tokenizer": {"algorithm": "bpe"}}, str(path), ["split.seed=3"]) == run_config(
        path, ["split.seed=3"], {"tokenizer": {"algorithm": "bpe", "vocab_size": None}}, language="sw")


def test_compare_methods_adds_its_methods_to_the_init_section_it_is_given(monkeypatch, tmp_path):
    from focusflow.flows import compare as compare_module

    seen = []
    monkeypatch.setattr(compare_module, "compare", lambda cfg, store_uri, tasks: seen.append(cfg) or "report-uri")
    monkeypatch.setattr(compare_module, "tasks_for", lambda store_uri: {})
    compare_module.compare_methods.fn("sw", ["random"], {"init": {"mode": "extend"}, "store": str(tmp_path / "unused")})
    assert (seen[0].init.methods, seen[0].init.mode) == (["random"], "extend")
