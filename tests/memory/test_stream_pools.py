"""FSDP's side-stream pools: the bound on reserved beyond allocated, and its place in a plan."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trainfit.memory.stream_pools import PoolPoint, capped_reserved_bytes, stream_pool_bytes
from trainfit.plan import make_plan, overheads
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Phase

G, R = 300.0, 200.0


def test_pools_full_at_the_peak_keep_nothing_idle():
    # the compute stream peaks where both pools are at their high-water marks
    pts = [PoolPoint(allocated_bytes=1000, gathered_bytes=G, gradient_bytes=R),
           PoolPoint(allocated_bytes=600, gathered_bytes=0, gradient_bytes=R)]
    assert stream_pool_bytes(points=pts, gathered_pool_bytes=G, gradient_pool_bytes=R) == 0.0


def test_optimizer_step_peak_leaves_the_gathered_pool_idle():
    # every unit is resharded at the step: the all-gather pool's blocks are cached but unused
    pts = [PoolPoint(allocated_bytes=900, gathered_bytes=G, gradient_bytes=R),
           PoolPoint(allocated_bytes=1000, gathered_bytes=0, gradient_bytes=R)]
    assert stream_pool_bytes(points=pts, gathered_pool_bytes=G, gradient_pool_bytes=R) == G


def test_forward_peak_leaves_the_freed_gradients_idle():
    # zero_grad(set_to_none) freed the sharded gradients into the reduce-scatter pool
    pts = [PoolPoint(allocated_bytes=1000, gathered_bytes=G, gradient_bytes=0),
           PoolPoint(allocated_bytes=700, gathered_bytes=0, gradient_bytes=R)]
    assert stream_pool_bytes(points=pts, gathered_pool_bytes=G, gradient_pool_bytes=R) == R


def test_compute_peak_elsewhere_than_the_joint_peak():
    # joint peak 1000 (pools full); compute-stream peak 950 - 50 = 900 at a point with idle pools
    pts = [PoolPoint(allocated_bytes=1000, gathered_bytes=G, gradient_bytes=R),
           PoolPoint(allocated_bytes=950, gathered_bytes=50, gradient_bytes=0)]
    assert stream_pool_bytes(points=pts, gathered_pool_bytes=G, gradient_pool_bytes=R) == 900 + G + R - 1000


def test_bad_input():
    with pytest.raises(ValueError):
        stream_pool_bytes(points=[], gathered_pool_bytes=-1, gradient_pool_bytes=0)
    assert stream_pool_bytes(points=[], gathered_pool_bytes=G, gradient_pool_bytes=R) == 0.0


_pt = st.builds(lambda a, g, r: PoolPoint(allocated_bytes=a + g + r, gathered_bytes=g, gradient_bytes=r),
                st.floats(0, 1e11), st.floats(0, 1e10), st.floats(0, 1e10))


@given(st.lists(_pt, min_size=1, max_size=6), st.floats(0, 1e10), st.floats(0, 1e10), st.floats(0, 1e10))
def test_bound_invariants(pts, g_pool, r_pool, more):
    g_pool = max(g_pool, max(p.gathered_bytes for p in pts))
    r_pool = max(r_pool, max(p.gradient_bytes for p in pts))
    extra = stream_pool_bytes(points=pts, gathered_pool_bytes=g_pool, gradient_pool_bytes=r_pool)
    # float rounding: the pools come out of differences of allocated totals up to 1e11 B, so the slack is relative
    # to the largest operand, not to the pools (a 1e11-B point leaves ~1e-5 B of rounding in a 4.5e5-B pool)
    slack = 1e-12 * max(g_pool + r_pool, max(p.allocated_bytes for p in pts))
    assert 0.0 <= extra <= g_pool + r_pool + slack
    # a larger pool high-water mark never keeps less idle
    assert stream_pool_bytes(points=pts, gathered_pool_bytes=g_pool + more, gradient_pool_bytes=r_pool) >= extra


@given(st.floats(0, 1e11), st.floats(0, 1e11), st.floats(0, 1e11))
def test_cap(reserved, extra, room):
    out = capped_reserved_bytes(reserved_bytes=reserved, extra_bytes=extra, room_bytes=room)
    assert reserved <= out <= reserved + extra
    assert out <= max(room, reserved)


def _card(strategy: str, offload: str = "none") -> dict:
    return {"model": "Qwen/Qwen2.5-0.5B", "scope": "full", "hardware": {"gpu": "h200", "gpus_per_node": 4},
            "parallel": {"strategy": strategy, "gradient_checkpointing": True, "offload": offload},
            "batch": {"micro_batch_size": 1, "seq_len": 512}}


def _step(plan):
    return [p for g in plan.groups for p in g.phases if p.phase is not Phase.LOAD]


def test_fsdp_plan_without_the_replay_carries_the_pools_beside_the_share(monkeypatch):
    """Where the per-stream replay does not run (``fitted_reserved``), the fitted share and the pools'
    bound stand."""
    with overheads.fitted_reserved():
        with_pools = _step(make_plan(load_card_dict(_card("fsdp"))))
        monkeypatch.setattr(overheads, "stream_pool_bytes", lambda **_: 0.0)
        without = _step(make_plan(load_card_dict(_card("fsdp"))))
    extra = {p.overhead.stream_pools for p in with_pools}
    assert len(extra) == 1 and extra.pop() > 0  # one step-wide figure
    for a, b in zip(with_pools, without):
        assert not a.overhead.replayed
        assert a.allocated == b.allocated
        assert a.overhead.fragmentation == b.overhead.fragmentation  # the fitted share stays beside
        assert a.reserved == pytest.approx(b.reserved + a.overhead.stream_pools)
        assert a.device == pytest.approx(b.device + a.overhead.stream_pools)
    # the gradient pool is the sharded gradients: 494,032,768 bf16 parameters over 4 ranks, as the
    # fake-process-group trace of this card measures at its optimizer step (247,016,384 B)
    step = next(p for p in with_pools if p.phase is Phase.OPTIMIZER_STEP)
    assert step.components["gradients"] == 247_016_384


def test_fsdp_plan_takes_reserved_from_the_per_stream_replay():
    plan = make_plan(load_card_dict(_card("fsdp")))
    step = _step(plan)
    assert all(p.overhead.replayed for p in step)
    # the side streams' idle blocks are their own line beside rounding and fragmentation
    assert {p.overhead.stream_pools for p in step} != {0.0}
    for p in step:
        o = p.overhead
        assert p.reserved == pytest.approx(p.allocated + o.rounding + o.fragmentation + o.stream_pools)
        assert min(o.rounding, o.fragmentation, o.stream_pools) >= 0
    high = max(p.allocated for p in step)
    assert {p.reserved for p in step} == {step[0].reserved} and step[0].reserved > high  # one step-wide figure
    with overheads.replay_floor() as floor:  # fit's screen: reserved is the allocated high-water
        floored = _step(make_plan(load_card_dict(_card("fsdp"))))
    assert floor and all(p.reserved == max(high, p.allocated) for p in floored)


@pytest.mark.parametrize("strategy,offload", [("single", "none"), ("ddp", "none"), ("fsdp", "params_and_optimizer")])
def test_no_side_stream_pools_elsewhere(strategy, offload):
    card = _card(strategy, offload)
    if strategy == "single":
        card["hardware"]["gpus_per_node"] = 1
    assert all(p.overhead.stream_pools == 0.0 for p in _step(make_plan(load_card_dict(card))))
