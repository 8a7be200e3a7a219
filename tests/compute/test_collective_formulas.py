"""The ring collectives of ``compute.collectives``, each written once: latency, bandwidth parts and their sums.

By-hand values (nccl-tests ``PERFORMANCE.md`` ring formulas, module docstring) and the identities that tie the
collectives together; the sync, model-parallel and hybrid-engine terms that reuse them are checked against the
same parts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.compute import collectives as coll
from trainfit.compute.hybrid_engine import zero3_gather_seconds

KW = {"bus_bytes_per_s": 200e9, "latency_s": 30e-6}


def test_a_callers_latency_is_taken_whole():
    # a fixed latency (a caller's measurement) has no per-step term added: the unsourced 8 us per ring step is gone
    assert coll.all_gather_seconds(total_bytes=16e9, ranks=8, **KW) == pytest.approx(30e-6 + 0.07)
    assert coll.all_reduce_seconds(total_bytes=16e9, ranks=8, **KW) == pytest.approx(30e-6 + 0.14)


def test_wire_terms_by_hand():
    # 8 ranks, 16 GB: an all-gather receives 7/8 of it, an all-reduce twice that, at 200 GB/s
    assert coll.all_gather_wire_seconds(total_bytes=16e9, ranks=8, bus_bytes_per_s=200e9) == pytest.approx(0.07)
    assert coll.all_reduce_wire_seconds(total_bytes=16e9, ranks=8, bus_bytes_per_s=200e9) == pytest.approx(0.14)


def test_broadcast_and_all_to_all_by_hand():
    # a broadcast sends every byte over each link once; an all-to-all sends the (n-1)/n that leaves the rank
    assert coll.broadcast_seconds(total_bytes=16e9, ranks=8, **KW) == pytest.approx(
        30e-6 + 0.08)
    # all peers at once (NCCL grouped send / receive): one p2p round for 8 ranks, not 7 ring steps
    assert coll.all_to_all_seconds(total_bytes=16e9, ranks=8, **KW) == pytest.approx(
        30e-6 + 0.07)
    for fn in (coll.broadcast_seconds, coll.all_to_all_seconds, coll.all_gather_seconds, coll.all_reduce_seconds):
        assert fn(total_bytes=16e9, ranks=1, **KW) == 0.0
        assert fn(total_bytes=0.0, ranks=8, **KW) == 0.0


@settings(max_examples=60, deadline=None)
@given(total_bytes=st.floats(1.0, 1e12), ranks=st.integers(2, 1024), bus=st.floats(1e9, 1e12),
       latency=st.floats(0.0, 1e-3))
def test_collectives_are_sums_of_their_parts(total_bytes, ranks, bus, latency):
    kw = {"total_bytes": total_bytes, "ranks": ranks, "bus_bytes_per_s": bus}
    wire = coll.all_gather_wire_seconds(**kw)
    lat = latency
    assert coll.all_gather_seconds(**kw, latency_s=latency) == lat + wire
    assert coll.reduce_scatter_seconds(**kw, latency_s=latency) == lat + wire
    assert coll.all_to_all_seconds(**kw, latency_s=latency) == coll.grouped_p2p_latency_s(
        ranks=ranks, latency_s=latency) + wire
    assert coll.all_reduce_seconds(**kw, latency_s=latency) == (
        latency + coll.all_reduce_wire_seconds(**kw))
    # an all-reduce is a reduce-scatter then an all-gather under one launch latency
    rs_ag = 2 * coll.all_gather_seconds(**kw, latency_s=latency) - latency
    assert coll.all_reduce_seconds(**kw, latency_s=latency) == pytest.approx(rs_ag, rel=1e-12, abs=1e-15)
    # a broadcast moves n/(n-1) of an all-gather's bytes per link
    assert coll.broadcast_seconds(**kw, latency_s=latency) - lat == pytest.approx(wire * ranks / (ranks - 1))


def test_hybrid_engine_gather_is_one_ring_all_gather_per_partitioned_tensor():
    # DeepSpeed-Chat's ZeRO-3 gather: one all_gather_into_tensor per partitioned tensor, each a ring all-gather
    # as collectives.all_gather_seconds times it with NCCL's tuner (1 GB each: ring/Simple, 8.4 us + 7 x 3.4 us)
    t = zero3_gather_seconds(weight_bytes=26e9, ranks=8, bus_bytes_per_s=240e9, collectives=25)
    shared = 25 * coll.all_gather_seconds(total_bytes=26e9 / 25, ranks=8, bus_bytes_per_s=240e9)
    assert t == pytest.approx(shared)
    wire = coll.all_gather_wire_seconds(total_bytes=26e9, ranks=8, bus_bytes_per_s=240e9)
    assert t - wire == pytest.approx(25 * (8.4e-6 + 7 * 3.4e-6))
    # across two nodes each gather pays the network step (and its measured excess) in place of one NVLink step
    two = zero3_gather_seconds(weight_bytes=26e9, ranks=16, bus_bytes_per_s=40e9, collectives=25, nodes=2)
    assert two == pytest.approx(25 * coll.all_gather_seconds(total_bytes=26e9 / 25, ranks=16, bus_bytes_per_s=40e9,
                                                             nodes=2))
