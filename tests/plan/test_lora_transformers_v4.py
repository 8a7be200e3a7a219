"""A LoRA card on a MoE model built by transformers 4.x (plan.resolve.transformers_v4_modules): PEFT wraps the
experts' and routers' nn.Linear modules there (memory.lora._V4_EXPERT_MODULES), so the plan trains and holds more
adapter than on transformers 5 for Qwen1.5-MoE-A2.7B."""

from __future__ import annotations

from trainfit.plan import make_plan
from trainfit.plan.resolve import trainable_spec
from trainfit.spec.card import load_card_dict


def _card(software=None, **par):
    d = {"model": "Qwen/Qwen1.5-MoE-A2.7B", "scope": "lora", "hardware": {"gpu": "h200", "gpus_per_node": 1},
         "parallel": {"strategy": "single", **par}, "batch": {"micro_batch_size": 1, "seq_len": 2048}}
    if software:
        d["software"] = software
    return load_card_dict(d)


def test_the_card_says_which_transformers_builds_the_model():
    assert not trainable_spec(_card()).lora.transformers_v4
    assert trainable_spec(_card({"transformers": "4.57.6"})).lora.transformers_v4
    assert trainable_spec(_card(moe_experts="loop")).lora.transformers_v4
    assert not trainable_spec(_card({"transformers": "5.24.0"})).lora.transformers_v4


def test_qwen2_moe_on_transformers_4_plans_the_expert_and_router_adapters():
    v5, v4 = make_plan(_card()), make_plan(_card({"transformers": "4.57.6"}))
    assert v4.params_trainable > 5 * v5.params_trainable
    assert v4.peak.components["optimizer_states"] > 5 * v5.peak.components["optimizer_states"]
