"""The RL plan's note for a card without ``rollout.response_len_mean`` names every profile a card can choose
(``spec.enums.LengthProfileName`` less ``auto``), so a new profile reaches the hint."""

from __future__ import annotations

from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def test_hint_lists_every_named_length_profile() -> None:
    card = load_card_dict({"method": "grpo", "model": "Qwen/Qwen3-8B",
                           "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8}, "rollout": {"response_len": 4096}})
    text = repr(make_plan(card))
    assert "rollout.length_profile short_answer | cot | long_cot | tool_integrated)" in text
