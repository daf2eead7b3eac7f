"""One rank of a 2-process gloo DDP LAPT run (launched by torchrun in test_lapt_ddp): argv = model train heldout out."""

import sys
from pathlib import Path

import torch

from focusflow.config import LaptSpec
from focusflow.training import run_lapt

SPEC = LaptSpec(objective="mlm", steps=6, batch_size=16, micro_batch_size=4, seq_len=64, lr=2e-3, checkpoint_every=3,
                eval_every=3, log_every=1, eval_sequences=16, seed=3,
                precision="fp32")  # bf16 autocast (auto on a CPU that has it) rounds differently per layout

if __name__ == "__main__":
    torch.set_num_threads(1)
    model, train, heldout, out = map(Path, sys.argv[1:5])
    run_lapt(model, train, heldout, SPEC, out, resume=True)
