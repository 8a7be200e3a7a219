"""Which sequence ends a rollout phase: the plan's longest against the batch's longest logged per step.

``generation.generation_time`` plans one engine's share of the batch (``prompts x samples / engines`` sequences) and
the response-length groups split the top bin down to one sequence, so the phase ends with the expected longest of
*one engine's* sequences. The phase really ends with the slowest engine, i.e. the one holding the longest sequence
of the whole batch: for independent lengths the expected longest of all ``N`` sequences, which under the truncated
exponential (``response_lengths``) is ``θ·ln(engines)`` tokens longer than one engine's until it reaches the limit.

Taken alone that mechanism (the top group at the conditional mean of the top ``1/N`` of the distribution; tried on
the tree of 31fc2ef) moves the NeMo RL v0.3 blog's Llama-3.1-70B generation phases from -25 % to +3 / +5 % (16
engines of 128 sequences, mean 398: one engine's longest ~2,300 tokens, the batch's ~3,300), but the play-verl
Qwen2-7B TP-1 phase from +61 % to +91 % and the DAPO rows whose mean response is not published by 17-59 pt: the
exponential's tail is too heavy at the batch's scale. Runs that log ``response_length/max`` every step show it (the
mean over every logged step of the batch's longest response, against the expected longest of the whole batch under
the truncated exponential with the run's mean):

* dingxianzhong/play-verl ``logs/verl_qwen2_7b_min.log`` @7716a615fc4b68961f2bb7716c9aadcd65ca28d2 (512 sequences,
  8 engines, limit 1,024, 140 steps, mean response 169.5): logged 867 (44 % of steps at the limit); batch 997, one
  engine's 778 (the plan's top group 847);
* the same repository's ``logs/verl_qwen2_7b_recommended.log`` (5,120 sequences, 4 engines, 70 steps, mean 188.3):
  logged 1,011 (91 % at the limit); batch 1,024;
* yushengsu-thu/verl_training_log ``gsm8k/grpo_run_deepseek7b_llm.log`` @deb1507ca0740580d2019e7150d08edf8dd6ca35
  (deepseek-llm-7b, 5,120 sequences, 4 engines, limit 1,024, 1,119 logged steps, mean 133.4): logged 647 (28 % at
  the limit); batch 1,020, one engine's 960;
* the same repository's ``gsm8k/ppo_run_deepseek7b_llm.log`` (1,024 sequences, 2 engines, limit 512, mean 136.1):
  logged 453 (38 % at the limit); batch 512.

So the batch's longest is not taken from the exponential: kept at one engine's (which the logs bound from above in
three of four runs), the NeMo RL 70B phases stay short. The tests below hold these figures; the strict xfail is the
mechanism, to be taken up with a length distribution whose far tail the logs support (GSM8K responses cluster
near their mean; the limit is reached by a few runaway sequences, not by an exponential's tail).

Every logged step of these runs and two more is in ``benchmarks/data/rl_response_length_steps.json``;
``test_response_length_tail.py`` shows that a body shape fitted on the half-0 run (gamma ``k`` ~ 10) falls 30-56 %
short of the held-out runs' batch longest while the runaway mass at the cap differs tenfold between runs, so the
far tail is not set by the card's mean and maximum, and the xfail stays.

Re-tried on the tree of 4d89d40. The slowest engine was priced as a typical engine plus the steps its straggler runs
alone, from one engine's longest to the batch's, both under the exponential. The causes of that straggler are the
same as above: verl's ``DP_COMPUTE_PROTO`` dispatch collects every worker, and NeMo RL's ``generate`` gathers every
engine.

* Rows with a published mean response:
  * the four NeMo RL Llama-3.1-70B generation phases went from -40.7 / -39.7 / -43.1 / -41.6 % to -19.2 / -17.8 /
    -22.3 / -20.6 %;
  * play-verl Qwen2-7B TP 1 went from +61.4 to +91.2 %;
  * fit half: mean |error| 18.1 -> 17.5 %, median unchanged;
  * held-out half: median 14.1 -> 12.8 %, mean 20.4 -> 19.3 %.
* Rows without a published mean response, planned with the default length profile:
  * verl fully-async colocate 128 / 64 / 32 GPUs went from +33.4 / +90.0 / +3.9 % to +92.2 / +145.5 / +21.5 %;
  * the one-step-off colocate FSDP2 row went from +5.5 to +25.0 %;
  * held-out half: median 22.5 -> 25.0 %, mean 26.8 -> 32.7 %.
* All RL rows of the held-out half: median 16.3 -> 17.9 %. Rows beyond 50 %: 41 -> 43.
* The same straggler with vLLM's eager step priced at 26 us a kernel: all RL held-out median 16.3 -> 19.1 %.

So the test stays an xfail.

One published figure points the mechanism's way. verl's fully-async colocate runs (Qwen2.5-Math-7B, DAPO, 28K
maximum, 8,192 sequences a step; ``docs/advance/fully_async.md`` l.379-383
@df340d703292538fafc1439b4aa9f1f226ccadc5) spend 151 s in generation on 64 GPUs and 178 s on 128. One engine's
longest shrinks with more engines; the batch's does not.
"""

