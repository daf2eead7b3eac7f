"""Evaluation: intrinsic (fidelity, masked/causal LM, bits per byte), method comparison, downstream tasks."""
