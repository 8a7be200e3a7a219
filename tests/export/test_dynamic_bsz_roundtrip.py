"""A card with verl's token budgets (rollout.max_tokens_per_micro_batch, logprob_max_tokens_per_micro_batch)
round-trips through every target: verl writes use_dynamic_bsz and reads it back, the others say the budget is not
written (test_roundtrip.check_roundtrip)."""

from __future__ import annotations

import pytest
from test_roundtrip import check_roundtrip

from trainfit.export import TARGETS
from trainfit.spec.card import load_card_dict

BASE = {"model": "Qwen/Qwen2.5-0.5B", "method": "grpo", "hardware": {"gpu": "H100-SXM5-80GB", "gpus_per_node": 8},
        "rollout": {"prompt_len": 512, "response_len": 1536, "prompts_per_step": 64, "num_generations": 8,
                    "response_len_mean": 700}}
BUDGETS = {
    "both": {"max_tokens_per_micro_batch": 8192, "logprob_max_tokens_per_micro_batch": 16384},
    "update_only": {"max_tokens_per_micro_batch": 8192},
    "fixed_logprob": {"max_tokens_per_micro_batch": 8192, "logprob_micro_batch_size": 4},
    "logprob_only": {"logprob_max_tokens_per_micro_batch": 4096},
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(BUDGETS))
def test_budget_cards_round_trip(name, target):
    check_roundtrip(load_card_dict({**BASE, "rollout": {**BASE["rollout"], **BUDGETS[name]}}), target)


@pytest.mark.parametrize("name", sorted(BUDGETS))
def test_verl_dynamic_bsz_overrides_are_keys_of_the_recorded_yaml(name):
    from export_vendor import verl_keys_recorded
    from test_export_verl_openrlhf import _check_override

    from trainfit.export import export
    from trainfit.export.verl import to_verl

    card = load_card_dict({**BASE, "method": "ppo", "rollout": {**BASE["rollout"], **BUDGETS[name]}})
    e = export(card, "verl")
    rec = verl_keys_recorded()
    written = to_verl(card)
    assert any("max_token_len_per_gpu" in o for o in written)
    for o in written:
        _check_override(o, rec[e.data["config"]], rec["groups"])
