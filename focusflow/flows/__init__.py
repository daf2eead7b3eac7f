"""Prefect flows: specialize a language, compare initialization methods, evaluate a checkpoint."""

from focusflow.flows.compare import compare_methods
from focusflow.flows.evaluate import evaluate_checkpoint
from focusflow.flows.specialize import run_specialize, specialize_language

__all__ = ["compare_methods", "evaluate_checkpoint", "run_specialize", "specialize_language"]
