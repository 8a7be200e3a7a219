"""Megatron-Core MoE layer work beyond the expert GEMMs (compute/moe_time.py) and its hook into the inventory."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import moe_time as mt
from trainfit.compute.inventory import step_inventory
from trainfit.compute.model_parallel import model_parallel_comm
from trainfit.compute.rates import default_rates
from trainfit.compute.training import SYNC_ROUND_TRIP_S, ModelParallel, synced_seconds, train_step_time
from trainfit.plan.time import rank_spec

H100 = default_rates(resolve_gpu("h100-sxm"))
MOE = from_catalog("Qwen/Qwen3-30B-A3B")
DENSE = from_catalog("Qwen/Qwen3-8B")


def test_tokens_a_rank_routes_are_its_sequence_parallel_shard_times_the_expert_tp_group():
    assert mt.expert_token_shards(tp=1, etp=1, ep=8, sequence_parallel=False) == 1
    assert mt.expert_token_shards(tp=2, etp=1, ep=1, sequence_parallel=True) == 2
    assert mt.expert_token_shards(tp=4, etp=2, ep=8, sequence_parallel=True) == 2
    assert mt.expert_token_shards(tp=4, etp=4, ep=8, sequence_parallel=True) == 1
    # MoE with TP and EP runs sequence parallel (Megatron requires it) even when the card leaves it off
    assert mt.expert_token_shards(tp=2, etp=1, ep=8, sequence_parallel=False) == 2
    # TP without SP or EP: every TP rank holds (and routes) the whole sequence
    assert mt.expert_token_shards(tp=2, etp=1, ep=1, sequence_parallel=False) == 1


def test_router_scores_every_expert_on_an_expert_parallel_rank():
    assert mt.router_experts(local_experts=16, ep=8) == 128
    assert mt.router_experts(local_experts=128, ep=1) == 128


def test_routing_bytes_per_score_and_per_token_read_off_the_unfused_path():
    # one token, one expert, k = 1, fp32 logits: 6*4 + 18 per score, (4 + 8) for the top-k value and index
    assert mt.routing_bytes(tokens=1, experts=1, top_k=1, score_dtype_bytes=4) == 6 * 4 + 18 + 12
    assert mt.routing_bytes(tokens=1, experts=1, top_k=1, score_dtype_bytes=4, aux_loss=True) == 6 * 4 + 18 + 12 + 30
    assert mt.routing_bytes(tokens=1, experts=1, top_k=1, score_dtype_bytes=4, backward=True) == 8
    assert mt.routing_bytes(tokens=0, experts=128, top_k=8) == 0


@given(tokens=st.integers(1, 1 << 16), experts=st.integers(1, 512), k=st.integers(1, 16),
       s=st.sampled_from([2.0, 4.0]), aux=st.booleans())
@settings(max_examples=60, deadline=None)
def test_routing_bytes_scale_with_the_tokens_and_aux_loss_only_adds(tokens, experts, k, s, aux):
    k = min(k, experts)
    one = mt.routing_bytes(tokens=tokens, experts=experts, top_k=k, score_dtype_bytes=s, aux_loss=aux)
    two = mt.routing_bytes(tokens=2 * tokens, experts=experts, top_k=k, score_dtype_bytes=s, aux_loss=aux)
    assert two == pytest.approx(2 * one)
    assert one >= mt.routing_bytes(tokens=tokens, experts=experts, top_k=k, score_dtype_bytes=s)
    assert mt.routing_bytes(tokens=tokens, experts=experts, top_k=k, score_dtype_bytes=s, backward=True) < one


def test_chunk_sorts_exist_only_with_expert_parallel_and_several_local_experts():
    rows, h = 32768.0, 2048
    assert mt.chunk_sort_bytes(rows=rows, hidden=h, local_experts=16, ep=1) == 0
    assert mt.chunk_sort_bytes(rows=rows, hidden=h, local_experts=1, ep=8) == 0
    # sort after the dispatch + unsort before the combine, each reading and writing the rows (bf16)
    assert mt.chunk_sort_bytes(rows=rows, hidden=h, local_experts=16, ep=8) == 2 * 2 * rows * h * 2


def test_dispatcher_kernels_count_the_preprocess_copies_and_sorts():
    assert mt.dispatcher_kernels(ep=1, local_experts=128) == 0
    assert mt.dispatcher_kernels(ep=8, local_experts=1) == mt.DISPATCH_PREPROCESS_KERNELS + mt.DISPATCH_DTOH_COPIES
    assert mt.dispatcher_kernels(ep=8, local_experts=16) == (mt.DISPATCH_PREPROCESS_KERNELS + mt.DISPATCH_DTOH_COPIES
                                                              + mt.CHUNK_SORT_KERNELS)


def test_expert_launches_grouped_versus_one_expert_at_a_time():
    assert mt.expert_gemm_kernels(local_experts=16) == 2
    assert mt.expert_gemm_kernels(local_experts=16, backward=True) == 4
    assert mt.expert_gemm_kernels(local_experts=16, backward=True, trained=False) == 2
    # SequentialMLP: fc1, activation, fc2 per local expert; backward dX + dW of both and the activation's backward
    assert mt.expert_gemm_kernels(local_experts=16, grouped_gemm=False) == 16 * 3
    assert mt.expert_gemm_kernels(local_experts=16, grouped_gemm=False, backward=True) == 16 * 5
    assert mt.expert_gemm_kernels(local_experts=1, grouped_gemm=False) > mt.expert_gemm_kernels(local_experts=1)


def test_token_count_exchange_is_a_latency_bound_all_gather_over_the_ep_group():
    assert mt.count_exchange_seconds(ep=1, experts=128, latency_s=30e-6, bus_bytes_per_s=1e11) == 0
    assert mt.count_exchange_seconds(ep=8, experts=0, latency_s=30e-6, bus_bytes_per_s=1e11) == 0
    s8 = mt.count_exchange_seconds(ep=8, experts=128, latency_s=30e-6, bus_bytes_per_s=1e11)
    assert s8 == pytest.approx(30e-6 + 7 / 8 * 8 * 128 * 8 / 1e11)
    assert mt.count_exchange_seconds(ep=16, experts=128, latency_s=30e-6, bus_bytes_per_s=1e11) > s8


def test_moe_layer_work_with_and_without_expert_parallel():
    kw = {"tokens": 4096.0, "hidden": 2048, "experts": 128, "top_k": 8}
    alone = mt.moe_layer_work(local_experts=128, ep=1, **kw)
    ep8 = mt.moe_layer_work(local_experts=16, ep=8, **kw)
    sort = mt.chunk_sort_bytes(rows=4096 * 8, hidden=2048, local_experts=16, ep=8)
    assert ep8.forward_bytes - alone.forward_bytes == pytest.approx(sort)
    assert ep8.backward_bytes - alone.backward_bytes == pytest.approx(sort)
    assert (alone.forward_kernels, alone.backward_kernels) == (0, 0)
    assert ep8.backward_kernels == mt.CHUNK_SORT_KERNELS


def _shard(ep: int, tp: int = 1):
    return rank_spec(MOE, tp=tp, pp=1, ep=ep, etp=1)


def test_inventory_router_scores_all_experts_and_has_a_weight_gradient():
    inv = step_inventory(_shard(8), micro_batch_size=1, seq_len=4096, expert_parallel=8)
    router = next(g for g in inv.layers_forward.gemms if g.name == "router")
    assert router.n == 128
    names = {g.name for g in inv.layers_backward.gemms}
    assert {"router.dX", "router.dW"} <= names


def test_inventory_expert_rows_follow_the_sequence_parallel_shard():
    full = step_inventory(_shard(8, tp=2), micro_batch_size=1, seq_len=4096, expert_parallel=8)
    shard = step_inventory(_shard(8, tp=2), micro_batch_size=1, seq_len=4096, expert_parallel=8,
                           expert_token_shards=2)

    def expert_flops(inv):
        return sum(g.flops for g in inv.layers_forward.gemms if g.name.startswith("mlp.experts")
                   or g.name in ("gate_up_proj", "down_proj"))

    assert expert_flops(full) > 0
    assert expert_flops(shard) == pytest.approx(expert_flops(full) / 2)
    # the model's expert FLOPs over the TP group: tp ranks x T/tp tokens x k experts x 3 projections (h x I each)
    moe = MOE.moe
    per_token = 2 * 3 * MOE.hidden_size * moe.expert_intermediate_size * moe.experts_per_token * MOE.num_layers
    assert 2 * expert_flops(shard) == pytest.approx(per_token * 4096)


def test_expert_parallel_adds_the_dispatch_traffic_and_kernels():
    one = step_inventory(_shard(8), micro_batch_size=1, seq_len=4096, expert_parallel=1)
    ep8 = step_inventory(_shard(8), micro_batch_size=1, seq_len=4096, expert_parallel=8)
    assert ep8.layers_forward.memory_bytes > one.layers_forward.memory_bytes
    assert ep8.layers_backward.memory_bytes > one.layers_backward.memory_bytes
    assert ep8.layers_forward.kernels - one.layers_forward.kernels == pytest.approx(
        MOE.num_layers * mt.dispatcher_kernels(ep=8, local_experts=16))


def test_dense_model_ignores_the_expert_arguments():
    a = step_inventory(DENSE, micro_batch_size=1, seq_len=2048)
    b = step_inventory(DENSE, micro_batch_size=1, seq_len=2048, expert_parallel=8, expert_token_shards=2)
    assert a == b


def test_training_step_passes_expert_parallel_to_the_inventory():
    kw = {"rates": H100, "micro_batch_size": 1, "seq_len": 4096, "trained_params": 1e9, "trained_tensors": 100,
          "gathered_weight_bytes": 2e9}
    mp = ModelParallel(ep=8, ep_bus_bytes_per_s=1e11)
    with_ep = train_step_time(_shard(8), model_parallel=mp, **kw)
    fwd = next(p for p in with_ep.phases if p.name == "forward")
    inv = step_inventory(_shard(8), micro_batch_size=1, seq_len=4096, expert_parallel=8)
    assert fwd.terms["memory_bound"] > 0
    assert fwd.terms["host_launch"] == pytest.approx(
        (inv.layers_forward.kernels + inv.head_forward.kernels) * H100.host_s_per_forward_kernel)
    # a dense card's step is untouched by an expert-parallel size it cannot use
    dense = train_step_time(DENSE, **kw)
    assert train_step_time(DENSE, model_parallel=replace(mp, ep=1), **kw).total_s == pytest.approx(dense.total_s)


def test_expert_parallel_comm_adds_one_count_exchange_per_forward_pass():
    def ep_s(experts: int, recompute: bool) -> float:
        return model_parallel_comm(
            tokens=4096, hidden=2048, q_dim=4096, kv_dim=512, layers=48, attention_layers=48, moe_layers=48, top_k=8,
            tp=1, cp=1, ulysses=False, ep=8, pp=1, recompute=recompute, latency_s=30e-6, tp_bus_bytes_per_s=1e11,
            cp_bus_bytes_per_s=1e11, ep_bus_bytes_per_s=1e11, pp_bytes_per_s=1e11, experts=experts).expert_s

    # model_parallel_comm prices the count all-gather with NCCL's tuner (ep_ranks_per_node 1: 8 nodes)
    one = mt.count_exchange_seconds(ep=8, experts=128, bus_bytes_per_s=1e11, nodes=8)
    assert ep_s(128, False) - ep_s(0, False) == pytest.approx(48 * one)
    assert ep_s(128, True) - ep_s(0, True) == pytest.approx(2 * 48 * one)


def test_without_grouped_gemm_each_local_expert_launches_its_own_gemms():
    # Megatron-Core's switch (moe_grouped_gemm): TEGroupedMLP against SequentialMLP (a torch._grouped_mm kernel,
    # priced at its own lower ceiling, can lose to a cuBLAS loop: tests/compute/test_grouped_gemm.py)
    grouped = step_inventory(_shard(8), micro_batch_size=1, seq_len=4096, expert_parallel=8, megatron_experts=True)
    looped = step_inventory(_shard(8), micro_batch_size=1, seq_len=4096, expert_parallel=8, grouped_gemm=False,
                            megatron_experts=True)
    layers = MOE.num_layers
    assert looped.layers_forward.kernels - grouped.layers_forward.kernels == pytest.approx(
        layers * (mt.expert_gemm_kernels(local_experts=16, grouped_gemm=False) - mt.expert_gemm_kernels(local_experts=16)))
    # the same FLOPs, but each expert's GEMM fills its own waves: never faster
    assert looped.forward.gemm_flops == pytest.approx(grouped.forward.gemm_flops)
    from trainfit.compute.training import pass_seconds

    g = pass_seconds(grouped.layers_forward, rates=H100, seq_len=4096, backward=False)
    s = pass_seconds(looped.layers_forward, rates=H100, seq_len=4096, backward=False)
    assert s.gemm_s >= g.gemm_s
    assert s.host_s > g.host_s


def test_megatron_dispatcher_waits_for_its_split_sizes_once_per_moe_layer_forward():
    # token_dispatcher.py: one d2h_event.synchronize() (alltoall), .cpu() (allgather) or DeepEP's host wait (flex)
    # per MoE layer forward; none backward; other frameworks' MoE layers are not Megatron-Core's dispatcher
    kw = {"micro_batch_size": 1, "seq_len": 4096}
    plain = step_inventory(_shard(8), expert_parallel=8, **kw)
    for ep in (1, 8):
        mc = step_inventory(_shard(8), expert_parallel=ep, megatron_experts=True, **kw)
        ref = plain if ep == 8 else step_inventory(_shard(8), expert_parallel=1, **kw)
        n_moe = sum(1 for i in range(MOE.num_layers) if MOE.moe.is_moe_layer(i))
        assert mc.layers_forward.host_syncs - ref.layers_forward.host_syncs == mt.DISPATCH_FORWARD_SYNCS * n_moe
        assert mc.layers_backward.host_syncs == ref.layers_backward.host_syncs
        # full recompute re-runs the dispatcher; Megatron-Core's "moe" module recompute too, core attention not
        assert mc.layers_recompute.host_syncs == mc.layers_forward.host_syncs
        assert mc.recompute_modules(("moe",)).host_syncs == mt.DISPATCH_FORWARD_SYNCS * n_moe
        assert mc.recompute_modules(("core_attn",)).host_syncs == ref.recompute_modules(("core_attn",)).host_syncs


def test_dispatcher_sync_costs_a_refill_and_a_round_trip_not_the_layer():
    # one sync per MoE layer: the layers are alike, so the pass pays each sync's refill and round trip only
    inv = step_inventory(_shard(8), micro_batch_size=1, seq_len=4096, expert_parallel=8, megatron_experts=True)
    t = inv.layers_forward
    host, device = 0.05, 0.04
    s = synced_seconds(host_s=host, device_s=device, kernels=t.kernels, syncs=t.host_syncs)
    assert max(host, device) < s <= max(host, device) + t.host_syncs * (device / t.kernels * 2 + SYNC_ROUND_TRIP_S)


# One decoder layer of Qwen3-30B-A3B (an MoE layer: 128 experts, top-8, softmax router), expert parallel 8 (16 local
# experts), tensor parallel 1, 4,096 tokens, the all-to-all dispatcher, Megatron-Core's TEGroupedMLP. Hand count of
# the launches MoeLaunch.EAGER moves out of the compile kernel factor, per pass:
#   forward: router and permutation, 14 (softmax, top-k, normalise, the routing-map sort / histogram, permute,
#            unpermute, probability scale, scatter-add: compute/inventory.py MOE_DISPATCH_KERNELS' list)
#          + dispatcher preprocess, 7 (routing_map.sum, the per-rank split sum, the tp x ep all-gather, the local slice,
#            its per-rank sum, the per-TP sum, the per-local-expert sum: token_dispatcher.py preprocess)
#          + 4 D2H copies (tokens_per_expert, input_splits, output_splits, output_splits_tp)
#          + 2 chunk sorts (sort_chunks_by_idxs after the dispatch and before the combine; 16 local experts, ep 8)
#          = 27 kernels
#   backward: the router / permutation backward at 1.9 kernels per forward kernel (14 x 1.9 = 26.6) + the 2 inverse
#             chunk sorts (the split sizes are already on the host) = 28.6 kernels
# Host time: those kernels lose the compile factor's 0.35 and pay the whole per-kernel rate, H100 65 us forward /
# 12 us backward (compute/rates.py defaults): 27 x 0.65 x 65 us = 1,140.75 us; 28.6 x 0.65 x 12 us = 223.08 us.
ONE_MOE_LAYER = replace(MOE, num_layers=1)
EAGER_FORWARD_KERNELS, EAGER_BACKWARD_KERNELS = 27.0, 28.6
EAGER_FORWARD_HOST_S, EAGER_BACKWARD_HOST_S = 1140.75e-6, 223.08e-6


def _one_layer_inventories():
    shard = rank_spec(ONE_MOE_LAYER, tp=1, pp=1, ep=8, etp=1)
    kw = {"micro_batch_size": 1, "seq_len": 4096, "expert_parallel": 8, "megatron_experts": True}
    return shard, step_inventory(shard, **kw), step_inventory(shard, moe_eager_launch=True, **kw)


def test_eager_router_and_dispatcher_launches_leave_the_compile_kernel_factor():
    # MoeLaunch.EAGER (cuda_graph_impl "none", moe_router_fusion False): the router's and dispatcher's kernels and
    # their backward go to the unscaled fused_kernels; the kernel and byte totals are unchanged
    shard, fused, eager = _one_layer_inventories()
    assert ONE_MOE_LAYER.moe.is_moe_layer(0)
    assert eager.layers_forward.fused_kernels - fused.layers_forward.fused_kernels == pytest.approx(EAGER_FORWARD_KERNELS)
    assert eager.layers_backward.fused_kernels - fused.layers_backward.fused_kernels == pytest.approx(
        EAGER_BACKWARD_KERNELS)
    assert eager.layers_forward.kernels == fused.layers_forward.kernels
    assert eager.layers_forward.memory_bytes == fused.layers_forward.memory_bytes
    # only Megatron-Core's layers: elsewhere the flag changes nothing
    kw = {"micro_batch_size": 1, "seq_len": 4096, "expert_parallel": 8}
    assert step_inventory(shard, moe_eager_launch=True, **kw) == step_inventory(shard, **kw)


def test_eager_launches_add_host_time_at_the_full_per_kernel_rate():
    from trainfit.compute.training import pass_seconds
    from trainfit.plan.time import COMPILE_KERNEL_FACTOR
    _, fused, eager = _one_layer_inventories()
    for backward, want in ((False, EAGER_FORWARD_HOST_S), (True, EAGER_BACKWARD_HOST_S)):
        f, e = ((inv.layers_backward if backward else inv.layers_forward) for inv in (fused, eager))
        t_f = pass_seconds(f, rates=H100, seq_len=4096, backward=backward, kernel_factor=COMPILE_KERNEL_FACTOR)
        t_e = pass_seconds(e, rates=H100, seq_len=4096, backward=backward, kernel_factor=COMPILE_KERNEL_FACTOR)
        assert t_e.host_s - t_f.host_s == pytest.approx(want, rel=1e-9)


MCORE_LAYER_OPS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "mcore_moe_layer_ops_cpu.json"


def _measured_router_ops(config: str) -> tuple[int, int]:
    """(forward, backward) non-view router ops of ``config`` in the committed measurement, the same in every layout
    it was run at (EP 1 and EP 2)."""
    results = json.loads(MCORE_LAYER_OPS.read_text())["results"]
    ops = {(r["ops"]["forward"]["router"]["ops"], r["ops"]["backward"]["router"]["ops"])
           for r in results if r["config"] == config}
    assert len(ops) == 1, (config, ops)
    return ops.pop()


def _measured_delta(with_: str, without: str) -> tuple[int, int]:
    (f1, b1), (f0, b0) = _measured_router_ops(with_), _measured_router_ops(without)
    return f1 - f0, b1 - b0


def test_load_balancing_loss_adds_the_measured_router_ops():
    """benchmarks/results/mcore_moe_layer_ops_cpu.json: the router's ops with the loss less those without it."""
    assert mt.aux_loss_kernels(None) == mt.aux_loss_kernels(mt.MoeLoadBalancing.NONE) == (0.0, 0.0)
    assert mt.aux_loss_kernels(mt.MoeLoadBalancing.AUX_LOSS) == _measured_delta(
        "qwen3-moe aux_loss alltoall", "qwen3-moe none alltoall")
    assert mt.aux_loss_kernels(mt.MoeLoadBalancing.SEQ_AUX_LOSS) == _measured_delta(
        "deepseek-v3 seq_aux_loss sigmoid group-limited", "deepseek-v3 none sigmoid group-limited")
    kw = {"tokens": 4096.0, "hidden": 2048, "experts": 128, "top_k": 8, "local_experts": 16, "ep": 8}
    plain = mt.moe_layer_work(**kw)
    aux = mt.moe_layer_work(load_balancing=mt.MoeLoadBalancing.AUX_LOSS, **kw)
    assert (aux.forward_kernels - plain.forward_kernels, aux.backward_kernels - plain.backward_kernels) == (
        _measured_delta("qwen3-moe aux_loss alltoall", "qwen3-moe none alltoall"))
    assert aux.forward_bytes > plain.forward_bytes and aux.backward_bytes > plain.backward_bytes
    assert mt.moe_layer_work(load_balancing=mt.MoeLoadBalancing.NONE, **kw) == plain
    group = mt.moe_layer_work(group_sigmoid_router=True, **kw)
    assert (group.forward_kernels - plain.forward_kernels, group.backward_kernels - plain.backward_kernels) == (
        _measured_delta("deepseek-v3 none sigmoid group-limited", "qwen3-moe none alltoall"))


