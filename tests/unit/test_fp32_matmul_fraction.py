"""compute.rates._FP32_MATMUL_FRACTION: the SIMT fp32 GEMM rate (TF32 off) of a card whose SGEMM is measured apart
from its datasheet FP32 rate. The RTX PRO 6000 Blackwell's torch.mm fp32 is 77.24 / 77.01 TFLOP/s (Workstation /
Server Edition), 61.7 % of the datasheet 125; every other catalog card the same database measures takes the mean
of its lines; the cards it does not measure (or names ambiguously: "A100 40GB") keep their datasheet rate."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.gemm import gemm_seconds
from trainfit.compute.rates import _FP32_MATMUL_FRACTION, default_rates


def test_the_rtx_pro_6000_fp32_rate_is_its_measured_sgemm() -> None:
    gpu = resolve_gpu("rtx-pro-6000")
    rates = default_rates(gpu)
    assert rates.fp32_matmul_flops_per_s == pytest.approx((77.24e12 + 77.01e12) / 2, rel=2e-3)
    assert rates.fp32_matmul_flops_per_s < 0.65 * gpu.fp32_flops_per_s
    assert any("fp32 matmul 61.7%" in s and "9d82827637262c4351e3f9483f96b8cff57a601f" in s for s in rates.sources)
    # the bf16 rate is not touched: the card's measured torch.mm bf16 (_OTHER_MATMUL_FRACTION)
    assert rates.matmul_flops_per_s == pytest.approx((417.98e12 + 409.42e12) / 2, rel=2e-3)


@pytest.mark.parametrize("gid", ["a100-40gb", "a100-pcie-80gb", "h800", "h200-nvl", "l40", "a10", "mi300x"])
def test_cards_without_a_measurement_keep_the_datasheet_fp32_rate(gid: str) -> None:
    gpu = resolve_gpu(gid)
    assert gid not in _FP32_MATMUL_FRACTION
    assert default_rates(gpu).fp32_matmul_flops_per_s == gpu.fp32_flops_per_s


def test_an_fp32_gemm_on_the_rtx_pro_6000_takes_the_measured_rate() -> None:
    """A large fp32 GEMM (compute-bound, full tiles) takes 125 / 77.1 = 1.62x what the datasheet rate gives; a bf16
    one of the same shape is unchanged."""
    rates = default_rates(resolve_gpu("rtx-pro-6000"))
    datasheet = rates.__class__(**{**{f: getattr(rates, f) for f in rates.__slots__},
                                   "fp32_matmul_flops_per_s": 125e12})
    shape = {"m": 16384, "n": 4096, "k": 4096}
    measured_s = gemm_seconds(**shape, rates=rates, dtype_bytes=4.0)
    ratio = measured_s / gemm_seconds(**shape, rates=datasheet, dtype_bytes=4.0)
    assert ratio == pytest.approx(125e12 / rates.fp32_matmul_flops_per_s, rel=1e-6)
    assert gemm_seconds(**shape, rates=rates) == gemm_seconds(**shape, rates=datasheet)


@pytest.mark.parametrize(("gid", "tflops"), [
    ("h100-sxm", (51.88 + 52.11) / 2), ("h100-pcie", 36.95), ("a100-80gb", 19.18),
    ("rtx4090-48gb", (54.69 + 53.79 + 56.01) / 3),  # database.md l.9, l.31, l.53 (l.12 is a Tesla P40)
    ("rtx4090", (55.01 + 54.77 + 46.48 + 54.67) / 4), ("rtx5090", (69.16 + 67.57 + 63.99 + 70.47) / 4),
    ("l40s", 46.88), ("b200", 66.24), ("h200", 51.34), ("h20", (31.95 + 31.99) / 2), ("t4", (4.17 + 4.43 + 4.35) / 3),
    ("rtx3090", (24.46 + 24.84 + 24.79) / 3), ("a100-pcie-40gb", 17.56), ("l4", 15.38),
])
def test_measured_cards_take_the_measured_fp32_rate(gid: str, tflops: float) -> None:
    """The database's torch.mm fp32 figures (TF32 off), read by hand: the rate within 0.2 % of the mean measurement."""
    rate = default_rates(resolve_gpu(gid)).fp32_matmul_flops_per_s
    assert rate == pytest.approx(tflops * 1e12, rel=2e-3)
