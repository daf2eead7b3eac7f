"""What every benchmark starts with: this checkout's ``focusflow`` first on the path, and where the shared data lies.

A benchmark runs as a script (``python benchmarks/x.py``: its folder is first on the path) or is imported by
``tests/benchmarks`` (which put the folder there), so ``from _preamble import ROOT, SHARED`` finds this module
either way, before any ``focusflow`` import: the code measured is this checkout's, not an installed copy.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # this checkout
SHARED = ROOT.parent / "shared" / "data"  # the data the checkouts share: text/, ner/, cls/
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
