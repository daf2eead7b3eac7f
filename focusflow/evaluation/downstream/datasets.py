"""Downstream datasets: readers for the published file formats, Hub loaders, split completion.

Four kinds of task, each with one example type (the kinds themselves: ``kinds.py``):

- ``ner``: :class:`NerExample` (words + BIO/IOB2 tags), CoNLL files ``word TAG`` per line,
  a blank line between sentences; the label set is read from the data.
- ``nli``: :class:`NliExample` (premise, hypothesis, label), XNLI-style TSV
  ``premise<TAB>hypothesis<TAB>label``; labels entailment / neutral / contradiction.
- ``qa``: :class:`QaExample` (question, context, gold answers), SQuAD 1.1 JSON.
- ``cls``: :class:`ClsExample` (text, label), ``label<TAB>text`` lines or a headed TSV/CSV/JSON(L)/Parquet
  whose columns name the label (``label``, ``category``, ...) and the text (``text``, ``sentence``, ``article``,
  ...; a ``headline``/``title`` column goes before it, as MasakhaNEWS's headline + text); a ``labels.txt``
  beside the files (SIB-200) fixes the label set and its order (and names a Hub export's label indices); a split
  without a label column (a shared task's unlabelled test set) or with a header alone is completed from the others.

A split's file is ``train``/``dev``/``test`` with the kind's extension (any case), else the one file whose name
holds the split as a word (``hau_train.tsv``, ``train_clean.tsv``, ``daily-news-dikgang-dev.tsv``).

Splits are completed deterministically (``split_seed``, independent of the fine-tuning seed,
so every model and seed sees the same train/dev/test):

- train + dev + test: used as they are;
- train + test, no dev: dev = 10% of train;
- train + dev, no test: the published dev set becomes test, dev = 10% of train (the usual
  protocol for TyDiQA GoldP and XNLI translate-train style evaluation);
- a single labelled file (e.g. the XNLI dev set alone): 70% train / 10% dev / 20% test.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import random
import re
import unicodedata
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from focusflow.corpus.io import compression_of, decompressing, open_bytes, uncompressed_name
from focusflow.errors import FocusflowError

log = logging.getLogger(__name__)

NLI_LABELS: tuple[str, ...] = ("entailment", "neutral", "contradiction")
NLI_LABEL_ALIASES = {"contradictory": "contradiction"}  # the XNLI-MT translate-train files' spelling
DEV_FRACTION = 0.1
SINGLE_FILE_FRACTIONS = (0.7, 0.1, 0.2)  # train, dev, test when only one labelled file exists


class DataFormatError(FocusflowError, ValueError):
    """An evaluation file is empty, malformed or inconsistent; the message names file and line."""


@dataclass(frozen=True)
class NerExample:
    words: tuple[str, ...]
    tags: tuple[str, ...]


@dataclass(frozen=True)
class NliExample:
    premise: str
    hypothesis: str
    label: str
    language: str = ""  # XNLI 1.0's own ``language`` column, where the file has one


@dataclass(frozen=True)
class QaExample:
    id: str
    question: str
    context: str
    answers: tuple[tuple[str, int], ...]  # (text, character start), at least one, non-empty text


@dataclass(frozen=True)
class ClsExample:
    text: str
    label: str


Example = NerExample | NliExample | QaExample | ClsExample


@dataclass
class TaskData:
    """One task's three splits, its label set, and where every split came from."""

    kind: str
    name: str
    language: str
    train: list[Any]
    dev: list[Any]
    test: list[Any]
    labels: list[str] = field(default_factory=list)
    provenance: dict[str, str] = field(default_factory=dict)

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.train), "dev": len(self.dev), "test": len(self.test)}

    def content_hash(self) -> str:
        """What the splits hold, example by example, and the label set: a run scored on other data (a rewritten
        file, another ``split_seed``, another machine's copy) is another run, though the sizes agree."""
        digest = hashlib.sha256(json.dumps(self.labels, ensure_ascii=False).encode())
        for split in (self.train, self.dev, self.test):
            digest.update(b"\x1e")
            for example in split:
                digest.update(json.dumps(asdict(example), ensure_ascii=False, sort_keys=True).encode() + b"\n")
        return digest.hexdigest()[:16]


# --------------------------------------------------------------------------- readers


def _read_text(path: Path) -> str:
    """A data file's text, decompressed where its name says so (``train.txt.gz``, as some are published)."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    with decompressing(str(path)), open_bytes(str(path), compression_of(path.name)) as handle:
        raw = handle.read()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise DataFormatError(f"{path}:{line}: not UTF-8 text (byte {raw[exc.start]:#04x} at offset {exc.start}); "
                              "convert the file to UTF-8") from None
    if not text.strip():
        raise DataFormatError(f"{path} is empty; expected evaluation data in the published format")
    return text


def data_suffix(path: Path) -> str:
    """The format's suffix of a data file's name, in lower case, under a compression's (``.tsv`` of ``a.TSV.gz``)."""
    return Path(uncompressed_name(path.name)).suffix.lower()


