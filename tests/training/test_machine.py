"""The machine a timing belongs to: two generations of a processor that a virtual machine names alike are told
apart by their generation and instruction sets, so one's LAPT plan is never another's."""

from __future__ import annotations

from pathlib import Path

import pytest

from focusflow.training import machine

ZEN3 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu sse2 avx avx2 fma

processor\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx avx2 fma
"""
ZEN5 = ZEN3.replace("cpu family\t: 25", "cpu family\t: 26").replace(
    "model\t\t: 1", "model\t\t: 2").replace("avx2 fma\n", "avx2 fma avx512f avx512_vnni avx512_bf16\n", 1)


def _fingerprint_of(cpuinfo: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    path = tmp_path / f"cpuinfo-{abs(hash(cpuinfo))}"
    if cpuinfo is not None:
        path.write_text(cpuinfo, encoding="utf-8")
    monkeypatch.setattr(machine, "CPUINFO", path)
    return machine.machine_fingerprint()


def test_two_processors_of_one_name_are_two_machines(tmp_path, monkeypatch):
    older, newer = _fingerprint_of(ZEN3, tmp_path, monkeypatch), _fingerprint_of(ZEN5, tmp_path, monkeypatch)
    assert older["cpu"] == newer["cpu"] == "AMD EPYC"
    assert (older["cpu_model"], newer["cpu_model"]) == ("25/1/1", "26/2/1")
    assert older["isa"] == ["avx2"] and newer["isa"] == ["avx2", "avx512f", "avx512_vnni", "avx512_bf16"]
    assert older != newer


def test_a_machine_without_cpuinfo_is_named_by_the_platform(tmp_path, monkeypatch):
    found = _fingerprint_of(None, tmp_path, monkeypatch)
    assert found["cpu"] and found["cpu_model"] is None and found["isa"] == []


def test_an_arm_processor_lists_its_features(tmp_path, monkeypatch):
    _fingerprint_of("processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\nCPU part\t: 0xd40\n", tmp_path, monkeypatch)
    assert machine._kernel_flags() == ["asimd", "sve", "bf16", "i8mm"]
