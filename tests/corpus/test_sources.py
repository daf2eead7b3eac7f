"""Corpus sources: local formats, the packaged demo Bible, hub layouts streamed from a local mirror, errors."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import time
from pathlib import Path

import pytest

from focusflow.config import CleaningSpec, CorpusSpec
from focusflow.corpus import CorpusSourceError, LanguageError, collect_corpus, corpus_language, iso639_3, normalize_language
from focusflow.corpus.cleaning import Cleaner, non_letter_fraction, normalize_text
from focusflow.corpus.io import read_texts
from focusflow.corpus.sources import hub_data_files, iter_demo, iter_files, iter_source, resolve_paths
from focusflow.errors import InputError

DOCS = ["Habari ya asubuhi rafiki yangu mpendwa.", "Leo tunaenda sokoni kununua matunda.", "Mvua inanyesha sana."]


def _zst(path: Path, data: bytes) -> None:
    import zstandard

    path.write_bytes(zstandard.ZstdCompressor().compress(data))


# --------------------------------------------------------------------------- languages

def test_language_codes_normalize_and_map_per_corpus():
    assert normalize_language("SWA") == normalize_language("sw") == normalize_language("swh") == "sw"
    assert normalize_language("nya") == "ny" and iso639_3("ny") == "nya" and iso639_3("hau") == "hau"
    assert corpus_language("mc4", "he") == "iw"  # mC4's legacy Hebrew code
    assert corpus_language("mc4", "nya") == "ny"
    assert corpus_language("cc100", "bn_rom") == "bn_rom"
    # a corpus's own variant, however the configuration spells it, names its own file, not its base language's
    assert corpus_language("cc100", "zh-hant") == "zh-Hant" and corpus_language("cc100", "zh") == "zh-Hans"
    assert corpus_language("cc100", "my-zaw") == "my_zaw" and corpus_language("mc4", "hi-latn") == "hi-Latn"
    assert corpus_language("oscar", "sh") == "sh" and corpus_language("oscar", "sr") == "sr"
    # codes the corpora ship under another spelling than langcodes': Tagalog, Norwegian Bokmål, Northern Sotho
    assert corpus_language("cc100", "tl") == corpus_language("oscar", "fil") == "tl"
    assert corpus_language("mc4", "tl") == "fil" and corpus_language("cc100", "nso") == "ns"
    assert corpus_language("cc100", "nb") == corpus_language("mc4", "nob") == "no"
    with pytest.raises(LanguageError, match="it is in mc4"):
        corpus_language("oscar", "ny")
    with pytest.raises(LanguageError, match="not a known ISO 639"):
        normalize_language("xx")


# --------------------------------------------------------------------------- local files

def test_local_formats_compressions_globs_and_folders(tmp_path: Path):
    folder = tmp_path / "data"
    (folder / "nested").mkdir(parents=True)
    (folder / "a.txt").write_text(DOCS[0] + "\n\n" + DOCS[1] + "\n", encoding="utf-8")
    with gzip.open(folder / "b.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.write(json.dumps({"body": {"text": DOCS[2]}}) + "\n")
    _zst(folder / "nested" / "c.txt.zst", f"{DOCS[1]}\n".encode())
    (folder / "d.json").write_text(json.dumps([{"text": DOCS[0]}, {"text": DOCS[2]}]), encoding="utf-8")
    (folder / "e.txt.xz").write_bytes(lzma.compress(f"{DOCS[0]}\n".encode()))
    (folder / "f.txt.bz2").write_bytes(bz2.compress(f"{DOCS[2]}\n".encode()))
    (folder / "ignored.bin").write_bytes(b"\x00")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": [DOCS[1], DOCS[2]]}), folder / "g.parquet")

    files = resolve_paths([str(folder)])
    assert [Path(f).name for f in files] == ["a.txt", "b.jsonl.gz", "d.json", "e.txt.xz", "f.txt.bz2", "g.parquet",
                                             "c.txt.zst"]
    assert list(iter_files(resolve_paths([str(folder / "a.txt")]))) == [DOCS[0], DOCS[1]]
    assert list(iter_files(resolve_paths([str(folder / "nested" / "*.zst")]))) == [DOCS[1]]
    assert list(iter_files(resolve_paths([str(folder / "b.jsonl.gz")]), text_field="body.text")) == [DOCS[2]]
    assert list(iter_files(resolve_paths([str(folder / "d.json")]))) == [DOCS[0], DOCS[2]]
    assert list(iter_files(resolve_paths([str(folder / "e.txt.xz"), str(folder / "f.txt.bz2")]))) == [DOCS[0], DOCS[2]]
    assert list(iter_files(resolve_paths([str(folder / "g.parquet")]))) == [DOCS[1], DOCS[2]]


def test_txt_paragraph_documents(tmp_path: Path):
    file = tmp_path / "p.txt"
    file.write_text("line one\nline two\n\n\nline three\n", encoding="utf-8")
    assert list(iter_files([str(file)], txt_documents="paragraph")) == ["line one\nline two", "line three"]


def test_local_copies_leave_out_what_the_corpus_leaves_out(tmp_path: Path, caplog):
    """A local copy of OSCAR drops the records its metadata flags header/footer/noisy (as the Hub path does), a
    folder of mC4 shards leaves its validation shards out, a JSON Lines file may start with a byte-order mark."""
    oscar = tmp_path / "sw_meta_part_1.jsonl"
    oscar.write_text("\ufeff" + "".join(json.dumps(record) + "\n" for record in [
        {"content": DOCS[0], "metadata": {"quality_warnings": None}},
        {"content": "Menu Home Contact", "metadata": {"quality_warnings": ["header"]}},
        {"content": DOCS[1], "metadata": {"quality_warnings": ["short_sentences"]}}]), encoding="utf-8")
    assert list(iter_files([str(oscar)], text_field="content")) == [DOCS[0], DOCS[1]]
    shards = tmp_path / "mc4"
    shards.mkdir()
    for name, text in (("c4-sw.tfrecord-00000-of-00002.json.gz", DOCS[0]),
                       ("c4-sw-validation.tfrecord-00000-of-00001.json.gz", "validation, not train")):
        with gzip.open(shards / name, "wt", encoding="utf-8") as handle:
            handle.write(json.dumps({"text": text, "url": "u"}) + "\n")
    assert list(iter_files(resolve_paths([str(shards)]))) == [DOCS[0]]
    assert len(resolve_paths([str(shards / "*.json.gz")])) == 2, "a file named explicitly is read"


def test_text_in_blank_line_separated_documents_read_by_line_is_said_once(tmp_path: Path, caplog):
    """CC100's raw files separate documents by a blank line: read a document per line, each paragraph becomes one,
    so the reader says so, with the setting that reads them whole."""
    cc100 = tmp_path / "sw.txt"
    cc100.write_text("".join(f"{DOCS[0]}\n{DOCS[1]}\n\n" for _ in range(20)), encoding="utf-8")
    with caplog.at_level("WARNING"):
        assert len(list(iter_files([str(cc100)]))) == 40
    assert "corpus.txt_documents=paragraph" in caplog.text
    caplog.clear()
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(f"{DOCS[i % 3]}\n" for i in range(60)) + "\n", encoding="utf-8")
    with caplog.at_level("WARNING"):
        list(iter_files([str(lines)]))
    assert "txt_documents" not in caplog.text


def test_missing_inputs_fail_at_once_with_advice(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="matches no file"):
        resolve_paths([str(tmp_path / "nope" / "*.txt")])
    (tmp_path / "x.jsonl").write_text('{"content": "a b c"}\n', encoding="utf-8")
    with pytest.raises(CorpusSourceError, match="set corpus.text_field"):
        list(iter_files([str(tmp_path / "x.jsonl")]))
    (tmp_path / "sentences.jsonl").write_text('{"text": "a b c"}\n{"text": ["a b", "c d"]}\n', encoding="utf-8")
    with pytest.raises(CorpusSourceError, match=r"sentences.jsonl record 2: field 'text' is a list, expected a string"):
        list(iter_files([str(tmp_path / "sentences.jsonl")]))
    with pytest.raises(CorpusSourceError, match="no corpus files"):
        (tmp_path / "empty").mkdir()
        resolve_paths([str(tmp_path / "empty")])


def test_collect_local_with_budget_and_cleaning_counts(tmp_path: Path):
    file = tmp_path / "t.txt"
    lines = ["  Habari\x07 za   asubuhi,\tndugu yangu mpendwa sana.  ", "fupi", "1234 5678 9012 3456 7890 !!!!",
             *[f"Sentensi ya kawaida nambari {i} yenye maneno ya kutosha hapa." for i in range(50)]]
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    spec = CorpusSpec(source="local", paths=[str(file)], max_documents=10)
    stats = collect_corpus(spec, CleaningSpec(), "swa", tmp_path / "out")
    docs = list(read_texts(tmp_path / "out" / "documents.jsonl"))
    assert docs[0] == "Habari za asubuhi, ndugu yangu mpendwa sana."
    assert len(docs) == stats["documents"] == 10 and stats["stopped_by"] == "max_documents"
    assert stats["cleaning"]["removed"] == {"too_short": 1, "mostly_non_letters": 1}
    assert stats["language"] == "sw"
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["documents"] == 10
    decoding = stats["decoding"]  # the \x07 above; reading stopped at the budget, before the end of the file
    assert (decoding["files"], decoding["replaced_bytes"], decoding["control_chars"]) == (1, 0, 1)
    assert 0 < decoding["bytes"] < file.stat().st_size and decoding["not_text_share"] == round(1 / decoding["bytes"], 6)
    by_bytes = collect_corpus(CorpusSpec(source="local", paths=[str(file)], max_bytes=300), CleaningSpec(), "sw",
                              tmp_path / "b")
    assert by_bytes["bytes"] <= 300 and by_bytes["stopped_by"] == "max_bytes" and by_bytes["documents"] >= 4


def test_an_empty_corpus_and_one_that_cleaning_empties_are_told_apart(tmp_path: Path):
    from focusflow.errors import InputError

    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(InputError, match=r"corpus \(.*empty\.txt\) has no documents"):
        collect_corpus(CorpusSpec(source="local", paths=[str(empty)]), CleaningSpec(), "sw", tmp_path / "a")
    short = tmp_path / "short.txt"
    short.write_text("fupi\nneno\n", encoding="utf-8")
    with pytest.raises(InputError, match="survived cleaning.*too_short"):
        collect_corpus(CorpusSpec(source="local", paths=[str(short)]), CleaningSpec(), "sw", tmp_path / "b")


def test_cleaning_primitives():
    assert normalize_text("e\u0301 \u00a0x\r\ny\n\n\nz\ufeff") == "\u00e9 x\ny\nz"  # NFC, NBSP, CRLF, blank lines, BOM
    assert normalize_text("ﬁ", "NFKC") == "fi" and normalize_text("ﬁ", "none") == "ﬁ"
    assert non_letter_fraction("abc 123") == pytest.approx(0.5)
    assert non_letter_fraction("नमस्ते") == 0.0  # combining vowel signs count as letters
    cleaner = Cleaner(CleaningSpec(min_chars=5, min_words=2))
    assert [cleaner.clean(t) for t in ["ok ok ok", "abc", "one"]] == ["ok ok ok", None, None]
    assert cleaner.stats()["removed"] == {"too_short": 2}


@pytest.mark.parametrize("line_end", ["\x0b", "\x0c", "\x1e", "\u2028", "\u2029", "\r"])
def test_every_character_that_ends_a_line_ends_one_and_glues_no_words(line_end):
    """Word's manual line break (VT), pdftotext's page break (FF), NEL (a cp1252 "…" read as Latin-1) were deleted:
    "ng'ombe\x0bwatatu" became one word "ng'ombewatatu"."""
    assert normalize_text(f"ng'ombe{line_end}watatu") == "ng'ombe\nwatatu"
    assert normalize_text("a\x01b\x1fc\x9fd") == "abcd", "the other controls are still deleted"


def test_a_misread_ellipsis_is_an_ellipsis_again():
    """NEL (U+0085) in UTF-8 text is a cp1252 "…" read as Latin-1: deleted, it glued the words beside it."""
    assert normalize_text("Nilimngoja sana\x85 lakini hakuja.") == "Nilimngoja sana… lakini hakuja."
    assert normalize_text("sana\x85lakini", "NFKC") == "sana...lakini"


def test_a_corpus_key_holds_the_cleaners_version():
    """A cleaning change changes the text of stored corpora: their key changes with it."""
    from focusflow.corpus.cleaning import CLEANING_VERSION
    from focusflow.pipeline.corpus_stage import _corpus_key

    key = _corpus_key({"language": "sw", "corpus": {"source": "demo"}, "cleaning": {}})
    assert key["cleaner"] == CLEANING_VERSION >= 2


# --------------------------------------------------------------------------- demo corpus

def test_demo_corpus_is_the_chichewa_bible_by_chapter(tmp_path: Path):
    docs = iter_demo("nya")
    first = next(docs)
    assert first.startswith("Pachiyambi Mulungu adalenga kumwamba ndi dziko lapansi.\n")
    assert sum(1 for _ in docs) + 1 == 1189  # chapters of the 66 books
    with pytest.raises(CorpusSourceError, match="Chichewa"):
        iter_demo("sw")
    stats = collect_corpus(CorpusSpec(max_documents=3), CleaningSpec(), "ny", tmp_path)
    assert stats["documents"] == 3 and stats["source"] == "demo"


# --------------------------------------------------------------------------- hub layouts (local mirror)

def _mirror(root: Path) -> None:
    """The three corpora's raw layouts, as the hub/statmt serve them."""
    oscar = [
        {"content": "Habari njema kutoka Nairobi leo asubuhi.", "metadata": {"quality_warnings": None}},
        {"content": "Menu Home Contact", "metadata": {"quality_warnings": ["header", "short_sentences"]}},
        {"content": "Bei ya mafuta imepanda tena wiki hii.", "metadata": {"quality_warnings": ["short_sentences"]}},
        {"content": "xx $$ %% noisy", "metadata": {"quality_warnings": ["noisy"]}},
        {"content": "Copyright 2022 all rights", "metadata": {"quality_warnings": ["footer"]}},
    ]
    (root / "oscar" / "sw_meta").mkdir(parents=True)
    _zst(root / "oscar" / "sw_meta" / "sw_meta_part_1.jsonl.zst",
         "".join(json.dumps(d) + "\n" for d in oscar).encode())
    (root / "cc100").mkdir()
    (root / "cc100" / "sw.txt.xz").write_bytes(
        lzma.compress("Aya ya kwanza.\nMstari wa pili.\n\nHati ya pili hapa.\n\n".encode()))
    (root / "mc4" / "multilingual").mkdir(parents=True)
    for shard in range(2):
        with gzip.open(root / "mc4" / "multilingual" / f"c4-sw.tfrecord-{shard:05d}-of-00002.json.gz", "wt") as h:
            h.write(json.dumps({"text": f"Hati ya mC4 nambari {shard}.", "timestamp": "x", "url": "u"}) + "\n")
    with gzip.open(root / "mc4" / "multilingual" / "c4-sw-validation.tfrecord-00000-of-00001.json.gz", "wt") as h:
        h.write(json.dumps({"text": "validation, not train", "timestamp": "x", "url": "u"}) + "\n")


