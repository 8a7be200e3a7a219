"""HSDP: each unit's cross-node all-reduce of its gradient shard runs behind the remaining backward
(``collectives.exposed_sharded``, torch FSDP1 ``_reduce_grad`` / FSDP2 ``foreach_reduce`` on a stream of their own)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import collectives as coll
from trainfit.compute.rates import default_rates
from trainfit.compute.training import Parallel, train_step_time

HOP = 0.0  # a caller's fixed latency (0 here) is the whole fixed cost: no per-step term
# 4 layers, 8 GPUs a node at 200 GB/s bus, 4 node replicas at 10 GB/s per GPU; no root unit, no fixed latency
KW = dict(layers=4, layer_weight_bytes=8e8, layer_grad_bytes=8e8, root_weight_bytes=0.0, root_grad_bytes=0.0,
          ranks=8, bus_bytes_per_s=200e9, latency_s=0.0, layer_forward_s=5e-3, layer_backward_s=10e-3,
          micro_steps=1)
REPLICA = dict(replica_layer_grad_bytes=1e8, replica_ranks=4, replica_bus_bytes_per_s=10e9)


def _fully_exposed(kw: dict, *, layers: int, replica_bytes: float) -> float:
    """The old charge: FSDP's exposed time plus every unit's all-reduce after the backward."""
    ar = coll.all_reduce_seconds(total_bytes=replica_bytes, ranks=4, bus_bytes_per_s=10e9, latency_s=0.0)
    return coll.exposed_sharded(**kw).exposed_s + layers * ar


def test_arithmetic_case():
    ag = 7 * HOP + 7 / 8 * 8e8 / 200e9  # 3.5 ms: the layer's all-gather, and its reduce-scatter, in the node
    ar = 2 * 3 * HOP + 2 * 3 / 4 * 1e8 / 10e9  # 15 ms: its shard's all-reduce over 4 replicas
    assert coll.all_gather_seconds(total_bytes=8e8, ranks=8, bus_bytes_per_s=200e9, latency_s=0.0) == pytest.approx(ag)
    # forward: the first gather; backward: the all-reduce outruns the 10 ms of compute by 5 ms on 3 layers,
    # then the last layer's reduce-scatter and all-reduce
    expected = ag + 3 * (ar - 10e-3) + ag + ar
    got = coll.exposed_sharded(**KW, **REPLICA)
    assert got.exposed_s == pytest.approx(expected, rel=1e-12)
    assert got.exposed_s == pytest.approx(37.0e-3, abs=1e-9)
    assert got.total_s == pytest.approx(4 * (3 * ag + ar), rel=1e-12)
    # the old charge: FSDP's 7 ms plus all four all-reduces, 67 ms
    assert _fully_exposed(KW, layers=4, replica_bytes=1e8) == pytest.approx(2 * ag + 4 * ar, rel=1e-12)


def test_never_above_the_fully_exposed_figure():
    for fwd, bwd in ((0.0, 0.0), (1e-3, 2e-3), (5e-3, 10e-3), (5e-3, 16e-3), (1.0, 2.0)):
        kw = dict(KW, layer_forward_s=fwd, layer_backward_s=bwd)
        got = coll.exposed_sharded(**kw, **REPLICA).exposed_s
        assert got <= _fully_exposed(kw, layers=4, replica_bytes=1e8) + 1e-15
    # enough compute hides all but the last layer's reduce-scatter and all-reduce
    kw = dict(KW, layer_backward_s=1.0)
    ag = coll.all_gather_seconds(total_bytes=8e8, ranks=8, bus_bytes_per_s=200e9, latency_s=0.0)
    ar = coll.all_reduce_seconds(total_bytes=1e8, ranks=4, bus_bytes_per_s=10e9, latency_s=0.0)
    assert coll.exposed_sharded(**kw, **REPLICA).exposed_s == pytest.approx(ag + ag + ar, rel=1e-12)


def test_zero_compute_exposes_every_all_reduce():
    # no compute and nothing else on the links: all the all-reduces are exposed, as before
    bare = dict(KW, ranks=1, layer_forward_s=0.0, layer_backward_s=0.0)
    root = dict(replica_root_grad_bytes=3e7)
    got = coll.exposed_sharded(**bare, **REPLICA, **root).exposed_s
    ar = coll.all_reduce_seconds(total_bytes=1e8, ranks=4, bus_bytes_per_s=10e9, latency_s=0.0)
    ar_root = coll.all_reduce_seconds(total_bytes=3e7, ranks=4, bus_bytes_per_s=10e9, latency_s=0.0)
    assert got == pytest.approx(_fully_exposed(bare, layers=4, replica_bytes=1e8) + ar_root, rel=1e-12)
    assert got == pytest.approx(4 * ar + ar_root, rel=1e-12)
    # with the node's collectives on NVLink the two links still pipeline: (layers - 1) x the shorter one saved
    zero = dict(KW, layer_forward_s=0.0, layer_backward_s=0.0)
    ag = coll.all_gather_seconds(total_bytes=8e8, ranks=8, bus_bytes_per_s=200e9, latency_s=0.0)
    assert coll.exposed_sharded(**zero, **REPLICA).exposed_s == pytest.approx(
        _fully_exposed(zero, layers=4, replica_bytes=1e8) - 3 * min(2 * ag, ar), rel=1e-12)


def test_one_replica_or_no_bytes_changes_nothing():
    plain = coll.exposed_sharded(**KW)
    assert coll.exposed_sharded(**KW, replica_layer_grad_bytes=1e8, replica_ranks=1) == plain
    assert coll.exposed_sharded(**KW, replica_ranks=4) == plain


def test_all_reduced_every_micro_step():
    one = coll.exposed_sharded(**KW, **REPLICA)
    three = coll.exposed_sharded(**dict(KW, micro_steps=3), **REPLICA)
    assert three.exposed_s == pytest.approx(3 * one.exposed_s) and three.total_s == pytest.approx(3 * one.total_s)


def test_hsdp_step_exposes_at_most_the_whole_all_reduce():
    rates = default_rates(resolve_gpu("a100-80gb"))
    spec = from_catalog("Qwen/Qwen3-8B")
    kw = dict(rates=rates, micro_batch_size=2, seq_len=4096, trained_params=8.19e9, trained_tensors=399,
              gathered_weight_bytes=16.4e9)
    nic = 6.25e9  # 50 Gb/s per GPU

    def comm(ranks: int) -> float:
        step = train_step_time(spec, parallel=Parallel(strategy="hsdp", ranks=ranks, gpus_per_node=8,
                                                       nic_bytes_per_s=nic), **kw)
        return next(p for p in step.phases if p.name == "communication").seconds

    one_node, four_nodes = comm(8), comm(32)
    bus = min(rates.intra_node_bus_bytes_per_s, nic * coll.NIC_EFFICIENCY)
    whole = coll.all_reduce_seconds(total_bytes=8.19e9 * 2 / 8, ranks=4, bus_bytes_per_s=bus,
                                    nodes=4)
    root = coll.all_reduce_seconds(total_bytes=8.19e9 * 2 * 0.08 / 8, ranks=4, bus_bytes_per_s=bus,
                                   nodes=4)
    # a 2 x 4096-token backward per layer covers a layer's shard all-reduce at 5 GB/s: the root's and the last
    # layer's are what the replicas add
    extra = four_nodes - one_node
    assert root < extra < 0.2 * whole
