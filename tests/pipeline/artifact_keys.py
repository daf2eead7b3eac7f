"""Print the artifact key of every stage of a fixed run, to compare two versions of focusflow.

    PYTHONPATH=/work/main python tests/pipeline/artifact_keys.py > main.txt
    PYTHONPATH=.          python tests/pipeline/artifact_keys.py > branch.txt
    diff main.txt branch.txt        # identical, or each difference a named stage-version bump

``--build`` builds a tiny run for real instead (minutes) and prints the keys of everything it stored.

The run is the whole ``specialize`` graph (every stage: decontamination, both references, align,
LAPT, downstream, report) walked without building anything: each stage caller computes its key with
the registry's ``stage_key`` and stands in for its artifact with a content hash derived from what a
build's output depends on: its stage, key parameters and input contents (not its version, nor how the
evaluation data is fingerprinted: the files are the same). A key thus depends on the parameters,
versions and wiring of everything upstream, a version bump shows in that stage's keys alone, and the
walk takes a second. Only APIs that both versions share are used.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from focusflow.config import load_config
from focusflow.pipeline import get_stage, stage_key
from focusflow.pipeline.graph import specialize
from focusflow.storage import Artifact, ArtifactStore
from focusflow.storage.keys import canonical_json

FILES = {  # an evaluation data root: the two tasks the run reads, and a folder of a task it does not
    "ner/masakhaner2/swa/train.txt": "Juma B-PER\nanakula O\n", "ner/masakhaner2/swa/dev.txt": "Asha B-PER\n",
    "ner/masakhaner2/swa/test.txt": "Nairobi B-LOC\n",
    "nli/xnli/sw/train.tsv": "premise\thypothesis\tlabel\na\tb\tentailment\n",
    "nli/xnli/sw/dev.tsv": "premise\thypothesis\tlabel\nc\td\tneutral\n",
    "nli/xnli/sw/test.tsv": "premise\thypothesis\tlabel\ne\tf\tcontradiction\n",
}
UNRELATED = {"cls/sib200/hau_Latn/train.tsv": "index_id\tcategory\ttext\n1\tscience\tx\n"}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write the files that are not there yet (a test may have edited one)."""
    for name, text in files.items():
        if not (root / name).exists():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text, encoding="utf-8")
    return root


class KeyOnly:
    """A stage caller with the task signature that records the stage's key instead of building it."""

    def __init__(self, stage: str, keys: list[tuple[str, str, str]]) -> None:
        self.stage, self.keys = stage, keys

    def __call__(self, store_uri: str, params: dict[str, Any], inputs: dict[str, Any] | None = None,
                 language: str | None = None, label: str | None = None) -> Artifact:
        inputs = {name: getattr(value, "result", lambda v=value: v)() for name, value in (inputs or {}).items()}
        key = stage_key(ArtifactStore(store_uri), self.stage, params, inputs)
        self.keys.append((self.stage, label or "", key))
        output = {k: v for k, v in get_stage(self.stage).key_params(params).items() if k != "data"}
        contents = {name: value.content_hash for name, value in inputs.items()}
        content = hashlib.sha256(canonical_json([self.stage, output, contents]).encode()).hexdigest()
        return Artifact(store_uri, self.stage, key, {"content_hash": content})

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        artifact = self(*args, **kwargs)
        return type("Done", (), {"result": lambda _self: artifact})()


def fixed_run_keys(root: Path, unrelated: bool = False) -> list[tuple[str, str, str]]:
    data = write_tree(root / "data", {**FILES, **(UNRELATED if unrelated else {})})
    source = write_tree(root / "source", {"config.json": '{"model_type": "xlm-roberta"}', "model.safetensors": "w"})
    corpus = write_tree(root, {"corpus.txt": "Habari ya asubuhi.\n"}) / "corpus.txt"
    cfg = load_config(language="sw", source_model=str(source), store=(root / "store").as_uri(),
                      corpus={"source": "local", "paths": [str(corpus)]},
                      init={"methods": ["focus", "random", "focus+align"]},
                      lapt={"steps": 4, "batch_size": 4, "micro_batch_size": 2, "seq_len": 32},
                      evaluation={"tasks": ["ner:masakhaner2:swa", "nli:xnli:sw"], "data_root": str(data),
                                  "seeds": 2, "heldout_sentences": 20},
                      orchestration={"lapt_methods": ["focus", "random"]})
    keys: list[tuple[str, str, str]] = []
    from focusflow.pipeline import STAGES

    specialize(cfg, cfg.store, {name: KeyOnly(name, keys) for name in STAGES})
    return keys


def built_run_keys(root: Path) -> list[tuple[str, str, str]]:
    """``--build``: the same graph on a tiny XLM-R and a generated corpus, every stage built for real
    (a few minutes on 2 cores); the keys of everything it stored, sorted (stage, "", key)."""
    import os

    from focusflow.pipeline.graph import local_tasks
    from tests.tiny_models import sample_texts, save_tiny

    os.environ["FOCUSFLOW_WORK_DIR"] = str(root / "work")
    words = [text.split() for text in sample_texts(90, seed=3)]
    conll = ["\n".join(f"{w} {'B-PER' if i == 0 else 'O'}" for i, w in enumerate(sentence)) for sentence in words]
    data = write_tree(root / "data", {f"ner/masakhaner2/swa/{split}.txt": "\n\n".join(conll[i * 30:(i + 1) * 30]) + "\n"
                                      for i, split in enumerate(("train", "dev", "test"))})
    source = root.parent / "focusflow-artifact-keys-source"  # kept: two saves of a tiny model differ in bytes
    if not (source / "config.json").is_file():
        save_tiny("xlmr", source, texts=sample_texts(600, seed=1), vocab_size=400)
    corpus = write_tree(root, {"corpus.txt": "\n".join(sample_texts(2500, seed=2))}) / "corpus.txt"
    cfg = load_config(language="sw", source_model=str(source), store=(root / "store").as_uri(),
                      corpus={"source": "local", "paths": [str(corpus)]}, cleaning={"min_chars": 10},
                      split={"min_heldout_documents": 100},
                      tokenizer={"vocab_size": 300, "threads": 1},
                      fasttext={"dim": 16, "epochs": 2, "min_count": 2, "threads": 1},
                      init={"methods": ["focus", "random", "focus+align"], "refine": {"steps": 10}},
                      lapt={"steps": 2, "batch_size": 4, "micro_batch_size": 2, "seq_len": 32, "checkpoint_every": 1,
                            "eval_every": 1, "eval_sequences": 4},
                      evaluation={"tasks": ["ner:masakhaner2:swa"], "data_root": str(data), "seeds": 1, "epochs": 1,
                                  "heldout_sentences": 20})
    specialize(cfg, cfg.store, local_tasks())
    return sorted((a.stage, "", a.key) for a in ArtifactStore(cfg.store).list())


if __name__ == "__main__":
    root = Path(tempfile.gettempdir()) / "focusflow-artifact-keys"  # a fixed place: paths are parameters
    shutil.rmtree(root, ignore_errors=True)
    if "--build" in sys.argv:
        keys = built_run_keys(root)
    else:
        keys = fixed_run_keys(root, unrelated="--unrelated" in sys.argv)
    shutil.rmtree(root, ignore_errors=True)
    for stage, label, key in keys:
        print(json.dumps([stage, label, key]))
