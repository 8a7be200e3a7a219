"""parallel.grad_accumulation_pass: nanotron's FP32GradientAccumulator adds every micro-batch's 16-bit gradients into
its fp32 buffer, one add_ per parameter tensor (``training.fp32_grad_accumulation_seconds``)."""

from __future__ import annotations

import pytest

from trainfit.compute.training import ZERO_PASS, fp32_grad_accumulation_seconds
from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def test_a_memory_bound_pass_over_the_rank_parameters():
    f = fp32_grad_accumulation_seconds
    one = f(params=1e9, tensors=100, grad_bytes=2.0, accumulator_bytes=4.0, hbm_bytes_per_s=3e12,
            device_s_per_kernel=2.5e-6)
    # read the bf16 gradient, read and write the fp32 buffer: 10 B a parameter, plus a launch per tensor
    assert one.seconds == pytest.approx(1e9 * 10 / 3e12 + 100 * 2.5e-6)
    assert one.bound == "memory" and one.gemm_s == 0.0
    assert f(params=0, tensors=0, grad_bytes=2.0, accumulator_bytes=4.0, hbm_bytes_per_s=3e12,
             device_s_per_kernel=2.5e-6) == ZERO_PASS


def _plan(parallel: dict, *, grad_accum: int = 8, scope: str = "full"):
    card = {"model": "meta-llama/Llama-3.1-8B", "method": "sft", "scope": scope,
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "zero1", "gradient_checkpointing": False, "tensor_parallel": 4, **parallel},
            "precision": {"grads": "fp32"},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": grad_accum}}
    return make_plan(load_card_dict(card))


def test_every_micro_batch_pays_it_in_its_backward():
    off, on = _plan({}), _plan({"grad_accumulation_pass": True})
    assert on.time_parts["forward"] == off.time_parts["forward"]
    grown = on.time_parts["backward"] - off.time_parts["backward"]
    assert grown > 0
    # eight micro-batches, eight passes
    one = _plan({"grad_accumulation_pass": True}, grad_accum=1).time_parts["backward"] - _plan(
        {}, grad_accum=1).time_parts["backward"]
    assert grown == pytest.approx(8 * one, rel=1e-6)
    # adapters: the frozen base has no gradient to accumulate
    assert _plan({"grad_accumulation_pass": True}, scope="lora").time_parts["backward"] == _plan(
        {}, scope="lora").time_parts["backward"]


def test_the_card_needs_an_fp32_gradient_buffer():
    card = {"model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": "h100-sxm"},
            "parallel": {"strategy": "ddp", "grad_accumulation_pass": True}}
    with pytest.raises(CardError, match="grad_accumulation_pass"):
        load_card_dict(card)
    assert load_card_dict({**card, "precision": {"grads": "fp32"}}).parallel.grad_accumulation_pass
