"""Golden keys: the shipped configurations' runs keep their artifact keys unless a change says it changes them."""

from __future__ import annotations

import json

from tests.pipeline.plan_keys import SNAPSHOT, plan_keys


def test_the_shipped_configurations_keep_their_artifact_keys():
    expected = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    found = plan_keys()
    assert set(found) == set(expected)
    for name, rows in found.items():
        changed = [f"{stage}[{label}]" for (stage, label, key), old in zip(rows, expected[name], strict=False)
                   if [stage, label, key] != old]
        assert len(rows) == len(expected[name]) and not changed, (
            f"{name}: the keys of {changed or 'its stage calls'} changed. If a stage's version or parameters were "
            "meant to change, write the snapshot again (python tests/pipeline/plan_keys.py --write) and say which "
            "stages change in the commit; otherwise a change broke the cache of every stored run")
