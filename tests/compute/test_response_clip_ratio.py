"""A published share of responses cut at the cap (``rollout.response_clip_ratio``) sets the mean of the default
exponential shape (``compute.response_lengths.clip_ratio_response_mean``) where no mean is published."""

from __future__ import annotations

from math import exp, log

import pytest

from trainfit.compute.response_lengths import _solve_theta, clip_ratio_response_mean
from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.plan.rl_common import response_mean
from trainfit.spec.card import load_card_dict


def test_the_mean_of_the_exponential_whose_share_at_the_cap_is_the_ratio():
    # 55 % at 8,192: theta = 8,191 / -ln 0.55 = 13,700.9; mean = 1 + theta x 0.45 = 6,166.4
    m = clip_ratio_response_mean(response_len_max=8192, clip_ratio=0.55)
    assert m == pytest.approx(1 + 8191 / -log(0.55) * 0.45) == pytest.approx(6166.4, abs=0.1)
    # the planner's exponential at that mean cuts the same share: exp(-(max - 1) / theta(mean))
    theta = _solve_theta(m - 1, 8191)
    assert exp(-8191 / theta) == pytest.approx(0.55, rel=1e-6)


@pytest.mark.parametrize("ratio", [0.0, 1.0, -0.1])
def test_a_ratio_outside_the_open_unit_interval_is_refused(ratio):
    with pytest.raises(CardError, match="response_clip_ratio"):
        clip_ratio_response_mean(response_len_max=8192, clip_ratio=ratio)


def _card(**rollout):
    return {"model": "Qwen/Qwen3-8B", "method": "grpo", "preset": "verl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "rollout": {"tensor_parallel": 2, "prompts_per_step": 16, "num_generations": 4, "prompt_len": 256,
                        "response_len": 2048, **rollout}}


def test_the_plan_takes_the_ratios_mean():
    card = load_card_dict(_card(response_clip_ratio=0.3))
    assert response_mean(card) == pytest.approx(clip_ratio_response_mean(response_len_max=2048, clip_ratio=0.3))
    plan = make_plan(card)
    assert any("rollout.response_clip_ratio" in a for a in plan.assumptions)
    # a higher share at the cap plans more tokens a step and a longer generation
    low = make_plan(load_card_dict(_card(response_clip_ratio=0.05)))
    gen = {p.name: p.seconds for p in plan.time.phases}["generation"]
    assert plan.tokens_per_step > low.tokens_per_step
    assert gen > {p.name: p.seconds for p in low.time.phases}["generation"]


@pytest.mark.parametrize("extra", [{"response_len_mean": 900}, {"length_profile": "cot"},
                                   {"response_len_shape": "uniform"}, {"response_clip_ratio": 1.0}])
def test_the_card_refuses_it_where_the_length_is_otherwise_set_or_it_is_no_share(extra):
    with pytest.raises(CardError, match="response_clip_ratio"):
        load_card_dict(_card(**{"response_clip_ratio": 0.3, **extra}))


def test_the_card_refuses_a_one_token_cap_next_to_a_ratio_in_one_line():
    with pytest.raises(CardError) as err:
        load_card_dict(_card(response_clip_ratio=0.5, response_len=1))
    assert "rollout.response_len: 1 with rollout.response_clip_ratio 0.5; allowed: >= 2" in str(err.value)
    assert "\n" not in str(err.value).strip()


def test_the_refusal_names_the_profile_and_shape_it_cannot_take():
    with pytest.raises(CardError) as err:
        load_card_dict(_card(response_clip_ratio=0.3, length_profile="cot"))
    assert "length_profile 'cot'" in str(err.value) and "None" not in str(err.value)
