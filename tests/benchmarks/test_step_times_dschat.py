"""benchmarks/step_times.py, DeepSpeed-Chat blog rows: the benchmark batch rule and the release scripts' settings."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("trainfit_bench_step_times_dschat", REPO / "benchmarks" / "step_times.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


S = _load()
RL = {e["id"]: e for e in json.loads(S.RL_DATA.read_text())}


def _fits(e, b):
    x = copy.deepcopy(e)
    x["rollout"]["generation_batch_per_gpu"] = b
    x["train"].update(micro_batch_size=b, ppo_mini_batch_size=b * e["gpus"])
    return S.plan_card(S.map_rl_as_published(x)[0]).fits


def test_blog_rows_take_the_largest_power_of_two_the_plan_fits():
    e = RL["dschat-ppo-opt-13b-a100-80gb-8g"]
    assert S.dschat_benchmark_row(e)
    card, notes = S.map_rl(e)
    b = card["rollout"]["max_num_seqs"] // card["rollout"]["tensor_parallel"]
    assert card["batch"]["micro_batch_size"] == b
    assert card["rollout"]["mini_batches"] == 1024 // (b * e["gpus"])  # one actor step per generate call
    assert _fits(e, b) and (2 * b > 1024 // e["gpus"] or not _fits(e, 2 * b))
    assert any(n.startswith(f"benchmark batch: {b} prompt(s) per GPU") for n in notes)


def test_blog_rows_keep_the_script_batch_when_nothing_fits_and_say_so():
    for eid in ("dschat-ppo-opt-30b-a100-40gb-8g", "dschat-ppo-opt-175b-a100-80gb-64g"):
        e = RL[eid]
        fitting = [b for b in (1, 2, 4, 8, 16, 32, 64, 128) if b <= 1024 // e["gpus"] and _fits(e, b)]
        card, notes = S.map_rl(e)
        if fitting:
            assert card["batch"]["micro_batch_size"] == max(fitting)
        else:
            assert card == S.map_rl_as_published(e)[0]
            assert any("none fits" in n and "script batch kept" in n for n in notes)


def test_release_script_settings_reach_the_card():
    card, notes = S.map_rl(RL["dschat-ppo-opt-30b-a100-80gb-8g"])  # run_30b_lora.sh: --actor_lora_dim 128
    assert card["scope"] == "lora" and card["lora"]["rank"] == 128 and card["roles"]["reference"] == "gpu"
    assert "embed_tokens" in card["lora"]["modules_to_save"]  # no --only_optimize_lora
    assert card["lora"]["adapter_dtype"] == "bf16"  # DeepSpeed's fp16 engine halves the LoRA layers too
    card, _ = S.map_rl(RL["dschat-ppo-opt-6.7b-a100-80gb-8g"])  # run_6.7b.sh: full actor
    assert card["scope"] == "full"
    card, _ = S.map_rl(RL["dschat-ppo-opt-66b-a100-80gb-8g"])  # multi_node/run_66b.sh: --tp_gather_partition_size 4
    assert card["rollout"]["tp_gather_partition_size"] == 4


def test_other_deepspeed_chat_rows_are_mapped_as_published():
    others = [e for e in RL.values() if e["framework"] == "deepspeed-chat" and not S.dschat_benchmark_row(e)]
    assert {e["id"] for e in others} >= {"dschat-ppo-opt-1.3b-a6000-1g", "dschat-issue469-ppo-opt-13b-a800-8g"}
    for e in others:
        try:
            assert S.map_rl(e) == S.map_rl_as_published(e)
        except S.Unmapped:
            pass
