"""The PPO critic's own token budget (rollout.critic_max_tokens_per_micro_batch) round-trips: verl writes
critic.ppo_max_token_len_per_gpu and reads it back; the other targets say the budget is not written."""

from __future__ import annotations

import pytest
from test_roundtrip import check_roundtrip

from trainfit.export import TARGETS
from trainfit.spec.card import load_card_dict

PPO = {
    "model": "Qwen/Qwen2.5-0.5B", "method": "ppo", "hardware": {"gpu": "H100-SXM5-80GB", "gpus_per_node": 8},
    "rollout": {"prompt_len": 512, "response_len": 1536, "prompts_per_step": 64, "num_generations": 8,
                "response_len_mean": 700, "max_tokens_per_micro_batch": 4096},
}
CRITIC = {
    "own": {"critic_max_tokens_per_micro_batch": 16384},
    "own_with_logprob": {"critic_max_tokens_per_micro_batch": 16384, "logprob_max_tokens_per_micro_batch": 8192},
    "actors_stated": {"critic_max_tokens_per_micro_batch": 4096},
    "null_with_logprob": {"logprob_max_tokens_per_micro_batch": 8192},
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(CRITIC))
def test_critic_budget_cards_round_trip(name, target):
    check_roundtrip(load_card_dict({**PPO, "rollout": {**PPO["rollout"], **CRITIC[name]}}), target)


@pytest.mark.parametrize("name", sorted(CRITIC))
def test_verl_critic_overrides_are_keys_of_the_recorded_yaml(name):
    from export_vendor import verl_keys_recorded
    from test_export_verl_openrlhf import _check_override

    from trainfit.export import export
    from trainfit.export.verl import to_verl

    card = load_card_dict({**PPO, "rollout": {**PPO["rollout"], **CRITIC[name]}})
    e = export(card, "verl")
    rec = verl_keys_recorded()
    for o in to_verl(card):
        _check_override(o, rec[e.data["config"]], rec["groups"])