_COLUMNS = re.compile(r"[ \t]+")  # CoNLL columns; other Unicode spaces (NBSP, U+2028) belong to the word
#: The language prefix of every word in WikiANN's original files (Rahimi et al.'s ``sw:Khalid<TAB>B-PER``).
_LANGUAGE_PREFIX = re.compile(r"^([a-z]{2,3}(?:-[a-z]+)*|simple):.")  # sw:, zh-min-nan:, be-x-old:, simple:


#: BIOES (IOBES) tags as the BIO ones they stand for: a single-word entity begins, an entity's last word is inside.
_BIOES_AS_BIO = {"S-": "B-", "E-": "I-"}


def _is_bio_tag(tag: str, bioes: bool = False) -> bool:
    """O, B-X or I-X; with ``bioes`` also S-X and E-X (a tag column's, never a comment's or a word's)."""
    return tag == "O" or (len(tag) > 2 and tag[:2] in ("B-", "I-", *(_BIOES_AS_BIO if bioes else ())))


def _lines(text: str) -> list[str]:
    """Lines split at ``\n`` only (``str.splitlines`` also splits at U+2028, U+0085, ..., which may sit inside
    a word, and would shift every later line number); a file written with old Mac line ends (``\r`` alone) at
    those."""
    if "\n" not in text and "\r" in text:
        return text.split("\r")
    return [line.removesuffix("\r") for line in text.split("\n")]


def _columns(line: str) -> list[str]:
    """A CoNLL line's columns: at tabs where the line has one (a word may hold a space there, as WikiANN's loader
    reads it), else at runs of spaces. Spaces around a column are none of it, nor any whitespace around the last
    (a no-break space after a tag); a word that is itself a no-break space stays one."""
    columns = [column.strip(" ") for column in line.split("\t")] if "\t" in line else _COLUMNS.split(line)
    return columns if len(columns) == 1 else [*columns[:-1], columns[-1].strip()]


def read_conll(path: Path) -> list[NerExample]:
    """CoNLL NER: ``word TAG`` per line (space/tab separated; the word is the first column, the tag the last; BIO
    tags, BIOES ones read as the BIO tags they stand for),
    blank lines between sentences, ``-DOCSTART-`` lines skipped, a byte-order mark inside the file (files joined
    with ``cat``) dropped. WikiANN's original files (every word ``sw:``-prefixed, a few test lines without a tag)
    read as its own loader reads them: the prefix stripped, a missing tag ``O``.

    GermEval 2014's published TSV (``index<TAB>word<TAB>outer<TAB>inner``, ``#`` source lines before each
    sentence) is recognized by its index column (1, 2, 3, ... in every sentence); its outer layer is the tag,
    as in the Hub's ``ner_tags``.
    """
    path = Path(path)
    sentences: list[list[tuple[int, list[str], str]]] = []
    rows: list[tuple[int, list[str], str]] = []
    empty_words: list[int] = []
    for number, raw in enumerate(_lines(_read_text(path)), start=1):
        raw = raw.lstrip("\ufeff")
        line = raw.strip(" \t")
        if not line:
            if rows:
                sentences.append(rows)
                rows = []
            continue
        columns = _columns(line)
        if line.startswith("-DOCSTART-") or (line.startswith("#") and not _is_bio_tag(columns[-1])):
            continue  # document marker; a GermEval-style '# source [date]' line
        if len(columns) == 1 and raw[:1] in (" ", "\t") and _is_bio_tag(columns[0]):
            columns = ["", columns[0]]  # ' TAG': an empty word, which the datasets' own loaders read as ""
            empty_words.append(number)
        if len(columns) < 2 and not _LANGUAGE_PREFIX.match(columns[0]):
            raise DataFormatError(f"{path}:{number}: expected 'word TAG', got {raw!r}")
        rows.append((number, columns, raw))
    if rows:
        sentences.append(rows)
    _strip_language_prefix(path, sentences)
    if empty_words:
        log.warning("%s: %d line(s) with an empty word accepted as the official loader reads them (first at line %d)",
                    path, len(empty_words), empty_words[0])
    if not sentences:
        raise DataFormatError(f"{path} holds no sentences")
    indexed = all(len(columns) >= 4 and columns[0] == str(position)
                  for rows in sentences for position, (_, columns, _) in enumerate(rows, start=1))
    word_column, tag_column = (1, 2) if indexed else (0, -1)
    examples = []
    for rows in sentences:
        for number, columns, raw in rows:
            if not _is_bio_tag(columns[tag_column], bioes=True):
                raise DataFormatError(f"{path}:{number}: tag {columns[tag_column]!r} is not a BIO/IOB2 tag "
                                      f"(O, B-X, I-X; or BIOES's S-X, E-X) in {raw!r}")
            prefix = columns[tag_column][:2]
            if prefix in _BIOES_AS_BIO:
                columns[tag_column] = _BIOES_AS_BIO[prefix] + columns[tag_column][2:]
        examples.append(NerExample(tuple(columns[word_column] for _, columns, _ in rows),
                                   tuple(columns[tag_column] for _, columns, _ in rows)))
    return examples


