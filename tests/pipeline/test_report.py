"""The run report shows a person each decoder's greedy continuations of the held-out prompts; encoders add none."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd

from focusflow.corpus.io import write_texts
from focusflow.pipeline import run_stage
from focusflow.pipeline.report import write_report
from focusflow.storage import Artifact, ArtifactStore
from tests.tiny_decoders import save_tiny_gemma
from tests.tiny_models import sample_texts, save_tiny

ROWS = [{"method": "original", "stage": "init", "mlm_loss": 5.0}, {"method": "focus", "stage": "init", "mlm_loss": 4.0}]
SECTION = "## Greedy continuations (held-out prompts)"


def _section(report: str) -> str:
    start = report.index(SECTION)
    end = report.find("\n## ", start + 1)
    return report[start:] if end < 0 else report[start:end]


def test_continuations_appear_under_their_prompt_one_row_per_model(tmp_path: Path):
    continuations = {
        "original": [{"prompt": "Pachiyambi Mulungu", "heldout": "analenga kumwamba", "continuation": " anati"}],
        "focus": [{"prompt": "Pachiyambi Mulungu", "heldout": "analenga kumwamba", "continuation": " a|b\nc\x1b"}],
    }
    write_report(tmp_path, "ny", ROWS, {}, continuations=continuations)
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    section = _section(report)
    assert "**Prompt 1:** Pachiyambi Mulungu" in section
    assert "| *held-out text* | analenga kumwamba |" in section
    assert "| original |  anati |" in section
    # one table row whatever the model wrote: pipes escaped, line breaks and control characters made visible
    assert "| focus |  a\\|b ⏎ c\\x1b |" in section


def test_a_report_without_continuations_has_no_such_section(tmp_path: Path):
    write_report(tmp_path, "sw", ROWS, {})
    assert SECTION not in (tmp_path / "report.md").read_text(encoding="utf-8")


def _imported(store: ArtifactStore, folder: Path) -> Artifact:
    return store.put_dir("import", hashlib.sha256(str(folder).encode()).hexdigest(), folder)


def _report_of(store: ArtifactStore, models: dict[str, Path], source: Path, heldout: Path) -> str:
    """reference → intrinsic per model → report through the registry, as the graph runs them."""
    split = store.put_bytes("import", "h" * 64, "heldout.jsonl", heldout.read_bytes())
    source_artifact = _imported(store, source)
    params = {"max_sentences": 30, "seed": 0, "precision": "fp32"}
    inputs = {}
    for label, folder in models.items():
        model = _imported(store, folder)
        given = {"source": source_artifact, "split": split}
        if folder != source:
            given["tokenizer"] = model
        reference = run_stage(store, "reference", params, given)
        inputs[f"intrinsic:{label}"] = run_stage(store, "intrinsic", params, {"model": model, "reference": reference})
    report = run_stage(store, "report", {"language": "sw"}, inputs)
    return (store.fetch(report) / "report.md").read_text(encoding="utf-8")


def test_a_decoder_run_report_shows_every_models_continuations(tmp_path: Path):
    write_texts(tmp_path / "heldout.jsonl", sample_texts(80, seed=21))
    source = save_tiny_gemma(tmp_path / "source", sample_texts(300, seed=1))
    target = save_tiny_gemma(tmp_path / "target", sample_texts(300, seed=5), vocab_size=400, seed=1)
    report = _report_of(ArtifactStore(tmp_path / "store"), {"original": source, "focus": target}, source,
                        tmp_path / "heldout.jsonl")
    section = _section(report)
    assert section.count("**Prompt ") == 3  # the same three prompts for both models
    assert section.count("| original | ") == 3 and section.count("| focus | ") == 3


def test_an_encoder_run_report_has_no_continuations(tmp_path: Path):
    write_texts(tmp_path / "heldout.jsonl", sample_texts(80, seed=21))
    source = save_tiny("xlmr", tmp_path / "source")
    report = _report_of(ArtifactStore(tmp_path / "store"), {"original": source}, source, tmp_path / "heldout.jsonl")
    assert "## Method comparison" in report and SECTION not in report


def test_a_decoder_above_its_unigram_level_is_flagged_in_bits_per_byte():
    """The flag read only the masked-LM loss: a causal LM at 2.502 bits per byte against a unigram 2.44 passed."""
    from focusflow.evaluation.intrinsic import above_unigram
    from focusflow.pipeline.report import _unigram_warnings

    decoder = {"method": "focus+lapt", "stage": "lapt", "clm_loss": 5.9, "unigram_loss": 5.75,
               "bits_per_byte": 2.502, "unigram_bits_per_byte": 2.44}
    assert "2.502 bits per byte is not below its tokenizer's unigram level (2.44" in above_unigram(decoder)
    assert above_unigram({**decoder, "clm_loss": 5.0, "bits_per_byte": 2.1}) is None
    assert above_unigram({"mlm_loss": 7.0, "unigram_loss": 6.7}).startswith("held-out LM loss 7 is not below")
    warnings = _unigram_warnings(pd.DataFrame([decoder]))
    assert warnings[0].startswith("- **focus+lapt (lapt)**: held-out 2.502 bits per byte")


def test_a_lapt_row_is_read_with_the_lapt_behind_it(tmp_path):
    """The report names each +lapt model's budget, steps and tokens beside its downstream score."""
    from focusflow.pipeline.evaluation_stages import _downstream_note, _lapt_summary

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    store = ArtifactStore(tmp_path / "store")
    lapt = store.put_dir("lapt", "l" * 64, folder, metadata={
        "steps": 516, "tokens": 2113536, "train_seconds_this_session": 2108.3,
        "budget": {"minutes": 30.0, "steps": 516, "seconds_per_step": 3.49}})
    assert _downstream_note("focus", lapt) == ("focus+lapt: 30 minutes planned on this machine, 516 steps, "
                                               "2,113,536 tokens seen; 35.1 minutes of training measured.")
    assert _lapt_summary(lapt)["budget_minutes"] == 30.0
    plain = store.put_dir("lapt", "m" * 64, folder, metadata={"steps": 40, "tokens": 81920})
    assert _downstream_note("focus", plain) == "focus+lapt: 40 steps, 81,920 tokens seen."


