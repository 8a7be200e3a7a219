"""parallel.zero1_shard_size / zero1_param_sync: InternEvo's ZeRO-1 as its HybridZeroOptimizer runs it (optimizer
states split over a zero1 group of consecutive data ranks, the gradients all-reduced over every data rank, the updated
shards handed back by one broadcast per group rank; InternLM/InternEvo internlm/solver/optimizer/hybrid_zero_optim.py
@c18bec9361684189aadf6ffb724f9dfe48288eb0).

Memory: the optimizer states are divided by the group, not the data ranks. Time: with a group smaller than the data
ranks the gradients are all-reduced over every data rank (not reduce-scattered: a rank steps the summed 1/group slice),
the hand-back runs inside the group (NVLink when it fits a node) and, with broadcast_per_rank, as one broadcast per
group rank, each paying its ring fill. Without the fields nothing moves."""

from __future__ import annotations

import pytest

from trainfit import api
from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute import collectives as coll
from trainfit.compute.rates import default_rates
from trainfit.compute.training import Parallel, Zero1Group, zero1_group_of
from trainfit.errors import CardError
from trainfit.memory.sharding import make_sharding
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Strategy


def _card(nodes: int = 2, gpus_per_node: int = 8, **parallel) -> dict:
    return {"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "a100-80gb", "gpus_per_node": gpus_per_node, "nodes": nodes},
            "batch": {"micro_batch_size": 1, "seq_len": 2048}, "parallel": {"strategy": "zero1", **parallel}}


@pytest.mark.parametrize("parallel, message", [
    ({"strategy": "fsdp", "zero1_shard_size": 8}, "only read with parallel.strategy: zero1 (strategy is 'fsdp')"),
    ({"strategy": "ddp", "zero1_param_sync": "broadcast_per_rank"}, "only read with parallel.strategy: zero1"),
    ({"zero1_shard_size": 3},
     "parallel.zero1_shard_size: 3 does not divide the 16 data x context ranks; allowed: 1, 2, 4, 8, 16 or null"),
])
def test_invalid_groups_are_refused_naming_the_field(parallel, message):
    with pytest.raises(CardError) as exc:
        load_card_dict(_card(**parallel))
    assert message in str(exc.value)


def test_sharding_divides_the_optimizer_by_the_group_only_for_zero1():
    assert make_sharding(strategy=Strategy.ZERO1, gpus_per_node=8, nodes=4).optimizer_divisor == 32
    assert make_sharding(strategy=Strategy.ZERO1, gpus_per_node=8, nodes=4, zero1_shard_size=8).optimizer_divisor == 8
    sh = make_sharding(strategy=Strategy.ZERO2, gpus_per_node=8, nodes=4, zero1_shard_size=8)
    assert sh.optimizer_divisor == sh.grads_divisor == 32


def test_plan_memory_holds_more_optimizer_state_with_a_smaller_group():
    whole = api.plan(_card(nodes=4))
    grouped = api.plan(_card(nodes=4, zero1_shard_size=8))
    assert grouped.peak.components["optimizer_states"] == pytest.approx(4 * whole.peak.components["optimizer_states"], rel=1e-9)
    assert grouped.peak.device > whole.peak.device
    assert api.plan(_card(nodes=4, zero1_shard_size=32)).peak.device == whole.peak.device


def test_per_rank_broadcasts_cost_one_ring_fill_each():
    rates, weight = default_rates(resolve_gpu("a100-80gb")), 14.6e9
    bus = coll.ring_bus_bytes_per_s(rates=rates, crosses_nodes=True, nic_bytes_per_s=6.25e9, local_ranks=8)
    gather = coll.zero1_param_sync_seconds(total_bytes=weight, ranks=1024, bus_bytes_per_s=bus, nodes=128)
    assert gather == coll.all_gather_seconds(total_bytes=weight, ranks=1024, bus_bytes_per_s=bus, nodes=128)
    one = coll.broadcast_seconds(total_bytes=weight / 1024, ranks=1024, bus_bytes_per_s=bus, nodes=128)
    per_rank = coll.zero1_param_sync_seconds(total_bytes=weight, ranks=1024, bus_bytes_per_s=bus, nodes=128,
                                             broadcast_per_rank=True)
    assert per_rank == pytest.approx(1024 * one) and per_rank > gather
    assert coll.zero1_param_sync_seconds(total_bytes=weight, ranks=1, bus_bytes_per_s=bus, broadcast_per_rank=True) == 0


