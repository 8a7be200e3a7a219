"""benchmarks/step_times.py: the NeMo RL v0.5 FP8 rows map their recipes' fp8 settings (vLLM fp8 weights, Megatron
blockwise fp8); an fp8 row without them stays skipped."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]


S = load_step_times("trainfit_bench_step_times_fp8")
RL = {e["id"]: e for e in json.loads(S.RL_DATA.read_text())}
LLAMA = "nemorl-v05-grpo-llama31-8b-h100-fp8-16g-off1"
DSV3 = "nemorl-v05-grpo-dsv3-h100-fp8-512g-off1"


def test_llama_fp8_row_maps_both_sides():
    card, notes = S.map_rl(RL[LLAMA])
    assert card["rollout"]["quantization"] == "fp8"
    assert "quantization_bf16_modules" not in card["rollout"]
    assert card["precision"] == {"compute": "fp8", "fp8_recipe": "blockwise"}
    twin, _ = S.map_rl(RL["nemorl-v05-grpo-llama31-8b-h100-bf16-16g-off1"])
    assert "quantization" not in twin["rollout"] and "precision" not in twin
    assert RL[LLAMA]["fp8_source"]["path"].endswith("grpo-llama3.1-8b-instruct-2n8g-fp8-async-1off.yaml")


def test_deepseek_fp8_row_keeps_the_latent_projections_bf16():
    card, _ = S.map_rl(RL[DSV3])
    ro = card["rollout"]
    assert (ro["quantization"], ro["quantization_bf16_modules"], ro["tensor_parallel"], ro["max_num_seqs"]) == (
        "fp8", ["a_proj", "b_proj"], 16, 32)
    assert card["precision"]["fp8_recipe"] == "blockwise"


def test_an_fp8_row_without_its_settings_is_skipped():
    e = copy.deepcopy(RL[LLAMA])
    del e["rollout"]["quantization"]
    with pytest.raises(S.Unmapped) as exc:
        S.map_rl(e)
    assert exc.value.status == "skipped" and "fp8" in exc.value.reasons[0]
