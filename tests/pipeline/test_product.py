"""The run's product: the fewest tokens per word among the candidates at parity with the source on dev."""

from __future__ import annotations

import pandas as pd

from focusflow.pipeline.product import Candidate, add_verdicts, candidates_markdown, choose_product

TASK = "cls:sib200:sw"


def _runs(dev: dict[str, tuple[float, ...]]) -> pd.DataFrame:
    return pd.DataFrame([{"model": model, "task": TASK, "seed": seed, "main": True, "dev": value, "value": value}
                         for model, values in dev.items() for seed, value in enumerate(values, start=1)])


def test_the_fewest_tokens_per_word_at_parity_on_dev_is_the_product():
    runs = _runs({"original": (0.60, 0.62, 0.61, 0.63), "focus+lapt": (0.595, 0.618, 0.606, 0.626),
                  "prune": (0.60, 0.621, 0.611, 0.629)})
    candidates = [add_verdicts(Candidate("focus+lapt", 26_300_000, 2.00), runs, [TASK]),
                  add_verdicts(Candidate("prune", 27_200_000, 2.93), runs, [TASK])]
    product = choose_product(candidates, "focus+lapt")
    assert product.name == "focus+lapt" and product.measured and "fewest tokens per word (2.00)" in product.reason
    table = candidates_markdown(candidates, product, {"n_params": 117_900_000, "tokens_per_word": 2.89})
    assert table.startswith("**Product: focus+lapt**") and "| original | 117.9M | 2.89 |" in table
    assert table.index("**focus+lapt**") < table.index("| prune |")


def test_below_parity_the_floor_is_the_product_and_the_reason_says_why():
    runs = _runs({"original": (0.60, 0.62, 0.61, 0.63), "focus+lapt": (0.40, 0.43, 0.41, 0.42),
                  "prune": (0.60, 0.621, 0.611, 0.629)})
    candidates = [add_verdicts(Candidate("focus+lapt", tokens_per_word=2.0), runs, [TASK]),
                  add_verdicts(Candidate("prune", tokens_per_word=2.93), runs, [TASK])]
    assert choose_product(candidates, "focus+lapt").name == "prune"
    nobody = _runs({"original": (0.60, 0.62, 0.61, 0.63), "focus+lapt": (0.40, 0.43, 0.41, 0.42),
                    "prune": (0.50, 0.52, 0.51, 0.53)})
    candidates = [add_verdicts(Candidate(name, tokens_per_word=2.0), nobody, [TASK]) for name in ("focus+lapt", "prune")]
    product = choose_product(candidates, "focus+lapt")
    assert product.name == "prune" and "no candidate reached parity" in product.reason and "came closest" in product.reason


def test_the_test_score_never_picks():
    runs = _runs({"original": (0.60, 0.62, 0.61, 0.63), "a": (0.60, 0.62, 0.61, 0.63)})
    runs.loc[runs["model"] == "a", "value"] = 0.1  # a catastrophic test score: reported, not used to pick
    candidate = add_verdicts(Candidate("a", tokens_per_word=2.0), runs, [TASK])
    assert candidate.at_parity_on_dev and candidate.test_verdicts[TASK].parity is False


def test_without_downstream_results_the_configured_model_is_the_product_unmeasured():
    product = choose_product([Candidate("focus+lapt")], "focus+lapt")
    assert product.name == "focus+lapt" and not product.measured and "not measured" in product.reason


def test_a_candidate_above_the_source_whose_verdict_is_undecided_is_said_to_be_above_it():
    runs = _runs({"original": (0.60, 0.62, 0.61), "focus+lapt": (0.66, 0.60, 0.68)})
    candidate = add_verdicts(Candidate("focus+lapt", tokens_per_word=2.0), runs, [TASK])
    assert not candidate.at_parity_on_dev and candidate.dev_gap > 0
    product = choose_product([candidate], "focus+lapt")
    assert "came closest" not in product.reason
    assert "+3.7 points against the source on dev" in product.reason and "above it" in product.reason
    assert "add seeds" in product.reason