def test_hub_sources_stream_through_datasets_from_a_local_mirror(tmp_path: Path):
    _mirror(tmp_path)

    def docs(corpus: str) -> list[str]:
        spec = CorpusSpec(source=corpus, dataset_root=str(tmp_path / corpus), shuffle_buffer=0)
        return list(iter_source(spec, "swa"))

    assert docs("oscar") == ["Habari njema kutoka Nairobi leo asubuhi.", "Bei ya mafuta imepanda tena wiki hii."]
    assert docs("cc100") == ["Aya ya kwanza.\nMstari wa pili.", "Hati ya pili hapa."]
    # a variant's own file (Traditional Chinese, not Simplified); a byte that is not UTF-8 said as such, with the fix
    (tmp_path / "cc100" / "zh-Hans.txt.xz").write_bytes(lzma.compress("简体中文。\n\n".encode()))
    (tmp_path / "cc100" / "zh-Hant.txt.xz").write_bytes(lzma.compress("繁體中文。\n\n".encode()))
    variant = CorpusSpec(source="cc100", dataset_root=str(tmp_path / "cc100"), shuffle_buffer=0)
    assert list(iter_source(variant, "zh-hant")) == ["繁體中文。"]
    (tmp_path / "cc100" / "zh-Hant.txt.xz").write_bytes(lzma.compress("繁體中文。\n\n".encode() + b"bad \xff byte\n\n"))
    with pytest.raises(CorpusSourceError, match="not UTF-8.*corpus.source=local"):
        list(iter_source(variant, "zh-hant"))
    assert sorted(docs("mc4")) == ["Hati ya mC4 nambari 0.", "Hati ya mC4 nambari 1."]
    shuffled = CorpusSpec(source="mc4", dataset_root=str(tmp_path / "mc4"), shuffle_buffer=10, seed=3)
    assert sorted(iter_source(shuffled, "sw")) == sorted(docs("mc4"))
    # the real (online) locations the same code reads
    assert hub_data_files("oscar", "swa") == "hf://datasets/oscar-corpus/OSCAR-2301/sw_meta/*.jsonl.zst"
    assert hub_data_files("mc4", "nya") == "hf://datasets/allenai/c4/multilingual/c4-ny.tfrecord-*.json.gz"
    assert hub_data_files("cc100", "hau") == "https://data.statmt.org/cc-100/ha.txt.xz"


