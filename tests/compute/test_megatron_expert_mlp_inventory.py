"""Megatron-Core's routed experts with expert biases (gpt-oss): the flex dispatcher's float32 routing probabilities
promote ``TEGroupedMLP._apply_bias`` to float32 (``moe_dispatch.bias_loop_fp32_probs_extra``), and Transformer
Engine's op fuser (``parallel.moe_expert_mlp: te_ops``) runs neither the bias loop nor the eager activation steps."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute import moe_dispatch as md
from trainfit.compute import moe_time as mt
from trainfit.compute.inventory import QUICK_GEGLU_FORWARD_SYNCS, step_inventory
from trainfit.plan.time import rank_spec
from trainfit.spec.enums import MoeDispatcher

GPT_OSS = from_catalog("openai/gpt-oss-120b")
QWEN = from_catalog("Qwen/Qwen3-30B-A3B")
KW = dict(micro_batch_size=1, seq_len=4096, expert_parallel=8, megatron_experts=True)


def _shard(spec=GPT_OSS):
    return rank_spec(spec, tp=1, pp=1, ep=8, etp=1)


def _n_moe(spec=GPT_OSS) -> int:
    return sum(1 for i in range(spec.num_layers) if spec.moe.is_moe_layer(i))


def test_fp32_probabilities_per_element_bytes_extend_the_bf16_count():
    rows, h = 1000.0, 2880
    fb, bb, fk, bk = md.bias_loop_fp32_probs_extra(dispatcher=MoeDispatcher.DEEPEP, rows=rows, hidden=h,
                                                   local_experts=16)
    # forward 28 B against the traced bf16 12, backward 40 against 16 (the constants' derivation)
    assert mt.EXPERT_BIAS_FORWARD_BYTES + fb / (rows * h) == pytest.approx(28.0)
    assert mt.EXPERT_BIAS_BACKWARD_BYTES + bb / (rows * h) == pytest.approx(40.0)
    assert fk == 1 and bk == 1 + 2 * 16
    for d in (MoeDispatcher.ALLTOALL, MoeDispatcher.ALLGATHER):  # the router's bf16 probabilities
        assert md.bias_loop_fp32_probs_extra(dispatcher=d, rows=rows, hidden=h, local_experts=16) == (0, 0, 0, 0)
    assert md.bias_loop_fp32_probs_extra(dispatcher=MoeDispatcher.DEEPEP, rows=0, hidden=h, local_experts=16) == (
        0, 0, 0, 0)


def test_flex_dispatcher_adds_the_float32_bias_loop_for_expert_biases_only():
    for spec, has_bias in ((GPT_OSS, True), (QWEN, False)):
        a2a = step_inventory(_shard(spec), **KW)
        flex = step_inventory(_shard(spec), moe_dispatcher=MoeDispatcher.DEEPEP, **KW)
        rows = 4096 * spec.moe.experts_per_token
        fb, bb, _, _ = md.bias_loop_fp32_probs_extra(dispatcher=MoeDispatcher.DEEPEP, rows=rows,
                                                     hidden=spec.hidden_size, local_experts=spec.moe.num_experts // 8)
        # the all-to-all dispatcher's chunk sort (moe_time.chunk_sort_bytes) differs between the two as well
        sort = mt.chunk_sort_bytes(rows=rows, hidden=spec.hidden_size, local_experts=spec.moe.num_experts // 8, ep=8,
                                   dtype_bytes=2.0, dispatcher=MoeDispatcher.ALLTOALL)
        got = flex.layers_forward.memory_bytes - a2a.layers_forward.memory_bytes
        want = (fb if has_bias else 0.0) * _n_moe(spec) - sort * _n_moe(spec)
        assert got == pytest.approx(want, rel=1e-6)


def test_op_fuser_runs_neither_the_eager_steps_nor_the_offset_copy():
    unfused = step_inventory(_shard(), moe_dispatcher=MoeDispatcher.DEEPEP, **KW)
    fused = step_inventory(_shard(), moe_dispatcher=MoeDispatcher.DEEPEP, fused_expert_mlp=True, **KW)
    n = _n_moe()
    rows = 4096 * GPT_OSS.moe.experts_per_token
    eager = mt.megatron_expert_elementwise(rows=rows, hidden=GPT_OSS.hidden_size,
                                           expert_width=GPT_OSS.moe.expert_intermediate_size,
                                           local_experts=GPT_OSS.moe.num_experts // 8, clamped_glu=True,
                                           expert_bias=True)
    fb, _, fk, _ = md.bias_loop_fp32_probs_extra(dispatcher=MoeDispatcher.DEEPEP, rows=rows,
                                                 hidden=GPT_OSS.hidden_size, local_experts=GPT_OSS.moe.num_experts // 8)
    assert unfused.layers_forward.memory_bytes - fused.layers_forward.memory_bytes == pytest.approx(
        (eager.forward_bytes + fb) * n, rel=1e-6)
    assert unfused.layers_forward.kernels - fused.layers_forward.kernels == pytest.approx(
        (eager.forward_kernels + fk) * n)
    assert unfused.layers_forward.host_syncs - fused.layers_forward.host_syncs == QUICK_GEGLU_FORWARD_SYNCS * n
    assert fused.recompute_modules(("moe_act",)).host_syncs == 0
    # a model without gpt-oss's extras is the same either way
    plain = replace(GPT_OSS, moe=replace(GPT_OSS.moe, clamped_glu=False, expert_bias=False))
    a = step_inventory(_shard(plain), moe_dispatcher=MoeDispatcher.DEEPEP, **KW)
    b = step_inventory(_shard(plain), moe_dispatcher=MoeDispatcher.DEEPEP, fused_expert_mlp=True, **KW)
    assert a.layers_forward.memory_bytes == b.layers_forward.memory_bytes
    assert a.layers_backward.memory_bytes == b.layers_backward.memory_bytes
