"""Run LAPT in a child process (the kill -9 / resume test): argv = model train heldout out."""

import sys
from pathlib import Path

from focusflow.config import LaptSpec
from focusflow.training import run_lapt

SPEC = LaptSpec(objective="mlm", steps=24, batch_size=16, micro_batch_size=4, seq_len=64, lr=1e-3, checkpoint_every=8,
                keep_last=2, eval_every=20, log_every=4, seed=7, warmup_fraction=0.1, schedule="cosine")

if __name__ == "__main__":
    model, train, heldout, out = map(Path, sys.argv[1:5])
    run_lapt(model, train, heldout, SPEC, out, resume=True)
