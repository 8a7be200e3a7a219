"""Megatron-Core MoE blocks (memory.activations.megatron_moe_bytes, plan.ranks.megatron_moe_savings): the block on the
sequence-parallel shard, the expert rows all-gathered over expert tensor parallel, the fused SwiGLU keeping only its
input; by hand, against the per-op figure, and in a plan (Megatron cards only)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.catalog.models import from_catalog
from trainfit.memory.activations import activation_bytes, megatron_moe_bytes, moe_block_bytes
from trainfit.memory.parallel import ParallelLayout, shard_spec
from trainfit.spec.enums import Attention, Scope
from trainfit.spec.training import TrainableSpec

QWEN3_30B = from_catalog("Qwen/Qwen3-30B-A3B")
FULL = TrainableSpec(scope=Scope.FULL)


def _by_hand(spec, *, t: int, rows: int, a: int = 2, act_gate: bool, expert_out: bool = True) -> int:
    """Every tensor of ``_moe`` (full training) written out: t tokens on the router / combine side, ``rows`` expert
    rows on the grouped-GEMM side; ``expert_out``: the combine keeps the expert output (the per-op figure, and
    Megatron-Core before 0.12.1)."""
    moe, h = spec.moe, spec.hidden_size
    E, k, w = moe.num_experts, moe.experts_per_token, moe.expert_intermediate_size
    tokens = t * (a * h  # router input
                  + 4 * E  # fp32 softmax
                  + 8 * k  # top-k indices
                  + 4 + 4 * k  # renormalisation sum and values
                  + 8 * k + 8 * k  # hidden_states[perm // k], sample_weights[perm]
                  + a * k  # routing weights (combine mul)
                  + (a * k * h if expert_out else 0)  # expert output (combine mul)
                  + 8 * k)  # weighted_out[inv_perm]
    experts = rows * a * (h + 2 * w + w) + (rows * a * w if act_gate else 0)  # fc1 in, fc1 out, [act(gate)], fc2 in
    return tokens + 4 * E + experts  # + grouped_mm offsets


@pytest.mark.parametrize(("tp", "etp"), [(1, 1), (2, 1), (4, 1), (2, 2), (4, 2)])
@pytest.mark.parametrize("probs_in_experts", [True, False])
def test_megatron_block_by_hand(tp, etp, probs_in_experts):
    T = 4096
    ss = shard_spec(QWEN3_30B, tp, etp)
    k = ss.moe.experts_per_token
    got = megatron_moe_bytes(ss, tokens=T, sequence_shards=tp, expert_tensor_parallel=etp,
                             probs_in_experts=probs_in_experts)
    assert got == _by_hand(ss, t=T // tp, rows=T // tp * etp * k, act_gate=False, expert_out=not probs_in_experts)
    # the per-op figure: every token and T·k rows on this rank, act(gate) kept beside the SwiGLU input
    assert moe_block_bytes(ss, tokens=T) == _by_hand(ss, t=T, rows=T * k, act_gate=True)


def test_per_op_block_is_what_activation_bytes_counts_for_a_moe_layer():
    """moe_block_bytes is the MoE part of activation_bytes' layer (the rest of the layer unchanged)."""
    from dataclasses import replace

    T = 512
    act = activation_bytes(QWEN3_30B, micro_batch_size=1, seq_len=T, attention=Attention.SDPA, trainable=FULL)
    wider = replace(QWEN3_30B, moe=replace(QWEN3_30B.moe, expert_intermediate_size=2 * QWEN3_30B.moe.expert_intermediate_size))
    act2 = activation_bytes(wider, micro_batch_size=1, seq_len=T, attention=Attention.SDPA, trainable=FULL)
    assert act2.per_layer[0] - act.per_layer[0] == moe_block_bytes(wider, tokens=T) - moe_block_bytes(QWEN3_30B, tokens=T)


@settings(max_examples=30, deadline=None)
@given(t=st.integers(1, 3000), tp=st.sampled_from([1, 2, 4, 8]), a=st.sampled_from([2, 4]),
       f=st.sampled_from([0.0, 1.0, 1.0 + 4 / 128]))
def test_fused_swiglu_alone_saves_one_gate_copy_and_the_shard_the_rest(t, tp, a, f):
    """Without sequence parallel the only differences are act(gate) on every expert row and, with the probabilities
    inside the experts (Megatron-Core >= 0.12.1), the combine's expert output; with it, the block shrinks to the
    shard (never more than the per-op figure)."""
    k, w, h = QWEN3_30B.moe.experts_per_token, QWEN3_30B.moe.expert_intermediate_size, QWEN3_30B.hidden_size
    per_op = moe_block_bytes(QWEN3_30B, tokens=t, compute_dtype_bytes=a, linear_input_bytes=f)
    meg = megatron_moe_bytes(QWEN3_30B, tokens=t, compute_dtype_bytes=a, linear_input_bytes=f)
    assert per_op - meg == t * k * a * (w + h)
    old = megatron_moe_bytes(QWEN3_30B, tokens=t, compute_dtype_bytes=a, linear_input_bytes=f, probs_in_experts=False)
    assert per_op - old == t * k * a * w
    sharded = megatron_moe_bytes(QWEN3_30B, tokens=t * tp, sequence_shards=tp, compute_dtype_bytes=a,
                                 linear_input_bytes=f)
    assert sharded == meg  # t·tp tokens over tp shards: the shard's block
    assert sharded <= moe_block_bytes(QWEN3_30B, tokens=t * tp, compute_dtype_bytes=a, linear_input_bytes=f)


