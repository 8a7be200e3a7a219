"""compute.lora_merge: PEFT's merge_adapter / unmerge_adapter around TRL's merged-weight sync (huggingface/peft
src/peft/tuners/lora/layer.py @53c25fe4fdd7c6aa4b40db0560815ea570d32303, v0.17.1: Linear.merge l.677-679,
Linear.unmerge l.699-702, get_delta_weight l.733). Per module: B @ A and the scaling multiply in both calls, the
in-place add (merge), the cast to the base dtype and the in-place subtract (unmerge)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.gemm import gemm_seconds
from trainfit.compute.lora_merge import AdaptedLinear, merge_unmerge_seconds, module_merge_device_seconds
from trainfit.compute.rates import default_rates
from trainfit.errors import CardError

RATES = default_rates(resolve_gpu("a100-80gb"))


def test_one_module_is_two_gemms_and_the_elementwise_traffic() -> None:
    """A 4096 x 4096 fp32 adapter on a bf16 base: each term is far above the kernel floor, so the sum is the formula."""
    out, inp, r = 4096, 4096, 16
    s, kernels = module_merge_device_seconds(out_features=out, in_features=inp, rank=r, adapter_dtype_bytes=4,
                                             base_dtype_bytes=2, rates=RATES)
    e = out * inp
    gemm = gemm_seconds(m=out, n=inp, k=r, rates=RATES, dtype_bytes=4)
    stream = (2 * (e * 2 * 4) + e * (2 * 2 + 4) + e * (4 + 2) + e * 3 * 2) / RATES.hbm_bytes_per_s
    assert s == pytest.approx(2 * gemm + stream)
    assert kernels == 7  # merge 3, unmerge 3 + the cast of the fp32 delta to bf16


def test_same_dtype_adapter_has_no_cast_kernel() -> None:
    s32, k32 = module_merge_device_seconds(out_features=4096, in_features=4096, rank=16, adapter_dtype_bytes=4,
                                           base_dtype_bytes=2, rates=RATES)
    s16, k16 = module_merge_device_seconds(out_features=4096, in_features=4096, rank=16, adapter_dtype_bytes=2,
                                           base_dtype_bytes=2, rates=RATES)
    assert (k32, k16) == (7, 6) and s16 < s32


def test_total_is_the_longer_of_device_and_host_launches() -> None:
    big = (AdaptedLinear(out_features=8192, in_features=8192, rank=16, count=80),)
    small = (AdaptedLinear(out_features=896, in_features=896, rank=8, count=24),)
    b = merge_unmerge_seconds(modules=big, adapter_dtype_bytes=4, base_dtype_bytes=2, rates=RATES,
                              host_s_per_kernel=10e-6)
    assert b.kernels == 80 * 7 and b.device_s > b.host_s and b.total_s == b.device_s
    t = merge_unmerge_seconds(modules=small, adapter_dtype_bytes=4, base_dtype_bytes=2, rates=RATES,
                              host_s_per_kernel=65e-6)
    assert t.host_s == pytest.approx(24 * 7 * 65e-6) and t.total_s == t.host_s > t.device_s
    assert merge_unmerge_seconds(modules=(), adapter_dtype_bytes=4, base_dtype_bytes=2, rates=RATES,
                                 host_s_per_kernel=65e-6).total_s == 0.0


def test_bandwidth_scales_the_elementwise_kernels() -> None:
    """Half the HBM rate doubles the four elementwise kernels' time (the fp32 rank-16 GEMM stays compute-bound)."""
    mods = (AdaptedLinear(out_features=8192, in_features=8192, rank=16, count=80),)
    slow = replace(RATES, hbm_bytes_per_s=RATES.hbm_bytes_per_s / 2)
    a = merge_unmerge_seconds(modules=mods, adapter_dtype_bytes=4, base_dtype_bytes=2, rates=RATES, host_s_per_kernel=0)
    b = merge_unmerge_seconds(modules=mods, adapter_dtype_bytes=4, base_dtype_bytes=2, rates=slow, host_s_per_kernel=0)
    e = 8192 * 8192
    stream = 80 * (2 * (e * 2 * 4) + e * (2 * 2 + 4) + e * (4 + 2) + e * 3 * 2) / RATES.hbm_bytes_per_s
    assert b.device_s - a.device_s == pytest.approx(stream, rel=0.05)


def test_refuses_empty_shapes() -> None:
    with pytest.raises(CardError, match="lora merge"):
        module_merge_device_seconds(out_features=0, in_features=1, rank=1, adapter_dtype_bytes=4, base_dtype_bytes=2,
                                    rates=RATES)
    with pytest.raises(CardError, match="lora merge"):
        merge_unmerge_seconds(modules=(), adapter_dtype_bytes=4, base_dtype_bytes=2, rates=RATES, host_s_per_kernel=-1)
