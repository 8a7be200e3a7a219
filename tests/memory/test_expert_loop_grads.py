"""``memory.expert_loop_grads``: transformers v5's eager experts (``parallel.moe_experts: loop_v5``) hold the stacked
expert weights' gradient sums and one more zero stack inside each MoE layer's backward (measured on CPU by
benchmarks/expert_loop_v5_memory.py: peak live whole-stack bytes = gate_up + down + gate_up, the adds in place)."""

from __future__ import annotations

import pytest

from trainfit.memory.expert_loop_grads import loop_stack_grad_moment_bytes
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

GIB = 2**30


def test_merged_stacks_hold_both_sums_and_the_newest_zero_stack():
    # the CPU measurement's Mixtral-layout block: gate_up 196,608 B, down 98,304 B, peak 491,520 B
    assert loop_stack_grad_moment_bytes(stack_bytes=(196_608.0, 98_304.0), stacks_are_leaves=False) == 491_520.0


def test_trained_stacks_add_only_the_newest_zero_stack():
    """Full fine-tuning: the sums become .grad, which the layer's gradients count already."""
    assert loop_stack_grad_moment_bytes(stack_bytes=(196_608.0, 98_304.0), stacks_are_leaves=True) == 196_608.0
    assert loop_stack_grad_moment_bytes(stack_bytes=(), stacks_are_leaves=False) == 0.0


def _card(experts: str, scope: str = "lora") -> dict:
    return {"model": "mistralai/Mixtral-8x7B-v0.1", "scope": scope, "attention": "sdpa",
            "hardware": {"gpu": "h200", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True, "moe_experts": experts},
            "batch": {"micro_batch_size": 1, "seq_len": 2048}, "precision": {"optimizer_impl": "fused"}}


def test_mixtral_lora_loop_v5_backward_holds_the_stacks():
    """Mixtral-8x7B, LoRA all-linear (PEFT wraps both stacks): 8 x 2·14336 x 4096 bf16 = 1.75 GiB of gate_up_proj,
    0.875 GiB of down_proj: a 4.375 GiB moment (+ one expert's share of the MLP buffers) in every layer's backward;
    the plan's allocated peak rises by about that over the v4 loop's, whose experts are modules of linears. The v4
    loop's adapter is smaller besides (w1 and w3 are two rank-r pairs, not the fused stack's rank-2r pair:
    memory.lora._V4_EXPERT_MODULES): its weights, gradients and optimizer states are set apart."""
    loop_v5 = make_plan(load_card_dict(_card("loop_v5")))
    loop = make_plan(load_card_dict(_card("loop")))
    adapter = ("adapter_weights", "gradients", "optimizer_states")
    smaller = sum(loop_v5.peak.components[k] - loop.peak.components[k] for k in adapter) / GIB
    assert 1.5 < smaller < 2.0, smaller  # 117 M fewer fp32 adapter parameters, 16 B each with AdamW
    grow = (loop_v5.peak.allocated - loop.peak.allocated) / GIB - smaller
    assert 4.0 < grow < 4.4, grow


def test_frozen_stacks_have_no_moment():
    """LoRA on the attention only: the stacks get no gradient, loop_v5 plans the v4 loop's memory."""
    cards = [_card(e) for e in ("loop_v5", "loop")]
    for c in cards:
        c["lora"] = {"targets": ["q_proj", "k_proj", "v_proj", "o_proj"]}
    a, b = (make_plan(load_card_dict(c)) for c in cards)
    assert a.peak.allocated == pytest.approx(b.peak.allocated)