def test_inventory_counts_the_unfused_routers_extra_ops_on_eager_megatron_cards_only():
    n = MOE.num_moe_layers
    kw = {"micro_batch_size": 1, "seq_len": 4096, "expert_parallel": 8, "megatron_experts": True}
    base = step_inventory(_shard(8), moe_eager_launch=True, **kw)
    aux = step_inventory(_shard(8), moe_eager_launch=True, moe_load_balancing=mt.MoeLoadBalancing.AUX_LOSS, **kw)
    fwd, bwd = _measured_delta("qwen3-moe aux_loss alltoall", "qwen3-moe none alltoall")
    assert aux.layers_forward.kernels - base.layers_forward.kernels == pytest.approx(fwd * n)
    assert aux.layers_forward.fused_kernels - base.layers_forward.fused_kernels == pytest.approx(fwd * n)
    assert aux.layers_backward.kernels - base.layers_backward.kernels == pytest.approx(bwd * n)
    # a fused router (moe_router_fusion / CUDA graphs) computes its loss in fused kernels: not counted
    fused = step_inventory(_shard(8), moe_load_balancing=mt.MoeLoadBalancing.AUX_LOSS, **kw)
    assert fused.layers_forward.kernels == step_inventory(_shard(8), **kw).layers_forward.kernels
    dsv3 = rank_spec(from_catalog("deepseek-ai/DeepSeek-V3"), tp=1, pp=1, ep=8, etp=1)
    plain_topk = replace(dsv3, moe=replace(dsv3.moe, n_group=1, topk_group=1))
    group, topk = (step_inventory(m, moe_eager_launch=True, **kw) for m in (dsv3, plain_topk))
    n_d = dsv3.num_moe_layers
    assert group.layers_forward.fused_kernels - topk.layers_forward.fused_kernels == pytest.approx(18 * n_d)
    assert group.layers_backward.kernels - topk.layers_backward.kernels == pytest.approx(8 * n_d)
    fused_group, fused_topk = (step_inventory(m, **kw) for m in (dsv3, plain_topk))
    assert fused_group.layers_forward.kernels == fused_topk.layers_forward.kernels


