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
    """Six sequences of Qwen2.5-3B a step: the steps of two or more stream 4.53 bytes a quantized weight where a pin
    from 0.50 on, or none (plan.rl_generation.BNB_UNPINNED_ASSUMPTION), streams the packed base (about 0.53 bytes a
    weight, bitsandbytes 0.50.0 matmul_4bit -> gemm_4bit, autograd/_functions.py l.453-471 @c5d481be), so the decode
    is some five times as long (the 16-bit embedding and head, read in both, dilute the 8.5x)."""
    pinned = {**CARD, "software": {"bitsandbytes": "<0.50"}}
    later = {**CARD, "software": {"bitsandbytes": "0.50.1"}}
    base = _decode_s(CARD)
    assert _decode_s(later) == pytest.approx(base)
    assert 4.0 < _decode_s(pinned) / base < 6.0


def test_the_bnb_stream_needs_the_engine_to_hold_the_4bit_weights() -> None:
    """Only the Unsloth preset's QLoRA engine holds bitsandbytes 4-bit linears (``methods.unsloth`` 1.); a 16-bit LoRA
    engine under the same pin reads the bf16 stream as before. A QLoRA engine with no pin streams the stored 4-bit
    base, the bytes transformers' generate is planned on (plan.rl_generation.BNB_UNPINNED_ASSUMPTION)."""
    from trainfit.plan.resolve import model_spec_of
    from trainfit.plan.rl_generation import bnb_engine_inputs
    from trainfit.plan.time import gathered_weight_bytes_of

    pinned = api.load_card({**CARD, "software": {"bitsandbytes": "0.45.2"}})
    spec = model_spec_of(pinned)
    got = bnb_engine_inputs(pinned, spec)
    assert got["rank_weight_bytes"] > 4 * got["one_row_rank_weight_bytes"]
    unpinned = api.load_card(CARD)
    assert bnb_engine_inputs(unpinned, spec) == {"rank_weight_bytes": gathered_weight_bytes_of(unpinned, spec).base}
    lora = api.load_card({**CARD, "scope": "lora", "software": {"bitsandbytes": "0.45.2"},
                          "precision": {"compute": "fp16", "weights": "fp16"}})
    assert bnb_engine_inputs(lora, spec) == {}


HF_CARD = {
    "model": "Qwen/Qwen2.5-3B", "method": "grpo", "scope": "qlora", "lora": {"rank": 64, "alpha": 64},
    "hardware": {"gpu": "t4", "gpus_per_node": 1}, "precision": {"compute": "fp16", "weights": "nf4"},
    "batch": {"micro_batch_size": 8}, "parallel": {"strategy": "single"},
    "rollout": {"engine": "hf", "prompts_per_step": 1, "num_generations": 8, "prompt_len": 256, "response_len": 200},
    "roles": {"reference": "lora_disabled", "kl_coef": 0.04},
}


def _hf_generation(card: dict):
    plan = api.plan(card)
    (gen,) = [ph for ph in plan.time.phases if ph.name == "generation"]
    return gen.terms


def test_transformers_generate_on_a_bnb_base_pinned_before_050_dequantises_every_forward() -> None:
    """transformers' generate on bitsandbytes Linear4bit runs the same matmul_4bit as Unsloth's engine: before 0.50,
    a forward of two or more rows dequantises every 4-bit weight and reads the 16-bit copy (bitsandbytes
    @7aec4a88465440b6466a526fe9bbb30930a04ba4 autograd/_functions.py l.462, l.512-533). Before the fix the HF path
    streamed the packed weights whatever the pin: pinned and unpinned planned the same decode."""
    pinned = _hf_generation({**HF_CARD, "software": {"bitsandbytes": "0.45.2"}})
    unpinned = _hf_generation(HF_CARD)
    assert _hf_generation({**HF_CARD, "software": {"bitsandbytes": "0.50.0"}})["decode"] == pytest.approx(
        unpinned["decode"])
    # eager generate on a T4 is mostly kernel launches (25 s of the 8 x 200-step decode unpinned), so the 4.53 B a
    # weight of the steps show as some 5 s more, not 5x
    assert pinned["decode"] > 1.1 * unpinned["decode"]
    # a prefill of 256 rows (below the fused kernel's 512-row limit) dequantises too, only before 0.50
    from trainfit.plan.resolve import model_spec_of
    from trainfit.plan.rl_generation import hf_peft_inputs

    old = api.load_card({**HF_CARD, "software": {"bitsandbytes": "0.45.2"}})
    spec = model_spec_of(old)
    assert hf_peft_inputs(old, spec, prefill_rows=256, decode_rows=1)["prefill_extra_bytes"] > 0.0
    assert "prefill_extra_bytes" not in hf_peft_inputs(api.load_card(HF_CARD), spec, prefill_rows=256, decode_rows=1)


def test_one_sequence_of_hf_generate_reads_the_packed_weight_under_the_old_pin() -> None:
    # matmul_4bit's one-row branch (gemv_4bit, l.521-531 @7aec4a88): a static batch of one decodes on the packed base
    from trainfit.plan.resolve import model_spec_of
    from trainfit.plan.rl_generation import hf_peft_inputs

    card = api.load_card({**HF_CARD, "software": {"bitsandbytes": "0.45.2"}})
    spec = model_spec_of(card)
    one = hf_peft_inputs(card, spec, prefill_rows=256, decode_rows=1)["decode_weight_bytes"]
    many = hf_peft_inputs(card, spec, prefill_rows=256, decode_rows=8)["decode_weight_bytes"]
    assert "decode_weight_bytes" not in hf_peft_inputs(api.load_card(HF_CARD), spec, prefill_rows=256, decode_rows=8)
    from trainfit.memory.weights import count_scale, quantized_linear_params

    q = quantized_linear_params(spec) * count_scale(spec)
    assert many - one == pytest.approx(q * (DEQUANT_GEMM_BYTES_PER_WEIGHT - GEMV_4BIT_BYTES_PER_WEIGHT))


def test_the_plan_states_the_bitsandbytes_assumption_for_both_engines() -> None:
    from trainfit.plan.rl_generation import BNB_UNPINNED_ASSUMPTION

    assert BNB_UNPINNED_ASSUMPTION in api.plan(HF_CARD).assumptions
    assert BNB_UNPINNED_ASSUMPTION in api.plan(CARD).assumptions
    assert "\n" not in BNB_UNPINNED_ASSUMPTION
    lora = {**HF_CARD, "scope": "lora", "precision": {"compute": "fp16", "weights": "fp16"}}
    assert BNB_UNPINNED_ASSUMPTION not in api.plan(lora).assumptions
