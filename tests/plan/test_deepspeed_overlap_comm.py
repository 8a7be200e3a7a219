"""deepspeed.overlap_comm in the time model: DeepSpeed ZeRO without it reduces the gradients on the compute stream
(ZeRO-1/2: every collective exposed; ZeRO-3: the reduce-scatters exposed, the parameter all-gathers still overlapped),
unset it resolves as DeepSpeed does (true at stage 3 only); other frameworks' ZeRO / FSDP keep their overlap."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trainfit.compute import collectives as coll
from trainfit.plan import make_plan
from trainfit.plan.time import deepspeed_overlap_comm
from trainfit.spec.card import load_card_dict

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_zero12_without_overlap_comm_exposes_every_collective():
    t = coll.exposed_data_parallel(grad_bytes=4e9, weight_bytes=2e9, ranks=8, bus_bytes_per_s=150e9, latency_s=20e-6,
                                   backward_s=10.0, micro_steps=2, zero_stage=2)
    assert t.exposed_s < t.total_s  # overlapped: the backward hides most of the reductions
    off = coll.reductions_on_compute_stream(overlapped=t)
    assert off.total_s == t.total_s and off.exposed_s == pytest.approx(t.total_s)


def test_zero3_without_overlap_comm_exposes_each_reduce_scatter_and_keeps_the_gathers_overlapped():
    layers, ranks, bus, micro = 8, 8, 150e9, 2
    kw = dict(layers=layers, layer_weight_bytes=4e8, layer_grad_bytes=4e8, root_weight_bytes=1e8, root_grad_bytes=1e8,
              ranks=ranks, bus_bytes_per_s=bus, latency_s=0.0, layer_forward_s=0.05, layer_backward_s=0.1,
              micro_steps=micro)
    on = coll.exposed_sharded(**kw)
    gathers = coll.exposed_sharded(**{**kw, "layer_grad_bytes": 0.0, "root_grad_bytes": 0.0})
    off = coll.reductions_on_compute_stream(overlapped=on, gathers_only=gathers)
    rs = coll.reduce_scatter_seconds(total_bytes=4e8, ranks=ranks, bus_bytes_per_s=bus, latency_s=0.0)
    root_rs = coll.reduce_scatter_seconds(total_bytes=1e8, ranks=ranks, bus_bytes_per_s=bus, latency_s=0.0)
    assert off.total_s == on.total_s
    # the compute hides every gather here, so what is exposed is the root's gather and every reduce-scatter
    root_ag = coll.all_gather_seconds(total_bytes=1e8, ranks=ranks, bus_bytes_per_s=bus, latency_s=0.0)
    first_ag = coll.all_gather_seconds(total_bytes=4e8, ranks=ranks, bus_bytes_per_s=bus, latency_s=0.0)
    assert off.exposed_s == pytest.approx(micro * (first_ag + root_ag + layers * rs + root_rs))
    assert on.exposed_s == pytest.approx(micro * (first_ag + root_ag + rs + root_rs))


def _card(strategy: str, **deepspeed) -> dict:
    return {"model": "Qwen/Qwen2.5-7B", "method": "sft",
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": strategy, "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 2},
            **({"deepspeed": deepspeed} if deepspeed else {})}


@pytest.mark.parametrize(("strategy", "deepspeed", "overlaps"), [
    ("zero3", {}, True), ("zero2", {}, False), ("zero3", {"overlap_comm": False}, False),
    ("zero2", {"overlap_comm": True}, True), ("fsdp", {}, True), ("zero1", {}, True), ("ddp", {}, True),
])
def test_overlap_comm_resolves_as_deepspeed_does_and_only_for_deepspeed(strategy, deepspeed, overlaps):
    # zero1 alone is Megatron-Core's distributed optimizer on the card (plan.ranks._deepspeed_zero)
    assert deepspeed_overlap_comm(load_card_dict(_card(strategy, **deepspeed))) is overlaps


@pytest.mark.parametrize("strategy", ["zero2", "zero3"])
def test_without_overlap_comm_only_the_communication_grows(strategy):
    on = make_plan(load_card_dict(_card(strategy, overlap_comm=True)))
    off = make_plan(load_card_dict(_card(strategy, overlap_comm=False)))
    grown = off.time_parts["communication"] - on.time_parts["communication"]
    assert grown > 0 and off.step_seconds - on.step_seconds == pytest.approx(grown, rel=1e-6)
    assert off.time_parts["backward"] == on.time_parts["backward"]


def test_benchmark_rows_state_overlap_comm_from_their_configs():
    sys.path.insert(0, str(BENCH))
    import step_times as st

    rows = {e["id"]: e for e in st.load_entries(st.TRAIN_DATA)}
    for rid, want in (("swift-a800-qwen2.5-14b-zero2", False), ("swift-a800-qwen2.5-14b-zero3", False),
                      ("swift-a800-qwen3-30b-a3b-zero3", False), ("xtuner-a100-8b-8gpu", True),
                      ("qwen1-a100x4-72b-lora-zero3-2k", True)):
        card, notes = st.map_train(rows[rid])
        assert card["deepspeed"]["overlap_comm"] is want and any("overlap_comm" in n for n in notes)
    # DeepSpeed's own blog config states none: DeepSpeed's default stays
    card, _ = st.map_train(rows["dsblog-zenflowbind-a100x2-qwen2.5-1.5b-zero2"])
    assert "deepspeed" not in card
    # llm-foundry's SHARD_GRAD_OP (recorded as zero2) is torch FSDP, not DeepSpeed's ZeRO-2
    card, _ = st.map_train(rows["foundry-h100-3b-128gpu-zero2"])
    assert card["parallel"]["strategy"] == "fsdp_grad_op"
