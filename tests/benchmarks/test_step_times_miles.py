"""The miles entries map to the miles preset (``benchmarks/step_times.py`` ``CARD_PRESETS``), so their weight sync is
miles' (``compute.sync.MILES_BROADCAST``) and not TRL's request per parameter, the planner's fallback without a
preset. radixark/miles docs/advanced/p2p-weight-transfer.md @748935dc7155d4990d02d62f6061c50ef8054051: Qwen3-30B-A3B,
2 + 2 H100 nodes, NCCL broadcast, 2.67 s; first contact (TRL's path) 42.2 s (+1482 %)."""

from __future__ import annotations

import json

import pytest
from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_miles")
ROW = "miles-p2p-weight-sync-qwen3-30b-a3b-h100-2p2n-nccl"


def _entry(eid: str) -> dict:
    for path in sorted(S.RL_DATA.parent.glob("published_rl_times*.json")):
        doc = json.loads(path.read_text())
        for e in doc if isinstance(doc, list) else doc.get("entries", []):
            if e["id"] == eid:
                return e
    raise KeyError(eid)


def test_miles_is_a_card_preset() -> None:
    assert "miles" in S.CARD_PRESETS


def test_the_broadcast_row_plans_miles_sync() -> None:
    card, _ = S.map_rl(_entry(ROW))
    assert card["preset"] == "miles"
    planned = S.plan_card(card)
    seconds, _ = S.phase_seconds(planned, "weight_sync")
    # 1.54 s wire + 1.59 s host in the run's 1 GiB buckets (rollout.weight_sync_bucket_mib; 3.31 s in miles' default
    # 512 MiB ones); TRL's path gave 42.2 s
    assert seconds == pytest.approx(3.12, abs=0.05)
    assert 0.5 * 2.67 <= seconds <= 2.0 * 2.67


@pytest.mark.parametrize("eid", ["miles-grpo-qwen38-27b-h200-8g", "miles-rocm-grpo-qwen3-30b-a3b-mi300x-8g"])
def test_the_step_entries_stay_skipped_for_their_prompt(eid: str) -> None:
    """Their weight-sync rows are not scored because the whole entry is skipped: neither publishes a prompt length
    (``rl_lengths``), whatever the framework."""
    with pytest.raises(S.Unmapped, match="prompt or response length not published"):
        S.map_rl(_entry(eid))
