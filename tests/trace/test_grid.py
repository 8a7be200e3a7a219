"""trainfit plan vs the fake-tensor trace on the grid: allocated peak within 2%, same peak phase."""

import pytest
from plan_vs_trace import assert_plan_matches_trace

from trainfit.accuracy.grid import GRID, SLOW_GRID, SLOW_TP_GRID, TP_GRID
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

pytest.importorskip("torch")
pytest.importorskip("peft")

from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402

TOLERANCE = 0.02


@pytest.mark.trace
@pytest.mark.parametrize("case", GRID, ids=[c.name for c in GRID])
def test_plan_matches_trace(case):
    plan = make_plan(load_card_dict(case.card()))
    traced = trace_step(TraceRequest(**case.trace_kwargs()))
    assert_plan_matches_trace(case, plan, traced, tolerance=TOLERANCE)


def test_grid_covers_the_required_axes():
    assert len(GRID) >= 24
    assert len({c.arch for c in GRID}) >= 3
    assert {c.scope for c in GRID} >= {"full", "lora"}
    assert {c.attention for c in GRID} == {"sdpa", "eager"}
    assert {c.ckpt for c in GRID} == {True, False}
    assert {c.world_size for c in GRID} == {1, 8}
    assert {c.seq_len for c in GRID} <= {512, 2048} and {c.micro_batch_size for c in GRID} <= {1, 4}


@pytest.mark.trace
@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW_GRID, ids=[c.name for c in SLOW_GRID])
def test_plan_matches_trace_full_size(case):
    test_plan_matches_trace(case)


@pytest.mark.trace
@pytest.mark.parametrize("case", TP_GRID, ids=[c.name for c in TP_GRID])
def test_model_parallel_plan_matches_trace(case):
    """Tensor (+ sequence) parallel ranks (alone and inside FSDP2) and one pipeline stage under 1F1B."""
    test_plan_matches_trace(case)


@pytest.mark.trace
@pytest.mark.parametrize("case", SLOW_TP_GRID, ids=[c.name for c in SLOW_TP_GRID])
def test_tensor_parallel_full_size(case):
    """Qwen3-8B and Llama-3.1-70B under TP (extrapolated from 4 and 5 layers: ~3 s each)."""
    test_plan_matches_trace(case)