def test_unreachable_dataset_fails_at_once_with_advice(tmp_path: Path):
    started = time.perf_counter()
    with pytest.raises(CorpusSourceError, match="gated.*HF_TOKEN"):
        list(iter_source(CorpusSpec(source="oscar", dataset_root=str(tmp_path / "missing")), "sw"))
    with pytest.raises(LanguageError, match="no hub corpus here has it"):
        iter_source(CorpusSpec(source="cc100"), "kin")
    assert time.perf_counter() - started < 30


def test_language_id_filter_with_a_fasttext_model(shared_data: Path, tmp_path: Path):
    import fasttext

    sw = [line for line in (shared_data / "text" / "sw.txt").read_text(encoding="utf-8").splitlines() if len(line) > 80]
    ha = [line for line in (shared_data / "text" / "ha.txt").read_text(encoding="utf-8").splitlines() if len(line) > 80]
    (tmp_path / "lid.txt").write_text("".join(f"__label__sw {line}\n" for line in sw[:1500]) +
                                      "".join(f"__label__hau {line}\n" for line in ha[:1500]), encoding="utf-8")
    model = fasttext.train_supervised(input=str(tmp_path / "lid.txt"), epoch=5, dim=16, minn=2, maxn=4, thread=1,
                                      seed=0, verbose=0)
    model.save_model(str(tmp_path / "lid.bin"))
    mixed = sw[2000:2100] + ha[2000:2050]
    (tmp_path / "mixed.txt").write_text("\n".join(mixed) + "\n", encoding="utf-8")
    stats = collect_corpus(CorpusSpec(source="local", paths=[str(tmp_path / "mixed.txt")]),
                           CleaningSpec(langid_model=str(tmp_path / "lid.bin")), "swa", tmp_path / "out")
    kept = list(read_texts(tmp_path / "out" / "documents.jsonl"))
    assert stats["cleaning"]["removed"] == {"wrong_language": 50}  # the Hausa lines ('hau' label → 'ha' ≠ 'sw')
    assert kept == [normalize_text(t) for t in sw[2000:2100]]  # all Swahili kept (cleaned), no Hausa
    with pytest.raises(FileNotFoundError, match="language-ID model"):
        Cleaner(CleaningSpec(langid_model=str(tmp_path / "missing.bin")))


