"""The play-verl actor-update phases split by verl's own MFU metric: the update proper against the state moves.

verl's FSDP worker (volcengine/verl ``verl/workers/fsdp_workers.py`` ``update_actor`` lines 512-552
@e0d035cd4a6a5c29835516a58d78710a28e73b18, the verl of dingxianzhong/play-verl's logs) loads the actor's parameters
and optimizer state when they are offloaded (lines 518-520), times ``update_policy`` alone (line 525) and offloads
them again (lines 546-549); ``timing_s/update_actor`` covers all of it. The metric it logs, ``perf/mfu/actor``
(line 530), is ``estimate_flops(tokens, update_policy seconds) / promised / world_size`` with
``_estimate_qwen2_flops``' ``6 N`` per token plus ``12 s^2 x head_dim x heads x layers`` per sequence and the
promised 989e12 for an H100 (``verl/utils/flops_counter.py`` lines 21-48 and 79-111, same commit). So each logged
step gives ``update_policy`` = FLOPs(``perf/total_num_tokens``) / (``perf/mfu/actor`` x 989e12 x 8), and the
rest of the timer is the state's trips (the mean over the entries' steps, the attention term from the step's mean
lengths; it is under 1 % of the FLOPs here): ``logs/verl_qwen2_7b_min.log`` (actor param and optimizer offload)
10.61 s = 9.34 s update + 1.27 s moves; ``logs/verl_qwen2_7b_recommended.log`` (nothing offloaded) 33.48 =
33.38 + 0.10 s; the two Qwen2.5-0.5B logs (nothing offloaded) 13.03 = 13.02 and 1.018 = 1.010 s
(dingxianzhong/play-verl @7716a615fc4b68961f2bb7716c9aadcd65ca28d2).

What it says about the plan: the min run's moves are planned at 0.6 x ``state_offload`` = 0.91 s against the 1.27 s
logged, so its -51 % actor-update row is not the offload; the update itself is planned at 4.27 s against 9.34 s
(16 optimizer steps of 4 sequences, ~1,160 tokens per GPU each: 0.58 s logged per mini-batch, 0.27 s planned). The
recommended run's update (16 steps of ~11,400 tokens per GPU, MFU 0.25) is planned at 22.6 s against 33.4 s. Not
modelled yet, hence the strict xfail.
"""

from __future__ import annotations

import pytest
from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_playverl_update_split")
RL = {e["id"]: e for e in S.load_entries(S.RL_DATA)}
MIN = "playverl-ppo-qwen2-7b-min-h100-8g"
LOGGED = {
    # id: (timing_s/update_actor, update_policy from perf/mfu/actor at 989e12), means over the entry's steps
    MIN: (10.609, 9.339),
    "playverl-ppo-qwen2-7b-rec-h100-8g": (33.478, 33.382),
    "playverl-ppo-qwen25-05b-h100-8g": (13.034, 13.019),
    "playverl-grpo-qwen25-05b-h100-8g": (1.018, 1.010),
}


def _planned(rid: str):
    card, _ = S.map_rl(RL[rid])
    return S.plan_card(card)


def test_the_split_is_of_the_published_phase():
    for rid, (timer, policy) in LOGGED.items():
        assert RL[rid]["measured"]["phases_s"]["actor_update"] == pytest.approx(timer, abs=1e-3)
        assert 0 < policy <= timer
    # only the run that offloads its actor spends a second outside update_policy
    assert {rid for rid, (t, p) in LOGGED.items() if t - p > 0.5} == {MIN}
    assert {rid for rid in LOGGED if S.offload_share(RL[rid], "actor_update") > 0} == {MIN}


def test_the_offloaded_actor_moves_its_state_in_about_the_logged_time():
    planned = _planned(MIN)
    moved = S.offload_share(RL[MIN], "actor_update") * planned.parts["time.state_offload"]
    timer, policy = LOGGED[MIN]
    assert 0.5 < moved / (timer - policy) < 1.5


@pytest.mark.xfail(strict=True, reason="the min run's update_policy (16 optimizer steps of 4 sequences per GPU) is "
                                       "planned at 4.3 s against the 9.3 s its MFU metric gives (module docstring)")
def test_the_update_of_sixteen_small_mini_batches_is_planned_near_the_logged_one():
    assert _planned(MIN).parts["time.actor_update"] == pytest.approx(LOGGED[MIN][1], rel=0.3)
