"""Runs that time both of their launch-bound phases on one host, the no-grad log-prob passes and the actor update,
should miss them by about one factor: the host's issue rate, which no card states, cancels between them.

The no-grad kernel is priced from the training steps' identified forward-plus-backward host sum split by CPU-measured
per-op ratios (``compute.rates.nograd_forward_host_s_per_kernel``, 27.7 us at the defaults). Priced as the 65 us
forward side of that sum less 1.3 us of autograd recording (63.7 us), the three runs below missed their two phases
by factors 2.1x (NeMo RL's B200 run: log-prob passes +289 %, update +87 %), 1.5x and 1.4x apart (play-verl's
Qwen2.5-0.5B runs on an H100 host: log-prob +12 / +23 %, update -27 / -12 %). With the 27.7 us rate and the
no-grad passes' lockstep charged as the update's (only on the device time beyond the host-paced pass), the three read
1.03x (+100 / +94 %), 1.24x (GRPO: -41 / -27 %) and 1.38x (PPO: -36 / -11 %, marked below). Sources: AI-Hypercomputer/gpu-recipes
RL/nemoRL/a4/qwen2.5-1.5b/README.md @22d106b61788e60f8b4a99291dc3629387ff6df5 and dingxianzhong/play-verl
logs/verl_grpo_qwen2.5b_8gpu.log and logs/verl_ppo_qwen2.5b_8gpu.log @7716a615fc4b68961f2bb7716c9aadcd65ca28d2 (the
benchmark entries cite them)."""

from __future__ import annotations

import math

import pytest
from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_nograd_host_factor")
RUNS = ("gpurecipes-nemorl-grpo-qwen25-1p5b-b200-8g", "playverl-grpo-qwen25-05b-h100-8g",
        "playverl-ppo-qwen25-05b-h100-8g")
PARAMS = (
    RUNS[0], RUNS[1],
    pytest.param(RUNS[2], marks=pytest.mark.xfail(strict=True, reason=(
        "the log-prob passes' lockstep follows the update's rule since 41b9fec9 (a launch-bound pass's GPU slack "
        "absorbs the slowest rank and its extra tokens): this run's fixed log-prob micro-batches lost the excess they "
        "were charged on the whole pass, log-prob -29 -> -36 %, update -11 %, 1.38x apart; the rest of the gap is "
        "not explained (the play-verl log-prob calls' costs outside the forward are not planned)"))),
)
ONE_HOST_FACTOR = math.log(1.35)
"""How far apart, as a log ratio, the two phases' planned / published may be on one host."""


@pytest.fixture(scope="module")
def rows():
    entries = [e for e in S.load_entries(S.RL_DATA) if e["id"] in RUNS]
    assert {e["id"] for e in entries} == set(RUNS)
    return {(r.id, r.quantity): r for r in S.rl_rows(entries, [])}


@pytest.mark.parametrize("run", PARAMS)
def test_log_prob_passes_and_update_miss_by_one_host_factor(rows, run):
    lp, up = rows[(run, "logprob")], rows[(run, "actor_update")]
    assert lp.trainfit_s and up.trainfit_s
    gap = math.log(lp.trainfit_s / lp.published_s) - math.log(up.trainfit_s / up.published_s)
    assert abs(gap) < ONE_HOST_FACTOR, f"{run}: log-prob {lp.error:+.0%}, update {up.error:+.0%}"
