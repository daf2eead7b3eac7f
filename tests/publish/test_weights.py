"""Whether a model is fit to publish: a model without a stored check is held against the model its weights began as.

Issue 47: a model whose weights were ×1000 passed (``weights_check: {against: absolute, passed: true}``): without a
run's start to compare with, only the absolute bound was asked. Now the source model the lineage names is the start:
every tensor's RMS within 10× of the source's, by name (a new vocabulary's embedding matrix, of another shape,
compares by its RMS too); tensors the source lacks are counted and held to the absolute bound.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from focusflow.cli.stage_io import import_folder
from focusflow.models.weights import RMS_GROWTH_LIMIT
from focusflow.publish.lineage import trace
from focusflow.publish.weights import weight_check
from focusflow.storage import ArtifactStore
from tests.cli_runner import error_lines, run_cli

EXTRA = "focusflow_test.extra.weight"  # a tensor the source does not have


def reweighted(folder: Path, out: Path, factor: float = 1.0, new_vocabulary: int = 0) -> Path:
    """A copy of a model folder with its weights ×``factor``; ``new_vocabulary`` rows more in the word embeddings
    (drawn at the source's RMS: another shape, the same scale) and a tensor the source lacks, when given."""
    shutil.copytree(folder, out)
    weights = {name: tensor * factor for name, tensor in load_file(folder / "model.safetensors").items()}
    if new_vocabulary:
        name = next(n for n in weights if "word_embeddings" in n)
        old = weights[name]
        rms = float(old.pow(2).mean().sqrt())
        rows = torch.randn(old.shape[0] + new_vocabulary, old.shape[1], generator=torch.Generator().manual_seed(0))
        weights[name] = rows * rms
        weights[EXTRA] = torch.full((4,), 0.5)
    save_file({name: tensor.contiguous() for name, tensor in weights.items()}, out / "model.safetensors",
              metadata={"format": "pt"})
    return out


def stored_model(store: ArtifactStore, stage: str, folder: Path, inputs: dict, params: dict):
    return store.put_dir(stage, store.key(stage, params, inputs, 1), folder, params=params, inputs=inputs,
                         metadata={"language": "ny"})


@pytest.fixture(scope="module")
def models(tmp_path_factory, tiny_model_folder) -> dict:
    root = tmp_path_factory.mktemp("weights")
    store = ArtifactStore((root / "store").as_uri())
    given = import_folder(store, "model", tiny_model_folder)  # `focusflow init --source FOLDER` stores it so
    converted = shutil.copytree(tiny_model_folder, root / "converted")
    (converted / "focusflow_source.json").write_text("{}")  # the source stage's own folder: other content
    source = stored_model(store, "source", converted, {}, {"source_model": "local", "fingerprint": "tiny"})
    found = {"store": store, "root": root, "source": source}
    for name, factor in (("sound", 1.0), ("blown", 1000.0)):
        folder = reweighted(tiny_model_folder, root / name, factor, new_vocabulary=37)
        found[f"{name}-by-command"] = stored_model(store, "init", folder, {"source": given}, {"method": "focus", "of": name})
        found[f"{name}-in-run"] = stored_model(store, "init", folder, {"source": source}, {"method": "focus", "in": name})
    return found


@pytest.mark.parametrize("built", ["by-command", "in-run"])
def test_a_model_without_a_stored_check_is_held_against_its_source_model(models, built):
    store = models["store"]
    sound = weight_check(store, trace(store, models[f"sound-{built}"]))
    reference = "import/" if built == "by-command" else f"source/{models['source'].key[:12]}"
    assert sound.passed and sound.against == "source" and sound.reference.startswith(reference)
    assert sound.max_rms_ratio < RMS_GROWTH_LIMIT  # the new vocabulary's embedding rows compared by RMS, other shape
    assert sound.uncompared == 1  # the tensor the source lacks: counted, held to the absolute bound
    blown = weight_check(store, trace(store, models[f"blown-{built}"]))
    assert not blown.passed and blown.against == "source" and blown.max_rms_ratio > 100
    assert "past 10x its RMS in the source model" in blown.problem


def test_a_published_copy_x1000_is_refused_and_published_with_force_only_with_that_failure_first(
        models, monkeypatch, capsys):
    """A published folder names its source in lineage.json: a copy of it with its weights ×1000 is checked against
    that source when the store holds it, refused in one line, and with --force its card's first warning says so."""
    store, root = models["store"], models["root"]

    def publish(model: str, name: str, *more: str) -> tuple[int, str, str]:
        return run_cli(monkeypatch, capsys, "publish", model, "--repo-id", f"someone/{name}", "--out",
                       str(root / name), "--store", store.uri, *more)

    code, out, err = publish(models["sound-in-run"].uri, "published")
    assert code == 0, err[-2000:]
    assert "source" in json.loads((root / "published" / "lineage.json").read_text())["artifacts"]
    copy = reweighted(root / "published", root / "copy-x2", factor=2.0)  # within 10x of the source: sound
    blown = reweighted(root / "published", root / "copy-x1000", factor=1000.0)

    code, out, err = publish(str(blown), "refused", "--language", "ny")
    assert code == 2 and len(error_lines(err)) == 1 and "Traceback" not in err
    assert f"failed focusflow's weight check against source/{models['source'].key[:12]}" in error_lines(err)[0]
    assert "--force" in error_lines(err)[0] and not (root / "refused").exists()

    code, out, err = publish(str(blown), "forced", "--language", "ny", "--force")
    assert code == 0, err[-2000:]
    card = (root / "forced" / "README.md").read_text(encoding="utf-8")
    warnings = [line for line in card.splitlines() if line.startswith("- **Warning**")]
    assert "FAILED focusflow's weight check" in warnings[0] and "compared with the source model (`source/" in warnings[0]

    code, out, err = publish(str(copy), "copy", "--language", "ny")
    assert code == 0, err[-2000:]
    published = store.resolve(json.loads(out[:out.rindex("}") + 1])["artifact"])
    assert published.metadata["weights_check"]["against"] == "source"
    assert "weight check passed: every tensor finite, compared with the source model (`source/" in (
        root / "copy" / "README.md").read_text(encoding="utf-8")


def test_a_folder_whose_weights_are_pickles_is_refused_not_published_empty(models, monkeypatch, capsys):
    """A ``pytorch_model.bin`` folder published a repository with no weights, its card saying the check passed
    (a check of no tensors): refused in one line that names the file and the fix; nothing written."""
    root = models["root"]
    pickled = shutil.copytree(root / "sound", root / "pickled")
    torch.save(load_file(pickled / "model.safetensors"), pickled / "pytorch_model.bin")
    (pickled / "model.safetensors").unlink()
    code, out, err = run_cli(monkeypatch, capsys, "publish", str(pickled), "--repo-id", "someone/pickled", "--out",
                             str(root / "pickled-out"), "--store", models["store"].uri, "--language", "ny")
    assert code == 2 and len(error_lines(err)) == 1 and "Traceback" not in err, err[-2000:]
    assert "has no safetensors weights: its weights are pickles (pytorch_model.bin)" in error_lines(err)[0]
    assert "save_pretrained()" in error_lines(err)[0] and not (root / "pickled-out").exists()
