"""Default response lengths when a card gives no mean: the model's length profile, clipped at the maximum."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trainfit.compute.response_lengths import (
    COT,
    LONG_COT,
    _solve_theta,
    default_response_mean,
    profile_for,
    response_length_groups,
)
from trainfit.errors import CardError


@pytest.mark.parametrize(("name", "profile"), [
    ("Qwen/Qwen2.5-Math-7B", COT),
    ("meta-llama/Llama-3.1-8B-Instruct", COT),
    ("Qwen/Qwen3-30B-A3B-Base", COT),
    ("Qwen/Qwen3-4B-Instruct-2507", COT),
    ("inline config", COT),
    (None, COT),
    ("Qwen/Qwen3-32B", LONG_COT),
    ("Qwen/Qwen3-235B-A22B", LONG_COT),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", LONG_COT),
    ("agentica-org/DeepScaleR-1.5B-Preview", LONG_COT),
    ("Qwen/QwQ-32B", LONG_COT),
])
def test_profile_for_names(name, profile):
    assert profile_for(name) is profile


def test_profiles_reproduce_their_published_statistics():
    """Each profile's scale is the median over distinct published runs of the scale that gives the run's
    published mean at its maximum (the numbers quoted in the module docstring)."""
    cot = {"llama-8b": [(1019, 4096), (1123, 4096), (1128, 4096), (1066, 4096), (1107, 4096)],
           "dsv3-omi2": [(744, 1536), (738, 1536), (761, 1536), (697, 1536), (711, 1536)],
           "dsv3-dapo": [(974, 1536)], "dsv3-verl": [(1960, 9632)]}
    long_ = {"235b": [(5700, 8192), (5707, 8192), (5713, 8192), (5709, 8192)],
             "30b": [(3196, 4096), (3201, 4096), (3198, 4096), (3206, 4096), (3154, 4096), (3158, 4096)],
             "32b": [(3251, 4096), (3252, 4096), (3253, 4096), (3258, 4096)]}
    for groups, profile in ((cot, COT), (long_, LONG_COT)):
        per_run = [statistics.median(_solve_theta(m - 1, mx - 1) for m, mx in v) for v in groups.values()]
        assert statistics.median(per_run) == pytest.approx(profile.natural_mean_tokens, abs=1.0)
    # the default reproduces the runs it came from to within their spread
    assert default_response_mean(response_len_max=4096, profile=LONG_COT) == pytest.approx(3200, rel=0.03)
    assert default_response_mean(response_len_max=4096, profile=COT) == pytest.approx(1070, rel=0.25)


def test_default_mean_is_the_truncated_exponential_mean():
    """The default mean is what response_length_groups averages to for the profile's scale."""
    for mx in (64, 1024, 8192, 32768):
        mean = default_response_mean(response_len_max=mx)
        groups = response_length_groups(shape=None, response_len_max=mx, response_len_mean=mean, sequences=512)
        assert sum(length * share for length, share in groups) == pytest.approx(mean, rel=1e-6)


@given(st.integers(1, 200_000), st.integers(1, 200_000))
def test_default_mean_grows_with_the_max_and_stays_below_it_and_the_scale(a, b):
    lo, hi = sorted((a, b))
    m_lo, m_hi = default_response_mean(response_len_max=lo), default_response_mean(response_len_max=hi)
    assert 1 <= m_lo <= m_hi <= COT.natural_mean_tokens + 1
    assert m_lo <= lo


def test_default_mean_refuses_a_bad_max():
    with pytest.raises(CardError, match="response_len_max"):
        default_response_mean(response_len_max=0)


def _rl_card(model: str, response_len: int, mean: int | None = None) -> dict:
    ro = {"placement": "colocate", "prompts_per_step": 32, "num_generations": 8, "prompt_len": 256,
          "response_len": response_len, "mini_batches": 1}
    if mean is not None:
        ro["response_len_mean"] = mean
    return {"model": model, "method": "grpo", "scope": "full", "preset": "verl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "fsdp"}, "batch": {"micro_batch_size": 4}, "rollout": ro}


def test_rl_plan_without_a_mean_uses_the_profile_and_says_so():
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    plan = make_plan(load_card_dict(_rl_card("Qwen/Qwen2.5-0.5B", 8192)))
    mean = default_response_mean(response_len_max=8192, profile=COT)
    assert plan.tokens_per_step == pytest.approx(32 * 8 * (256 + mean))
    assert any("chain-of-thought" in a and "rollout.response_len_mean" in a for a in plan.time.assumptions)
    # the same mean given explicitly plans the same step; a longer one costs more
    given_ = make_plan(load_card_dict(_rl_card("Qwen/Qwen2.5-0.5B", 8192, round(mean))))
    assert given_.step_seconds == pytest.approx(plan.step_seconds, rel=0.02)
    longer = make_plan(load_card_dict(_rl_card("Qwen/Qwen2.5-0.5B", 8192, 4096)))
    assert longer.step_seconds > plan.step_seconds