#: An NLI file's header names, each column under any of its names (XNLI 1.0's published files: sentence1, sentence2,
#: gold_label; XNLI-MT and exports: premise, hypothesis, label), in whatever order its columns come.
NLI_COLUMNS = {"premise": ("premise", "sentence1"), "hypothesis": ("hypothesis", "sentence2"),
               "label": ("label", "gold_label")}


def _named_nli_header(row: Sequence[str]) -> list[int] | None:
    """The premise, hypothesis and label columns of a header row that names all three, else None."""
    header = [cell.strip().lower() for cell in row]
    found = [next((header.index(name) for name in names if name in header), None) for names in NLI_COLUMNS.values()]
    return None if None in found else found  # type: ignore[return-value]


def _xnli_columns(path: Path, rows: list[list[str]], wanted: list[int]) -> list[list[str]]:
    """Premise, hypothesis and label by their header's names (XNLI 1.0's ``xnli.dev.tsv`` has 19 columns and every
    language's rows; a header may name them in any order), and the row's ``language`` column where there is one (the
    task's language is kept from it: ``nli:xnli:LANG``; a folder task of several languages is refused)."""
    header = [cell.strip() for cell in rows[0]]
    body = [(number, row) for number, row in enumerate(rows[1:], start=2) if row and any(cell.strip() for cell in row)]
    if "language" in header:
        wanted = [*wanted, header.index("language")]
    short = next((number for number, row in body if len(row) <= max(wanted)), None)
    if short is not None:
        raise DataFormatError(f"{path}:{short}: fewer columns than its header names ({len(header)})")
    return [["premise", "hypothesis", "label"]] + [[row[i] for i in wanted] for _, row in body]


def nli_languages(examples: Sequence[Any]) -> list[str]:
    """The languages an NLI file's own column names (none: ``[]``; examples of other kinds name none)."""
    return sorted({language for example in examples if (language := getattr(example, "language", ""))})


def _strip_language_prefix(path: Path, sentences: list[list[tuple[int, list[str], str]]]) -> None:
    """WikiANN's original layout in place: when every word carries one language prefix (``sw:``), the words lose
    it and a line without a tag gets ``O``; a tagless line in any other file is an error."""
    words = [columns[0] for rows in sentences for _, columns, _ in rows if columns[0]]
    found = _LANGUAGE_PREFIX.match(words[0]) if words else None
    prefix = found.group(1) + ":" if found else None
    if prefix is None or not all(word.startswith(prefix) for word in words):
        tagless = next((row for rows in sentences for row in rows if len(row[1]) < 2), None)
        if tagless is not None:
            raise DataFormatError(f"{path}:{tagless[0]}: expected 'word TAG', got {tagless[2]!r}")
        return
    for rows in sentences:
        for _, columns, _ in rows:
            columns[0] = columns[0].removeprefix(prefix)
            if len(columns) < 2:
                columns.append("O")
    log.info("%s: WikiANN's original layout: the language prefix %r stripped from every word", path, prefix)


def read_nli_tsv(path: Path) -> list[NliExample]:
    """XNLI-style TSV: ``premise<TAB>hypothesis<TAB>label``, or any order a header names (:data:`NLI_COLUMNS`);
    labels are entailment / neutral / contradiction (case-insensitive; XNLI-MT's ``contradictory`` is read as
    contradiction)."""
    path = Path(path)
    examples: list[NliExample] = []
    allowed = set(NLI_LABELS)
    # a carriage return inside a line (a cell edited on Windows) is a space, as the NER reader reads it
    reader = csv.reader((line.replace("\r", " ") for line in _lines(_read_text(path))), delimiter="\t",
                        quoting=csv.QUOTE_NONE)
    try:
        rows = list(reader)
    except csv.Error as exc:  # a field over csv's size limit
        raise DataFormatError(f"{path}:{reader.line_num}: {exc}") from None
    named = _named_nli_header(rows[0]) if rows else None
    if named is not None:
        rows = _xnli_columns(path, rows, named)
    empty: list[int] = []
    for number, row in enumerate(rows, start=1):
        if not row or all(not cell.strip() for cell in row):
            continue
        language = row.pop().strip() if named is not None and len(row) == 4 else ""  # _xnli_columns' language
        if len(row) > 3 and not any(cell.strip() for cell in row[3:]):  # a trailing tab (XNLI's own reader takes it)
            row = row[:3]
        if len(row) != 3:
            raise DataFormatError(f"{path}:{number}: expected 3 tab-separated columns "
                                  f"(premise, hypothesis, label), got {len(row)}")
        premise, hypothesis, label = (cell.strip() for cell in row)
        label = label.lower()
        label = NLI_LABEL_ALIASES.get(label, label)
        if number == 1 and label in ("label", "gold_label"):
            continue
        if label not in allowed:
            raise DataFormatError(f"{path}:{number}: label {label!r} is not one of {sorted(allowed)}")
        if not premise or not hypothesis:  # XNLI's own loader reads them; a pair without a text teaches nothing
            empty.append(number)
            continue
        examples.append(NliExample(premise, hypothesis, label, language))
    if empty:
        log.warning("%s: %d pair(s) without a premise or a hypothesis left out (line %s%s)", path, len(empty),
                    ", ".join(map(str, empty[:5])), " …" if len(empty) > 5 else "")
    if not examples:
        raise DataFormatError(f"{path} holds no examples")
    return examples