def test_a_runs_candidates_are_its_methods_after_lapt_or_its_methods_then_what_it_builds_beside_them():
    from focusflow.config import build_config
    from focusflow.pipeline.run_plan import RunPlan

    def candidate_names(cfg, trained: bool = True) -> list[str]:
        return RunPlan.from_config(cfg).shippable(trained=trained)

    def configured_product(cfg) -> str:
        return candidate_names(cfg)[0]

    trained = build_config({"language": "sw", "init": {"methods": ["focus", "fvt"]},
                            "lapt": {"steps": 10}})  # an encoder source (e5-small): lapt.objective=auto distills
    assert candidate_names(trained) == ["focus+distill", "prune+extend+distill", "prune", "prune+extend"]
    assert configured_product(trained) == "focus+distill"
    untrained = build_config({"language": "sw", "init": {"methods": ["focus", "fvt"]}, "lapt": {"steps": 0}})
    assert candidate_names(untrained) == ["focus", "fvt", "prune", "prune+extend"]
    assert configured_product(untrained) == "focus"
    assert candidate_names(trained, trained=False) == ["focus", "fvt", "prune", "prune+extend"], "compare trains none"
    only_a_candidate = build_config({"language": "sw", "init": {"methods": ["focus"], "candidates": ["prune+extend"]},
                                     "lapt": {"steps": 10, "objective": "mlm"},
                                     "orchestration": {"lapt_methods": ["prune+extend"]}})
    assert candidate_names(only_a_candidate) == ["focus", "prune+extend+lapt", "prune+extend"]
    decoder = build_config({"language": "sw", "source_model": "gemma3:270m", "init": {"methods": ["focus"]},
                            "lapt": {"steps": 10}})  # a decoder: its causal LM
    assert candidate_names(decoder) == ["focus+lapt", "prune+extend+lapt", "prune", "prune+extend"]


def test_without_a_downstream_task_the_report_still_lists_every_candidate_it_built_the_product_first(tmp_path):
    """The report's candidates table had only the source's row when the run evaluated no downstream task."""
    from focusflow.pipeline import run_stage
    from focusflow.storage import ArtifactStore

    store = ArtifactStore(tmp_path / "store")
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")

    def put(stage: str, fill: str, **metadata) -> str:
        return store.put_dir(stage, fill * 64, folder, metadata=metadata).uri

    inputs = {"stage:source": put("source", "a"), "init:focus": put("init", "b"), "init:prune": put("init", "c"),
              "lapt:focus": put("lapt", "d", steps=40, tokens=81920),
              "intrinsic:original": put("intrinsic", "e", n_params=117_900_000, tokens_per_word=2.86, bits_per_byte=3.8),
              "intrinsic:focus": put("intrinsic", "f", n_params=26_300_000, tokens_per_word=1.95, bits_per_byte=3.1),
              "intrinsic:prune": put("intrinsic", "1", n_params=27_200_000, tokens_per_word=2.87, bits_per_byte=3.7),
              "intrinsic:focus+lapt": put("intrinsic", "2", n_params=26_300_000, tokens_per_word=1.95,
                                          bits_per_byte=2.4)}
    report = run_stage(store, "report", {"language": "ny", "candidates": ["focus+lapt", "prune"]}, inputs)
    text = (store.fetch(report) / "report.md").read_text(encoding="utf-8")
    table = text[text.index("**Product: focus+lapt**"):text.index("## Method comparison")]
    assert f"(`{inputs['lapt:focus']}`)" in table.splitlines()[0], "the product's own address, whole"
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| model")]
    assert [row.split(" | ")[0] for row in rows] == ["| original", "| **focus+lapt**", "| prune"]
    assert "| 26.3M | 1.95 | 2.400 | not measured |" in rows[1] and "`init/cccccccccccc`" in rows[2]
    assert "| 117.9M | 2.86 | 3.800 |" in rows[0]


