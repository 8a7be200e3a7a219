"""benchmarks/published.py: the torchtune points whose recipes keep the shifted fp32 logits through backward name
when each recipe gained ``del logits``: lora_finetune_distributed.py on 2024-06-04 (PR #1046), the others on
2024-07-28 (PR #1235, which did not touch lora_finetune_distributed.py)."""

from __future__ import annotations

from step_times_module import load_benchmark


def test_kept_logits_points_name_both_del_logits_commits():
    pub = load_benchmark("published.py", "trainfit_bench_published_tt_kept_logits")
    text = open(pub.__file__).read()
    assert "cb3ed29d7fd2a80e09c44c7d6fd2cac3075861c4" in text and "PR #1046" in text
    assert "8a98fbaa34d229362affded73afb9a2807b52223" in text and "did not touch lora_finetune_distributed.py" in text
    for pid in pub._TT_KEPT_LOGITS_POINTS:
        notes = pub.POINTS[pid]["notes"]
        assert "2024-06 to lora_finetune_distributed, 2024-07 to the other recipes" in notes
        assert pub.POINTS[pid]["card"]["loop"]["kept_output_dtype"] == "fp32"
