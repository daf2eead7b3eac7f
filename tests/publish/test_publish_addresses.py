"""``publish`` takes a model by every address the CLI prints, resolved by ``storage.locate`` and never sent to the Hub.

The forms: the full artifact URI (``echo_result``'s ``"artifact"``), ``<store>/<stage>/<key-prefix>`` as a URI or a
local path, and ``<stage>/<key-prefix>`` as the stage lines print it (``lapt: done in 3.1 s (lapt/e1010c07ec69)``),
found in ``--store`` or ``FOCUSFLOW_STORE``. Each publishes the same stored model (``--out``, no push); a prefix that
names no artifact, or more than one, is one error line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from focusflow.storage import ArtifactStore, unique_prefixes
from tests.cli_runner import error_lines, run_cli
from tests.publish.conftest import store_stage_model

REPO = "someone/tiny-lapt"
PRINTED = "e1010c07ec69"  # a key prefix as the stage lines print it; two stored keys share it


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory, tiny_model_folder: Path) -> dict[str, Any]:
    """A store with a ``lapt`` model as ``focusflow lapt`` commits it (no language recorded) and two ``lapt``
    artifacts whose keys both start with ``PRINTED``."""
    root = tmp_path_factory.mktemp("addresses")
    store = ArtifactStore((root / "store").as_uri())
    lapt = store_stage_model(store, "lapt", tiny_model_folder, {"language": None, "lineage": {}})
    twins = [store_stage_model(store, "lapt", tiny_model_folder, {"language": None, "lineage": {}}, marker=str(i),
                               key=f"{PRINTED}{i}" + "0" * 51) for i in (0, 1)]
    return {"root": root, "store": store, "lapt": lapt, "twins": twins}


def publish(monkeypatch, capsys, address: str, out: Path, *store_args: str) -> tuple[int, str, str]:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # an address sent to the Hub would fail, not download
    return run_cli(monkeypatch, capsys, "publish", address, "--repo-id", REPO, "--language", "sw", "--out", str(out),
                   *store_args)


def published_model_key(out: Path) -> str:
    return json.loads((out / "lineage.json").read_text(encoding="utf-8"))["artifacts"]["model"]["key"]


ADDRESSES = {
    "full-uri": lambda s: s["lapt"].uri,
    "uri-with-key-prefix": lambda s: f"{s['store'].uri}/lapt/{s['lapt'].key[:12]}",
    "path-with-key-prefix": lambda s: f"{s['root'] / 'store'}/lapt/{s['lapt'].key[:12]}",
    "stage-and-full-key": lambda s: f"lapt/{s['lapt'].key}",
    "stage-and-key-prefix": lambda s: f"lapt/{s['lapt'].key[:12]}",
}


@pytest.mark.parametrize("form", list(ADDRESSES))
def test_every_printed_address_publishes_the_model(monkeypatch, capsys, tmp_path, stored, form):
    address = ADDRESSES[form](stored)
    out = tmp_path / "repo"
    code, stdout, err = publish(monkeypatch, capsys, address, out, "--store", stored["store"].uri)
    assert code == 0, err
    assert published_model_key(out) == stored["lapt"].key
    assert (out / "model.safetensors").is_file() and (out / "README.md").is_file()
    assert f"repository folder: {out}" in stdout


def test_a_stage_address_is_found_in_the_store_of_the_environment(monkeypatch, capsys, tmp_path, stored):
    monkeypatch.setenv("FOCUSFLOW_STORE", stored["store"].uri)
    out = tmp_path / "repo"
    code, _, err = publish(monkeypatch, capsys, f"lapt/{stored['lapt'].key[:12]}", out)
    assert code == 0, err
    assert published_model_key(out) == stored["lapt"].key


def test_a_unique_prefix_picks_one_of_two_keys_that_share_the_printed_one(monkeypatch, capsys, tmp_path, stored):
    out = tmp_path / "repo"
    code, _, err = publish(monkeypatch, capsys, f"lapt/{PRINTED}1", out, "--store", stored["store"].uri)
    assert code == 0, err
    assert published_model_key(out) == stored["twins"][1].key


@pytest.mark.parametrize("form", ["stage", "uri"])
def test_a_prefix_of_two_keys_is_one_error_line_naming_them(monkeypatch, capsys, tmp_path, stored, form):
    address = f"lapt/{PRINTED}" if form == "stage" else f"{stored['store'].uri}/lapt/{PRINTED}"
    out = tmp_path / "repo"
    code, _, err = publish(monkeypatch, capsys, address, out, "--store", stored["store"].uri)
    assert code == 2 and "Traceback" not in err
    [line] = error_lines(err)
    assert f"lapt/{PRINTED} is ambiguous" in line and all(t.key in line for t in stored["twins"])
    assert not out.exists()


@pytest.mark.parametrize("form", ["stage", "path"])
def test_a_checkpoint_is_published_by_its_key_as_store_ls_prints_it(monkeypatch, capsys, tmp_path, tiny_model_folder,
                                                                    form):
    """Two checkpoints of one run share all but their step: ``store ls`` shows ``<prefix>…-step-00000040``."""
    from focusflow.pipeline.lapt_stage import checkpoint_key

    store = ArtifactStore((tmp_path / "store").as_uri())
    metadata = {"language": None, "lineage": {}, "total_steps": 50, "metrics": {}}
    step_40, _ = [store_stage_model(store, "lapt-checkpoint", tiny_model_folder, {**metadata, "step": step},
                                    marker=str(step), key=checkpoint_key("c" * 64, step)) for step in (40, 50)]
    shown = unique_prefixes(store.keys("lapt-checkpoint"))[step_40.key]
    assert shown.endswith("…-step-00000040")
    address = f"lapt-checkpoint/{shown}" if form == "stage" else f"{tmp_path / 'store'}/lapt-checkpoint/{shown}"
    out = tmp_path / "repo"
    code, _, err = publish(monkeypatch, capsys, address, out, "--store", store.uri)
    assert code == 0, err
    assert published_model_key(out) == step_40.key


def test_a_stage_address_that_names_nothing_is_an_error_not_a_hub_id(monkeypatch, capsys, tmp_path, stored):
    out = tmp_path / "repo"
    code, _, err = publish(monkeypatch, capsys, "lapt/ffff0000", out, "--store", stored["store"].uri)
    assert code == 2 and "Traceback" not in err
    assert error_lines(err) == [f"error: no artifact lapt/ffff0000 in {stored['store'].uri}"]
    assert not out.exists()
