"""The far tail of RL response lengths at batch scale, from the per-step statistics verl logged
(``benchmarks/data/rl_response_length_steps.json``: six published runs, every step's mean, longest, shortest and
clipped share of the whole batch).

What the logs show, and why the plan keeps its truncated exponential (``compute.response_lengths``) and one engine's
longest (``tests/compute/test_batch_longest_evidence.py``):

* The body of the distribution is concentrated. The one half-0 run (``int(sha1(id).hexdigest(), 16) % 2 == 0``:
  play-verl Qwen2.5-0.5B GRPO, cap 192 at ~1.4x its mean) clips 17 % of its responses; a truncated gamma reproduces
  that step by step with shape ``k`` ~ 10 (the exponential, ``k`` = 1, clips 52 %).
* That body does not give the batch's longest. On the held-out runs whose longest is not pinned at the cap, the
  expected longest of the whole batch under the half-0 gamma falls 30-56 % short of the logged mean of
  ``response_length/max``; the exponential's overshoots it by 1-58 % (median 13.5 %). The longest is set by a far tail
  that the body does not carry: runaway responses that reach the cap (28-91 % of steps hit it).
* That tail is not one shape. The per-response chance of reaching the cap implied by the share of steps that hit it
  (``1 - (1 - share)^(1/n)``) is 3.5-55x below the truncated exponential's mass at the cap, run by run (same cap,
  same batch of 5,120: 10x for one run, 8x for the other), so no single shape parameter or rescale set from the
  card's mean and maximum reproduces it.

So no shape fitted on half 0 improves the batch's longest on the held-out half, and with the batch's longest in the
plan (the slowest engine holds it) every variant tried (the exponential; the half-0 gamma) moved the held-out
generation rows' median further (26.2 % -> 30-33 %): the plan is unchanged and the strict xfail stays.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import statistics
from math import exp, lgamma, log
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = json.loads((REPO / "benchmarks" / "data" / "rl_response_length_steps.json").read_text())
RUNS = {r["id"]: r for r in DATA["runs"]}
_spec = importlib.util.spec_from_file_location("rl_response_length_steps",
                                               REPO / "benchmarks" / "rl_response_length_steps.py")
SCRIPT = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(SCRIPT)


def _gammp(a: float, x: float) -> float:
    """Regularized lower incomplete gamma P(a, x) (series below a + 1, continued fraction above)."""
    if x <= 0:
        return 0.0
    front = exp(-x + a * log(x) - lgamma(a))
    if x < a + 1:
        term = total = 1.0 / a
        ap = a
        while abs(term) > abs(total) * 1e-13:
            ap += 1
            term *= x / ap
            total += term
        return total * front
    b, c, d = x + 1 - a, 1e300, 1 / (x + 1 - a)
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2
        d = an * d + b or 1e-300
        c = b + an / c or 1e-300
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-13:
            break
    return 1 - front * h


def _theta(k: float, mean: float, cap: float) -> float:
    """Scale of Gamma(k, θ) whose draws cut at ``cap`` average ``mean``."""
    lo, hi = log(mean / k) - 5, log(mean / k) + 40
    for _ in range(80):
        mid = (lo + hi) / 2
        t = exp(mid)
        if k * t * _gammp(k + 1, cap / t) + cap * (1 - _gammp(k, cap / t)) < mean:
            lo = mid
        else:
            hi = mid
    return exp((lo + hi) / 2)


def _longest_and_cap_mass(*, k: float, mean: float, cap: int, n: int, grid: int = 200) -> tuple[float, float]:
    """Expected longest of ``n`` draws of ``1 + min(Gamma(k, θ), cap − 1)`` with mean ``mean`` (k = 1: the plan's
    truncated exponential), and the mass at the cap: ``E[max] = 1 + ∫₀^{cap−1} (1 − F(x)ⁿ) dx``, the point mass at
    the cap counted by ``F`` staying below 1 there."""
    c, m = cap - 1, mean - 1
    if m >= 0.999 * c:
        return float(cap), 1.0
    t = _theta(k, m, c)
    h = c / grid
    return 1 + h * sum(1 - _gammp(k, (i + 0.5) * h / t) ** n for i in range(grid)), 1 - _gammp(k, c / t)


def _sampled(run, every: int = 40):
    steps = run["steps"]
    return steps[:: max(1, len(steps) // every)]


def _predicted_longest(run, k: float) -> float:
    return statistics.fmean(_longest_and_cap_mass(k=k, mean=s[1], cap=run["response_len_max"],
                                                  n=run["sequences_per_step"])[0] for s in _sampled(run))


def _half0_k() -> float:
    """``k`` at which the half-0 runs' predicted clipped share, step by step, equals the logged one."""
    half0 = [r for r in DATA["runs"] if r["half"] == 0]

    def excess(k):
        pred = [_longest_and_cap_mass(k=k, mean=s[1], cap=r["response_len_max"], n=1, grid=4)[1]
                for r in half0 for s in _sampled(r)]
        return statistics.fmean(pred) - statistics.fmean(s[4] for r in half0 for s in r["steps"])

    lo, hi = 1.0, 40.0
    for _ in range(30):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
    return (lo * hi) ** 0.5


