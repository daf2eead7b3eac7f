"""``--protocol cpu``: the benchmarks' CPU protocol as a named preset; what a user gives always wins."""

from __future__ import annotations

import pytest

from focusflow.config import ConfigError, DownstreamSettings, downstream_settings
from focusflow.evaluation.downstream.presets import protocol_values, with_protocol


def test_the_cpu_preset_fills_what_was_left_at_its_default():
    settings = with_protocol(DownstreamSettings(protocol="cpu"), "cls", "sib200")
    assert (settings.epochs, settings.batch_size, settings.max_length, settings.lr, settings.embedding_lr_scale,
            settings.eval_every_fraction, settings.patience) == (12.0, 16, 64, 1e-4, 10.0, 1 / 24, 6)
    masakhaner = with_protocol(DownstreamSettings(protocol="cpu"), "ner", "masakhaner2")
    assert (masakhaner.max_train_samples, masakhaner.epochs, masakhaner.lr) == (960, 5.0, 2e-4)
    assert with_protocol(DownstreamSettings(protocol="cpu"), "ner", "my_folder").lr == 5e-4  # any NER folder


def test_what_the_user_gives_wins_over_the_preset():
    settings = with_protocol(DownstreamSettings(protocol="cpu", lr=3e-5, epochs=1.0), "cls", "sib200")
    assert (settings.lr, settings.epochs, settings.batch_size) == (3e-5, 1.0, 16)


def test_the_paper_protocol_and_unmeasured_kinds_change_nothing():
    plain = DownstreamSettings()
    assert with_protocol(plain, "cls", "sib200") == plain and protocol_values("paper", "ner", "wikiann") == {}
    assert with_protocol(DownstreamSettings(protocol="cpu"), "qa", "tydiqa").lr is None  # no CPU protocol measured


def test_an_unknown_protocol_is_a_settings_error():
    with pytest.raises(ConfigError, match="protocol"):
        downstream_settings(protocol="laptop")
