"""benchmarks/sib200_methods.py: the SIB-200 CPU protocol's options and the seed-spread verdict."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from downstream_protocol import SIB200_PROTOCOL, add_protocol_arguments, protocol_from_args, sib200_task  # noqa: E402
from sib200_methods import separation  # noqa: E402


def test_protocol_options_default_to_the_sib200_protocol() -> None:
    parser = argparse.ArgumentParser()
    add_protocol_arguments(parser, SIB200_PROTOCOL)
    assert protocol_from_args(parser.parse_args([])) == SIB200_PROTOCOL
    assert sib200_task("sw") == "cls:sib200:sw"


def test_methods_separate_only_beyond_the_sum_of_their_seed_stds() -> None:
    scores = {"a": {"mean": 0.75, "std": 0.01, "runs": [0.74, 0.76]},
              "b": {"mean": 0.70, "std": 0.02, "runs": [0.68, 0.72]},
              "c": {"mean": 0.72, "std": 0.02, "runs": [0.70, 0.74]},
              "d": {"mean": 0.60, "std": 0.0, "runs": [0.60]}}
    verdicts = {pair["pair"]: pair["separated"] for pair in separation(scores)}
    assert verdicts["a - b"] is True and verdicts["b - c"] is False
    assert verdicts["a - d"] is None  # one run: the spread is unknown
