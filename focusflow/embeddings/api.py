"""``initialize_model``: a saved source model + a target tokenizer -> a complete initialized model folder."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from focusflow.config import FastTextSpec
from focusflow.corpus.io import read_texts, stable_stats
from focusflow.corpus.split import HELDOUT_FILE
from focusflow.embeddings.auxiliary import AuxVectors, load_aux_vectors, train_aux_embeddings
from focusflow.embeddings.modes import EXTEND_RULE, count_token_ids, extend_tokenizer, frequency_order, prune_tokenizer
from focusflow.embeddings.plan import PlanBuilder
from focusflow.embeddings.reading import READING_RULE, corpus_spelling, reading_order
from focusflow.embeddings.record import REPORT_FILE, TOTALS_FILE
from focusflow.embeddings.transfer import make_report, summarize, transfer_embeddings
from focusflow.errors import InputError
from focusflow.methods import Fate, init_method
from focusflow.models.loading import load_source
from focusflow.models.surgery import token_parameters, write_model
from focusflow.storage.atomic import atomic_path, atomic_write
from focusflow.tokenizer.canonical import backend_spec, canonical_vocab
from focusflow.tokenizer.metrics import segmentation_agreement

log = logging.getLogger(__name__)


def _aux_for(method: str, target_tokenizer_dir: Path | None, aux_dir: Path | None, out_dir: Path,
             options: dict[str, Any]) -> AuxVectors | None:
    if not init_method(method).needs_aux_vectors:
        return None
    if aux_dir is not None:
        return load_aux_vectors(Path(aux_dir))
    train = options.get("train")
    if train is None or target_tokenizer_dir is None:
        raise InputError(f"method {method!r} needs auxiliary vectors: pass aux_dir (from train_aux_embeddings) "
                         "or train=<corpus.jsonl> to train fastText now")
    spec = options.get("fasttext") or FastTextSpec()
    folder = out_dir.with_name(out_dir.name + ".fasttext")
    stats = train_aux_embeddings(Path(target_tokenizer_dir), Path(train), spec, folder)
    log.info("trained fastText: %s", stats)
    return load_aux_vectors(folder)


def initialize_model(source_dir: Path, target_tokenizer_dir: Path | None, out_dir: Path, method: str,
                     mode: str = "replace", aux_dir: Path | None = None, seed: int = 0, **options: Any) -> dict[str, Any]:
    """Write an initialized HF model folder (+ transfer_report.parquet, transfer_totals.json); return the totals.

    Options: ``train`` (corpus jsonl; needed by prune, by extend's frequency ranking, and to train fastText when
    no ``aux_dir``), ``fasttext`` (FastTextSpec), ``extend_top_n``, FOCUS's ``rare_tokens`` (``subword``,
    ``fvt`` or the paper's ``random``: rows for new tokens without a fastText vector), WECHSEL's
    ``wechsel_source_vectors``, ``wechsel_target_vectors``, ``wechsel_dictionary``, and ``chunk_rows``.
    """
    init_method(method)  # a ValueError naming the choices for an unknown method
    if mode not in INIT_MODES:
        raise InputError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    out_dir = Path(out_dir)
    model, source_tokenizer, _ = load_source(Path(source_dir))
    params = token_parameters(model)
    padded = {name: len(matrix) for name, matrix in params.matrices.items() if len(matrix) > len(source_tokenizer)}
    if padded:  # decoders often round the matrix up (e.g. to a multiple of 64); rows past the tokenizer are unused
        log.info("source matrices %s have more rows than the tokenizer's %d tokens; the extra rows are not used",
                 padded, len(source_tokenizer))
        params.matrices.update({name: params.matrices[name][: len(source_tokenizer)] for name in padded})
    transfer_options = {k: v for k, v in options.items()
                        if k not in ("train", "fasttext", "extend_top_n", "extend_rule", "prune_budget", "prune_reserve",
                                     "reading_rule")}
    built = INIT_MODES[mode](ModeInputs(model, source_tokenizer, params.matrices, method,
                                        Path(target_tokenizer_dir) if target_tokenizer_dir is not None else None,
                                        Path(aux_dir) if aux_dir is not None else None, out_dir, seed, options,
                                        transfer_options))
    matrices, report, totals, target_tokenizer = built
    written = write_model(model, target_tokenizer, matrices, out_dir)
    totals.update(mode=mode, vocab_size=written["vocab_size"], n_params=written["n_params"], seed=seed)
    with atomic_path(out_dir / REPORT_FILE) as temporary:
        report.to_parquet(temporary, index=False)
    atomic_write(out_dir / TOTALS_FILE, json.dumps(stable_stats(totals), indent=2, ensure_ascii=False, default=str))
    return totals


def prune_rows(model: Any, matrices: dict[str, np.ndarray], budget: float) -> int:
    """How many vocabulary rows a pruned model may keep to have at most ``budget`` × the source's parameters (the
    body stays whole; each kept row costs its row in every token-indexed matrix)."""
    total = sum(p.numel() for p in model.parameters())
    per_row = sum(int(np.prod(matrix.shape[1:])) for matrix in matrices.values())
    vocabulary = sum(int(matrix.size) for matrix in matrices.values())
    return max(0, int((budget * total - (total - vocabulary)) // max(per_row, 1)))


@dataclass(frozen=True)
class ModeInputs:
    """What every mode's builder is given: the source model, its tokenizer and token matrices, the method, the
    target tokenizer's folder (replace: the new vocabulary; extend: the tokens added), fastText, the options."""

    model: Any
    source_tokenizer: Any
    matrices: dict[str, np.ndarray]
    method: str
    target_dir: Path | None
    aux_dir: Path | None
    out_dir: Path
    seed: int
    options: dict[str, Any]
    transfer_options: dict[str, Any]


