"""The model card (``README.md``): Hub metadata and a body written from :class:`CardFacts` alone.

``huggingface_hub.ModelCard``/``ModelCardData`` write the YAML (``model-index`` from ``EvalResult``
objects whose values are the stored results, unrounded); the body shows them rounded for reading,
with the source model's row beside every result.
"""

from __future__ import annotations

import math
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from focusflow.evaluation.downstream.report import score_text
from focusflow.evaluation.downstream.verdict import NOT_COMPARED, RULE_TEXT, parity_word, task_verdict
from focusflow.evaluation.intrinsic import above_unigram
from focusflow.evaluation.records import DECODER_MEASURES, measure_text
from focusflow.methods import INIT_METHODS
from focusflow.publish.facts import UNKNOWN_LICENSE, CardFacts, ModelFacts
from focusflow.publish.tasks import task_dataset
from focusflow.publish.weights import compared_with

FOCUS_CITATION = """@inproceedings{dobler-de-melo-2023-focus,
    title = "{FOCUS}: Effective Embedding Initialization for Monolingual Specialization of Multilingual Models",
    author = "Dobler, Konstantin and de Melo, Gerard",
    booktitle = "Proceedings of the 2023 Conference on Empirical Methods in Natural Language Processing",
    year = "2023",
    publisher = "Association for Computational Linguistics",
    url = "https://aclanthology.org/2023.emnlp-main.829",
    pages = "13440--13454",
}"""

# Intrinsic metrics in the model-index: (stored key, metric type, pretty name); LM metrics are named by the LM loss.
INTRINSIC_METRICS = (("{lm}_loss", "loss", "held-out {lm} loss (nats/token)"),
                     ("bits_per_byte", "bits_per_byte", "held-out bits per byte"),
                     ("{lm}_accuracy", "accuracy", "held-out {lm} accuracy"),
                     ("fidelity", "cosine_similarity", "fidelity to the source model (mean sentence cosine)"),
                     ("retrieval_top1", "retrieval_top1", "top-1 sentence retrieval against the source model"))
#: What a masked LM's bits per byte are (the model-index's name says it): no measure across tokenizers
MASKED_BITS = " (over its masked tokens: compares models of one tokenizer only)"
NOTICE_FILE = "NOTICE"  # the source licence's required notice (LicenceTerms.notice), beside the card
LICENCE_FILE = "LICENSE"  # the source licence's text (LicenceTerms.text), beside the card
HELDOUT_DATASET = "focusflow-heldout"  # a local corpus's held-out split: no Hub dataset id, and none is claimed
SHARE_NAMES = {"copied_share": "copied from the source vocabulary", "combined_share": "FOCUS combination",
               "combined_subword_share": "FOCUS combination (subword vector)", "fvt_share": "FVT mean of pieces",
               "mean_share": "mean embedding", "random_share": "random", "kept_share": "kept"}


def pipeline_tag(facts: CardFacts) -> str:
    return "text-generation" if facts.lm_loss == "clm" else "fill-mask"


def eval_results(facts: CardFacts) -> list[EvalResult]:
    """Every stored result of the model: downstream (mean over seeds, seeds in the name) and intrinsic."""
    results = []
    for row in facts.model.downstream:
        dataset = task_dataset(str(row["task"]), str(row.get("dataset") or ""), str(row.get("language") or ""),
                               facts.model.data_folders.get(str(row["task"]), ()))
        results.append(EvalResult(
            task_type=dataset.task_type, task_name=f"{dataset.task_name} ({row['task']})",
            dataset_type=dataset.dataset_type, dataset_name=dataset.dataset_name,
            dataset_config=dataset.dataset_config, dataset_split="test", metric_type=str(row["metric"]),
            metric_value=float(row["mean"]),
            metric_name=f"{row['metric']} (test, mean of {int(row['n_seeds'])} seeds: {row['seeds']}; "
                        f"std {float(row['std']):.4f})"))
    lm = "mlm" if facts.lm_loss == "mlm" else "clm"
    for key, metric, name in INTRINSIC_METRICS:
        value = facts.model.intrinsic.get(key.format(lm=lm))
        if isinstance(value, (int, float)) and not math.isnan(float(value)):
            results.append(EvalResult(
                task_type=pipeline_tag(facts), task_name="Intrinsic evaluation on held-out text",
                dataset_type=facts.datasets[0] if facts.datasets else HELDOUT_DATASET,  # the corpus it was held out of
                dataset_config=card_language(facts.language) if facts.datasets else None,
                dataset_name=f"held-out {facts.language} text "
                f"({facts.heldout_sentences or '?'} sentences, never trained on)", dataset_split="heldout",
                metric_type=metric, metric_value=float(value),
                metric_name=name.format(lm=lm.upper()) + (MASKED_BITS if metric == "bits_per_byte" and lm == "mlm"
                                                           else "")))
    return results


