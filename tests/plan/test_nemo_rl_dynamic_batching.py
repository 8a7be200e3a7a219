"""NeMo RL's dynamic batching: the chunk sorted by length, dealt to the data-parallel shards, micro-batches padded to
their longest within the token budget (``plan.rl_batches.nemo_rl_dynamic_micro_batches``; NVIDIA-NeMo/RL
nemo_rl/distributed/batched_data_dict.py ``shard_by_batch_size`` @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf), and the
update of a NeMo RL card that batches so."""

from __future__ import annotations

import pytest

from trainfit.plan import make_plan
from trainfit.plan.rl_batches import (
    NEMO_RL_SEQUENCE_LENGTH_ROUND,
    dynamic_micro_batches,
    nemo_rl_dynamic_micro_batches,
    nemo_rl_dynamic_shape,
)
from trainfit.spec.card import load_card_dict


def test_hand_walk_of_two_shards():
    # sorted 100 100 100 100 200 200 3000 3000, dealt to 2 shards: each holds 100, 100, 200, 3000; rounded to 64:
    # 128, 128, 256, then 3000 (the batch's width caps the rounding); 3 x 256 = 768 fits, 4 x 3000 does not
    count, tokens = nemo_rl_dynamic_micro_batches(sequence_tokens=[100, 3000, 100, 200, 100, 3000, 100, 200],
                                                  data_parallel=2, budget_tokens=4096)
    assert NEMO_RL_SEQUENCE_LENGTH_ROUND == 64
    assert count == 2
    assert tokens == pytest.approx((3 * 256 + 3000) / 2)


def test_long_sequences_leave_micro_batches_part_empty():
    # 8 sequences of 2,100 tokens on one rank: 2 x 2,112 > 4,096, one each, where a packed budget needs 5
    count, tokens = nemo_rl_dynamic_micro_batches(sequence_tokens=[2100] * 8, data_parallel=1, budget_tokens=4096)
    assert count == 8 and tokens == pytest.approx(2100)
    assert dynamic_micro_batches(sequences=8, token_mean=2100, token_std=0.0, budget_tokens=4096,
                                 data_parallel=1) == ((5, 1.0),)
    with pytest.raises(ValueError):
        nemo_rl_dynamic_micro_batches(sequence_tokens=[], data_parallel=1, budget_tokens=4096)


def _card(preset: str, budget: int | None) -> object:
    ro = {"placement": "colocate", "tensor_parallel": 4, "gpu_memory_utilization": 0.6, "prompts_per_step": 64,
          "num_generations": 32, "prompt_len": 132, "prompt_len_mean": 132, "response_len": 3964,
          "response_len_mean": 395, "sleep_level": 1}
    if budget is not None:
        ro["max_tokens_per_micro_batch"] = budget
    return load_card_dict({"model": "meta-llama/Llama-3.1-8B", "method": "grpo", "preset": preset,
                           "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
                           "batch": {"micro_batch_size": 1},
                           "parallel": {"strategy": "fsdp", "fsdp_version": "fsdp2"}, "rollout": ro})


def test_only_nemo_rl_cards_take_it():
    kw = dict(sequences=512, prompt_tokens=132.0, response_mean_tokens=395.0, data_parallel=8, budget_tokens=4096)
    assert nemo_rl_dynamic_shape(_card("verl", 4096), **kw) is None
    count, tokens = nemo_rl_dynamic_shape(_card("nemo-rl", 4096), **kw)
    # 64 sequences of 527 tokens a rank (33.7k): 9 packed budgets at least; sorted and padded, more
    assert count > 33_728 / 4096 + 1
    assert tokens <= 4096


def test_the_update_plans_the_padded_micro_batches():
    plan = make_plan(_card("nemo-rl", 4096))
    assert any("NeMo RL dynamic batching" in a for a in plan.assumptions)


def _logprob_seconds(plan) -> float:
    return sum(p.seconds for p in plan.time_phases if p.name in ("old_logprob", "ref_logprob"))


def test_the_log_prob_passes_plan_the_padded_micro_batches():
    # get_logprobs / get_reference_policy_logprobs shard the whole step's batch (batch_size=None) with
    # logprob_mb_tokens, sorted and padded as the update (NVIDIA-NeMo/RL lm_policy.py l.185-270 @b1c86a81)
    card = _card("nemo-rl", 4096)
    plan = make_plan(card)
    notes = [a for a in plan.assumptions if "log-prob passes: NeMo RL dynamic batching" in a]
    assert len(notes) == 1
    count, tokens = nemo_rl_dynamic_shape(card, sequences=2048, prompt_tokens=132.0, response_mean_tokens=395.0,
                                          data_parallel=8, budget_tokens=4096)
    assert f" {count} a rank," in notes[0]
    assert not any("log-prob passes: dynamic batching, packed" in a for a in plan.assumptions)
    # padded micro-batches leave part of the budget empty: more of them than a packed budget's 256 x 527 / 4096
    assert count > 256 * 527 / 4096 + 1
    assert _logprob_seconds(plan) > 0