def test_whether_the_hub_answers_is_one_quick_request_or_none_in_offline_mode(monkeypatch):
    """A Hub that cannot be reached is known from one request without retries (huggingface_hub's own retries take
    most of a minute); offline mode is known without any."""
    from huggingface_hub import constants

    from focusflow.corpus.sources import hub_unreachable
    from tests.conftest import free_port

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "offline mode" in hub_unreachable()
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    nobody = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setattr(constants, "ENDPOINT", nobody)
    started = time.perf_counter()
    reason = hub_unreachable()
    assert reason.startswith(f"{nobody} cannot be reached (ConnectError") and time.perf_counter() - started < 5


# --------------------------------------------------------------------------- local files as they are published

def test_a_folder_is_read_for_its_text_not_its_bookkeeping_notes_or_linked_copies(tmp_path: Path, caplog):
    """A dot-named file or folder (``.git/``, macOS's ``._a.txt``), a README or licence, and a link to a file already
    read are not the language's text: left out, and said."""
    folder = tmp_path / "dump"
    (folder / ".git").mkdir(parents=True)
    (folder / "a.txt").write_text(DOCS[0] + "\n", encoding="utf-8")
    (folder / "._a.txt").write_bytes(b"\x00\x05\x16\x07Mac OS X        \x00\x02")  # AppleDouble: not even text
    (folder / ".git" / "y.txt").write_text("a tool's note\n", encoding="utf-8")
    (folder / "README.txt").write_text("This dump holds Swahili text.\n", encoding="utf-8")
    (folder / "LICENSE.txt").write_text("CC BY-SA 4.0\n", encoding="utf-8")
    (folder / "latest.txt").symlink_to(folder / "a.txt")
    (folder / "meta.json").write_text(json.dumps({"text": DOCS[1]}), encoding="utf-8")  # a corpus file: kept
    with caplog.at_level("INFO", logger="focusflow.corpus.sources"):
        files = resolve_paths([str(folder)])
    assert [Path(f).name for f in files] == ["a.txt", "meta.json"]
    assert list(iter_files(files)) == [DOCS[0], DOCS[1]]
    assert "4 file(s) left out" in caplog.text and "._a.txt, .git/y.txt, LICENSE.txt, README.txt" in caplog.text
    assert "latest.txt is" in caplog.text
    assert resolve_paths([str(folder / "README.txt")]) == [str(folder / "README.txt")], "named, it is read"


