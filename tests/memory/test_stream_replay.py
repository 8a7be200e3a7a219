"""FSDP's reserved as a per-stream replay: one caching-allocator pool per stream, FSDP2's buffers on the
streams that allocate them (``trainfit.memory.stream_pools``)."""

from __future__ import annotations

import pytest
from replay_inputs import planned_replay

from trainfit.memory import stream_pools as sp
from trainfit.memory.alloc_sequence import STREAM_SHIFT, AllocSequence
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Phase

MiB = 1 << 20


def _seq(events, persistent=()):
    return AllocSequence(tuple(persistent), (), tuple(events), (), len(events))


def test_a_block_freed_on_one_stream_is_not_reused_by_another():
    side = 1 << STREAM_SHIFT | 1
    same = [(1, 1, 100 * MiB), (-1, 1, 0), (1, 2, 100 * MiB), (-1, 2, 0)]
    cross = [(1, side, 100 * MiB), (-1, side, 0), (1, 2, 100 * MiB), (-1, 2, 0)]
    one, two = sp.replay_streams(_seq(same)), sp.replay_streams(_seq(cross))
    assert one.reserved_bytes == 100 * MiB and one.allocated_bytes == 100 * MiB
    assert two.reserved_bytes == 200 * MiB and two.allocated_bytes == 100 * MiB
    assert two.pool_reserved_bytes == (100 * MiB, 100 * MiB, 0)
    assert two.overhead == 100 * MiB
    later = sp.replay_streams(_seq(cross[:2] + [(1, 2, 120 * MiB), (-1, 2, 0)]))
    assert later.allocated_bytes == 120 * MiB and later.side_idle_bytes == 100 * MiB  # idle where the sum peaks


def test_allocated_is_the_peak_of_the_sum_not_the_sum_of_peaks():
    side = 2 << STREAM_SHIFT | 1
    ev = [(1, 1, 50 * MiB), (1, side, 30 * MiB), (-1, side, 0), (-1, 1, 0), (1, 3, 60 * MiB), (-1, 3, 0)]
    r = sp.replay_streams(_seq(ev))
    assert r.allocated_bytes == 80 * MiB
    assert r.pool_allocated_bytes == (60 * MiB, 0, 30 * MiB)
    # the compute pool's 50 MiB segment cannot hold 60 MiB: it keeps both; the side pool its 30 MiB
    assert r.pool_reserved_bytes == (110 * MiB, 0, 30 * MiB) and r.reserved_bytes == 140 * MiB


def _card(model="Qwen/Qwen2.5-0.5B", scope="full", ckpt=True, gpus=4, b=1, s=512, **par):
    return load_card_dict({"model": model, "scope": scope, "hardware": {"gpu": "h200", "gpus_per_node": gpus},
                           "parallel": {"strategy": "fsdp", "gradient_checkpointing": ckpt, **par},
                           "batch": {"micro_batch_size": b, "seq_len": s}})


def _fsdp_sequence(card):
    plan, seen = planned_replay(card, "fsdp_replayed_overhead")
    t = seen["terms"]
    return plan, t, sp.fsdp_step_sequence(t, seen["shape"], world_size=seen["sharding"].weights_divisor,
                                          workspace=(16 * MiB, 16 * MiB))


CARDS = [
    _card(s=2048),  # tied embeddings, checkpointing
    _card(model="meta-llama/Llama-3.1-8B", ckpt=False, b=1, s=1024, gpus=8),  # untied, no checkpointing
    _card(model="meta-llama/Llama-3.1-8B", scope="lora", ckpt=True, b=2, s=1024, gpus=2),
]


@pytest.mark.parametrize("card", CARDS, ids=["qwen-full-ckpt", "llama-full", "llama-lora"])
def test_the_replayed_step_allocates_what_the_plan_does(card):
    plan, t, seq = _fsdp_sequence(card)
    assert seq is not None
    step = [p for g in plan.groups for p in g.phases if p.phase is not Phase.LOAD]
    r = sp.replay_streams(seq)
    high = max(p.allocated for p in step)
    # the sequence is generated from the plan's own terms: its allocated high-water is about the plan's
    # (the replay leaves out tensors under 1 MiB; the phase walk keeps the last layer's unit gathered at the
    # loss's backward, where FSDP2's root post-forward has freed its all-gather output)
    assert high * 0.94 <= r.allocated_bytes <= high * 1.01
    # every block a step makes is freed in it (two steps keep the reserved of one)
    live = set()
    for sign, key, _ in seq.step_events:
        (live.add if sign > 0 else live.discard)(key)
    assert not live
    # the reduce-scatter stream's pool holds the sharded gradients (all of them at the optimizer step)
    if t.grads_total > 64 * MiB:
        assert r.pool_allocated_bytes[sp.REDUCE_SCATTER] == pytest.approx(t.grads_total, rel=0.02)
    # the all-gather pool: the root unit with the first layer's output, or two layer units (the
    # backward's current one while the previous is prefetched)
    unit = t.fsdp_layer_units / 2
    assert r.pool_allocated_bytes[sp.ALL_GATHER] == pytest.approx(
        max(2 * unit, unit + t.fsdp_root_unit), rel=0.02)
    assert all(p.overhead.replayed for p in step)
    assert step[0].reserved >= high


def test_where_the_sequence_cannot_be_generated_the_share_and_bound_stand():
    # FSDP without resharding after forward (SHARD_GRAD_OP): every unit stays gathered, not replayed
    card = load_card_dict({"model": "Qwen/Qwen2.5-0.5B", "scope": "full",
                           "hardware": {"gpu": "h200", "gpus_per_node": 4},
                           "parallel": {"strategy": "fsdp_grad_op", "gradient_checkpointing": True},
                           "batch": {"micro_batch_size": 1, "seq_len": 512}})
    step = [p for g in make_plan(card).groups for p in g.phases if p.phase is not Phase.LOAD]
    assert not any(p.overhead.replayed for p in step)
