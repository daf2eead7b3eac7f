"""What a test asks of a Dask worker while a flow runs, in a module that imports nothing heavy: ``client.run`` sends a
function by reference, so the worker imports its module in its communication thread, and a test module that imports
transformers there races the worker's own stage thread importing it (transformers' lazy module then raised
"cannot import name 'BertConfig'" in CI)."""

from __future__ import annotations

import sys
from typing import Any


def is_training(dask_worker: Any = None) -> bool:
    """Runs on a Dask worker: is one of its threads inside ``run_lapt`` now?"""
    for frame in sys._current_frames().values():
        while frame is not None:
            if frame.f_code.co_name == "run_lapt":
                return True
            frame = frame.f_back
    return False
