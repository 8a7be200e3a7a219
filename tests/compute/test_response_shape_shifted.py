"""The shifted truncated exponential (``response_lengths``' ``shifted_exponential``): its floor read from the
fit-half length log's shortest responses, checked on the held-out runs' batch longest and clip ratio
(``benchmarks/data/rl_response_length_steps.json``)."""

from __future__ import annotations

import json
import statistics
from math import exp
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.compute import response_lengths as rl
from trainfit.errors import CardError
from trainfit.spec.enums import ResponseShape

REPO = Path(__file__).resolve().parents[2]
DATA = json.loads((REPO / "benchmarks" / "data" / "rl_response_length_steps.json").read_text())
SHIFTED = ResponseShape.SHIFTED_EXPONENTIAL
EXPO = ResponseShape.EXPONENTIAL


def _expected_longest_and_clip(kind, *, mean: float, cap: int, n: int, grid: int = 400) -> tuple[float, float]:
    """Expected longest of ``n`` draws and the share cut at the cap, from the module's own floor and θ."""
    _, _, theta = rl._shape(kind, cap, mean)
    floor = rl._floor_tokens(kind, mean)
    c = cap - floor
    h = c / grid
    longest = floor + h * sum(1 - (1 - exp(-(i + 0.5) * h / theta)) ** n for i in range(grid))
    return longest, exp(-c / theta)


def _sampled(run, every: int = 40):
    return run["steps"][:: max(1, len(run["steps"]) // every)]


def _run_stats(run, kind):
    cap, n = run["response_len_max"], run["sequences_per_step"]
    pairs = [_expected_longest_and_clip(kind, mean=s[1], cap=cap, n=n) for s in _sampled(run)]
    return statistics.fmean(p[0] for p in pairs), statistics.fmean(p[1] for p in pairs)


@settings(max_examples=60, deadline=None)
@given(cap=st.integers(16, 32_768), frac=st.floats(0.02, 0.98), sequences=st.integers(1, 6000))
def test_shifted_keeps_the_mean_the_cap_and_the_floor(cap, frac, sequences):
    mean = 1 + frac * (cap - 1)
    groups = rl.response_length_groups(shape=SHIFTED, response_len_max=cap, response_len_mean=mean,
                                       sequences=sequences)
    assert sum(share for _, share in groups) == pytest.approx(1.0)
    assert sum(length * share for length, share in groups) == pytest.approx(mean, rel=1e-6)
    assert max(length for length, _ in groups) <= cap + 1e-9
    if len(groups) > 1:
        assert min(length for length, _ in groups) >= rl.SHORTEST_SHARE_OF_MEAN * mean - 1e-9


def test_shifted_tail_is_lighter_than_the_exponential_at_the_same_mean():
    kw = dict(response_len_max=1024, response_len_mean=170, sequences=512)
    shifted = rl.response_length_groups(shape=SHIFTED, **kw)
    expo = rl.response_length_groups(shape=EXPO, **kw)
    assert max(g[0] for g in shifted) < 0.8 * max(g[0] for g in expo)
    assert min(g[0] for g in shifted) > 70 > 10 > min(g[0] for g in expo)


def test_bad_shape_names_the_choices():
    with pytest.raises(CardError, match="shifted_exponential"):
        rl.response_length_groups(shape="lognormal", response_len_max=512, response_len_mean=100, sequences=9)


def test_the_floor_is_the_fit_half_runs_shortest_over_mean():
    half0 = [r for r in DATA["runs"] if r["half"] == 0]
    assert [r["id"] for r in half0] == ["playverl-grpo-qwen25-05b-h100-8g"]
    ratio = statistics.fmean(s[3] / s[1] for r in half0 for s in r["steps"])
    assert rl.SHORTEST_SHARE_OF_MEAN == pytest.approx(ratio, abs=5e-4)
    # every run's shortest is far above the exponential's ~1 token: 16-44 % of its mean
    for r in DATA["runs"]:
        assert 0.15 < statistics.fmean(s[3] / s[1] for s in r["steps"]) < 0.45


def test_shifted_clip_ratio_is_closer_than_the_exponential_on_the_capped_runs():
    for rid in ("playverl-grpo-qwen25-05b-h100-8g", "playverl-ppo-qwen25-05b-h100-8g"):  # fit, held out
        run = next(r for r in DATA["runs"] if r["id"] == rid)
        logged = run["summary"]["mean_of_clip_ratio"]
        shifted, expo = _run_stats(run, SHIFTED)[1], _run_stats(run, EXPO)[1]
        assert logged < shifted < expo
        assert abs(shifted - logged) < 0.7 * abs(expo - logged)


def test_shifted_batch_longest_on_the_held_out_runs():
    held = [r for r in DATA["runs"] if r["half"] == 1 and r["summary"]["share_of_steps_max_at_cap"] < 0.95]
    assert len(held) == 4
    shifted, expo = [], []
    for r in held:
        logged = r["summary"]["mean_of_max"]
        shifted.append(_run_stats(r, SHIFTED)[0] / logged - 1)
        expo.append(_run_stats(r, EXPO)[0] / logged - 1)
    assert max(abs(e) for e in shifted) < 0.2  # -17, -4, +15, +13 %
    assert max(abs(e) for e in expo) > 0.5  # the MI300X GRPO run: +57 %
    assert statistics.fmean(abs(e) for e in shifted) < statistics.fmean(abs(e) for e in expo)
