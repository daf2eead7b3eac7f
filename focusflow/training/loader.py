"""A prefetching loader: a background thread masks and batches the next steps' samples into
(pinned, on CUDA) tensors while the accelerator computes the current step."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class MicroBatch:
    input_ids: torch.Tensor
    labels: torch.Tensor | None
    predicted: int  # tokens carrying a loss (masked tokens for MLM, T-1 per row for CLM)
    positions: torch.Tensor | None = None  # flat indices of the masked tokens (MLM)


StepBatches = list[MicroBatch]
_DONE = object()


def make_micro_batch(ids: np.ndarray, samples: np.ndarray, masker: Callable | None, pin: bool) -> MicroBatch:
    if masker is None:
        inputs, labels, positions, predicted = ids, None, None, ids.shape[0] * (ids.shape[1] - 1)
    else:
        inputs, labels = masker(ids, samples)
        positions = np.flatnonzero(labels != -100)
        predicted = len(positions)
    tensors = [torch.from_numpy(a) if a is not None else None for a in (inputs, labels, positions)]
    if pin:
        tensors = [t.pin_memory() if t is not None else None for t in tensors]
    return MicroBatch(tensors[0], tensors[1], predicted, tensors[2])


class Prefetcher:
    """Iterates ``produce(item)`` over ``items`` with up to ``depth`` results computed ahead in a thread."""

    def __init__(self, items: Iterator, produce: Callable, depth: int = 4):
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(items, produce), daemon=True)
        self._thread.start()

    def _run(self, items: Iterator, produce: Callable) -> None:
        try:
            for item in items:
                if self._stop.is_set():
                    return
                self._queue.put(produce(item))
            self._queue.put(_DONE)
        except BaseException as exc:  # surfaced in the consumer
            self._queue.put(exc)

    def __iter__(self) -> Prefetcher:
        return self

    def __next__(self):
        item = self._queue.get()
        if item is _DONE:
            raise StopIteration
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        self._stop.set()
        while self._thread.is_alive():
            try:
                self._queue.get_nowait()
            except queue.Empty:
                self._thread.join(timeout=0.05)
