"""verl's FSDP log-prob passes on the published rows: fixed log-prob micro-batches run at the pace of the rank
holding the most tokens (``update_work_cv`` in ``plan.rl_passes``), and the reference, which verl's FSDP workers keep
in pinned host memory (``CPUOffload(offload_params=True)``), copies each unit's shard to the GPU in every micro-batch
(``compute.training.forward_only_time`` ``host_shard_bytes_per_s``).

The AMD MI300X verl PPO row (rocm-verl-ppo-deepseek-llm-7b-mi300x-8g) states a fixed log-prob micro-batch and an
offloaded reference, so both apply; its log-prob pass was planned 24 % under the published one before them, 19 %
after."""

from __future__ import annotations

import copy

import pytest
from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_verl_logprob_passes")
RL = {e["id"]: e for e in S.load_entries(S.RL_DATA)}
ROCM_PPO = "rocm-verl-ppo-deepseek-llm-7b-mi300x-8g"


def _phases(card: dict) -> dict[str, float]:
    planned = S.plan_card(card)
    return {k.removeprefix("time."): v for k, v in planned.parts.items() if k.startswith("time.")}


def test_the_rocm_row_states_a_fixed_log_prob_micro_batch_and_a_host_reference():
    card, notes = S.map_rl(RL[ROCM_PPO])
    assert card["rollout"].get("logprob_micro_batch_size")
    assert any("reference on the cpu" in n for n in notes)


def test_fixed_log_prob_micro_batches_carry_the_ranks_token_spread():
    card, _ = S.map_rl(RL[ROCM_PPO])
    fixed = _phases(card)
    # the same count taken from the update's micro-batch instead: a count that may stand for a token budget, no spread
    fallback = copy.deepcopy(card)
    fallback["rollout"].pop("logprob_micro_batch_size")
    fallback.setdefault("batch", {})["micro_batch_size"] = card["rollout"]["logprob_micro_batch_size"]
    loose = _phases(fallback)
    assert fixed["old_logprob"] > loose["old_logprob"] * 1.02


def test_the_host_reference_pays_its_copies_and_the_row_moves_towards_its_published_pass():
    card, _ = S.map_rl(RL[ROCM_PPO])
    on_host = _phases(card)
    on_gpu_card = copy.deepcopy(card)
    on_gpu_card.setdefault("roles", {})["reference"] = "gpu"
    on_gpu = _phases(on_gpu_card)
    assert on_host["ref_logprob"] > on_gpu["ref_logprob"]
    published = sum(v for k, v in RL[ROCM_PPO]["measured"]["phases_s"].items()
                    if k in ("old_logprob", "ref_logprob") and v)
    planned = on_host["old_logprob"] + on_host["ref_logprob"]
    # still under (what else is missing is not these two mechanisms), but closer than -24 %
    assert -0.22 < planned / published - 1 < 0.0
