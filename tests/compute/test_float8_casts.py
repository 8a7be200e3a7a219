"""torchao float8 casts in the time model (``compute.float8_casts``): the roofline counts, their place in the
inventory, and that Transformer Engine's casts are unchanged."""

import pytest

from trainfit.catalog.models import resolve_model
from trainfit.compute import float8_casts as fc
from trainfit.compute.inventory import FP8_CAST_BYTES, FP8_TRANSPOSE_BYTES, step_inventory
from trainfit.compute.training import pass_seconds
from trainfit.compute.rates import default_rates
from trainfit.catalog.gpus import resolve_gpu
from trainfit.memory.params import linear_groups

SPEC = resolve_model("meta-llama/Llama-3.1-8B")
T = 8192.0


def _sums():
    ins = sum(g.in_features * g.count for g in linear_groups(SPEC))
    outs = sum(g.out_features * g.count for g in linear_groups(SPEC))
    weights = sum(g.in_features * g.out_features * g.count for g in linear_groups(SPEC))
    return ins, outs, weights


def test_compiled_counts_are_torchao_roofline():
    # roofline_utils.py tensorwise: activation 2 (amax) + 2 + 1 + 1 (bf16 in, fp8 dim0 and dim1 out); weight 2 + 3 + 3
    assert fc.TORCHAO_COMPILED.input_forward_bytes == 6.0
    assert fc.TORCHAO_COMPILED.grad_output_backward_bytes == 6.0
    assert fc.TORCHAO_COMPILED.weight_forward_bytes + fc.TORCHAO_COMPILED.weight_backward_bytes == 8.0
    assert fc.TORCHAO_COMPILED.input_backward_bytes == 0.0
    assert fc.TORCHAO_COMPILED.fused
    assert fc.eager_cast_bytes() == 33.0


def test_cast_traffic_choice():
    assert fc.cast_traffic(transformer_engine=True, compiled=True) is fc.TRANSFORMER_ENGINE
    assert fc.cast_traffic(transformer_engine=False, compiled=True) is fc.TORCHAO_COMPILED
    assert fc.cast_traffic(transformer_engine=False, compiled=False) is fc.TORCHAO_EAGER


def test_transformer_engine_default_unchanged():
    ins, outs, weights = _sums()
    bf16 = step_inventory(SPEC, micro_batch_size=1, seq_len=int(T))
    te = step_inventory(SPEC, micro_batch_size=1, seq_len=int(T), fp8=True)
    assert te == step_inventory(SPEC, micro_batch_size=1, seq_len=int(T), fp8=True, fp8_casts=fc.TRANSFORMER_ENGINE)
    assert te.layers_forward.memory_bytes - bf16.layers_forward.memory_bytes == pytest.approx(
        FP8_CAST_BYTES * (T * ins + weights), rel=1e-9)
    assert te.layers_backward.memory_bytes - bf16.layers_backward.memory_bytes == pytest.approx(
        FP8_CAST_BYTES * T * outs + FP8_TRANSPOSE_BYTES * (T * ins + weights), rel=1e-9)
    assert te.layers_forward.fused_bytes == 0.0


def test_compiled_casts_are_fused_bytes_and_not_scaled_again():
    ins, outs, weights = _sums()
    bf16 = step_inventory(SPEC, micro_batch_size=1, seq_len=int(T))
    ao = step_inventory(SPEC, micro_batch_size=1, seq_len=int(T), fp8=True, fp8_casts=fc.TORCHAO_COMPILED)
    fwd = 6.0 * T * ins + 5.0 * weights
    bwd = 6.0 * T * outs + 3.0 * weights
    assert ao.layers_forward.fused_bytes == pytest.approx(fwd, rel=1e-12)
    assert ao.layers_backward.fused_bytes == pytest.approx(bwd, rel=1e-12)
    assert ao.layers_forward.memory_bytes - bf16.layers_forward.memory_bytes == pytest.approx(fwd, rel=1e-12)
    rates = default_rates(resolve_gpu("h100-sxm"))
    half = pass_seconds(ao.layers_forward, rates=rates, seq_len=T, backward=False, memory_factor=0.5)
    half_bf16 = pass_seconds(bf16.layers_forward, rates=rates, seq_len=T, backward=False, memory_factor=0.5)
    assert half.memory_s - half_bf16.memory_s == pytest.approx(fwd / rates.hbm_bytes_per_s, rel=1e-9)


