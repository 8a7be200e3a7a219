"""PEFT's adapter linears as FSDP1 units of their own (``parallel.fsdp_adapter_units``): their hooks, and FSDP1's
``limit_all_gathers`` rate limiter pacing the adapted projections (``collectives.rate_limited_adapter_units_seconds``,
``training.adapted_projections``, ``training.rate_limited``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import collectives as coll
from trainfit.compute import rates as rt
from trainfit.compute.inventory import Adapter
from trainfit.compute.training import Parallel, PassTime, fsdp_unit_host_seconds, rate_limited, train_step_time
from trainfit.errors import CardError
from trainfit.spec.card import load_card_dict

A100 = rt.default_rates(resolve_gpu("a100-80gb"))
MISTRAL = from_catalog("mistralai/Mistral-7B-v0.1")
LORA = Adapter(rank=16, targets=("q_proj", "k_proj", "v_proj", "o_proj"), dropout=0.1)
KW = dict(rates=A100, seq_len=4096, micro_steps=1, trained_params=1.4e7, trained_tensors=256,
          gathered_weight_bytes=1.45e10, gradient_checkpointing=True, recompute_whole_layer=True, adapter=LORA)


def _step(mbs: int, *, units: bool, ranks: int = 2):
    par = Parallel(strategy="fsdp", ranks=ranks, gpus_per_node=ranks, fsdp_adapter_units=units)
    return train_step_time(MISTRAL, micro_batch_size=mbs, parallel=par, **KW)


def _phase(t, name):
    return next(p for p in t.phases if p.name == name)


def test_the_limiter_charges_the_host_time_no_projection_covers():
    assert coll.rate_limited_adapter_units_seconds(projections=((32, 1e-3, 1.5e-3), (64, 2e-3, 1e-3))) == (
        pytest.approx(32 * 0.5e-3))
    assert coll.rate_limited_adapter_units_seconds(projections=()) == 0.0


def test_rate_limited_keeps_what_it_adds_as_sync_time():
    t = PassTime(1.0, 0.6, 0.1, 0.2, 0.5)
    paced = rate_limited(t, exposed_s=0.3)
    assert paced.seconds == pytest.approx(1.2) and paced.sync_s == pytest.approx(0.2)
    assert rate_limited(t, exposed_s=0.05) == t  # the pass already takes longer than its device work plus that


def test_adapter_units_add_two_units_hooks_per_adapted_call():
    """At the adapter unit's measured rates: the re-entrant first forward's no-grad hooks, the recompute's grad-mode
    ones, the backward's."""
    off, on = _step(2, units=False), _step(2, units=True)
    calls = 4 * MISTRAL.num_layers

    def more(name):
        return _phase(on, name).terms["host_launch"] - _phase(off, name).terms["host_launch"]

    assert more("forward") == pytest.approx(2 * calls * rt.FSDP_ADAPTER_UNIT_FORWARD_HOST_S)
    assert more("recompute") == pytest.approx(2 * calls * rt.FSDP_ADAPTER_UNIT_GRAD_FORWARD_HOST_S)
    assert more("backward") == pytest.approx(2 * calls * rt.FSDP_ADAPTER_UNIT_BACKWARD_HOST_S)
    # measured on the layer unit's footing, the same order as its hooks (rates.FSDP_UNIT_*)
    layer = fsdp_unit_host_seconds(fsdp2=False, grad=True)
    assert 0.5 < rt.FSDP_ADAPTER_UNIT_GRAD_FORWARD_HOST_S / layer[0] < 1.5
    assert 0.5 < rt.FSDP_ADAPTER_UNIT_BACKWARD_HOST_S / layer[1] < 1.5


def test_the_limiter_costs_at_two_sequences_and_fades_with_the_batch():
    """The 2-GPU fms-acceleration shape: the small k / v projections at 2 x 4,096 tokens outlast none of their units'
    host work, at 4 x 4,096 less of it is exposed; without adapter units (or on one rank, NO_SHARD) nothing."""
    extra = {mbs: _step(mbs, units=True).total_s - _step(mbs, units=False).total_s for mbs in (2, 4)}
    assert extra[2] > 0.02
    assert extra[4] < extra[2] / 2
    one = (_step(2, units=True, ranks=1).phases, _step(2, units=False, ranks=1).phases)
    for a, b in zip(*one):
        assert a.terms.get("host_sync", 0.0) == b.terms.get("host_sync", 0.0)


def test_card_field_needs_fsdp1_and_an_adapter():
    base = {"model": "Qwen/Qwen2.5-0.5B", "scope": "lora", "hardware": {"gpu": "a100-80gb", "gpus_per_node": 2},
            "parallel": {"strategy": "fsdp", "fsdp_version": "fsdp1", "fsdp_adapter_units": True}}
    assert load_card_dict(base).parallel.fsdp_adapter_units
    for bad in ({"scope": "full"}, {"parallel": {**base["parallel"], "fsdp_version": "fsdp2"}},
                {"parallel": {**base["parallel"], "strategy": "ddp"}}):
        with pytest.raises(CardError, match="parallel.fsdp_adapter_units"):
            load_card_dict({**base, **bad})
