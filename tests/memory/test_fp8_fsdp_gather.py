"""fp8 compute under FSDP mixed precision (``plan.terms.fsdp_casts_gathered_params``): fp32 parameter shards are
gathered in bf16 as for bf16 compute (torchtitan's one ``MixedPrecisionPolicy(param_dtype=bf16)`` with or without the
float8 converter), so autocast makes no weight copies; the fp8 card's plan differs from the bf16 card's only by the
fp8 terms (torchao current scaling: the scales). The tracer refuses fp8 (``trainfit.cli.trace_cmd``: no fp8 GEMMs on
the CPU trace) and torchao is not in the trace environment, so this is a plan-level check, not a trace."""

from __future__ import annotations

import pytest

from trainfit.memory.sharding import Sharding
from trainfit.plan import make_plan
from trainfit.plan.terms import autocast_copies_weights, fsdp_casts_gathered_params, fsdp_gathered_dtype
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Dtype


def _titan(compute: str, **parallel) -> dict:
    """torchtitan Llama-3.1-8B on 8 H100 (the harness's card for the torchao float8 table's rows)."""
    prec = {"optimizer": "adamw", "grads": "fp32", "weights": "fp32", "compute": compute}
    if compute == "fp8":
        prec["fp8_recipe"] = "current"
    return {"model": "meta-llama/Llama-3.1-8B", "scope": "full",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": "selective", "fsdp_version": "fsdp2", **parallel},
            "batch": {"micro_batch_size": 1, "seq_len": 8192}, "precision": prec}


def test_fp8_gathers_bf16_and_makes_no_autocast_copies():
    card = load_card_dict(_titan("fp8"))
    sharding = Sharding(strategy=card.parallel.strategy, world_size=8, shard_group=8)
    assert fsdp_casts_gathered_params(card, sharding)
    assert fsdp_gathered_dtype(card) is Dtype.BF16
    assert not autocast_copies_weights(card, sharding)
    bf16 = load_card_dict(_titan("bf16"))
    assert fsdp_gathered_dtype(bf16) is Dtype.BF16
    # fp32 weights are not cast by a strategy that does not gather (DDP): autocast copies them, fp8 as bf16
    ddp = load_card_dict({**_titan("fp8"), "parallel": {"strategy": "ddp"}})
    assert not fsdp_casts_gathered_params(ddp, Sharding(strategy=ddp.parallel.strategy, world_size=8, shard_group=1))


@pytest.mark.parametrize("parallel", [{}, {"tensor_parallel": 2}], ids=["fsdp", "fsdp-tp2"])
def test_fp8_plan_gathers_the_bf16_units(parallel):
    """The single-replica walk (FSDP) and the rank walk (FSDP + TP) plan the fp8 card's gathered units and
    activations as the bf16 card's; the step's allocated peak differs by the fp8 scaling state only."""
    plans = {c: make_plan(load_card_dict(_titan(c, **parallel))) for c in ("bf16", "fp8")}
    peaks = {c: max(p.phases, key=lambda ph: ph.allocated) for c, p in plans.items()}
    assert peaks["fp8"].components.get("fsdp_buffers") == peaks["bf16"].components.get("fsdp_buffers")
    assert peaks["fp8"].components["activations"] == peaks["bf16"].components["activations"]
    assert abs(peaks["fp8"].allocated - peaks["bf16"].allocated) < 2**20