def test_eager_costs_more_than_compiled():
    kw = dict(micro_batch_size=1, seq_len=int(T), fp8=True)
    eager = step_inventory(SPEC, fp8_casts=fc.TORCHAO_EAGER, **kw)
    comp = step_inventory(SPEC, fp8_casts=fc.TORCHAO_COMPILED, **kw)
    assert eager.layers_forward.memory_bytes > comp.layers_forward.memory_bytes
    assert eager.layers_backward.kernels > comp.layers_backward.kernels
    assert eager.layers_forward.fused_bytes == 0.0


def test_sequence_sharded_casts_under_tensor_parallel():
    h = SPEC.hidden_size
    kw = dict(casts=fc.TORCHAO_COMPILED, tokens=T, hidden_size=h, sequence_shards=8)
    assert fc.sharded_cast_tokens(features=h, name="q_proj", **kw) == T / 8
    assert fc.sharded_cast_tokens(features=h, name="k_proj", **kw) == 0.0
    assert fc.sharded_cast_tokens(features=h // 8, name="o_proj", **kw) == T
    assert fc.sharded_cast_tokens(features=h, name="q_proj", **{**kw, "casts": fc.TRANSFORMER_ENGINE}) == T
    assert fc.sharded_layout_copy_bytes(features=h, name="q_proj", **kw) == 2.0 * T * h
    assert fc.sharded_layout_copy_bytes(features=h, name="k_proj", **kw) == 0.0
    assert fc.sharded_layout_copy_bytes(features=h, name="q_proj", **{**kw, "sequence_shards": 1}) == 0.0


def test_per_op_recompute_reruns_only_the_recomputed_linears_casts():
    """torchtitan's per-op policy saves aten.max: its recompute casts the inputs and weights of the recomputed
    (even-numbered) linears again, without their amax."""
    from trainfit.compute.inventory import _sac_recomputed_gemms

    kw = dict(micro_batch_size=1, seq_len=int(T), fp8=True, fp8_casts=fc.TORCHAO_COMPILED)
    inv = step_inventory(SPEC, **kw)
    even = _sac_recomputed_gemms(SPEC, None)
    want = sum(((6.0 - 2.0) * T * g.in_features + (5.0 - 2.0) * g.in_features * g.out_features) * g.count
               for g in linear_groups(SPEC) if g.name in even)
    assert inv.recompute("op").fused_bytes == pytest.approx(want, rel=1e-12)
    assert inv.recompute("none").fused_bytes == inv.layers_forward.fused_bytes  # full recompute: everything again


# Transformer Engine's GroupedLinear quantises each local expert's split on its own (compute.float8_casts
# grouped_split_quantize_extra_kernels; NVIDIA/TransformerEngine @4220403e831d29e93868f7793693ea83f6b8b05b
# transformer_engine/pytorch/csrc/extensions/cast.cpp l.394-440, quantizer.cpp l.877-924 and l.1681-1691)


def test_split_quantize_kernels_by_recipe():
    from trainfit.spec.enums import Fp4Recipe, Fp8Recipe

    te = {r: fc.cast_traffic(transformer_engine=True, compiled=False, recipe=r) for r in
          (Fp8Recipe.DELAYED, Fp8Recipe.CURRENT, Fp8Recipe.BLOCKWISE, Fp8Recipe.MXFP8, Fp4Recipe.NVFP4)}
    # current scaling: amax, scale, cast per split; MXFP8 and block scaling: one quantize per split
    assert te[Fp8Recipe.CURRENT] is fc.TE_CURRENT
    assert fc.grouped_split_quantize_extra_kernels(casts=te[Fp8Recipe.CURRENT], local_experts=16) == (45.0, 45.0)
    assert fc.grouped_split_quantize_extra_kernels(casts=te[Fp8Recipe.MXFP8], local_experts=16) == (15.0, 15.0)
    assert fc.grouped_split_quantize_extra_kernels(casts=te[Fp8Recipe.BLOCKWISE], local_experts=8) == (7.0, 7.0)
    # delayed scaling: one fused multi cast-transpose for all splits; NVFP4: the fused split quantize
    assert fc.grouped_split_quantize_extra_kernels(casts=te[Fp8Recipe.DELAYED], local_experts=16) == (0.0, 0.0)
    assert fc.grouped_split_quantize_extra_kernels(casts=te[Fp4Recipe.NVFP4], local_experts=16) == (0.0, 0.0)
    # one local expert: the per-call budget is the whole quantisation
    assert fc.grouped_split_quantize_extra_kernels(casts=fc.TE_CURRENT, local_experts=1) == (0.0, 0.0)
    # the per-call budget itself is unchanged: current scaling keeps the per-tensor casts' bytes and kernels
    assert fc.TE_CURRENT.input_forward_kernels == fc.TRANSFORMER_ENGINE.input_forward_kernels
    assert fc.TE_CURRENT.backward_kernels == fc.TRANSFORMER_ENGINE.backward_kernels
    assert fc.TE_CURRENT.input_forward_bytes == fc.TRANSFORMER_ENGINE.input_forward_bytes


def test_megatron_grouped_experts_charge_each_split_quantize():
    from trainfit.catalog.models import from_catalog
    from trainfit.plan.time import rank_spec

    moe = from_catalog("Qwen/Qwen3-30B-A3B")
    shard = rank_spec(moe, tp=1, pp=1, ep=8, etp=1)  # 128 / 8 = 16 local experts
    kw = dict(micro_batch_size=1, seq_len=4096, expert_parallel=8, fp8=True, fp8_weight_casts=0.0,
              megatron_experts=True)
    delayed = step_inventory(shard, fp8_casts=fc.TRANSFORMER_ENGINE, **kw)
    current = step_inventory(shard, fp8_casts=fc.TE_CURRENT, **kw)
    n_moe = sum(1 for i in range(moe.num_layers) if moe.moe.is_moe_layer(i))
    # fc1 and fc2: two GroupedLinear calls a MoE layer, 15 splits beyond the first, 3 kernels each, both passes
    extra = 2 * n_moe * 15 * 3
    assert current.layers_forward.kernels - delayed.layers_forward.kernels == pytest.approx(extra)
    assert current.layers_backward.kernels - delayed.layers_backward.kernels == pytest.approx(extra)
    assert current.layers_forward.memory_bytes == pytest.approx(delayed.layers_forward.memory_bytes)
    # launched from split_quantize's C++ loop: unscaled by the compile factor, at the backward's host rate
    assert current.layers_forward.bare_kernels - delayed.layers_forward.bare_kernels == pytest.approx(extra)
    assert current.layers_forward.fused_kernels - delayed.layers_forward.fused_kernels == pytest.approx(extra)
    assert current.layers_backward.fused_kernels - delayed.layers_backward.fused_kernels == pytest.approx(extra)
    # not Megatron-Core's TEGroupedMLP (transformers' grouped_mm under TE casts): nothing added
    plain = {k: v for k, v in kw.items() if k != "megatron_experts"}
    assert (step_inventory(shard, fp8_casts=fc.TE_CURRENT, **plain).layers_forward.kernels
            == step_inventory(shard, fp8_casts=fc.TRANSFORMER_ENGINE, **plain).layers_forward.kernels)
    # TE's fused op sequence (moe_expert_mlp te_ops) is not the GroupedLinear module: nothing added
    te_ops = step_inventory(shard, fp8_casts=fc.TE_CURRENT, fused_expert_mlp=True, **kw).layers_forward.kernels
    assert te_ops == step_inventory(shard, fp8_casts=fc.TRANSFORMER_ENGINE, fused_expert_mlp=True,
                                    **kw).layers_forward.kernels
