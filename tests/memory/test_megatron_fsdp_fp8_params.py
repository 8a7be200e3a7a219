"""fp8 primary weights under Megatron-FSDP (strategy fsdp, tensor_parallel_impl megatron): the linears' weights are a
uint8 shard (1 B per weight / data-parallel ranks, no transpose kept), gathered per layer unit at 1 B per linear
weight, plus on Hopper the transpose the unit's backward builds (memory.fp8, megatron_fsdp_fp8_unit_bytes). Hand
counts for Llama-3.1-8B on 8 GPUs."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.memory.fp8 import fp8_scaling_state_bytes, megatron_fsdp_fp8_unit_bytes
from trainfit.memory.params import linear_groups, param_breakdown
from trainfit.memory.weights import quantized_linear_params
from trainfit.spec.enums import Fp8Recipe

LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")
LINEARS = sum(g.count for g in linear_groups(LLAMA8) if not g.is_fused_experts)
GIB = 2**30


def _card(gpu: str, fp8_params: bool = True, recipe: str = "delayed"):
    from trainfit.spec.card import load_card_dict

    return load_card_dict({
        "model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": gpu, "gpus_per_node": 8},
        "parallel": {"strategy": "fsdp", "tensor_parallel_impl": "megatron", "gradient_checkpointing": True},
        "batch": {"micro_batch_size": 1, "seq_len": 2048, "grad_accum": 2},
        "precision": {"compute": "fp8", "fp8_recipe": recipe, "fp8_params": fp8_params},
    })


def _peaks(card):
    from trainfit.plan import make_plan

    out: dict[str, float] = {}
    for p in make_plan(card).phases:
        for k, v in p.components.items():
            out[k] = max(out.get(k, 0.0), v)
    return out


def test_unit_bytes_hand_counted():
    # 218,103,808 linear weights + 4,096 x 2 norm weights in a layer
    assert megatron_fsdp_fp8_unit_bytes(unit_params=100.0, unit_linear_params=90.0, other_bytes_per_param=2.0,
                                        non_tn_gemm=False) == (110.0, 90.0)
    assert megatron_fsdp_fp8_unit_bytes(unit_params=100.0, unit_linear_params=90.0, other_bytes_per_param=2.0,
                                        non_tn_gemm=True) == (110.0, 0.0)


@pytest.mark.parametrize("gpu", ["h100-sxm", "b200"])
def test_weight_shard_is_one_byte_per_linear_weight(gpu):
    """weights = bf16 shard of everything (2 B x 8,030,261,248 / 8) - the linears' bf16 (2 B x 6,979,321,856 / 8)
    + their uint8 shard (1 B x 6,979,321,856 / 8) + the per-tensor scaling state (unsharded): 1.0615 GiB on either
    GPU (no transpose kept between steps)."""
    total, lin = param_breakdown(LLAMA8).total, quantized_linear_params(LLAMA8)
    state = fp8_scaling_state_bytes(recipe=Fp8Recipe.DELAYED, linears=LINEARS, linear_weight_params=lin)
    on = _peaks(_card(gpu))
    assert on["weights"] == pytest.approx(2.0 * total / 8 - 2.0 * lin / 8 + 1.0 * lin / 8 + state, rel=1e-9)
    assert on["weights"] / GIB == pytest.approx(1.0615, abs=1e-4)


@pytest.mark.parametrize("gpu,saved_per_linear_weight", [("h100-sxm", 1.0), ("b200", 2.0)])
def test_gathered_units_are_fp8(gpu, saved_per_linear_weight):
    """Two gathered layer units (current + prefetched) at 2 B per weight without fp8_params; with them 1 B per linear
    weight, plus (H100) the current unit's 1 B transpose: 2 x 218,103,808 - 218,103,808 = 1 B saved per unit linear
    weight on H100, 2 B on B200."""
    unit_linear = quantized_linear_params(LLAMA8) / LLAMA8.num_layers
    assert unit_linear == 218_103_808
    off, on = _peaks(_card(gpu, fp8_params=False)), _peaks(_card(gpu))
    assert off["fsdp_buffers"] - on["fsdp_buffers"] == pytest.approx(saved_per_linear_weight * unit_linear, rel=1e-9)
    assert (on["optimizer_states"], on.get("master_weights")) == (off["optimizer_states"], off.get("master_weights"))


def test_the_plan_says_it():
    from trainfit.plan import make_plan

    notes = make_plan(_card("h100-sxm")).assumptions
    assert any(n.startswith("Megatron-FSDP units with fp8 primary weights") and "transpose" in n for n in notes)
    assert any(n.startswith("fp8 primary weights") for n in notes)


@pytest.mark.parametrize("recipe", ["mxfp8", "blockwise"])
def test_other_recipes_refused_in_one_line(recipe):
    from trainfit.errors import CardError

    with pytest.raises((CardError, ValueError)) as ei:
        _card("b200", recipe=recipe)
    msg = str(ei.value)
    assert "precision.fp8_params" in msg and "delayed or current" in msg and "\n" not in msg.strip()
