"""Cost: the seed's rental prices as presets, golden per-hour figures, a price never without a currency."""

import pytest

from trainfit.compute.cost import (
    EXCLUDES,
    PRESETS,
    Price,
    cost_per_hour,
    parse_price,
    price_preset,
    run_cost,
    steps_for_tokens,
)
from trainfit.errors import CardError


def test_presets_are_the_seed_prices():
    # seed 000, section 八: 专业版 RTX 4090 24GB 1.98 元/卡时, 青春版 1.24 元/卡时
    assert price_preset("rtx4090-pro") == PRESETS["rtx4090-pro"]
    assert (PRESETS["rtx4090-pro"].per_gpu_hour, PRESETS["rtx4090-pro"].currency) == (1.98, "CNY")
    assert (PRESETS["rtx4090-youth"].per_gpu_hour, PRESETS["rtx4090-youth"].currency) == (1.24, "CNY")


@pytest.mark.parametrize(("gpus", "expected"), [(4, 7.92), (8, 15.84)])
def test_golden_cost_per_hour_from_the_seed(gpus, expected):
    # seed 000, section 八: "4 卡同时运行 7.92 元/小时", "8 卡同时运行 15.84 元/小时"
    cost = cost_per_hour(price_preset("rtx4090-pro"), gpus=gpus)
    assert cost.amount == pytest.approx(expected, abs=1e-9)
    assert cost.currency == "CNY"


def test_run_cost_is_steps_times_step_time_times_price_times_cards():
    cost = run_cost(price_preset("rtx4090-pro"), gpus=8, steps=100, step_seconds=36.0)
    assert cost.amount == pytest.approx(15.84)  # one hour on 8 cards
    assert steps_for_tokens(tokens=1_000_001, tokens_per_step=1000) == 1001


@pytest.mark.parametrize(
    ("text", "amount", "currency"),
    [("1.98CNY", 1.98, "CNY"), ("1.98 cny", 1.98, "CNY"), ("CNY 1.98", 1.98, "CNY"), ("2.49USD/h", 2.49, "USD"),
     ("1.24元", 1.24, "CNY"), ("rtx4090-youth", 1.24, "CNY")],
)
def test_parse_price(text, amount, currency):
    p = parse_price(text)
    assert (p.per_gpu_hour, p.currency) == (amount, currency)


def test_price_without_currency_is_refused_with_one_line():
    with pytest.raises(CardError, match="no currency") as err:
        parse_price("1.98")
    assert "\n" not in str(err.value)
    with pytest.raises(CardError, match="no currency"):
        Price(per_gpu_hour=1.98, currency="")
    with pytest.raises(CardError):
        parse_price("cheap")
    with pytest.raises(CardError):
        price_preset("rtx4090-free")


def test_excludes_in_the_seed_words():
    for words in ("存储", "失败重跑", "单卡价格不代表任意多卡组合当前可创建"):
        assert words in EXCLUDES
    for words in ("storage", "failed reruns", "card count"):
        assert words in EXCLUDES
