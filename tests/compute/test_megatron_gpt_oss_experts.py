"""Megatron-Core's eager expert work for gpt-oss (compute.moe_time.megatron_expert_elementwise): the clamp of the
clamped GLU outside the fused activation and the per-expert fc2-bias loop, counted only on Megatron-Core cards."""

from dataclasses import replace

import pytest

from trainfit.catalog.models import resolve_model
from trainfit.compute import moe_time
from trainfit.compute.inventory import BACKWARD_BYTES_FACTOR, hf_clamped_glu_extra, step_inventory


def test_zero_without_clamp_or_bias():
    w = moe_time.megatron_expert_elementwise(rows=1000, hidden=2048, expert_width=768, local_experts=16,
                                             clamped_glu=False, expert_bias=False)
    assert (w.forward_bytes, w.backward_bytes, w.forward_kernels, w.backward_kernels) == (0, 0, 0, 0)


def test_bytes_and_kernels_from_the_traced_ops():
    rows, h, f, n = 4096, 2880, 2880, 16
    w = moe_time.megatron_expert_elementwise(rows=rows, hidden=h, expert_width=f, local_experts=n,
                                             clamped_glu=True, expert_bias=True)
    assert w.forward_bytes == pytest.approx(8.0 * rows * 2 * f + 12.0 * rows * h)
    assert w.backward_bytes == pytest.approx(15.0 * rows * 2 * f + 16.0 * rows * h)
    assert w.forward_kernels == 3 + 2 * n + 1
    assert w.backward_kernels == 9 + 4 * n + 2


def test_only_megatron_cards_and_only_gpt_oss_move():
    oss = resolve_model("openai/gpt-oss-20b")
    kw = dict(micro_batch_size=1, seq_len=1024, expert_parallel=1)
    plain = step_inventory(oss, **kw)
    mega = step_inventory(oss, megatron_experts=True, **kw)
    layers = oss.num_moe_layers
    rows = 1024 * oss.moe.experts_per_token
    extra = moe_time.megatron_expert_elementwise(
        rows=rows, hidden=oss.hidden_size, expert_width=oss.moe.expert_intermediate_size,
        local_experts=oss.moe.num_experts, clamped_glu=True, expert_bias=True)
    # the plain card runs transformers' own experts, whose clamped GLU and bias adds are charged there instead
    # (inventory.hf_clamped_glu_extra, with the backward factors)
    hf_b, _, hf_k = hf_clamped_glu_extra(rows=rows, hidden=oss.hidden_size,
                                         expert_width=oss.moe.expert_intermediate_size, expert_bias=True)
    assert mega.layers_forward.memory_bytes - plain.layers_forward.memory_bytes == pytest.approx(
        (extra.forward_bytes - hf_b) * layers)
    assert mega.layers_backward.memory_bytes - plain.layers_backward.memory_bytes == pytest.approx(
        (extra.backward_bytes - BACKWARD_BYTES_FACTOR * hf_b) * layers)
    # eager: left out of the compile memory factor, launches counted with the others
    assert mega.layers_forward.fused_bytes - plain.layers_forward.fused_bytes == pytest.approx(
        extra.forward_bytes * layers)
    assert mega.layers_forward.kernels - plain.layers_forward.kernels == pytest.approx(
        (extra.forward_kernels - hf_k) * layers)
    assert mega.layers_forward.fused_kernels == plain.layers_forward.fused_kernels
    qwen = resolve_model("Qwen/Qwen3-30B-A3B")
    # no eager expert work for Qwen3-MoE: only the routed GEMMs' per-expert launches (TE's multi-stream
    # GroupedLinear, tests/compute/test_te_grouped_gemm.py) against one torch._grouped_mm kernel
    # (tests/compute/test_grouped_gemm.py) tell the two apart, and the dispatcher's host sync per MoE layer forward
    # (moe_time.DISPATCH_FORWARD_SYNCS, tests/compute/test_moe_time.py)
    q_mega, q_plain = step_inventory(qwen, megatron_experts=True, **kw), step_inventory(qwen, **kw)
    for p in ("layers_forward", "layers_backward"):
        a, b = getattr(q_mega, p), getattr(q_plain, p)
        assert (replace(a, gemms=tuple(replace(g, launch_per_group=False) for g in a.gemms), host_syncs=0.0)
                == replace(b, gemms=tuple(replace(g, grouped_kernel=False) for g in b.gemms), host_syncs=0.0))


def test_moe_act_recompute_reruns_the_eager_clamp():
    # TEGroupedMLP checkpoints the whole bias_act_func, clamp included (moe_time.megatron_clamp_recompute_work)
    oss = resolve_model("openai/gpt-oss-20b")
    kw = dict(micro_batch_size=1, seq_len=1024, expert_parallel=1)
    plain = step_inventory(oss, **kw).recompute_modules(("moe_act",))
    mega = step_inventory(oss, megatron_experts=True, **kw).recompute_modules(("moe_act",))
    eager = step_inventory(oss, megatron_experts=True, moe_eager_launch=True, **kw).recompute_modules(("moe_act",))
    layers = oss.num_moe_layers
    rows = 1024 * oss.moe.experts_per_token
    clamp = moe_time.megatron_clamp_recompute_work(rows=rows, expert_width=oss.moe.expert_intermediate_size)
    assert clamp.forward_bytes == pytest.approx(8.0 * rows * 2 * oss.moe.expert_intermediate_size)
    assert (clamp.forward_kernels, clamp.backward_bytes, clamp.backward_kernels) == (3, 0, 0)
    assert mega.memory_bytes - plain.memory_bytes == pytest.approx(clamp.forward_bytes * layers)
    assert mega.kernels - plain.kernels == pytest.approx(3 * layers)
    # eager: outside the compile memory factor; its launches at the full host rate only under MoeLaunch.EAGER
    assert mega.fused_bytes == pytest.approx(clamp.forward_bytes * layers)
    assert mega.fused_kernels == 0 and eager.fused_kernels == pytest.approx(3 * layers)
    # no clamp, nothing re-run beyond the activation: Qwen3-MoE's moe_act recompute is the same on both cards
    qwen = resolve_model("Qwen/Qwen3-30B-A3B")
    assert (step_inventory(qwen, megatron_experts=True, **kw).recompute_modules(("moe_act",))
            == step_inventory(qwen, **kw).recompute_modules(("moe_act",)))
    assert moe_time.megatron_clamp_recompute_work(rows=0, expert_width=2880).forward_bytes == 0
