"""benchmarks/step_times.py ``rollout_tp``: an RL entry that does not publish its rollout TP is planned at its
framework's default (verl: rollout.tensor_model_parallel_size 2, verl/trainer/config/rollout/rollout.yaml) when the
default's bf16 shard fits the engine's half card (verl's gpu_memory_utilization 0.5), else at the smallest power of
two that does; a framework with no established default keeps the half-card rule and says so."""

from __future__ import annotations

import copy
import json

from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_rollout_tp_default")


def _entries() -> dict:
    out = {}
    for f in sorted(S.RL_DATA.parent.glob("published_rl_times*.json")):
        data = json.loads(f.read_text())
        for e in data if isinstance(data, list) else []:
            out[e["id"]] = e
    return out


ALL = _entries()
RTX = "verl-issue7412-grpo-qwen3-4b-instruct-dapo-rtx4090-48gb-4g"


def test_verl_entry_without_tp_runs_verls_default_2() -> None:
    e = ALL[RTX]
    assert e["framework"] == "verl" and not e["rollout"].get("tp")
    tp, notes = S.rollout_tp(e, "Qwen/Qwen3-4B")
    assert tp == 2  # the half-card rule alone gives 1 (8 GB of bf16 weights in a 48 GB card)
    assert "framework default" in notes[0] and "rollout.yaml" in notes[0]


def test_the_rtx4090_card_is_planned_at_tp2() -> None:
    card, _ = S.map_rl(ALL[RTX])
    assert card["rollout"]["tensor_parallel"] == 2


def test_a_published_tp_wins_over_the_default() -> None:
    e = copy.deepcopy(ALL[RTX])
    e["rollout"]["tp"] = 1
    assert S.rollout_tp(e, "Qwen/Qwen3-4B") == (1, [])


def test_verl_default_that_cannot_hold_the_model_falls_back_to_the_half_card_rule() -> None:
    e = ALL["verl-weight-sync-qwen3-235b-h20-64x64-nccl"]  # 470 GB of bf16 weights, 96 GB H20
    tp, notes = S.rollout_tp(e, "Qwen/Qwen3-235B-A22B")
    assert tp == 16
    assert "default 2 cannot hold" in notes[0]


def test_a_default_not_applied_keeps_the_rule_and_says_why() -> None:
    e = ALL["dschat-ppo-opt-30b-a100-80gb-8g"]
    tp, notes = S.rollout_tp(e, "facebook/opt-30b")
    assert tp == 2
    assert "inference_tp_size default is 1" in notes[0] and "not applied" in notes[0]


def test_an_unknown_framework_keeps_the_rule_and_says_no_default() -> None:
    e = copy.deepcopy(ALL[RTX])
    e["framework"] = "some-framework"
    tp, notes = S.rollout_tp(e, "Qwen/Qwen3-4B")
    assert tp == 1 and "no default of some-framework" in notes[0]


def test_nemo_rl_default_1_is_checked_against_the_entrys_memory_share() -> None:
    e = ALL["nemorl-v03blog-grpo-qwen3-32b-megatron-h100-64g"]  # 65 GB of bf16 weights, 0.6 of an 80 GB card
    tp, notes = S.rollout_tp(e, "Qwen/Qwen3-32B")
    assert tp == 2 and "default 1 cannot hold them in 0.6" in notes[0]
    small = copy.deepcopy(e)
    tp, notes = S.rollout_tp(small, "Qwen/Qwen3-4B")
    assert tp == 1 and "framework default" in notes[0]
