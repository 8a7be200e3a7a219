"""Transformer Engine's Python backward per linear call (``compute.te_host``): the published GB200 CPU times
(TransformerEngine pull request #3523), scaled to an x86 host by issue #2053's ratio, less what the per-kernel backward
rate already charges; added to Megatron-Core cards' backward only."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import rates as rt
from trainfit.compute import te_host as te
from trainfit.compute.training import train_step_time

H100 = rt.default_rates(resolve_gpu("h100-sxm"))
GB200 = rt.default_rates(resolve_gpu("gb200"))


def test_the_published_backward_times():
    us = {k: round(v * 1e6, 1) for k, v in te.TE_BACKWARD_HOST_S_GRACE.items()}
    assert us == {("linear", False): 252.1, ("linear", True): 326.4, ("layernorm_linear", False): 314.2,
                  ("layernorm_linear", True): 383.2}
    assert te.X86_OVER_GRACE_HOST == pytest.approx(0.3635, abs=1e-4)


def test_calls_per_layer_follow_megatrons_te_spec():
    dense = from_catalog("Qwen/Qwen2.5-0.5B")
    assert te.te_linear_calls(dense) == te.TeLinearCalls(linear=2 * dense.num_layers,
                                                         layernorm_linear=2 * dense.num_layers)
    moe = from_catalog("Qwen/Qwen3-30B-A3B")  # no shared experts: qkv, proj, two grouped linears of 128 GEMMs each
    assert te.te_linear_calls(moe) == te.TeLinearCalls(linear=3 * moe.num_layers, layernorm_linear=moe.num_layers,
                                                       grouped_extra_gemms=moe.num_layers * 2 * 127)


def test_the_grouped_per_gemm_loop_both_ways():
    calls = te.TeLinearCalls(grouped_extra_gemms=10)
    assert te.te_forward_host_seconds(calls=calls, gpu_id="h100-sxm") == pytest.approx(33.5e-6)
    assert te.te_forward_host_seconds(calls=calls, gpu_id="gb200") == pytest.approx(33.5e-6 * 37.08 / 13.48)
    assert te.te_backward_host_seconds(calls=calls, quantized=False, gpu_id="h100-sxm",
                                       host_s_per_backward_kernel=12e-6) == pytest.approx(98e-6)


def test_the_excess_over_the_per_kernel_rate_by_host():
    calls = te.TeLinearCalls(linear=1)
    x86 = te.te_backward_host_seconds(calls=calls, quantized=False, gpu_id="h100-sxm", host_s_per_backward_kernel=12e-6)
    grace = te.te_backward_host_seconds(calls=calls, quantized=False, gpu_id="gb200", host_s_per_backward_kernel=12e-6)
    assert x86 == pytest.approx(252.11e-6 * 13.48 / 37.08 - 24e-6)
    assert grace == pytest.approx(252.11e-6 - 24e-6)
    assert te.te_backward_host_seconds(calls=calls, quantized=False, gpu_id="h100-sxm",
                                       host_s_per_backward_kernel=1e-3) == 0.0


KW = {"micro_batch_size": 1, "seq_len": 256, "micro_steps": 1, "trained_params": 5e8, "trained_tensors": 290,
      "gathered_weight_bytes": 1e9}


def _host(t, name):
    return next(p for p in t.phases if p.name == name).terms["host_launch"]


@pytest.mark.parametrize("rates", [H100, GB200])
def test_a_dense_te_layer_pays_in_the_backward_only(rates):
    spec = from_catalog("Qwen/Qwen2.5-0.5B")
    plain = train_step_time(spec, rates=rates, **KW)
    t = train_step_time(spec, rates=rates, te_layers=True, **KW)
    assert _host(t, "forward") == _host(plain, "forward")
    assert _host(t, "backward") - _host(plain, "backward") == pytest.approx(te.te_backward_host_seconds(
        calls=te.te_linear_calls(spec), quantized=False, gpu_id=rates.gpu_id,
        host_s_per_backward_kernel=rates.host_s_per_backward_kernel))