def test_the_minutes_a_candidate_cost_are_counted_on_the_budgets_clock_over_every_session(tmp_path):
    """A LAPT's and an align's cost is their measured CPU-minutes (CPU time over threads), not the plan and not the
    wall time of the last session: a run resumed, or slowed by another job, costs what it worked."""
    from focusflow.pipeline.evaluation_stages import _cpu_minutes, _downstream_note

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    store = ArtifactStore(tmp_path / "store")
    lapt = store.put_dir("lapt", "l" * 64, folder, metadata={
        "steps": 90, "tokens": 368640, "device": "cpu", "train_seconds_this_session": 400.0, "work_seconds": 1230.0,
        "budget": {"minutes": 20.0, "steps": 90, "seconds_per_step": 13.3}})
    init = store.put_dir("init", "i" * 64, folder, metadata={"align": {"steps": 30, "train_seconds": 200.0,
                                                                      "work_seconds": 90.0}})
    by_kind = {"lapt": {"focus": lapt}, "init": {"focus": init}}
    assert _cpu_minutes("focus+lapt", by_kind) == round((1230.0 + 90.0) / 60, 2)
    assert _cpu_minutes("focus", by_kind) == 1.5, "the align refinement alone"
    assert _downstream_note("focus", lapt).endswith("20.5 CPU-minutes of training measured.")
    older = store.put_dir("lapt", "o" * 64, folder, metadata={"steps": 90, "train_seconds_this_session": 400.0,
                                                              "budget": {"minutes": 20.0, "steps": 90}})
    assert _cpu_minutes("focus+lapt", {"lapt": {"focus": older}}) == 20.0, "a record from before: its plan"


def test_the_comparison_says_what_ranks_methods_and_shows_fidelity_beside_its_chance_level(tmp_path: Path):
    rows = [{"method": "fvt", "stage": "init", "fidelity": 0.97, "fidelity_chance": 0.94, "fidelity_centered": 0.41,
             "retrieval_top1": 0.72, "retrieval_top1_centered": 0.55, "bits_per_byte": 3.29},
            {"method": "focus", "stage": "init", "fidelity": 0.96, "fidelity_chance": 0.94, "fidelity_centered": 0.12,
             "retrieval_top1": 0.22, "retrieval_top1_centered": 0.08, "bits_per_byte": 3.18}]
    write_report(tmp_path, "sw", rows, {})
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "A decoder's bits per byte rank its models across tokenizers" in text
    assert "they rank models of one tokenizer only" in text, "a masked LM's bits per byte do not"
    header = next(line for line in text.splitlines() if line.startswith("| method"))
    assert header.index("fidelity_chance") < header.index("retrieval_top1") < header.index("bits_per_byte")
    assert "fidelity_centered" in header and "retrieval_top1_centered" in header