@dataclass
class QaReadStats:
    questions: int = 0
    unanswered: int = 0  # questions without any non-empty gold answer (dropped)
    relocated: int = 0  # answer_start did not match; the nearest occurrence of the text was used
    unlocatable: int = 0  # answer text not found in the context (kept for scoring, not for training)
    renamed: int = 0  # questions whose id repeats an earlier one's (or is missing): given a unique one

    def warn(self, where: Any) -> None:
        """Say what reading changed or could not use (a run's log, once per file): answers nobody can find score 0."""
        said = {"unanswered": "{n} of {q} questions have no gold answer and are skipped",
                "unlocatable": "{n} gold answers (of {q} questions) have a text that is nowhere in the context (such "
                               "an answer scores 0 for every model; in train, it is not learned from)",
                "relocated": "{n} gold answers (of {q} questions) have an answer_start that does not match their text; "
                             "the nearest occurrence of the text is used",
                "renamed": "{n} of {q} questions repeat an earlier question's id or have none; each is scored under "
                           "an id of its own"}
        for name, what in said.items():
            if getattr(self, name):
                log.warning("%s: %s", where, what.format(n=getattr(self, name), q=self.questions))


def _locate(context: str, text: str, start: int) -> int | None:
    if context[start:start + len(text)] == text:
        return start
    hits = []
    position = context.find(text)
    while position != -1:
        hits.append(position)
        position = context.find(text, position + 1)
    return min(hits, key=lambda hit: abs(hit - start)) if hits else None


