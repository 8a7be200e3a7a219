"""`fit` without a run length ranks the cost objective by cost per step, not per hour: every row trains the same
global batch, so the cheapest step is the cheapest run of any length, while the cost per hour of one GPU kind only
counts cards (README: fit ranks by cost per run)."""

from __future__ import annotations

from trainfit.objective import Goal, annotate, rank_key
from trainfit.search import Row


def _row(gpus: int, step_s: float) -> Row:
    return Row(knobs={}, fits=True, gpus=gpus, gpu="rtx4090", peak_device_bytes=1.0, headroom_bytes=1.0,
               peak_phase="backward", step_seconds=step_s, cost_per_hour=2.0 * gpus, currency="CNY")


def test_without_steps_the_cheaper_step_ranks_first_not_the_fewer_cards():
    """1 card at 100 s a step costs 2 x 100 / 3600 = 0.056 CNY a step; 4 cards at 20 s cost 8 x 20 / 3600 = 0.044:
    the 4 cards are cheaper for any run length though their hour costs 4 times more."""
    goal = Goal()
    rows, warnings = annotate([_row(1, 100.0), _row(4, 20.0)], goal)
    ranked = sorted(rows, key=lambda r: rank_key(r, goal))
    assert [r.gpus for r in ranked] == [4, 1] and not warnings
    assert ranked[0].rank_cost == ranked[0].cost_per_step


def test_with_steps_the_run_cost_ranks_and_agrees():
    goal = Goal(steps=1000)
    rows, _ = annotate([_row(1, 100.0), _row(4, 20.0)], goal)
    assert [r.gpus for r in sorted(rows, key=lambda r: rank_key(r, goal))] == [4, 1]


def test_a_budget_without_steps_is_still_per_hour():
    """--budget without a run length is per hour (fit --help): 3 CNY an hour keeps the 1-card row only."""
    goal = Goal(budget=3.0, budget_currency="CNY")
    rows, _ = annotate([_row(1, 100.0), _row(4, 20.0)], goal)
    assert {r.gpus: r.within_limits for r in rows} == {1: True, 4: False}
