"""A training loop that walks a GPU tensor element by element (``loop.token_scan_syncs``,
``training.token_scan_seconds``): prime-rl's RL trainer's ``get_response_lengths`` over ``position_ids``."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import default_rates
from trainfit.compute.training import SYNC_ROUND_TRIP_S, token_scan_seconds
from trainfit.errors import CardError
from trainfit.export.common import plan_facts
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

H100 = default_rates(resolve_gpu("h100-sxm"))

CARD = {"model": "Qwen/Qwen3-0.6B", "method": "sft", "scope": "full", "attention": "flash",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1}, "parallel": {"strategy": "single"},
        "batch": {"micro_batch_size": 1, "seq_len": 16384, "grad_accum": 2}}


def test_no_scan_costs_nothing():
    assert token_scan_seconds(syncs=0, rates=H100) == 0.0


def test_each_read_is_a_bare_kernel_its_run_and_a_round_trip():
    # one kernel a segment: the host's bare-call seconds, then the one-element kernel and the read's round trip
    n = 16383
    per = H100.host_s_per_backward_kernel + H100.device_s_per_kernel_min + SYNC_ROUND_TRIP_S
    assert token_scan_seconds(syncs=n, rates=H100) == pytest.approx(n * per, rel=1e-3)


def test_scan_is_linear_in_the_reads():
    one = token_scan_seconds(syncs=16383, rates=H100)
    four = token_scan_seconds(syncs=4 * 16384 - 1, rates=H100)
    assert four == pytest.approx(4 * one, rel=1e-3)


def test_card_scan_adds_a_phase_per_micro_batch():
    plain = make_plan(load_card_dict(CARD))
    scanned = make_plan(load_card_dict({**CARD, "loop": {"token_scan_syncs": 1}}))
    phases = {p.name: p.seconds for p in scanned.time.phases}
    assert "loop_scan" not in {p.name for p in plain.time.phases}
    # two micro-batches of 16384 tokens: 16383 reads each (the loop starts at the second element)
    assert phases["loop_scan"] == pytest.approx(2 * token_scan_seconds(syncs=16383, rates=H100), rel=1e-6)
    assert scanned.step_seconds == pytest.approx(plain.step_seconds + phases["loop_scan"], rel=1e-6)
    assert scanned.peak.device == plain.peak.device  # time only


def test_scan_is_a_plan_fact_and_refused_below_zero():
    card = load_card_dict({**CARD, "loop": {"token_scan_syncs": 1}})
    assert plan_facts(card)["loop.token_scan_syncs"] == 1
    with pytest.raises(CardError):
        load_card_dict({**CARD, "loop": {"token_scan_syncs": -1}})


def test_every_export_names_the_scan_it_cannot_carry():
    from trainfit.export import TARGETS, export

    card = load_card_dict({**CARD, "loop": {"token_scan_syncs": 1}})
    for target in TARGETS:
        e = export(card, target)
        assert "loop.token_scan_syncs" in e.lost, target
        # one note per key, or one per section when several of its keys are lost ("loop.* (2: token_scan_syncs, launcher)")
        assert any(n.startswith("loop.") and "token_scan_syncs" in n for n in e.notes), target
