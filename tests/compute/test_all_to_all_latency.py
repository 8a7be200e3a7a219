"""NCCL's all-to-all is grouped point-to-point (all peers at once), not a ring: its latency, not its bandwidth."""

from trainfit.compute import collectives as coll

LAT = 30e-6


def test_64_rank_all_to_all_latency_is_below_the_ring():
    # NCCL's tuner constants: one grouped p2p round per 32 ranks against the ring's 63 NVLink steps
    p2p = coll.grouped_p2p_latency_s(ranks=64)
    ring = min(c.latency_s for c in coll.nccl_ring_choices(ranks=64, nodes=1, bus_bytes_per_s=400e9))
    assert p2p < ring
    # 64 ranks over 32 p2p channels: two sequential batches per channel
    assert coll.grouped_p2p_rounds(ranks=64) == 2
    assert abs(p2p - (8.4 + 2 * 3.4) * 1e-6) < 1e-12
    # an empty all-to-all pays nothing; a tiny one about the grouped latency, not the ring's 63 steps
    tiny = coll.all_to_all_seconds(total_bytes=64.0, ranks=64, bus_bytes_per_s=400e9)
    assert abs(tiny - p2p) < 1e-9
    # a caller's latency is taken whole
    assert coll.grouped_p2p_latency_s(ranks=64, latency_s=LAT) == LAT


def test_rounds_grow_with_ranks_past_the_channels():
    assert coll.grouped_p2p_rounds(ranks=2) == 1
    assert coll.grouped_p2p_rounds(ranks=8) == 1
    assert coll.grouped_p2p_rounds(ranks=32) == 1
    assert coll.grouped_p2p_rounds(ranks=33) == 2
    assert coll.grouped_p2p_rounds(ranks=256) == 8
    assert coll.grouped_p2p_latency_s(ranks=1, latency_s=LAT) == 0.0


def test_bandwidth_term_unchanged():
    for ranks in (2, 8, 64, 256):
        size, bus = 256e6, 350e9
        t = coll.all_to_all_seconds(total_bytes=size, ranks=ranks, bus_bytes_per_s=bus, latency_s=LAT)
        wire = (ranks - 1) / ranks * size / bus
        assert abs(t - coll.grouped_p2p_latency_s(ranks=ranks, latency_s=LAT) - wire) < 1e-12
        assert abs(wire - coll.all_gather_wire_seconds(total_bytes=size, ranks=ranks, bus_bytes_per_s=bus)) < 1e-15


def test_all_gather_stays_a_ring():
    # NCCL's all-gather is a collective algorithm (ring), not grouped p2p: 63 steps against 2 rounds
    t = coll.all_gather_seconds(total_bytes=64.0, ranks=64, bus_bytes_per_s=400e9)
    assert t > 2 * coll.grouped_p2p_latency_s(ranks=64)
