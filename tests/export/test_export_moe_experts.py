"""``parallel.moe_experts: loop`` and ``parallel.moe_zero3_leaf`` (transformers < 5's expert loop, DeepSpeed's leaf
module) through every exporter: no framework file holds them, so each export names them in a note."""

from __future__ import annotations

import pytest
from export_cards import assert_lost_fields_named

from trainfit.export import TARGETS, ExportError, export
from trainfit.spec.card import load_card_dict

FIELDS = ("parallel.moe_experts", "parallel.moe_zero3_leaf")


def _card(strategy, **par):
    return load_card_dict({"model": "Qwen/Qwen3-30B-A3B", "method": "sft",
                           "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8, "nodes": 2},
                           "parallel": {"strategy": strategy, "moe_experts": "loop", **par},
                           "batch": {"micro_batch_size": 1, "grad_accum": 1, "seq_len": 4096}, "attention": "flash"})


CARDS = {"zero3-loop": lambda: _card("zero3"), "zero3-loop-leaf": lambda: _card("zero3", moe_zero3_leaf=True),
         "fsdp-loop": lambda: _card("fsdp")}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", tuple(CARDS))
def test_loop_and_leaf_are_named_where_lost(name, target):
    assert_lost_fields_named(CARDS[name](), target, FIELDS)


def test_deepspeed_export_names_both():
    e = export(CARDS["zero3-loop-leaf"](), "deepspeed")
    assert any(n.startswith("parallel.moe_experts loop") for n in e.notes)
    assert any(n.startswith("parallel.moe_zero3_leaf") for n in e.notes)


@pytest.mark.parametrize("target", TARGETS)
def test_grouped_padded_is_named_where_lost(target):
    card = load_card_dict({"model": "Qwen/Qwen3-30B-A3B", "method": "sft",
                           "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
                           "parallel": {"strategy": "fsdp", "moe_experts": "grouped_padded"},
                           "batch": {"micro_batch_size": 1, "grad_accum": 1, "seq_len": 4096}, "attention": "flash"})
    assert_lost_fields_named(card, target, ("parallel.moe_experts",))


@pytest.mark.parametrize("target", TARGETS)
def test_grouped_expert_adapters_are_named_where_lost(target):
    card = load_card_dict({"model": "Qwen/Qwen3-30B-A3B", "method": "sft", "scope": "lora",
                           "lora": {"expert_adapters": "grouped"},
                           "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8}, "parallel": {"strategy": "fsdp"},
                           "batch": {"micro_batch_size": 1, "grad_accum": 1, "seq_len": 4096}, "attention": "flash"})
    assert_lost_fields_named(card, target, ("lora.expert_adapters",))


@pytest.mark.parametrize("target", TARGETS)
def test_loop_v5_is_named_where_lost(target):
    card = load_card_dict({"model": "Qwen/Qwen3-30B-A3B", "method": "sft",
                           "hardware": {"gpu": "h200", "gpus_per_node": 8},
                           "parallel": {"strategy": "fsdp", "moe_experts": "loop_v5"},
                           "batch": {"micro_batch_size": 1, "grad_accum": 1, "seq_len": 4096}, "attention": "flash"})
    assert_lost_fields_named(card, target, ("parallel.moe_experts",))
    try:
        e = export(card, target)
    except ExportError as exc:  # a target that refuses the card outright has no note to give
        assert "allowed for --to" in str(exc)
        return
    if "method" in e.lost:
        return
    # the note itself, not only the generic 'reads back as' line: loop_v5 is set in the model code
    assert any("loop_v5" in n and "set_experts_implementation" in n for n in e.notes), e.notes


@pytest.mark.parametrize("target", TARGETS)
def test_experts_hit_is_named_where_lost(target):
    # the share of experts a random-weight router reaches: a property of the weights, no framework file's key
    assert_lost_fields_named(_card("fsdp", moe_experts_hit=0.4), target, ("parallel.moe_experts_hit",))