Built = tuple[dict[str, np.ndarray], pd.DataFrame, dict[str, Any], Any]  # matrices, report, totals, tokenizer


def _require_rule(options: Mapping[str, Any], name: str, current: int, verb: str) -> None:
    """A mode's rule in the key (``reading_rule``, ``extend_rule``) must be this focusflow's: another one's artifact
    would be rebuilt under its key with this one's rule."""
    if options.get(name, current) != current:
        raise InputError(f"{name} {options[name]!r}: this focusflow {verb} with rule {current}")


def _prune(given: ModeInputs) -> Built:
    """The source's own vocabulary, pruned to the corpus's pieces and, while they fit the budget, the pieces new text
    of the language is likeliest to need (``embeddings.reading``); every row copied."""
    source_tokenizer, options = given.source_tokenizer, given.options
    train = options.get("train")
    if train is None:
        raise InputError("mode 'prune' needs train=<corpus.jsonl> (the tokens the corpus uses are kept)")
    _require_rule(options, "reading_rule", READING_RULE, "prunes")
    counts = count_token_ids(source_tokenizer, read_texts(train))
    rows = max(0, prune_rows(given.model, given.matrices, float(options.get("prune_budget", 0.0)))
               - int(options.get("prune_reserve", 0)))
    used = np.flatnonzero(counts)
    spelling = corpus_spelling(read_texts(train))
    order = reading_order(source_tokenizer, used, spelling)
    room = rows - len(used)
    for _ in range(3):  # what pruning must keep besides (special tokens, merge ingredients) comes off the room
        keep = np.union1d(used, order[:max(0, room)])
        target_tokenizer, kept = prune_tokenizer(source_tokenizer, keep)
        if len(kept) <= rows or len(keep) <= len(used):
            break
        room -= len(kept) - rows
    builder = PlanBuilder(len(kept), len(source_tokenizer))
    builder.copy(np.arange(len(kept)), kept, Fate.KEPT)
    plan = builder.build()
    matrices = {name: plan.apply(matrix) for name, matrix in given.matrices.items()}
    report = make_report(plan, {}, canonical_vocab(source_tokenizer), canonical_vocab(target_tokenizer))
    totals = summarize(plan, {}, method="prune")
    budget = float(options.get("prune_budget", 0.0))
    n_source = sum(p.numel() for p in given.model.parameters())
    n_kept = n_source - sum(int(matrix.size) for matrix in given.matrices.values()) + sum(
        int(matrix.size) for matrix in matrices.values())
    # the corpus's own pieces are always kept: a source whose body alone exceeds the budget cannot be pruned within it
    totals.update(corpus_pieces=len(used), reading_pieces=len(keep) - len(used), reading_rule=READING_RULE,
                  prune_budget=budget,
                  within_budget=bool(n_kept <= budget * n_source) if budget else None)
    heldout = Path(train).with_name(HELDOUT_FILE)
    if heldout.is_file():  # how much of the held-out text the pruned vocabulary still cuts as the source does
        totals["reads_as_source"] = segmentation_agreement(source_tokenizer, target_tokenizer, read_texts(heldout))
    return matrices, report, totals, target_tokenizer


