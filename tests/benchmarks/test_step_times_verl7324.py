"""The A800 weight-sync rows of verl-project/verl PR #7324 (published_rl_times_weight_sync.json, ids verl7324-*):
the one-step-off trainer's sync timer wraps CheckpointEngineManager.update_weights, which releases and resumes the
SGLang KV cache around the transfer (verl/checkpoint_engine/base.py l.529 and l.553 @040a2865), so each row counts
the plan's sleep_wake (SGLang level 1: KV cache only); the FSDP-engine rows ran 'on the config of the first
TorchTitan row' (e8fd0a011), whose rollout is SGLang TP2 x 8 replicas."""

from __future__ import annotations

import json

import pytest
from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_verl7324")
DATA = S.RL_DATA.parent / "published_rl_times_weight_sync.json"
ENTRIES = {e["id"]: e for e in json.loads(DATA.read_text()) if e["id"].startswith("verl7324-")}
MAPPED = sorted(i for i in ENTRIES if "hsdp" not in i)  # HSDP x TP is refused by the card


def test_all_seven_rows_are_there() -> None:
    assert len(ENTRIES) == 7


@pytest.mark.parametrize("eid", sorted(ENTRIES))
def test_the_sync_timer_covers_the_kv_release_and_resume(eid: str) -> None:
    e = ENTRIES[eid]
    assert e["timer_scope"]["weight_sync"]["also"] == ["sleep_wake"]
    assert "base.py" in e["timer_scope"]["weight_sync"]["why"]
    assert e["rollout"]["sleep_level"] == 1  # SGLang standalone: release_kv_cache, tags=['kv_cache'] only


@pytest.mark.parametrize("eid", MAPPED)
def test_the_scored_weight_sync_adds_the_engine_release(eid: str) -> None:
    rows = [r for r in S.rl_rows([ENTRIES[eid]], []) if r.quantity == "weight_sync"]
    assert len(rows) == 1 and rows[0].status == "mapped"
    assert sorted(rows[0].parts_used) == ["time.sleep_wake", "time.weight_sync"]


@pytest.mark.parametrize("eid", [i for i in MAPPED if "fsdp-engine" in i])
def test_fsdp_engine_rows_use_the_first_titan_rows_rollout(eid: str) -> None:
    e = ENTRIES[eid]
    assert e["rollout"]["tp"] == 2 and "e8fd0a0113d313355b3e5b33484f127280d6d7f9" in e["note"]
    card, _ = S.map_rl(e)
    assert card["rollout"]["tensor_parallel"] == 2
