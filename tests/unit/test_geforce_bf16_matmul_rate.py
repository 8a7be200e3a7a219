"""compute.rates._OTHER_MATMUL_FRACTION for the GeForce RTX 5090: its torch.mm bf16 lines in
github.com/zzc0721/torch-performance-test-data database.md @9d82827637262c4351e3f9483f96b8cff57a601f (l.28 236.03,
l.45 242.18, l.88 221.65, l.103 240.05 TFLOP/s; mean 234.98) run above the datasheet's 209.5 dense (FP32 accumulate),
so the card's sustained bf16 rate is the datasheet rate, held there as the RTX 3090's is; before, it took the 80 %
default (167.6 TFLOP/s)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import DEFAULT_MAMF_FRACTION, _OTHER_MATMUL_FRACTION, default_rates

RTX5090_BF16_LINES_TFLOPS = (236.03, 242.18, 221.65, 240.05)


def test_the_rtx5090_bf16_rate_is_its_datasheet_rate() -> None:
    gpu = resolve_gpu("rtx5090")
    rates = default_rates(gpu)
    assert gpu.bf16_dense_flops_per_s == pytest.approx(209.5e12)
    assert rates.matmul_flops_per_s == pytest.approx(209.5e12)
    assert rates.matmul_flops_per_s > DEFAULT_MAMF_FRACTION * gpu.bf16_dense_flops_per_s * 1.2
    assert any("matmul 100.0%" in s and "9d82827637262c4351e3f9483f96b8cff57a601f" in s for s in rates.sources)


def test_the_measured_lines_are_above_the_datasheet_so_the_rate_is_capped() -> None:
    mean = sum(RTX5090_BF16_LINES_TFLOPS) / len(RTX5090_BF16_LINES_TFLOPS)
    assert mean == pytest.approx(234.98, abs=0.01) and mean / 209.5 == pytest.approx(1.122, abs=1e-3)
    assert _OTHER_MATMUL_FRACTION["rtx5090"][0] == 1.0 == min(1.0, mean / 209.5)
    assert _OTHER_MATMUL_FRACTION["rtx5090"][0] == _OTHER_MATMUL_FRACTION["rtx3090"][0]


def test_the_rtx5090_fp8_rate_follows_its_bf16_fraction() -> None:
    # no fp8 measurement of the card (_FP8_MATMUL_FRACTION): the dense fp8 peak at the bf16 fraction (module docstring)
    gpu = resolve_gpu("rtx5090")
    assert default_rates(gpu).fp8_matmul_flops_per_s == pytest.approx(gpu.fp8_dense_flops_per_s)
