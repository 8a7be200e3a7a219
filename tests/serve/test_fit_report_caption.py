"""The fit report's caption states the ranking the rows are in (``objective.rank_key`` under the result's goal), and
the facts line says each (GPU kind, card count) has a row. Before, every report read "Each GPU type stops at the
fewest cards that fit ... Ranked: fitting first, then fewest cards, shortest step, lowest cost" while the rows were
ranked by cost per step (step time without prices) and listed every card count."""

import re

import pytest

from trainfit.compute.cost import parse_price
from trainfit.fit_search import fit_start
from trainfit.objective import Goal, Objective
from trainfit.report.html import fit_html, fit_rows
from trainfit.search import fit

CARD = {"model": "Qwen/Qwen3-0.6B", "method": "sft", "scope": "lora"}
PRICES = {"rtx4090": "1.98CNY", "h100-sxm": "16CNY"}


def _fit(objective, priced):
    data, pinned = fit_start(CARD, card_file=True)
    prices = {g: parse_price(p) for g, p in PRICES.items()} if priced else None
    return fit(data, gpus=["rtx4090", "h100-sxm"], max_gpus=2, prices=prices, pinned=pinned,
               goal=Goal(objective=objective))


def _caption(html):
    [cap] = re.findall(r"<caption>(.*?)</caption>", html)
    return cap


def _cost(r):
    return r["cost_per_hour"] * r["step_seconds"] / 3600


@pytest.mark.parametrize("objective, priced, says, key", [
    (Objective.COST, True, "by cost per step (then step time, fewest cards)", lambda r: (_cost(r), r["step_seconds"])),
    (Objective.COST, False, "by step time (no row has a price", lambda r: (r["step_seconds"], r["gpus"])),
    (Objective.TIME, True, "by step time (then cost, fewest cards)", lambda r: (r["step_seconds"], _cost(r))),
    (Objective.CARDS, True, "by fewest cards (then cost per step, step time)", lambda r: (r["gpus"], _cost(r))),
])
def test_caption_states_the_order_the_rows_are_in(objective, priced, says, key):
    result = _fit(objective, priced)
    html = fit_html(result)
    cap = _caption(html)
    assert says in cap, cap
    assert "fewest cards that fit" not in html and "fitting first, then fewest cards" not in cap
    rows = fit_rows(result)
    fitting = [r for r in rows if r["fits"]]
    assert len(fitting) >= 3 and fitting == rows[:len(fitting)]  # rows that fit first, as the caption says
    assert [key(r) for r in fitting] == sorted(key(r) for r in fitting)
    # every card count of each kind is a row, as the facts line says
    assert {(r["gpu"], r["gpus"]) for r in rows} == {(g, n) for g in ("rtx4090", "h100-sxm") for n in (1, 2)}
    assert "One row per GPU type and card count searched" in html
    # the rows in the table are in that order
    assert re.findall(r'<tr class="(?:good|bad)"><td class="num">(\d+)</td>', html) == [str(i) for i in
                                                                                      range(1, len(rows) + 1)]
