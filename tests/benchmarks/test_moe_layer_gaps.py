"""benchmarks/moe_layer_gaps.py: the per-MoE-layer misses that ``compute.moe_time``'s "MoE rows as a set" reads."""

from __future__ import annotations

import pytest
from step_times_module import load_benchmark

gaps = load_benchmark("moe_layer_gaps.py", "moe_layer_gaps_under_test")


def test_gpu_groups_split_megatron_bridge_rows_by_gpu_and_moe():
    points = [
        {"id": "mbridge-a", "model": "Qwen/Qwen3-30B-A3B", "config": "8\u00d7 h100-sxm, zero1", "error": -0.2,
         "trainfit_s": 1.0, "published_s": 1.25},
        {"id": "mbridge-b", "model": "meta-llama/Llama-3.1-8B", "config": "8\u00d7 h100-sxm, zero1", "error": 0.1,
         "trainfit_s": 1.1, "published_s": 1.0},
        {"id": "other-c", "model": "Qwen/Qwen3-30B-A3B", "config": "8\u00d7 h100-sxm, fsdp", "error": 0.5,
         "trainfit_s": 1.5, "published_s": 1.0},
        {"id": "mbridge-d", "model": "Qwen/Qwen3-30B-A3B", "config": "8\u00d7 b200, zero1", "error": None,
         "trainfit_s": None, "published_s": 1.0},
    ]
    assert dict(gaps.gpu_groups(points)) == {("h100-sxm", "moe"): [-0.2], ("h100-sxm", "dense"): [0.1]}


@pytest.mark.slow
def test_verification_card_misses_shrink_as_the_rank_routes_more_tokens():
    rows = {r["id"]: r for r in gaps.gap_rows()}
    sft, pretrain = rows["mbvc-qwen3-30b-a3b-sft-h100-16g"], rows["mbvc-qwen3-30b-a3b-pretrain-h100-16g"]
    assert sft["ep"] == pretrain["ep"] == 16
    assert sft["tokens_per_rank"] < pretrain["tokens_per_rank"]
    assert sft["gap_ms"] > 1.5 * pretrain["gap_ms"] > 0
    assert all(r["local_experts"] >= 1 for r in rows.values())