def _qa_text(value: Any, what: str, where: str) -> str:
    """A context, question or answer as text in one Unicode form (NFC): an answer written composed in a context
    written decomposed is found, and a span of the context is scored against it as equal."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise DataFormatError(f"{where}: its {what} is {type(value).__name__} {value!r:.60}, expected text")
    return unicodedata.normalize("NFC", str(value))


def _answer_pairs(raw: Any, where: str) -> list[tuple[Any, Any]]:
    """(text, answer_start) pairs of a question's answers in either layout; a start left out is 0 (the text is then
    looked up in the context), a single answer given without its list is one answer."""
    if not raw:
        return []
    if isinstance(raw, dict):
        texts, starts = raw.get("text", []), raw.get("answer_start")
        texts = texts if isinstance(texts, list) else [texts]
        starts = [0] * len(texts) if starts is None else starts if isinstance(starts, list) else [starts]
        return list(zip(texts, starts, strict=False))
    if isinstance(raw, list) and all(isinstance(item, dict) for item in raw):
        return [(item.get("text", ""), item.get("answer_start", 0)) for item in raw]
    raise DataFormatError(f"{where}: answers {raw!r:.80} are neither {{text: [...], answer_start: [...]}} nor a "
                          "list of {text, answer_start} objects")


def _answer_start(value: Any, where: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise DataFormatError(f"{where}: answer_start {value!r:.40} is not a number") from None


def qa_examples_from_records(records: Sequence[dict[str, Any]], where: str,
                             stats: QaReadStats | None = None) -> list[QaExample]:
    """Flat records ``{id, question, context, answers: {text: [...], answer_start: [...]}}`` (the
    Hub layout) or ``answers: [{text, answer_start}, ...]`` (the SQuAD JSON layout)."""
    stats = stats if stats is not None else QaReadStats()
    examples = []
    taken: set[str] = set()
    for record in records:
        stats.questions += 1
        at = f"{where}: question {record.get('id', stats.questions)!s:.40}"
        given = record.get("context")
        context = _qa_text(given, "context", at)
        answers = []
        for text, start in _answer_pairs(record.get("answers"), at):
            text = _qa_text(text, "answer text", at)
            if not text.strip():
                continue
            start = _answer_start(start, at)
            if isinstance(given, str) and context != given:  # the same place in the normalized (shorter) context
                start = len(unicodedata.normalize("NFC", given[:max(start, 0)]))
            located = _locate(context, text, start)
            if located is None:
                stats.unlocatable += 1
                located = -1
            elif located != start:
                stats.relocated += 1
            answers.append((text, located))
        if not answers:
            stats.unanswered += 1
            continue
        examples.append(QaExample(_unique_id(record.get("id"), where, stats, taken),
                                  _qa_text(record.get("question"), "question", at).strip(), context, tuple(answers)))
    return examples


def _unique_id(given: Any, where: str, stats: QaReadStats, taken: set[str]) -> str:
    """A question's id, unique within its file: predictions and gold answers are matched by id, so two questions
    under one id (a converted copy numbering them per article, ids left out) would be scored as one."""
    question_id = str(given) if given is not None and str(given).strip() else f"{where}#{stats.questions}"
    if question_id in taken:
        stats.renamed += 1
        base, copy = question_id, 1
        while question_id in taken:
            question_id, copy = f"{base}#{copy}", copy + 1
    elif given is None or not str(given).strip():
        stats.renamed += 1
    taken.add(question_id)
    return question_id


def read_squad_json(path: Path) -> tuple[list[QaExample], QaReadStats]:
    """A QA file: SQuAD 1.1 JSON (``{"data": [{"paragraphs": [{"context", "qas": [...]}]}]}``, TyDiQA-GoldP's
    layout), or flat records ``{id, question, context, answers}`` (a Hugging Face dataset's export) as JSON Lines,
    a JSON array or a ``data`` list (what transformers' QA example script reads).

    Questions whose gold answers are all empty are dropped and counted (SQuAD 2.0 style
    unanswerable questions are not supported); answers whose ``answer_start`` does not match
    the text are moved to the nearest occurrence of the text.
    """
    path = Path(path)
    text = _read_text(path)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":
            raise DataFormatError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        document = [record for _, record in _json_lines(path, text)]
    if isinstance(document, dict) and "context" in document and "data" not in document:
        document = [document]  # JSON Lines of one record
    if isinstance(document, dict) and isinstance(document.get("data"), list):
        entries = document["data"]
    elif isinstance(document, list):
        entries = document
    else:
        raise DataFormatError(f"{path}: expected SQuAD 1.1 JSON with a top-level 'data' list, or flat records "
                              "{id, question, context, answers} (JSON Lines or an array)")
    records = []
    for article_number, article in enumerate(entries):
        if not isinstance(article, dict):
            raise DataFormatError(f"{path}: data[{article_number}] is {type(article).__name__}, expected an object")
        if "paragraphs" not in article and "context" in article:  # a flat record
            records.append(article)
            continue
        paragraphs = article.get("paragraphs", [])
        if not isinstance(paragraphs, list):
            raise DataFormatError(f"{path}: data[{article_number}].paragraphs is {type(paragraphs).__name__}, "
                                  "expected a list")
        for paragraph_number, paragraph in enumerate(paragraphs):
            where = f"{path}: data[{article_number}].paragraphs[{paragraph_number}]"
            if not isinstance(paragraph, dict) or not isinstance(paragraph.get("context"), str):
                raise DataFormatError(f"{where} has no 'context' string")
            questions = paragraph.get("qas", [])
            if not isinstance(questions, list) or not all(isinstance(question, dict) for question in questions):
                raise DataFormatError(f"{where}: 'qas' is not a list of question objects")
            for question in questions:
                if "question" not in question:
                    raise DataFormatError(f"{where}: a question without 'question' text (id {question.get('id')})")
                records.append({"id": question.get("id"), "question": question["question"],
                                "context": paragraph["context"], "answers": question.get("answers", [])})
    if not records:
        raise DataFormatError(f"{path} holds no questions (expected SQuAD 1.1 paragraphs with 'qas', or records "
                              "with 'context', 'question' and 'answers')")
    stats = QaReadStats()
    return qa_examples_from_records(records, str(path), stats), stats


def _json_lines(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    """(line, object) for each non-blank line (what ``Dataset.to_json`` writes, under a .json name too)."""
    records = []
    for number, line in enumerate(_lines(text), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFormatError(f"{path}:{number}: not a JSON object per line ({exc.msg})") from None
        if not isinstance(record, dict):
            raise DataFormatError(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
        records.append((number, record))
    return records


CLS_LABEL_COLUMNS = ("label", "category", "labels", "class", "class_label", "topic", "sentiment", "polarity",
                     "intent", "emotion", "gold_label")
CLS_TEXT_COLUMNS = ("text", "sentence", "content", "article", "body", "tweet", "tweets", "document", "review",
                    "comment", "utterance")
CLS_TITLE_COLUMNS = ("headline", "title", "news_title")  # joined before the text (MasakhaNEWS: headline + text)


def _pick(columns: Sequence[str], candidates: Sequence[str]) -> str | None:
    lowered = {column.strip().lower(): column for column in columns}
    return next((lowered[name] for name in candidates if name in lowered), None)


def _cls_records(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[str] | None]:
    """(line, record) pairs and the header's columns; ``None`` columns for headerless ``label<TAB>text``."""
    suffix = data_suffix(path)
    if suffix == ".parquet":  # a Hugging Face dataset's export
        import pandas as pd

        if compression_of(path.name) is not None:
            raise DataFormatError(f"{path}: a compressed parquet file; parquet compresses its own columns, "
                                  "decompress it")
        frame = pd.read_parquet(path)
        return [(number, record) for number, record in enumerate(frame.to_dict("records"), start=1)], list(frame)
    text = _read_text(path)
    if suffix == ".json" and text.lstrip().startswith("["):  # a JSON array of objects
        try:
            array = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataFormatError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        if not all(isinstance(record, dict) for record in array):
            raise DataFormatError(f"{path}: expected a JSON array of objects")
        return list(enumerate(array, start=1)), sorted({key for record in array for key in record})
    if suffix in (".jsonl", ".json"):  # JSON Lines (what Dataset.to_json writes, under either name)
        records = _json_lines(path, text)
        return records, sorted({key for _, record in records for key in record})
    rows = _delimited_rows(path, text)
    if not rows:
        return [], None
    header = [cell.strip() for cell in rows[0][1]]
    if _pick(header, CLS_LABEL_COLUMNS) is None and _pick(header, CLS_TEXT_COLUMNS) is None and \
            all(len(row) == 2 for _, row in rows):
        named = _named_label_column(header)
        if named is not None:  # a header of names that hold ours (tweet_text, label_name)
            return [(number, {"label": row[named], "text": row[1 - named]}) for number, row in rows[1:]], None
        label = _label_column(path, rows)
        _refuse_unnamed_header(path, rows, label)
        return [(number, {"label": row[label], "text": row[1 - label]}) for number, row in rows], None
    records = []
    for number, row in rows[1:]:
        if len(row) != len(header):
            raise DataFormatError(f"{path}:{number}: {len(row)} columns where the header names {len(header)} "
                                  f"({', '.join(header)})")
        records.append((number, dict(zip(header, row, strict=True))))
    return records, header


def _delimited_rows(path: Path, text: str) -> list[tuple[int, list[str]]]:
    """The non-blank rows of a .csv (commas) or .tsv/.txt (tabs) file with the line each starts on, quoted as the
    datasets' own loaders (pandas read_csv) read the published files (``"a ""b"" c"``); a quote that never closes
    is an error naming the line it opens on, as pandas' "EOF inside string" (it would swallow every row after it)."""
    delimiter = "," if data_suffix(path) == ".csv" else "\t"
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    rows: list[tuple[int, list[str]]] = []
    last = 0
    for row in reader:
        if row and any(cell.strip() for cell in row):
            rows.append((last + 1, row))
        last = reader.line_num
    if rows and any("\n" in cell or "\r" in cell for cell in rows[-1][1]) and _ends_inside_quote(
            "\n".join(_lines(text)[rows[-1][0] - 1:]), delimiter):  # the last row runs to the end inside a quote
        raise DataFormatError(f"{path}:{rows[-1][0]}: a quote opened on this line never closes (it would read "
                              "every line after it as one field); close it, or double a quote inside a quoted "
                              "field (\"\")")
    if delimiter == "\t":
        _refuse_swallowed_rows(path, rows)
    return rows


def _refuse_swallowed_rows(path: Path, rows: list[tuple[int, list[str]]]) -> None:
    """A tab-separated field that holds a line break and a tab is rows a stray quote swallowed (a text that opens
    with ``"`` and has no closing one reads every row up to the next quote as part of it, as pandas does): refused,
    naming the line the quote opens on."""
    for line, row in rows:
        swallowed = next((cell for cell in row if "\t" in cell and ("\n" in cell or "\r" in cell)), None)
        if swallowed is not None:
            count = swallowed.count("\n") + swallowed.count("\r") - swallowed.count("\r\n")
            raise DataFormatError(f"{path}:{line}: a quote opened on this line runs over {count} line break(s) and "
                                  "the tabs of the rows after it (they would be one text); a text that starts with "
                                  "a quote must close it, or double each quote inside a quoted field (\"\")")


def _named_label_column(header: Sequence[str]) -> int | None:
    """The label's column of a two-column header whose names hold one of ours as a word (``tweet_text`` and
    ``label_name``): one column names a label, the other a text; None otherwise."""
    def words(name: str) -> set[str]:
        return set(re.split(r"[\W_]+", name.strip().lower()))

    labels = [bool(words(name) & set(CLS_LABEL_COLUMNS)) for name in header]
    texts = [bool(words(name) & set(CLS_TEXT_COLUMNS)) for name in header]
    for label in (0, 1):
        if labels[label] and not texts[label] and texts[1 - label] and not labels[1 - label]:
            return label
    return None


def _ends_inside_quote(text: str, delimiter: str) -> bool:
    """Whether csv's strict reading of ``text`` reaches its end inside a quoted field (pandas: "EOF inside
    string"); a stray quote inside a field (``5" tall``) is no such end."""
    try:
        list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True))
    except csv.Error as exc:
        return "unexpected end of data" in str(exc)
    return False


