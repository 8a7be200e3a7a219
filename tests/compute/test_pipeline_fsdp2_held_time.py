"""A pipeline stage under FSDP2 (torch.distributed.pipelining): its reduce-scatters and their copy-in run once, after
its last backward, and its unsharded gradients accumulate on the GPU (``collectives.exposed_sharded`` and
``training.fsdp2_copy_seconds`` ``held_to_last_backward``; ``train_step_time(fsdp2_pipeline_held=True)``)."""

from __future__ import annotations

import pytest

from trainfit.compute import collectives as coll
from trainfit.compute import training
from trainfit.compute.training import fsdp2_copy_seconds
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

SHARDED = dict(layers=32, layer_weight_bytes=0.4e9, layer_grad_bytes=0.8e9, root_weight_bytes=1e9,
               root_grad_bytes=2e9, ranks=8, bus_bytes_per_s=100e9, latency_s=0.0, layer_forward_s=0.02,
               layer_backward_s=0.04)


def test_reductions_run_once_after_the_last_backward():
    unit = coll.sharded_unit_seconds(**{k: SHARDED[k] for k in (
        "layer_weight_bytes", "layer_grad_bytes", "root_weight_bytes", "root_grad_bytes", "ranks", "bus_bytes_per_s",
        "latency_s")})
    reductions = 32 * unit.reduce_scatter_s + unit.root_reduce_scatter_s
    one = coll.exposed_sharded(**SHARDED, micro_steps=1, held_to_last_backward=True)
    many = coll.exposed_sharded(**SHARDED, micro_steps=16, held_to_last_backward=True)
    # every micro-batch gathers (FSDP2's default reshard_after_forward), but reduce-scatters only once, exposed
    assert many.exposed_s - one.exposed_s < 15 * one.exposed_s
    assert one.exposed_s >= reductions
    once = coll.exposed_sharded(**SHARDED, micro_steps=16, held_to_last_backward=True, reshard_after_forward=False)
    assert once == coll.exposed_sharded(**SHARDED, micro_steps=1, held_to_last_backward=True,
                                        reshard_after_forward=False)
    # without the stage's nosync the reduce-scatters run every micro-batch: 16 x
    assert coll.exposed_sharded(**SHARDED, micro_steps=16).total_s == pytest.approx(
        16 * coll.exposed_sharded(**SHARDED, micro_steps=1).total_s)
    assert many.total_s < coll.exposed_sharded(**SHARDED, micro_steps=16).total_s


def test_copies_once_plus_the_accumulation():
    kw = dict(gathered_weight_bytes=2e9, root_share=0.0, trained_params=1e9, grad_bytes=4.0, hbm_bytes_per_s=1e12,
              held_to_last_backward=True)
    # gathered once: one copy-out; the first gradient upcast (2 + 4 B), 3 adds (4 + 4 + 2 B), one fp32 copy-in (8 B)
    assert fsdp2_copy_seconds(**kw, micro_steps=4, reshard_after_forward=False) == pytest.approx(
        (2 * 2e9 + 1e9 * (6 + 3 * 10 + 8)) / 1e12)
    # one dtype: no upcast, autograd's adds
    assert fsdp2_copy_seconds(**{**kw, "grad_bytes": 2.0}, micro_steps=1, reshard_after_forward=False) == (
        pytest.approx((2 * 2e9 + 1e9 * 4) / 1e12))


def _card(ga: int):
    return load_card_dict({
        "model": "meta-llama/Llama-3.1-8B", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
        "parallel": {"strategy": "fsdp", "fsdp_version": "fsdp2", "pipeline_parallel": 2,
                     "gradient_checkpointing": True},
        "precision": {"weights": "fp32", "grads": "fp32"},
        "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": ga}})


def _phase_s(plan, name: str) -> float:
    return next(p.seconds for p in plan.time.phases if p.name == name)


def test_a_stage_reduce_scatters_once_a_step(monkeypatch):
    """Llama-3.1-8B, PP 2, FSDP2: 16 micro-batches' exposed collectives were 16x one micro-batch's (0.011 -> 0.178 s);
    the reduce-scatters now run once, so the step's communication grows only by the per-micro-batch gathers (the
    compute slowed beside the hidden gathers, ``collectives.hbm_contention_exposed_by_group``, grows with their count and is
    left out here)."""
    real = coll.hbm_contention_exposed_by_group  # the step charges each process group's own rate
    monkeypatch.setattr(coll, "hbm_contention_exposed_by_group", lambda **kw: real(**{**kw, "passes": 0.0}))
    training.train_step_time.cache_clear()
    one, many = make_plan(_card(1)), make_plan(_card(16))
    training.train_step_time.cache_clear()
    c1, c16 = _phase_s(one, "communication"), _phase_s(many, "communication")
    assert c16 < 2 * c1
