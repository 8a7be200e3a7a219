"""The weight sync's broadcasts and per-call latencies priced with NCCL's tuner constants (``collectives.nccl_broadcast``:
tuning.cc's base and per-step latencies, one step per link of the ring's fill), checked by hand and against published
small-message nccl-tests rows (data for checking, not fitted)."""

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute import collectives as coll
from trainfit.compute import rates as rates_mod
from trainfit.compute import sync
from trainfit.compute.rates import default_rates

PCIE = coll.IntraLink.PCIE
H100 = default_rates(resolve_gpu("h100-sxm"))


def _lat(choices):
    return {c.protocol: c.latency_s for c in choices}


def test_broadcast_latencies_by_hand():
    # 2 ranks: base + one step (tuning.cc's sameChannels price and the fill agree)
    assert _lat(coll.nccl_broadcast_choices(ranks=2, nodes=1, bus_bytes_per_s=4e9, intra_link=PCIE)) == pytest.approx(
        {"ll": (6.6 + 1.0) * 1e-6, "simple": (8.4 + 5.7) * 1e-6})
    # 8 NVLink ranks: the first chunk crosses 7 links
    assert _lat(coll.nccl_broadcast_choices(ranks=8, nodes=1, bus_bytes_per_s=360e9)) == pytest.approx(
        {"ll": (6.6 + 7 * 0.6) * 1e-6, "ll128": (14.0 + 7 * 1.9) * 1e-6, "simple": (8.4 + 7 * 3.4) * 1e-6})
    # 2 nodes x 8: 14 intra steps at the net overhead's floor, one network step with the measured excess
    lat = _lat(coll.nccl_broadcast_choices(ranks=16, nodes=2, bus_bytes_per_s=40e9))
    assert lat["simple"] == pytest.approx((8.4 + 14 * 3.4 + 14.0) * 1e-6 + coll.NCCL_NET_STEP_EXCESS_S)


def test_broadcast_bandwidth_is_the_bus():
    # nsteps = nRanks: the algorithm bandwidth is the bus bandwidth (Simple), half of it for LL
    by = {c.protocol: c.alg_bytes_per_s for c in coll.nccl_broadcast_choices(ranks=8, nodes=1, bus_bytes_per_s=360e9)}
    assert by["simple"] == pytest.approx(360e9)
    assert by["ll"] == pytest.approx(min(180e9, coll.NCCL_LL_MAX_BUS_BYTES_PER_S[1]))
    big = coll.broadcast_seconds(total_bytes=16e9, ranks=8, bus_bytes_per_s=200e9)
    assert big == pytest.approx(16e9 / 200e9 + (8.4 + 7 * 3.4) * 1e-6)
    assert coll.broadcast_seconds(total_bytes=16e9, ranks=8, bus_bytes_per_s=200e9, latency_s=1e-5) == pytest.approx(
        1e-5 + 0.08)
    assert coll.nccl_broadcast(total_bytes=8, ranks=1, nodes=1, bus_bytes_per_s=1e9) is None


def test_small_buffers_against_published_pcie_rows():
    # 2 x RTX 2080 Ti without P2P (SHM): broadcast 11.3-12 us, reduce 9.8-10.4 us, all_reduce 11.6-13 us
    # (Anthony-Hoo/Anthony-Hoo.github.io posts/AutoDL_Multi-GPU_Interconnection_Test.md @37e805e8): the tuner's
    # constants read 7.6 and 8.6 us, 2-4 us (one launch) under them; neither is above the measurement
    bc = coll.broadcast_seconds(total_bytes=8, ranks=2, bus_bytes_per_s=4e9, intra_link=PCIE)
    assert 0.6 * 11.3e-6 < bc < 11.3e-6
    assert 0.7 * 9.8e-6 < bc < 9.8e-6
    ar = coll.all_reduce_seconds(total_bytes=8, ranks=2, bus_bytes_per_s=4e9, intra_link=PCIE)
    assert 0.6 * 11.6e-6 < ar < 11.6e-6
    # 2 x RTX 4090 without P2P, alltoall 11.3-11.9 us (tinygrad/open-gpu-kernel-modules issue #17)
    assert 11.0e-6 < coll.all_to_all_seconds(total_bytes=8, ranks=2, bus_bytes_per_s=4e9) < 12.5e-6


def test_nvlink_rows():
    # 2 A100 on NVLink all-reduce 32 B: 10.1 us (NVIDIA/nccl issue #583); 8 H20 all-reduce 128 B: 15.5 us (DeepEP #303)
    assert 7e-6 < coll.all_reduce_seconds(total_bytes=32, ranks=2, bus_bytes_per_s=200e9) < 10.1e-6
    assert 12e-6 < coll.all_reduce_seconds(total_bytes=128, ranks=8, bus_bytes_per_s=360e9) < 17e-6


def test_unsourced_constants_are_gone():
    assert not hasattr(rates_mod, "COLLECTIVE_LATENCY_S")
    assert not hasattr(rates_mod, "COLLECTIVE_HOP_LATENCY_S")
    assert not hasattr(H100, "collective_latency_s")
    assert not hasattr(coll, "ring_latency_s")


def _refit(**kw):
    base = {"mechanism": sync.SyncMechanism.NCCL_BROADCAST, "weight_bytes": 16e9, "num_tensors": 400,
            "train_shards": 1, "tp": 8, "engines": 2, "rates": H100, "inter_node": True, "gpus_per_node": 8,
            "bucket_bytes": None, "s_per_tensor": 0.0}
    return sync.weight_sync_seconds(**{**base, **kw})


def test_refit_broadcast_pays_the_fill_over_every_rank_in_the_group():
    # one broadcast per tensor from trainer rank 0 to 16 engine ranks on 2 nodes, or with 16 trainer ranks in the
    # communicator (verl's fully-async per-parameter group, NeMo RL's split refit): 32 ranks on 4 nodes
    alone, group = _refit(), _refit(trainer_group_ranks=16)
    bus = coll.ring_bus_bytes_per_s(rates=H100, crosses_nodes=True, nic_bytes_per_s=sync.DEFAULT_INTER_NODE_BYTES_PER_S)
    lat = {r: coll.nccl_broadcast(total_bytes=16e9 / 400, ranks=r, nodes=n, bus_bytes_per_s=bus).latency_s
           for r, n in ((17, 3), (32, 4))}
    assert group.transfer_s - alone.transfer_s == pytest.approx(400 * (lat[32] - lat[17]))
    assert lat[32] > lat[17] > 0


def test_checkpoint_engine_bucket_latency_is_the_broadcast_of_its_group():
    kw = {"weight_bytes": 16e9, "num_tensors": 400, "tp": 8, "gpus_per_node": 8, "rates": H100, "bucket_bytes": 1e9,
          "h2d_bytes_per_s": 25e9}
    one, two = sync.checkpoint_engine_seconds(ranks=8, **kw), sync.checkpoint_engine_seconds(ranks=16, **kw)
    assert one.total_s > 0 and two.total_s > 0
    b8 = coll.nccl_broadcast(total_bytes=1e9, ranks=8, nodes=1, bus_bytes_per_s=H100.intra_node_bus_bytes_per_s)
    assert b8.latency_s == pytest.approx((8.4 + 7 * 3.4) * 1e-6)
