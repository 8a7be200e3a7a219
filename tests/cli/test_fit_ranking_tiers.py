"""`fit` ranks each (GPU kind, count) by its own time model, so a limit (--budget) must never make a
count's best plan cheaper: the search without limits already finds it.

Found by exploratory QA (fixed): model-parallel layouts were searched tier by tier and a count stopped at
the first tier where a plan fit within the limits. Qwen3-8B full SFT on 4 x H100 SXM at $2.00/GPU-hour,
1,000 steps: without limits the count's row was FSDP x4 at 0.544 s/step ($1.21 a run); with --budget
1.10USD the search reached tier 2 and returned tensor parallel 2 + sequence parallel, DDP, no
checkpointing at 0.427 s ($0.95). fit now searches every layout (fit_search._time_first: each job timed
without the memory walk, then planned in full best first), so both searches return the same plan. Since fit
compares each count's rows on one software stack (fit_search.layout_stacks: the 0.427 s tensor-parallel plan was
timed on Megatron-Core's fused kernels, the 0.544 s FSDP plan eager), that plan is FSDP on Megatron-Core without
checkpointing, AdamW, micro-batch 2, at 0.426 s ($0.95 a run)."""

import pytest

from trainfit.cli.common import default_card_dict, set_path
from trainfit.compute.cost import parse_price
from trainfit.objective import Goal
from trainfit.search import fit
from trainfit.spec.enums import Stack


def _row4(goal):
    d = default_card_dict()
    set_path(d, "scope", "full")
    res = fit(d, gpus=["h100-sxm"], max_gpus=4, prices={"h100-sxm": parse_price("2.0USD")},
              pinned=frozenset({"model", "method", "scope"}), goal=goal)
    return next(r for r in res.rows if r.gpus == 4)


@pytest.mark.slow
def test_a_budget_never_finds_a_cheaper_plan_than_no_limits():
    free = _row4(Goal(steps=1000))
    limited = _row4(Goal(steps=1000, budget=1.10, budget_currency="USD"))
    assert limited.within_limits
    assert free.cost_per_run <= limited.cost_per_run * (1 + 1e-9)
    assert dict(free.parallel)["tensor_parallel"] == 1 and free.stack is Stack.MEGATRON
    assert free.step_seconds == pytest.approx(0.426, abs=0.005)