def _label_column(path: Path, rows: list[tuple[int, list[str]]]) -> int:
    """Which column of a headerless two-column file holds the labels: the one with fewer distinct values (labels
    repeat, texts do not), the shorter one where they tie. A file of 20 rows or more whose labels would all be
    distinct is no classification data and is refused (its texts would be read as labels)."""
    body = rows[1:] or rows
    distinct = [len({row[column].strip() for _, row in body}) for column in (0, 1)]
    lengths = [sum(len(row[column]) for _, row in body) for column in (0, 1)]
    # fewer distinct values; where they tie (a few rows), the shorter values: a label is a word, a text a sentence
    label = 1 if (distinct[1], lengths[1]) < (distinct[0], lengths[0]) else 0
    if len(rows) >= 20 and distinct[label] >= len(body):
        raise DataFormatError(f"{path}: read without a header as two columns, but neither holds repeating labels "
                              f"({distinct[0]} and {distinct[1]} distinct values in {len(rows)} rows); name the "
                              f"columns in a header (label: one of {', '.join(CLS_LABEL_COLUMNS)}; text: one of "
                              f"{', '.join(CLS_TEXT_COLUMNS)})")
    if label == 1:
        log.info("%s: read as text<TAB>label (its second column repeats, its first does not)", path)
    return label