def test_the_data_file_holds_what_its_steps_give():
    assert len(RUNS) == 6
    for r in DATA["runs"]:
        assert r["half"] == int(hashlib.sha1(r["id"].encode()).hexdigest(), 16) % 2
        assert r["summary"] == SCRIPT.summary(r["steps"], r["response_len_max"])
        assert len({s[0] for s in r["steps"]}) == len(r["steps"]) == r["summary"]["steps"]
        assert all(s[3] <= s[1] <= s[2] <= r["response_len_max"] for s in r["steps"])
        assert len(r["source"]["commit"]) == 40
    # the figures the earlier evidence cites (test_batch_longest_evidence.LOGGED)
    from tests.compute.test_batch_longest_evidence import LOGGED
    for name, rid in (("play-verl qwen2-7b min", "playverl-ppo-qwen2-7b-min-h100-8g"),
                      ("play-verl qwen2-7b recommended", "playverl-ppo-qwen2-7b-rec-h100-8g"),
                      ("rocm deepseek-llm-7b grpo", "rocm-verl-grpo-deepseek-llm-7b-mi300x-8g"),
                      ("rocm deepseek-llm-7b ppo", "rocm-verl-ppo-deepseek-llm-7b-mi300x-8g")):
        n, engines, cap, mean, longest = LOGGED[name]
        r = RUNS[rid]
        assert (n, engines, cap) == (r["sequences_per_step"], r["engines"], r["response_len_max"])
        assert r["summary"]["mean_of_mean"] == pytest.approx(mean, abs=0.1)
        assert r["summary"]["mean_of_max"] == pytest.approx(longest, abs=0.1)


def test_the_half0_body_is_concentrated():
    k = _half0_k()
    assert 8 < k < 12  # ~10; the exponential (k = 1) clips about three times the logged share
    run = next(r for r in DATA["runs"] if r["half"] == 0)
    exp_clip = statistics.fmean(_longest_and_cap_mass(k=1, mean=s[1], cap=run["response_len_max"], n=1, grid=4)[1]
                                for s in _sampled(run))
    assert exp_clip > 2.5 * run["summary"]["mean_of_clip_ratio"]


def test_the_half0_shape_misses_the_held_out_batch_longest():
    k = _half0_k()
    held = [r for r in DATA["runs"] if r["half"] == 1 and r["summary"]["share_of_steps_max_at_cap"] < 0.95]
    assert len(held) == 4
    body, expo = [], []
    for r in held:
        logged = r["summary"]["mean_of_max"]
        body.append(_predicted_longest(r, k) / logged - 1)
        expo.append(_predicted_longest(r, 1.0) / logged - 1)
    assert all(e < -0.25 for e in body)  # every held-out longest far beyond the concentrated body's
    assert max(abs(e) for e in expo) < 0.65
    assert statistics.median(abs(e) for e in expo) < 0.5 * statistics.median(abs(e) for e in body)


def test_the_mass_at_the_cap_is_no_fixed_rescale_of_the_exponential():
    ratios = []
    for r in DATA["runs"]:
        share, n, cap = r["summary"]["share_of_steps_max_at_cap"], r["sequences_per_step"], r["response_len_max"]
        if r["half"] == 0 or share >= 0.95:
            continue
        implied = 1 - (1 - share) ** (1 / n)  # per response, from the share of steps whose longest reached the cap
        model = statistics.fmean(_longest_and_cap_mass(k=1, mean=s[1], cap=cap, n=1, grid=4)[1] for s in _sampled(r))
        ratios.append(implied / model)
    assert len(ratios) == 4
    assert max(ratios) < 1  # the exponential over-weights the cap in every run
    assert max(ratios) / min(ratios) > 10  # ... by factors that differ tenfold: no one rescale
