"""step_times: verl rows state which workers ship their batches (rollout.controller_padded_batches,
compute.controller_transfer): the legacy workers' padded DataProto unless the entry says train.legacy_workers false
(a verl from 63e8a0d1617b209284011e0fcf1796574f372ffd on, whose engine workers ship the trainer's calls unpadded)."""

from __future__ import annotations

import re

import pytest
from step_times_module import load_step_times

st = load_step_times("step_times_verl_controller")
ENTRIES = st.load_entries(st.RL_DATA)


def _entry(entry_id: str) -> dict:
    return next(e for e in ENTRIES if e["id"] == entry_id)


@pytest.mark.parametrize("entry_id,padded", [("verl-fully-async-dapo-qwen25math7b-h20-colocate-128g", True),
                                             ("playverl-ppo-qwen2-7b-rec-h100-8g", True),
                                             ("verl-pr5596-grpo-qwen3-8b-gsm8k-gb200-4g", False)])
def test_the_card_says_which_workers(entry_id, padded):
    card, notes = st.map_rl(_entry(entry_id))
    assert card["rollout"]["controller_padded_batches"] is padded
    assert any("rollout.controller_padded_batches" in n for n in notes)


def test_every_engine_worker_entry_cites_the_default_change():
    flagged = [e for e in ENTRIES if e["train"].get("legacy_workers") is False]
    assert len(flagged) >= 4
    for e in flagged:
        assert e["framework"] == "verl" and re.search(r"63e8a0d1617b209284011e0fcf1796574f372ffd", e["note"]), e["id"]
