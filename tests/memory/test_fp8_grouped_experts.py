"""Routed experts under Transformer Engine fp8 (``trainfit.memory.fp8`` module docstring, "Routed experts"):
Megatron-Core's TEGroupedMLP runs TE GroupedLinear modules, whose per-expert weights get the fp8 copies, transposes,
per-GEMM scaling state and (``fp8_params``) fp8 primary storage of a ``te.Linear``; other runtimes' fused experts stay
bf16, and dense models do not move."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.memory.fp8 import (
    AMAX_HISTORY_LEN,
    FP8_TENSORS_PER_LINEAR,
    FP32,
    fp8_model_bytes,
    fp8_param_model_bytes,
    routed_expert_gemms,
)
from trainfit.spec.enums import Fp8Recipe

QWEN3_MOE = from_catalog("Qwen/Qwen3-30B-A3B")
LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")


def test_local_experts_are_one_gemm_each_per_projection():
    moe = QWEN3_MOE.moe
    h, w, layers = QWEN3_MOE.hidden_size, moe.expert_intermediate_size, QWEN3_MOE.num_moe_layers
    for ep in (1, 8, 16):
        local = moe.num_experts // ep
        gemms, params = routed_expert_gemms(QWEN3_MOE, expert_parallel=ep)
        assert gemms == 2 * layers * local  # fc1 (gate and up fused) and fc2
        assert params == layers * local * (h * 2 * w + w * h)


@pytest.mark.parametrize("ep", [1, 8])
def test_delayed_scaling_adds_copies_and_history_per_expert_gemm(ep):
    gemms, params = routed_expert_gemms(QWEN3_MOE, expert_parallel=ep)
    extra = (fp8_model_bytes(QWEN3_MOE, recipe=Fp8Recipe.DELAYED, expert_parallel=ep)
             - fp8_model_bytes(QWEN3_MOE, recipe=Fp8Recipe.DELAYED))
    assert extra == pytest.approx(2.0 * params + gemms * FP8_TENSORS_PER_LINEAR * (AMAX_HISTORY_LEN + 2) * FP32)


def test_current_scaling_adds_scales_only_as_for_dense_linears():
    gemms, _ = routed_expert_gemms(QWEN3_MOE, expert_parallel=8)
    extra = (fp8_model_bytes(QWEN3_MOE, recipe=Fp8Recipe.CURRENT, expert_parallel=8)
             - fp8_model_bytes(QWEN3_MOE, recipe=Fp8Recipe.CURRENT))
    assert extra == pytest.approx(gemms * FP8_TENSORS_PER_LINEAR * 2 * FP32)


@pytest.mark.parametrize("non_tn", [False, True])
def test_fp8_primary_expert_weights(non_tn):
    gemms, params = routed_expert_gemms(QWEN3_MOE, expert_parallel=4)
    extra = (fp8_param_model_bytes(QWEN3_MOE, recipe=Fp8Recipe.DELAYED, non_tn_gemm=non_tn, expert_parallel=4)
             - fp8_param_model_bytes(QWEN3_MOE, recipe=Fp8Recipe.DELAYED, non_tn_gemm=non_tn))
    per = 1.0 if non_tn else 2.0
    assert extra == pytest.approx(per * params + gemms * FP8_TENSORS_PER_LINEAR * (AMAX_HISTORY_LEN + 2) * FP32)


@pytest.mark.parametrize("recipe", list(Fp8Recipe))
def test_dense_models_do_not_move(recipe):
    assert fp8_model_bytes(LLAMA8, recipe=recipe, expert_parallel=1) == fp8_model_bytes(LLAMA8, recipe=recipe)
    assert (fp8_param_model_bytes(LLAMA8, recipe=recipe, non_tn_gemm=False, expert_parallel=1)
            == fp8_param_model_bytes(LLAMA8, recipe=recipe, non_tn_gemm=False))


def _card(impl: str, *, gpu: str = "b200", fp8_params: bool = True):
    from trainfit.spec.card import load_card_dict

    par = {"strategy": "zero1", "expert_parallel": 8, "tensor_parallel_impl": impl, "gradient_checkpointing": True}
    if impl == "megatron":
        par["sequence_parallel"] = False
    return load_card_dict({
        "model": "Qwen/Qwen3-30B-A3B", "method": "sft", "hardware": {"gpu": gpu, "gpus_per_node": 8},
        "parallel": par, "batch": {"micro_batch_size": 1, "seq_len": 2048, "grad_accum": 2},
        "precision": {"compute": "fp8", "fp8_recipe": "delayed", "fp8_params": fp8_params},
    })


def test_plan_term_counts_experts_on_megatron_only():
    from trainfit.plan.terms import fp8_weight_bytes

    _, params = routed_expert_gemms(QWEN3_MOE, expert_parallel=8)
    mega = _card("megatron")
    # Blackwell: an fp8 primary expert weight holds 1 B in place of the 2 B bf16 weight
    with_experts = fp8_weight_bytes(mega, QWEN3_MOE, scale=1.0)[0]
    bf16_copy = fp8_weight_bytes(_card("megatron", fp8_params=False), QWEN3_MOE, scale=1.0)[0]
    assert bf16_copy > 0 > with_experts
    other = fp8_weight_bytes(_card("dtensor"), QWEN3_MOE, scale=1.0)[0]
    gemms, _ = routed_expert_gemms(QWEN3_MOE, expert_parallel=8)
    assert other - with_experts == pytest.approx(
        params - gemms * FP8_TENSORS_PER_LINEAR * (AMAX_HISTORY_LEN + 2) * FP32)