def test_group_inside_a_node_hands_back_over_nvlink():
    rates = default_rates(resolve_gpu("a100-80gb"))
    par = Parallel(strategy="zero1", ranks=32, gpus_per_node=8, zero1_shard=8, zero1_broadcast_per_rank=True)
    g = zero1_group_of(par, rates, ranks=32, bus_bytes_per_s=1e9)
    assert g.gather_ranks == 8 and g.gather_nodes == 1 and g.gather_broadcast_per_rank is True
    assert g.gather_bus_bytes_per_s > 1e9
    # over the nodes: the data group's rate
    wide = zero1_group_of(Parallel(strategy="zero1", ranks=32, gpus_per_node=8, zero1_shard=16), rates, ranks=32,
                          bus_bytes_per_s=1e9)
    assert (wide.gather_ranks, wide.gather_nodes, wide.gather_bus_bytes_per_s) == (16, 2, 1e9)
    assert zero1_group_of(Parallel(strategy="zero1", ranks=32, gpus_per_node=8), rates, ranks=32,
                          bus_bytes_per_s=1e9) == Zero1Group()
    assert zero1_group_of(Parallel(strategy="zero2", ranks=32, gpus_per_node=8, zero1_shard=8), rates, ranks=32,
                          bus_bytes_per_s=1e9) == Zero1Group()
    # the defaults are exposed_data_parallel's own: the data group's one all-gather
    import inspect

    from trainfit.compute.collectives import exposed_data_parallel

    params = inspect.signature(exposed_data_parallel).parameters
    assert all(params[k].default == v for k, v in Zero1Group()._asdict().items())


def test_step_time_moves_only_with_the_fields():
    base = api.plan(_card(nodes=4)).time.total_s
    assert api.plan(_card(nodes=4, zero1_param_sync="all_gather")).time.total_s == base
    assert api.plan(_card(nodes=4, zero1_shard_size=8)).time.total_s < base
    assert api.plan(_card(nodes=4, zero1_param_sync="broadcast_per_rank")).time.total_s > base


def test_a_smaller_group_all_reduces_the_gradients_over_every_data_rank():
    """Group 8 of 32 ranks: each rank needs the summed 1/8 slice, so the reduction is one all-reduce over the 32 ranks
    (InternEvo's reduce_tensor(dst_rank=None), collectives.INTERNEVO_ZERO1_REDUCE), the whole of it and the exposed last
    bucket; a reduce-scatter over the 32 would leave each rank only 1/32 of the sum."""
    rates = default_rates(resolve_gpu("a100-80gb"))
    bus = coll.ring_bus_bytes_per_s(rates=rates, crosses_nodes=True, nic_bytes_per_s=6.25e9, local_ranks=8)
    grad, kw = 14.6e9, {"ranks": 32, "bus_bytes_per_s": bus, "nodes": 4}
    group = zero1_group_of(Parallel(strategy="zero1", ranks=32, gpus_per_node=8, zero1_shard=8), rates, ranks=32,
                           bus_bytes_per_s=bus)
    assert group.grad_all_reduce is True
    comm = coll.exposed_data_parallel(grad_bytes=grad, weight_bytes=grad, backward_s=0.0, micro_steps=1,
                                      zero_stage=1, **kw, **group._asdict())
    gather = coll.zero1_param_sync_seconds(total_bytes=grad, ranks=8, bus_bytes_per_s=group.gather_bus_bytes_per_s,
                                           nodes=1)
    all_reduce = coll.all_reduce_seconds(total_bytes=grad, **kw)
    assert comm.total_s - gather == pytest.approx(all_reduce, rel=1e-12)
    assert comm.exposed_s - gather == pytest.approx(all_reduce, rel=1e-12)  # nothing to hide behind
    assert all_reduce > coll.reduce_scatter_seconds(total_bytes=grad, **kw)
    hidden = coll.exposed_data_parallel(grad_bytes=grad, weight_bytes=grad, backward_s=1e3, micro_steps=1,
                                        zero_stage=1, **kw, **group._asdict())
    last = coll.all_reduce_seconds(total_bytes=coll.DDP_BUCKET_BYTES, **kw)
    assert hidden.exposed_s - gather == pytest.approx(last, rel=1e-12)
    # the whole data group (no zero1_shard_size): still one reduce-scatter
    whole = zero1_group_of(Parallel(strategy="zero1", ranks=32, gpus_per_node=8), rates, ranks=32, bus_bytes_per_s=bus)
    assert whole.grad_all_reduce is False
