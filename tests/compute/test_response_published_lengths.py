"""A run's published share cut at the cap and batch's longest response beside its mean
(``rollout.response_clip_ratio``, ``rollout.response_len_batch_max``; verl's ``response_length/clip_ratio`` and
``response_length/max``) set the length distribution (``compute.response_lengths.fit_published_lengths``)."""

from __future__ import annotations

from math import exp

import pytest

from trainfit.compute.response_lengths import (
    fit_published_lengths,
    response_length_groups,
    slowest_engine_length_groups,
)
from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import ResponseShape


def _mean(groups):
    return sum(length * share for length, share in groups)


def test_a_share_at_the_cap_beside_the_mean_sets_the_floor_of_the_exponential():
    # verl-data's Qwen2.5-14B GSM8K + MATH GRPO-LoRA step: mean 329.753 at a 512 cap, 0.166 cut
    fit = fit_published_lengths(shape=None, response_len_max=512, response_len_mean=329.753, clip_ratio=0.166)
    assert fit.kind is ResponseShape.SHIFTED_EXPONENTIAL
    assert exp(-(512 - fit.floor_tokens) / fit.theta_tokens) == pytest.approx(0.166, rel=1e-9)
    groups = response_length_groups(shape=None, response_len_max=512, response_len_mean=329.753, sequences=320,
                                    clip_ratio=0.166)
    assert _mean(groups) == pytest.approx(329.753, rel=1e-9)
    assert sum(s for length, s in groups if length >= 512 - 1e-6) == pytest.approx(0.166, abs=1 / 64)  # 64 bins
    # the plain exponential of that mean cuts more than twice as many
    plain = response_length_groups(shape=None, response_len_max=512, response_len_mean=329.753, sequences=320)
    assert sum(s for length, s in plain if length >= 512 - 1e-6) > 0.3


def test_the_batchs_longest_ends_the_lengths_and_the_slowest_engine_waits_for_it_not_the_cap():
    # verl-data's Qwen2.5-7B GSM8K GRPO-LoRA step: 320 responses on 4 engines, mean 268.55, longest 749, none cut
    kw = dict(shape=None, response_len_max=1024, response_len_mean=268.55)
    before = slowest_engine_length_groups(sequences=80, engines=4, **kw)
    after = slowest_engine_length_groups(sequences=80, engines=4, clip_ratio=0.0, longest_tokens=749, **kw)
    assert max(length for length, _ in before) == pytest.approx(1024)
    assert max(length for length, _ in after) == pytest.approx(749)
    assert _mean(response_length_groups(sequences=80, longest_tokens=749, **kw)) == pytest.approx(268.55, rel=1e-9)


def test_a_ratio_of_zero_without_the_batchs_longest_is_refused_naming_both_fields():
    # the plain exponential of mean 300 puts 3.7 % at the 1,024 cap, against the published 0 %; the floored
    # exponential's limit as the share falls to 0 is every response at the mean: neither is a reading of the run
    with pytest.raises(CardError, match="rollout.response_clip_ratio: 0 .* needs rollout.response_len_batch_max"):
        fit_published_lengths(shape=None, response_len_max=1024, response_len_mean=300, clip_ratio=0.0)
    fit = fit_published_lengths(shape=None, response_len_max=1024, response_len_mean=300, clip_ratio=0.0,
                                longest_tokens=700)
    assert fit.cap_tokens == 700


@pytest.mark.parametrize("sequences", [80, 320, 5120])
def test_the_longest_rises_with_the_share_cut_at_the_cap_near_zero(sequences):
    # was 1,024 at a share of 0, 626 at 1e-6 and 968 at 1e-3 (320 responses): 0 is now refused alone (above)
    kw = dict(shape=None, response_len_max=1024, response_len_mean=300, sequences=sequences)
    ratios = [1e-300, 1e-100, 1e-30, 1e-12, 1e-9, 1e-6, 1e-5, 1e-4, 1e-3, 3e-3, 1e-2, 0.02, 0.037]
    longest = [response_length_groups(clip_ratio=c, **kw)[-1][0] for c in ratios]
    assert all(lo <= hi + 1e-9 for lo, hi in zip(longest, longest[1:])), longest
    assert 300 < longest[0] < longest[-1] <= 1024


