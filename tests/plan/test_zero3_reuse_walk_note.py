"""The plan states DeepSpeed ZeRO-3's once-per-run reuse-distance walk beside the step time, not in it."""

import re

import pytest

from trainfit.compute import zero3_trace
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

CARD = {"model": "Qwen/Qwen3-30B-A3B-Base", "method": "sft", "scope": "full",
        "hardware": {"gpu": "a800-80gb", "gpus_per_node": 8, "nodes": 2},
        "parallel": {"strategy": "zero3", "gradient_checkpointing": True, "moe_experts": "loop_all"},
        "batch": {"micro_batch_size": 1, "seq_len": 8192, "grad_accum": 1}, "attention": "flash"}


def _walk_notes(card):
    plan = make_plan(load_card_dict(card))
    return plan, [a for a in plan.time.assumptions if "complete module trace" in a]


def test_zero3_plan_states_the_walk_and_the_step_time_does_not_carry_it():
    plan, notes = _walk_notes(CARD)
    assert len(notes) == 1 and "93,906-entry trace" in notes[0] and "not in the step time" in notes[0]
    leaf, leaf_notes = _walk_notes({**CARD, "parallel": {**CARD["parallel"], "moe_zero3_leaf": True}})
    assert len(leaf_notes) == 1 and "93,906" not in leaf_notes[0]


def _walk_s(note):
    return float(re.search(r"about ([\d.]+) s", note).group(1))


def test_the_step_time_does_not_move_with_the_walk_rate(monkeypatch):
    plan, notes = _walk_notes(CARD)
    monkeypatch.setattr(zero3_trace, "ZERO3_REUSE_WALK_S_PER_MODULE", zero3_trace.ZERO3_REUSE_WALK_S_PER_MODULE * 1000)
    slow, slow_notes = _walk_notes(CARD)
    assert _walk_s(slow_notes[0]) > 100 * _walk_s(notes[0])  # the note's figure carries the rate
    assert slow.time.total_s == pytest.approx(plan.time.total_s, rel=1e-12)  # the step seconds do not


def test_other_strategies_have_no_walk_note():
    _, notes = _walk_notes({**CARD, "parallel": {"strategy": "fsdp", "gradient_checkpointing": True,
                                                 "moe_experts": "loop_all"}})
    assert notes == []
