"""FSDP1's rate limiter with PEFT's adapter units nested in every layer leaves each layer unit's all-gather without
compute to hide behind (compute.collectives.rate_limiter_exposes_layer_gathers, exposed_sharded's
layer_gathers_hidden): the torch code is cited in that function's docstring (pytorch/pytorch
@cf30153c4c131c8164ee7798e5022d810682e2cb, _runtime_utils.py _unshard l.297-303, _reshard l.320-326,
_limiter_utils.py l.15)."""

from __future__ import annotations

import pytest

from trainfit.compute import collectives as coll
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

KW = dict(layers=8, layer_weight_bytes=4e8, layer_grad_bytes=2e7, root_weight_bytes=1e8, root_grad_bytes=0.0,
          ranks=2, bus_bytes_per_s=8e9, latency_s=0.0, layer_forward_s=1.0, layer_backward_s=2.0, micro_steps=1)


def test_exposed_only_with_adapter_units_on_fsdp1_full_shard_over_ranks():
    assert coll.rate_limiter_exposes_layer_gathers(adapter_units=True, fsdp2=False, reshard_after_forward=True,
                                                   ranks=2)
    for kw in (dict(adapter_units=False), dict(fsdp2=True), dict(reshard_after_forward=False), dict(ranks=1)):
        args = dict(adapter_units=True, fsdp2=False, reshard_after_forward=True, ranks=2) | kw
        assert not coll.rate_limiter_exposes_layer_gathers(**args), kw


def test_every_layer_gather_exposed_reductions_still_hidden():
    """Compute far longer than any collective: hidden, only the first gather, the last reduce-scatter and the root
    show; unhidden, every layer's forward and backward gather shows, the reductions as before."""
    unit = coll.sharded_unit_seconds(**{k: KW[k] for k in ("layer_weight_bytes", "layer_grad_bytes",
                                                          "root_weight_bytes", "root_grad_bytes", "ranks",
                                                          "bus_bytes_per_s", "latency_s")})
    ag, rs, root = unit.all_gather_s, unit.reduce_scatter_s, unit.root_all_gather_s + unit.root_reduce_scatter_s
    hidden = coll.exposed_sharded(**KW)
    assert hidden.exposed_s == pytest.approx(ag + rs + root, rel=1e-12)
    shown = coll.exposed_sharded(**KW, layer_gathers_hidden=False)
    assert shown.total_s == hidden.total_s
    assert shown.exposed_s == pytest.approx(2 * KW["layers"] * ag + rs + root, rel=1e-12)
    assert coll.exposed_forward_gathers(**KW, layer_gathers_hidden=False) == pytest.approx(KW["layers"] * ag)
    assert coll.exposed_forward_gathers(**KW) == pytest.approx(ag)


def _plan(units: bool, micro_batch_size: int):
    """Two RTX 4090s without peer-to-peer, Llama-2 7B LoRA (bf16 base) under FSDP1: the layer gathers move the
    whole bf16 base each forward and backward."""
    return make_plan(load_card_dict({
        "model": "meta-llama/Llama-2-7b-hf", "scope": "lora",
        "hardware": {"gpu": "rtx4090", "gpus_per_node": 2, "interconnect": "pcie_no_p2p"},
        "lora": {"rank": 64, "targets": ["q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "down_proj"]},
        "parallel": {"strategy": "fsdp", "fsdp_version": "fsdp1", "gradient_checkpointing": True,
                     "fsdp_adapter_units": units},
        "batch": {"micro_batch_size": micro_batch_size, "seq_len": 2048}}))


def _communication(plan) -> tuple[float, float]:
    phase = next(p for p in plan.time.phases if p.name == "communication")
    return phase.seconds, phase.terms["total"]


def test_plan_exposes_the_gathers_with_adapter_units_at_any_batch():
    for mbs in (1, 4):
        exposed_on, total_on = _communication(_plan(True, mbs))
        exposed_off, total_off = _communication(_plan(False, mbs))
        assert total_on == pytest.approx(total_off, rel=1e-9)
        assert exposed_on > 0.95 * total_on, mbs
    # without the adapter units the batch-4 compute hides most of them
    exposed_off, total_off = _communication(_plan(False, 4))
    assert exposed_off < 0.3 * total_off
