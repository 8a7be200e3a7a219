"""fp8 primary weights (precision.fp8_params: TE quantized_model_init / Megatron --fp8-param-gather / NeMo fp8_params):
the linears' weights held only as fp8 (1 B, plus TE's transpose where the GPU lacks non-TN fp8 GEMMs, or blockwise's
column-wise copy), no separate fp8 copy, fp32 main params unchanged; the card refuses it in one line elsewhere."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.catalog.models import from_catalog
from trainfit.memory.fp8 import (
    fp8_model_bytes,
    fp8_param_bytes_per_weight,
    fp8_param_model_bytes,
    fp8_scaling_state_bytes,
    non_tn_fp8_gemm,
)
from trainfit.memory.params import linear_groups
from trainfit.memory.weights import quantized_linear_params
from trainfit.spec.enums import Fp8Recipe

LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")
LINEARS = sum(g.count for g in linear_groups(LLAMA8) if not g.is_fused_experts)


def _card(gpu: str = "h100-sxm", recipe: str = "delayed", fp8_params: bool = True, **over):
    from trainfit.spec.card import load_card_dict

    data = {
        "model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": gpu, "gpus_per_node": 8},
        "parallel": {"strategy": "zero1", "tensor_parallel": 2, "sequence_parallel": True,
                     "tensor_parallel_impl": "megatron", "gradient_checkpointing": True},
        "batch": {"micro_batch_size": 1, "seq_len": 2048, "grad_accum": 2},
        "precision": {"compute": "fp8", "fp8_recipe": recipe, "fp8_params": fp8_params},
    }
    for k, v in over.items():
        data[k] = {**data.get(k, {}), **v}
    return load_card_dict(data)


def test_te_keeps_the_transpose_only_without_non_tn_gemms():
    # TE utils.py is_non_tn_fp8_gemm_supported: (10,0) <= cc < (12,0) or cc >= (13,0)
    assert [non_tn_fp8_gemm(c) for c in ("8.9", "9.0", "10.0", "10.3", "12.0", "13.0", None)] == [
        False, False, True, True, False, True, False]
    assert fp8_param_bytes_per_weight(recipe=Fp8Recipe.DELAYED, non_tn_gemm=False) == 2.0  # _data + _transpose
    assert fp8_param_bytes_per_weight(recipe=Fp8Recipe.CURRENT, non_tn_gemm=True) == 1.0  # _data serves both
    for non_tn in (False, True):  # Float8BlockwiseQTensor: its column-wise copy on every GPU
        assert fp8_param_bytes_per_weight(recipe=Fp8Recipe.BLOCKWISE, non_tn_gemm=non_tn) == 2.0


@settings(max_examples=25, deadline=None)
@given(recipe=st.sampled_from([r for r in Fp8Recipe if r is not Fp8Recipe.MXFP8]), non_tn=st.booleans(),
       scale=st.floats(0.01, 1.0))
def test_fp8_params_never_hold_more_than_bf16_plus_copies(recipe, non_tn, scale):
    """The fp8 primary weights and their state replace bf16 weights (2 B) and their fp8 copies: never more, and at
    most the bf16 bytes plus the scaling state (the copies' state is the same)."""
    p = quantized_linear_params(LLAMA8) * scale
    kept = fp8_param_model_bytes(LLAMA8, recipe=recipe, non_tn_gemm=non_tn, scale=scale)
    state = fp8_scaling_state_bytes(recipe=recipe, linears=LINEARS, linear_weight_params=p)
    assert kept == pytest.approx(fp8_param_bytes_per_weight(recipe=recipe, non_tn_gemm=non_tn) * p + state)
    assert kept <= 2.0 * p + state + 1e-6
    if recipe is not Fp8Recipe.CURRENT:  # TE copies (current alone is torchao's, no copies, in fp8_model_bytes)
        assert kept <= 2.0 * p + fp8_model_bytes(LLAMA8, recipe=recipe, scale=scale) - p * (1.0 if non_tn else 0.0) + 1


def _weights(card):
    from trainfit.plan import make_plan

    phases = make_plan(card).phases
    return {k: max(p.components.get(k, 0.0) for p in phases) for k in ("weights", "master_weights", "optimizer_states")}


@pytest.mark.parametrize("gpu,saved_per_weight", [("h100-sxm", 2.0), ("b200", 3.0)])
def test_plan_drops_the_bf16_weights_and_the_copies(gpu, saved_per_weight):
    """TP 2: each rank's dense linears lose their bf16 weight (2 B) and their two fp8 copies (2 B) and hold the fp8
    weight and, on Hopper, its transpose (2 B; 1 B on Blackwell): 2 B saved per weight on H100, 3 B on B200; the
    amax history stays; the fp32 main params and the optimizer states are the same."""
    from trainfit.memory.parallel import shard_spec

    off, on = _weights(_card(gpu, fp8_params=False)), _weights(_card(gpu))
    p = quantized_linear_params(shard_spec(LLAMA8, 2))
    assert off["weights"] - on["weights"] == pytest.approx(saved_per_weight * p, rel=1e-9)
    assert (on["master_weights"], on["optimizer_states"]) == (off["master_weights"], off["optimizer_states"])
    assert on["master_weights"] > 0


def test_blockwise_keeps_both_quantised_copies():
    off, on = _weights(_card("b200", "blockwise", fp8_params=False)), _weights(_card("b200", "blockwise"))
    from trainfit.memory.parallel import shard_spec

    p = quantized_linear_params(shard_spec(LLAMA8, 2))
    assert off["weights"] - on["weights"] == pytest.approx(2.0 * p, rel=1e-9)  # only the bf16 weights go


def test_the_plan_says_it():
    from trainfit.plan import make_plan

    notes = [n for n in make_plan(_card("b200")).assumptions if n.startswith("fp8 primary weights")]
    assert len(notes) == 1 and "1 B per weight" in notes[0] and "fp32 main params" in notes[0]
    assert not any(n.startswith("fp8 (delayed scaling)") for n in make_plan(_card("b200")).assumptions)


@pytest.mark.parametrize("over,key", [
    ({"precision": {"compute": "bf16", "fp8_recipe": None}}, "only read with precision.compute: fp8"),
    ({"precision": {"fp8_recipe": "current"}, "parallel": {"tensor_parallel_impl": "dtensor"}}, "torchao"),
    ({"parallel": {"strategy": "zero3", "tensor_parallel": 1, "sequence_parallel": False}}, "allowed: single, ddp, zero1"),
    ({"parallel": {"strategy": "fsdp", "tensor_parallel": 1, "sequence_parallel": False,
                   "tensor_parallel_impl": "dtensor"}}, "allowed: single, ddp, zero1, or fsdp with"),
    ({"parallel": {"strategy": "fsdp", "tensor_parallel": 1, "sequence_parallel": False},
      "precision": {"fp8_recipe": "blockwise"}}, "allowed: fp8_recipe delayed or current"),
    ({"precision": {"weights": "fp32"}}, "allowed: weights bf16 or unset"),
])
def test_refused_in_one_line(over, key):
    from trainfit.errors import CardError

    with pytest.raises((CardError, ValueError)) as ei:
        _card(**over)
    msg = str(ei.value)
    assert "precision.fp8_params" in msg and key in msg and "\n" not in msg.strip()


def test_default_is_off_and_changes_nothing():
    assert _card(fp8_params=False).precision.fp8_params is False


def test_mxfp8_primary_weights_hold_both_copies_and_their_e8m0_scales():
    # TE MXFP8Tensor: _rowwise_data and _columnwise_data (1 B each) with one uint8 E8M0 scale per 32 elements each,
    # on every GPU (the 1x32 blocks run along different axes, so no transpose serves the other copy)
    for non_tn in (False, True):
        assert fp8_param_bytes_per_weight(recipe=Fp8Recipe.MXFP8, non_tn_gemm=non_tn) == 2.0 + 2.0 / 32
    p = quantized_linear_params(LLAMA8)
    kept = fp8_param_model_bytes(LLAMA8, recipe=Fp8Recipe.MXFP8, non_tn_gemm=True)
    assert kept == pytest.approx((2.0 + 2.0 / 32) * p)  # no state beyond the block scales
