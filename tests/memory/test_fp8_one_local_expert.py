"""Transformer Engine grouped experts in fp8 when each expert-parallel rank holds one expert (``expert_parallel`` =
``num_experts``): ``memory.fp8.routed_expert_gemms`` picks the routed groups by ``LinearGroup.is_fused_experts``,
which the memory path evaluates on specs that keep every expert (the full spec, ``memory.parallel.shard_spec``,
``plan.ranks.stage_spec``), so it equals ``LinearGroup.routed`` there, and the rank's share is
``experts // expert_parallel`` = 1 GEMM per projection per MoE layer, not 0."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.memory.fp8 import AMAX_HISTORY_LEN, FP8_TENSORS_PER_LINEAR, FP32, routed_expert_gemms
from trainfit.memory.params import linear_groups
from trainfit.memory.parallel import shard_spec

MOE_MODELS = ("openai/gpt-oss-20b", "Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V3")


@pytest.mark.parametrize("name", MOE_MODELS)
def test_one_local_expert_is_one_gemm_per_projection(name):
    spec = from_catalog(name)
    moe = spec.moe
    h, w = spec.hidden_size, moe.expert_intermediate_size
    layers = spec.num_moe_layers + spec.mtp_layers
    gemms, params = routed_expert_gemms(spec, expert_parallel=moe.num_experts)
    assert gemms == 2 * layers  # fc1 (gate and up fused) and fc2 of the rank's one expert
    assert params == layers * (h * 2 * w + w * h)


@pytest.mark.parametrize("name", MOE_MODELS)
@pytest.mark.parametrize("tp_etp", [(1, 1), (2, 2), (4, 1)])
def test_memory_specs_keep_every_expert_so_fused_means_routed(name, tp_etp):
    spec = shard_spec(from_catalog(name), *tp_etp)
    routed = [g for g in linear_groups(spec) if g.routed]
    assert routed and all(g.experts == spec.moe.num_experts for g in routed)
    assert all(g.routed == g.is_fused_experts for g in linear_groups(spec))


def _card(impl: str, *, fp8_params: bool):
    from trainfit.spec.card import load_card_dict

    par = {"strategy": "zero1", "expert_parallel": 32, "tensor_parallel_impl": impl, "gradient_checkpointing": True}
    if impl == "megatron":
        par["sequence_parallel"] = False
    return load_card_dict({
        "model": "openai/gpt-oss-20b", "method": "sft", "hardware": {"gpu": "h100", "gpus_per_node": 8, "nodes": 4},
        "parallel": par, "batch": {"micro_batch_size": 1, "seq_len": 2048, "grad_accum": 2},
        "precision": {"compute": "fp8", "fp8_recipe": "delayed", "fp8_params": fp8_params},
    })


@pytest.mark.parametrize("fp8_params", [False, True])
def test_plan_counts_the_one_local_expert_on_megatron(fp8_params):
    """gpt-oss-20b, 32 experts on 32 expert-parallel ranks: the Megatron-Core card's weights exceed the
    DTensor card's (fused experts in bf16) by one expert per MoE layer's fp8 state: the fp8 copy and transpose
    (2 B per weight; with ``fp8_params`` on Hopper the 2 B fp8 weight and transpose replace the 2 B bf16 weight)
    plus delayed scaling's amax history per GEMM."""
    from trainfit.plan import make_plan

    def weights(impl):
        return make_plan(_card(impl, fp8_params=fp8_params)).phases[0].components["weights"]

    gemms, params = routed_expert_gemms(from_catalog("openai/gpt-oss-20b"), expert_parallel=32)
    state = gemms * FP8_TENSORS_PER_LINEAR * (AMAX_HISTORY_LEN + 2) * FP32
    assert gemms == 2 * 24
    assert weights("megatron") - weights("dtensor") == pytest.approx((0.0 if fp8_params else 2.0 * params) + state)
