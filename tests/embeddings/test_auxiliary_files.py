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


def test_the_default_settings_give_the_same_bytes_on_every_run(transfer_case, tmp_path):
    """Same key, same content: the fastText stage recomputed into a second store matches byte for byte."""
    from focusflow.config import FastTextSpec
    from focusflow.pipeline import run_stage
    from focusflow.storage import ArtifactStore

    spec = FastTextSpec(dim=8, min_count=2, epochs=1)
    assert spec.threads == 1
    split = tmp_path / "split"
    split.mkdir()
    (split / "train.jsonl").write_bytes(transfer_case["train"].read_bytes())
    built = []
    for name in ("one", "two"):
        store = ArtifactStore(tmp_path / name)
        inputs = {"tokenizer": store.put_dir("tokenizer", "t" * 64, transfer_case["target_dir"]),
                  "split": store.put_dir("split", "s" * 64, split)}
        artifact = run_stage(store, "fasttext", {"fasttext": spec.model_dump(mode="json")}, inputs)
        built.append((artifact.key, {f: store.read_bytes(artifact, f) for f in sorted(artifact.files)}))
    assert built[0][0] == built[1][0] and built[0][1] == built[1][1]
