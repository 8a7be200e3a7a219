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


@pytest.mark.parametrize("scope", ["lora", "qlora"])
def test_adapter_cards_are_refused_in_one_line(scope):
    # the frozen base has no gradient to accumulate: refused, not silently ignored
    with pytest.raises(CardError) as exc:
        _plan({"grad_accumulation_pass": True}, scope=scope)
    msg = str(exc.value)
    assert msg.startswith("parallel.grad_accumulation_pass:") and f"scope {scope}" in msg and "\n" not in msg


def test_the_host_loop_issues_one_call_per_tensor():
    f = fp32_grad_accumulation_seconds
    kw = dict(grad_bytes=2.0, accumulator_bytes=4.0, hbm_bytes_per_s=3e12, device_s_per_kernel=2.5e-6)
    # small tensors: the Python loop (12 us a tensor) outlasts the kernels
    small = f(params=1e6, tensors=200, host_s_per_tensor=12e-6, **kw)
    assert small.host_s == pytest.approx(200 * 12e-6) and small.seconds == small.host_s and small.bound == "launch"
    # large ones: the device's pass, the loop hidden under it
    big = f(params=1e9, tensors=200, host_s_per_tensor=12e-6, **kw)
    assert big.seconds == pytest.approx(1e9 * 10 / 3e12 + 200 * 2.5e-6) and big.bound == "memory"


def test_only_a_llama_shaped_model_loses_the_fused_tensors():
    from dataclasses import replace

    from trainfit.catalog.models import resolve_model
    from trainfit.compute.training import nanotron_fused_tensors

    llama = resolve_model("meta-llama/Llama-3.1-8B")
    assert nanotron_fused_tensors(llama) == 3 * 32  # qkv_proj and gate_up_proj a layer
    assert nanotron_fused_tensors(replace(llama, mlp_gated=False)) == 0
    assert nanotron_fused_tensors(resolve_model("Qwen/Qwen3-30B-A3B")) == 0


def test_the_card_needs_an_fp32_gradient_buffer():
    card = {"model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": "h100-sxm"},
            "parallel": {"strategy": "ddp", "grad_accumulation_pass": True}}
    with pytest.raises(CardError, match="grad_accumulation_pass"):
        load_card_dict(card)
    assert load_card_dict({**card, "precision": {"grads": "fp32"}}).parallel.grad_accumulation_pass
