"""A LoRA card on a MoE model built by transformers 4.x (plan.resolve.transformers_v4_modules): PEFT wraps the
experts' and routers' nn.Linear modules there (memory.lora._V4_EXPERT_MODULES), so the plan trains and holds more
adapter than on transformers 5 for Qwen1.5-MoE-A2.7B."""

from __future__ import annotations

import pytest

from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.plan.resolve import card_with, model_spec_of, trainable_spec, transformers_v4_experts
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import MoeExperts


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


def test_grouped_default_under_a_transformers_4_pin_runs_the_4x_loop():
    """transformers 4.x builds Qwen2-MoE's experts as a loop of per-expert modules, so the grouped default resolves
    to that loop (plan.resolve.transformers_v4_experts), with a note: memory and step time then price the same
    per-expert adapters (no transformers 5 merged-stack ``.BA`` GEMMs beside a 4.x adapter count)."""
    pinned, loop = make_plan(_card({"transformers": "4.57.6"})), make_plan(
        _card({"transformers": "4.57.6"}, moe_experts="loop"))
    assert pinned.card.parallel.moe_experts is MoeExperts.LOOP
    assert any("moe_experts: loop (the grouped default resolved)" in a for a in pinned.assumptions)
    assert pinned.step_seconds == pytest.approx(loop.step_seconds, rel=1e-12)
    assert pinned.params_trainable == loop.params_trainable
    old = make_plan(_card({"transformers": "4.52.4"}))  # before the hit test: the loop over every expert
    assert old.card.parallel.moe_experts is MoeExperts.LOOP_ALL


def test_grouped_given_with_a_transformers_4_pin_is_refused():
    with pytest.raises(CardError) as exc:
        make_plan(_card({"transformers": "4.57.6"}, moe_experts="grouped"))
    text = str(exc.value)
    assert text.startswith("parallel.moe_experts: grouped is transformers 5's experts") and "loop, loop_all" in text


def test_experts_left_alone_off_transformers_4_model_code():
    card = _card({"transformers": "4.57.6"})
    spec = model_spec_of(card)
    for other in (card_with(card, parallel__tensor_parallel_impl="megatron"),  # Megatron-Core's own GPTModel
                  card_with(card, software__transformers="5.24.0"),
                  card_with(card, parallel__moe_experts="grouped_padded")):  # a trainer's own grouped experts
        assert transformers_v4_experts(other, spec) == (other, None)
    gpt_oss = load_card_dict({"model": "openai/gpt-oss-20b", "scope": "lora", "software": {"transformers": "4.57.6"},
                              "hardware": {"gpu": "h200", "gpus_per_node": 1}, "parallel": {"strategy": "single"},
                              "batch": {"micro_batch_size": 1, "seq_len": 2048}})
    assert transformers_v4_experts(gpt_oss, model_spec_of(gpt_oss))[1] is None  # 4.x stacked experts of its own


def _card_with_lora(software, lora, **par):
    data = _card(software, **par).model_dump(mode="json", exclude_unset=True)
    data["lora"] = {**data.get("lora", {}), **lora}
    return load_card_dict(data)


def test_a_trainers_own_experts_keep_their_adapter_layout_under_a_transformers_4_pin():
    """prime-rl's MultiLoRAGroupedExperts (lora.expert_adapters grouped) and torchtitan's / grouped_gemm's experts
    are the trainer's own modules: a transformers 4.x pin leaves their adapters and optimizer state as unpinned."""
    for lora, par in (({"expert_adapters": "grouped"}, {}), ({}, {"moe_experts": "grouped_padded"}),
                      ({}, {"moe_experts": "grouped_streams"})):
        pinned = _card_with_lora({"transformers": "4.57.6"}, lora, **par)
        assert not trainable_spec(pinned).lora.transformers_v4, (lora, par)
        unpinned = make_plan(_card_with_lora(None, lora, **par))
        assert make_plan(pinned).params_trainable == unpinned.params_trainable


@pytest.mark.parametrize("split", [{"tensor_parallel": 2}, {"expert_parallel": 2}, {"pipeline_parallel": 2}])
def test_the_4x_loop_refused_with_model_parallel_is_one_line_naming_the_real_choices(split):
    """The resolved loop runs without tensor, pipeline or expert parallel; the refusal is one line that names what
    the card can change (not the card schema's list, which offers grouped: refused under the same pin)."""
    card = load_card_dict({"model": "Qwen/Qwen1.5-MoE-A2.7B", "scope": "lora", "software": {"transformers": "4.57.6"},
                           "hardware": {"gpu": "h200", "gpus_per_node": 4}, "parallel": {"strategy": "fsdp", **split},
                           "batch": {"micro_batch_size": 1, "seq_len": 2048}})
    with pytest.raises(CardError) as exc:
        make_plan(card)
    text = str(exc.value)
    assert "\n" not in text and "validation error" not in text
    assert text.startswith("parallel.moe_experts: transformers 4.57.6 runs Qwen/Qwen1.5-MoE-A2.7B's experts")
    assert text.endswith("allowed: parallel.tensor_parallel, pipeline_parallel and expert_parallel 1,"
                         " software.transformers >= 5, or a trainer's own experts (parallel.moe_experts"
                         " grouped_streams or grouped_padded)")
