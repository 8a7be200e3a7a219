"""Ulysses all-to-all, ring context-parallel steps and pipeline sends take NCCL's latencies (tuning.cc), not the
fixed 30 us (+ 8 us per ring step) form, unless a caller passes a ``latency_s``."""

from __future__ import annotations

import pytest

from trainfit.compute import collectives as coll
from trainfit.compute.model_parallel import model_parallel_comm, p2p_send_latency_s

BUS = 1e11


def _comm(**kw):
    args = dict(tokens=4096, hidden=4096, q_dim=4096, kv_dim=1024, layers=2, attention_layers=2, moe_layers=0,
                top_k=0, tp=1, cp=1, ulysses=False, ep=1, pp=1, recompute=False, tp_bus_bytes_per_s=BUS,
                cp_bus_bytes_per_s=BUS, ep_bus_bytes_per_s=BUS, pp_bytes_per_s=BUS) | kw
    return model_parallel_comm(**args)


def test_p2p_send_is_one_nccl_round():
    # tuning.cc ring/Simple: 8.4 us base + one NVLink step 3.4 us; across nodes the network step 14 us plus the
    # measured excess per network step
    assert p2p_send_latency_s(crosses_nodes=False) == pytest.approx(8.4e-6 + 3.4e-6)
    assert p2p_send_latency_s(crosses_nodes=True) == pytest.approx(8.4e-6 + 14e-6 + coll.NCCL_NET_STEP_EXCESS_S)


def test_pipeline_send_takes_the_p2p_latency_of_its_link():
    send = 4096 * 4096 * 2 / BUS
    assert _comm(pp=4).pipeline_p2p_s == pytest.approx(send + p2p_send_latency_s(crosses_nodes=False))
    assert _comm(pp=4, pp_nodes=4).pipeline_p2p_s == pytest.approx(send + p2p_send_latency_s(crosses_nodes=True))
    # a given latency keeps the fixed form
    assert _comm(pp=4, latency_s=30e-6).pipeline_p2p_s == pytest.approx(send + 30e-6)


def test_ring_context_parallel_step_is_one_send():
    block = 2 * 4096 * 1024 * 2
    fwd = 3 * (block / BUS + p2p_send_latency_s(crosses_nodes=False))
    assert _comm(cp=4).context_s == pytest.approx(2 * (fwd + 2 * fwd))  # 2 layers, forward + backward (2x)
    assert _comm(cp=4, cp_nodes=2).context_s > _comm(cp=4).context_s


def test_ulysses_all_to_all_is_grouped_p2p_over_its_nodes():
    qkv = 4096 * (2 * 4096 + 2 * 1024) * 2
    for nodes in (1, 2):
        one = coll.all_to_all_seconds(total_bytes=qkv, ranks=8, bus_bytes_per_s=BUS, nodes=nodes)
        assert _comm(cp=8, ulysses=True, cp_nodes=nodes).context_s == pytest.approx(2 * 2 * one)
    assert one - coll.all_gather_wire_seconds(total_bytes=qkv, ranks=8, bus_bytes_per_s=BUS) == pytest.approx(
        coll.grouped_p2p_latency_s(ranks=8, nodes=2))
