"""``spec.card._check_reference_placement``: reference placements the plan cannot honour are refused in one line."""

from __future__ import annotations

import pytest

from trainfit.spec.card import load_card_dict

DPO = {"model": "Qwen/Qwen3-8B", "method": "dpo", "hardware": {"gpu": "h100", "gpus_per_node": 8},
       "batch": {"micro_batch_size": 1, "seq_len": 2048}}


def _refusal(card):
    with pytest.raises(Exception) as e:
        load_card_dict(card)
    msg = str(e.value)
    assert "roles.reference" in msg
    return msg


def test_lora_disabled_with_a_full_weight_policy_is_refused():
    msg = _refusal({**DPO, "scope": "full", "roles": {"reference": "lora_disabled"}})
    assert "lora_disabled needs a PEFT scope" in msg
    assert "allowed with scope full: gpu, none, precomputed, host_swap" in msg
    grpo = {**DPO, "method": "grpo", "scope": "full", "roles": {"reference": "lora_disabled", "kl_coef": 0.04},
            "rollout": {"prompt_len": 512, "response_len": 512}}
    assert "allowed with scope full: gpu, cpu, none, precomputed, host_swap" in _refusal(grpo)


def test_lora_disabled_with_an_adapter_is_accepted():
    card = load_card_dict({**DPO, "scope": "lora", "roles": {"reference": "lora_disabled"}})
    assert card.roles.reference.value == "lora_disabled"


def test_a_host_offloaded_dpo_reference_is_refused():
    msg = _refusal({**DPO, "scope": "full", "parallel": {"strategy": "zero3"}, "roles": {"reference": "cpu"}})
    assert "not planned for method dpo" in msg
    assert msg.rstrip().endswith("allowed: gpu, none, precomputed, host_swap")
    lora = _refusal({**DPO, "scope": "lora", "roles": {"reference": "cpu"}})
    assert lora.rstrip().endswith("host_swap, lora_disabled")
