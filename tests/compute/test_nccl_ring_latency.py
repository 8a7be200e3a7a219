"""The training step's collectives priced with NCCL's own tuner (``collectives.nccl_collective_seconds``), checked by
hand against tuning.cc's constants and against published small-message nccl-tests rows (``collectives`` docstring)."""

import pytest

from trainfit.compute import collectives as coll
from trainfit.compute import moe_time as mt

BUS = 360e9


def _lat(choices):
    return {c.protocol: c.latency_s for c in choices}


def test_ring_all_gather_latencies_are_tuning_cc_by_hand():
    # one node, 8 ranks: base + 7 NVLink steps (LL 6.6 + 7 x 0.6, LL128 14 + 7 x 1.9, Simple 8.4 + 7 x 3.4)
    lat = _lat(coll.nccl_ring_choices(ranks=8, nodes=1, bus_bytes_per_s=BUS))
    assert lat == pytest.approx({"ll": 10.8e-6, "ll128": 27.3e-6, "simple": 32.2e-6})
    # 2 nodes x 8: 14 intra steps at max(hop, 1 us net overhead; x3 for Simple) + 1 network step
    lat = _lat(coll.nccl_ring_choices(ranks=16, nodes=2, bus_bytes_per_s=BUS))
    assert lat["ll"] == pytest.approx((6.6 + 14 * 1.0 + 2.7) * 1e-6)
    assert lat["simple"] == pytest.approx((8.4 + 14 * 3.4 + 14.0) * 1e-6)
    # one GPU per node: the tree's network hop (tuning.cc "ppn == 1")
    lat = _lat(coll.nccl_ring_choices(ranks=4, nodes=4, bus_bytes_per_s=BUS))
    assert lat["ll"] == pytest.approx((6.6 + 3 * 5.0) * 1e-6)


def test_pcie_ring_has_no_ll128_and_takes_the_pci_hops():
    lat = _lat(coll.nccl_ring_choices(ranks=4, nodes=1, bus_bytes_per_s=24e9, intra_link=coll.IntraLink.PCIE))
    assert set(lat) == {"ll", "simple"}
    assert lat["simple"] == pytest.approx((8.4 + 3 * 5.7) * 1e-6)


def test_small_buffers_meet_published_nccl_tests_rows():
    # 8 H20, one NVSwitch node, all-reduce 4-4096 B: 12.5-16.7 us (deepseek-ai/DeepEP issue #303)
    ar8 = coll.nccl_collective_seconds(collective="all_reduce", total_bytes=128, ranks=8, nodes=1, bus_bytes_per_s=BUS)
    assert 12.0e-6 < ar8 < 17.0e-6
    # the removed unsourced form (30 us + 8 us per ring step, two passes) read 142 us
    assert (30.0 + 14 * 8.0) * 1e-6 > 8 * ar8
    # 2 nodes x 4 GPUs, reduce-scatter 128-512 B: 23-32 us (NVIDIA/nccl-tests issue #128)
    rs = coll.nccl_collective_seconds(collective="reduce_scatter", total_bytes=256, ranks=8, nodes=2,
                                      bus_bytes_per_s=80e9)
    assert 20e-6 < rs < 40e-6
    # 2 x 8 H100 over InfiniBand, all-reduce 128 B: 61.6 us (NVIDIA/nccl issue #1453; the excess is taken from it)
    ar16 = coll.nccl_collective_seconds(collective="all_reduce", total_bytes=128, ranks=16, nodes=2,
                                        bus_bytes_per_s=160e9)
    assert ar16 == pytest.approx(61.6e-6, abs=0.5e-6)


def test_grouped_p2p_inside_a_node_meets_the_published_all_to_all():
    # 8 H20, nccl-tests all-to-all at 128 B: 10.6 us (DeepEP issue #303); NCCL's Simple base + one NVLink step
    assert coll.grouped_p2p_latency_s(ranks=8) == pytest.approx((8.4 + 3.4) * 1e-6)
    assert coll.grouped_p2p_latency_s(ranks=8, nodes=2) == pytest.approx(
        (8.4 + 14.0) * 1e-6 + coll.NCCL_NET_STEP_EXCESS_S)
    # a caller's latency is taken whole
    assert coll.grouped_p2p_latency_s(ranks=8, latency_s=3e-5) == pytest.approx(3e-5)


