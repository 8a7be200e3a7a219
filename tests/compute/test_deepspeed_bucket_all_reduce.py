"""DeepSpeed ZeRO-1/2 reduces each gradient bucket with a full all-reduce (use_multi_rank_bucket_allreduce, default
since DeepSpeed 0.12.4), not a reduce-scatter: twice the bytes per rank, one collective per reduce bucket, the last
bucket exposed; only DeepSpeed's ZeRO-1/2 is priced so, and memory does not move."""

from __future__ import annotations

import pytest

import trainfit.plan.time as plan_time
from trainfit.compute import collectives as coll
from trainfit.plan import make_plan
from trainfit.plan.time import deepspeed_all_reduce_bucket
from trainfit.spec.card import load_card_dict

KW = dict(ranks=8, bus_bytes_per_s=150e9, latency_s=20e-6)


def test_one_all_reduce_per_bucket_and_the_remainder_is_the_last_bucket():
    t = coll.deepspeed_bucket_all_reduce(total_bytes=2.5e9, bucket_bytes=1e9, **KW)
    full = coll.all_reduce_seconds(total_bytes=1e9, **KW)
    rest = coll.all_reduce_seconds(total_bytes=0.5e9, **KW)
    assert t.total_s == pytest.approx(2 * full + rest)
    assert t.exposed_s == pytest.approx(rest)
    # a gradient smaller than one bucket is one all-reduce, all of it the last
    small = coll.deepspeed_bucket_all_reduce(total_bytes=3e8, bucket_bytes=1e9, **KW)
    assert small.total_s == small.exposed_s == pytest.approx(coll.all_reduce_seconds(total_bytes=3e8, **KW))
    assert coll.deepspeed_bucket_all_reduce(total_bytes=1e9, bucket_bytes=1e9, ranks=1, bus_bytes_per_s=1e9).total_s == 0


def test_all_reduce_moves_twice_the_reduce_scatter_bytes():
    wire_ar = coll.all_reduce_wire_seconds(total_bytes=4e9, ranks=8, bus_bytes_per_s=150e9)
    wire_rs = coll.all_gather_wire_seconds(total_bytes=4e9, ranks=8, bus_bytes_per_s=150e9)
    assert wire_ar == pytest.approx(2 * wire_rs)


@pytest.mark.parametrize("stage", [1, 2])
def test_exposed_data_parallel_prices_the_bucketed_all_reduce(stage):
    base = dict(grad_bytes=4e9, weight_bytes=4e9, backward_s=10.0, micro_steps=2, zero_stage=stage, **KW)
    rs = coll.exposed_data_parallel(**base)
    ar = coll.exposed_data_parallel(**base, bucket_all_reduce_bytes=1e9)
    reductions = 2 if stage == 2 else 1
    bucketed = coll.deepspeed_bucket_all_reduce(total_bytes=4e9, bucket_bytes=1e9, **KW)
    grown = reductions * (bucketed.total_s - coll.reduce_scatter_seconds(total_bytes=4e9, **KW))
    assert ar.total_s - rs.total_s == pytest.approx(grown)
    # overlapped behind a long backward: the last bucket's all-reduce is what is left exposed
    gather = coll.all_gather_seconds(total_bytes=4e9, **KW)
    assert ar.exposed_s == pytest.approx(reductions * bucketed.exposed_s + gather)


def _card(strategy: str, **extra) -> dict:
    card = {"model": "Qwen/Qwen2.5-7B", "method": "sft",
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": strategy, "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 2}}
    for k, v in extra.items():
        card[k] = {**card.get(k, {}), **v}
    return card


@pytest.mark.parametrize(("strategy", "extra", "elements"), [
    ("zero2", {}, 500_000_000),  # DeepSpeed's reduce_bucket_size default
    ("zero2", {"deepspeed": {"reduce_bucket_size": 2e8}}, 200_000_000),
    ("zero2", {"deepspeed": {"reduce_bucket_size": "auto"}}, 3584 * 3584),  # HF Trainer: hidden^2
    ("zero1", {"parallel": {"context_parallel": 2, "context_parallel_kind": "ulysses"}}, 500_000_000),
    ("zero1", {}, 0),  # Megatron-Core's distributed optimizer reduce-scatters
    ("zero3", {}, 0), ("fsdp", {}, 0), ("ddp", {}, 0),
])
def test_only_deepspeed_zero12_all_reduces_its_buckets(strategy, extra, elements):
    card = load_card_dict(_card(strategy, **extra))
    from trainfit.plan.resolve import model_spec_of

    assert deepspeed_all_reduce_bucket(card, model_spec_of(card)) == elements


def test_zero2_plan_pays_the_all_reduce_in_communication_only(monkeypatch):
    card = load_card_dict(_card("zero2", deepspeed={"overlap_comm": False}))
    ar = make_plan(card)
    monkeypatch.setattr(plan_time, "deepspeed_all_reduce_bucket", lambda card, spec: 0)
    rs = make_plan(card)
    grown = ar.time_parts["communication"] - rs.time_parts["communication"]
    assert grown > 0 and ar.step_seconds - rs.step_seconds == pytest.approx(grown, rel=1e-6)
    assert ar.time_parts["backward"] == rs.time_parts["backward"]
    assert ar.peak.device == rs.peak.device  # a time-model change: memory does not move
