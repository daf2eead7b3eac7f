"""Embedding transfer: overlap, auxiliary fastText space, FOCUS, baselines, sparsemax, model initialization."""

from focusflow.embeddings.api import initialize_model
from focusflow.embeddings.auxiliary import AuxVectors, load_aux_vectors, load_fasttext_bin, train_aux_embeddings
from focusflow.embeddings.overlap import Overlap, compute_overlap
from focusflow.embeddings.plan import TransferPlan
from focusflow.embeddings.sparsemax import sparsemax, sparsemax_topk
from focusflow.embeddings.transfer import METHODS, TransferResult, build_plan, transfer_embeddings

__all__ = ["initialize_model", "train_aux_embeddings", "load_aux_vectors", "load_fasttext_bin", "AuxVectors",
           "compute_overlap", "Overlap", "TransferPlan", "sparsemax", "sparsemax_topk", "transfer_embeddings",
           "TransferResult", "build_plan", "METHODS"]
