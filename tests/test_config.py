"""Run configuration: defaults from the paper, clear errors that name the field."""

from __future__ import annotations

import pytest

from focusflow.config import DEFAULT_LAPT_MINUTES, ConfigError, load_config


def test_defaults_are_the_measured_cpu_recipe_with_a_lapt_that_reaches_the_source():
    config = load_config(language="sw")
    assert config.tokenizer.vocab_size == "auto"  # one vocabulary policy for every entry point
    assert config.lapt.minutes == DEFAULT_LAPT_MINUTES == 30.0 and config.lapt.has_budget
    assert config.lapt.batch_size == 32 and config.lapt.seq_len == 128  # benchmarks/RESULTS-lapt-parity.md
    assert config.lapt.lr == pytest.approx(1e-4) and config.lapt.grad_clip == 1.0


def test_the_default_run_is_the_one_measured_to_reach_its_source():
    """Issue 44 (benchmarks/RESULTS-lapt-parity.md): the pruned source and the pruned source extended with the
    language's tokens are built beside the methods; FOCUS and prune+extend are trained, by the objective the
    source's family measured best (resolved before the graph: pipeline.family_defaults)."""
    config = load_config(language="sw")
    assert config.init.candidates == ["prune", "prune+extend"]
    assert config.orchestration.lapt_methods == ["focus", "prune+extend"]
    assert config.lapt.objective == "auto"


def test_the_objective_the_default_replaced_stays_out_of_the_lapt_key():
    """Keys stored when mlm was the default keep their keys: mlm and auto are left out, the others named."""
    from focusflow.config import KEY_CONTEXT

    def keyed(objective: str) -> dict:
        return load_config(language="sw", lapt={"steps": 5, "objective": objective}).lapt.model_dump(
            context=KEY_CONTEXT)

    assert "objective" not in keyed("mlm") and "objective" not in keyed("auto")
    assert keyed("distill")["objective"] == "distill" and keyed("mlm+distill")["objective"] == "mlm+distill"


def test_a_lapt_budget_given_replaces_the_default_and_steps_0_turns_lapt_off():
    assert load_config(language="sw", lapt={"lr": 2e-4}).lapt.minutes == 30.0  # a recipe change keeps the budget
    assert load_config(language="sw", lapt={"steps": 50}).lapt.minutes is None
    off = load_config(language="sw", lapt={"steps": 0}).lapt
    assert off.minutes is None and not off.has_budget
    assert load_config(None, ["lapt.tokens=100000"], language="sw").lapt.minutes is None


