"""Hopper's backward fp8 GEMMs run without fast accumulation, at the published ``_scaled_mm`` fp8 MAMF
(compute/rates.py ``_FP8_PRECISE_ACCUMULATION_FRACTION``, compute/gemm.py ``fp8_precise_rates``)."""

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.gemm import fp8_precise_rates, gemm_seconds
from trainfit.compute.rates import default_rates, power_limited_rates


@pytest.mark.parametrize(("gid", "frac"), [("h100-sxm", 0.709), ("h200", 0.734), ("gh200", 0.776)])
def test_hopper_precise_rate_is_the_fp8_mamf_row(gid: str, frac: float) -> None:
    gpu = resolve_gpu(gid)
    r = default_rates(gpu)
    assert r.fp8_precise_matmul_flops_per_s == pytest.approx(frac * gpu.fp8_dense_flops_per_s)
    assert r.fp8_precise_matmul_flops_per_s < r.fp8_matmul_flops_per_s  # the forward keeps the bf16 fraction
    assert any(s.startswith("fp8 backward GEMMs") for s in r.sources)


@pytest.mark.parametrize("gid", ["b200", "gb200", "a100-80gb", "mi300x"])
def test_other_cards_have_no_separate_backward_rate(gid: str) -> None:
    r = default_rates(resolve_gpu(gid))
    assert r.fp8_precise_matmul_flops_per_s is None
    assert fp8_precise_rates(r) is r


def test_backward_fp8_gemm_is_slower_by_the_two_fractions_and_bf16_is_unchanged() -> None:
    r = default_rates(resolve_gpu("h100-sxm"))
    b = fp8_precise_rates(r)
    shape = {"m": 8192.0, "n": 8192.0, "k": 8192.0}
    fwd = gemm_seconds(**shape, rates=r, dtype_bytes=1)
    bwd = gemm_seconds(**shape, rates=b, dtype_bytes=1)
    assert bwd / fwd == pytest.approx(0.803 / 0.709, rel=1e-3)
    assert gemm_seconds(**shape, rates=b, dtype_bytes=2) == gemm_seconds(**shape, rates=r, dtype_bytes=2)


def test_power_limit_scales_the_precise_rate_too() -> None:
    gpu = resolve_gpu("h100-sxm")
    r = default_rates(gpu)
    low = power_limited_rates(r, power_limit_w=400, rated_power_w=700)
    f = (400 / 700) ** (1 / 3)
    assert low.fp8_precise_matmul_flops_per_s == pytest.approx(r.fp8_precise_matmul_flops_per_s * f)


def test_calibration_may_null_it() -> None:
    r = default_rates(resolve_gpu("h100-sxm"))
    assert r.with_overrides({"fp8_precise_matmul_flops_per_s": None}, source="t").fp8_precise_matmul_flops_per_s is None


def test_only_te_blockwise_runs_its_forward_at_full_precision() -> None:
    from trainfit.compute.float8_casts import cast_traffic
    from trainfit.spec.enums import Fp8Recipe

    assert cast_traffic(transformer_engine=True, compiled=False, recipe=Fp8Recipe.BLOCKWISE).forward_split_accumulator
    for recipe in (Fp8Recipe.DELAYED, Fp8Recipe.CURRENT, None):
        assert not cast_traffic(transformer_engine=True, compiled=False, recipe=recipe).forward_split_accumulator
    assert not cast_traffic(transformer_engine=False, compiled=True, recipe=Fp8Recipe.CURRENT).forward_split_accumulator


def test_a_precise_forward_pass_times_its_fp8_gemms_at_the_backward_rate() -> None:
    from trainfit.compute.inventory import Gemm, PassInventory
    from trainfit.compute.training import pass_seconds

    r = default_rates(resolve_gpu("h100-sxm"))
    inv = PassInventory(gemms=(Gemm("fc1", m=8192, n=8192, k=8192, dtype_bytes=1.0),))
    fast = pass_seconds(inv, rates=r, seq_len=4096, backward=False).gemm_s
    precise = pass_seconds(inv, rates=r, seq_len=4096, backward=False, fp8_precise_forward=True).gemm_s
    backward = pass_seconds(inv, rates=r, seq_len=4096, backward=True).gemm_s
    assert precise == pytest.approx(backward)
    assert precise / fast == pytest.approx(0.803 / 0.709, rel=1e-3)


def test_calibrated_fp8_rate_carries_over_to_the_precise_rate() -> None:
    """A calibrated fp8 rate moves the backward's rate by the card's published precise / fast ratio
    (H100 SXM: MAMF fp8 row 1,402.6 over 1,979 x 80.3 % TFLOP/s = 0.883)."""
    from trainfit.calibration import make_calibration, rates_for

    cal = make_calibration({"h100-sxm": {"fp8_matmul_flops_per_s": 5e14}}, created="2026-12-03")
    r = rates_for(resolve_gpu("h100-sxm"), cal)
    assert r.fp8_matmul_flops_per_s == 5e14
    assert r.fp8_precise_matmul_flops_per_s == pytest.approx(5e14 * 1402.6 / (1979 * 0.803), rel=2e-3)
    assert fp8_precise_rates(r).fp8_matmul_flops_per_s < 5e14


def test_precise_rate_never_exceeds_the_fp8_rate() -> None:
    r = default_rates(resolve_gpu("h200"))
    both = r.with_overrides({"fp8_matmul_flops_per_s": 5e14, "fp8_precise_matmul_flops_per_s": 9e14}, source="t")
    assert both.fp8_precise_matmul_flops_per_s == 5e14
    only_precise = r.with_overrides({"fp8_precise_matmul_flops_per_s": 2e15}, source="t")
    assert only_precise.fp8_precise_matmul_flops_per_s == r.fp8_matmul_flops_per_s
    explicit = r.with_overrides({"fp8_matmul_flops_per_s": 5e14, "fp8_precise_matmul_flops_per_s": 4e14}, source="t")
    assert explicit.fp8_precise_matmul_flops_per_s == 4e14  # a calibrated precise rate is kept as measured


@pytest.mark.parametrize("gid", ["h100-pcie", "h100-nvl", "h200-nvl", "h20"])
def test_every_hopper_card_gets_the_precise_rate_by_compute_capability(gid: str) -> None:
    """Compute capability 9.0 without a measured row: the fp8 rate x the H100 SXM's 1,402.6 / (1,979 x 80.3 %)."""
    gpu = resolve_gpu(gid)
    assert gpu.compute_capability == "9.0"
    r = default_rates(gpu)
    assert r.fp8_precise_matmul_flops_per_s == pytest.approx(r.fp8_matmul_flops_per_s * 1402.6 / (1979 * 0.803),
                                                             rel=2e-3)
    assert fp8_precise_rates(r).fp8_matmul_flops_per_s < r.fp8_matmul_flops_per_s
