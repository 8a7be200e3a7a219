"""memory.fsdp_no_sync: FSDP1's unsharded gradients under no_sync, and the plan term of a card that states it."""

from __future__ import annotations

import pytest

from trainfit.errors import CardError
from trainfit.memory.fsdp_no_sync import no_sync_step_grad_bytes, no_sync_unit_grad_bytes
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def test_unit_with_a_trainable_parameter_holds_its_whole_flat_gradient() -> None:
    # a LoRA layer: 200 M frozen + 0.13 M adapter parameters, bf16 -> the whole flat parameter's gradient
    assert no_sync_unit_grad_bytes(unit_params=200e6 + 131072, unit_trainable_params=131072,
                                   grad_dtype_bytes=2) == pytest.approx((200e6 + 131072) * 2)
    assert no_sync_unit_grad_bytes(unit_params=200e6, unit_trainable_params=0, grad_dtype_bytes=2) == 0.0
    with pytest.raises(ValueError):
        no_sync_unit_grad_bytes(unit_params=-1, unit_trainable_params=0, grad_dtype_bytes=2)


def _card(**parallel: object) -> dict:
    return {"model": "meta-llama/Llama-2-7b-hf", "scope": "lora",
            "lora": {"rank": 8, "alpha": 16, "targets": ["q_proj", "v_proj"], "adapter_dtype": "bf16"},
            "precision": {"weights": "bf16", "compute": "bf16", "master_weights": "none", "optimizer": "adamw",
                          "optimizer_states": "same_as_weights", "optimizer_impl": "foreach"},
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 2},
            "parallel": {"strategy": "fsdp", "fsdp_version": "fsdp1", "gradient_checkpointing": True, **parallel},
            "batch": {"micro_batch_size": 1, "seq_len": 1024, "grad_accum": 8}}


def test_plan_holds_every_layer_unsharded_gradient() -> None:
    base = make_plan(load_card_dict(_card())).peak
    synced = make_plan(load_card_dict(_card(fsdp_no_sync=True))).peak
    # Llama-2-7B: 32 decoder layers of 202,383,360 parameters, bf16 -> 12.95 GB held on each of the 2 ranks
    layers = 32 * 202_383_360 * 2
    assert synced.components["gradients"] == pytest.approx(layers, rel=0.01)
    assert synced.allocated - base.allocated == pytest.approx(layers, rel=0.05)


def test_no_accumulation_no_term() -> None:
    card, plain = _card(fsdp_no_sync=True), _card()
    card["batch"]["grad_accum"] = plain["batch"]["grad_accum"] = 1
    assert make_plan(load_card_dict(card)).peak.allocated == make_plan(load_card_dict(plain)).peak.allocated


def test_refused_outside_fsdp1() -> None:
    with pytest.raises((CardError, ValueError), match="fsdp_no_sync"):
        load_card_dict(_card(fsdp_no_sync=True, fsdp_version="fsdp2"))


def test_default_follows_the_preset_framework() -> None:
    # null: the HF Trainer on accelerate (trl) and verl from 0.9 run no_sync; no preset, or a verl before 0.9, syncs
    from trainfit.plan.fsdp_no_sync import fsdp_no_sync

    plain = load_card_dict(_card())
    assert plain.parallel.fsdp_no_sync is None and not fsdp_no_sync(plain)
    assert fsdp_no_sync(load_card_dict({**_card(), "preset": "trl"}))
    assert fsdp_no_sync(load_card_dict({**_card(), "preset": "verl"}))
    assert not fsdp_no_sync(load_card_dict({**_card(), "preset": "verl", "software": {"verl": "0.8.0"}}))
    assert fsdp_no_sync(load_card_dict({**_card(), "preset": "verl", "software": {"verl": "0.9.0"}}))
    # explicit values are honoured; no accumulation or FSDP2: never
    assert not fsdp_no_sync(load_card_dict({**_card(fsdp_no_sync=False), "preset": "trl"}))
    assert fsdp_no_sync(load_card_dict(_card(fsdp_no_sync=True)))
    one = _card()
    one["batch"]["grad_accum"] = 1
    assert not fsdp_no_sync(load_card_dict({**one, "preset": "trl"}))
    assert not fsdp_no_sync(load_card_dict({**_card(fsdp_version="fsdp2"), "preset": "trl"}))


def test_trl_card_plans_the_unsharded_gradients_by_default() -> None:
    # the same card under preset trl holds what an explicit fsdp_no_sync true holds (accelerate's default)
    by_default = make_plan(load_card_dict({**_card(), "preset": "trl"})).peak
    stated = make_plan(load_card_dict({**_card(fsdp_no_sync=True), "preset": "trl"})).peak
    assert by_default.components["gradients"] == pytest.approx(stated.components["gradients"])
    assert by_default.components["gradients"] == pytest.approx(32 * 202_383_360 * 2, rel=0.01)


def test_step_grads_are_the_reduce_scattered_shards() -> None:
    # 12.95 GB of held unsharded unit gradients over 2 ranks -> 6.475 GB each after the synced backward
    assert no_sync_step_grad_bytes(unsharded_grad_bytes=12.95e9, shards=2) == pytest.approx(6.475e9)
    assert no_sync_step_grad_bytes(unsharded_grad_bytes=12.95e9, shards=1) == pytest.approx(12.95e9)
    with pytest.raises(ValueError):
        no_sync_step_grad_bytes(unsharded_grad_bytes=1.0, shards=0)


def _phase(plan, name: str):
    return next(p for p in plan.phases if p.phase.value == name)


def test_optimizer_step_sees_sharded_whole_unit_gradients() -> None:
    """After the synced last backward FSDP1 keeps each unit's gradient shard (the whole flat parameter's, frozen parts
    included), not the unsharded gradients the accumulating backwards held."""
    plan = make_plan(load_card_dict(_card(fsdp_no_sync=True)))
    # Llama-2-7B, LoRA r8 on q,v: per layer 202,383,360 frozen + 2 x 8 x (4096 + 4096) = 131,072 adapter parameters;
    # 32 x 202,514,432 = 6,480,461,824 parameters x 2 B (bf16) / 2 ranks = 6,480,461,824 B
    assert _phase(plan, "optimizer_step").components["gradients"] == pytest.approx(6_480_461_824, rel=1e-3)
    assert _phase(plan, "backward").components["gradients"] == pytest.approx(2 * 6_480_461_824, rel=1e-3)


def test_in_flight_unit_gradient_spans_the_whole_flat_parameter() -> None:
    """Under no_sync the gradient autograd makes for a unit is the whole flat parameter's (use_orig_params=True), added
    into the held .grad: one unit, (202,383,360 + 131,072) x 2 B = 405,028,864 B, where the synced card's in-flight
    gradient is the adapters' 131,072 x 2 B = 262,144 B."""
    synced = _phase(make_plan(load_card_dict(_card(fsdp_no_sync=True))), "backward")
    base = _phase(make_plan(load_card_dict(_card())), "backward")
    assert synced.at == base.at
    diff = synced.components["fsdp_buffers"] - base.components["fsdp_buffers"]
    assert diff == pytest.approx(405_028_864 - 262_144, rel=1e-3)
