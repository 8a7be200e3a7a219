"""Expert-parallel all-to-all (same-node share on NVLink, sequence-parallel shard) and NCCL's all-reduce tuner."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute import collectives as coll
from trainfit.compute.model_parallel import model_parallel_comm
from trainfit.compute.rates import default_rates

H100 = default_rates(resolve_gpu("h100-sxm"))
NIC = 25e9


def test_all_to_all_inside_one_node_runs_at_the_intra_node_bus():
    assert coll.all_to_all_bus_bytes_per_s(rates=H100, ranks=8, ranks_in_node=8, nic_bytes_per_s=NIC) == \
        H100.intra_node_bus_bytes_per_s


def test_all_to_all_across_two_nodes_sends_only_the_other_nodes_half_through_the_nic():
    # EP 16 over two 8-GPU nodes: 7/16 of the buffer stays on NVLink, 8/16 leaves through the GPU's NIC
    bus = coll.all_to_all_bus_bytes_per_s(rates=H100, ranks=16, ranks_in_node=8, nic_bytes_per_s=NIC)
    nic = NIC * coll.NIC_EFFICIENCY
    assert bus == pytest.approx((15 / 16) / (8 / 16 / nic))
    # the old pricing (every byte at the NIC rate) is slower by (n-1)/(n-l)
    assert bus / nic == pytest.approx(15 / 8)


@given(n=st.integers(2, 512), local=st.integers(1, 8))
def test_all_to_all_rate_between_nic_and_nvlink(n, local):
    bus = coll.all_to_all_bus_bytes_per_s(rates=H100, ranks=n, ranks_in_node=local, nic_bytes_per_s=NIC)
    assert NIC * coll.NIC_EFFICIENCY - 1e-3 <= bus <= H100.intra_node_bus_bytes_per_s + 1e-3
    if local < 8 and n > local:  # more of the group in one node: never slower
        more = coll.all_to_all_bus_bytes_per_s(rates=H100, ranks=n, ranks_in_node=local + 1, nic_bytes_per_s=NIC)
        assert more >= bus - 1e-3


def _ep(tp: int) -> float:
    return model_parallel_comm(
        tokens=4096, hidden=4096, q_dim=4096, kv_dim=512, layers=4, attention_layers=4, moe_layers=4, top_k=8,
        tp=tp, cp=1, ulysses=False, ep=8, pp=1, recompute=False, latency_s=0.0, tp_bus_bytes_per_s=1e11,
        cp_bus_bytes_per_s=1e11, ep_bus_bytes_per_s=1e11, pp_bytes_per_s=1e11).expert_s


def test_expert_all_to_all_carries_the_sequence_parallel_shard_with_tensor_parallel():
    # 1/tp of the tokens per rank; the per-collective latencies (NCCL's, grouped send / receive) stay
    fixed = 2 * 2 * 4 * coll.grouped_p2p_latency_s(ranks=8, nodes=8)
    assert _ep(2) - fixed == pytest.approx((_ep(1) - fixed) / 2)


def test_nccl_small_all_reduce_inside_a_node_is_ring_ll():
    # 8 H100s, 512 KiB: ring LL, 6.6 us + 14 steps x 0.6 us (tuning.cc baseLatencies / hwLatencies[NVLINK])
    c = coll.nccl_all_reduce(total_bytes=512 * 1024, ranks=8, nodes=1, bus_bytes_per_s=H100.intra_node_bus_bytes_per_s)
    assert (c.algorithm, c.protocol) == ("ring", "ll")
    assert c.latency_s == pytest.approx(15.0e-6)


def test_nccl_small_all_reduce_across_four_nodes_is_a_tree():
    # 32 GPUs over 4 nodes: tree LL latency 6.8 + 2*(7*0.6 + 2*5.0) = 35.2 us, far under the 62-step ring
    choices = {(c.algorithm, c.protocol): c for c in coll.nccl_all_reduce_choices(ranks=32, nodes=4, bus_bytes_per_s=160e9)}
    assert choices[("tree", "ll")].latency_s == pytest.approx(35.2e-6)
    best = coll.nccl_all_reduce(total_bytes=64 * 1024, ranks=32, nodes=4, bus_bytes_per_s=160e9)
    assert best.algorithm == "tree"


def test_nccl_large_all_reduce_is_ring_simple_at_the_bus_rate():
    bus = H100.intra_node_bus_bytes_per_s
    c = coll.nccl_all_reduce(total_bytes=2**30, ranks=8, nodes=1, bus_bytes_per_s=bus)
    assert (c.algorithm, c.protocol) == ("ring", "simple")
    assert c.alg_bytes_per_s == pytest.approx(bus * 8 / 14)


@settings(max_examples=50)
@given(size=st.floats(1.0, 2.0**31), n=st.sampled_from([2, 4, 8, 16, 32, 64]))
def test_nccl_all_reduce_is_the_fastest_choice(size, n):
    nodes = max(1, n // 8)
    t = coll.nccl_all_reduce_seconds(total_bytes=size, ranks=n, nodes=nodes, bus_bytes_per_s=160e9)
    assert t == min(c.seconds(size) for c in coll.nccl_all_reduce_choices(ranks=n, nodes=nodes, bus_bytes_per_s=160e9))
    assert t > 0
    assert coll.nccl_all_reduce_seconds(total_bytes=size, ranks=1, nodes=1, bus_bytes_per_s=160e9) == 0.0
