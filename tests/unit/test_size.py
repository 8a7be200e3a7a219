"""`trainfit size`: weight bytes per dtype, KV cache, inference and one-GPU training from the planner's own terms."""

import json

import pytest

from trainfit.cli.main import main
from trainfit.size import (
    INT4_GROUP,
    MXFP4_BLOCK,
    SIZE_DTYPES,
    int4_linear_bytes,
    model_size,
    mxfp4_linear_bytes,
    size_to_dict,
    training_card,
)
from trainfit.units import GIB


@pytest.fixture(scope="module")
def q27():
    return model_size("Qwen/Qwen3.5-27B")


def test_unquantized_dtypes_are_params_times_bytes(q27):
    assert q27.params_total == 26_895_998_464
    assert q27.weights_of("bf16").weight_bytes == 2 * q27.params_total == q27.weights_of("fp16").weight_bytes
    assert q27.weights_of("fp32").weight_bytes == 4 * q27.params_total
    assert [w.dtype for w in q27.weights] == list(SIZE_DTYPES)


def test_quantized_rows_add_their_constants_and_keep_the_rest_in_bf16(q27):
    rest = q27.params_total - q27.params_quantizable
    for d, low_bits in (("fp8", 8), ("int8", 8), ("nf4", 4)):
        payload = q27.params_quantizable * low_bits / 8 + 2 * rest
        assert payload < q27.weights_of(d).weight_bytes < payload * 1.04, d
    order = [q27.weights_of(d).weight_bytes for d in ("nf4", "int4", "mxfp4", "fp8", "int8", "bf16", "fp32")]
    assert order == sorted(order)


def test_int4_and_mxfp4_layouts():
    n = 4096 * 11008
    assert int4_linear_bytes(in_features=4096, out_features=11008) == n / 2 + (4096 // INT4_GROUP) * 11008 * 2.5
    assert mxfp4_linear_bytes(in_features=4096, out_features=11008) == n / 2 + n / MXFP4_BLOCK


def test_training_lines_are_the_planners_one_gpu_plans(q27):
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    for t in q27.training:
        plan = make_plan(load_card_dict(training_card("Qwen/Qwen3.5-27B", scope=t.scope, gpu="h100-sxm", tokens=4096)))
        assert (t.peak_device_bytes, t.fits) == (plan.peak.device, plan.fits)
    qlora = {t.scope: t for t in q27.training}["qlora"]
    assert qlora.components["weights"] == pytest.approx(q27.weights_of("nf4").weight_bytes)
    full, lora = (t.peak_device_bytes for t in q27.training[:2])
    assert full > lora > qlora.peak_device_bytes


def test_kv_cache_and_inference_line():
    s = model_size("Qwen/Qwen3-8B", tokens=1000, batch=3)
    assert s.kv_bytes_per_token == 2 * 36 * 8 * 128 * 2 and s.linear_state_bytes_per_seq == 0
    assert s.kv_cache_bytes == 3 * 1000 * 147_456
    assert s.inference_bytes("bf16") == s.weights_of("bf16").weight_bytes + s.kv_cache_bytes
    assert model_size("Qwen/Qwen3-8B", kv_dtype="fp8").kv_bytes_per_token == 147_456 / 2


def test_cli_json_and_text(capsys, q27):
    assert main(["size", "Qwen/Qwen3.5-27B", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data == json.loads(json.dumps(size_to_dict(q27)))
    assert {w["dtype"] for w in data["weights"]} == set(SIZE_DTYPES)
    assert data["constants"]["nf4_block"] == 64 and data["constants"]["mxfp4_block"] == 32
    assert [t["scope"] for t in data["training"]] == ["full", "lora", "qlora"]
    assert main(["size", "Qwen/Qwen3.5-27B"]) == 0
    out = capsys.readouterr().out
    for d in SIZE_DTYPES:
        assert f"\n{d} " in out
    assert f"{q27.weights_of('bf16').weight_bytes / GIB:.2f} GiB" in out and "53.79 GB" in out
    assert "quantization constants: nf4 block 64" in out and "inference (bf16 weights + KV cache at 4,096 tokens x 1)" in out


@pytest.mark.parametrize("argv, first", [
    (["size", "nope/nope"], "trainfit: error: model: 'nope/nope' is not in the catalog"),
    (["size", "Qwen/Qwen3-8B", "--tokens", "0"], "trainfit: error: --tokens: must be 1 to 10,000,000, got 0"),
    (["size", "Qwen/Qwen3-8B", "--kv-dtype", "int3"], "trainfit: error: --kv-dtype: 'int3' is not allowed"),
])
def test_bad_input_is_one_line_and_exit_2(argv, first, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(first) and err.count("\n") == 1


def test_moe_rows_say_which_weights_each_format_converts():
    s = model_size("Qwen/Qwen3-30B-A3B")
    assert s.params_linear > 10 * s.params_quantizable  # fused 3-D experts: bitsandbytes does not convert them
    assert s.weights_of("nf4").quantized_params == s.params_quantizable
    assert s.weights_of("int4").quantized_params == s.params_linear
    assert s.weights_of("int4").weight_bytes < s.weights_of("nf4").weight_bytes / 3
    assert any("leave the fused expert weights" in n for n in s.notes)
    assert not any("fused expert" in n for n in model_size("Qwen/Qwen3-8B").notes)
