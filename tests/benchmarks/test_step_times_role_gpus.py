"""benchmarks/step_times.py: an RL entry whose critic, reference or reward model has its own GPU group (OpenRLHF's
Ray placement without colocation) is not representable; the same entry without the groups maps."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]


S = load_step_times("trainfit_bench_step_times_roles")
OTHER = {e["id"]: e for e in json.loads((S.RL_DATA.parent / "published_rl_times_other.json").read_text())}
ENTRY = OTHER["openrlhf-bench-ppo-llama2-7b-a800-8g"]


def test_per_role_gpu_groups_are_not_representable() -> None:
    with pytest.raises(S.Unmapped) as err:
        S.map_rl(ENTRY)
    assert err.value.status == "not_representable"
    assert "per-role GPU groups (reference 1, reward 1, critic 2, actor 2, rollout 2 GPUs)" in err.value.reasons[0]


def test_without_role_groups_the_entry_maps() -> None:
    e = copy.deepcopy(ENTRY)
    e["rollout"]["role_gpus"] = {"actor": 6, "rollout": 2}
    card, _ = S.map_rl(e)
    assert card["rollout"]["placement"] == "split"
    assert card["rollout"]["gpus"] == 2
    assert card["rollout"]["max_num_seqs"] == 16