# --- the busiest expert-parallel rank under a trained router (moe_time.busiest_rank_load_factor) -------------------


def test_busiest_rank_factor_is_one_without_expert_parallelism_or_spread():
    assert mt.busiest_rank_load_factor(ep=1, experts=128, expert_load_cv=0.93) == 1.0
    assert mt.busiest_rank_load_factor(ep=8, experts=128, expert_load_cv=0.0) == 1.0
    # a family with no published spread is timed balanced
    assert mt.trained_router_load_factor(family="mixtral", ep=8, experts=8) == 1.0


def test_busiest_rank_factor_follows_the_expected_maximum_of_the_rank_loads():
    # 1 + cv·√(ep/E)·z(ep), z by Blom: z(8) = Φ⁻¹(7.625/8.25) = 1.4297
    f = mt.busiest_rank_load_factor(ep=8, experts=128, expert_load_cv=0.93)
    assert f == pytest.approx(1 + 0.93 * (8 / 128) ** 0.5 * 1.4297, rel=1e-3)
    # Qwen3-MoE's published spread (load-balancing loss 1.87): 1.17 at EP 4, 1.33 at EP 8, 1.58 at EP 16 of 128
    got = [mt.trained_router_load_factor(family="qwen3_moe", ep=ep, experts=128) for ep in (4, 8, 16)]
    assert got == pytest.approx([1.172, 1.333, 1.582], abs=2e-3)


