"""Megatron-Core's fp32 gradient buffer (``grad_reduce_in_fp32``, forced by Megatron-LM with bf16): the data-parallel
reduce-scatter (distributed optimizer) or all-reduce (DDP) moves the buffer as it is, 4 B per gradient, while the
distributed optimizer's parameter all-gather moves the bf16 weights (2 B). By hand with the ring formulas of
``compute.collectives`` (nccl-tests PERFORMANCE.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.compute import collectives as coll

N = 4.0e9  # parameters on one tensor-parallel rank (GPT-32B at TP 8)
RANKS, BUS, LAT = 48, 40e9, 3e-5


def _ring(total_bytes: float, *, ranks: int = RANKS, passes: int = 1) -> float:
    """latency + hop latency per ring step + passes x (n-1)/n x S / bus."""
    return LAT + passes * (ranks - 1) / ranks * total_bytes / BUS


def test_distributed_optimizer_reduce_scatters_four_bytes_and_gathers_two():
    got = coll.exposed_data_parallel(grad_bytes=4 * N, weight_bytes=2 * N, ranks=RANKS, bus_bytes_per_s=BUS,
                                     latency_s=LAT, backward_s=0.0, micro_steps=4, zero_stage=1)
    rs, ag = _ring(4 * N), _ring(2 * N)
    assert got.total_s == pytest.approx(rs + ag, rel=1e-12)
    assert got.exposed_s == pytest.approx(rs + ag, rel=1e-12)  # nothing beside it
    # 16 GB of fp32 gradients over 48 ranks at 40 GB/s: 47/48 x 0.4 s = 0.392 s, twice the bf16 buffer's 0.196 s
    assert rs == pytest.approx(0.392, abs=5e-4)
    assert rs - ag == pytest.approx((RANKS - 1) / RANKS * 2 * N / BUS, rel=1e-12)


def test_ddp_all_reduces_the_fp32_buffer():
    got = coll.exposed_data_parallel(grad_bytes=4 * N, weight_bytes=2 * N, ranks=RANKS, bus_bytes_per_s=BUS,
                                     latency_s=LAT, backward_s=0.0, micro_steps=1, zero_stage=0)
    assert got.total_s == pytest.approx(_ring(4 * N, passes=2), rel=1e-12)


@settings(max_examples=100, deadline=None)
@given(n=st.floats(1e6, 1e11), ranks=st.integers(2, 1024), backward=st.floats(0.0, 5.0))
def test_fp32_gradients_never_cost_less_and_add_exactly_the_extra_bytes(n, ranks, backward):
    kw = {"weight_bytes": 2 * n, "ranks": ranks, "bus_bytes_per_s": BUS, "latency_s": LAT, "backward_s": backward,
          "micro_steps": 2, "zero_stage": 1}
    bf16 = coll.exposed_data_parallel(grad_bytes=2 * n, **kw)
    fp32 = coll.exposed_data_parallel(grad_bytes=4 * n, **kw)
    assert fp32.total_s - bf16.total_s == pytest.approx((ranks - 1) / ranks * 2 * n / BUS, rel=1e-9)
    assert fp32.exposed_s >= bf16.exposed_s - 1e-12
