"""HSDP's shard group as torch builds it: ``init_device_mesh`` lays ``arange(world)`` out row-major as
``(replicate, shard)`` and gives every row of the shard dimension its own NCCL communicator, so a shard group is
``shard`` consecutive ranks; NCCL counts the nodes among a communicator's ranks (``nNodes``). One rule
(``collectives.domain_ranks`` for the slowest share of a node, ``collectives.domain_span`` for the nodes) decides both
the link ``training.hsdp_links`` prices and the node count NCCL's latency is taken at."""

from __future__ import annotations

from math import lcm

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute import collectives as coll
from trainfit.compute.rates import default_rates
from trainfit.compute.training import Parallel, _nccl_groups, hsdp_links

RATES = default_rates(resolve_gpu("h100-sxm"))
NIC = 50e9


def _torch_shard_groups(ranks: int, shard: int) -> list[list[int]]:
    """The rows of ``arange(ranks).view(ranks // shard, shard)``: the shard dimension's process groups."""
    return [list(range(r, r + shard)) for r in range(0, ranks, shard)]


def _layout(groups: list[list[int]], per_node: int) -> tuple[int, int]:
    """(fewest ranks any group has in one of its nodes, most nodes any group spans), by enumeration."""
    nodes = [{r // per_node for r in g} for g in groups]
    share = min(sum(1 for r in g if r // per_node == n) for g, ns in zip(groups, nodes) for n in ns)
    return share, max(len(ns) for ns in nodes)


@pytest.mark.parametrize("n", range(1, 25))
@pytest.mark.parametrize("d", range(1, 25))
def test_domain_ranks_and_span_are_the_enumerated_groups(n, d):
    groups = _torch_shard_groups(2 * lcm(n, d), n)
    share, span = _layout(groups, d)
    assert coll.domain_ranks(ranks=n, domain_gpus=d) == share
    assert coll.domain_span(ranks=n, domain_gpus=d) == span


@pytest.mark.parametrize("ranks, per_node, shard", [
    (24, 8, 3), (24, 8, 6), (24, 8, 12), (12, 6, 4), (16, 8, 2), (32, 8, 16), (6, 8, 3), (6, 6, 3), (8, 8, 8),
    (48, 8, 12), (128, 8, 2),
])
def test_hsdp_links_price_the_groups_torch_builds(ranks, per_node, shard):
    links = hsdp_links(Parallel(strategy="hsdp", ranks=ranks, gpus_per_node=per_node, nic_bytes_per_s=NIC,
                                hsdp_shard=shard), RATES)
    share, span = _layout(_torch_shard_groups(ranks, shard), per_node)
    assert links.shard_nodes == span
    assert links.shard_crosses_nodes == (span > 1)
    assert links.shard_bus_bytes_per_s == coll.ring_bus_bytes_per_s(
        rates=RATES, crosses_nodes=span > 1, nic_bytes_per_s=NIC, local_ranks=share)
    # the node count NCCL's latency is taken at is the same group's
    par = Parallel(strategy="hsdp", ranks=ranks, gpus_per_node=per_node, nic_bytes_per_s=NIC, hsdp_shard=shard)
    assert _nccl_groups(par, RATES, group=links.shard, eranks=ranks, hsdp=links)["nodes"] == span


def test_a_group_of_three_on_eight_gpu_hosts_crosses_through_one_nic():
    # ranks 6, 7 | 8: two nodes, the second holding one GPU, whose one NIC paces the ring
    links = hsdp_links(Parallel(strategy="hsdp", ranks=24, gpus_per_node=8, nic_bytes_per_s=NIC, hsdp_shard=3), RATES)
    assert (links.shard_crosses_nodes, links.shard_nodes) == (True, 2)
    assert links.shard_bus_bytes_per_s == pytest.approx(NIC * coll.NIC_EFFICIENCY)
