"""benchmarks/step_times.py: verl's disaggregated trainers give the rollout whole nodes (rollout.nnodes x
rollout.n_gpus_per_node), as NeMo RL does; a split inside one node stays a per-node split. The checkpoint engine's
sync timer (V1 separate_async and one-step-off trainers) covers the SGLang KV cache release and resume."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
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


WS = {e["id"]: e for e in json.loads((S.RL_DATA.parent / "published_rl_times_weight_sync.json").read_text())}
CHECKPOINT_ENGINE_ROWS = sorted(PERF) + sorted(i for i in WS if i.startswith("verl7005-"))


def test_the_checkpoint_engine_rows_are_there():
    assert len(PERF) == 6 and len(CHECKPOINT_ENGINE_ROWS) == 7


@pytest.mark.parametrize("eid", CHECKPOINT_ENGINE_ROWS)
def test_the_checkpoint_engine_timer_covers_the_kv_release_and_resume(eid: str):
    """The V1 separate_async trainer's update_weights timer and the one-step-off trainer's sync_rollout_weights
    both wrap CheckpointEngineManager.update_weights, which releases the standalone SGLang replicas' KV cache before
    the transfer and resumes it after (verl/checkpoint_engine/base.py l.509 / l.533
    @b9873ee98f5ee513a460a7a41623262ac4a831e9 and @ce195c95ea3aa9a8b89b00bbe669e854a91d23d1,
    l.493 / l.511 @b7ff88e3dcfc649b1bc830e00ed72ef0ac1810b9): the plan's sleep_wake (SGLang level 1, KV cache only)
    is in the row."""
    e = PERF.get(eid) or WS[eid]
    scope = e["timer_scope"]["weight_sync"]
    assert scope["also"] == ["sleep_wake"] and "release_kv_cache_replicas" in scope["why"]
    assert e["rollout"]["sleep_level"] == 1
    rows = [r for r in S.rl_rows([e], []) if r.quantity == "weight_sync"]
    assert len(rows) == 1 and rows[0].status == "mapped"
    assert sorted(rows[0].parts_used) == ["time.sleep_wake", "time.weight_sync"]


@pytest.mark.parametrize("eid", ["verl-v1-weight-sync-qwen3-30b-a3b-h100-1p1n-nccl-offload",
                                 "verl-v1-weight-sync-qwen3-235b-a22b-h100-8p2n-nccl-offload"])
def test_veomni_rows_train_bf16_weights_as_their_repro_script_sets(eid: str):
    """PR #7085's MoE repro script runs VeOmni with mixed_precision=false, which loads the model in bf16
    (veomni/transformer_impl.py l.287-293 @ce195c95ea3aa9a8b89b00bbe669e854a91d23d1): train.weights_dtype -> the
    card's precision.weights."""
    e = PERF[eid]
    assert e["train"]["weights_dtype"] == "bf16" and "mixed_precision=false" in e["train"]["weights_dtype_source"]
    card, notes = S.map_rl(e)
    assert card["precision"]["weights"] == "bf16"
    assert any(n.startswith("trainer weights bf16 (train.weights_dtype)") for n in notes)
    plain = copy.deepcopy(e)
    del plain["train"]["weights_dtype"]
    assert "weights" not in S.map_rl(plain)[0]["precision"]


def test_the_30b_repro_rollout():
    e = PERF["verl-v1-weight-sync-qwen3-30b-a3b-h100-1p1n-nccl-offload"]
    card, _ = S.map_rl(e)
    assert card["rollout"]["tensor_parallel"] == 4 and card["rollout"]["gpu_memory_utilization"] == 0.7
