"""Megatron-Core MoE combines and gpt-oss blocks (memory.arch_activations.megatron_gpt_oss_moe_bytes,
plan.ranks.megatron_moe_savings): the card's parallel.moe_probs_in_experts (the combine's expert output kept or not)
and parallel.selective_checkpointing layernorm_moe_act (the pre-MLP norm's and the experts' activation outputs
freed, plan.ranks.megatron_recompute_freed); by hand and in a plan."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.errors import CardError
from trainfit.memory.arch_activations import (gpt_oss_moe_block_bytes, gpt_oss_norm_bytes,
                                              megatron_gpt_oss_moe_bytes)
from trainfit.memory.parallel import ParallelLayout

GPT_OSS = from_catalog("openai/gpt-oss-120b")


def _gpt_oss_by_hand(spec, *, t: int, rows: int, a: int = 2, per_op: bool, router_input: bool = True,
                     fc2_input: bool = True, expert_out: bool = True) -> int:
    """Every tensor of ``_gpt_oss_moe`` (full training) written out: t tokens on the router / combine side, ``rows``
    expert rows on the grouped-GEMM side."""
    moe, h = spec.moe, spec.hidden_size
    E, k, w = moe.num_experts, moe.experts_per_token, moe.expert_intermediate_size
    tokens = t * ((a * h if router_input else 0)
                  + 8 * k + a * k  # top-k indices, softmax over the top-k values
                  + 8 * k + 8 * k  # hidden_states[perm // k], sample_weights[perm]
                  + 8 * k  # gate_up_proj_bias[expert_ids]
                  + a * k  # routing weights
                  + (a * k * h if expert_out else 0)
                  + 8 * k)  # inv_perm
    experts = rows * a * (h + 2 * w + (4 * w if per_op else 0) + (w if fc2_input else 0))
    return tokens + 4 * E + experts


def test_gpt_oss_blocks_by_hand():
    T = 4096
    k = GPT_OSS.moe.experts_per_token
    assert gpt_oss_moe_block_bytes(GPT_OSS, tokens=T) == _gpt_oss_by_hand(GPT_OSS, t=T, rows=T * k, per_op=True)
    assert megatron_gpt_oss_moe_bytes(GPT_OSS, tokens=T) == _gpt_oss_by_hand(
        GPT_OSS, t=T, rows=T * k, per_op=False, expert_out=False)
    assert megatron_gpt_oss_moe_bytes(GPT_OSS, tokens=T, probs_in_experts=False) == _gpt_oss_by_hand(
        GPT_OSS, t=T, rows=T * k, per_op=False)
    assert megatron_gpt_oss_moe_bytes(GPT_OSS, tokens=T, recompute_moe_act=True, recompute_pre_mlp_norm=True) == \
        _gpt_oss_by_hand(GPT_OSS, t=T, rows=T * k, per_op=False, expert_out=False, router_input=False,
                         fc2_input=False)
    # sequence shards and expert tensor parallel: the router side on T/tp tokens, the experts on T/tp·etp·k rows
    assert megatron_gpt_oss_moe_bytes(GPT_OSS, tokens=T, sequence_shards=2, expert_tensor_parallel=2) == \
        _gpt_oss_by_hand(GPT_OSS, t=T // 2, rows=T * k, per_op=False, expert_out=False)


def _card(model: str = "openai/gpt-oss-120b", **par):
    from trainfit.spec.card import load_card_dict

    d = {"model": model, "method": "sft", "scope": "full", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
         "parallel": {"strategy": "zero1", "expert_parallel": 8, "tensor_parallel_impl": "megatron",
                      "gradient_checkpointing": False, **par},
         "batch": {"micro_batch_size": 1, "seq_len": 4096}}
    return load_card_dict(d)


def _forward_activations(card) -> float:
    from trainfit.plan import make_plan

    return next(p for p in make_plan(card).phases if p.phase.value == "forward").components["activations"]


def test_layernorm_moe_act_frees_the_norm_output_and_the_fc2_input():
    from trainfit.plan.ranks import megatron_moe_savings, megatron_recompute_freed
    from trainfit.spec.enums import RecomputeModule as M

    T, L, a, h = 4096, GPT_OSS.num_layers, 2, GPT_OSS.hidden_size
    k, w = GPT_OSS.moe.experts_per_token, GPT_OSS.moe.expert_intermediate_size
    plain = megatron_moe_savings(GPT_OSS, ParallelLayout(ep=8), tokens=T, dtype_bytes=a)
    assert plain == gpt_oss_moe_block_bytes(GPT_OSS, tokens=T) - megatron_gpt_oss_moe_bytes(GPT_OSS, tokens=T)
    assert plain == T * k * a * (4 * w + h)  # the unfused GLU's four tensors and the combine's expert output
    freed = megatron_recompute_freed(GPT_OSS, ParallelLayout(ep=8), frozenset({M.LAYERNORM, M.MOE_ACT}), tokens=T,
                                     dtype_bytes=a)
    ln = freed[0]
    assert set(freed) == set(range(L)) and len(set(freed.values())) == 1
    # the fc2 input, the router input, and the norm's per-op bytes for its input held by the checkpoint
    assert ln == T * k * a * w + T * a * h + gpt_oss_norm_bytes(GPT_OSS, tokens=T) - T * a * h
    # the same as megatron_gpt_oss_moe_bytes' own recompute flags, with the norm's per-op figure
    assert ln == (megatron_gpt_oss_moe_bytes(GPT_OSS, tokens=T) + gpt_oss_norm_bytes(GPT_OSS, tokens=T) - T * a * h
                  - megatron_gpt_oss_moe_bytes(GPT_OSS, tokens=T, recompute_moe_act=True, recompute_pre_mlp_norm=True))
    sel = _card(gradient_checkpointing="selective", selective_checkpointing="layernorm_moe_act")
    assert not sel.parallel.checkpoints_layers
    assert _forward_activations(_card()) - _forward_activations(sel) == pytest.approx(L * ln)
    # the same list spelled as Megatron-Core's recompute_modules
    mods = _card(recompute_modules=["moe_act", "layernorm"])
    assert mods.parallel.selective_checkpointing.value == "modules"
    assert _forward_activations(mods) == _forward_activations(sel)


def test_probs_in_experts_card_field():
    """Megatron-Core before 0.12.1 (parallel.moe_probs_in_experts false) keeps the combine's expert output: t·k·h per
    MoE layer on the rank's sequence shard; the default is the later Megatron-Core."""
    qwen = from_catalog("Qwen/Qwen3-30B-A3B")
    T, a = 4096, 2
    k, h, L = qwen.moe.experts_per_token, qwen.hidden_size, qwen.num_layers
    new = _card("Qwen/Qwen3-30B-A3B", tensor_parallel=2, sequence_parallel=True)
    old = _card("Qwen/Qwen3-30B-A3B", tensor_parallel=2, sequence_parallel=True, moe_probs_in_experts=False)
    assert new.parallel.moe_probs_in_experts is True
    assert _forward_activations(old) - _forward_activations(new) == L * (T // 2) * k * a * h
    # a torch DTensor card does not read it
    d_new = _card("Qwen/Qwen3-30B-A3B", tensor_parallel_impl="dtensor")
    d_old = _card("Qwen/Qwen3-30B-A3B", tensor_parallel_impl="dtensor", moe_probs_in_experts=False)
    assert _forward_activations(d_old) == _forward_activations(d_new)


def test_layernorm_moe_act_is_refused_outside_megatron():
    from trainfit.plan import make_plan

    card = _card(tensor_parallel_impl="dtensor", gradient_checkpointing="selective",
                 selective_checkpointing="layernorm_moe_act")
    with pytest.raises(CardError, match="layernorm_moe_act.*tensor_parallel_impl megatron"):
        make_plan(card)
    # any Megatron-Core MoE model takes it (tests/memory/test_megatron_recompute_modules.py)
    make_plan(_card("Qwen/Qwen3-30B-A3B", gradient_checkpointing="selective",
                    selective_checkpointing="layernorm_moe_act"))