def _card(impl: str = "megatron", *, tp: int = 2, sp: bool = True, model: str = "Qwen/Qwen3-30B-A3B",
          scope: str = "full"):
    from trainfit.spec.card import load_card_dict

    d = {"model": model, "method": "sft", "scope": scope, "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
         "parallel": {"strategy": "zero1", "tensor_parallel": tp, "sequence_parallel": sp, "expert_parallel": 4,
                      "tensor_parallel_impl": impl, "gradient_checkpointing": False},
         "batch": {"micro_batch_size": 1, "seq_len": 4096}}
    return load_card_dict(d)


def test_savings_dict_megatron_only():
    from trainfit.plan.ranks import megatron_moe_savings, megatron_activation_savings

    T = 4096
    ss = shard_spec(QWEN3_30B, 2)
    sp = ParallelLayout(tp=2, sp=True, ep=4)
    moe_less = megatron_moe_savings(ss, sp, tokens=T, dtype_bytes=2)
    assert moe_less == moe_block_bytes(ss, tokens=T) - megatron_moe_bytes(ss, tokens=T, sequence_shards=2) > 0
    got = megatron_activation_savings(_card(), ss, sp, tokens=T, dtype_bytes=2, trainable=FULL)
    # QKV's input shard and the MoE block (every Qwen3-30B-A3B layer is a MoE layer); Transformer Engine's norms keep
    # no fp32 copy of their input (megatron_te_norm_savings): the input and pre-MLP norms on the sequence shard, the
    # per-head q/k norms on every token at the shard's widths
    te_norms = 4 * (2 * (T // 2) * ss.hidden_size + T * (ss.q_dim + ss.kv_dim))
    assert got[0] == 2 * (T - T // 2) * ss.hidden_size + moe_less + te_norms
    # tp 1: no sequence shard, the fused SwiGLU, MoE layers only, the norms; the head entry is the final norm's
    one = ParallelLayout(ep=4)
    nosp = megatron_activation_savings(_card(tp=1, sp=False), QWEN3_30B, one, tokens=T, dtype_bytes=2, trainable=FULL)
    k, w, h = QWEN3_30B.moe.experts_per_token, QWEN3_30B.moe.expert_intermediate_size, QWEN3_30B.hidden_size
    assert nosp.pop("head") == 4 * T * h and set(nosp) == set(range(QWEN3_30B.num_layers))
    norms = 4 * T * (2 * h + QWEN3_30B.q_dim + QWEN3_30B.kv_dim)
    assert all(v == T * k * 2 * (w + h) + norms for v in nosp.values())  # act(gate), the combine's expert output
    # the torch DTensor plan keeps the per-op figure; a dense Megatron model without sequence parallel saves only
    # its fused SwiGLU's act(gate) (test_megatron_dense_activations.py)
    assert megatron_activation_savings(_card("dtensor"), ss, sp, tokens=T, dtype_bytes=2, trainable=FULL) == {}
    llama = from_catalog("meta-llama/Llama-3.1-8B")
    assert megatron_activation_savings(_card(tp=1, sp=False, model="meta-llama/Llama-3.1-8B"), llama, ParallelLayout(),
                                     tokens=T, dtype_bytes=2, trainable=FULL) == {
        **{i: float(T * 2 * llama.intermediate_size + 2 * 4 * T * llama.hidden_size) for i in range(llama.num_layers)},
        "head": float(4 * T * llama.hidden_size)}


def test_plan_counts_the_megatron_block():
    """End of forward on a tp=2 sequence-parallel rank: the Megatron card saves the per-op figure less, per layer, by
    the QKV shard and the MoE block's difference; the DTensor card keeps the per-op figure."""
    from trainfit.plan import make_plan
    from trainfit.plan.ranks import megatron_moe_savings

    def act(card):
        return next(p for p in make_plan(card).phases if p.phase.value == "forward").components["activations"]

    T, L = 4096, QWEN3_30B.num_layers
    ss = shard_spec(QWEN3_30B, 2)
    moe_less = megatron_moe_savings(ss, ParallelLayout(tp=2, sp=True, ep=4), tokens=T, dtype_bytes=2)
    head = 2 * (T - T // 2) * ss.hidden_size  # the output layer's input shard
    residual_norm = 4 * (T // 2) * ss.hidden_size  # a Transformer Engine norm's fp32 input copy not kept
    te_norms = 2 * residual_norm + 4 * T * (ss.q_dim + ss.kv_dim)
    assert act(_card("dtensor")) - act(_card()) == (L * (2 * (T - T // 2) * ss.hidden_size + moe_less + te_norms)
                                                    + head + residual_norm)
