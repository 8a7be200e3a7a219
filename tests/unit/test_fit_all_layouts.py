"""`fit` returns, per (GPU kind, count), the best plan over every model-parallel layout the card leaves
open: the same row as planning every layout's every knob setting and ranking them all (the reference
below, built from the same enumerators: ``parallel_layouts``, ``sft_combos``, ``layout_combos``), and a
limit (--budget) never finds a plan that ranks above the unlimited search's."""

import pytest

from trainfit.errors import TrainfitError

from trainfit.cli.common import default_card_dict, set_path
from trainfit.compute.cost import parse_price
from trainfit.objective import Goal, Objective, annotate, rank_key
from trainfit.search import fit

PINNED = frozenset({"model", "method", "scope", "loss.chunked", "precision.optimizer", "parallel.offload"})


def _card():
    d = default_card_dict()
    set_path(d, "scope", "full")
    set_path(d, "loss.chunked", True)
    set_path(d, "precision.optimizer", "adamw")
    set_path(d, "parallel.offload", "none")
    return d


def _fit(goal, max_gpus=2):
    return fit(_card(), gpus=["h100-sxm"], max_gpus=max_gpus, prices={"h100-sxm": parse_price("2.0USD")},
               pinned=PINNED, goal=goal, workers=1)


def _exhaustive(goal, max_gpus=2):
    """Every layout x knob setting of each count planned (allocator replay on), best row per count."""
    from trainfit import fit_search as fs

    base = _card()
    base.setdefault("hardware", {}).pop("price_per_gpu_hour", None)
    gb = fs._global_batch(base, None)
    best = {}
    for count in fs.fit_counts(base, max_gpus=max_gpus, pinned=PINNED):
        data = fs.deep_copy(base)
        data["hardware"].update(fs._hardware("h100-sxm", count, parse_price("2.0USD")))
        jobs = []
        for lay in fs.parallel_layouts(data, count, pinned=PINNED):
            batches = fs._pairs(base, gb, count // lay.degree, pinned=PINNED)
            if batches:
                jobs += [(0, c) for c in fs.layout_combos(lay, fs.sft_combos(count, pinned=PINNED, batches=batches))]
        rows, _, _, _ = fs._job_rows([data], jobs, {}, None, floor=False)
        rows, _ = annotate(rows, goal)
        best[count] = min(rows, key=lambda r: rank_key(r, goal))
    return best


@pytest.mark.parametrize("objective", [Objective.COST, Objective.TIME])
def test_fit_rows_are_the_exhaustive_search_rows(objective):
    goal = Goal(steps=1000, objective=objective)
    got = {r.gpus: r for r in _fit(goal).rows}
    want = _exhaustive(goal)
    assert set(got) == set(want)
    for count, r in want.items():
        assert got[count].knobs == r.knobs | {"hardware.gpu": "h100-sxm", "gpus": count} or \
            rank_key(got[count], goal)[:-1] == rank_key(r, goal)[:-1]
        assert got[count].step_seconds == pytest.approx(r.step_seconds, rel=1e-12)
        assert got[count].fits == r.fits


def test_a_layout_beyond_the_first_that_fits_is_found():
    """2 x H100, Qwen3-8B full: the data-parallel layout fits, and tensor parallel 2 is faster; the
    search that stopped at the first fitting tier returned the data-parallel plan."""
    goal = Goal(steps=1000, objective=Objective.TIME)
    row = next(r for r in _fit(goal).rows if r.gpus == 2)
    assert dict(row.parallel)["tensor_parallel"] == 2


def test_a_budget_never_ranks_a_better_plan_than_no_limits():
    free = {r.gpus: r for r in _fit(Goal(steps=1000)).rows}
    for budget in (0.5, 1.0, 2.0):
        limited = {r.gpus: r for r in _fit(Goal(steps=1000, budget=budget, budget_currency="USD")).rows}
        for count, r in limited.items():
            if r.fits and r.within_limits:
                assert free[count].cost_per_run <= r.cost_per_run * (1 + 1e-9)


def _grid_cases():
    """A deterministic share of every layout x knob setting on 1-8 H100s and RTX 4090s (DPO and a paged
    optimizer beside SFT)."""
    from trainfit import fit_search as fs

    cases = []
    for method, extra in (("sft", {}), ("dpo", {}), ("sft", {"precision.optimizer": "paged_adamw_8bit"})):
        base = default_card_dict()
        set_path(base, "method", method)
        pinned = frozenset(extra)
        for gpu in ("h100-sxm", "rtx4090"):
            for count in (1, 2, 4, 8):
                data = fs.deep_copy(base)
                data["hardware"].update(fs._hardware(gpu, count, parse_price("2.0USD")))
                gb = fs._global_batch(base, None)
                for lay in fs.parallel_layouts(data, count, pinned=pinned):
                    batches = fs._pairs(base, gb, count // lay.degree, pinned=pinned)
                    combos = fs.layout_combos(lay, fs.sft_combos(count, pinned=pinned, batches=batches))
                    cases += [(data, c | extra) for c in combos[::53]]
    return cases


def test_the_screened_step_time_is_the_plans():
    """``screen_time_row`` (the step time without the memory walk) is exactly the full plan's step
    time, tokens and price on a grid of layouts and knobs, and None only where it says it may not be;
    the time-first search's exactness rests on this."""
    from trainfit.fit_search import screen_time_row
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict
    from trainfit.spec.dotted import updated

    cases = _grid_cases()
    timed = paged = 0
    for data, knobs in cases:
        try:
            plan = make_plan(load_card_dict(updated(data, knobs)))
        except (TrainfitError, ValueError):
            continue
        row = screen_time_row(data, knobs, None)
        if "paged" in str(knobs.get("precision.optimizer", "")):
            assert row is None
            paged += 1
            continue
        assert row is not None, knobs
        assert row.step_seconds == plan.step_seconds, knobs
        assert row.tokens_per_step == plan.tokens_per_step
        assert row.cost_per_hour == plan.cost_per_hour
        assert row.gpus == plan.card.world_size
        timed += 1
    assert timed >= 100 and paged >= 5


def test_annotate_chooses_the_ranking_currency_from_the_currencies_given():
    """The time-first search annotates a few rows at a time with the currencies of every job."""
    from trainfit.search import Row

    def row(cur):
        return Row(knobs={}, fits=True, gpus=1, gpu="rtx4090", peak_device_bytes=0.0, headroom_bytes=0.0,
                   peak_phase="", step_seconds=1.0, cost_per_hour=1.0, currency=cur, tokens_per_step=1.0)

    goal = Goal(steps=10)
    alone, _ = annotate([row("USD")], goal)
    assert alone[0].rank_currency == "USD"
    many, _ = annotate([row("USD")], goal, currencies=["CNY", "CNY", "USD"])
    assert many[0].rank_currency == "CNY" and many[0].rank_cost is None  # no rate: ranked apart

