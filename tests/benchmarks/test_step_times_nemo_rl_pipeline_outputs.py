"""benchmarks/step_times.py map_rl, NeMo RL Megatron rows with pipeline parallel: from v0.4 NeMo RL builds its model
from Megatron-Bridge's GPTModelProvider (AutoBridge), whose deallocate_pipeline_outputs defaults to True
(``PIPELINE_OUTPUTS_DEALLOCATED`` cites the files at each tag), so the card frees each sent stage output
(``parallel.pipeline_outputs_deallocated``); the v0.3 rows (nemo.tron) state false themselves."""

from __future__ import annotations

import pytest
from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_nemo_rl_pipeline_outputs")
ROWS = {e["id"]: e for e in S.load_entries(S.RL_DATA)
        if e["framework"] == "nemo-rl" and e["train"].get("strategy") == "megatron" and (e["train"].get("pp") or 1) > 1}
V03 = {"nemorl-v03blog-grpo-llama31-70b-megatron-h100-64g", "nemorl-v03blog-grpo-qwen3-32b-megatron-h100-64g",
       "nemorl-issue959-rerun-grpo-llama31-70b-megatron-h100-64g", "nemorl-refitblog-v03-dsv3-ep64pp8-vllm-tp64-512g"}


def test_the_v03_rows_are_the_ones_that_state_it() -> None:
    assert V03 <= set(ROWS) and len(ROWS) > len(V03)
    assert {rid for rid, e in ROWS.items() if "pipeline_outputs_deallocated" in e["train"]} == V03


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_bridge_builds_free_sent_outputs(row_id: str) -> None:
    try:
        card, _ = S.map_rl(ROWS[row_id])
    except S.Unmapped as why:  # a row the benchmark does not score either (its model is not in the catalog)
        pytest.skip(str(why))
    assert card["parallel"].get("pipeline_outputs_deallocated", False) is (row_id not in V03)


def test_an_entry_value_overrides_the_framework_default() -> None:
    mp, _ = S.model_parallel_section({"pp": 2, "pipeline_outputs_deallocated": False}, framework="megatron-bridge")
    assert "pipeline_outputs_deallocated" not in mp
    mp, _ = S.model_parallel_section({"pp": 2}, framework="nemo-rl")
    assert mp["pipeline_outputs_deallocated"] is True
    mp, _ = S.model_parallel_section({"pp": 2}, framework="verl")
    assert "pipeline_outputs_deallocated" not in mp
