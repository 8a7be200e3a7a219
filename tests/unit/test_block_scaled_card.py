"""precision.fp8_recipe mxfp8 and precision.compute fp4 / precision.fp4_recipe nvfp4: validated like the other fp8
recipes (one line naming the field and its allowed values; exit 2 from the CLI)."""

from __future__ import annotations

import pytest

from trainfit.cli.main import main
from trainfit.errors import CardError
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import ComputeDtype, Fp4Recipe, Fp8Recipe


def _card(gpu: str = "b200", **precision):
    return load_card_dict({"method": "sft", "hardware": {"gpu": gpu}, "precision": precision})


def _error(gpu: str = "b200", **precision) -> str:
    with pytest.raises(CardError) as exc:
        _card(gpu, **precision)
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_bf16_layers_are_read_by_global_layer_index():
    # Megatron-Core get_fp8_context / get_fp4_context: layer_no < start or layer_no >= num_layers - end is bf16
    prec = _card(compute="fp4", fp4_recipe="nvfp4", bf16_first_layers=2, bf16_last_layers=3).precision
    assert [i for i in range(32) if not prec.layer_quantized(i, 32)] == [0, 1, 29, 30, 31]
    assert prec.quantized_layer_share(32) == 27 / 32
    assert prec.quantized_layer_share(32, layers=range(24, 32)) == 5 / 8  # a pipeline stage's 8 layers
    assert prec.quantized_layer_share(32, layers=range(8, 16)) == 1.0
    assert not _card(compute="bf16").precision.layer_quantized(5, 32)


def test_more_bf16_layers_than_the_model_has_are_refused_at_plan_time():
    from trainfit.plan import make_plan

    card = load_card_dict({"model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": "b200"},
                           "precision": {"compute": "fp4", "fp4_recipe": "nvfp4", "bf16_first_layers": 20,
                                         "bf16_last_layers": 20}})
    with pytest.raises(CardError) as exc:
        make_plan(card)
    assert str(exc.value) == ("precision.bf16_first_layers (20) + precision.bf16_last_layers (20) exceed"
                              " meta-llama/Llama-3.1-8B's 32 decoder layers")
    assert main(["plan", "--model", "meta-llama/Llama-3.1-8B", "--method", "sft", "--set", "hardware.gpu=b200",
                 "--set", "precision.compute=fp4", "--set", "precision.fp4_recipe=nvfp4",
                 "--set", "precision.bf16_first_layers=20", "--set", "precision.bf16_last_layers=20"]) == 2
    make_plan(load_card_dict({"model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": "b200"},
                              "precision": {"compute": "fp4", "fp4_recipe": "nvfp4", "bf16_last_layers": 5}}))


def test_block_scaled_cards_load_on_blackwell():
    mx = _card(compute="fp8", fp8_recipe="mxfp8")
    assert mx.precision.fp8_recipe is Fp8Recipe.MXFP8 and mx.precision.gemm_recipe is Fp8Recipe.MXFP8
    nv = _card("gb200", compute="fp4", fp4_recipe="nvfp4")
    assert nv.precision.compute is ComputeDtype.FP4 and nv.precision.gemm_recipe is Fp4Recipe.NVFP4
    assert _card().precision.gemm_recipe is None


def test_fp4_recipe_is_required_with_fp4_and_refused_otherwise():
    assert _error(compute="fp4") == "precision.fp4_recipe: required with precision.compute: fp4; allowed: nvfp4"
    assert _error(compute="fp4", fp4_recipe="mxfp4") == "precision.fp4_recipe: 'mxfp4' is not allowed; allowed: nvfp4"
    assert _error(compute="fp8", fp8_recipe="current", fp4_recipe="nvfp4") == (
        "precision.fp4_recipe: only read with precision.compute: fp4 (compute is 'fp8')")
    assert _error(compute="bf16", fp4_recipe="nvfp4").startswith("precision.fp4_recipe: only read with")
    assert _error(compute="fp4", fp4_recipe="nvfp4", fp8_recipe="mxfp8").startswith(
        "precision.fp8_recipe: only read with precision.compute: fp8")
    assert _error(compute="fp4", fp4_recipe="nvfp4", fp8_params=True).startswith("precision.fp8_params: only read")