def test_yaml_and_overrides(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("language: HAU\ntokenizer:\n  vocab_size: 8000\ninit:\n  methods: [focus]\n")
    config = load_config(path, ["tokenizer.vocab_size=16000", "init.methods=[focus,mean]", "lapt.steps=10"])
    assert config.language == "hau"
    assert config.tokenizer.vocab_size == 16000
    assert config.init.methods == ["focus", "mean"]
    assert config.lapt.steps == 10


def test_invalid_choice_names_field_and_allowed_values():
    with pytest.raises(ConfigError) as error:
        load_config(overrides=["lapt.precision=fp8"], language="sw")
    message = str(error.value)
    assert "lapt.precision" in message and "'bf16'" in message and "fp8" in message


def test_unknown_field_is_rejected():
    with pytest.raises(ConfigError, match=r"tokenizer\.vocab_sise"):
        load_config(overrides=["tokenizer.vocab_sise=100"], language="sw")


def test_out_of_range_value_is_rejected():
    with pytest.raises(ConfigError, match=r"split\.heldout_fraction"):
        load_config(overrides=["split.heldout_fraction=0.9"], language="sw")


def test_unknown_method_is_rejected():
    with pytest.raises(ConfigError, match=r"init\.methods\.1"):
        load_config(overrides=["init.methods=[focus,magic]"], language="sw")


def test_local_corpus_needs_paths():
    with pytest.raises(ConfigError, match="corpus.paths"):
        load_config(overrides=["corpus.source=local"], language="sw")


def test_missing_language_and_bad_file(tmp_path):
    with pytest.raises(ConfigError, match="language"):
        load_config()
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml", language="sw")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(bad)


@pytest.mark.parametrize(("text", "says"), [
    ("language: sw\nlapt:\n  steps: 4\nlapt:\n  lr: 0.001\n", "key 'lapt' is given twice (lines 2 and 4)"),
    ("language: sw\nlapt:\n  steps: 4\n  lr: 0.001\n  steps: 9\n", "key 'lapt.steps' is given twice (lines 3 and 5)"),
    ("language: sw\ninit:\n  methods: [focus]\ncorpus:\n  paths:\n    - {a: 1, a: 2}\n",
     "key 'corpus.paths[0].a' is given twice (lines 6 and 6)"),
])
def test_a_key_given_twice_in_the_yaml_is_refused_naming_it_and_its_lines(tmp_path, text, says):
    """PyYAML keeps the last of two equal keys: the first setting would vanish without a word."""
    path = tmp_path / "run.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="run.yaml is not valid YAML") as refused:
        load_config(path)
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_a_yaml_merge_may_still_override_what_it_brings():
    from focusflow.config import read_yaml

    assert read_yaml("base: &b {steps: 1, lr: 2}\nlapt:\n  <<: *b\n  steps: 3\n")["lapt"] == {"steps": 3, "lr": 2}


def test_a_set_value_with_a_key_given_twice_is_refused():
    with pytest.raises(ConfigError, match="lapt.stages.*not valid YAML.*'a' is given twice"):
        load_config(overrides=["lapt.stages={a: 1, a: 2}"], language="sw")


def test_layers_merge_section_by_section_later_layers_winning():
    from focusflow.config import merge_layers

    base = {"lapt": {"steps": 4, "lr": 1e-4}, "store": "a"}
    merged = merge_layers(base, None, {"lapt": {"steps": 9}}, {"store": "b", "tokenizer": {"vocab_size": 300}})
    assert merged == {"lapt": {"steps": 9, "lr": 1e-4}, "store": "b", "tokenizer": {"vocab_size": 300}}
    assert base == {"lapt": {"steps": 4, "lr": 1e-4}, "store": "a"}  # the layers themselves are left as they were


def test_file_then_layers_then_overrides_then_fields(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("language: ha\nlapt: {steps: 1, lr: 0.001}\ntokenizer: {vocab_size: 500}\n", encoding="utf-8")
    cfg = load_config(path, ["lapt.steps=3"], layers=[{"lapt": {"steps": 2, "seed": 7}}, None], language="sw")
    assert (cfg.language, cfg.lapt.steps, cfg.lapt.lr, cfg.lapt.seed, cfg.tokenizer.vocab_size) == ("sw", 3, 0.001, 7, 500)


def test_a_commands_defaults_lie_below_the_file(tmp_path):
    """A command's own defaults (``focusflow compare``'s methods) fill only what nothing above them sets."""
    path = tmp_path / "run.yaml"
    path.write_text("init: {methods: [mean]}\n", encoding="utf-8")
    defaults = {"init": {"methods": ["focus", "fvt"], "mode": "extend"}}
    cfg = load_config(path, defaults=defaults, language="sw")
    assert (cfg.init.methods, cfg.init.mode) == (["mean"], "extend")
    assert load_config(path, ["init.mode=prune"], defaults=defaults, language="sw").init.mode == "prune"
    assert load_config(defaults=defaults, language="sw").init.methods == ["focus", "fvt"]


def test_the_language_is_checked_as_the_corpus_checks_it():
    """One validation: a code the corpus stage would refuse is refused by the configuration."""
    from focusflow.config import ANY_LANGUAGE
    from focusflow.corpus import LanguageError, normalize_language

    for code in ("zz", "xx", "zzz"):
        with pytest.raises(ConfigError, match=f"'{code}' is not a known ISO 639"):
            load_config(language=code)
        with pytest.raises(LanguageError):
            normalize_language(code)
    assert load_config(language="sw_KE").language == "sw-ke"  # accepted, kept as typed (it is in the corpus key)
    assert load_config(any_language=True).language == ANY_LANGUAGE  # a stage that does not use the language
    with pytest.raises(ConfigError, match="'xx' is not a known"):
        load_config(language="xx", any_language=True)  # given by a user, checked like any code


def test_infinite_and_nan_values_are_refused_at_validation():
    for override in ("lapt.lr=inf", "lapt.lr=.nan", "init.refine.lr=-.inf", "fasttext.lr=nan"):
        with pytest.raises(ConfigError, match="finite number"):
            load_config(overrides=[override], language="sw")
