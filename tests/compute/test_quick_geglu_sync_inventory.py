"""Megatron-Core's quick-GEGLU expert activation (gpt-oss) makes its scalar offset a CUDA tensor on every call, a
blocking host-to-device copy: one host sync per MoE layer forward and per re-run of the activation
(``inventory.QUICK_GEGLU_FORWARD_SYNCS``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute import moe_time as mt
from trainfit.compute.inventory import QUICK_GEGLU_FORWARD_SYNCS, step_inventory
from trainfit.compute.training import synced_seconds
from trainfit.plan.time import rank_spec

GPT_OSS = from_catalog("openai/gpt-oss-20b")
KW = dict(micro_batch_size=1, seq_len=2048, expert_parallel=8)


def _shard(spec=GPT_OSS):
    return rank_spec(spec, tp=1, pp=1, ep=8, etp=1)


def _n_moe(spec=GPT_OSS) -> int:
    return sum(1 for i in range(spec.num_layers) if spec.moe.is_moe_layer(i))


def test_one_sync_per_moe_layer_forward_beside_the_dispatchers():
    inv = step_inventory(_shard(), megatron_experts=True, **KW)
    n = _n_moe()
    assert QUICK_GEGLU_FORWARD_SYNCS == 1
    assert inv.layers_forward.host_syncs == pytest.approx((mt.DISPATCH_FORWARD_SYNCS + QUICK_GEGLU_FORWARD_SYNCS) * n)
    # the activation's backward (WeightedBiasQuickGeGLUFunction.backward) copies nothing
    plain = step_inventory(_shard(), **KW)
    assert inv.layers_backward.host_syncs == plain.layers_backward.host_syncs


def test_the_moe_act_and_full_recompute_re_run_it():
    inv = step_inventory(_shard(), megatron_experts=True, **KW)
    n = _n_moe()
    assert inv.recompute_modules(("moe_act",)).host_syncs == pytest.approx(QUICK_GEGLU_FORWARD_SYNCS * n)
    assert inv.layers_recompute.host_syncs == inv.layers_forward.host_syncs
    assert inv.recompute_modules(("core_attn",)).host_syncs == 0


def test_not_for_swiglu_experts_nor_outside_megatron_core():
    # a SwiGLU model's fused activation (weighted_bias_swiglu_impl) makes no copy: only the dispatcher's wait
    swiglu = replace(GPT_OSS, moe=replace(GPT_OSS.moe, clamped_glu=False))
    inv = step_inventory(_shard(swiglu), megatron_experts=True, **KW)
    assert inv.layers_forward.host_syncs == pytest.approx(mt.DISPATCH_FORWARD_SYNCS * _n_moe(swiglu))
    assert inv.recompute_modules(("moe_act",)).host_syncs == 0
    # transformers' / other frameworks' gpt-oss experts do not run Megatron-Core's activation
    assert step_inventory(_shard(), **KW).layers_forward.host_syncs == 0


def test_each_sync_costs_a_refill_and_a_round_trip():
    inv = step_inventory(_shard(), megatron_experts=True, **KW).layers_forward
    without = inv.host_syncs - QUICK_GEGLU_FORWARD_SYNCS * _n_moe()
    host, device = 0.05, 0.04
    s = synced_seconds(host_s=host, device_s=device, kernels=inv.kernels, syncs=inv.host_syncs)
    s0 = synced_seconds(host_s=host, device_s=device, kernels=inv.kernels, syncs=without)
    assert s > s0
