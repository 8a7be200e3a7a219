"""benchmarks/peft_merge_copies.py: the H200 profiles' ``baddbmm`` GEMMs are exactly the PEFT merges it counts from
each config (2 evaluations per stack and forward, the recompute's too), and their copies run near the streaming rate;
the DeepSeek-V2-Lite step leaves its device idle as long as Qwen3-30B-A3B's host-paced one does."""

from __future__ import annotations

import json

import pytest
from step_times_module import load_benchmark

M = load_benchmark("peft_merge_copies.py", "trainfit_bench_peft_merge_copies")
ROWS = {r["label"]: r for r in M.case_rows(json.loads(M.RAW.read_text()))}


@pytest.mark.parametrize("label", ["Qwen3-30B-A3B lora ckpt b1x512", "DeepSeek-V2-Lite lora ckpt b1x4096",
                                   "Mixtral-8x7B-v0.1 lora ckpt b1x4096"])
def test_merge_gemms_counted_and_copies_at_streaming_rate(label):
    r = ROWS[label]
    assert r["predicted_calls"] == r["badd_calls"]
    assert r["dtod_calls"] >= r["predicted_calls"]
    assert 3.9e12 < r["moved_bytes"] / r["dtod_s"] < 4.4e12
    assert 2.5e12 < r["moved_bytes"] / r["badd_s"] < 2.65e12


def test_unwrapped_experts_have_no_merge():
    assert "predicted_calls" not in ROWS["gpt-oss-20b lora ckpt b1x2048"]
    assert "predicted_calls" not in ROWS["Qwen1.5-MoE-A2.7B lora b2x2048"]


def test_deepseek_device_idle_like_qwen3_host_paced_step():
    ds, qw = ROWS["DeepSeek-V2-Lite lora ckpt b1x4096"], ROWS["Qwen3-30B-A3B lora ckpt b1x512"]
    assert ds["idle_share"] == pytest.approx(0.38, abs=0.01)
    assert qw["idle_share"] == pytest.approx(0.39, abs=0.01)
