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


StepBatches = list[MicroBatch]
_DONE = object()


def make_micro_batch(ids: np.ndarray, samples: np.ndarray, masker: Callable | None, pin: bool) -> MicroBatch:
    if masker is None:
        inputs, labels, predicted = ids, None, ids.shape[0] * (ids.shape[1] - 1)
    else:
        inputs, labels = masker(ids, samples)
        predicted = int((labels != -100).sum())
    input_ids = torch.from_numpy(inputs)
    label_tensor = torch.from_numpy(labels) if labels is not None else None
    if pin:
        input_ids = input_ids.pin_memory()
        label_tensor = label_tensor.pin_memory() if label_tensor is not None else None
    return MicroBatch(input_ids, label_tensor, predicted)


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