def test_a_decoder_run_without_a_downstream_task_chooses_on_dev_bits_per_byte():
    """Issue 48: the configured FOCUS lost to FVT on the run's own dev text and was shipped anyway."""
    from focusflow.pipeline.product import DEV_BITS_PARITY

    source = 3.805
    candidates = [Candidate("focus", 106_700_000, 1.95, dev_bits_per_byte=3.767 * 1.05),
                  Candidate("fvt", 106_700_000, 1.95, dev_bits_per_byte=3.703 * 1.05),
                  Candidate("prune", 118_000_000, 2.86, dev_bits_per_byte=3.778)]
    product = choose_product(candidates, "focus", source)
    assert product.name == "prune" and product.measured and "within 1% of the source's (3.805)" in product.reason
    trained = [*candidates, Candidate("focus+lapt", 106_700_000, 1.95, dev_bits_per_byte=2.091)]
    assert choose_product(trained, "focus+lapt", source).name == "focus+lapt", "fewest tokens per word at parity"
    far = [Candidate("focus", tokens_per_word=1.9, dev_bits_per_byte=4.6), Candidate("fvt", tokens_per_word=1.9,
                                                                                    dev_bits_per_byte=4.2)]
    closest = choose_product(far, "focus", source)
    assert closest.name == "fvt" and "came closest (dev 4.200 against 3.805)" in closest.reason
    assert choose_product(far, "focus", None).measured is False, "an encoder run: not measured"
    assert DEV_BITS_PARITY == 0.01


def test_the_candidates_table_shows_a_decoders_dev_unigram_other_domain_bits_and_generation_speed():
    candidate = Candidate("fvt", 106_700_000, 1.95, bits_per_byte=3.387, dev_bits_per_byte=3.4,
                          unigram_bits_per_byte=2.44, ood_bits_per_byte=4.1, generated_bytes_per_s=812.4)
    product = choose_product([candidate], "fvt", 3.8)
    table = candidates_markdown([candidate], product, {"n_params": 268_100_000, "tokens_per_word": 2.9,
                                                       "bits_per_byte": 3.792, "dev_bits_per_byte": 3.8,
                                                       "generated_bytes_per_s": 301.0, "lm_loss": "clm"})
    header = next(line for line in table.splitlines() if line.startswith("| model"))
    assert "dev bits/byte | unigram bits/byte | other-domain bits/byte | generated bytes/s" in header
    assert "| **fvt** | 106.7M | 1.95 | 3.387 | 3.400 | 2.440 | 4.100 | 812 | parity (dev -10.5%) |" in table
    assert "| original | 268.1M | 2.90 | 3.792 | 3.800 | - | - | 301 |" in table


def test_a_candidate_above_on_average_but_below_on_one_task_is_not_told_to_add_seeds():
    """More seeds cannot lift a task decided below: the reason names it."""
    rows = []
    for task, source, model in (("a", (0.60, 0.62, 0.61, 0.63), (0.70, 0.72, 0.71, 0.73)),
                                ("b", (0.60, 0.62, 0.61, 0.63), (0.55, 0.57, 0.56, 0.58))):
        rows += [{"model": name, "task": task, "seed": seed, "main": True, "dev": value, "value": value}
                 for name, values in (("original", source), ("prune", model))
                 for seed, value in enumerate(values, start=1)]
    candidate = add_verdicts(Candidate("prune", tokens_per_word=2.0), pd.DataFrame(rows), ["a", "b"])
    assert candidate.dev_gap > 0
    product = choose_product([candidate], "prune")
    assert "below the source on b" in product.reason and "add seeds" not in product.reason


def test_a_note_under_the_table_says_what_a_row_cannot():
    candidate = Candidate("prune", 113_300_000, 2.71, notes=["over its budget of 0.35 of the source's parameters"])
    table = candidates_markdown([candidate], choose_product([candidate], "prune"))
    assert table.splitlines()[-1] == "- **prune**: over its budget of 0.35 of the source's parameters"


def test_with_text_of_another_domain_a_decoder_must_reach_parity_on_its_dev_third_too():
    """Measured on Shona (RESULTS-decoders): FVT 0.23 bits per byte below the source on the corpus's domain, 0.50
    above it on FLORES sentences; the pruned source within 1% on both. A gain of one domain is not the language's."""
    source_dev, source_ood = 3.433, 3.555
    candidates = [Candidate("fvt", 104_000_000, 1.66, dev_bits_per_byte=3.208, ood_dev_bits_per_byte=4.058),
                  Candidate("prune", 113_300_000, 2.70, dev_bits_per_byte=3.399, ood_dev_bits_per_byte=3.578)]
    assert choose_product(candidates, "focus", source_dev).name == "fvt", "the corpus's domain alone"
    product = choose_product(candidates, "focus", source_dev, source_ood)
    assert product.name == "prune" and "other domain's dev third (3.578 against 3.555)" in product.reason
    far = [Candidate("fvt", tokens_per_word=1.66, dev_bits_per_byte=3.208, ood_dev_bits_per_byte=4.058),
           Candidate("mean", tokens_per_word=1.66, dev_bits_per_byte=4.0, ood_dev_bits_per_byte=4.9)]
    closest = choose_product(far, "focus", source_dev, source_ood)
    assert closest.name == "fvt" and "other domain 4.058 against 3.555" in closest.reason


