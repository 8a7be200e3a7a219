"""Transformer Engine fp8 linears save the fp8 copy of their input (memory.fp8.saved_input_bytes): the per-layer
saved bytes by hand, per recipe, the torchao / TE split, Megatron's sequence-parallel shard and a plan."""

from __future__ import annotations

from math import ceil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.catalog.models import from_catalog
from trainfit.memory.activations import activation_bytes
from trainfit.memory.fp8 import saved_input_bytes, transformer_engine_linears
from trainfit.spec.enums import Attention, Fp8Recipe, Scope, TensorParallelImpl
from trainfit.spec.training import LoraSpec, TrainableSpec

LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")
FULL = TrainableSpec(scope=Scope.FULL)


def _act(spec, *, fp8: float = 0.0, b: int = 1, s: int = 512, compiled: bool = False, trainable=FULL,
         attention: Attention = Attention.SDPA):
    return activation_bytes(spec, micro_batch_size=b, seq_len=s, attention=attention, trainable=trainable,
                            compiled=compiled, linear_input_bytes=fp8)


def test_bytes_per_saved_element_by_recipe():
    # Float8Tensor: 1 B; Float8BlockwiseQTensor 1x128 tiles: 1 B + one fp32 scale per 128 elements
    assert saved_input_bytes(recipe=Fp8Recipe.DELAYED) == 1.0
    assert saved_input_bytes(recipe=Fp8Recipe.CURRENT) == 1.0
    assert saved_input_bytes(recipe=Fp8Recipe.BLOCKWISE) == 1.0 + 4 / 128


def test_which_stack_runs_the_fp8_linears():
    te, meg, dt = transformer_engine_linears, TensorParallelImpl.MEGATRON, TensorParallelImpl.DTENSOR
    assert te(recipe=Fp8Recipe.DELAYED, tensor_parallel_impl=dt) and te(recipe=Fp8Recipe.BLOCKWISE, tensor_parallel_impl=dt)
    assert te(recipe=Fp8Recipe.CURRENT, tensor_parallel_impl=meg)  # Megatron-Core: TE Float8CurrentScaling
    assert not te(recipe=Fp8Recipe.CURRENT, tensor_parallel_impl=dt)  # torchtitan: torchao float8


@pytest.mark.parametrize("compiled", [False, True])
def test_llama_layer_by_hand(compiled):
    """Per token of a Llama layer: the fused QKV's ln_out (h), fc1's ln_out (h) and fc2's input (I) are saved at
    1 B instead of 2; the attention projection saves a 1 B copy of the attention output the kernel keeps anyway."""
    s = 512
    h, i, qd = LLAMA8.hidden_size, LLAMA8.intermediate_size, LLAMA8.q_dim
    bf16, fp8 = _act(LLAMA8, s=s, compiled=compiled), _act(LLAMA8, fp8=1.0, s=s, compiled=compiled)
    for lb, lf in zip(bf16.per_layer, fp8.per_layer):
        assert lb - lf == s * ((2 - 1) * (h + h + i) - 1 * qd) == 512 * (4096 + 4096 + 14336 - 4096)
    # the lm_head input, the norms, the checkpointed layer inputs and the embedding keep their bf16 bytes
    assert (fp8.head, fp8.embedding, fp8.checkpointed_per_layer) == (bf16.head, bf16.embedding,
                                                                      bf16.checkpointed_per_layer)


def test_blockwise_adds_its_tile_scales():
    s, h, i, qd = 512, LLAMA8.hidden_size, LLAMA8.intermediate_size, LLAMA8.q_dim
    one, blk = _act(LLAMA8, fp8=1.0, s=s), _act(LLAMA8, fp8=1.0 + 4 / 128, s=s)
    saved = s * (h + qd + h + i)  # elements of the four saved inputs (q/k/v's shared one, o, gate/up's, down)
    assert blk.per_layer[0] - one.per_layer[0] == saved * 4 / 128
    assert blk.per_layer[0] == one.per_layer[0] + ceil(s * h * 4 / 128) * 2 + ceil(s * qd * 4 / 128) + ceil(s * i * 4 / 128)


def test_eager_attention_saves_the_fp8_copy_in_place_of_the_bf16_one():
    s, qd = 256, LLAMA8.q_dim
    h, i = LLAMA8.hidden_size, LLAMA8.intermediate_size
    bf16, fp8 = _act(LLAMA8, s=s, attention=Attention.EAGER), _act(LLAMA8, fp8=1.0, s=s, attention=Attention.EAGER)
    # eager: o_proj's input is a contiguous copy either way, saved at 2 B in bf16, 1 B under fp8
    assert bf16.per_layer[0] - fp8.per_layer[0] == s * (h + h + i + qd)


def test_frozen_base_saves_no_input_either_way():
    lora = TrainableSpec(scope=Scope.LORA, lora=LoraSpec(rank=16))
    assert _act(LLAMA8, trainable=lora) == _act(LLAMA8, fp8=1.0, trainable=lora)