def test_a_text_file_with_old_mac_line_ends_is_one_document_a_line(tmp_path: Path):
    """A lone CR ends a line (old Mac files); CRLF stays one line end, and a document per line is what they hold."""
    (tmp_path / "mac.txt").write_bytes("\r".join(DOCS).encode() + b"\r")
    (tmp_path / "win.txt").write_bytes("\r\n".join(DOCS).encode())
    assert list(iter_files([str(tmp_path / "mac.txt")])) == DOCS
    assert list(iter_files([str(tmp_path / "win.txt")])) == DOCS
    assert list(read_texts(tmp_path / "mac.txt")) == DOCS
    paragraphs = "\r".join([DOCS[0], DOCS[1], "", DOCS[2]]).encode()
    (tmp_path / "para.txt").write_bytes(paragraphs)
    assert list(iter_files([str(tmp_path / "para.txt")], txt_documents="paragraph")) == [
        f"{DOCS[0]}\n{DOCS[1]}", DOCS[2]]


@pytest.mark.parametrize("name", ["cut.txt.zst", "cut.jsonl.zst"])
def test_a_zstd_file_cut_short_is_refused_as_the_other_compressions_are(tmp_path: Path, name: str):
    """OSCAR ships ``.jsonl.zst``: a download cut short was read as a shorter corpus, its last document cut mid-line."""
    import zstandard

    lines = [json.dumps({"text": f"{DOCS[0]} {i}"}) if "jsonl" in name else f"{DOCS[0]} {i}" for i in range(20_000)]
    data = zstandard.ZstdCompressor().compress(("\n".join(lines) + "\n").encode())
    (tmp_path / name).write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=f"{name} is truncated"):
        list(iter_files([str(tmp_path / name)]))
    whole = tmp_path / f"whole-{name}"  # two frames one after the other: both read
    whole.write_bytes(data + zstandard.ZstdCompressor().compress((lines[0] + "\n").encode()))
    assert len(list(iter_files([str(whole)]))) == 20_001