def test_a_refinement_that_kept_its_start_says_so_in_the_report(tmp_path: Path):
    """Issue 39: align keeps its best state by the language model, the start included, and the report says which."""
    from focusflow.pipeline.evaluation_stages import _refinement_note

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    store = ArtifactStore(tmp_path / "store")
    selection = {"measure": "dev next-token loss (64 texts)", "kept_step": 0, "history": [[0, 3.6], [30, 3.9]],
                 "kept": 3.6, "at_start": 3.6, "at_end": 3.9,
                 "why": "no step improved on the start (3.6000; 3.9000 at step 30): the refinement left the model as it was"}
    refined = store.put_dir("align", "a" * 64, folder, metadata={"align": {"steps": 30, "selection": selection}})
    note = _refinement_note("fvt+align", refined)
    assert note.startswith("**fvt+align** kept its start (the rows as the initialization left them)")
    assert "left the model as it was" in note
    assert _refinement_note("fvt", store.put_dir("init", "b" * 64, folder, metadata={})) is None
    write_report(tmp_path / "report", "sw", ROWS, {}, refinement_notes=[note])
    assert "### Refinements" in (tmp_path / "report" / "report.md").read_text(encoding="utf-8")


def _intrinsic(store: ArtifactStore, folder: Path, name: str, metrics: dict) -> Artifact:
    """An intrinsic evaluation's artifact with the record its build writes (the metrics of ``evaluate_model``)."""
    return store.put_dir("intrinsic", hashlib.sha256(name.encode()).hexdigest(), folder, metadata=metrics)


def test_the_comparison_columns_follow_the_objective_and_flag_a_decoder_at_its_unigram_level(tmp_path: Path):
    """Issue 47: Gemma's comparison had no clm_loss/clm_accuracy columns though its records held them, so FVT at 6.18
    bits per byte against a unigram level of 3.87 went unflagged; the card's rule (``above_unigram``) flags it."""
    folder = tmp_path / "metrics"
    folder.mkdir()
    (folder / "metrics.json").write_text("{}")
    store = ArtifactStore(tmp_path / "store")
    decoder = {"objective": "clm", "unigram_loss": 7.2, "unigram_bits_per_byte": 3.87, "vocab_size": 600}
    inputs = {"intrinsic:original": _intrinsic(store, folder, "original", {
                  **decoder, "clm_loss": 3.1, "clm_accuracy": 0.41, "bits_per_byte": 1.66}),
              "intrinsic:fvt": _intrinsic(store, folder, "fvt", {
                  **decoder, "clm_loss": 11.5, "clm_accuracy": 0.02, "bits_per_byte": 6.18})}
    report = store.fetch(run_stage(store, "report", {"language": "sw"}, inputs))
    frame = pd.read_csv(report / "comparison.csv").set_index("method")
    assert {"clm_loss", "clm_accuracy"} <= set(frame.columns) and not {"mlm_loss", "mlm_accuracy"} & set(frame.columns)
    assert frame.loc["fvt", "clm_accuracy"] == 0.02
    text = (report / "report.md").read_text(encoding="utf-8")
    comparison = text[text.index("## Method comparison"):]
    table = [line for line in comparison.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| method | stage | clm_loss | clm_accuracy | bits_per_byte |")
    assert table[2].startswith("| original | init | 3.1 | 0.41 | 1.66 |")
    assert table[3].startswith("| fvt ⚠ | init | 11.5 | 0.02 | 6.18 |")  # marked in the table …
    assert ("- **fvt (init)**: held-out 6.18 bits per byte is not below its tokenizer's unigram level (3.87"
            in text)  # … and said why below it, as the card says it
    assert "**original (init)**" not in text

    encoder = {"objective": "mlm", "unigram_loss": 7.0, "mlm_loss": 4.0, "mlm_accuracy": 0.3}
    encoders = store.fetch(run_stage(store, "report", {"language": "sw"},
                                     {"intrinsic:focus": _intrinsic(store, folder, "focus", encoder)}))
    columns = set(pd.read_csv(encoders / "comparison.csv").columns)
    assert {"mlm_loss", "mlm_accuracy"} <= columns and not {"clm_loss", "clm_accuracy"} & columns
