"""``precision: auto`` asks the hardware; an explicit precision always wins; autocast lowers only the products."""

from __future__ import annotations

import pytest
import torch

from focusflow import precision as precision_module
from focusflow.precision import cpu_has_native_bf16, resolve_precision


@pytest.fixture()
def cpu_capabilities(monkeypatch):
    """Pretend to be an x86 CPU with the given torch.cpu capabilities (the query's cache cleared around it)."""

    def pretend(**flags: bool) -> None:
        monkeypatch.setattr(precision_module.platform, "machine", lambda: "x86_64")
        monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"avx2": True, **flags})
        cpu_has_native_bf16.cache_clear()

    yield pretend
    cpu_has_native_bf16.cache_clear()


@pytest.mark.parametrize(("flags", "expected"), [
    ({"avx512_bf16": True, "amx_bf16": False}, torch.bfloat16),
    ({"avx512_bf16": False, "amx_bf16": True}, torch.bfloat16),
    ({"avx512_bf16": False, "amx_bf16": False, "avx512_f": True}, None),  # AVX512 alone only emulates bf16
    ({}, None),
])
def test_auto_on_a_cpu_is_bf16_exactly_when_the_capability_query_says_so(cpu_capabilities, flags, expected):
    cpu_capabilities(**flags)
    chosen = resolve_precision("auto", torch.device("cpu"))
    assert chosen.dtype == expected and not chosen.needs_scaler
    assert chosen.name == ("bfloat16" if expected is not None else "float32")
    assert chosen.setting == ("bf16" if expected is not None else "fp32")


@pytest.mark.parametrize("supported", [True, False])
def test_auto_on_arm_asks_onednn(monkeypatch, supported):
    monkeypatch.setattr(precision_module.platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: supported)
    cpu_has_native_bf16.cache_clear()
    try:
        assert resolve_precision("auto", "cpu").dtype == (torch.bfloat16 if supported else None)
    finally:
        cpu_has_native_bf16.cache_clear()


@pytest.mark.parametrize("native", [True, False])
def test_explicit_precisions_override_the_hardware(cpu_capabilities, native):
    cpu_capabilities(avx512_bf16=native)
    assert resolve_precision("bf16", "cpu").dtype == torch.bfloat16
    assert resolve_precision("fp32", "cpu").dtype is None
    fp16 = resolve_precision("fp16", "cpu")
    assert fp16.dtype == torch.float16 and fp16.needs_scaler


@pytest.mark.parametrize(("bf16", "expected"), [(True, torch.bfloat16), (False, torch.float16)])
def test_auto_on_cuda_is_bf16_else_fp16_with_a_scaler(monkeypatch, bf16, expected):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: bf16)
    chosen = resolve_precision("auto", torch.device("cuda", 0))
    assert chosen.dtype == expected and chosen.needs_scaler == (not bf16) and chosen.device_type == "cuda"


def test_auto_on_a_gpu_that_only_emulates_bf16_is_fp16(monkeypatch):
    """A T4 or V100 answers is_bf16_supported() True by emulating it: auto asks for the GPU's own bf16."""
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation)
    assert resolve_precision("auto", torch.device("cuda", 0)).dtype == torch.float16


def test_unknown_precision_is_an_error():
    with pytest.raises(ValueError, match="fp8"):
        resolve_precision("fp8", "cpu")  # type: ignore[arg-type]


def test_autocast_lowers_the_product_and_leaves_the_weights_float32():
    layer = torch.nn.Linear(8, 4)
    inputs = torch.randn(3, 8)
    with resolve_precision("bf16", "cpu").autocast():
        lowered = layer(inputs)
    with resolve_precision("fp32", "cpu").autocast():
        plain = layer(inputs)
    assert lowered.dtype == torch.bfloat16 and plain.dtype == torch.float32
    assert layer.weight.dtype == torch.float32
    torch.testing.assert_close(lowered.float(), plain, rtol=2e-2, atol=2e-2)
