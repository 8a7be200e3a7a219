"""torchao's float8 FSDP2 all-gather (compute.float8_all_gather): hand counts of its terms, and what it changes
in a plan (pytorch/ao @8c81863ba85cce742244c0151c6683c5696bbe04 torchao/float8/fsdp_utils.py)."""

from __future__ import annotations

import pytest

from trainfit.compute import collectives as coll
from trainfit.compute.float8_all_gather import (Fp8GatherShard, amax_vector_bytes, gathered_bytes_saved,
                                                gathered_weight_casts, layer_gather_prep_seconds, precompute_bytes,
                                                precompute_seconds, shard_cast_bytes, shard_cast_host_seconds,
                                                shard_cast_kernels)
from trainfit.compute.float8_casts import (TORCHAO_COMPILED, TORCHAO_EAGER, recompute_cast_bytes,
                                           recompute_cast_kernels)


def test_gathered_bytes_halve_for_bf16_linears():
    # Llama-3.1-8B's 6,979,321,856 decoder linear weights: 1 B instead of bf16's 2 B each
    assert gathered_bytes_saved(linear_weight_params=6_979_321_856, gathered_dtype_bytes=2.0) == 6_979_321_856
    assert gathered_bytes_saved(linear_weight_params=10.0, gathered_dtype_bytes=4.0) == 30.0
    assert gathered_bytes_saved(linear_weight_params=10.0, gathered_dtype_bytes=1.0) == 0.0


def test_shard_cast_hand_count():
    # fp32 shard: * scale (4 + 4), clamp (4 + 4), to(float8) (4 + 1) = 21 B; bf16 shard adds to(float32) (2 + 4)
    assert shard_cast_bytes(shard_elements=1.0, shard_dtype_bytes=4.0) == 21.0
    assert shard_cast_bytes(shard_elements=1.0, shard_dtype_bytes=2.0) == 27.0
    assert shard_cast_kernels(linears=7, shard_dtype_bytes=4.0) == 21
    assert shard_cast_kernels(linears=7, shard_dtype_bytes=2.0) == 28


def test_precompute_reads_each_shard_once_and_all_reduces_one_amax_per_linear():
    assert precompute_bytes(shard_elements=100.0, shard_dtype_bytes=4.0) == 400.0
    assert amax_vector_bytes(linears=224) == 896.0
    g = Fp8GatherShard(shard_elements=1e9, linears=224)
    # 4 GB at 4 TB/s = 1 ms, longer than six launches, plus the all-reduce
    assert precompute_seconds(g, hbm_bytes_per_s=4e12, host_s_per_kernel=1e-5, all_reduce_s=2e-5) == pytest.approx(
        1e-3 + 2e-5)
    assert layer_gather_prep_seconds(g, layers=32, hbm_bytes_per_s=4e12) == pytest.approx(21e9 / 32 / 4e12)
    assert shard_cast_host_seconds(g, host_s_per_kernel=1e-5) == pytest.approx(3 * 224 * 1e-5)


@pytest.mark.parametrize("casts", [TORCHAO_COMPILED, TORCHAO_EAGER])
def test_gathered_fp8_weight_is_not_cast_in_the_layer(casts):
    g = gathered_weight_casts(casts)
    assert g.weight_forward_bytes == 0 and g.weight_forward_kernels == 0
    assert g.weight_backward_bytes == 2.0 and g.weight_backward_kernels == 1  # preprocess_addmm's layout copy
    assert (g.input_forward_bytes, g.grad_output_backward_bytes) == (casts.input_forward_bytes,
                                                                     casts.grad_output_backward_bytes)
    # a recompute re-runs the input's cast only, never a negative weight term
    assert recompute_cast_bytes(casts=g, input_elements=10.0, weight_elements=1e6,
                                stream_bytes_per_s=7.2e12) == pytest.approx(
        (casts.input_forward_bytes - casts.amax_bytes) * 10.0)
    assert recompute_cast_kernels(casts=g, input_casts=1.0, weight_casts=1.0) == (
        casts.input_forward_kernels - casts.amax_kernels)


def test_gather_prep_delays_the_all_gather_on_its_stream():
    kw = dict(layers=32, layer_weight_bytes=4.4e8, layer_grad_bytes=8.8e8, root_weight_bytes=2e9, root_grad_bytes=4e9,
              ranks=8, bus_bytes_per_s=3.6e11, layer_forward_s=5e-3, layer_backward_s=1e-2, micro_steps=1)
    base = coll.exposed_sharded(**kw)
    prep = coll.exposed_sharded(**kw, layer_gather_prep_s=2e-4)
    # hidden behind the layers except the first unit's gather, which waits for its cast
    assert prep.exposed_s == pytest.approx(base.exposed_s + 2e-4, rel=1e-6)


def _plan(all_gather: bool):
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    return make_plan(load_card_dict({
        "model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
        "parallel": {"strategy": "fsdp", "compile": True, "gradient_checkpointing": True},
        "batch": {"micro_batch_size": 1, "seq_len": 8192, "grad_accum": 1},
        "precision": {"compute": "fp8", "fp8_recipe": "current", "fp8_all_gather": all_gather}}))


def test_plan_gathers_fp8_and_precomputes_the_scales():
    off, on = _plan(False), _plan(True)
    ph_off = {p.name: p.seconds for p in off.time.phases}
    ph_on = {p.name: p.seconds for p in on.time.phases}
    assert "fp8_scale_precompute" in ph_on and "fp8_scale_precompute" not in ph_off
    assert 0 < ph_on["fp8_scale_precompute"] < 5e-3
    assert ph_on["fsdp_copies"] < ph_off["fsdp_copies"]  # the copy-out moves 1 B per linear weight
    assert ph_on["forward"] < ph_off["forward"]  # no weight cast in the layer
    assert sum(ph_on.values()) < sum(ph_off.values())