def _refuse_unnamed_header(path: Path, rows: list[tuple[int, list[str]]], label_column: int = 0) -> None:
    """A two-column file read as ``label<TAB>text`` (or ``text<TAB>label``) lines whose first row is a header of names
    we do not know (``Tweets<TAB>Polarity``): its "label" occurs once where every other label repeats. Said, not read
    as an example."""
    labels = [row[label_column].strip() for _, row in rows]
    counts = {label: labels.count(label) for label in set(labels)}
    if len(rows) >= 10 and counts[labels[0]] == 1 and all(count > 1 for label, count in counts.items()
                                                            if label != labels[0]):
        raise DataFormatError(f"{path}: its first row ({', '.join(rows[0][1])}) looks like a header of column names "
                              f"this reader does not know; name the label column one of {', '.join(CLS_LABEL_COLUMNS)} "
                              f"and the text column one of {', '.join(CLS_TEXT_COLUMNS)}, or remove the row")


def read_cls_split(path: Path) -> tuple[list[ClsExample] | None, str | None]:
    """A split's examples, or None with a note for a file that holds no labels (a header alone, or a published
    split without its label column, such as a shared task's unlabelled test set): the split is then completed from
    the others, as an unlabelled QA file is."""
    path = Path(path)
    records, columns = _cls_records(path)
    if not records:
        return None, f"{path.name} ignored: no examples (a header alone?)"
    if columns is not None and _pick(columns, CLS_LABEL_COLUMNS) is None and _pick(columns, CLS_TEXT_COLUMNS):
        log.warning("%s: no label column among %s; ignoring it as unlabelled", path, ", ".join(map(str, columns)))
        return None, f"{path.name} ignored: no label column ({', '.join(map(str, columns))})"
    return _cls_examples(path, records, columns), None


def read_cls_file(path: Path) -> list[ClsExample]:
    """Sentence classification examples from ``label<TAB>text`` lines or a headed TSV/CSV/JSON(L)/Parquet file
    (column names in the module docstring; the error lists the columns found)."""
    path = Path(path)
    return _cls_examples(path, *_cls_records(path))


def _cls_examples(path: Path, records: list[tuple[int, dict[str, Any]]], columns: list[str] | None
                  ) -> list[ClsExample]:
    """The examples of a classification file's parsed records (read once)."""
    label_column: str | None = "label"
    text_column: str | None = "text"
    title_column = None
    if columns is not None:
        label_column, text_column = _pick(columns, CLS_LABEL_COLUMNS), _pick(columns, CLS_TEXT_COLUMNS)
        title_column = _pick(columns, CLS_TITLE_COLUMNS)
        if text_column is None and title_column is not None:
            text_column, title_column = title_column, None
        if label_column is None or text_column is None:
            raise DataFormatError(f"{path}: no {'label' if label_column is None else 'text'} column among "
                                  f"{', '.join(columns)}; name the label column one of {', '.join(CLS_LABEL_COLUMNS)} "
                                  f"and the text column one of {', '.join(CLS_TEXT_COLUMNS)} (or write label<TAB>text "
                                  "lines without a header)")
    examples = []
    for number, record in records:
        label = str(record.get(label_column) if record.get(label_column) is not None else "").strip()
        parts = [record.get(title_column) if title_column else None, record.get(text_column)]
        body = "\n".join(str(part).strip() for part in parts if part is not None and str(part).strip())
        if not label:
            raise DataFormatError(f"{path}:{number}: empty label")
        if not body:
            raise DataFormatError(f"{path}:{number}: empty text")
        examples.append(ClsExample(body, label))
    if not examples:
        raise DataFormatError(f"{path} holds no examples (a header alone?)")
    return examples


def read_labels_file(path: Path) -> list[str]:
    """``labels.txt``: one label per line, in the order the task publishes them."""
    labels = [line.strip() for line in _lines(_read_text(path)) if line.strip()]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise DataFormatError(f"{path}: labels listed twice: {duplicates}")
    return labels