@settings(max_examples=60, deadline=None)
@given(e=st.sampled_from([8, 32, 64, 128, 256]), cv=st.floats(0.05, 3.0))
def test_busiest_rank_factor_grows_with_the_expert_parallel_size(e, cv):
    eps = [ep for ep in (1, 2, 4, 8, 16, 32, 64) if ep <= e]
    fs = [mt.busiest_rank_load_factor(ep=ep, experts=e, expert_load_cv=cv) for ep in eps]
    assert all(b >= a for a, b in zip(fs, fs[1:]))
    assert fs[0] == 1.0


def test_the_factor_scales_the_routed_expert_gemms_of_the_inventory_only():
    kw = dict(micro_batch_size=1, seq_len=4096, expert_parallel=8)
    shard = rank_spec(MOE, tp=1, pp=1, ep=8, etp=1)
    base = step_inventory(shard, **kw).layers_forward.gemms
    busy = step_inventory(shard, expert_load_factor=1.5, **kw).layers_forward.gemms
    moe_rows = {g.name: g.m for g in base if g.name in ("gate_up_proj", "down_proj")}
    assert set(moe_rows) == {"gate_up_proj", "down_proj"}
    for g in busy:
        if g.name in moe_rows:
            assert g.m == pytest.approx(1.5 * moe_rows[g.name])
    # the router scores every token of the rank whatever the routing; attention is untouched
    same = [g for g in busy if g.name not in moe_rows]
    assert same == [g for g in base if g.name not in moe_rows]


