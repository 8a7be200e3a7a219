"""Trained tensors of a LoRA card on a MoE model (``plan.time.lora_trained_tensors``): on transformers 5 PEFT wraps
each stacked 3-D expert parameter once (``ParamWrapper``: one ``lora_A`` of ``r * E`` rows and one ``lora_B`` of
``r * E`` columns, peft 0.21.2 ``peft/tuners/lora/layer.py`` l.2455-2456), so the optimizer and DeepSpeed ZeRO-3's
per-parameter gradient norm loop over two tensors per stack and layer; on transformers 4.x every expert's linear is
its own module with its own pair."""

from __future__ import annotations

from trainfit.catalog.models import from_catalog
from trainfit.memory.lora import lora_trainable_params
from trainfit.plan import make_plan
from trainfit.plan.resolve import trainable_spec
from trainfit.plan.time import _trained, lora_trained_tensors
from trainfit.spec.card import load_card_dict


def _card(*, strategy: str = "zero3", software: dict | None = None, expert_adapters: str | None = None,
          scope: str = "lora") -> dict:
    d = {"model": "Qwen/Qwen3-30B-A3B", "method": "sft", "scope": scope,
         "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8, "nodes": 2},
         "parallel": {"strategy": strategy, "gradient_checkpointing": True},
         "batch": {"micro_batch_size": 4, "seq_len": 2048, "grad_accum": 1}}
    if software:
        d["software"] = software
    if expert_adapters:
        d["lora"] = {"expert_adapters": expert_adapters}
    return d


def test_a_fused_expert_stack_is_one_adapter_pair_per_layer() -> None:
    card = load_card_dict(_card())
    spec = from_catalog(card.model)
    params, tensors, _ = _trained(card, spec)
    # 48 layers: q, k, v, o (4 pairs), the router gate (1 pair), gate_up_proj and down_proj stacks (1 pair each)
    assert tensors == 2 * 48 * (4 + 1 + 2)
    # the parameters are every expert's factors all the same
    assert params == lora_trainable_params(spec, trainable_spec(card).lora)


def test_transformers_4_experts_are_a_pair_each() -> None:
    card = load_card_dict(_card(software={"transformers": "4.57.6"}))
    spec = from_catalog(card.model)
    _, tensors, _ = _trained(card, spec)
    # 128 experts x (gate, up, down) per layer besides the attention and the router
    assert tensors == 2 * 48 * (4 + 1 + 3 * 128)


def test_grouped_expert_adapters_hold_a_pair_per_projection() -> None:
    card = load_card_dict(_card(expert_adapters="grouped"))
    spec = from_catalog(card.model)
    lora = trainable_spec(card).lora
    assert lora_trained_tensors(spec, lora, grouped_expert_adapters=True) == 2 * 48 * (4 + 1 + 3)
    assert lora_trained_tensors(spec, lora) == 2 * 48 * (4 + 1 + 2)


def test_zero3_lora_optimizer_step_stays_below_full_fine_tuning() -> None:
    """DeepSpeed ZeRO-3's gradient norm runs two kernels per trained tensor (training.zero3_grad_norm_kernels): with
    the stacks counted per expert the LoRA step's optimizer phase was 0.61 s against full fine-tuning's 0.04 s."""
    lora, full = make_plan(load_card_dict(_card())), make_plan(load_card_dict(_card(scope="full")))
    opt = {p.name: p.seconds for p in lora.time_phases}["optimizer_step"]
    opt_full = {p.name: p.seconds for p in full.time_phases}["optimizer_step"]
    assert opt < opt_full
