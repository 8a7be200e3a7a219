"""The AWS A10G (g5 instances) is its own catalog entry, not the A10: its names resolve to it, its rates follow
from its SM count and the clock its datasheet figures imply, and the A10's names still resolve to the A10."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu

MiB = 2**20


@pytest.mark.parametrize("name", ["a10g", "A10G", "NVIDIA A10G", "AWS A10G"])
def test_a10g_names_resolve_to_the_a10g(name):
    assert resolve_gpu(name).id == "a10g"


@pytest.mark.parametrize("name", ["a10", "A10", "NVIDIA A10"])
def test_a10_names_still_resolve_to_the_a10(name):
    assert resolve_gpu(name).id == "a10"


def test_a10g_rates_follow_from_sm_count_and_clock():
    g = resolve_gpu("a10g")
    clock_hz = 1.71e9  # the clock both datasheet figures imply (the entry's notes)
    assert g.sm_count == 80
    assert g.fp32_flops_per_s == pytest.approx(80 * 128 * 2 * clock_hz, rel=2e-3)
    # GA102's GeForce tensor rate, 512 FLOP per SM per clock (FP16/BF16, FP32 accumulate), half the A10's
    assert g.bf16_dense_flops_per_s == pytest.approx(80 * 512 * clock_hz, rel=2e-3)
    a10 = resolve_gpu("a10")
    assert a10.bf16_dense_flops_per_s / (a10.sm_count * 1.695e9) == pytest.approx(1024, rel=3e-2)
    assert g.bf16_dense_flops_per_s < a10.bf16_dense_flops_per_s and g.fp32_flops_per_s > a10.fp32_flops_per_s


def test_a10g_card_figures():
    g = resolve_gpu("a10g")
    assert g.memory_bytes == 22731 * MiB  # nvidia-smi, ECC on, driver 470.256.02 (cited in the entry)
    assert g.hbm_bytes_per_s == a10_bw() == 600e9
    assert g.tdp_w == 300 and g.nvlink is False and g.pcie_gen == 4 and g.compute_capability == "8.6"
    assert g.fp8_dense_flops_per_s is None
    assert "NVIDIA_AWS_A10G_DataSheet" in g.source and "read 2026-12-05" in g.source


def a10_bw() -> float:
    return resolve_gpu("a10").hbm_bytes_per_s
