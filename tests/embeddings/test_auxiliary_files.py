"""The fastText stage stores what initialization reads; fastText's own ``.bin`` only when asked."""

from __future__ import annotations

from focusflow.embeddings.auxiliary import BIN_FILE, TOKENS_FILE, VECTORS_FILE, load_aux_vectors


def test_fasttext_binary_is_kept_only_when_asked(transfer_case, tmp_path):
    from focusflow.config import FastTextSpec
    from focusflow.embeddings import train_aux_embeddings

    spec = FastTextSpec(dim=8, min_count=2, epochs=1, threads=1)
    assert spec.keep_binary is False
    train_aux_embeddings(transfer_case["target_dir"], transfer_case["train"], spec, tmp_path / "plain")
    assert sorted(p.name for p in (tmp_path / "plain").iterdir()) == sorted([TOKENS_FILE, VECTORS_FILE])
    assert len(load_aux_vectors(tmp_path / "plain").tokens) > 0
    assert (transfer_case["aux_dir"] / BIN_FILE).stat().st_size > 0, "keep_binary=True keeps fastText's .bin"
