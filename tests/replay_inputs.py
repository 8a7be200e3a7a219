"""Shared by the allocation-replay tests (tests/unit/test_alloc_sequence.py, tests/memory/test_stream_replay*.py,
tests/memory/test_zero_stream_replay.py, the loss tests of tests/memory); importable because pytest puts tests/ on
sys.path for its conftest."""

from __future__ import annotations

from typing import Any

import pytest

from trainfit.plan import make_plan, overheads


def planned_replay(card: Any, replay: str) -> tuple[Any, dict[str, Any]]:
    """(``make_plan(card)``, the arguments the planner passed to ``overheads.<replay>``, with ``shape``: the
    step's ``SequenceShape`` as the planner generates it); ``{}`` when it was not called."""
    seen: dict[str, Any] = {}
    orig = getattr(overheads, replay)

    def spy(terms, **kw):
        seen.update(terms=terms, **kw)
        return orig(terms, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(overheads, replay, spy)
        plan = make_plan(card)
    if seen:
        seen["shape"] = overheads.card_sequence_shape(seen["terms"], spec=seen["spec"], card=seen["card"])
    return plan, seen


def recorded_plan(card: Any) -> tuple[Any, Any]:
    """(``make_plan(card)``, the planner's last ``alloc_sequence`` record: its terms, shape, workspace, allocator)."""
    from trainfit.memory import alloc_sequence

    with alloc_sequence.recording() as made:
        plan = make_plan(card)
    return plan, made[-1]


def replay_gap(plan: Any, rec: Any) -> tuple[int, int]:
    """(the replayed allocation sequence's peak allocated bytes, the plan's largest phase allocated bytes)."""
    from trainfit.memory import alloc_sequence

    seq = alloc_sequence.step_sequence(rec.terms, rec.shape, workspace=rec.workspace)
    return (alloc_sequence.replay(seq, expandable=rec.expandable).peak_allocated,
            max(p.allocated for p in plan.phases))
