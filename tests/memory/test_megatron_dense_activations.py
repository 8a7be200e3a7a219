"""Megatron-Core dense MLPs (memory.activations.megatron_dense_mlp_bytes, plan.ranks.megatron_dense_mlp_savings): a
SiLU-gated MLP runs the fused SwiGLU, which saves only its input, so act(gate) is not kept a second time; other
activations, the compiled rules (which already recompute it) and non-Megatron cards keep the per-op figure."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.catalog.models import from_catalog
from trainfit.memory.activations import activation_bytes, dense_mlp_bytes, megatron_dense_mlp_bytes
from trainfit.memory.parallel import ParallelLayout, shard_spec
from trainfit.spec.enums import Attention, Scope
from trainfit.spec.training import TrainableSpec

LLAMA = from_catalog("meta-llama/Llama-3.1-8B")
QWEN3 = from_catalog("Qwen/Qwen3-8B")  # qk-norm: the compiled rules do not apply
GEMMA2 = from_catalog("google/gemma-2-9b")  # gelu_pytorch_tanh: Megatron's MLP does not fuse it
FULL = TrainableSpec(scope=Scope.FULL)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_dense_mlp_by_hand(tp):
    """fc1 input, gate, act(gate) (per-op only), up, fc2 input: T·a·(h + 4w) per-op, T·a·(h + 3w) fused."""
    T, a = 4096, 2
    ss = shard_spec(LLAMA, tp)
    h, w = ss.hidden_size, ss.intermediate_size
    assert w == LLAMA.intermediate_size // tp
    assert dense_mlp_bytes(ss, tokens=T) == T * a * (h + 4 * w)
    assert megatron_dense_mlp_bytes(ss, tokens=T) == T * a * (h + 3 * w)
    # the compiled rules already recompute act(gate): nothing left to save
    assert megatron_dense_mlp_bytes(ss, tokens=T, compiled=True) == dense_mlp_bytes(ss, tokens=T, compiled=True)
    # not SiLU: Megatron-Core's MLP runs the activation unfused, the per-op figure stands
    g = shard_spec(GEMMA2, tp)
    assert megatron_dense_mlp_bytes(g, tokens=T) == dense_mlp_bytes(g, tokens=T)


def test_per_op_mlp_is_what_activation_bytes_counts_for_a_dense_layer():
    """dense_mlp_bytes is the MLP part of activation_bytes' layer (the rest of the layer unchanged)."""
    from dataclasses import replace

    T = 512
    act = activation_bytes(LLAMA, micro_batch_size=1, seq_len=T, attention=Attention.SDPA, trainable=FULL)
    wider = replace(LLAMA, intermediate_size=2 * LLAMA.intermediate_size)
    act2 = activation_bytes(wider, micro_batch_size=1, seq_len=T, attention=Attention.SDPA, trainable=FULL)
    assert act2.per_layer[1] - act.per_layer[1] == dense_mlp_bytes(wider, tokens=T) - dense_mlp_bytes(LLAMA, tokens=T)


@settings(max_examples=30, deadline=None)
@given(t=st.integers(1, 3000), a=st.sampled_from([2, 4]), f=st.sampled_from([0.0, 1.0, 1.0 + 4 / 128]))
def test_fused_swiglu_saves_one_gate_copy(t, a, f):
    w = QWEN3.intermediate_size
    per_op = dense_mlp_bytes(QWEN3, tokens=t, compute_dtype_bytes=a, linear_input_bytes=f)
    assert per_op - megatron_dense_mlp_bytes(QWEN3, tokens=t, compute_dtype_bytes=a, linear_input_bytes=f) == t * a * w


def _card(impl: str = "megatron", *, tp: int = 2, sp: bool = True, model: str = "meta-llama/Llama-3.1-8B",
          compile_: bool = False):
    from trainfit.spec.card import load_card_dict

    d = {"model": model, "method": "sft", "scope": "full", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
         "parallel": {"strategy": "zero1", "tensor_parallel": tp, "sequence_parallel": sp,
                      "tensor_parallel_impl": impl, "gradient_checkpointing": False, "compile": compile_},
         "batch": {"micro_batch_size": 1, "seq_len": 4096}}
    return load_card_dict(d)