def test_a_parquet_text_column_must_hold_strings_and_may_be_a_field_of_a_struct(tmp_path: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": [b"bytes", b"more"]}), tmp_path / "binary.parquet")
    with pytest.raises(CorpusSourceError, match="column 'text' holds binary, expected strings"):
        list(iter_files([str(tmp_path / "binary.parquet")]))
    pq.write_table(pa.table({"text": pa.array([DOCS[0], DOCS[1], DOCS[0]]).dictionary_encode()}),
                   tmp_path / "category.parquet")  # pandas' category column
    assert list(iter_files([str(tmp_path / "category.parquet")])) == [DOCS[0], DOCS[1], DOCS[0]]
    nested = pa.table({"meta": [{"text": DOCS[0], "url": "u"}, None, {"text": DOCS[1], "url": "v"}]})
    pq.write_table(nested, tmp_path / "nested.parquet")
    assert list(iter_files([str(tmp_path / "nested.parquet")], text_field="meta.text")) == [DOCS[0], DOCS[1]]
    with pytest.raises(CorpusSourceError, match="no field 'meta.body'"):
        list(iter_files([str(tmp_path / "nested.parquet")], text_field="meta.body"))


def test_the_corpus_fingerprint_is_what_the_files_hold(tmp_path: Path):
    """The corpus stage's key counts the files' content: a file rewritten or added is another corpus; the same
    bytes at the same path keep it."""
    from focusflow.corpus.sources import files_fingerprint

    (tmp_path / "a.txt").write_text(DOCS[0] + "\n", encoding="utf-8")
    before = files_fingerprint(resolve_paths([str(tmp_path)]))
    assert files_fingerprint(resolve_paths([str(tmp_path)])) == before
    (tmp_path / "a.txt").write_text(DOCS[1] + "\n", encoding="utf-8")
    rewritten = files_fingerprint(resolve_paths([str(tmp_path)]))
    (tmp_path / "b.txt").write_text(DOCS[2] + "\n", encoding="utf-8")
    added = files_fingerprint(resolve_paths([str(tmp_path)]))
    (tmp_path / "c*.txt").write_text(DOCS[0] + "\n", encoding="utf-8")  # a name, not a pattern
    (tmp_path / "c1.txt").write_text(DOCS[1] + "\n", encoding="utf-8")
    starred = files_fingerprint(resolve_paths([str(tmp_path)]))
    assert len({before, rewritten, added, starred}) == 4


def test_a_remote_corpus_file_is_fingerprinted_by_what_its_store_reports(tmp_path: Path):
    """An object store's file is not downloaded to key it: its checksum or ETag (here fsspec's memory store: its
    size and when it was written) changes with its content."""
    import fsspec

    from focusflow.corpus.sources import files_fingerprint

    fs = fsspec.filesystem("memory")
    fs.pipe("/corpus-fp/a.txt", (DOCS[0] + "\n").encode())
    files = resolve_paths(["memory://corpus-fp/"])
    assert files == ["memory:///corpus-fp/a.txt"] and list(iter_files(files)) == [DOCS[0]]
    before = files_fingerprint(files)
    assert files_fingerprint(files) == before
    time.sleep(0.01)
    fs.pipe("/corpus-fp/a.txt", (DOCS[1] + "\n").encode())
    assert files_fingerprint(files) != before
    fs.rm("/corpus-fp", recursive=True)
