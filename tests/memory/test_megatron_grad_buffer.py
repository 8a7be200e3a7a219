"""Megatron-Core's gradient buffer is held from the first forward (plan.ranks.megatron_grad_buffer_held).

Megatron-Core's DistributedDataParallel makes one contiguous buffer of every gradient it will reduce when it wraps the
model and only zeroes it at the start of each iteration, so a run of one micro-batch per step and no pipeline holds the
buffer at its forward's peak too. Before, such a card planned its forward with no gradient at all (the buffer appeared
only with gradient accumulation or pipeline stages)."""

from __future__ import annotations

import pytest

from trainfit.plan import make_plan
from trainfit.plan.ranks import megatron_grad_buffer_held
from trainfit.spec.card import load_card_dict

GIB = 2**30


def _card(impl: str = "megatron", *, grad_accum: int = 1, scope: str = "full", pp: int = 1) -> dict:
    card = {"model": "Qwen/Qwen2.5-7B-Instruct", "scope": scope,
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 2},
            "parallel": {"strategy": "zero1", "gradient_checkpointing": True, "tensor_parallel": 2,
                         "sequence_parallel": True, "tensor_parallel_impl": impl,
                         **({"pipeline_parallel": pp} if pp > 1 else {})},
            "batch": {"micro_batch_size": 2, "seq_len": 1024, "grad_accum": grad_accum},
            "precision": {"optimizer": "adamw", "grads": "fp32"}}
    if scope == "lora":
        card["lora"] = {"rank": 8, "alpha": 32, "targets": "all-linear"}
        del card["precision"]["grads"]
    return card


def _forward(plan):
    return next(p for p in plan.phases if p.phase.value == "forward")


def test_one_micro_batch_holds_the_buffer_at_forward():
    """Qwen2.5-7B on TP 2 (3.8 B parameters a rank): the forward's gradients are the rank's fp32 buffer, 4 B each."""
    plan = make_plan(load_card_dict(_card()))
    grads = _forward(plan).components["gradients"]
    n = plan.params_total / 2  # every parameter is split over the two tensor-parallel ranks (untied head included)
    assert grads == pytest.approx(4 * n, rel=0.01)
    # the same as with gradient accumulation, where the buffer was already held from the second micro-batch
    accum = make_plan(load_card_dict(_card(grad_accum=4)))
    assert grads == pytest.approx(_forward(accum).components["gradients"], rel=1e-9)


def test_dtensor_cards_keep_their_first_backward_without_gradients():
    """torch's autograd makes .grad in backward: a DTensor card's forward of one micro-batch holds none."""
    plan = make_plan(load_card_dict(_card("dtensor")))
    assert _forward(plan).components.get("gradients", 0.0) == 0.0


def test_lora_buffer_is_the_adapters():
    full = make_plan(load_card_dict(_card()))
    lora = make_plan(load_card_dict(_card(scope="lora")))
    g = _forward(lora).components["gradients"]
    assert 0 < g < 0.01 * _forward(full).components["gradients"]


def test_the_pair_difference_full_minus_lora():
    """ms-swift's documented pair (docs/source_en/Megatron-SWIFT/LoRA-Training.md: full 2 * 70GiB, LoRA 2 * 14GiB, the
    same command but --tuner_type) differs by 56 GiB whatever the rows' lengths: the full run's weights' fp32 master,
    states and gradient buffer. Without the buffer the plans differ by 14 GiB less."""
    full = make_plan(load_card_dict(_card()))
    lora = make_plan(load_card_dict(_card(scope="lora")))
    diff = (full.peak.allocated - lora.peak.allocated) / GIB
    assert 55 < diff < 58


def test_only_megatron_and_not_nanotrons_accumulator():
    assert megatron_grad_buffer_held(load_card_dict(_card()))
    assert not megatron_grad_buffer_held(load_card_dict(_card("dtensor")))
    nano = _card("nanotron")
    nano["parallel"]["grad_accumulation_pass"] = True
    assert not megatron_grad_buffer_held(load_card_dict(nano))