def test_the_factor_scales_the_expert_parallel_all_to_all():
    kw = dict(tokens=4096, hidden=2048, q_dim=4096, kv_dim=512, layers=4, attention_layers=4, moe_layers=4, top_k=8,
              tp=1, cp=1, ulysses=False, ep=8, pp=1, recompute=False, latency_s=0.0, tp_bus_bytes_per_s=1e11,
              cp_bus_bytes_per_s=1e11, ep_bus_bytes_per_s=1e11, pp_bytes_per_s=1e11, experts=128)
    a = model_parallel_comm(**kw).expert_s
    b = model_parallel_comm(ep_load_factor=1.4, **kw).expert_s
    c = model_parallel_comm(ep_load_factor=1.8, **kw).expert_s
    # the dispatches and combines scale with the factor; the token-count exchange does not
    assert b > a
    assert c - a == pytest.approx(2 * (b - a))


def _router_card(parallel: dict) -> dict:
    return {"model": "Qwen/Qwen3-30B-A3B", "method": "sft",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
            "parallel": {"strategy": "zero1", "gradient_checkpointing": False, "expert_parallel": 16, **parallel},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 8}}


def test_card_defaults_to_a_trained_router_and_refuses_other_values_in_one_line():
    from trainfit.errors import CardError
    from trainfit.spec.card import load_card_dict
    from trainfit.spec.enums import MoeRouterLoad

    assert load_card_dict(_router_card({})).parallel.moe_router_load is MoeRouterLoad.TRAINED
    with pytest.raises(CardError) as exc:
        load_card_dict(_router_card({"moe_router_load": "skewed"}))
    msg = str(exc.value)
    assert "parallel.moe_router_load" in msg and "trained" in msg and "balanced" in msg and "\n" not in msg


