"""Megatron-Core's all-gather token dispatcher (moe_token_dispatcher_type allgather, compute.moe_dispatch): every
rank's tokens gathered over the expert tensor x expert parallel ranks, the output reduce-scattered back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.compute import collectives as coll
from trainfit.compute.model_parallel import model_parallel_comm
from trainfit.compute.moe_dispatch import allgather_dispatch
from trainfit.spec.enums import MoeDispatcher

KW = dict(bus_bytes_per_s=40e9, latency_s=3e-5)


def test_the_gathered_and_reduced_buffers():
    ag = allgather_dispatch(tokens=4096, hidden=2048, experts=128, group=8, **KW)
    # rows (bf16) + the [tokens, experts] map (bool) and probabilities (bf16) of every rank
    assert ag.dispatch_bytes == 8 * 4096 * (2048 * 2 + 128 * (2 + 1))
    assert ag.combine_bytes == 8 * 4096 * 2048 * 2
    assert ag.dispatch_s == pytest.approx(coll.all_gather_seconds(total_bytes=ag.dispatch_bytes, ranks=8, **KW))
    assert ag.combine_s == pytest.approx(coll.reduce_scatter_seconds(total_bytes=ag.combine_bytes, ranks=8, **KW))
    # a router in fp64 (NeMo RL's moe_router_dtype) reduces the output in fp64
    wide = allgather_dispatch(tokens=4096, hidden=2048, experts=128, group=8, probs_dtype_bytes=8.0, **KW)
    assert wide.combine_bytes == 4 * ag.combine_bytes


def test_one_rank_moves_nothing():
    assert allgather_dispatch(tokens=4096, hidden=2048, experts=128, group=1, **KW).dispatch_s == 0.0


@settings(max_examples=100, deadline=None)
@given(g=st.integers(2, 64), t=st.floats(1.0, 1e5))
def test_every_rank_receives_every_other_ranks_tokens(g, t):
    # a ring all-gather sends (G-1)/G of the gathered buffer from each GPU: (G-1)·T rows, whatever top-k is
    ag = allgather_dispatch(tokens=t, hidden=1024, experts=64, group=g, map_bytes=0.0, probs_dtype_bytes=0.0,
                            bus_bytes_per_s=1.0, latency_s=0.0)
    assert ag.dispatch_s == pytest.approx((g - 1) * t * 1024 * 2, rel=1e-9)


def _mp(dispatcher: MoeDispatcher, **kw):
    base = dict(tokens=4096, hidden=2048, q_dim=4096, kv_dim=512, layers=48, attention_layers=48, moe_layers=48,
                top_k=8, tp=1, cp=1, ulysses=False, ep=8, pp=1, recompute=False, latency_s=3e-5,
                tp_bus_bytes_per_s=1.0, cp_bus_bytes_per_s=1.0, ep_bus_bytes_per_s=100e9, pp_bytes_per_s=1.0,
                experts=128, moe_dispatcher=dispatcher, ep_ring_bus_bytes_per_s=40e9)
    return model_parallel_comm(**{**base, **kw})


def test_model_parallel_comm_runs_the_pair_each_pass_without_a_count_exchange():
    # model_parallel_comm prices the pair with NCCL's tuner over the EP group's nodes (one rank per node by default)
    nccl = dict(bus_bytes_per_s=KW["bus_bytes_per_s"], nodes=8)
    ag = allgather_dispatch(tokens=4096, hidden=2048, experts=128, group=8, **nccl)
    got = _mp(MoeDispatcher.ALLGATHER).expert_s
    assert got == pytest.approx(2 * 48 * (ag.dispatch_s + ag.combine_s))  # forward + backward, dispatch + combine
    # expert tensor parallel widens the group: etp x ep ranks
    ag16 = allgather_dispatch(tokens=4096, hidden=2048, experts=128, group=16, **nccl)
    assert _mp(MoeDispatcher.ALLGATHER, etp=2).expert_s == pytest.approx(2 * 48 * (ag16.dispatch_s + ag16.combine_s))


def test_the_gather_moves_more_than_the_all_to_all_when_top_k_is_below_the_group():
    # top-k 2 of 8 ranks: the all-to-all sends 2 rows per token, the all-gather 7 (same link rate here)
    a2a = _mp(MoeDispatcher.ALLTOALL, top_k=2, ep_bus_bytes_per_s=40e9).expert_s
    gather = _mp(MoeDispatcher.ALLGATHER, top_k=2).expert_s
    assert gather > 2 * a2a
