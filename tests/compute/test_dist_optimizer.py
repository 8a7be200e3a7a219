"""Megatron-Core's distributed optimizer: the parameter all-gather exposed after the step, or overlapped with the next
forward bucket by bucket (``overlap_param_gather``, compute.dist_optimizer)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.compute import collectives as coll
from trainfit.compute.dist_optimizer import (
    bucket_count,
    megatron_bucket_params,
    param_gather_exposed,
)


def test_megatron_default_bucket_grows_with_the_data_parallel_group():
    # max(40000000, 1000000 * dp_group.size()) (distributed_data_parallel.py)
    assert megatron_bucket_params(data_parallel=8) == 40_000_000
    assert megatron_bucket_params(data_parallel=40) == 40_000_000
    assert megatron_bucket_params(data_parallel=48) == 48_000_000
    # a 3.9B-parameter bf16 shard in 48M-parameter buckets: 81 full and one partly filled
    assert bucket_count(total_bytes=2 * 3.9e9, bucket_bytes=2 * 48_000_000) == 82
    assert bucket_count(total_bytes=2 * 48_000_000, bucket_bytes=2 * 48_000_000) == 1
    assert bucket_count(total_bytes=0, bucket_bytes=2 * 48_000_000) == 0


@settings(max_examples=200, deadline=None)
@given(a=st.floats(1e-5, 1.0), n=st.integers(1, 200), f=st.floats(0.0, 10.0))
def test_equal_buckets_expose_the_first_and_what_each_outlasts_its_forward(a, n, f):
    exposed = param_gather_exposed(gather_s=n * a, first_bucket_s=a, buckets=n, forward_s=f)
    assert exposed == pytest.approx(a + (n - 1) * max(0.0, a - f / n), rel=1e-9, abs=1e-12)
    assert a - 1e-12 <= exposed <= n * a + 1e-12


@settings(max_examples=100, deadline=None)
@given(g=st.floats(1e-4, 5.0), n=st.integers(1, 100), f1=st.floats(0.0, 5.0), f2=st.floats(0.0, 5.0))
def test_a_longer_forward_never_exposes_more(g, n, f1, f2):
    lo, hi = sorted((f1, f2))
    kw = dict(gather_s=g, first_bucket_s=g / n, buckets=n)
    assert param_gather_exposed(forward_s=hi, **kw) <= param_gather_exposed(forward_s=lo, **kw) + 1e-12


def test_no_forward_exposes_it_all_and_a_long_one_only_the_first_bucket():
    assert param_gather_exposed(gather_s=0.2, first_bucket_s=0.002, buckets=100, forward_s=0.0) == pytest.approx(0.2)
    assert param_gather_exposed(gather_s=0.2, first_bucket_s=0.002, buckets=100, forward_s=5.0) == pytest.approx(0.002)
    assert param_gather_exposed(gather_s=0.0, first_bucket_s=0.0, buckets=0, forward_s=1.0) == 0.0


def _zero1(**kw):
    base = dict(grad_bytes=8e9, weight_bytes=8e9, ranks=48, bus_bytes_per_s=40e9, latency_s=3e-5, backward_s=0.1,
                micro_steps=4, zero_stage=1)
    return coll.exposed_data_parallel(**{**base, **kw})


def test_overlap_param_gather_hides_the_all_gather_behind_the_forward():
    bucket = 48e6 * 2  # Megatron's default bucket for 48 data-parallel ranks, bf16 parameters
    off = _zero1()
    on = _zero1(overlap_param_gather=True, forward_s=0.05, gather_bucket_bytes=bucket)
    gather = coll.all_gather_seconds(total_bytes=8e9, ranks=48, bus_bytes_per_s=40e9, latency_s=3e-5)
    assert on.total_s == off.total_s  # the same bytes move
    n = -(-8e9 // bucket)
    a = coll.all_gather_seconds(total_bytes=bucket, ranks=48, bus_bytes_per_s=40e9, latency_s=3e-5)
    saved = off.exposed_s - on.exposed_s
    assert saved == pytest.approx(gather - (a + max(0.0, gather - a - 0.05 * (n - 1) / n)))
    assert 0.0 < saved < 0.05  # never more than the forward it hides behind
    # a forward longer than the gather: only the first bucket stays exposed
    long = _zero1(overlap_param_gather=True, forward_s=10.0, gather_bucket_bytes=bucket)
    assert off.exposed_s - long.exposed_s == pytest.approx(gather - a)


def test_overlap_param_gather_is_the_distributed_optimizer_only():
    for stage in (0, 2):
        assert _zero1(zero_stage=stage, overlap_param_gather=True, forward_s=1.0, gather_bucket_bytes=1e8) == \
            _zero1(zero_stage=stage)


def test_expert_buckets_join_the_chain():
    bucket = 80e6
    dense_only = _zero1(overlap_param_gather=True, forward_s=0.0, gather_bucket_bytes=bucket)
    both = _zero1(overlap_param_gather=True, forward_s=0.0, gather_bucket_bytes=bucket, expert_weight_bytes=4e9,
                  expert_grad_bytes=4e9, expert_ranks=6)
    # no forward to hide behind: all of both chains' all-gathers are exposed
    eg = coll.all_gather_seconds(total_bytes=4e9, ranks=6, bus_bytes_per_s=40e9, latency_s=3e-5)
    er = coll.reduce_scatter_seconds(total_bytes=4e9, ranks=6, bus_bytes_per_s=40e9, latency_s=3e-5)
    assert both.total_s == pytest.approx(dense_only.total_s + eg + er)
    assert both.exposed_s > dense_only.exposed_s + eg - 1e-9
