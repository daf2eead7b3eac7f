"""The artifact keys of the shipped configurations' runs, walked without building (``artifact_keys.KeyOnly``), as a
golden snapshot (``plan_keys.json``) the fast tests compare with: a key that changes is a stage whose version was
bumped or whose parameters changed, and that is said, not found later as a cache that stopped hitting.

    python tests/pipeline/plan_keys.py            # print the keys
    python tests/pipeline/plan_keys.py --write    # write them to plan_keys.json (after an intended change)
"""

from __future__ import annotations

import json
import sys
import tempfile
from importlib.resources import files
from pathlib import Path

SNAPSHOT = Path(__file__).with_name("plan_keys.json")
# an evaluation data root of fixed content: its fingerprint, not its path, is in the keys
DATA = {"ner/masakhaner2/swa/train.txt": "Juma B-PER\nanakula O\n", "ner/masakhaner2/swa/dev.txt": "Asha B-PER\n",
        "ner/masakhaner2/swa/test.txt": "Nairobi B-LOC\n"}


def shipped_configs(data_root: Path) -> dict[str, dict]:
    """The demos as shipped, and a default run (every default, the demo corpus, one downstream task)."""
    package = files("focusflow") / "configs"
    return {"demo": {"path": package / "demo.yaml"}, "demo-llm": {"path": package / "demo-llm.yaml"},
            "default": {"fields": {"language": "sw", "corpus": {"source": "demo"},
                                   "evaluation": {"tasks": ["ner:masakhaner2:swa"], "data_root": str(data_root)}}}}


#: A minutes budget's plan is keyed by the machine that times it, ``precision: auto`` by what it means there: the
#: snapshot names one machine (fp32) for every machine.
MACHINE = {"cpu": "a CPU", "cpus": 2, "threads": 2, "accelerator": None, "world_size": 1, "torch": "2.13.0"}


def plan_keys() -> dict[str, list[list[str]]]:
    from unittest import mock

    from focusflow.config import load_config
    from focusflow.pipeline import STAGES
    from focusflow.pipeline.graph import specialize
    from tests.pipeline.artifact_keys import KeyOnly, write_tree

    with tempfile.TemporaryDirectory(prefix="focusflow-plan-keys-") as scratch, \
            mock.patch("focusflow.training.lapt_budget.machine_fingerprint", lambda: dict(MACHINE)), \
            mock.patch("focusflow.pipeline.registry.auto_precision", lambda: "fp32"):
        root = Path(scratch)
        data = write_tree(root / "data", DATA)
        found = {}
        for name, given in shipped_configs(data).items():
            cfg = load_config(given.get("path"), store=(root / "store").as_uri(), **given.get("fields", {}))
            keys: list[tuple[str, str, str]] = []
            specialize(cfg, cfg.store, {stage: KeyOnly(stage, keys) for stage in STAGES})
            found[name] = [list(row) for row in keys]
    return found


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    keys = plan_keys()
    if "--write" in sys.argv:
        SNAPSHOT.write_text(json.dumps(keys, indent=1) + "\n", encoding="utf-8")
    else:
        print(json.dumps(keys, indent=1))