def test_a_decoder_runs_dev_verdict_column_says_parity_or_worse_on_bits_per_byte_with_the_other_domain():
    """Without a downstream task the column shows what the choice looked at, not 'not measured'."""
    source = {"n_params": 134_500_000, "tokens_per_word": 2.78, "dev_bits_per_byte": 4.368,
              "ood_dev_bits_per_byte": 4.345, "lm_loss": "clm"}
    prune = Candidate("prune", 113_500_000, 2.78, dev_bits_per_byte=4.340, ood_dev_bits_per_byte=4.320)
    focus = Candidate("focus", 140_300_000, 2.05, dev_bits_per_byte=4.413, ood_dev_bits_per_byte=4.480)
    table = candidates_markdown([prune, focus], choose_product([prune, focus], "focus", 4.368, 4.345), source)
    assert "| parity (dev -0.6%, other domain -0.6%) |" in table
    assert "| worse (dev +1.0%, other domain +3.1%) |" in table


def test_tokens_per_word_within_a_hundredth_are_a_tie_and_the_smaller_model_ships():
    """Measured on Shona (SmolLM2, extend): FOCUS 2.63 tokens per word at 136.0M, prune+extend 2.64 at 112.3M, both at
    parity: the smaller ships; a real difference in tokens per word still decides first."""
    focus = Candidate("focus", 136_000_000, 2.63, dev_bits_per_byte=4.133)
    smaller = Candidate("prune+extend", 112_300_000, 2.64, dev_bits_per_byte=4.120)
    assert choose_product([focus, smaller], "focus", 4.347).name == "prune+extend"
    fewer = Candidate("fvt", 140_000_000, 2.40, dev_bits_per_byte=4.2)
    assert choose_product([focus, smaller, fewer], "focus", 4.347).name == "fvt"


def _report_of(tmp_path, lm_loss: str) -> str:
    """A run's report over stored intrinsic records with dev bits per byte, no downstream task: its source's head
    scores ``lm_loss``."""
    from focusflow.pipeline import run_stage
    from focusflow.storage import ArtifactStore

    store = ArtifactStore(tmp_path / "store")
    folder = tmp_path / "model"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")

    def put(stage: str, fill: str, **metadata) -> str:
        return store.put_dir(stage, fill * 64, folder, metadata=metadata).uri

    inputs = {"stage:source": put("source", "a"), "init:focus": put("init", "b"), "init:prune": put("init", "c"),
              "intrinsic:original": put("intrinsic", "e", n_params=117_900_000, tokens_per_word=2.86, lm_loss=lm_loss,
                                        bits_per_byte=3.8, dev_bits_per_byte=3.8),
              "intrinsic:focus": put("intrinsic", "f", n_params=26_300_000, tokens_per_word=1.95, lm_loss=lm_loss,
                                     bits_per_byte=3.1, dev_bits_per_byte=3.1),
              "intrinsic:prune": put("intrinsic", "1", n_params=27_200_000, tokens_per_word=2.87, lm_loss=lm_loss,
                                     bits_per_byte=3.7, dev_bits_per_byte=3.7)}
    report = run_stage(store, "report", {"language": "ny", "candidates": ["prune", "focus"]}, inputs)
    return (store.fetch(report) / "report.md").read_text(encoding="utf-8")