def card_language(language: str) -> str | None:
    """The card's ``language``: an ISO 639 code as the Hub lists them (``sw`` for ``swa``/``sw-ke``, ``zh`` for
    ``zh-hant``), not the run's spelling; None where the language is not known."""
    from focusflow.languages import LanguageError, normalize_language

    try:
        return normalize_language(language) if language != "unknown" else None
    except LanguageError:
        return None


def card_data(facts: CardFacts, repo_id: str) -> ModelCardData:
    source = facts.source
    extra: dict[str, Any] = {}
    if source.hub_id:
        # new vocabulary and embeddings over the source's body, possibly trained further: a fine-tune of it
        extra = {"base_model": source.hub_id, "base_model_relation": "finetune"}
    results = eval_results(facts)
    return ModelCardData(
        language=card_language(facts.language),
        license=source.license, license_name=source.license_name, license_link=source.license_link,
        library_name="transformers", pipeline_tag=pipeline_tag(facts),
        tags=list(dict.fromkeys(["focusflow", *(["focus"] if _uses_focus(facts) else []), "vocabulary-adaptation",
                                 facts.method,
                                 *(["lapt"] if facts.lapt else []), *(["align"] if facts.align else [])])),
        datasets=facts.datasets or None, model_name=repo_id.split("/")[-1] if results else None,
        eval_results=results or None, **extra)


def _uses_focus(facts: CardFacts) -> bool:
    """Whether FOCUS initialized this model's new rows (a pruned source copies rows; random, FVT or WECHSEL are
    others' methods): only then does the card claim and cite it."""
    spec = INIT_METHODS.get(facts.method)  # the methods table says which rows FOCUS builds
    return spec is not None and spec.builder.rsplit(".", 1)[-1] == "focus_plan"