def check_labels(examples: dict[str, Sequence[ClsExample]], labels: Sequence[str], where: str) -> None:
    """Every example's label is one of ``labels``; the error names the split, the example and the label set."""
    known = set(labels)
    for split, split_examples in examples.items():
        for number, example in enumerate(split_examples, start=1):
            if example.label not in known:
                raise DataFormatError(f"{split} example {number}: label {example.label!r} is not in {where} "
                                      f"({', '.join(labels)})")


# --------------------------------------------------------------------------- splits


def seeded_permutation(n: int, seed: int) -> list[int]:
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def split_off(examples: list[Any], fraction: float, seed: int,
              group: Callable[[Any], Hashable] | None = None) -> tuple[list[Any], list[Any]]:
    """(rest, held) with ``held`` = a seeded ``fraction`` of the examples (at least 1). Examples of one ``group``
    (an NLI premise's hypotheses, a QA passage's questions) go to the same part: XNLI's three hypotheses of a
    premise, one per label, split apart let a model read a test pair's label off its training pairs."""
    if len(examples) < 2:
        raise DataFormatError(f"cannot split {len(examples)} example(s) into two non-empty parts")
    members: dict[Hashable, list[int]] = {}
    for index, example in enumerate(examples):
        members.setdefault(group(example) if group is not None else index, []).append(index)
    if len(members) < 2:  # one passage's questions: only they can be parted
        log.warning("all %d examples share one premise or passage: split one by one (give the splits as files to "
                    "keep them apart)", len(examples))
        members = {index: [index] for index in range(len(examples))}
    groups = list(members.values())
    n_held = min(len(examples) - 1, max(1, round(len(examples) * fraction)))
    held: list[int] = []
    # singleton groups: exactly the examples' permutation; its last group stays in the rest, which is never empty
    order = seeded_permutation(len(groups), seed)[:-1]
    for position in order:
        if len(held) >= n_held:
            break
        if len(held) + len(groups[position]) - n_held > n_held - len(held):  # overshoots more than it fills
            continue
        held += groups[position]
    if not held:  # every group is larger than twice the share: the first one
        held = list(groups[order[0]]) if order else []
    kept = set(held)
    return [e for i, e in enumerate(examples) if i not in kept], [examples[i] for i in sorted(held)]


def complete_splits(train: list[Any] | None, dev: list[Any] | None, test: list[Any] | None, seed: int,
                    group: Callable[[Any], Hashable] | None = None
                    ) -> tuple[list[Any], list[Any], list[Any], dict[str, str]]:
    """Fill missing splits by the rules in the module docstring (a ``group``'s examples in one split); returns the
    provenance too."""
    provenance = {"train": "train", "dev": "dev", "test": "test"}
    present = [name for name, split in (("train", train), ("dev", dev), ("test", test)) if split]
    if len(present) == 1:
        only = (train or dev or test) or []
        train_fraction, dev_fraction, _ = SINGLE_FILE_FRACTIONS
        rest, test = split_off(only, 1.0 - train_fraction - dev_fraction, seed, group)
        train, dev = split_off(rest, dev_fraction / (train_fraction + dev_fraction), seed + 1, group)
        name = present[0]
        return train, dev, test, {split: f"{round(100 * len(part) / len(only))}% of {name}"  # as made: groups are whole
                                  for split, part in (("train", train), ("dev", dev), ("test", test))}
    if not train:
        raise DataFormatError("no training split: provide a train file (or a single labelled file to split)")
    if not test:
        test, provenance["test"] = dev, "dev (published dev used as test)"
        dev = None
    if not dev:
        whole = len(train)
        train, dev = split_off(train, DEV_FRACTION, seed, group)
        provenance["train"], provenance["dev"] = (f"{round(100 * len(part) / whole)}% of train" for part in (train, dev))
    return train, dev, test, provenance


def ner_label_set(*splits: Sequence[NerExample]) -> list[str]:
    """``O`` first, then B-/I- tags grouped by entity type; both prefixes for every type seen. Two types that differ
    only in case (``B-Loc`` and ``I-LOC``) are refused: scored as two, every entity between them would count as
    wrong (a type's own case is kept: GermEval's ``LOCderiv``)."""
    types = sorted({tag[2:] for split in splits for example in split for tag in example.tags if tag != "O"})
    by_case: dict[str, list[str]] = {}
    for kind in types:
        by_case.setdefault(kind.casefold(), []).append(kind)
    clashes = [spellings for spellings in by_case.values() if len(spellings) > 1]
    if clashes:
        raise DataFormatError(f"entity types written in two cases: {'; '.join(' / '.join(c) for c in clashes)} (the "
                              "data's tags would score them as different types); write each type one way in every "
                              "split")
    return ["O"] + [f"{prefix}-{kind}" for kind in types for prefix in ("B", "I")]


def subsample(examples: list[Any], limit: int | None, seed: int) -> list[Any]:
    """A seeded, order-preserving subset of at most ``limit`` examples (the same for every model)."""
    if limit is None or len(examples) <= limit:
        return examples
    keep = sorted(seeded_permutation(len(examples), seed)[:limit])
    return [examples[i] for i in keep]
