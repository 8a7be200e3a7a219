"""MI300X fp8 GEMM rate: its own published hipBLASLt measurement, not 2x the bf16 MAMF (compute/rates.py)."""

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import default_rates


def test_mi300x_fp8_rate_is_the_published_hipblaslt_share():
    gpu = resolve_gpu("mi300x")
    r = default_rates(gpu)
    # 1,159.5 TFLOP/s of the 2,614.9 dense fp8 datasheet peak (Azure ND MI300X v5, hipblaslt-bench, default heuristic)
    assert r.fp8_matmul_flops_per_s == pytest.approx(0.443 * gpu.fp8_dense_flops_per_s)
    assert r.fp8_matmul_flops_per_s == pytest.approx(1158.4e12, rel=2e-3)
    # the bf16 rate keeps the MAMF table's TunableOp row; fp8 is now 1.72x it, not 2x
    assert r.matmul_flops_per_s == pytest.approx(0.514 * gpu.bf16_dense_flops_per_s)
    assert r.fp8_matmul_flops_per_s / r.matmul_flops_per_s == pytest.approx(1.72, abs=0.01)
    assert any(s.startswith("fp8 matmul 44.3%") for s in r.sources)


def test_other_cards_keep_fp8_at_their_bf16_fraction():
    for gid in ("h100-sxm", "h200", "b200", "gb200"):
        gpu = resolve_gpu(gid)
        r = default_rates(gpu)
        frac = r.matmul_flops_per_s / gpu.bf16_dense_flops_per_s
        assert r.fp8_matmul_flops_per_s == pytest.approx(frac * gpu.fp8_dense_flops_per_s)
        assert not any(s.startswith("fp8 matmul") for s in r.sources)


def test_mi300x_hbm_rate_is_the_published_stream_copy():
    gpu = resolve_gpu("mi300x")
    r = default_rates(gpu)
    # STREAM Copy 4.11 TB/s of the 5.3 TB/s datasheet (Azure ND MI300X v5), not the 90 % assumed for NVIDIA cards
    assert r.hbm_bytes_per_s == pytest.approx(0.775 * 5.3e12)
    assert r.hbm_bytes_per_s == pytest.approx(4.11e12, rel=1e-3)
    assert any(s.startswith("HBM 77.5%") for s in r.sources)
    for gid in ("h100-sxm", "b200"):  # no measurement of their own: the 90 % default
        other = resolve_gpu(gid)
        assert default_rates(other).hbm_bytes_per_s == pytest.approx(0.90 * other.hbm_bytes_per_s)
