"""Transformer Engine's Python forward and backward per linear call (``compute.te_host``): the published GB200 CPU
times (TransformerEngine pull request #3523), scaled to an x86 host by issue #2053's ratio, less what the per-kernel
rates times the kernel factor already charge; added to Megatron-Core cards only."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import rates as rt
from trainfit.compute import te_host as te
from trainfit.compute.training import train_step_time
from trainfit.plan.time import rank_spec

H100 = rt.default_rates(resolve_gpu("h100-sxm"))
GB200 = rt.default_rates(resolve_gpu("gb200"))


def test_the_backward_is_the_published_total_less_the_forward():
    """PR #3523's "before" column gives forward and forward + backward per module; the backward table is their
    difference, the forward table the forward column."""
    total_us = {("linear", False): 311.30, ("linear", True): 440.93, ("layernorm_linear", False): 397.73,
                ("layernorm_linear", True): 518.67}
    for key, total in total_us.items():
        assert te.TE_BACKWARD_HOST_S_GRACE[key] + te.TE_FORWARD_HOST_S_GRACE[key] == pytest.approx(total * 1e-6)
    assert te.X86_OVER_GRACE_HOST == pytest.approx(13.48 / 37.08)


def test_calls_per_layer_follow_megatrons_te_spec():
    dense = from_catalog("Qwen/Qwen2.5-0.5B")
    assert te.te_linear_calls(dense) == te.TeLinearCalls(linear=2 * dense.num_layers,
                                                         layernorm_linear=2 * dense.num_layers)
    moe = from_catalog("Qwen/Qwen3-30B-A3B")  # no shared experts: qkv, proj, two grouped linears of 128 GEMMs each
    assert te.te_linear_calls(moe) == te.TeLinearCalls(linear=3 * moe.num_layers, layernorm_linear=moe.num_layers,
                                                       grouped_extra_gemms=moe.num_layers * 2 * 127)


def test_an_expert_parallel_rank_loops_over_its_local_experts_only():
    """Under expert parallelism the timed rank's spec holds E / ep experts (``plan.time.rank_spec``): each
    GroupedLinear call loops over those, and the rank runs its pipeline stage's layers only."""
    moe = from_catalog("Qwen/Qwen3-30B-A3B")
    shard = rank_spec(moe, tp=1, pp=2, ep=8, etp=1)
    local = moe.moe.num_experts // 8
    assert shard.moe.num_experts == local and shard.num_layers == moe.num_layers // 2
    assert te.te_linear_calls(shard) == te.TeLinearCalls(
        linear=3 * shard.num_layers, layernorm_linear=shard.num_layers,
        grouped_extra_gemms=shard.num_layers * 2 * (local - 1))


def test_the_grouped_per_gemm_loop_both_ways():
    calls = te.TeLinearCalls(grouped_extra_gemms=10)
    fwd = dict(calls=calls, quantized=False, host_s_per_forward_kernel=65e-6)
    assert te.te_forward_host_seconds(gpu_id="h100-sxm", **fwd) == pytest.approx(33.5e-6)
    assert te.te_forward_host_seconds(gpu_id="gb200", **fwd) == pytest.approx(33.5e-6 * 37.08 / 13.48)
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


def test_the_forward_excess_over_the_charged_rate():
    """TE's forward per call against what the per-kernel forward rate charges its kernels (GEMM; norm + GEMM): nothing
    at the full 65 us rate, the excess under the compile kernel factor (22.75 us a kernel)."""
    calls = te.TeLinearCalls(linear=1, layernorm_linear=1)
    full = dict(calls=calls, quantized=False, host_s_per_forward_kernel=65e-6)
    assert te.te_forward_host_seconds(gpu_id="gb200", **full) == 0.0
    fused = dict(calls=calls, host_s_per_forward_kernel=65e-6 * 0.35)
    assert te.te_forward_host_seconds(gpu_id="gb200", quantized=False, **fused) == pytest.approx(
        (59.19e-6 - 22.75e-6) + (83.48e-6 - 2 * 22.75e-6))
    # x86: every call stays under the charge (an MXFP8 Linear, 41.6 us, against its GEMM and two cast kernels)
    assert te.te_forward_host_seconds(gpu_id="h100-sxm", quantized=False, **fused) == 0.0
    assert te.te_forward_host_seconds(gpu_id="h100-sxm", quantized=True, **fused) == 0.0
    # a quantized call is charged its casts too (the input's amax and cast forward; three kernels backward)
    assert te.te_forward_host_seconds(gpu_id="gb200", quantized=True, **fused) == pytest.approx(
        (114.51e-6 - 3 * 22.75e-6) + (135.42e-6 - 4 * 22.75e-6))
    assert te.te_backward_host_seconds(calls=calls, quantized=True, gpu_id="gb200",
                                       host_s_per_backward_kernel=4.2e-6) == pytest.approx(
        (440.93e-6 - 114.51e-6 - 5 * 4.2e-6) + (518.67e-6 - 135.42e-6 - 6 * 4.2e-6))


