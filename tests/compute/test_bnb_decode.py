"""An engine on bitsandbytes 4-bit linears (Unsloth's ``fast_inference`` under QLoRA) streams, before bitsandbytes 0.50,
the packed weight in a one-sequence decode step (``gemv_4bit``) and the dequantised 16-bit copy, written and read back,
in a step of two or more (``MatMul4Bit.forward``): ``trainfit.compute.bnb_decode``."""

from __future__ import annotations

import pytest

from trainfit import api
from trainfit.compute.bnb_decode import (
    DEQUANT_GEMM_BYTES_PER_WEIGHT,
    GEMV_4BIT_BYTES_PER_WEIGHT,
    bnb_4bit_step_weight_bytes,
)
from trainfit.compute.inventory import NF4_DEQUANT_BYTES_PER_WEIGHT

CARD = {
    "model": "Qwen/Qwen2.5-3B", "method": "grpo", "scope": "qlora", "preset": "unsloth",
    "lora": {"rank": 64, "alpha": 64}, "hardware": {"gpu": "t4", "gpus_per_node": 1},
    "precision": {"compute": "fp16", "weights": "nf4"}, "batch": {"micro_batch_size": 8},
    "rollout": {"gpu_memory_utilization": 0.5, "prompts_per_step": 1, "num_generations": 8, "prompt_len": 256,
                "response_len": 200},
    "roles": {"reference": "lora_disabled", "kl_coef": 0.04},
}


def test_one_row_reads_the_packed_weight_more_rows_the_dequantised_copy_twice() -> None:
    # bitsandbytes 0.45.2 matmul_4bit l.521-531 (gemv_4bit, one row) and MatMul4Bit.forward l.462 (dequantise + F.linear)
    assert GEMV_4BIT_BYTES_PER_WEIGHT == pytest.approx(0.5 + 1 / 32)
    assert DEQUANT_GEMM_BYTES_PER_WEIGHT == pytest.approx(NF4_DEQUANT_BYTES_PER_WEIGHT + 2.0)
    one = bnb_4bit_step_weight_bytes(quantized_weights=1e9, unquantized_bytes=5e8, rows=1)
    many = bnb_4bit_step_weight_bytes(quantized_weights=1e9, unquantized_bytes=5e8, rows=6)
    assert one == pytest.approx(1e9 * (0.5 + 1 / 32) + 5e8)
    assert many == pytest.approx(1e9 * (0.5 + 1 / 32 + 2.0 + 2.0) + 5e8)
    assert many == bnb_4bit_step_weight_bytes(quantized_weights=1e9, unquantized_bytes=5e8, rows=2)
    with pytest.raises(ValueError):
        bnb_4bit_step_weight_bytes(quantized_weights=1e9, unquantized_bytes=0.0, rows=0)


def test_the_step_model_reads_the_one_row_bytes_only_at_one_sequence() -> None:
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.catalog.models import resolve_model
    from trainfit.compute.decode_step import _step_model
    from trainfit.compute.flops import matmul_params
    from trainfit.compute.rates import default_rates

    spec = resolve_model("Qwen/Qwen2.5-3B")
    r = default_rates(resolve_gpu("t4"))
    common = dict(spec=spec, matmul_params=matmul_params(spec), rates=r, tp=1, weight_bytes=6e9,
                  kv_bytes_per_token=36864.0, cuda_graphs=True, tp_all_reduce_latency_s=None)
    plain = _step_model(**common, rank_bytes=13e9)
    split = _step_model(**common, rank_bytes=13e9, one_row_rank_bytes=2e9)
    assert split.parts(4.0, 1000.0) == plain.parts(4.0, 1000.0)
    assert split.parts(1.5, 1000.0) == plain.parts(1.5, 1000.0)
    assert plain.parts(1.0, 1000.0)[0] - split.parts(1.0, 1000.0)[0] == pytest.approx(11e9 / r.hbm_bytes_per_s)


def _decode_s(card: dict) -> float:
    plan = api.plan(card)
    (gen,) = [ph for ph in plan.time.phases if ph.name == "generation"]
    return gen.terms["decode"]


def test_an_unsloth_qlora_engine_pinned_before_bitsandbytes_050_decodes_through_the_dequantised_weights() -> None:
    """Six sequences of Qwen2.5-3B a step: the steps of two or more stream 4.53 bytes a quantized weight where the
    plan read the bf16 model (2), so the decode is about twice as long; a pin from 0.50 on, or none, keeps bf16."""
    pinned = {**CARD, "software": {"bitsandbytes": "<0.50"}}
    later = {**CARD, "software": {"bitsandbytes": "0.50.1"}}
    base = _decode_s(CARD)
    assert _decode_s(later) == pytest.approx(base)
    assert 1.7 < _decode_s(pinned) / base < 2.4


def test_the_bnb_stream_needs_the_engine_to_hold_the_4bit_weights() -> None:
    """Only the Unsloth preset's QLoRA engine holds bitsandbytes 4-bit linears (``methods.unsloth`` 1.); a 16-bit LoRA
    engine under the same pin, or a QLoRA engine with no pin, reads the bf16 stream as before."""
    from trainfit.plan.resolve import model_spec_of
    from trainfit.plan.rl_generation import bnb_engine_inputs

    pinned = api.load_card({**CARD, "software": {"bitsandbytes": "0.45.2"}})
    spec = model_spec_of(pinned)
    got = bnb_engine_inputs(pinned, spec)
    assert got["rank_weight_bytes"] > 4 * got["one_row_rank_weight_bytes"]
    assert bnb_engine_inputs(api.load_card(CARD), spec) == {}
    lora = api.load_card({**CARD, "scope": "lora", "software": {"bitsandbytes": "0.45.2"},
                          "precision": {"compute": "fp16", "weights": "fp16"}})
    assert bnb_engine_inputs(lora, spec) == {}
