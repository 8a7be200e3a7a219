"""MI300X's sustained matmul rate is the MAMF table's current (v2, cache-reset) row, not the removed v1 row."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import default_rates


def test_mi300x_sustains_the_v2_mamf_row():
    # stas00/ml-engineering compute/accelerator/README.md @744d01e1: "AMD MI300X | 668.4 | 1300 | 51.4%"
    # (torch 2.5.1 + ROCm 6.3, PYTORCH_TUNABLEOP_ENABLED=1); the v1 row (781.9, 60.1 %) measured without the
    # cache reset and was removed from the README in e695968e
    gpu = resolve_gpu("mi300x")
    r = default_rates(gpu)
    assert r.matmul_flops_per_s == pytest.approx(gpu.bf16_dense_flops_per_s * 0.514)
    assert r.matmul_flops_per_s == pytest.approx(668.4e12, rel=0.01)
    assert r.matmul_flops_per_s < 0.9 * 781.9e12
    assert "51.4%" in r.sources[0]

