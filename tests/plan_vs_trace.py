"""The grid check shared by the plan-vs-trace tests (``tests/trace/test_*grid.py``): the plan's allocated peak within
a tolerance of the fake-tensor trace's, and the plan's largest phase the trace's peak phase."""

from __future__ import annotations


def assert_plan_matches_trace(case, plan, traced, *, tolerance: float) -> float:
    """``case``: a ``trainfit.accuracy.grid.GridCase``; ``plan``: its ``make_plan``; ``traced``: its ``trace_step``.
    Returns the peak's relative error (planned / traced - 1)."""
    planned = {p.phase.value: p.tensor_bytes for p in case.planned_phases(plan)}
    measured = {p.name: p.peak_bytes for p in traced.phases}
    err = (max(planned[k] for k in measured) - traced.peak_bytes) / traced.peak_bytes
    detail = {k: (round(planned[k] / 2**20, 2), round(measured[k] / 2**20, 2)) for k in measured}
    print(f"{case.name}: peak error {err:+.3%}")
    assert abs(err) <= tolerance, f"peak error {err:+.2%}; per phase MiB (plan, trace): {detail}"
    assert max(measured, key=lambda k: planned[k]) == traced.peak_phase, detail
    return err
