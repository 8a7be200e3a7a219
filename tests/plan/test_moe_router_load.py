"""parallel.moe_router_load in the plan: where the busiest-rank factor applies (``plan.time.ep_load_factor_of``), the
note that says so (``plan.time.router_load_note``), the memory note (``plan.stages.model_parallel_notes``) and the
refusal on a dense model (``plan.dense_model_refusal``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.errors import CardError
from trainfit.plan import check_model_options, dense_model_refusal, make_plan
from trainfit.plan.time import ep_load_factor_of, router_load_note
from trainfit.spec.card import load_card_dict

MOE = from_catalog("Qwen/Qwen3-30B-A3B")
DENSE = from_catalog("Qwen/Qwen3-8B")


def _card(model="Qwen/Qwen3-30B-A3B", ep=16, **par):
    return load_card_dict({
        "model": model, "method": "sft", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
        "parallel": {"strategy": "zero1", "gradient_checkpointing": False, "expert_parallel": ep, **par},
        "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 8}})


def test_consecutive_routing_is_balanced_by_construction():
    # NeMo Automodel's FakeBalancedGate gives every expert the same count: no busiest rank, whatever the field says
    assert ep_load_factor_of(_card(), MOE) > 1.5
    assert ep_load_factor_of(_card(moe_routing="consecutive"), MOE) == 1.0
    consecutive = make_plan(_card(moe_routing="consecutive"))
    forced = make_plan(_card(moe_routing="consecutive", moe_router_load="balanced"))
    assert consecutive.step_seconds == forced.step_seconds


def test_the_plan_says_when_the_factor_applies_and_how_far_its_checks_reach():
    note = router_load_note(_card(ep=16), MOE)
    assert note.startswith("trained router (parallel.moe_router_load trained): every rank waits for the busiest of"
                           " 16 EP ranks")
    assert "x1.58" in note and "qwen3_moe" in note and "EP 4 and 8" in note and "extrapolated" in note
    assert "set balanced for a forced-balance run" in note
    assert note in make_plan(_card(ep=16)).time.assumptions
    within = router_load_note(_card(ep=8), MOE)
    assert "x1.33" in within and "extrapolated" not in within
    for card in (_card(moe_router_load="balanced"), _card(moe_routing="consecutive"), _card(ep=1)):
        assert router_load_note(card, MOE) is None


def test_memory_note_names_the_busiest_rank_and_memory_numbers_stay():
    trained, balanced = make_plan(_card(ep=16)), make_plan(_card(ep=16, moe_router_load="balanced"))
    line = [a for a in trained.assumptions if "under a trained router" in a]
    assert len(line) == 1 and "x1.58" in line[0] and "memory is planned at the mean" in line[0]
    assert not any("under a trained router" in a for a in balanced.assumptions)
    assert trained.peak == balanced.peak


def test_balanced_is_refused_on_a_dense_model_in_one_line():
    card = _card(model="Qwen/Qwen3-8B", ep=1, moe_router_load="balanced")
    msg = dense_model_refusal(card, DENSE)
    assert msg == ("parallel.moe_router_load: 'balanced' forces an MoE router's balance; Qwen/Qwen3-8B is dense;"
                   " allowed for it: trained")
    with pytest.raises(CardError, match="parallel.moe_router_load"):
        check_model_options(card)
    assert dense_model_refusal(_card(model="Qwen/Qwen3-8B", ep=1), DENSE) is None
