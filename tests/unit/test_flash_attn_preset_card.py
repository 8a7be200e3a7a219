"""loss.kernel flash_attn (and loss.temperature_copy) on a PPO/GRPO card is verl's actor: refused under another
RL preset, whose trainer runs its own loss (TRL, OpenRLHF, NeMo RL would otherwise get verl's actor memory/time)."""

from __future__ import annotations

import pytest

from trainfit.errors import CardError
from trainfit.spec.card import load_card_dict, verl_actor_loss


def _card(preset: str | None, method: str = "grpo", **loss) -> dict:
    card = {"model": "Qwen/Qwen2.5-0.5B", "method": method, "hardware": {"gpu": "h100-sxm"},
            "loss": {"kernel": "flash_attn", **loss}}
    if preset:
        card["preset"] = preset
    return card


@pytest.mark.parametrize("preset", ["trl", "openrlhf", "nemo-rl"])
@pytest.mark.parametrize("method", ["grpo", "ppo"])
def test_another_rl_preset_is_refused(preset, method):
    if (preset, method) == ("trl", "ppo"):
        pytest.skip("preset trl refuses method ppo first (spec.card.TRL_PPO_REFUSAL)")
    with pytest.raises(CardError) as err:
        load_card_dict(_card(preset, method, temperature_copy=True))
    msg = str(err.value)
    assert msg.startswith(f"loss.kernel: 'flash_attn' for {method} is verl's actor") and f"preset is '{preset}'" in msg
    assert "liger, trl, prime_rl, torchtune" in msg and "\n" not in msg


@pytest.mark.parametrize("preset", [None, "verl"])
def test_verl_or_no_preset_is_verls_actor(preset):
    card = load_card_dict(_card(preset, temperature_copy=True))
    assert card.loss.temperature_copy and verl_actor_loss(card)


def test_sft_is_not_verls_actor():
    card = load_card_dict(_card("trl", "sft"))
    assert not verl_actor_loss(card)
