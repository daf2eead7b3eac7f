"""Language-adaptive pretraining (LAPT): MLM for encoders, causal LM for decoders, two-stage and LoRA,
resumable atomic checkpoints, DDP under torchrun. Pure library code (no Prefect).

Launch on one machine: ``run_lapt(...)`` or ``focusflow lapt ...``. On N GPUs (a GPU work pool's job
command, or by hand): ``torchrun --nproc_per_node N --no-python focusflow lapt ... --no-progress``; on
several nodes add ``--nnodes/--node_rank/--rdzv_endpoint`` and give every node the same (shared) ``--out``.
Every rank runs the same code; rank 0 tokenizes, writes checkpoints and the final model.

``align_embeddings`` refines an initialized model's new embedding rows against the source model (word-pooled
hidden states at one layer, body frozen) in the same training loop (``training.loop.TrainingRun``, handed LAPT's
recipe ``training.lapt.LaptRecipe``, the distillation's ``training.distill.DistillRecipe`` or align's
``training.align.AlignRecipe``).
"""

from focusflow.models.lm_stats import Masker
from focusflow.training.align import AlignSpec, align_embeddings
from focusflow.training.checkpoint import latest_checkpoint
from focusflow.training.data import PackedSequences, pretokenize
from focusflow.training.flops import flops_per_token, peak_flops
from focusflow.training.lapt import run_lapt
from focusflow.training.lm_loss import LossModel
from focusflow.training.mlm_head import prepare_source, train_mlm_head

__all__ = ["run_lapt", "align_embeddings", "AlignSpec", "latest_checkpoint", "pretokenize", "PackedSequences",
           "Masker", "LossModel", "flops_per_token", "peak_flops", "prepare_source", "train_mlm_head"]
