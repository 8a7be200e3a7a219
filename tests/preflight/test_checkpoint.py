"""Checkpoint sizes: full state, weights only, adapter only (Qwen3-8B, 8,190,735,360 parameters)."""

from __future__ import annotations

import pytest

from trainfit.plan import make_plan
from trainfit.preflight.checkpoint import ADAPTER_NOTE, TRAINER_STATE_BYTES_PER_RANK, checkpoint_bytes, checkpoint_sizes
from trainfit.spec.card import load_card_dict

QWEN3_8B = {"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8}}


def sizes(**extra):
    card = load_card_dict({**QWEN3_8B, **extra})
    plan = make_plan(card)
    return card, plan, checkpoint_sizes(card, plan)


def test_full_scope_bf16_adamw():
    card, plan, s = sizes()
    n = plan.params_total
    assert n == 8_190_735_360
    assert s.weights_only_bytes == 2 * n
    # bf16 weights + two bf16 AdamW states (torch zeros_like) + RNG/scheduler per rank
    assert s.full_state_bytes == 2 * n + 4 * n + 8 * TRAINER_STATE_BYTES_PER_RANK
    assert s.adapter_only_bytes == 0
    assert s.per_checkpoint_bytes(card) == s.full_state_bytes


def test_full_scope_with_fp32_master_weights():
    _, plan, s = sizes(precision={"master_weights": "fp32"})
    n = plan.params_total
    # bf16 weights + fp32 master + two fp32 states = 2 + 4 + 8 = 14 B/param on disk
    assert s.full_state_bytes == pytest.approx(14 * n + 8 * TRAINER_STATE_BYTES_PER_RANK)


def test_lora_adapter_and_resume_method():
    card, plan, s = sizes(scope="lora", lora={"rank": 16})
    t = plan.params_trainable
    assert s.adapter_only_bytes == 4 * t  # PEFT fp32 adapter
    assert s.full_state_bytes == 4 * t + 8 * t + 8 * TRAINER_STATE_BYTES_PER_RANK  # adapter + fp32 AdamW states
    assert s.weights_only_bytes == 2 * plan.params_total + 4 * t
    assert ADAPTER_NOTE in s.note and "cannot resume training exactly" in s.note
    assert s.per_checkpoint_bytes(card) == s.full_state_bytes
    card2 = load_card_dict({**QWEN3_8B, "scope": "lora", "checkpoint": {"resume": "adapter_only"}})
    assert s.per_checkpoint_bytes(card2) == s.adapter_only_bytes


def test_plain_numbers():
    s = checkpoint_bytes(params_total=10, params_trainable=10, weights_bytes_per_param=2, trainable_bytes_per_param=2,
                         optimizer_state_bytes_total=40, master_weights=True, adapter=False, world_size=1)
    assert s.full_state_bytes == 20 + 40 + 40 + TRAINER_STATE_BYTES_PER_RANK