def test_moe_expert_inputs():
    spec = from_catalog("Qwen/Qwen3-30B-A3B")
    s, moe, h = 256, spec.moe, spec.hidden_size
    k, w = moe.experts_per_token, moe.expert_intermediate_size
    bf16, fp8 = _act(spec, s=s), _act(spec, fp8=1.0, s=s)
    # attention: q/k/v input h, o copy -qd; MoE: the grouped GEMMs' inputs (k rows per token: h and w); the router
    # keeps its bf16 input
    assert bf16.per_layer[0] - fp8.per_layer[0] == s * (h - spec.q_dim + k * (h + w))


@settings(max_examples=25, deadline=None)
@given(b=st.integers(1, 4), s=st.integers(1, 700), f=st.sampled_from([1.0, 1.0 + 4 / 128, 2.0]))
def test_two_bytes_per_element_is_bf16_plus_the_projection_copy(b, s, f):
    """At 2 B per element the TE model saves what bf16 saves plus o_proj's own copy; fewer bytes save less,
    in proportion to the saved elements."""
    bf16, te = _act(LLAMA8, b=b, s=s), _act(LLAMA8, fp8=f, b=b, s=s)
    T, h, i, qd = b * s, LLAMA8.hidden_size, LLAMA8.intermediate_size, LLAMA8.q_dim
    expect = bf16.per_layer[0] - 2 * T * (2 * h + i) + 2 * ceil(T * h * f) + ceil(T * i * f) + ceil(T * qd * f)
    assert te.per_layer[0] == expect
    if f == 2.0:
        assert te.per_layer[0] == bf16.per_layer[0] + 2 * T * qd


def _megatron_card(compute: str, recipe: str | None = None, impl: str = "megatron"):
    from trainfit.spec.card import load_card_dict

    prec = {"compute": compute} | ({"fp8_recipe": recipe} if recipe else {})
    return load_card_dict({
        "model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
        "parallel": {"strategy": "zero1", "tensor_parallel": 4, "sequence_parallel": True,
                     "tensor_parallel_impl": impl, "gradient_checkpointing": False},
        "batch": {"micro_batch_size": 1, "seq_len": 4096}, "precision": prec})


def test_sequence_parallel_shard_is_saved_in_fp8_too():
    """Megatron-Core under sequence parallel: QKV and fc1 save (and gather again) their T/tp-token fp8 shard; the
    savings over the per-op model are in fp8 bytes for them and in bf16 for the output layer."""
    from trainfit.memory.parallel import ParallelLayout, shard_spec
    from trainfit.plan.ranks import megatron_activation_savings

    card = _megatron_card("fp8", "current")
    layout = ParallelLayout(tp=4, sp=True, dp=2)
    ss = shard_spec(LLAMA8, 4)
    T, h = 4096, LLAMA8.hidden_size
    bf16 = megatron_activation_savings(card, ss, layout, tokens=T, dtype_bytes=2, trainable=FULL)
    fp8 = megatron_activation_savings(card, ss, layout, tokens=T, dtype_bytes=2, trainable=FULL, linear_input_bytes=1.0)
    glu = T * 2 * ss.intermediate_size  # the fused SwiGLU's act(gate), bf16 either way (test_megatron_dense_activations)
    norm = 4 * (T // 4) * h  # a Transformer Engine norm's fp32 input copy not kept (plan.ranks.megatron_te_norm_savings)
    assert bf16[0] == 2 * (2 * (T - T // 4) * h) + glu + 2 * norm and fp8[0] == 2 * (1 * (T - T // 4) * h) + glu + 2 * norm
    assert fp8["head"] == bf16["head"] == 2 * (T - T // 4) * h + norm


def test_plan_te_fp8_saves_less_and_torchao_fp8_saves_bf16():
    from trainfit.plan import make_plan

    def act(card):  # end of forward: every layer's saved tensors
        return next(p for p in make_plan(card).phases if p.phase.value == "forward").components["activations"]

    bf16 = act(_megatron_card("bf16"))
    te = act(_megatron_card("fp8", "current"))
    # per layer of a tp=4 rank: QKV's and fc1's T/4-token shards (h), fc2's input (I/4) at 1 B, o_proj's copy (qd/4)
    T, h, i, qd = 4096, LLAMA8.hidden_size, LLAMA8.intermediate_size, LLAMA8.q_dim
    assert bf16 - te == LLAMA8.num_layers * (T // 4 * h * 2 + T * i // 4 - T * qd // 4)
    assert act(_megatron_card("fp8", "delayed")) == te
    assert act(_megatron_card("fp8", "blockwise")) > te
    # torchtitan's DTensor plan with current scaling is torchao float8: its linears save the bf16 input
    assert act(_megatron_card("fp8", "current", impl="dtensor")) == act(_megatron_card("bf16", impl="dtensor"))
    # the plan says which
    te_notes = [n for n in make_plan(_megatron_card("fp8", "current")).assumptions if n.startswith("fp8 activations")]
    ao_notes = [n for n in make_plan(_megatron_card("fp8", "current", impl="dtensor")).assumptions
                if n.startswith("fp8 activations")]
    assert len(te_notes) == 1 and "Transformer Engine" in te_notes[0] and "(1 B per element)" in te_notes[0]
    assert len(ao_notes) == 1 and "torchao" in ao_notes[0] and "bf16 input" in ao_notes[0]
