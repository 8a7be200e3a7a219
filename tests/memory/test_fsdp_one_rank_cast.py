"""FSDP mixed precision on one GPU (``plan.terms.fsdp_casts_gathered_params``): FSDP2's
``MixedPrecisionPolicy(param_dtype=bf16)`` casts the fp32 parameters on a one-rank mesh too (prime-rl's one-GPU
trainer, PrimeIntellect-ai/prime-rl@d8f290ef0358a804f1912bd29ea1b37cc56894b4 src/prime_rl/trainer/model.py l.156,
l.457), so autocast finds bf16 weights and keeps no bf16 copies of them; the plan holds no autocast copies."""

from __future__ import annotations

import pytest

from trainfit.memory.sharding import Sharding
from trainfit.plan import make_plan
from trainfit.plan.terms import autocast_copies_weights, fsdp_casts_gathered_params
from trainfit.spec.card import load_card_dict


def _card(strategy: str, lora: bool) -> dict:
    card = {"model": "Qwen/Qwen3-0.6B", "scope": "lora" if lora else "full",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1},
            "parallel": {"strategy": strategy},
            "batch": {"micro_batch_size": 1, "seq_len": 2048},
            "precision": {"optimizer": "adamw", "weights": "fp32", "compute": "bf16"}}
    if lora:
        card["lora"] = {"rank": 16}
    return card


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_one_gpu_fsdp_casts_and_autocast_copies_nothing(lora):
    card = load_card_dict(_card("fsdp", lora))
    one = Sharding(strategy=card.parallel.strategy, world_size=1, shard_group=1)
    assert fsdp_casts_gathered_params(card, one)
    assert not autocast_copies_weights(card, one)
    single = load_card_dict(_card("single", lora))
    assert autocast_copies_weights(single, Sharding(strategy=single.parallel.strategy, world_size=1, shard_group=1))


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_one_gpu_fsdp_plans_no_autocast_weight_copies(lora):
    """The one-GPU FSDP card's activations are the single-GPU card's less the 16-bit weight copies autocast would save."""
    fsdp = make_plan(load_card_dict(_card("fsdp", lora)))
    single = make_plan(load_card_dict(_card("single", lora)))
    act = {p.phase.value: p for p in fsdp.phases}
    ref = {p.phase.value: p for p in single.phases}
    fwd, ref_fwd = act["forward"].components["activations"], ref["forward"].components["activations"]
    assert fwd < ref_fwd - 1e8  # the copies: 2 B x ~0.4e9 layer weights