@pytest.mark.parametrize("ratio", [0.9999999999999999, 0.9999999999999998, 1 - 1e-12, 1 - 1e-9, 0.999])
@pytest.mark.parametrize("mean", [2.0, 300.0, 1000.0, 1023.0])
def test_a_share_just_under_one_is_refused_in_one_line_not_divided_by_zero(ratio, mean):
    # a = (1 − c)/−ln c rounds to 1.0 at c = 0.9999999999999999: the floor's (1 − a) was a division by zero
    with pytest.raises(CardError, match=r"rollout.response_clip_ratio: .* allowed with that mean: 0 to "):
        fit_published_lengths(shape=None, response_len_max=1024, response_len_mean=mean, clip_ratio=ratio)


@pytest.mark.parametrize(("mean", "ratio", "says"), [
    (1024, 0.5, "response_len_mean 1024 is response_len (every response cut); allowed with that mean: none below 1"),
    (1024, 0.999, "allowed with that mean: none below 1"),
    (1, 0.1, "response_len_mean 1 is one token a response; allowed with that mean: 0"),
])
def test_a_share_beside_a_mean_at_the_cap_or_at_one_token_is_refused(mean, ratio, says):
    # the fixed-length shortcut used to drop the share: a mean at the cap means every response was cut
    with pytest.raises(CardError) as err:
        fit_published_lengths(shape=None, response_len_max=1024, response_len_mean=mean, clip_ratio=ratio)
    assert says in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("kw", "field"), [
    ({"clip_ratio": 0.444, "response_len_mean": 300.0}, "rollout.response_clip_ratio"),  # more than the mean allows
    ({"clip_ratio": 0.1, "longest_tokens": 700}, "rollout.response_clip_ratio"),  # cut, yet none reached the cap
    ({"longest_tokens": 200}, "rollout.response_len_batch_max"),  # below the mean
])
def test_disagreeing_published_lengths_are_refused_naming_the_field(kw, field):
    args = {"shape": None, "response_len_max": 1024, "response_len_mean": 268.55, **kw}
    with pytest.raises(CardError, match=field):
        fit_published_lengths(**args)


def _card(**rollout):
    return {"model": "Qwen/Qwen2.5-7B-Instruct", "method": "grpo", "preset": "verl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "rollout": {"tensor_parallel": 2, "prompts_per_step": 64, "num_generations": 5, "prompt_len": 512,
                        "response_len": 1024, "response_len_mean": 268, **rollout}}


def test_the_plan_generates_faster_when_the_batchs_longest_is_below_the_cap():
    gen = lambda card: {p.name: p.seconds for p in make_plan(load_card_dict(card)).time.phases}["generation"]  # noqa: E731
    assert gen(_card(response_clip_ratio=0.0, response_len_batch_max=749)) < 0.85 * gen(_card())


@pytest.mark.parametrize(("extra", "says"), [
    ({"response_clip_ratio": 0.0, "response_len_mean": None}, "rollout.response_clip_ratio: 0 (none cut) without"),
    ({"response_len_batch_max": 700, "response_clip_ratio": 0.1}, "rollout.response_len_batch_max: 700 is below"),
    ({"response_len_batch_max": 1024, "response_clip_ratio": 0.0}, "rollout.response_len_batch_max: 1024 is"),
    ({"response_len_batch_max": 2000}, "rollout.response_len_batch_max: 2000 with"),
    ({"response_len_batch_max": 700, "response_len_mean": None}, "rollout.response_len_batch_max: 700 with"),
    ({"response_clip_ratio": 0.5}, "rollout.response_clip_ratio: 0.5 is more than"),
    ({"response_clip_ratio": 0.0}, "rollout.response_clip_ratio: 0 (none cut) beside response_len_mean 268 needs"
                                   " rollout.response_len_batch_max"),
    ({"response_clip_ratio": 0.3, "response_len_mean": 1024}, "response_len_mean 1024 is response_len"),
    ({"response_clip_ratio": 0.9999999999999999, "response_len_mean": 1000},
     "rollout.response_clip_ratio: 0.9999999999999999 is more than"),
])
def test_the_card_refuses_disagreeing_published_lengths_in_one_line(extra, says):
    with pytest.raises(CardError) as err:
        load_card_dict(_card(**extra))
    assert says in str(err.value)
    assert "\n" not in str(err.value).strip()


def test_the_card_turns_an_arithmetic_error_of_the_solve_into_a_one_line_refusal(monkeypatch):
    import trainfit.compute.response_lengths as lengths

    def divide(**_):
        return 1.0 / 0.0

    monkeypatch.setattr(lengths, "fit_published_lengths", divide)
    with pytest.raises(CardError) as err:
        load_card_dict(_card(response_clip_ratio=0.2))
    assert "rollout.response_clip_ratio: 0.2 beside response_len_mean 268" in str(err.value)
    assert "\n" not in str(err.value).strip()