def test_a_bad_fp8_recipe_lists_mxfp8():
    assert _error(compute="fp8", fp8_recipe="mx") == (
        "precision.fp8_recipe: 'mx' is not allowed; allowed: delayed, current, blockwise or mxfp8")


@pytest.mark.parametrize("gpu", ["h100-sxm", "h200", "a100-80gb", "mi355x"])
def test_block_scaled_recipes_are_refused_before_blackwell(gpu):
    fp4 = _error(gpu, compute="fp4", fp4_recipe="nvfp4")
    assert fp4.startswith(f"precision.compute: fp4 needs fp4 tensor cores; {gpu} has no fp4 rate in the catalog;")
    assert fp4.endswith("allowed GPUs: b200, b300, gb200, gb300")
    if gpu != "a100-80gb":  # an A100 has no fp8 at all: refused as before
        mx = _error(gpu, compute="fp8", fp8_recipe="mxfp8")
        assert mx.startswith("precision.fp8_recipe: mxfp8 needs NVIDIA Blackwell block-scaled tensor cores")


def test_the_cli_exits_2_on_a_bad_recipe():
    assert main(["plan", "--method", "sft", "--set", "hardware.gpu=b200", "--set", "precision.compute=fp4"]) == 2
    assert main(["plan", "--method", "sft", "--set", "hardware.gpu=h100-sxm", "--set", "precision.compute=fp4",
                 "--set", "precision.fp4_recipe=nvfp4"]) == 2


def test_mxfp8_primary_weights_are_transformer_engine_only():
    ok = load_card_dict({"method": "sft", "hardware": {"gpu": "b200"}, "parallel": {"strategy": "zero1",
                                                                      "tensor_parallel_impl": "megatron"},
                         "precision": {"compute": "fp8", "fp8_recipe": "mxfp8", "fp8_params": True}})
    assert ok.precision.fp8_params
    assert _error(compute="fp8", fp8_recipe="mxfp8", fp8_params=True).startswith(
        "precision.fp8_params: fp8 primary weights are Transformer Engine's")


def _megatron_mxfp8(gpu: str):
    return load_card_dict({"method": "sft", "hardware": {"gpu": gpu},
                           "parallel": {"strategy": "zero1", "tensor_parallel_impl": "megatron"},
                           "precision": {"compute": "fp8", "fp8_recipe": "mxfp8"}})


@pytest.mark.parametrize("gpu", ["rtx-pro-6000", "rtx5090"])
def test_transformer_engine_mxfp8_is_refused_on_12x(gpu):
    """TE's _compute_mxfp8_support returns False from compute capability 12.0 on (quantization.py l.162-168
    @d0067d0d): a Megatron-Core card is refused there; torchao's MX linears (>= 10.0) accept it."""
    with pytest.raises(CardError) as exc:
        _megatron_mxfp8(gpu)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith("precision.fp8_recipe: mxfp8 through Transformer Engine (tensor_parallel_impl megatron)"
                          " needs compute capability 10.x")
    assert f"{gpu} is 12.0; allowed GPUs: b200, b300, gb200, gb300;" in msg
    assert _card(gpu, compute="fp8", fp8_recipe="mxfp8").precision.fp8_recipe is Fp8Recipe.MXFP8


def test_transformer_engine_mxfp8_loads_on_10x():
    for gpu in ("b200", "b300", "gb200", "gb300"):
        assert _megatron_mxfp8(gpu).precision.fp8_recipe is Fp8Recipe.MXFP8


def test_the_required_fp8_recipe_message_lists_mxfp8():
    assert _error(compute="fp8") == (
        "precision.fp8_recipe: required with precision.compute: fp8; allowed: delayed, current, blockwise or mxfp8")
