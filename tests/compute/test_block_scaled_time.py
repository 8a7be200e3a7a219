"""MXFP8 / NVFP4 in the time model: GEMMs at the block-scaled tensor-core rate (fp8's for MXFP8, the datasheet fp4
rate for NVFP4) under the same shape model, and the quantize kernels' bytes as memory-bound work."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute.float8_casts import (
    MXFP8_COPY_BYTES,
    NVFP4_COPY_BYTES,
    TE_MXFP8,
    TE_NVFP4,
    TORCHAO_MXFP8,
    TORCHAO_NVFP4,
    cast_traffic,
)
from trainfit.compute.gemm import gemm_seconds
from trainfit.compute.inventory import _sac_recomputed_gemms, step_inventory
from trainfit.compute.rates import default_rates, power_limited_rates
from trainfit.errors import CardError
from trainfit.memory.params import linear_groups
from trainfit.spec.enums import Fp4Recipe, Fp8Recipe

LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")


@pytest.mark.parametrize("gpu,fp4", [("b200", 9e15), ("gb200", 10e15), ("b300", 13.125e15), ("gb300", 15e15)])
def test_fp4_rate_is_the_datasheet_dense_rate_at_the_fp8_fraction(gpu, fp4):
    g = resolve_gpu(gpu)
    assert g.fp4_dense_flops_per_s == fp4 and g.fp4_source
    r = default_rates(g)
    assert r.fp4_matmul_flops_per_s == pytest.approx(fp4 * r.fp8_matmul_flops_per_s / g.fp8_dense_flops_per_s)
    half = power_limited_rates(r, power_limit_w=g.tdp_w / 8, rated_power_w=g.tdp_w)
    assert half.fp4_matmul_flops_per_s == pytest.approx(r.fp4_matmul_flops_per_s / 2)


def test_fp4_gemm_runs_at_the_fp4_rate_and_is_refused_without_one():
    b200 = default_rates(resolve_gpu("b200"))
    s = {d: gemm_seconds(m=16384, n=16384, k=16384, rates=b200, dtype_bytes=d) for d in (2.0, 1.0, 0.5)}
    assert s[1.0] / s[0.5] == pytest.approx(b200.fp4_matmul_flops_per_s / b200.fp8_matmul_flops_per_s)
    assert s[2.0] > s[1.0] > s[0.5]
    with pytest.raises(CardError, match="fp4 needs fp4 tensor cores; h100-sxm"):
        gemm_seconds(m=4096, n=4096, k=4096, rates=default_rates(resolve_gpu("h100-sxm")), dtype_bytes=0.5)


def test_cast_bytes_per_element():
    assert MXFP8_COPY_BYTES == 1 + 1 / 32 and NVFP4_COPY_BYTES == 0.5 + 1 / 16
    # TE: one kernel reads bf16 and writes both copies; nothing transposed in backward
    assert TE_MXFP8.input_forward_bytes == TE_MXFP8.grad_output_backward_bytes == 2 + 2 * (1 + 1 / 32)
    assert TE_MXFP8.input_backward_bytes == TE_MXFP8.weight_backward_bytes == 0.0
    # NVFP4 (TE and torchao alike): a per-tensor amax pass, then both fp4 copies
    for c in (TE_NVFP4, TORCHAO_NVFP4):
        assert c.input_forward_bytes == c.weight_forward_bytes == c.grad_output_backward_bytes == 2 + 2 + 2 * 0.5625
        assert c.gemm_operand_bytes == 0.5
    # torchao mx_mm: one copy per cast, the output gradient twice, the input and weight again along dim 1
    assert TORCHAO_MXFP8.input_forward_bytes == TORCHAO_MXFP8.input_backward_bytes == 2 + 1 + 1 / 32
    assert TORCHAO_MXFP8.grad_output_backward_bytes == 2 * (2 + 1 + 1 / 32)
    assert cast_traffic(transformer_engine=True, compiled=False, recipe=Fp8Recipe.MXFP8) is TE_MXFP8
    assert cast_traffic(transformer_engine=False, compiled=True, recipe=Fp4Recipe.NVFP4) is TORCHAO_NVFP4
    # a string is not a recipe (the enum at the edge)
    assert cast_traffic(transformer_engine=True, compiled=False, recipe="mxfp8") is not TE_MXFP8


def test_inventory_gemm_dtype_and_cast_bytes():
    t = 2 * 1024
    dense = [g for g in linear_groups(LLAMA8) if not g.is_fused_experts]
    acts_in = sum(g.in_features * g.count for g in dense) * t
    weights = sum(g.in_features * g.out_features * g.count for g in dense)
    base = step_inventory(LLAMA8, micro_batch_size=2, seq_len=1024)
    for casts in (TE_MXFP8, TE_NVFP4):
        inv = step_inventory(LLAMA8, micro_batch_size=2, seq_len=1024, fp8=True, fp8_casts=casts)
        lin = [g for g in inv.layers_forward.gemms if g.name in {d.name for d in dense}]
        assert {g.dtype_bytes for g in lin} == {casts.gemm_operand_bytes}
        # fused kernels: the forward's extra bytes are exactly the input and weight casts
        extra = inv.layers_forward.memory_bytes - base.layers_forward.memory_bytes
        assert extra == pytest.approx(casts.input_forward_bytes * acts_in + casts.weight_forward_bytes * weights)


def test_torchtitan_sac_recomputes_every_nvfp4_linear():
    dense = {g.name for g in linear_groups(LLAMA8) if not g.routed}
    every_other = _sac_recomputed_gemms(LLAMA8, None)
    assert 0 < len(every_other) < len(dense)
    assert _sac_recomputed_gemms(LLAMA8, None, all_linears=True) == dense
    mx = step_inventory(LLAMA8, micro_batch_size=2, seq_len=1024, fp8=True, fp8_casts=TORCHAO_MXFP8)
    nv = step_inventory(LLAMA8, micro_batch_size=2, seq_len=1024, fp8=True, fp8_casts=TORCHAO_NVFP4)
    names = lambda inv: {g.name for g in inv.layers_recompute_op.gemms} & dense
    assert names(mx) == every_other & dense and names(nv) == dense


def test_plan_orders_the_recipes_on_gb200():
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    def step(**precision):
        return make_plan(load_card_dict({
            "model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": "gb200", "gpus_per_node": 4},
            "parallel": {"strategy": "fsdp", "compile": True}, "batch": {"micro_batch_size": 8, "seq_len": 2048},
            "precision": precision})).step_seconds

    bf16, mx, nv = step(compute="bf16"), step(compute="fp8", fp8_recipe="mxfp8"), step(compute="fp4", fp4_recipe="nvfp4")
    assert nv < mx < bf16


def test_bf16_first_and_last_layers_keep_bf16_gemms_and_no_casts():
    # Megatron-Core first_last_layers_bf16 / torchtitan's bf16 tail: 5 of Llama-3.1-8B's 32 layers in bf16. Hand
    # count: 2 x 2048 tokens x 218,103,808 linear weights per layer (q/o 4096^2, k/v 4096x1024, gate/up/down
    # 4096x14336) forward FLOPs, 27 layers at the fp4 rate, 5 at bf16's
    per_layer = 2 * 2048 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    dense = {g.name for g in linear_groups(LLAMA8) if not g.is_fused_experts}
    full = step_inventory(LLAMA8, micro_batch_size=2, seq_len=1024, fp8=True, fp8_casts=TE_NVFP4)
    tail = step_inventory(LLAMA8, micro_batch_size=2, seq_len=1024, fp8=True, fp8_casts=TE_NVFP4,
                          fp8_layer_share=27 / 32)
    bf16 = step_inventory(LLAMA8, micro_batch_size=2, seq_len=1024)
    flops = lambda inv, d: sum(g.flops for g in inv.layers_forward.gemms if g.name in dense and g.dtype_bytes == d)  # noqa: E731
    assert (flops(tail, 0.5), flops(tail, 2.0)) == pytest.approx((27 * per_layer, 5 * per_layer))
    assert (flops(full, 0.5), flops(full, 2.0)) == pytest.approx((32 * per_layer, 0.0))
    # the casts: the 5 bf16 layers' share of the quantised run's cast traffic goes
    cast = full.layers_forward.memory_bytes - bf16.layers_forward.memory_bytes
    assert full.layers_forward.memory_bytes - tail.layers_forward.memory_bytes == pytest.approx(5 / 32 * cast)


def test_bf16_layers_run_their_routed_experts_in_bf16():
    # Megatron-Core's TEGroupedMLP runs inside the layer's fp4 context: a bf16 layer's experts are bf16 GEMMs without
    # casts, as memory (plan.terms.fp8_weight_bytes) holds no quantised expert copies for it. Qwen3-30B-A3B, 6 of 48
    # layers bf16, 1024 tokens: 8 of 128 experts per token, gate/up 2048x1536 and down 768x2048 per expert
    qwen = from_catalog("Qwen/Qwen3-30B-A3B")
    per_layer = 2 * 1024 * 8 * (2048 * 1536 + 768 * 2048)
    kw = {"micro_batch_size": 1, "seq_len": 1024, "megatron_experts": True}
    full = step_inventory(qwen, fp8=True, fp8_casts=TE_NVFP4, **kw)
    tail = step_inventory(qwen, fp8=True, fp8_casts=TE_NVFP4, fp8_layer_share=42 / 48, **kw)
    bf16 = step_inventory(qwen, **kw)
    routed = lambda inv, d: sum(g.flops for g in inv.layers_forward.gemms
                                if g.name in ("gate_up_proj", "down_proj") and g.dtype_bytes == d)
    assert (routed(tail, 0.5), routed(tail, 2.0)) == pytest.approx((42 * per_layer, 6 * per_layer))
    assert (routed(full, 0.5), routed(full, 2.0)) == pytest.approx((48 * per_layer, 0.0))
    cast = full.layers_forward.memory_bytes - bf16.layers_forward.memory_bytes  # dense and expert casts
    assert full.layers_forward.memory_bytes - tail.layers_forward.memory_bytes == pytest.approx(6 / 48 * cast)


def test_bf16_layer_fields_are_read_with_quantized_compute_only():
    from trainfit.errors import CardError as _CardError
    from trainfit.spec.card import load_card_dict

    card = load_card_dict({"method": "sft", "hardware": {"gpu": "gb200"},
                           "precision": {"compute": "fp4", "fp4_recipe": "nvfp4", "bf16_last_layers": 5}})
    assert card.precision.quantized_layer_share(32) == 27 / 32
    with pytest.raises(_CardError, match=r"^precision.bf16_first_layers: only read with precision.compute: fp8 or fp4"
                                         r" \(compute is 'bf16'\)$"):
        load_card_dict({"method": "sft", "precision": {"bf16_first_layers": 1}})


def test_nvfp4_primary_weights_gather_half_a_byte_and_mxfp8_ones_gather_bf16():
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    def phases(**precision):
        p = make_plan(load_card_dict({
            "model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": "gb200", "gpus_per_node": 4,
                                                                              "nodes": 2},
            "parallel": {"strategy": "zero1", "tensor_parallel_impl": "megatron"},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 4}, "precision": precision}))
        return {x.name: x.seconds for x in p.time.phases}, p.step_seconds

    (nv, nv_s), (nvp, nvp_s) = phases(compute="fp4", fp4_recipe="nvfp4"), phases(compute="fp4", fp4_recipe="nvfp4",
                                                                                  fp4_params=True)
    assert nvp["communication"] < nv["communication"] and nvp_s < nv_s
    # Megatron-Core all-gathers MXFP8 primary weights in bf16 and casts them once per step: timed as without them
    (mx, mx_s), (mxp, mxp_s) = phases(compute="fp8", fp8_recipe="mxfp8"), phases(compute="fp8", fp8_recipe="mxfp8",
                                                                                  fp8_params=True)
    assert mxp_s == pytest.approx(mx_s)


def test_gemm_bytes_reads_quantized_operands_with_scales_and_writes_bf16():
    """An fp4 GEMM reads 0.5 B + 1/16 B (NVFP4 block scale) per operand element and writes its output in bf16; an
    fp8 GEMM reads 1 B per operand element (per-tensor scales left out) and writes bf16; bf16 / fp32 unchanged."""
    from trainfit.compute.gemm import gemm_bytes

    m, n, k = 64, 4096, 8192
    ops, out = m * k + k * n, m * n
    assert gemm_bytes(m=m, n=n, k=k, dtype_bytes=0.5) == pytest.approx(ops * (0.5 + 1 / 16) + out * 2)
    assert gemm_bytes(m=m, n=n, k=k, dtype_bytes=1.0) == pytest.approx(ops * 1 + out * 2)
    assert gemm_bytes(m=m, n=n, k=k) == pytest.approx((ops + out) * 2)
    assert gemm_bytes(m=m, n=n, k=k, dtype_bytes=4.0, groups=2) == pytest.approx((ops + out) * 4 * 2)


def test_an_fp4_plan_names_its_matmul_rate_an_assumption():
    from trainfit.compute.rates import FP4_MATMUL_ASSUMPTION
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    def card(**precision):
        return load_card_dict({"model": "Qwen/Qwen3-8B", "method": "sft", "hardware": {"gpu": "b200"},
                               "parallel": {"strategy": "zero1", "tensor_parallel_impl": "megatron"},
                               "precision": precision})

    assert FP4_MATMUL_ASSUMPTION in make_plan(card(compute="fp4", fp4_recipe="nvfp4")).assumptions
    assert not [a for a in make_plan(card(compute="fp8", fp8_recipe="mxfp8")).assumptions
                if a.startswith("fp4 GEMM rate")]
    assert "ASSUMED, not fitted" in FP4_MATMUL_ASSUMPTION and "pytorch/ao/pull/2427" in FP4_MATMUL_ASSUMPTION