def test_a_trained_router_slows_an_expert_parallel_step_and_leaves_memory_alone():
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    trained = make_plan(load_card_dict(_router_card({})))
    balanced = make_plan(load_card_dict(_router_card({"moe_router_load": "balanced"})))
    assert trained.step_seconds > balanced.step_seconds
    assert trained.time_parts["expert_parallel"] > balanced.time_parts["expert_parallel"]
    assert trained.peak == balanced.peak
    # one rank runs every token: nothing to wait for
    one = {"expert_parallel": 1}
    hw = {"hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1}}
    a = make_plan(load_card_dict({**_router_card(one), **hw}))
    b = make_plan(load_card_dict({**_router_card({**one, "moe_router_load": "balanced"}), **hw}))
    assert a.step_seconds == b.step_seconds


# --- review fixes: where the busiest-rank factor applies and where it does not --------------------------------------

_A2A_KW = dict(hidden=2048, q_dim=4096, kv_dim=512, layers=4, attention_layers=4, moe_layers=4, top_k=8, tp=1, cp=1,
               ulysses=False, ep=8, pp=1, recompute=False, tp_bus_bytes_per_s=1e11, cp_bus_bytes_per_s=1e11,
               ep_bus_bytes_per_s=1e11, pp_bytes_per_s=1e11, experts=128, ep_ranks_per_node=8,
               ep_nic_bytes_per_s=4e10, ep_nvlink_bytes_per_s=1.5e11)


def test_the_allgather_dispatcher_takes_no_factor():
    # the all-gather / reduce-scatter move every rank's rows whatever the routing (moe_dispatch.allgather_dispatch):
    # the busiest rank's wait is in its scaled expert GEMMs, not its collectives
    from trainfit.spec.enums import MoeDispatcher

    kw = dict(_A2A_KW, tokens=4096, moe_dispatcher=MoeDispatcher.ALLGATHER)
    assert model_parallel_comm(ep_load_factor=1.58, **kw).expert_s == model_parallel_comm(**kw).expert_s


@pytest.mark.parametrize("dispatcher", ["alltoall", "deepep"])
def test_the_factor_scales_the_dispatch_bytes_not_the_fixed_latency(dispatcher):
    # the busiest rank's receive: factor x the bytes, NCCL's latency once; so the factor equals the same dispatch of
    # factor x the tokens (the count exchange does not depend on the tokens), and less than factor x the time
    from trainfit.spec.enums import MoeDispatcher

    kw = dict(_A2A_KW, moe_dispatcher=MoeDispatcher(dispatcher))
    for tokens in (64, 4096):  # latency-bound and bandwidth-bound
        busy = model_parallel_comm(tokens=tokens, ep_load_factor=2.0, **kw).expert_s
        assert busy == pytest.approx(model_parallel_comm(tokens=2 * tokens, **kw).expert_s)
    small = model_parallel_comm(tokens=64, **kw).expert_s
    assert model_parallel_comm(tokens=64, ep_load_factor=2.0, **kw).expert_s < 2.0 * small


def test_the_factor_scales_the_expert_side_elementwise_work_of_the_received_rows():
    # the expert activation, Megatron's chunk sorts and padding / split-gate-up terms run on the rows a rank receives;
    # the router and the send-side permute stay on the rank's own tokens
    kw = dict(micro_batch_size=1, seq_len=4096, expert_parallel=8)
    shard = rank_spec(MOE, tp=1, pp=1, ep=8, etp=1)
    base = step_inventory(shard, **kw)
    busy = step_inventory(shard, expert_load_factor=1.333, **kw)
    assert busy.layers_forward.memory_bytes > base.layers_forward.memory_bytes
    assert busy.layers_backward.memory_bytes > base.layers_backward.memory_bytes
    n_moe = MOE.num_layers
    rows = 4096 * MOE.moe.experts_per_token
    # the forward's extra bytes: the SwiGLU over the extra rows plus the two chunk sorts (each reads and writes them)
    extra_rows = rows * 0.333
    from trainfit.compute.inventory import SWIGLU_BYTES

    want = (SWIGLU_BYTES * extra_rows * MOE.moe.expert_intermediate_size
            + mt.chunk_sort_bytes(rows=extra_rows, hidden=MOE.hidden_size, local_experts=shard.moe.num_experts, ep=8))
    assert busy.layers_forward.memory_bytes - base.layers_forward.memory_bytes == pytest.approx(want * n_moe, rel=1e-6)
    # padded grouped GEMMs (torchtitan) and the split gate/up input-gradient sum scale too
    pad = dict(kw, expert_padding=True)
    assert (step_inventory(shard, expert_load_factor=1.333, **pad).layers_backward.memory_bytes
            - step_inventory(shard, **pad).layers_backward.memory_bytes) > (
        busy.layers_backward.memory_bytes - base.layers_backward.memory_bytes)


def test_the_benchmark_plans_xtuner_load_imbalance_rows_trained_and_a_stated_value_wins():
    from step_times_module import load_step_times

    st = load_step_times("step_times_router_load")
    guide = {"repo": "InternLM/xtuner", "path": "docs/en/benchmark/megatron_moe_benchmark.md"}
    forced = {"source": {**guide, "section": "... / Trying Different EP Settings"}, "parallel": {}}
    imbalance = {"source": {**guide, "section": "... / EP Load Imbalance"}, "parallel": {}}
    assert st.balanced_routing_reason(forced).startswith("XTuner's Megatron benchmark")
    assert st.balanced_routing_reason(imbalance) is None
    # an entry's own value wins over its source's
    assert st.balanced_routing_reason({**forced, "parallel": {"moe_router_load": "trained"}}) is None
    assert st.balanced_routing_reason({**imbalance, "parallel": {"moe_router_load": "balanced"}}) == \
        "the entry states it"
    rows = [e for e in st.load_entries(st.TRAIN_DATA)
            if "EP Load Imbalance" in str((e.get("source") or {}).get("section"))]
    assert len(rows) == 4
    for e in rows:
        assert st.balanced_routing_reason(e) is None
        assert "routing's imbalance" not in e.get("card_cannot_state", "")