def _replace(given: ModeInputs) -> Built:
    """A new vocabulary (the language tokenizer's) whose rows the method initializes."""
    from transformers import AutoTokenizer

    if given.target_dir is None:
        raise InputError("mode 'replace' needs a target tokenizer")
    target_tokenizer = AutoTokenizer.from_pretrained(str(given.target_dir))
    aux = _aux_for(given.method, given.target_dir, given.aux_dir, given.out_dir, given.options)
    result = transfer_embeddings(given.source_tokenizer, target_tokenizer, given.matrices, given.method, aux=aux,
                                 seed=given.seed, **given.transfer_options)
    return result.matrices, result.report, result.totals, target_tokenizer


def _extend(given: ModeInputs) -> Built:
    """Source vocabulary kept as is; the top-N new tokens of the language tokenizer appended and initialized."""
    from transformers import AutoTokenizer

    if given.target_dir is None:
        raise InputError("mode 'extend' needs the language tokenizer whose tokens are added")
    source_tokenizer, options, language_dir = given.source_tokenizer, given.options, given.target_dir
    language = AutoTokenizer.from_pretrained(str(language_dir))
    aux = _aux_for(given.method, language_dir, given.aux_dir, given.out_dir, options)
    result = transfer_embeddings(source_tokenizer, language, given.matrices, given.method, aux=aux, seed=given.seed,
                                 **given.transfer_options)
    forms = canonical_vocab(language)
    copied = result.report["fate"].isin([fate for fate in Fate if fate.copied]).to_numpy()
    is_new = ~copied & np.array([f.kind != "special" for f in forms])
    train = options.get("train")
    _require_rule(options, "extend_rule", EXTEND_RULE, "extends")
    # only pieces the corpus uses: one it never does carries nothing, and a byte the source lacks (SmolLM2 has no
    # 0xC0 or 0xF5-0xFF) would be drawn at random, a row that wins greedy decoding over every real token
    order = frequency_order(language, read_texts(train) if train else None, used_only=True)
    top_n = int(options.get("extend_top_n", 10_000))
    candidates = order[is_new[order]]
    spec = backend_spec(language)
    unigram = spec["model"]["type"] == "Unigram"
    scores = {i: float(s) for i, (_, s) in enumerate(spec["model"]["vocab"])} if unigram else None
    # a BPE source adds a piece only when a merge can build it, so it reads on down the list until top_n are in
    bpe = backend_spec(source_tokenizer)["model"]["type"] == "BPE"
    chosen = candidates if bpe else candidates[:top_n]
    extended, added = extend_tokenizer(source_tokenizer, [forms[i] for i in chosen.tolist()], scores, limit=top_n)
    added_ids = np.asarray([f.id for f in added], np.int64)
    n_source = len(source_tokenizer)
    matrices = {name: np.concatenate([matrix.astype(np.float32), result.matrices[name][added_ids]])
                for name, matrix in given.matrices.items()}
    kept = pd.DataFrame({"target_id": np.arange(n_source),
                         "token": source_tokenizer.convert_ids_to_tokens(list(range(n_source))),
                         "fate": Fate.KEPT.value, "source_id": np.arange(n_source), "source_token": None, "support": 0,
                         "top_anchors": ""})
    new_part = result.report.iloc[added_ids].copy()
    new_part["target_id"] = np.arange(len(added_ids)) + n_source
    report = pd.concat([kept, new_part], ignore_index=True)
    totals = dict(result.totals)
    totals.update(kept=n_source, added=len(added_ids), added_fates=new_part["fate"].value_counts().to_dict())
    return matrices, report, totals, extended


#: The modes, each a row: the builder of its vocabulary and rows (``init.mode``, a candidate's ``mode``).
INIT_MODES: dict[str, Callable[[ModeInputs], Built]] = {"replace": _replace, "extend": _extend, "prune": _prune}
MODES = tuple(INIT_MODES)
