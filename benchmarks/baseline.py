"""This checkout's benchmark against another checkout's (an earlier main), in one run on this machine.

``--baseline DIR`` (a checkout: ``git worktree add /tmp/main a367106``) makes a throughput benchmark run its own
script and DIR's copy of it as subprocesses, alternately ``--alternate`` times, with the same arguments, each with
its own code on the path, and print both final JSON lines and their ratio: the two sides share the machine's load
and clock as closely as one run can.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def last_json(output: str) -> dict[str, Any]:
    for line in reversed(output.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"no JSON line in the benchmark's output:\n{output[-2000:]}")


def run_checkout(checkout: Path, script: str, argv: list[str]) -> dict[str, Any]:
    """``checkout``'s ``benchmarks/<script>`` with ``argv``, its code first on the path; its final JSON line."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run([sys.executable, str(checkout / "benchmarks" / script), *argv], env=env, cwd=checkout,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{checkout}/benchmarks/{script} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return last_json(done.stdout)


def compare_with_baseline(script: str, argv: list[str], baseline: Path, alternate: int, key: str) -> dict[str, Any]:
    """Run this checkout's and ``baseline``'s ``script`` alternately; the best ``key`` of each and their ratio."""
    ours_root = Path(__file__).resolve().parents[1]
    mine, theirs = [], []
    for _ in range(alternate):
        mine.append(run_checkout(ours_root, script, argv))
        theirs.append(run_checkout(Path(baseline).resolve(), script, argv))
    best_mine, best_theirs = max(r[key] for r in mine), max(r[key] for r in theirs)
    return {"baseline": str(baseline), "metric": key, "ours_runs": [r[key] for r in mine],
            "baseline_runs": [r[key] for r in theirs], "ours": best_mine, "baseline_best": best_theirs,
            "ratio": round(best_mine / best_theirs, 3), "ours_last": mine[-1], "baseline_last": theirs[-1]}


def strip_baseline_arguments(argv: list[str]) -> list[str]:
    """``argv`` without ``--baseline DIR`` and ``--alternate N`` (the arguments both sides run with)."""
    kept, skip = [], False
    for item in argv:
        if skip:
            skip = False
            continue
        if item in ("--baseline", "--alternate"):
            skip = True
            continue
        if item.startswith(("--baseline=", "--alternate=")):
            continue
        kept.append(item)
    return kept
