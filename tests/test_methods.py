"""The one table of embedding-initialization methods drives the config, the core's list and the CLI."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import get_args

import pytest
from typer.testing import CliRunner

from focusflow.cli import app
from focusflow.config import ConfigError, InitMethod, PipelineMethod, load_config
from focusflow.methods import (
    FLOW_METHOD_NAMES,
    INIT_METHODS,
    METHOD_NAMES,
    PIPELINE_METHOD_NAMES,
    REFINEMENTS,
    SHARE_GROUPS,
    Fate,
    InitMethodSpec,
    MethodInput,
    check_flow_method,
    split_method,
)

runner = CliRunner()


def _help(*command: str) -> str:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "400", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return re.sub(r"[\s│]+", " ", result.output)  # rich wraps and boxes long help


def test_config_choices_and_core_list_are_the_table():
    assert get_args(InitMethod) == tuple(INIT_METHODS) == METHOD_NAMES
    flow_bases = {name for name, spec in INIT_METHODS.items() if spec.flow_can_run}
    assert set(FLOW_METHOD_NAMES) == flow_bases | {f"{name}+{refinement}" for name in flow_bases
                                                    for refinement in REFINEMENTS}
    assert "wechsel" in METHOD_NAMES and "wechsel" not in FLOW_METHOD_NAMES and "wechsel+align" not in FLOW_METHOD_NAMES
    assert get_args(PipelineMethod) == PIPELINE_METHOD_NAMES and "focus+align" in PIPELINE_METHOD_NAMES


def test_refined_method_names_split_into_base_and_refinements():
    assert split_method("focus+align") == ("focus", ("align",)) and split_method("fvt") == ("fvt", ())
    with pytest.raises(ValueError, match="unknown refinement 'polish'"):
        split_method("focus+polish")
    with pytest.raises(ValueError, match="'wechsel\\+align' cannot run in the pipeline flow"):
        check_flow_method("wechsel+align")


def test_core_methods_are_the_table():
    from focusflow.embeddings import METHODS

    assert tuple(METHODS) == METHOD_NAMES


def test_validating_a_config_does_not_import_torch():
    code = ("import sys; from focusflow.config import load_config; load_config(language='sw'); "
            "assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("field", ["init.methods", "orchestration.lapt_methods"])
def test_config_refuses_a_method_the_flow_cannot_feed(field):
    with pytest.raises(ConfigError) as error:
        load_config(overrides=[f"{field}=[focus,wechsel]"], language="sw")
    message = str(error.value)
    assert f"{field}.1" in message and "'wechsel' cannot run in the pipeline flow" in message
    assert "aligned" in message and "focusflow init" in message  # why, and where it does run


def test_config_accepts_every_method_the_flow_can_feed():
    names = ",".join(FLOW_METHOD_NAMES)
    config = load_config(overrides=[f"init.methods=[{names}]", f"orchestration.lapt_methods=[{names}]"],
                         language="sw")
    assert tuple(config.init.methods) == tuple(config.orchestration.lapt_methods) == FLOW_METHOD_NAMES


def test_flow_check_reads_the_inputs_from_the_table(monkeypatch):
    needs_lexicon = MethodInput("a hand-made lexicon", flow_supplies=False)
    monkeypatch.setitem(INIT_METHODS, "lexicon",
                        InitMethodSpec("lexicon", "from a lexicon", "lexicon_plan", (needs_lexicon,)))
    with pytest.raises(ValueError, match="'lexicon' cannot run in the pipeline flow: it needs a hand-made lexicon"):
        check_flow_method("lexicon")
    monkeypatch.setitem(INIT_METHODS, "lexicon", InitMethodSpec("lexicon", "from a lexicon", "lexicon_plan"))
    assert check_flow_method("lexicon") == "lexicon"
    with pytest.raises(ValueError, match="unknown method 'magic'"):
        check_flow_method("magic")


def test_init_help_lists_every_method_with_its_description():
    text = _help("init")
    for name, spec in INIT_METHODS.items():
        assert f"{name}: {spec.description}" in text


def test_init_refuses_a_name_outside_the_table():
    result = runner.invoke(app, ["init", "--source", "s", "--out", "o", "--method", "magic"])
    assert result.exit_code != 0 and "magic" in result.output


def test_compare_help_and_check_offer_only_what_the_flow_can_feed():
    text = _help("compare")
    assert f"from {', '.join(FLOW_METHOD_NAMES)}." in text and "wechsel" not in text
    result = runner.invoke(app, ["compare", "--corpus", "c.txt", "--language", "sw", "--out", "o",
                                 "--methods", "focus,wechsel"])
    assert result.exit_code != 0 and "'wechsel' cannot run in the pipeline flow" in re.sub(r"[\s│]+", " ",
                                                                                          result.output)


def test_a_models_name_is_spelled_by_one_function():
    """``focus``, ``focus+align``, ``focus+lapt``: built by ``model_label`` and read back by ``read_model_label``;
    no other module assembles the suffixes by hand."""
    import re
    from pathlib import Path

    from focusflow.methods import model_label, read_model_label

    assert model_label("focus") == "focus"
    assert model_label("focus", ("align",), lapt=True) == "focus+align+lapt"
    assert read_model_label("focus+align+lapt") == ("focus+align", True)
    assert read_model_label("fvt") == ("fvt", False)
    package = Path(__file__).resolve().parents[1] / "focusflow"
    by_hand = re.compile(r"""(\+=\s*["']\+(lapt|align)|f["'][^"'\n]*\}\+(lapt|align|\{)|["']\+(lapt|align)["'])""")
    offenders = [f"{path.relative_to(package)}:{number}" for path in package.rglob("*.py") if path.name != "methods.py"
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if by_hand.search(line)]
    assert offenders == []


def test_fates_keep_their_stored_spelling():
    """Reports, totals and stored artifacts spell a fate by its value; the shares group the three copies as one."""
    assert [fate.value for fate in Fate] == ["copied_exact", "copied_fuzzy", "copied_special", "combined",
                                             "combined_subword", "fvt", "random", "mean", "kept"]
    assert SHARE_GROUPS == ("copied", "combined", "combined_subword", "fvt", "random", "mean", "kept")
    assert {fate for fate in Fate if fate.unchanged} == {Fate.COPIED_EXACT, Fate.COPIED_SPECIAL, Fate.KEPT}
    assert {fate for fate in Fate if fate.rare_fallback} == {Fate.COMBINED_SUBWORD, Fate.FVT}


def test_no_module_spells_a_fate_by_hand():
    """A fate is ``Fate.X`` everywhere in the package: a new fate is one member, with no list to extend beside it."""
    from pathlib import Path

    package = Path(__file__).resolve().parents[1] / "focusflow"
    names = "|".join(fate.value for fate in Fate if "_" in fate.value)  # "fvt", "mean" … also name methods
    spelled = re.compile(rf"""["']({names})["']""")
    offenders = [f"{path.relative_to(package)}:{number}" for path in package.rglob("*.py") if path.name != "methods.py"
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if spelled.search(line)]
    assert offenders == []


def test_a_models_name_carries_its_lapt_objective_where_it_is_not_the_language_models_own():
    """Issue 44: both LAPT runs were named focus+lapt in every row, the MLM one and the distilled one."""
    from focusflow.methods import lapt_objective, model_label, read_model_label

    assert model_label("focus", lapt=True) == "focus+lapt"
    assert model_label("focus", lapt=True, objective="distill") == "focus+distill"
    assert model_label("focus", ("align",), lapt=True, objective="mlm+distill") == "focus+align+mlm+distill"
    for label, read in (("focus+lapt", ("focus", True)), ("prune+distill", ("prune", True)),
                        ("focus+align+mlm+distill", ("focus+align", True)), ("focus+align", ("focus+align", False))):
        assert read_model_label(label) == read
    assert lapt_objective({"lapt": {"objective": "distill"}}) == "distill" and lapt_objective({"lapt": {}}) == "mlm"


def test_a_distilling_runs_candidates_are_named_by_their_objective():
    from focusflow.config import build_config
    from focusflow.pipeline.run_plan import RunPlan

    cfg = build_config({"language": "sw", "lapt": {"steps": 10, "objective": "distill"}})
    assert RunPlan.from_config(cfg).shippable()[0] == "focus+distill"


def test_a_rows_method_and_stage_are_read_from_its_name_candidates_included():
    """The comparison table split ``prune+extend`` into method prune, stage extend."""
    from focusflow.methods import model_stage

    assert model_stage("prune+extend+distill") == ("prune+extend", "distill")
    assert model_stage("focus+align+lapt") == ("focus", "align+lapt") and model_stage("original") == ("original", "init")
    assert model_stage("focus-symbolic") == ("focus-symbolic", "init")


def test_every_lapt_objective_is_a_row_whose_run_resolves_and_the_config_accepts_exactly_the_rows():
    """Issue 46: the objectives were an if/else in training.lapt and a rule ("a non-MLM objective takes the source")
    decided again in the graph, the CLI and the benchmark."""
    import typing

    from focusflow.config import LaptSpec
    from focusflow.methods import (
        AUTO_OBJECTIVE,
        CANDIDATES,
        FAMILY_OBJECTIVES,
        LAPT_OBJECTIVES,
        CandidateName,
        learns_from_source,
    )
    from focusflow.tokenizer.source_ids import named_function
    from focusflow.training.recipe import RunRecipe

    assert set(typing.get_args(LaptSpec.model_fields["objective"].annotation)) == {*LAPT_OBJECTIVES, AUTO_OBJECTIVE}
    assert set(FAMILY_OBJECTIVES.values()) <= set(LAPT_OBJECTIVES), "auto resolves to a row"
    assert set(typing.get_args(CandidateName)) == set(CANDIDATES)
    for row in LAPT_OBJECTIVES.values():
        assert issubclass(named_function(row.recipe), RunRecipe), row.name
    assert [name for name in LAPT_OBJECTIVES if learns_from_source(name)] == ["distill", "mlm+distill"]


def test_every_row_that_names_code_names_it_by_dotted_path_and_one_resolver_finds_it():
    """Issue 46: rows were resolved three ways (getattr by a bare name, callables, dotted paths). Methods, LAPT
    objectives and source kinds now all name their code by dotted path, and ``named_function`` resolves every one."""
    import inspect

    from focusflow.methods import LAPT_OBJECTIVES
    from focusflow.tokenizer.source_ids import SOURCE_KINDS, named_function

    paths = [spec.builder for spec in INIT_METHODS.values()]
    paths += [row.recipe for row in LAPT_OBJECTIVES.values()]
    paths += [getattr(kind, column) for kind in SOURCE_KINDS for column in ("resolver", "model_type", "tokenizer")]
    for path in paths:
        assert path.startswith("focusflow.") and path.count(".") >= 2, path
        found = named_function(path)
        assert inspect.isfunction(found) or inspect.isclass(found), path