def test_an_encoder_run_without_a_downstream_task_is_not_chosen_on_its_masked_lms_bits_per_byte(tmp_path):
    """A masked LM's bits per byte depend on what its tokenizer masks: they do not compare across tokenizers. The
    source stage's MLM head gave every encoder dev bits per byte, and a run without a task chose on them."""
    encoder = _report_of(tmp_path / "mlm", "mlm")
    assert "**Product: prune**" in encoder and "the choice was not measured" in encoder
    assert "parity (dev" not in encoder and "not measured |" in encoder
    decoder = _report_of(tmp_path / "clm", "clm")
    assert "**Product: focus**" in decoder and "| parity (dev -18.4%) |" in decoder


def test_a_source_without_downstream_runs_leaves_the_choice_unmeasured_not_minus_infinity():
    """orchestration.evaluate_original: false: no candidate shares a seed with the source on any task."""
    runs = _runs({"focus+lapt": (0.66, 0.60, 0.68), "prune": (0.6, 0.6, 0.6)})
    candidates = [add_verdicts(Candidate(name, tokens_per_word=2.0), runs, [TASK]) for name in ("focus+lapt", "prune")]
    product = choose_product(candidates, "focus+lapt")
    assert product.name == "focus+lapt" and not product.measured and "inf" not in product.reason
    assert "evaluate_original" in product.reason
    decoder = [add_verdicts(Candidate("prune", tokens_per_word=2.0, dev_bits_per_byte=3.7), runs, [TASK])]
    assert choose_product(decoder, "focus+lapt", 3.8).name == "prune", "a decoder falls back on dev bits per byte"


def test_a_candidate_measured_on_every_task_beats_one_with_a_higher_mean_over_fewer_tasks():
    rows = []
    for task, values in (("t1", {"original": (0.60, 0.62, 0.61), "a": (0.65, 0.67, 0.66), "b": (0.595, 0.61, 0.60)}),
                         ("t2", {"original": (0.60, 0.62, 0.61), "b": (0.595, 0.61, 0.60)})):
        rows += [{"model": model, "task": task, "seed": seed, "main": True, "dev": v, "value": v}
                 for model, scores in values.items() for seed, v in enumerate(scores, start=1)]
    runs = pd.DataFrame(rows)
    a, b = (add_verdicts(Candidate(name, tokens_per_word=2.0), runs, ["t1", "t2"]) for name in ("a", "b"))
    assert a.dev_gap > b.dev_gap and a.unpaired_tasks == ["t2"]
    assert choose_product([a, b], "a").name == "b"
    alone = choose_product([a], "a")
    assert "no verdict on t2" in alone.reason


def test_a_mean_above_the_source_over_tasks_does_not_say_above_it_when_one_task_is_below():
    rows = []
    for task, model in (("t1", (0.67, 0.69, 0.68, 0.58)), ("t2", (0.55, 0.57, 0.56, 0.66))):
        rows += [{"model": name, "task": task, "seed": seed, "main": True, "dev": v, "value": v}
                 for name, scores in (("original", (0.60, 0.62, 0.61, 0.63)), ("prune", model))
                 for seed, v in enumerate(scores, start=1)]
    candidate = add_verdicts(Candidate("prune", tokens_per_word=2.0), pd.DataFrame(rows), ["t1", "t2"])
    assert candidate.dev_gap > 0 and not any(v.parity is False for v in candidate.dev_verdicts.values())
    reason = choose_product([candidate], "prune").reason
    assert "on the mean of the tasks, not on each" in reason and "on t1" in reason and "on t2" in reason


def test_the_tie_on_tokens_per_word_is_said_as_the_rule_that_decided():
    focus = Candidate("focus", 136_000_000, 2.63, dev_bits_per_byte=4.133)
    smaller = Candidate("prune+extend", 112_300_000, 2.64, dev_bits_per_byte=4.120)
    reason = choose_product([focus, smaller], "focus", 4.347).reason
    assert "within 1% of the fewest (2.63) and the fewest parameters of those (112.3M)" in reason
    assert "with the fewest tokens per word (2.63)" in choose_product([focus], "focus", 4.347).reason


def test_broken_bits_per_byte_decide_nothing_whatever_the_order():
    nan = float("nan")
    broken, good = Candidate("x", tokens_per_word=1.0, dev_bits_per_byte=nan), Candidate("y", tokens_per_word=2.0,
                                                                                         dev_bits_per_byte=3.7)
    assert choose_product([broken, good], "x", 3.8).name == "y" and choose_product([good, broken], "x", 3.8).name == "y"
    assert not choose_product([broken], "x", 3.8).measured, "nothing measured: the configured model"
    assert choose_product([good], "x", nan).measured is False, "the source's own NaN is no yardstick"


