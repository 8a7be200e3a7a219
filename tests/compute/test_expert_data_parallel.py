"""The routed experts' gradient reduction and optimizer shard over the expert-data-parallel group (Megatron-Core
DDP / distributed optimizer: ``collectives`` and ``optimizer_time`` module docstrings), in the time model."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import resolve_model
from trainfit.compute import collectives as coll
from trainfit.compute.optimizer_time import shard_params
from trainfit.compute.rates import default_rates
from trainfit.memory.parallel import layout_of
from trainfit.plan.time import expert_data_parallel, rank_spec, stage_layers, training_time
from trainfit.spec.card import load_card_dict

RATES = default_rates(resolve_gpu("h100-sxm"))
KW = {"ranks": 16, "bus_bytes_per_s": 40e9, "latency_s": 2e-5, "backward_s": 0.5, "micro_steps": 4}


@given(params=st.floats(1e6, 1e12), frac=st.floats(0.0, 1.0), shards=st.integers(1, 512),
       expert_shards=st.integers(1, 512))
def test_shard_params_splits_dense_and_expert(params, frac, shards, expert_shards):
    expert = params * frac
    got = shard_params(params=params, expert_params=expert, shards=shards, expert_shards=expert_shards)
    assert got == pytest.approx((params - expert) / shards + expert / expert_shards)
    assert shard_params(params=params, expert_params=expert, shards=shards) == pytest.approx(params / shards)
    # fewer expert shards: a larger share of the experts on the rank
    if expert_shards < shards and frac > 1e-3:
        assert got > params / shards


@pytest.mark.parametrize("stage", [0, 1])
def test_one_rank_expert_group_reduces_and_gathers_no_expert_bytes(stage):
    dense = coll.exposed_data_parallel(grad_bytes=4e9, weight_bytes=2e9, zero_stage=stage, **KW)
    both = coll.exposed_data_parallel(grad_bytes=4e9, weight_bytes=2e9, zero_stage=stage, expert_grad_bytes=60e9,
                                      expert_weight_bytes=30e9, expert_ranks=1, **KW)
    assert both == dense


def test_expert_group_collectives_are_timed_over_their_own_ranks_and_rate():
    ekw = {"ranks": 2, "bus_bytes_per_s": 400e9, "latency_s": KW["latency_s"]}
    dense = coll.exposed_data_parallel(grad_bytes=4e9, weight_bytes=2e9, zero_stage=1, **KW)
    both = coll.exposed_data_parallel(grad_bytes=4e9, weight_bytes=2e9, zero_stage=1, expert_grad_bytes=60e9,
                                      expert_weight_bytes=30e9, expert_ranks=2, expert_bus_bytes_per_s=400e9, **KW)
    extra = coll.reduce_scatter_seconds(total_bytes=60e9, **ekw) + coll.all_gather_seconds(total_bytes=30e9, **ekw)
    assert both.total_s == pytest.approx(dense.total_s + extra)
    # the same bytes over the dense group (16 ranks, 40 GB/s) cost far more than over 2 ranks at 400 GB/s
    merged = coll.exposed_data_parallel(grad_bytes=64e9, weight_bytes=32e9, zero_stage=1, **KW)
    assert merged.total_s > 2 * both.total_s


def _dsv3_card(gpus: int = 256, pp: int = 16, ep: int = 16, strategy: str = "zero1") -> dict:
    return {"model": "deepseek-ai/DeepSeek-V3", "method": "sft", "scope": "full",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": gpus // 8},
            "parallel": {"strategy": strategy, "pipeline_parallel": pp, "expert_parallel": ep,
                         "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 32}}


def _terms(card: dict, ranks: int):
    c = load_card_dict(card)
    spec = resolve_model(c.model)
    t = training_time(c, spec, RATES, ranks=ranks, gpus_per_node=8, micro_batch_size=1, seq_len=4096,
                      micro_steps=32)
    return c, spec, {p.name: p for p in t.phases}


def test_deepseek_v3_expert_group_matches_the_memory_layout():
    c = load_card_dict(_dsv3_card())
    spec = resolve_model(c.model)
    par = c.parallel
    shard = rank_spec(spec, tp=1, pp=16, ep=16, etp=1)
    data_ranks = 256 // 16
    expert, edp, local = expert_data_parallel(c, spec, shard, params=1e9, data_ranks=data_ranks, gpus_per_node=8)
    assert edp == layout_of(c, 256).expert_data_group == 1
    assert local == 1 and 0 < expert < 1e9
    assert par.expert_parallel == 16
    # FSDP shards the experts over the same group; HSDP keeps them with the dense parameters
    f = load_card_dict(_dsv3_card(strategy="fsdp", pp=16))
    assert expert_data_parallel(f, spec, shard, params=1e9, data_ranks=data_ranks, gpus_per_node=8) == (
        expert, edp, local)
    h = load_card_dict(_dsv3_card(strategy="hsdp", pp=1))
    assert expert_data_parallel(h, spec, shard, params=1e9, data_ranks=data_ranks, gpus_per_node=8) == (
        0.0, data_ranks, 1)


def test_deepseek_v3_optimizer_steps_the_unsharded_experts_and_reduces_only_dense_grads(monkeypatch):
    # 256 GPUs, pp 16, ep 16: dense dp 16, expert dp 1
    card = _dsv3_card()
    c, spec, split = _terms(card, 256)
    shard = rank_spec(spec, tp=1, pp=16, ep=16, etp=1)
    expert, edp, _ = expert_data_parallel(c, spec, shard, params=1.0, data_ranks=16, gpus_per_node=8)
    assert edp == 1 and 0 < expert < 1
    import trainfit.plan.time as ptime

    monkeypatch.setattr(ptime, "expert_data_parallel", lambda c, s, sh, *, params, data_ranks, gpus_per_node: (
        0.0, data_ranks, 1))
    _, _, folded = _terms(card, 256)
    # the optimizer steps (1 - x)/16 + x of the rank's parameters instead of 1/16
    ratio = split["optimizer_step"].terms["bytes_moved"] / folded["optimizer_step"].terms["bytes_moved"]
    assert ratio == pytest.approx(((1 - expert) / 16 + expert) / (1 / 16), rel=1e-9)
    assert split["optimizer_step"].seconds > folded["optimizer_step"].seconds
    # only the dense gradients are reduce-scattered (and the dense weights gathered) over the 16 data ranks
    assert split["communication"].terms["total"] == pytest.approx(folded["communication"].terms["total"] * (1 - expert),
                                                                  rel=0.05)
    assert split["communication"].terms["total"] < folded["communication"].terms["total"]
    # compute and the expert all-to-all do not depend on the grouping
    for name in ("forward", "backward", "expert_parallel"):
        assert split[name].seconds == folded[name].seconds


def test_timed_pipeline_stage_is_the_largest_with_the_most_moe_layers():
    spec = resolve_model("deepseek-ai/DeepSeek-V3")  # 61 layers, the first three dense
    # NeMo RL's pp 16 layout: 3 on the first stage, 2 on the last, 4 on each middle stage (all MoE)
    assert stage_layers(spec, 16, first=3, last=2) == (3, 4, 5, 6)
    shard = rank_spec(spec, tp=1, pp=16, ep=16, etp=1, first=3, last=2)
    assert shard.num_layers == 4 and all(shard.moe.is_moe_layer(i) for i in range(4))
    # even split: the first stage holding the dense layers is passed over for an all-MoE one of the same size
    assert stage_layers(spec, 4, last=13) == (16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31)
    # without pipeline parallel the shard keeps the model's own dense / MoE pattern
    whole = rank_spec(spec, tp=1, pp=1, ep=8, etp=1)
    assert [whole.moe.is_moe_layer(i) for i in range(spec.num_layers)] == [
        spec.moe.is_moe_layer(i) for i in range(spec.num_layers)]
    dense = resolve_model("Qwen/Qwen2.5-7B")  # 28 layers, no experts: the first of the equal stages
    assert stage_layers(dense, 4) == tuple(range(7))


def test_fsdp_experts_on_a_one_rank_ep_shard_mesh_are_not_gathered():
    kw = {"layers": 48, "root_weight_bytes": 1e8, "root_grad_bytes": 1e8, "ranks": 8, "bus_bytes_per_s": 300e9,
              "latency_s": 2e-5, "layer_forward_s": 1e-3, "layer_backward_s": 2e-3, "micro_steps": 4}
    dense = coll.exposed_sharded(layer_weight_bytes=2e7, layer_grad_bytes=4e7, **kw)
    alone = coll.exposed_sharded(layer_weight_bytes=2e7, layer_grad_bytes=4e7, expert_layer_weight_bytes=1e9,
                                 expert_layer_grad_bytes=2e9, expert_ranks=1, **kw)
    assert alone == dense
    folded = coll.exposed_sharded(layer_weight_bytes=2e7 + 1e9, layer_grad_bytes=4e7 + 2e9, **kw)
    both = coll.exposed_sharded(layer_weight_bytes=2e7, layer_grad_bytes=4e7, expert_layer_weight_bytes=1e9,
                                expert_layer_grad_bytes=2e9, expert_ranks=8, **kw)
    # the same bytes over the same group: only the extra collectives' latency apart (an all-gather forward, one
    # backward after the reshard, a reduce-scatter, per layer and micro-step)
    lat = kw["latency_s"]
    assert both.total_s == pytest.approx(folded.total_s + 4 * 48 * 3 * lat)


def test_fsdp_expert_parallel_card_shards_experts_over_data_ranks_over_ep(monkeypatch):
    card = {"model": "Qwen/Qwen3-30B-A3B", "method": "sft", "scope": "full",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
            "parallel": {"strategy": "fsdp", "expert_parallel": 8}, "batch": {"micro_batch_size": 1, "seq_len": 4096}}
    c = load_card_dict(card)
    spec = resolve_model(c.model)
    shard = rank_spec(spec, tp=1, pp=1, ep=8, etp=1)
    expert, edp, local = expert_data_parallel(c, spec, shard, params=1.0, data_ranks=16, gpus_per_node=8)
    assert edp == 2 == layout_of(c, 16).expert_data_group and local == 1 and expert > 0.5
    split = {p.name: p for p in training_time(c, spec, RATES, ranks=16, gpus_per_node=8, micro_batch_size=1,
                                              seq_len=4096, micro_steps=1).phases}
    import trainfit.plan.time as ptime

    monkeypatch.setattr(ptime, "expert_data_parallel", lambda c, s, sh, *, params, data_ranks, gpus_per_node: (
        0.0, data_ranks, 1))
    folded = {p.name: p for p in training_time(c, spec, RATES, ranks=16, gpus_per_node=8, micro_batch_size=1,
                                               seq_len=4096, micro_steps=1).phases}
    ratio = split["optimizer_step"].terms["bytes_moved"] / folded["optimizer_step"].terms["bytes_moved"]
    assert ratio == pytest.approx(((1 - expert) / 16 + expert / 2) / (1 / 16), rel=1e-9)
    # the experts' collectives run over 2 ranks, one per node, instead of 16 over two nodes' NICs
    assert split["communication"].terms["total"] != folded["communication"].terms["total"]