def test_large_buffers_run_simple_at_the_full_bus():
    size = 2.0**30
    t = coll.all_gather_seconds(total_bytes=size, ranks=8, bus_bytes_per_s=BUS)
    wire = coll.all_gather_wire_seconds(total_bytes=size, ranks=8, bus_bytes_per_s=BUS)
    assert t == pytest.approx(wire + 32.2e-6)
    assert coll.reduce_scatter_seconds(total_bytes=size, ranks=8, bus_bytes_per_s=BUS) == t


@pytest.mark.parametrize("collective", ["all_gather", "reduce_scatter", "all_reduce"])
def test_the_tuned_time_grows_with_bytes_ranks_and_nodes(collective):
    f = coll.nccl_collective_seconds
    kw = dict(collective=collective, bus_bytes_per_s=BUS)
    sizes = [2.0**k for k in range(3, 32, 2)]
    times = [f(total_bytes=s, ranks=8, nodes=1, **kw) for s in sizes]
    assert times == sorted(times)
    assert f(total_bytes=1024, ranks=16, nodes=2, **kw) > f(total_bytes=1024, ranks=16, nodes=1, **kw)
    assert f(total_bytes=1024, ranks=64, nodes=8, **kw) > f(total_bytes=1024, ranks=16, nodes=2, **kw)
    assert f(total_bytes=1024, ranks=1, nodes=1, **kw) == 0.0
    assert f(total_bytes=0.0, ranks=8, nodes=1, **kw) == 0.0


def test_all_gather_without_a_latency_is_the_tuner_and_the_count_exchange_follows():
    kw = dict(total_bytes=8.0 * 128 * 16, ranks=16, bus_bytes_per_s=BUS)
    assert coll.all_gather_seconds(nodes=2, **kw) == coll.nccl_collective_seconds(collective="all_gather", nodes=2,
                                                                                  **kw)
    assert mt.count_exchange_seconds(ep=16, experts=128, bus_bytes_per_s=BUS, nodes=2) == pytest.approx(
        coll.all_gather_seconds(nodes=2, **kw))


def test_group_nodes():
    assert coll.group_nodes(ranks=8, ranks_per_node=8) == 1
    assert coll.group_nodes(ranks=16, ranks_per_node=8) == 2
    assert coll.group_nodes(ranks=4, ranks_per_node=1) == 4
    assert coll.group_nodes(ranks=64, ranks_per_node=72) == 1


def test_data_parallel_reduction_pays_the_network_steps():
    kw = dict(grad_bytes=1e6, weight_bytes=5e5, ranks=16, bus_bytes_per_s=80e9, backward_s=0.0, micro_steps=1,
              zero_stage=0)
    assert coll.exposed_data_parallel(nodes=2, **kw).exposed_s > coll.exposed_data_parallel(nodes=1, **kw).exposed_s


def test_all_reduce_ring_rows_are_the_two_pass_ring():
    # tuning.cc ring all-reduce, 2 nodes x 8: nsteps 2(16-1) = 30, nInterSteps 2(2-1) = 2; Simple 8.4 + 28 x max(3.4,
    # 3 x 1 us net overhead) + 2 x 14 us; buffer bytes per second bus x 16 / 30
    ar = {(c.algorithm, c.protocol): c for c in coll.nccl_all_reduce_choices(ranks=16, nodes=2, bus_bytes_per_s=BUS)}
    assert set(ar) == {(a, p) for a in ("tree", "ring") for p in ("ll", "ll128", "simple")}
    assert ar["ring", "simple"].latency_s == pytest.approx((8.4 + 28 * 3.4 + 2 * 14.0) * 1e-6)
    assert ar["ring", "simple"].alg_bytes_per_s == pytest.approx(BUS * 16 / 30)
    # the all-gather is one pass of the same ring: half the wire time of the all-reduce
    ag = {c.protocol: c for c in coll.nccl_ring_choices(ranks=16, nodes=2, bus_bytes_per_s=BUS)}
    for proto in ("ll", "ll128", "simple"):
        assert ar["ring", proto].alg_bytes_per_s == pytest.approx(ag[proto].alg_bytes_per_s / 2)
    # the tree rows: 2 x ((8 - 1) NVLink hops + log2 2 network hops), Simple
    assert ar["tree", "simple"].latency_s == pytest.approx((8.4 + 2 * (7 * 4.0 + 1 * 14.0)) * 1e-6)
