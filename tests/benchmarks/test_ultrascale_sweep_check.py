"""benchmarks/ultrascale_sweep_check.py: a sweep CSV row of a scored Ultra-Scale Playbook cell is planned on that cell's
card, so its error is the step-time benchmark's for the entry; rows the script cannot plan are skipped."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location("ultrascale_sweep_check",
                                                  ROOT / "benchmarks" / "ultrascale_sweep_check.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["ultrascale_sweep_check"] = mod
    spec.loader.exec_module(mod)
    return mod


USC = _module()
ST = USC.step_times()
ENTRIES = {e["id"]: e for e in ST.load_entries(ST.TRAIN_DATA)}


def _row(name: str, nodes: float, tok: float, status: str = "Success", all_reduce: float = 165.83) -> dict:
    return {"job_id": "1", "name": name, "nodes": str(nodes), "tok/s/gpu": str(tok), "status": status,
            "AllReduce (GB/s)": str(all_reduce)}


def test_the_scored_cells_row_reproduces_its_benchmark_error():
    e = ENTRIES["ups-h100-80b-4n-dp1tp8pp4-z0"]
    row = _row("80G_dp1_tp8_pp4_acc256_mbs1_seq4096_zero0_tpmodeRED_vocab131k", 4.0,
               e["measured"]["also"]["tokens_per_s_per_gpu_logged"])
    job, err = USC.job_error(ST, ENTRIES, row)
    assert (job["size"], job["tp"], job["pp"], job["mbs"], job["zero"]) == ("80G", 8, 4, 1, 0)
    planned = ST.plan_card(ST.map_train(e)[0])
    assert err == pytest.approx(planned.step_s / e["measured"]["value"] - 1, rel=1e-3)


def test_rows_it_cannot_plan_are_skipped():
    assert USC.job_error(ST, ENTRIES, _row("80G_dp1_tp8_pp4_acc256_mbs1_seq4096_zero0_tpmodeRED_vocab49k", 4.0,
                                           251.32)) is None  # another vocabulary: not a benchmark shape
    assert USC.job_error(ST, ENTRIES, _row("80G_dp1_tp4_pp8_acc256_mbs1_seq4096_zero0_tpmodeRED_vocab131k", 4.0,
                                           0, status="OOM")) is None
    assert USC.job_error(ST, ENTRIES, _row("3.57G_dp1_tp1_pp32_acc256_mbs1_seq4096_zero0_tpmodeRED_vocab131k", 4.0,
                                           100.0)) is None  # nanotron's split leaves a stage without layers


def test_pipeline_kind_follows_nanotrons_rank_layout():
    assert USC.pipeline_kind(dp=4, tp=8, pp=1) == "none"
    assert USC.pipeline_kind(dp=1, tp=4, pp=2) == "node"  # 8 ranks: both stages in one node
    assert USC.pipeline_kind(dp=1, tp=8, pp=4) == "nodes"  # a stage fills a node: every send crosses
    assert USC.pipeline_kind(dp=4, tp=4, pp=2) == "nodes"  # 16 ranks a stage
    assert USC.pipeline_kind(dp=1, tp=4, pp=4) == "mixed"  # stages 0-1 share node 0, 1 -> 2 crosses


def test_layer_slot_ms_divides_the_step_by_slots_and_the_fullest_stage():
    # the scored 80B x 4-node cell: 114.97 s over 256 + 3 slots and ceil(80 / 4) = 20 layers
    assert USC.layer_slot_ms(step_s=114.9714, grad_accum=256, pp=4, layers=80) == pytest.approx(22.19, abs=0.01)
    # nanotron's 1.34B on two stages: ceil(16 / 2) = 8 layers, one micro-batch: 2 slots
    assert USC.layer_slot_ms(step_s=0.016, grad_accum=1, pp=2, layers=16) == pytest.approx(1.0)
    assert USC.layer_slot_ms(step_s=0.016, grad_accum=1, pp=3, layers=16) == pytest.approx(16 / 3 / 6)


def test_floor_groups_splits_by_batch_span_tp_and_pipeline(capsys):
    rows = [dict(_row("1.34G_dp1_tp8_pp2_acc256_mbs1_seq4096_zero0_tpmodeRED_vocab131k", 2.0, 1204.51),
                 after_pp_fix="True"),
            dict(_row("1.34G_dp8_tp8_pp1_acc32_mbs1_seq4096_zero0_tpmodeRED_vocab131k", 8.0, 6888.54),
                 after_pp_fix="False"),
            dict(_row("1.34G_dp8_tp8_pp1_acc32_mbs2_seq4096_zero0_tpmodeRED_vocab131k", 8.0, 9000.0),
                 after_pp_fix="False")]  # micro-batch 2: left out
    USC.floor_groups(rows)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    # 256 x 4096 tokens over 1204.51 tok/s/GPU x 16 GPUs = 54.41 s, over 257 slots and 8 layers a stage
    assert "after_pp_fix False nodes  TP  8 pipeline none" in lines[0] and "median    4.6 ms" in lines[0]
    assert "after_pp_fix True  nodes  TP  8 pipeline nodes" in lines[1] and "median   26.5 ms" in lines[1]