from __future__ import annotations

from math import exp

import pytest

from trainfit.compute.response_lengths import _solve_theta, response_length_groups

LOGGED = {
    # name: (sequences, engines, response limit, mean response, logged mean of response_length/max)
    "play-verl qwen2-7b min": (512, 8, 1024, 169.5, 867.4),
    "play-verl qwen2-7b recommended": (5120, 4, 1024, 188.3, 1011.3),
    "rocm deepseek-llm-7b grpo": (5120, 4, 1024, 133.4, 647.0),
    "rocm deepseek-llm-7b ppo": (1024, 2, 512, 136.1, 452.7),
}


def _expected_longest(*, mean: float, limit: int, n: int, steps: int = 4000) -> float:
    """E[max of n] of ``1 + min(Exp(θ), limit − 1)`` with ``θ`` giving ``mean`` (``response_lengths._shape``)."""
    theta = _solve_theta(mean - 1, limit - 1)
    h = (limit - 1) / steps
    return 1 + sum((1 - (1 - exp(-(i + 0.5) * h / theta)) ** n) * h for i in range(steps))


def _plan_longest(*, sequences: int, engines: int, limit: int, mean: float) -> float:
    groups = response_length_groups(shape="exponential", response_len_max=limit, response_len_mean=mean,
                                    sequences=sequences // engines)
    return max(length for length, _ in groups)


def test_the_exponential_overshoots_the_logged_longest_of_the_batch():
    over = 0
    for n, engines, limit, mean, logged in LOGGED.values():
        batch = _expected_longest(mean=mean, limit=limit, n=n)
        assert batch >= logged * 0.99
        over += batch > logged * 1.1
    assert over >= 3


def test_the_plan_takes_one_engines_longest():
    n, engines, limit, mean, logged = LOGGED["play-verl qwen2-7b min"]
    top = _plan_longest(sequences=n, engines=engines, limit=limit, mean=mean)
    assert top == pytest.approx(847, abs=5)
    assert abs(top / logged - 1) < 0.05  # within 5 % of the logged longest there, by the lighter real tail
    assert top < _expected_longest(mean=mean, limit=limit, n=n) * 0.9


@pytest.mark.xfail(strict=True, reason="the phase ends with the batch's longest sequence (the slowest engine), "
                                       "but the truncated exponential's batch-scale tail overshoots the logged "
                                       "longest (module docstring); the plan keeps one engine's longest")
def test_the_plan_ends_the_phase_with_the_batchs_longest():
    n, engines, limit, mean, _ = LOGGED["play-verl qwen2-7b min"]
    top = _plan_longest(sequences=n, engines=engines, limit=limit, mean=mean)
    assert top == pytest.approx(_expected_longest(mean=mean, limit=limit, n=n), rel=0.03)
