"""precision.grads fp32 on a Megatron-style card (tensor_parallel_impl megatron, zero1 = the distributed optimizer):
Megatron-Core's fp32 main_grad buffer (``grad_reduce_in_fp32``). The data-parallel reduce-scatter moves 4 B per
gradient, the parameter all-gather still 2 B per weight, the optimizer step reads the fp32 gradients, and the buffer
holds 4 B per parameter of the rank on every data-parallel rank (it is not sharded); compute is unchanged."""

from __future__ import annotations

import re

import pytest

from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _card(grads: str | None, *, nodes: int = 6, tp: int = 8) -> dict:
    # GPT-32B-like: tp 8 with sequence parallel, 6 data-parallel ranks across nodes, 4 micro-batches
    card = {"model": "Qwen/Qwen2.5-32B", "method": "sft",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": nodes},
            "parallel": {"strategy": "zero1", "gradient_checkpointing": False, "tensor_parallel": tp,
                         "sequence_parallel": True, "tensor_parallel_impl": "megatron"},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 4}}
    if grads:
        card["precision"] = {"grads": grads}
    return card


def _collectives_total_s(plan) -> float:
    line = next(a for a in plan.assumptions if "collectives at" in a)
    return float(re.search(r"; ([0-9.]+) s in all", line).group(1))


def test_the_default_is_the_weights_dtype():
    assert make_plan(load_card_dict(_card(None))).step_seconds == make_plan(load_card_dict(_card("bf16"))).step_seconds


def test_fp32_gradients_double_the_reduce_scatter_and_nothing_else_in_the_collectives():
    bf16 = make_plan(load_card_dict(_card("bf16")))
    fp32 = make_plan(load_card_dict(_card("fp32")))
    for part in ("forward", "backward", "tensor_parallel"):
        assert fp32.time_parts[part] == bf16.time_parts[part]
    # bf16: reduce-scatter (2 B) + all-gather (2 B) of the same elements, the same ring time each; fp32 adds one more
    # reduce-scatter's bytes: half the bf16 total (the notes round to ms)
    extra = _collectives_total_s(fp32) - _collectives_total_s(bf16)
    assert extra == pytest.approx(_collectives_total_s(bf16) / 2, abs=2e-3)
    assert fp32.time_parts["communication"] > bf16.time_parts["communication"]
    assert fp32.time_parts["optimizer_step"] > bf16.time_parts["optimizer_step"]  # it reads 4 B gradients
    assert fp32.step_seconds - bf16.step_seconds == pytest.approx(
        (fp32.time_parts["communication"] - bf16.time_parts["communication"])
        + (fp32.time_parts["optimizer_step"] - bf16.time_parts["optimizer_step"]), rel=1e-6)


def test_inside_one_node_the_fp32_reduce_never_costs_less():
    # tp 2 x 4 data-parallel ranks on NVLink
    bf16 = make_plan(load_card_dict(_card("bf16", nodes=1, tp=2)))
    fp32 = make_plan(load_card_dict(_card("fp32", nodes=1, tp=2)))
    assert fp32.step_seconds >= bf16.step_seconds
    assert fp32.time_parts["communication"] >= bf16.time_parts["communication"]


def test_the_fp32_buffer_holds_four_bytes_per_parameter_on_every_rank():
    bf16 = make_plan(load_card_dict(_card("bf16")))
    fp32 = make_plan(load_card_dict(_card("fp32")))
    for a, b in zip(bf16.phases, fp32.phases):
        ga, gb = a.components.get("gradients", 0.0), b.components.get("gradients", 0.0)
        assert gb == pytest.approx(2 * ga, rel=1e-9)
    peak_bf16 = max(p.allocated for p in bf16.phases)
    peak_fp32 = max(p.allocated for p in fp32.phases)
    grads_bf16 = max(p.components.get("gradients", 0.0) for p in bf16.phases)
    # Qwen2.5-32B over tp 8: about 4.1e9 parameters per rank, 2 B more each
    assert grads_bf16 / 2**30 == pytest.approx(7.63, abs=0.05)
    assert peak_fp32 - peak_bf16 == pytest.approx(grads_bf16, rel=1e-6)
