"""A preset's defaults fit the card's method and scope, and the plan's optimizer line names the optimizer planned.

- RL-only defaults (the ``rollout`` and ``roles`` sections: verl's host-offloaded reference, TRL's GRPOConfig beta 0)
  are filled only for method ppo / grpo: ``plan --preset verl --method dpo`` refused the reference the preset, not
  the user, had set (``roles.reference: cpu ... is not planned for method dpo``).
- verl's fp32 FSDP parameters do not override what qlora stores (nf4): ``plan --preset verl --scope qlora`` refused
  ``precision.weights: qlora stores the base in nf4, got 'fp32'`` although the card set no weights.
- ``precision.optimizer`` sgd / adafactor / the bitsandbytes optimizers: the assumption line names that optimizer,
  not "torch AdamW impl 'fused'".
"""

from __future__ import annotations

import pytest

from trainfit import api
from trainfit.methods.presets import PRESETS, apply_preset
from trainfit.spec.card import load_card_dict

BASE = {"model": "Qwen/Qwen2.5-0.5B", "hardware": {"gpu": "h100", "gpus_per_node": 1},
        "batch": {"micro_batch_size": 1, "seq_len": 512}}


@pytest.mark.parametrize("method", ["sft", "dpo", "rm"])
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_rl_only_defaults_are_not_filled_for_other_methods(name: str, method: str) -> None:
    filled = apply_preset({"method": method}, name)
    assert "rollout" not in filled and "roles" not in filled


@pytest.mark.parametrize("method", ["ppo", "grpo"])
def test_rl_methods_keep_the_rl_defaults(method: str) -> None:
    assert apply_preset({"method": method}, "verl")["roles"] == {"reference": "cpu"}
    assert apply_preset({"method": method}, "verl")["rollout"]["gpu_memory_utilization"] == 0.5
    assert apply_preset({"method": method}, "trl")["roles"] == {"kl_coef": 0.0}


def test_verl_dpo_plans_without_a_reference_the_user_never_set() -> None:
    data = apply_preset({**BASE, "method": "dpo"}, "verl")
    card = load_card_dict(data)
    assert card.roles.reference is None  # the method's own default (methods.roles)
    assert api.plan({**BASE, "method": "dpo", "preset": "verl"}).peak.device > 0
    # a reference the card states is still the card's, and still refused for dpo
    with pytest.raises(Exception, match="roles.reference: cpu"):
        load_card_dict(apply_preset({**BASE, "method": "dpo", "roles": {"reference": "cpu"}}, "verl"))


def test_trl_dpo_keeps_dpos_own_beta() -> None:
    """GRPOConfig's beta 0.0 is not DPOConfig's: a DPO card under preset trl keeps the card's default kl_coef."""
    card = load_card_dict(apply_preset({**BASE, "method": "dpo"}, "trl"))
    assert card.roles.kl_coef is None


@pytest.mark.parametrize("method", ["sft", "dpo"])
def test_verl_qlora_keeps_the_nf4_base(method: str) -> None:
    data = apply_preset({**BASE, "method": method, "scope": "qlora"}, "verl")
    assert "weights" not in data["precision"] and data["precision"]["compute"] == "bf16"
    load_card_dict(data)  # no "qlora stores the base in nf4, got 'fp32'"
    assert apply_preset({**BASE, "method": method, "scope": "lora"}, "verl")["precision"]["weights"] == "fp32"
    stated = apply_preset({**BASE, "method": method, "scope": "qlora", "precision": {"weights": "fp32"}}, "verl")
    with pytest.raises(Exception, match="qlora stores the base in nf4, got 'fp32'"):
        load_card_dict(stated)


@pytest.mark.parametrize(("optimizer", "expected"), [
    ("adamw", "torch AdamW impl 'fused'"),
    ("sgd", "torch SGD"),
    ("adafactor", "Adafactor"),
    ("adamw_8bit", "bitsandbytes 8-bit AdamW"),
    ("paged_adamw", "bitsandbytes paged 32-bit AdamW"),
    ("paged_adamw_8bit", "bitsandbytes paged 8-bit AdamW"),
])
def test_the_optimizer_line_names_the_optimizer_planned(optimizer: str, expected: str) -> None:
    p = api.plan({**BASE, "method": "sft", "precision": {"optimizer": optimizer}})
    lines = [a for a in p.assumptions if "AdamW" in a or "SGD" in a or "Adafactor" in a]
    assert len(lines) == 1 and lines[0].startswith(expected)
    if optimizer != "adamw":
        assert "torch AdamW" not in lines[0]


def test_verl_qlora_grpo_is_refused_for_its_own_reason() -> None:
    """Under RL, verl's qlora is refused for what verl lacks (no 4-bit actor to serve vLLM), not for the preset's fp32."""
    with pytest.raises(Exception, match="scope: qlora has no verl actor") as exc:
        load_card_dict(apply_preset({**BASE, "method": "grpo", "scope": "qlora"}, "verl"))
    assert "got 'fp32'" not in str(exc.value)


def test_nemo_rl_sleeps_a_colocated_engine_at_level_1():
    """NeMo RL has no sleep setting: a colocated engine sleeps at level 1 after every generation
    (methods.presets.SLEEP_LEVELS["nemo-rl"], vllm_worker.py l.820 @9dbd9adc); before, a plain ``preset: nemo-rl``
    card planned level 0, which NeMo RL cannot run colocated. A split engine never sleeps; a stated level stays."""
    from trainfit.methods.presets import apply_preset

    card = {"model": "Qwen/Qwen3-8B", "method": "grpo", "scope": "full"}
    assert apply_preset(card, "nemo-rl")["rollout"]["sleep_level"] == 1
    split = apply_preset({**card, "rollout": {"placement": "split"}}, "nemo-rl")
    assert "sleep_level" not in split["rollout"]
    stated = apply_preset({**card, "rollout": {"sleep_level": 0}}, "nemo-rl")
    assert stated["rollout"]["sleep_level"] == 0
    assert "rollout" not in apply_preset({**card, "method": "sft"}, "nemo-rl")
