"""torchtitan's padded ``torch._grouped_mm`` wrapper around the routed experts (``MoeExperts.GROUPED_PADDED``,
compute.moe_time.expert_padding_work): its gather and scatter of the routed rows, counted per MoE layer in the
inventory, and the card value."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import resolve_model
from trainfit.compute import moe_time
from trainfit.compute.inventory import step_inventory
from trainfit.spec.card import CardError, load_card_dict
from trainfit.spec.enums import MoeExperts

QWEN_MOE = resolve_model("Qwen/Qwen3-30B-A3B")


def test_bytes_and_kernels_from_the_traced_ops():
    rows, h = 131072, 2048
    w = moe_time.expert_padding_work(rows=rows, hidden=h)
    assert w.forward_bytes == pytest.approx(12.0 * rows * h)  # vstack copy, gather, scatter: read 2 + write 2 each
    assert w.backward_bytes == pytest.approx(18.0 * rows * h)  # slice_backward 6, gather 4, zeros 2 + index_put 6
    assert (w.forward_kernels, w.backward_kernels) == (18.0, 5.0)
    assert moe_time.expert_padding_work(rows=0, hidden=h) == moe_time.MoeLayerWork(0.0, 0.0, 0.0, 0.0)


def test_inventory_adds_the_wrapper_per_moe_layer_and_nothing_else():
    kw = dict(micro_batch_size=1, seq_len=4096, expert_parallel=1)
    plain = step_inventory(QWEN_MOE, **kw)
    padded = step_inventory(QWEN_MOE, expert_padding=True, **kw)
    layers = QWEN_MOE.num_moe_layers
    extra = moe_time.expert_padding_work(rows=4096 * QWEN_MOE.moe.experts_per_token, hidden=QWEN_MOE.hidden_size)
    assert padded.layers_forward.memory_bytes - plain.layers_forward.memory_bytes == pytest.approx(
        extra.forward_bytes * layers)
    assert padded.layers_backward.memory_bytes - plain.layers_backward.memory_bytes == pytest.approx(
        extra.backward_bytes * layers)
    assert padded.layers_forward.kernels - plain.layers_forward.kernels == pytest.approx(extra.forward_kernels * layers)
    assert padded.layers_backward.kernels - plain.layers_backward.kernels == pytest.approx(
        extra.backward_kernels * layers)
    assert padded.layers_forward.gemms == plain.layers_forward.gemms  # the padding rows are not counted
    # a dense model has no routed rows to pad
    dense = resolve_model("Qwen/Qwen3-8B")
    assert step_inventory(dense, expert_padding=True, **kw) == step_inventory(dense, **kw)


def test_card_value_and_its_refusal_under_megatron_core():
    card = load_card_dict({"model": "Qwen/Qwen3-30B-A3B", "method": "sft",
                           "parallel": {"strategy": "fsdp", "moe_experts": "grouped_padded"}})
    assert card.parallel.moe_experts is MoeExperts.GROUPED_PADDED and not MoeExperts.GROUPED_PADDED.is_loop
    with pytest.raises(CardError) as exc:
        load_card_dict({"model": "Qwen/Qwen3-30B-A3B", "method": "sft",
                        "parallel": {"strategy": "zero1", "tensor_parallel_impl": "megatron",
                                     "moe_experts": "grouped_padded"}})
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("parallel.moe_experts: grouped_padded")
    assert "allowed there: grouped" in msg


def test_a_padded_card_plans_a_slower_step_than_a_grouped_one():
    from trainfit.plan import make_plan

    base = {"model": "Qwen/Qwen3-30B-A3B", "method": "sft", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
            "batch": {"micro_batch_size": 1, "seq_len": 4096}}
    t = {}
    for experts in ("grouped", "grouped_padded"):
        card = load_card_dict({**base, "parallel": {"strategy": "fsdp", "moe_experts": experts}})
        t[experts] = make_plan(card).time.total_s
    assert t["grouped_padded"] > t["grouped"]
