"""FSDP2 (``fully_shard``) on a one-rank mesh (``parallel.fsdp_one_rank``): one unit unsharded in ``param_dtype`` at a
time, no prefetch, the ``param_dtype`` gradients plus the previous unit's fp32 reduce input, and a per-stream replay
without an all-gather stream (torch 2.13.0's world-size-1 branches, ``plan.terms._fsdp_terms``)."""

from __future__ import annotations

import pytest
from replay_inputs import planned_replay

from trainfit.errors import CardError
from trainfit.memory import stream_pools as sp
from trainfit.memory.sharding import make_sharding
from trainfit.plan import make_plan
from trainfit.plan.terms import step_terms
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import FsdpVersion, Strategy

MiB = 1 << 20


def _card(gpus: int = 1, **par: object):
    # prime-rl's one-GPU FSDP2 setup: fp32 parameters, bf16 compute (MixedPrecisionPolicy(bf16, fp32))
    return load_card_dict({
        "model": "Qwen/Qwen3-0.6B", "scope": "full", "hardware": {"gpu": "h100-sxm", "gpus_per_node": gpus},
        "parallel": {"strategy": "fsdp", "fsdp_version": "fsdp2", "gradient_checkpointing": True, **par},
        "precision": {"weights": "fp32", "compute": "bf16", "grads": "fp32", "optimizer": "adamw"},
        "batch": {"micro_batch_size": 1, "seq_len": 4096}})


def _terms(card):
    plan = make_plan(card)
    return plan, step_terms(card, plan.spec, plan.sharding)[0]


def test_sharding_gathers_on_one_rank_only_when_the_card_says_fully_shard_runs() -> None:
    one = make_sharding(strategy=Strategy.FSDP, gpus_per_node=1, nodes=1, fsdp_one_rank=True)
    assert one.gathers_params and one.has_root_unit and one.weights_divisor == 1
    assert not make_sharding(strategy=Strategy.FSDP, gpus_per_node=1, nodes=1).gathers_params
    for s in (Strategy.SINGLE, Strategy.DDP, Strategy.ZERO3):
        assert not make_sharding(strategy=s, gpus_per_node=1, nodes=1, fsdp_one_rank=True).one_rank_fsdp2


def test_one_unit_in_flight_and_the_fp32_reduce_input_beside_the_bf16_gradients() -> None:
    _, one = _terms(_card(fsdp_one_rank=True))
    _, two = _terms(_card(gpus=2))
    # two ranks: the current and the prefetched unit; one rank: no all-gather, so no prefetch (one unit, bf16)
    assert one.fsdp_layer_units == pytest.approx(two.fsdp_layer_units / 2)
    assert one.fsdp_root_unit == pytest.approx(two.fsdp_root_unit)
    # a layer's bf16 gradients (2 B) and the previous unit's fp32 reduce-scatter input (4 B) per parameter,
    # against the unit's bf16 parameters (2 B)
    assert one.fsdp_unsharded_grads == pytest.approx(3 * one.fsdp_layer_units)
    # the sharded (here: whole) fp32 gradients stay the gradients term
    assert max(one.grads_per_layer) == pytest.approx(2 * one.fsdp_layer_units)


def test_a_one_gpu_card_without_the_flag_plans_as_before() -> None:
    _, t = _terms(_card())
    assert t.fsdp_layer_units == t.fsdp_root_unit == t.fsdp_unsharded_grads == 0.0
    flagged, _ = _terms(_card(fsdp_one_rank=True))
    plain = make_plan(_card())
    assert flagged.peak.allocated > plain.peak.allocated
    assert "fsdp_buffers" in flagged.peak.components and "fsdp_buffers" not in plain.peak.components