@pytest.mark.parametrize("rates", [H100, GB200])
def test_under_the_compile_kernel_factor_the_excess_is_over_the_scaled_rate(rates):
    """pass_seconds charges every kernel at kernel_factor x the rate; TE's excess is over that charge, both ways."""
    spec = from_catalog("Qwen/Qwen2.5-0.5B")
    kf = 0.35
    plain = train_step_time(spec, rates=rates, kernel_factor=kf, **KW)
    t = train_step_time(spec, rates=rates, te_layers=True, kernel_factor=kf, **KW)
    calls = te.te_linear_calls(spec)
    assert _host(t, "backward") - _host(plain, "backward") == pytest.approx(te.te_backward_host_seconds(
        calls=calls, quantized=False, gpu_id=rates.gpu_id, host_s_per_backward_kernel=rates.host_s_per_backward_kernel * kf))
    fwd = te.te_forward_host_seconds(calls=calls, quantized=False, gpu_id=rates.gpu_id,
                                     host_s_per_forward_kernel=rates.host_s_per_forward_kernel * kf)
    assert _host(t, "forward") - _host(plain, "forward") == pytest.approx(fwd)
    # x86 BF16 calls stay under the scaled forward charge; Grace's exceed it
    assert (fwd > 0) is (rates.gpu_id == "gb200")
    # more is left of each backward call than at the full rate (x86 Linear: 91.6 - 2 x 4.2 us, not 91.6 - 2 x 12)
    assert te.te_backward_host_seconds(calls=te.TeLinearCalls(linear=1), quantized=False, gpu_id="h100-sxm",
                                       host_s_per_backward_kernel=12e-6 * kf) == pytest.approx(
        252.11e-6 * 13.48 / 37.08 - 2 * 12e-6 * kf)


def test_a_full_recompute_repeats_the_forward_excess():
    """Full recompute re-runs each checkpointed layer's forward, TE's Python with it (recompute_layer_share of it)."""
    spec = from_catalog("Qwen/Qwen2.5-0.5B")
    kw = dict(rates=GB200, kernel_factor=0.35, gradient_checkpointing=True, recompute_layer_share=0.5, **KW)
    plain = train_step_time(spec, **kw)
    t = train_step_time(spec, te_layers=True, **kw)
    fwd = te.te_forward_host_seconds(calls=te.te_linear_calls(spec), quantized=False, gpu_id="gb200",
                                     host_s_per_forward_kernel=GB200.host_s_per_forward_kernel * 0.35)
    assert fwd > 0
    assert _host(t, "recompute") - _host(plain, "recompute") == pytest.approx(0.5 * fwd)
    # selective (core attention) recompute re-runs no TE linear
    sel = dict(kw, selective="core_attention")
    assert _host(train_step_time(spec, te_layers=True, **sel), "recompute") == _host(
        train_step_time(spec, **sel), "recompute")


@pytest.mark.parametrize("rates", [H100, GB200])
def test_a_dense_te_layer_pays_in_the_backward_only(rates):
    spec = from_catalog("Qwen/Qwen2.5-0.5B")
    plain = train_step_time(spec, rates=rates, **KW)
    t = train_step_time(spec, rates=rates, te_layers=True, **KW)
    assert _host(t, "forward") == _host(plain, "forward")
    assert _host(t, "backward") - _host(plain, "backward") == pytest.approx(te.te_backward_host_seconds(
        calls=te.te_linear_calls(spec), quantized=False, gpu_id=rates.gpu_id,
        host_s_per_backward_kernel=rates.host_s_per_backward_kernel))


def test_a_quantized_call_subtracts_its_own_recipes_cast_kernels():
    """The inventory charges an MXFP8 call one fused quantize each way (TE_MXFP8), an NVFP4 call amax + quantize each
    way (TE_NVFP4), a per-tensor fp8 call TRANSFORMER_ENGINE's 2 forward / 3 backward: the excess subtracts those."""
    from trainfit.compute.float8_casts import TE_MXFP8, TE_NVFP4, TRANSFORMER_ENGINE

    calls = te.TeLinearCalls(linear=1)
    rate = 4.2e-6
    for casts, fwd_k, bwd_k in ((TE_MXFP8, 1, 1), (TE_NVFP4, 2, 2), (TRANSFORMER_ENGINE, 2, 3), (None, 2, 3)):
        assert te.te_forward_host_seconds(calls=calls, quantized=True, gpu_id="gb200", casts=casts,
                                          host_s_per_forward_kernel=rate) == pytest.approx(114.51e-6 - (1 + fwd_k) * rate)
        assert te.te_backward_host_seconds(calls=calls, quantized=True, gpu_id="gb200", casts=casts,
                                           host_s_per_backward_kernel=rate) == pytest.approx(
            440.93e-6 - 114.51e-6 - (2 + bwd_k) * rate)
    # unquantized calls ignore the casts
    assert te.te_backward_host_seconds(calls=calls, quantized=False, gpu_id="gb200", casts=TE_MXFP8,
                                       host_s_per_backward_kernel=rate) == pytest.approx(252.11e-6 - 2 * rate, rel=1e-3)


