"""compute.rates._OTHER_MATMUL_FRACTION for the GeForce RTX 5090 and RTX 3090: their torch.mm bf16 lines in
github.com/zzc0721/torch-performance-test-data database.md (RTX 5090 @9d82827637262c4351e3f9483f96b8cff57a601f l.28
236.03, l.45 242.18, l.88 221.65, l.103 240.05 TFLOP/s, mean 234.98; RTX 3090 @078586871da31ad6aaaf6fa43bc4ec3f284b151d
76.58, 76.34, 76.68, mean 76.53) run above the datasheet rates (209.5 and 71.0 dense, FP32 accumulate, each at its
rated boost clock), and the card's sustained bf16 rate is the measured one, as every other measured card's is. Until
2026-12-05 both were capped at the datasheet rate; before that the RTX 5090 took the 80 % default (167.6 TFLOP/s)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import DEFAULT_MAMF_FRACTION, _OTHER_MATMUL_FRACTION, default_rates

RTX5090_BF16_LINES_TFLOPS = (236.03, 242.18, 221.65, 240.05)
RTX3090_BF16_LINES_TFLOPS = (76.58, 76.34, 76.68)


def test_the_rtx5090_bf16_rate_is_its_measured_rate() -> None:
    gpu = resolve_gpu("rtx5090")
    rates = default_rates(gpu)
    assert gpu.bf16_dense_flops_per_s == pytest.approx(209.5e12)
    mean = sum(RTX5090_BF16_LINES_TFLOPS) / len(RTX5090_BF16_LINES_TFLOPS)
    assert rates.matmul_flops_per_s == pytest.approx(mean * 1e12, rel=1e-4)
    assert rates.matmul_flops_per_s > 1.1 * gpu.bf16_dense_flops_per_s  # not capped at the datasheet rate
    assert rates.matmul_flops_per_s > DEFAULT_MAMF_FRACTION * gpu.bf16_dense_flops_per_s * 1.2
    assert any("matmul 112.2%" in s and "9d82827637262c4351e3f9483f96b8cff57a601f" in s for s in rates.sources)


def test_the_rtx3090_bf16_rate_is_its_measured_rate() -> None:
    gpu = resolve_gpu("rtx3090")
    mean = sum(RTX3090_BF16_LINES_TFLOPS) / len(RTX3090_BF16_LINES_TFLOPS)
    assert default_rates(gpu).matmul_flops_per_s == pytest.approx(mean * 1e12, rel=1e-3)
    assert _OTHER_MATMUL_FRACTION["rtx3090"][0] == pytest.approx(mean / 71.0, rel=1e-3)


def test_the_measured_rate_needs_a_clock_above_the_rated_boost() -> None:
    # 209.5 TFLOP/s = 170 SMs x 512 dense bf16 FLOP per clock (FP32 accumulate) x 2.407 GHz: the measured mean needs
    # the clock GPU Boost holds under the matmul, about 2.70 GHz (rates module docstring)
    per_clock = 209.5e12 / 170 / 2.407e9
    assert per_clock == pytest.approx(512, rel=1e-3)
    mean = sum(RTX5090_BF16_LINES_TFLOPS) / len(RTX5090_BF16_LINES_TFLOPS)
    assert mean * 1e12 / (170 * 512) / 1e9 == pytest.approx(2.70, abs=0.01)


def test_the_rtx5090_fp8_rate_follows_its_bf16_fraction() -> None:
    # no fp8 measurement of the card (_FP8_MATMUL_FRACTION): the dense fp8 peak at the bf16 fraction (module docstring)
    gpu = resolve_gpu("rtx5090")
    frac = _OTHER_MATMUL_FRACTION["rtx5090"][0]
    assert default_rates(gpu).fp8_matmul_flops_per_s == pytest.approx(gpu.fp8_dense_flops_per_s * frac)
