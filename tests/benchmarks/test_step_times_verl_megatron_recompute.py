"""verl's one-step-off Megatron rows ran without activation recompute: at volcengine/verl
@503ea75f533f715cf1667551bd375ec9b1e0d5fc the Megatron worker reads the recompute settings from
``actor_rollout_ref.model.gradient_checkpointing_kwargs`` with ``dict.get(key, 'full')``, and the trainer config holds
those keys as null, so ``enable_gradient_checkpointing=True`` leaves Megatron-Core's ``recompute_granularity`` None
(verl/single_controller/base/megatron/worker.py l.94-102; verl/trainer/config/ppo_megatron_trainer.yaml l.46-56)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
S = load_step_times("trainfit_bench_step_times_verl_megatron_recompute")
ROWS = {e["id"]: e for e in json.loads((REPO / "benchmarks" / "data" / "published_rl_times.json").read_text())}


@pytest.mark.parametrize("row_id", ["verl-one-step-off-dapo-qwen25math7b-h20-colocate-megatron",
                                    "verl-one-step-off-dapo-qwen25math7b-h20-async-megatron"])
def test_the_one_step_off_megatron_rows_plan_no_recompute(row_id: str) -> None:
    e = ROWS[row_id]
    assert e["train"]["activation_checkpointing"] is False
    assert "503ea75f533f715cf1667551bd375ec9b1e0d5fc" in e["note"] and "worker.py l.94-102" in e["note"]
    card, _ = S.map_rl(e)
    assert card["parallel"]["gradient_checkpointing"] is False
