"""GB200's and B200's sustained matmul rates are their own measured MAMF, not the H100-ratio default (compute/rates.py)."""

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import DEFAULT_MAMF_FRACTION, default_rates


def test_gb200_matmul_is_its_measured_mamf():
    gpu = resolve_gpu("gb200")
    r = default_rates(gpu)
    # stas00/ml-engineering MAMF table, row "NVIDIA GB200 SXM": 1,822.0 TFLOP/s of 2,500
    assert r.matmul_flops_per_s == pytest.approx(1822.0e12, rel=2e-3)
    assert r.matmul_flops_per_s < DEFAULT_MAMF_FRACTION * gpu.bf16_dense_flops_per_s
    assert r.fp8_matmul_flops_per_s == pytest.approx(0.729 * gpu.fp8_dense_flops_per_s)
    assert "MAMF table" in r.sources[0] and "default" not in r.sources[0]


def test_b200_matmul_is_its_measured_mamf():
    r = default_rates(resolve_gpu("b200"))
    # the same table, row "NVIDIA B200 SXM": 1,745.0 TFLOP/s of 2,250
    assert r.matmul_flops_per_s == pytest.approx(1745.0e12, rel=2e-3)
    assert "MAMF table" in r.sources[0] and "default" not in r.sources[0]


def test_a_card_outside_the_table_keeps_the_stated_default():
    r = default_rates(resolve_gpu("l40s"))
    assert r.matmul_flops_per_s == pytest.approx(DEFAULT_MAMF_FRACTION * resolve_gpu("l40s").bf16_dense_flops_per_s)
    assert "default, the H100 MAMF ratio" in r.sources[0]