def test_train_step_time_passes_the_cards_casts_to_the_te_host_excess():
    from trainfit.compute.float8_casts import TE_MXFP8

    spec = from_catalog("Qwen/Qwen2.5-0.5B")
    kw = {"rates": GB200, "kernel_factor": 0.35, "te_layers": True, "fp8": True, **KW}
    te_casts = train_step_time(spec, fp8_casts=None, **kw)
    mx = train_step_time(spec, fp8_casts=TE_MXFP8, **kw)
    calls = te.te_linear_calls(spec)
    # the forward excess grows by one kernel's charge per call (the inventory charges one fewer cast kernel)
    diff = te.te_forward_host_seconds(calls=calls, quantized=True, gpu_id="gb200", casts=TE_MXFP8,
                                      host_s_per_forward_kernel=GB200.host_s_per_forward_kernel * 0.35) - \
        te.te_forward_host_seconds(calls=calls, quantized=True, gpu_id="gb200",
                                   host_s_per_forward_kernel=GB200.host_s_per_forward_kernel * 0.35)
    assert diff > 0
    assert _host(mx, "backward") > _host(te_casts, "backward") - 1e-12


def test_alternating_windows_reselect_the_attention_backend_every_layer():
    """TE re-runs get_attention_backend when a call's attention parameters differ from the previous call's: gpt-oss's
    alternating windowed / full layers pay it every layer (the first after the last), uniform layers never."""
    from dataclasses import replace

    oss = from_catalog("openai/gpt-oss-20b")
    assert te.te_attention_reselections(oss) == oss.num_layers
    assert te.te_attention_reselections(from_catalog("Qwen/Qwen2.5-0.5B")) == 0
    # one windowed layer in six (Gemma-3's pattern): two changes per period
    six = replace(oss, num_layers=12, sliding_layers=tuple(i for i in range(12) if (i + 1) % 6), layer_types=())
    assert te.te_attention_reselections(six) == 4
    # every layer windowed alike: one backend for all
    assert te.te_attention_reselections(replace(oss, sliding_layers=tuple(range(oss.num_layers)))) == 0
    assert te.TE_ATTENTION_BACKEND_SELECT_S == pytest.approx(76e-6)
    assert te.te_attention_select_host_seconds(oss, gpu_id="h100-sxm") == pytest.approx(oss.num_layers * 76e-6)
    assert te.te_attention_select_host_seconds(oss, gpu_id="gb200") == pytest.approx(
        oss.num_layers * 76e-6 / te.X86_OVER_GRACE_HOST)


def test_the_selection_is_forward_host_time_on_megatron_cards_only():
    from dataclasses import replace

    # without YaRN's concentration, so that Megatron-Core's unfused RoPE (tests/compute/test_megatron_rope.py) stays out
    oss = replace(from_catalog("openai/gpt-oss-20b"), rotary_concentration=1.0)
    plain = train_step_time(oss, rates=H100, **KW)
    t = train_step_time(oss, rates=H100, te_layers=True, **KW)
    calls = te.te_linear_calls(oss)
    fwd = te.te_forward_host_seconds(calls=calls, quantized=False, gpu_id="h100-sxm",
                                     host_s_per_forward_kernel=H100.host_s_per_forward_kernel)
    assert _host(t, "forward") - _host(plain, "forward") == pytest.approx(
        fwd + te.te_attention_select_host_seconds(oss, gpu_id="h100-sxm"))
    assert _host(t, "backward") - _host(plain, "backward") == pytest.approx(te.te_backward_host_seconds(
        calls=calls, quantized=False, gpu_id="h100-sxm", host_s_per_backward_kernel=H100.host_s_per_backward_kernel))


def test_the_attention_selection_term_states_it_is_eager_only():
    """The backend selection is Python a full-iteration CUDA graph replay does not run; until a card field for a
    trainer's CUDA graphs exists, the docstrings say it is charged regardless (as every TE host term)."""
    from trainfit.compute import te_host

    doc = " ".join(te_host.te_attention_select_host_seconds.__doc__.split())
    assert "full-iteration CUDA graph" in doc and "cuda_graph.replay()" in doc
    assert "no field for a trainer's CUDA graphs" in doc and "26.06 and 26.08" in doc
    assert "replaying a full-iteration CUDA graph runs none of it" in " ".join(te_host.__doc__.split())