def test_savings_dict_megatron_silu_uncompiled_only():
    from trainfit.plan.ranks import megatron_dense_mlp_savings, megatron_activation_savings

    T, L = 4096, LLAMA.num_layers
    # tp 1: no sequence shard, act(gate) on every dense layer; the two Transformer Engine norms of each layer and the
    # final norm keep no fp32 copy of their input (megatron_te_norm_savings: 4 B a token and hidden element each)
    h = LLAMA.hidden_size
    one = megatron_activation_savings(_card(tp=1, sp=False), LLAMA, ParallelLayout(), tokens=T, dtype_bytes=2,
                                    trainable=FULL)
    assert one == {**{i: float(T * 2 * LLAMA.intermediate_size + 2 * 4 * T * h) for i in range(L)},
                   "head": float(4 * T * h)}
    # tp 2 with sequence parallel: the QKV and fc1 input shards and act(gate) of the shard's width
    ss = shard_spec(LLAMA, 2)
    glu = megatron_dense_mlp_savings(ss, tokens=T, dtype_bytes=2)
    assert glu == T * 2 * ss.intermediate_size
    got = megatron_activation_savings(_card(), ss, ParallelLayout(tp=2, sp=True), tokens=T, dtype_bytes=2,
                                    trainable=FULL)
    assert got[0] == 2 * 2 * (T - T // 2) * ss.hidden_size + glu + 2 * 4 * (T // 2) * ss.hidden_size
    assert got["head"] == 2 * (T - T // 2) * ss.hidden_size + 4 * (T // 2) * ss.hidden_size
    # compiled rules (they already drop act(gate)), a GELU MLP, the DTensor plan: nothing more
    assert megatron_activation_savings(_card(tp=1, sp=False, compile_=True), LLAMA, ParallelLayout(), tokens=T,
                                     dtype_bytes=2, trainable=FULL) == {}
    assert megatron_activation_savings(_card(tp=1, sp=False, model="google/gemma-2-9b"), GEMMA2, ParallelLayout(),
                                     tokens=T, dtype_bytes=2, trainable=FULL) == {}
    assert megatron_activation_savings(_card("dtensor"), ss, ParallelLayout(tp=2, sp=True), tokens=T, dtype_bytes=2,
                                     trainable=FULL) == {}
    # Qwen3 (qk-norm): compile on, the compiled rules apply (tests/unit/test_compiled_qk_norm_layer.py) and already
    # drop act(gate): nothing more
    q = megatron_activation_savings(_card(tp=1, sp=False, model="Qwen/Qwen3-8B", compile_=True), QWEN3,
                                  ParallelLayout(), tokens=T, dtype_bytes=2, trainable=FULL)
    assert q == {}


def test_plan_counts_the_fused_swiglu():
    """End of forward on a tp=2 sequence-parallel rank: the Megatron card saves the per-op figure less, per layer, by
    the QKV and fc1 input shards and act(gate) of the shard's width; the DTensor card keeps the per-op figure. (A
    card without model parallelism is not planned rank by rank and keeps the per-op figure.)"""
    from trainfit.plan import make_plan

    def act(card):
        return next(p for p in make_plan(card).phases if p.phase.value == "forward").components["activations"]

    T, L = 4096, LLAMA.num_layers
    ss = shard_spec(LLAMA, 2)
    shard = 2 * (T - T // 2) * ss.hidden_size
    norms = 4 * (T // 2) * ss.hidden_size  # each Transformer Engine norm's fp32 input copy (megatron_te_norm_savings)
    assert act(_card("dtensor")) - act(_card()) == L * (2 * shard + T * 2 * ss.intermediate_size + 2 * norms) + shard + norms
    # compiled rules: the shards only
    assert act(_card("dtensor", compile_=True)) - act(_card(compile_=True)) == L * 2 * shard + shard
