"""benchmarks/step_times.py: verl's disaggregated trainers give the rollout whole nodes (rollout.nnodes x
rollout.n_gpus_per_node), as NeMo RL does; a split inside one node stays a per-node split."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]


S = load_step_times("trainfit_bench_step_times_verl_split")
PERF = {e["id"]: e for e in json.loads((S.RL_DATA.parent / "published_rl_times_verl_perf.json").read_text())}


def test_verl_split_over_nodes_takes_whole_rollout_nodes():
    e = PERF["verl-v1-weight-sync-qwen3-235b-a22b-h100-8p2n-nccl-offload"]  # 8 trainer + 2 rollout nodes, TP 16
    card, notes = S.map_rl(e)
    ro = card["rollout"]
    assert ro["nodes"] == 2 and "gpus" not in ro
    assert ro["tensor_parallel"] == 16
    assert any("verl's multi-node split" in n for n in notes)
    S.validate(card)  # an engine spanning two whole nodes is a card the planner takes


def test_verl_split_inside_one_node_stays_per_node():
    e = copy.deepcopy(PERF["verl-v1-weight-sync-qwen25-7b-h100-1p1n-nccl-offload"])
    e.update(gpus=8, nodes=1)
    e["rollout"].update(rollout_gpus=4, train_gpus=4)
    card, _ = S.map_rl(e)
    assert card["rollout"].get("gpus") == 4 and "nodes" not in card["rollout"]