def test_replay_has_no_all_gather_stream_and_keeps_the_gradient_pool() -> None:
    plan, seen = planned_replay(_card(fsdp_one_rank=True), "fsdp_replayed_overhead")
    assert seen and seen["sharding"].one_rank_fsdp2
    t = seen["terms"]
    assert sp.fsdp_step_sequence(t, seen["shape"], world_size=1) is None  # the multi-rank sequence needs 2 ranks
    seq = sp.fsdp_step_sequence(t, seen["shape"], world_size=1, one_rank=True, workspace=(16 * MiB, 16 * MiB))
    assert seq is not None
    r = sp.replay_streams(seq)
    assert r.pool_allocated_bytes[sp.ALL_GATHER] == 0
    # reduce_output (the sharded fp32 gradients) on the reduce-scatter stream: every layer's gradients at once
    assert r.pool_allocated_bytes[sp.REDUCE_SCATTER] >= sum(t.grads_per_layer) * 0.99
    # at the peak (the loss) the reduce-scatter pool's gradient blocks are cached and idle: reserve only that stream
    # can reuse, which the plan carries above its allocated peak (the replay's overhead, side pool included)
    assert r.side_idle_bytes >= sum(t.grads_per_layer) * 0.99
    assert plan.peak.reserved - plan.peak.allocated >= r.side_idle_bytes
    assert plan.peak.reserved - plan.peak.allocated == pytest.approx(r.overhead, rel=1e-3)


@pytest.mark.parametrize("change", [{"gpus": 2}, {"fsdp_version": "fsdp1"}, {"strategy": "ddp"}])
def test_fsdp_one_rank_needs_fsdp2_on_one_gpu(change: dict) -> None:
    gpus = change.pop("gpus", 1)
    with pytest.raises((CardError, ValueError), match="parallel.fsdp_one_rank"):
        _card(gpus=gpus, fsdp_one_rank=True, **change)


@pytest.mark.parametrize("strategy", ["fsdp_grad_op", "hsdp"])
def test_fsdp_one_rank_refuses_strategies_that_keep_units_gathered_or_replicate(strategy: str) -> None:
    # reshard_after_forward=False holds every unit's bf16 copy from forward into backward even at world size 1
    # (torch 2.13), which the one-rank plan does not model; hsdp has nothing to replicate on one rank
    with pytest.raises((CardError, ValueError), match="allowed with it: strategy fsdp"):
        _card(fsdp_one_rank=True, strategy=strategy)


@pytest.mark.parametrize(("change", "gpus_text"), [({"gpus": 2}, "2 training GPUs;"),
                                                    ({"fsdp_version": "fsdp1"}, "1 training GPU;"),
                                                    ({"strategy": "ddp"}, "1 training GPU;"),
                                                    ({"strategy": "fsdp_grad_op"}, None)])
def test_fsdp_one_rank_refusal_is_one_line_with_the_right_plural(change: dict, gpus_text: str | None) -> None:
    gpus = change.pop("gpus", 1)
    with pytest.raises((CardError, ValueError)) as err:
        _card(gpus=gpus, fsdp_one_rank=True, **change)
    message = str(err.value).strip()
    assert "parallel.fsdp_one_rank" in message and "\n" not in message
    if gpus_text is not None:
        assert gpus_text in message


def test_make_sharding_takes_the_one_rank_path_for_fsdp2_only() -> None:
    kw = {"strategy": Strategy.FSDP, "gpus_per_node": 1, "nodes": 1, "fsdp_one_rank": True}
    assert make_sharding(**kw, fsdp_version=FsdpVersion.FSDP2).one_rank_fsdp2
    assert not make_sharding(**kw, fsdp_version=FsdpVersion.FSDP1).one_rank_fsdp2


def test_the_flag_moves_memory_only_step_time_charges_fsdp_hooks_on_any_one_gpu_fsdp_card() -> None:
    # compute.training charges FSDP's per-unit hooks under strategy fsdp whatever the world size (published one-GPU
    # FSDP trainers wrap with fully_shard); parallel.fsdp_one_rank changes the memory plan only
    flagged, plain = make_plan(_card(fsdp_one_rank=True)), make_plan(_card())
    single = make_plan(_card(strategy="single"))
    assert flagged.step_seconds == pytest.approx(plain.step_seconds, rel=1e-9)
    assert flagged.step_seconds > single.step_seconds * 1.05
    assert flagged.peak.allocated > plain.peak.allocated