def test_a_single_seed_verdict_shows_in_the_table_as_undecided_with_its_difference():
    runs = _runs({"original": (0.60,), "prune": (0.70,)})
    candidate = add_verdicts(Candidate("prune", tokens_per_word=2.0), runs, [TASK])
    table = candidates_markdown([candidate], choose_product([candidate], "prune"))
    assert "| undecided (+10.0, 1 seed) |" in table


def test_a_decoder_run_whose_tasks_gave_no_verdict_chooses_on_bits_and_says_so_in_reason_and_table():
    """Tasks were run but no candidate has a verdict (the source not evaluated, or nobody learned): a decoder falls
    back on dev bits per byte, and neither the reason nor the table pretends there was no task."""
    runs = _runs({"prune": (0.6, 0.6, 0.6)})
    prune = add_verdicts(Candidate("prune", tokens_per_word=2.0, dev_bits_per_byte=3.7), runs, [TASK])
    product = choose_product([prune], "prune", 3.8)
    assert product.measured and "(no downstream verdict against the source:" in product.reason
    table = candidates_markdown([prune], product, {"dev_bits_per_byte": 3.8, "lm_loss": "clm"})
    assert "| parity (dev -2.6%) |" in table


def test_where_neither_model_learned_a_task_the_reason_says_what_to_check():
    idle = _runs({"original": (0.0, 0.0, 0.0), "focus+lapt": (0.0, 0.0, 0.0)})
    candidate = add_verdicts(Candidate("focus+lapt", tokens_per_word=2.0), idle, [TASK])
    product = choose_product([candidate], "focus+lapt")
    assert not product.measured and "learned the task" in product.reason and "dev 0" in product.reason


def test_a_candidate_without_a_verdict_where_others_have_one_is_named_as_not_compared_in_reason_and_table():
    """Issue 48's review: chosen on the downstream verdicts, a candidate without one took no part; its dev bits per
    byte must not read "parity" beside the product, and the reason names it."""
    runs = _runs({"original": (0.60, 0.62, 0.61, 0.63), "focus+lapt": (0.60, 0.621, 0.611, 0.629)})
    measured = add_verdicts(Candidate("focus+lapt", tokens_per_word=2.8, dev_bits_per_byte=3.7), runs, [TASK])
    unpaired = add_verdicts(Candidate("prune+extend+lapt", tokens_per_word=1.95, dev_bits_per_byte=3.5), runs, [TASK])
    product = choose_product([measured, unpaired], "focus+lapt", 3.8, decoder=True)
    assert product.name == "focus+lapt"
    assert "not compared: prune+extend+lapt, without a verdict against the source on any task" in product.reason
    table = candidates_markdown([measured, unpaired], product, {"dev_bits_per_byte": 3.8, "lm_loss": "clm"})
    row = next(line for line in table.splitlines() if line.startswith("| prune+extend+lapt"))
    assert "no verdict (not compared)" in row and "parity" not in row


def test_exactly_one_percent_above_the_source_on_dev_is_parity():
    source = 3.8
    product = choose_product([Candidate("prune", tokens_per_word=2.0, dev_bits_per_byte=source * 1.01)], "prune",
                             source, decoder=True)
    assert product.measured and "within 1% of the source's" in product.reason


def test_a_decoder_run_whose_source_was_not_measured_says_so_an_encoder_run_says_it_had_no_task():
    candidates = [Candidate("focus+lapt", tokens_per_word=2.0, dev_bits_per_byte=3.9),
                  Candidate("prune+extend+lapt", tokens_per_word=1.9, dev_bits_per_byte=3.4)]
    decoder = choose_product(candidates, "focus+lapt", None, decoder=True)
    assert not decoder.measured and "evaluate_original" in decoder.reason and "no downstream task" not in decoder.reason
    encoder = choose_product(candidates, "focus+lapt", None)
    assert not encoder.measured and "no downstream task was evaluated" in encoder.reason
