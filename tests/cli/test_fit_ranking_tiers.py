"""`fit` ranks each (GPU kind, count) by its own time model, so a limit (--budget) must never make a
count's best plan cheaper: the search without limits should already have found it.

Known defect (exploratory QA, not fixed): model-parallel layouts are searched tier by tier and a count
stops at the first tier where a plan fits within the limits (fit_search's module docstring: "a larger
replica only costs data parallelism"). Qwen3-8B full SFT on 4 x H100 SXM at $2.00/GPU-hour, 1,000 steps:
without limits the count's row is FSDP x4 at 0.544 s/step ($1.21 a run); with --budget 1.10USD the search
reaches tier 2 and returns tensor parallel 2 + sequence parallel, DDP, no checkpointing at 0.427 s ($0.95)
-- faster and cheaper by the planner's own numbers, found only because a limit was set.

On the README's `fit --gpu rtx4090,a100-40gb,h100-sxm --price rtx4090=rtx4090-pro --set scope=full --steps 1000`,
forcing every tier (a budget no plan keeps) finds a plan >2% faster at 16 of the fitting (kind, count) rows, e.g.
8 x RTX 4090 5.49 s -> 2.28 s (TP2 x PP4, DDP), 4 x A100 40GB 1.46 s -> 1.12 s (TP2, zero1); it evaluates 18,864
plans in 85 s against 3,744 in 9 s, so the fix is a search-budget decision, not a one-line change."""

import pytest

from trainfit.cli.common import default_card_dict, set_path
from trainfit.compute.cost import parse_price
from trainfit.objective import Goal
from trainfit.search import fit


def _row4(goal):
    d = default_card_dict()
    set_path(d, "scope", "full")
    res = fit(d, gpus=["h100-sxm"], max_gpus=4, prices={"h100-sxm": parse_price("2.0USD")},
              pinned=frozenset({"model", "method", "scope"}), goal=goal)
    return next(r for r in res.rows if r.gpus == 4)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="fit stops at the first model-parallel tier that fits: a dearer plan is"
                   " ranked where a cheaper one exists in the next tier (see module docstring)")
def test_a_budget_never_finds_a_cheaper_plan_than_no_limits():
    free = _row4(Goal(steps=1000))
    limited = _row4(Goal(steps=1000, budget=1.10, budget_currency="USD"))
    assert limited.within_limits
    assert free.cost_per_run <= limited.cost_per_run * (1 + 1e-9)
