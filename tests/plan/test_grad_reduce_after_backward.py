"""parallel.grad_reduce_after_backward (nanotron's ZeRO-1 with fp32 accumulation: one all-reduce of the whole
gradient buffer after the last backward, exposed) and the data-parallel group's ranks per node with pipeline stages
outermost (Megatron-Core's tp-cp-ep-dp-pp order, nanotron's (ep, pp, dp, tp) reshape)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trainfit.compute import collectives as coll
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_after_backward_exposes_the_whole_all_reduce_and_the_gather():
    kw = dict(grad_bytes=4e9, weight_bytes=2e9, ranks=64, bus_bytes_per_s=80e9, latency_s=30e-6, micro_steps=1,
              zero_stage=1)
    ar = coll.all_reduce_seconds(total_bytes=4e9, ranks=64, bus_bytes_per_s=80e9, latency_s=30e-6)
    ag = coll.all_gather_seconds(total_bytes=2e9, ranks=64, bus_bytes_per_s=80e9, latency_s=30e-6)
    for backward_s in (0.0, 10.0):  # nothing hides it, however long the backward
        t = coll.exposed_data_parallel(backward_s=backward_s, reduce_after_backward=True, **kw)
        assert t.exposed_s == pytest.approx(ar + ag) and t.total_s == pytest.approx(ar + ag)
    # overlapped (the default): a reduce-scatter behind a long backward, only its last bucket and the gather exposed
    assert coll.exposed_data_parallel(backward_s=10.0, **kw).exposed_s < ag + ar / 10


def _card(parallel: dict, nodes: int = 4) -> dict:
    return {"model": "Qwen/Qwen2.5-7B", "method": "sft", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8,
                                                                     "nodes": nodes},
            "parallel": {"strategy": "zero1", "gradient_checkpointing": False, **parallel},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 1}}


def test_card_field_adds_only_communication():
    off = make_plan(load_card_dict(_card({})))
    on = make_plan(load_card_dict(_card({"grad_reduce_after_backward": True})))
    assert load_card_dict(_card({})).parallel.grad_reduce_after_backward is False
    grown = on.time_parts["communication"] - off.time_parts["communication"]
    assert grown > 0 and on.step_seconds - off.step_seconds == pytest.approx(grown, rel=1e-6)


def test_pipeline_stages_outermost_keep_a_stage_data_group_in_its_node():
    # 16 GPUs, pp 2, tp 1: each stage is one node, its 8 data-parallel ranks talk over NVLink (pp outermost)
    two = make_plan(load_card_dict(_card({"pipeline_parallel": 2, "grad_reduce_after_backward": True}, nodes=2)))
    assert any("in a node" in a for a in two.assumptions)


def test_nanotron_zero1_rows_map_the_field():
    sys.path.insert(0, str(BENCH))
    import step_times as st

    rows = {e["id"]: e for e in st.load_entries(st.TRAIN_DATA) if e["id"].startswith("ups-")}
    z1, n1 = st.map_train(rows["ups-h100-3p57b-64n-dp128tp4pp1-z1"])
    z0, _ = st.map_train(rows["ups-h100-8p86b-64n-dp128tp4pp1-z0"])
    assert z1["parallel"]["grad_reduce_after_backward"] is True
    assert "grad_reduce_after_backward" not in z0["parallel"]  # ZeRO-0 runs torch DDP with its fp32 bucket hook
    assert any("make_ddp" in n for n in n1)
