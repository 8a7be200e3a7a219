"""parallel.moe_load_balancing on a fused router (parallel.moe_launch fused): the loss's extra ops are priced on the
eager router only, so the plan says the field is not counted (``plan.time.fused_router_load_balancing_note``)."""

from __future__ import annotations

import pytest

from trainfit.plan import make_plan
from trainfit.plan.time import fused_router_load_balancing_note
from trainfit.spec.card import load_card_dict


def _card(**par):
    return load_card_dict({
        "model": "Qwen/Qwen3-30B-A3B", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
        "parallel": {"strategy": "zero1", "expert_parallel": 8, "tensor_parallel_impl": "megatron", **par},
        "batch": {"micro_batch_size": 1, "grad_accum": 2, "seq_len": 4096}})


def test_fused_router_says_the_loss_is_not_counted():
    card = _card(moe_launch="fused", moe_load_balancing="aux_loss")
    note = fused_router_load_balancing_note(card)
    assert note.startswith("parallel.moe_load_balancing aux_loss: not counted on a fused or graphed router")
    assert note in make_plan(card).time.assumptions


@pytest.mark.parametrize("par", [{"moe_load_balancing": "aux_loss"},  # eager by default: counted
                                 {"moe_launch": "eager", "moe_load_balancing": "seq_aux_loss"},
                                 {"moe_launch": "fused", "moe_load_balancing": "none"},
                                 {"moe_launch": "fused"}])
def test_no_note_where_the_field_is_priced_or_empty(par):
    assert fused_router_load_balancing_note(_card(**par)) is None