def _number(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _intrinsic_table(facts: CardFacts) -> list[str]:
    lm = "mlm" if facts.lm_loss == "mlm" else "clm"
    columns = [(f"{lm}_loss", f"held-out {lm.upper()} loss ↓"), ("bits_per_byte", "bits per byte ↓"),
               ("unigram_loss", "its tokenizer's unigram loss"), (f"{lm}_accuracy", "accuracy ↑"),
               ("fidelity", "fidelity ↑"), ("fidelity_chance", "fidelity of mismatched pairs"),
               ("fidelity_centered", "fidelity, mean removed ↑"), ("retrieval_top1", "retrieval top-1 ↑")]
    rows = [m for m in (facts.model, facts.original) if m.intrinsic]
    if not rows:
        return ["No intrinsic evaluation of this model is stored.", ""]
    shown = [(key, title) for key, title in columns if any(key in m.intrinsic for m in rows)]
    lines = ["| model | " + " | ".join(title for _, title in shown) + " |",
             "|---|" + "---|" * len(shown)]
    for m in rows:
        lines.append(f"| {_row_name(facts, m)} | " + " | ".join(_number(m.intrinsic.get(key)) for key, _ in shown)
                     + " |")
    across = ("so compare bits per byte across tokenizers" if lm == "clm" else
              "and a masked LM's bits per byte are over the bytes of its masked tokens: a tokenizer with longer "
              "tokens hides more of the text at each mask, so they compare models of one tokenizer only")
    lines += ["", "Each model is scored with its own tokenizer on the same held-out sentences: the loss is per token of "
              f"that tokenizer, {across}; a loss is meaningful below its tokenizer's unigram loss (token frequencies "
              "alone). Fidelity and retrieval only measure closeness to the source's sentence embeddings, and mean "
              "little near their chance level (the mismatched pairs' cosine)."]
    if not facts.original.intrinsic:
        lines += ["", "The source model's intrinsic row is not stored (run with `orchestration.evaluate_original`)."]
    return [*lines, ""]


def _row_name(facts: CardFacts, m: ModelFacts) -> str:
    return f"**this model** ({facts.label})" if m is facts.model else f"source: {facts.source_spec}"


def _downstream_table(facts: CardFacts) -> list[str]:
    mine = [r for r in facts.model.downstream if r.get("main", True)]
    if not mine:
        return ["No downstream evaluation of this model is stored.", ""]
    theirs = {(r["task"], r["metric"]): r for r in facts.original.downstream}
    lines = ["| task | metric | this model | source model | vs the source, paired by seed | seeds |",
             "|---|---|---|---|---|---|"]
    for row in mine:
        other = theirs.get((row["task"], row["metric"]))
        source = (score_text(other["mean"], other["std"], other["n_seeds"]) if other else "not measured")
        verdict = task_verdict(facts.model.runs, str(row["model"]), row["task"],
                               source_runs=facts.original.runs) if other else None
        seeds = str(row["seeds"])
        if other and str(other.get("seeds")) != seeds:  # the two means are over other seeds: the verdict pairs them
            seeds = f"{seeds} (source: {other.get('seeds')})"
        lines.append(f"| {row['task']} | {row['metric']} | {score_text(row['mean'], row['std'], row['n_seeds'])} | "
                     f"{source} | {verdict.text() if verdict else '-'} | {seeds} |")
    return [*lines, "",
            "Scores ×100, mean ± sample standard deviation over fine-tuning seeds (test split, best dev checkpoint). "
            f"The verdict's {RULE_TEXT}.", ""]


def _candidates(facts: CardFacts) -> list[str]:
    """Every candidate of the run this model came from, side by side, and which one the run ships (its product)."""
    if not facts.candidates or not facts.product:
        return []
    mine = "This model is the run's product" if facts.product == facts.label else \
        f"**This model is not the run's product**: the run ships `{facts.product}`"
    source = {"n_params": facts.original.n_params, "tokens_per_word": facts.original.tokens_per_word,
              **{name: facts.original.intrinsic.get(name) for name in ("bits_per_byte", *dict(DECODER_MEASURES))}}
    extra = [(name, title) for name, title in DECODER_MEASURES  # a masked LM's dev bits compare with nothing
             if facts.lm_loss == "clm" and any(row.get(name) is not None for row in (*facts.candidates, source))]
    header = ["model", "parameters", "tokens per word", "held-out bits per byte", *[title for _, title in extra],
              "dev verdict vs the source", "CPU-minutes"]
    lines = ["### Which model of this run to use", "", f"{mine} ({facts.product_reason}).", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.append("| " + " | ".join([f"source (`{facts.source_spec}`)", *_candidate_cells(source, extra), "", ""]) + " |")
    on_tasks = any(v for c in facts.candidates for v in (c.get("dev_verdicts") or {}).values())  # the choice's
    # every task any candidate has a verdict on, named where there are several: one task's parity is no other's
    tasks = sorted({task for c in facts.candidates for task, v in (c.get("dev_verdicts") or {}).items() if v})
    for candidate in facts.candidates:
        verdicts = candidate.get("dev_verdicts") or {}
        calls = [(task, verdicts.get(task)) for task in tasks]
        dev = "; ".join((f"{task}: " if len(tasks) > 1 else "") + (
            f"{v['mean']:+.1f} ({parity_word(v['parity'])})" if v else "no verdict") for task, v in calls) \
            if any(v for _, v in calls) else (NOT_COMPARED if on_tasks else candidate.get("bits_verdict")
                                               or ("-" if candidate.get("dev_verdicts") else "not measured"))
        minutes = f"{candidate['cpu_minutes']:.1f}" if candidate.get("cpu_minutes") is not None else "-"
        name = f"**{candidate['name']}**" if candidate["name"] == facts.label else candidate["name"]
        lines.append("| " + " | ".join([name, *_candidate_cells(candidate, extra), dev, minutes]) + " |")
    return [*lines, ""]


def _candidate_cells(row: dict[str, Any], extra: list[tuple[str, str]]) -> list[str]:
    """Parameters, tokens per word, held-out bits per byte and the decoder measures shown, of a candidate or the
    source."""
    bits = f"{row['bits_per_byte']:.3f}" if row.get("bits_per_byte") is not None else "-"
    params = f"{row['n_params'] / 1e6:.1f}M" if row.get("n_params") else "-"
    tpw = f"{row['tokens_per_word']:.2f}" if row.get("tokens_per_word") else "-"
    return [params, tpw, bits, *[measure_text(row.get(name), name) for name, _ in extra]]


def _efficiency_table(facts: CardFacts) -> list[str]:
    lines = ["| | source model | this model |", "|---|---|---|",
             f"| parameters | {_number(facts.original.n_params)} | {_number(facts.model.n_params)} |",
             f"| vocabulary | {_number(facts.original.vocab_size)} | {_number(facts.model.vocab_size)} |",
             f"| tokens per word (held-out {facts.language}) | {_number(facts.original.tokens_per_word, 3)} | "
             f"{_number(facts.model.tokens_per_word, 3)} |"]
    return [*lines, ""]


#: What a candidate model is (methods.CANDIDATES), said to the card's reader: its vocabulary is the source's own.
CANDIDATE_TEXTS = {
    "prune": "its own vocabulary pruned to the pieces text of the language needs, every kept row the source's own",
    "prune+extend": "its own vocabulary pruned to the pieces text of the language needs, plus the language's most "
                    "frequent new tokens (their rows initialized by FOCUS)",
}


def _made_with(facts: CardFacts) -> str:
    """How its vocabulary and embeddings were made, for the card's first line."""
    if facts.candidate in CANDIDATE_TEXTS:
        return CANDIDATE_TEXTS[facts.candidate]
    return f"a new tokenizer trained on `{facts.language}` text and `{facts.method}` embedding initialization"


def _how_made(facts: CardFacts) -> list[str]:
    copy = f"; its weights were read from {facts.source.copy}, the start to compare with" if facts.source.copy else ""
    method = (f"the `{facts.candidate}` candidate: {CANDIDATE_TEXTS[facts.candidate]}, a vocabulary of "
              f"{_number(facts.model.vocab_size)} tokens" if facts.candidate in CANDIDATE_TEXTS else
              f"`{facts.method}` embedding initialization, mode `{facts.mode}`, new vocabulary of "
              f"{_number(facts.model.vocab_size)} tokens trained on the corpus below")
    lines = [f"- **Source model**: `{facts.source_spec}` ({facts.architecture}{copy})", f"- **Method**: {method}"]
    if facts.fates:
        shares = ", ".join(f"{SHARE_NAMES.get(k, k.removesuffix('_share'))} {100 * v:.1f}%"
                           for k, v in sorted(facts.fates.items(), key=lambda kv: -kv[1]) if v > 0 or k == "random_share")
        lines.append(f"- **Where each new embedding row came from** (`transfer_report.parquet`): {shares}")
    if facts.align:
        lines.append("- **Embedding alignment** to the source model's hidden states: "
                     + ", ".join(f"{k} {_number(v)}" for k, v in facts.align.items()))
    if facts.lapt:
        lines.append("- **Language-adaptive pretraining (LAPT)**: "
                     + ", ".join(f"{k.replace('_', ' ')} {_number(v)}" for k, v in facts.lapt.items()))
    else:
        lines.append("- **No language-adaptive pretraining (LAPT)** was run on this model.")
    corpus = facts.corpus
    if corpus:
        what = corpus.get("source", "?")
        lines.append(f"- **Corpus**: `{what}`" + (f" ({_number(corpus.get('documents'))} documents, "
                                                    f"{_number(corpus.get('bytes'))} bytes)"
                                                    if corpus.get("documents") else ""))
    return [*lines, ""]


def _usage(facts: CardFacts, repo_id: str) -> list[str]:
    example = facts.example or "..."
    if facts.lm_loss == "clm":
        prompt = " ".join(example.split()[:4])
        code = ["from transformers import pipeline", "",
                f'generate = pipeline("text-generation", model="{repo_id}")',
                f"print(generate({prompt!r}, max_new_tokens=20)[0][\"generated_text\"])"]
    else:
        words = example.split()
        middle = len(words) // 2
        left, right = " ".join(words[:middle]), " ".join(words[middle + 1:])
        code = ["from transformers import pipeline", "",
                f'fill = pipeline("fill-mask", model="{repo_id}")',
                f"text = {left!r} + f\" {{fill.tokenizer.mask_token}} \" + {right!r}",
                "for guess in fill(text, top_k=3):",
                "    print(guess[\"token_str\"], round(guess[\"score\"], 3))"]
    return ["```python", *code, "```", "", *_embedding_usage(facts, repo_id, example)]


def _embedding_usage(facts: CardFacts, repo_id: str, example: str) -> list[str]:
    """A sentence encoder's use (e5's: prefixed texts, mean-pooled and normalized states), for a model derived from
    one."""
    prefixes = facts.source.embedding_prefixes
    if prefixes is None or facts.lm_loss == "clm":
        return []
    query, passage = prefixes
    words = example.split()
    code = ["import torch", "from transformers import AutoModel, AutoTokenizer", "",
            f'tokenizer = AutoTokenizer.from_pretrained("{repo_id}")',
            f'model = AutoModel.from_pretrained("{repo_id}")',
            f"texts = [{query + ' '.join(words[:3])!r}, {passage + example!r}]",
            'batch = tokenizer(texts, padding=True, truncation=True, max_length=512, return_tensors="pt")',
            "with torch.no_grad():",
            "    states = model(**batch).last_hidden_state",
            'mask = batch["attention_mask"].unsqueeze(-1).float()',
            "vectors = torch.nn.functional.normalize((states * mask).sum(1) / mask.sum(1), dim=-1)",
            "print(round(float(vectors[0] @ vectors[1]), 3))"]
    return [f"As its source `{facts.source.hub_id}`, it encodes sentences: prefix a text with `{query.strip()}` or "
            f"`{passage.strip()}` and average its last hidden states:", "",
            "```python", *code, "```", ""]


def _limitations(facts: CardFacts) -> list[str]:
    lines: list[str] = []
    check = facts.weight_check
    if check is not None and not check.passed:
        lines.append(f"- **Warning**: this model FAILED focusflow's weight check ({check.problem}; compared with "
                     f"{compared_with(check)}) and was published with `--force`: its weights are probably not a "
                     "working model.")
    for m in (facts.model, facts.original):
        why = above_unigram(m.intrinsic)
        if why:
            lines.append(f"- **Warning**: {_row_name(facts, m)}: {why}.")
    for m in (facts.model, facts.original):
        for task, seeds in _plateau_seeds(m).items():
            lines.append(f"- **Warning**: on {task}, seed(s) {', '.join(map(str, seeds))} of {_row_name(facts, m)} "
                         "never left the all-O plateau (test F1 0: no entity predicted); the mean includes them.")
    if not facts.model.downstream:
        lines.append("- Downstream tasks were not measured for this model.")
    elif not facts.original.downstream:
        lines.append("- The source model was not evaluated downstream with the same settings: no comparison row.")
    evaluation = facts.evaluation
    if evaluation:
        budget = [f"{k.replace('_', ' ')} {v}" for k, v in evaluation.items()
                  if k in ("seeds", "epochs", "max_train_samples", "max_eval_samples", "max_test_samples", "lr")
                  and v is not None]
        lines.append("- Evaluation budget: " + (", ".join(budget) if budget else "the task defaults") + ".")
    if facts.heldout_sentences:
        lines.append(f"- Intrinsic metrics come from {facts.heldout_sentences} held-out sentences of the same corpus "
                     "(not another domain).")
    if facts.source.license == UNKNOWN_LICENSE:
        lines.append(f"- The licence of the source model `{facts.source_spec}` is not known to focusflow: check it "
                     "before use; this card does not guess one.")
    if check is not None and check.passed:
        lines.append(f"- focusflow's weight check passed: every tensor finite, compared with {compared_with(check)}.")
    lines.append("- Only the measurements above were made: no safety, bias or generation-quality evaluation.")
    return [*lines, ""]


def _licence(facts: CardFacts) -> list[str]:
    """A licence whose terms a derived model must name (:data:`~focusflow.publish.facts.SOURCE_LICENCES`): named
    with its link, its text shipped as ``LICENSE`` and its notice as ``NOTICE``; none for the others (the metadata's
    ``license`` says it)."""
    terms = facts.source.terms
    if terms is None:
        return []
    lines = ["## Licence", "",
             f"This model is derived from `{facts.source_spec}`: its use and redistribution are subject to the "
             f"[{terms.name}]({terms.link})."]
    if terms.text:
        holder = facts.source.copyright_holder if facts.source.license == "mit" else None
        said = f", with the source's copyright notice ({holder})" if holder else ""
        lines += ["", f"`{LICENCE_FILE}` carries its text{said}."]
        if facts.source.license == "mit" and holder is None:
            lines += ["", f"focusflow does not know the source's copyright notice: `{LICENCE_FILE}` names \"the "
                          "copyright holders\" of the source; put its own notice there before you redistribute."]
    if terms.notice:
        lines += ["", f"`{NOTICE_FILE}` carries the required notice: \"{terms.notice}\"."]
    if facts.source.terms_file is not None:
        lines += ["", f"`{facts.source.terms_file.name}` is a copy of the {terms.name}, as the source's package ships "
                      "them."]
    if terms.restrictions:
        lines += ["", terms.restrictions]
    return [*lines, ""]


def _plateau_seeds(m: ModelFacts) -> dict[str, list[int]]:
    """NER seeds whose test F1 stayed 0: the model only ever predicted the outside tag."""
    runs = m.runs
    if runs is None or runs.empty or not {"kind", "metric", "value", "seed", "task"} <= set(runs.columns):
        return {}
    flat = runs[(runs["kind"] == "ner") & (runs["metric"] == "f1") & (runs["value"].astype(float) <= 0.0)]
    return {str(task): sorted(int(s) for s in group["seed"]) for task, group in flat.groupby("task")}


def build_card(facts: CardFacts, repo_id: str, focusflow_version: str) -> ModelCard:
    """The card: YAML metadata + body, from stored facts only."""
    data = card_data(facts, repo_id)
    name = repo_id.split("/")[-1]
    stage = {"lapt": "after language-adaptive pretraining", "lapt-checkpoint": "a checkpoint of language-adaptive "
             "pretraining", "align": "after embedding alignment"}.get(facts.stage, "at initialization")
    body = [
        f"# {name}", "",
        f"A {'masked' if facts.lm_loss == 'mlm' else 'causal'} language model for the language "
        f"**`{facts.language}`**: `{facts.source_spec}` specialized to it with {_made_with(facts)} "
        f"({facts.label}, {stage}), made with focusflow"
        f"{' and [FOCUS](https://arxiv.org/abs/2305.14481)' if _uses_focus(facts) else ''}.", "",
        "## How it was made", "", *_how_made(facts),
        "The run configuration that reproduces it is `focusflow_config.yaml`; `lineage.json` lists the artifact key "
        "of every stage; `transfer_report.parquet` gives every token's fate.", "",
        "## Results", "",
        "### Held-out text", "", *_intrinsic_table(facts),
        "### Downstream tasks", "", *_downstream_table(facts),
        "### Size and tokenization", "", *_efficiency_table(facts), *_candidates(facts),
        "## Usage", "", *_usage(facts, repo_id),
        "## Limitations", "", *_limitations(facts),
        *_licence(facts),
        *(["## Citation", "", "```bibtex", FOCUS_CITATION, "```", ""] if _uses_focus(facts) else []),
        f"Made with focusflow {focusflow_version}.", ""]
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(body))
