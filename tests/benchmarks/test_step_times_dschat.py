"""benchmarks/step_times.py, DeepSpeed-Chat blog rows: the release scripts' settings."""

from __future__ import annotations

import json
from pathlib import Path

from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]


S = load_step_times("trainfit_bench_step_times_dschat")
RL = {e["id"]: e for e in json.loads(S.RL_DATA.read_text())}


def test_release_script_settings_reach_the_card():
    card, notes = S.map_rl(RL["dschat-ppo-opt-30b-a100-80gb-8g"])  # run_30b_lora.sh: --actor_lora_dim 128
    assert card["scope"] == "lora" and card["lora"]["rank"] == 128 and card["roles"]["reference"] == "gpu"
    assert "embed_tokens" in card["lora"]["modules_to_save"]  # no --only_optimize_lora
    assert card["lora"]["adapter_dtype"] == "bf16"  # DeepSpeed's fp16 engine halves the LoRA layers too
    card, _ = S.map_rl(RL["dschat-ppo-opt-6.7b-a100-80gb-8g"])  # run_6.7b.sh: full actor
    assert card["scope"] == "full"
    card, _ = S.map_rl(RL["dschat-ppo-opt-66b-a100-80gb-8g"])  # multi_node/run_66b.sh: --tp_gather_partition_size 4
    assert card["rollout"]["tp_gather_partition_size"] == 4
