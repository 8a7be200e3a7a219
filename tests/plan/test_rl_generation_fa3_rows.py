"""The padded FA3 decode rows the plan hands the generation model (``plan.rl_generation.generation_phase``,
``compute.decode_step.fa3_decode_query_rows``): vLLM V1 on Hopper at head dim 128 only, 64 rows, or 128 under a
``software.vllm`` release pin before ``VLLM_FA3_ONE_MMA_WG_SINCE``."""

from __future__ import annotations

import pytest

from trainfit.compute import generation
from trainfit.compute.decode_step import FA3_DECODE_TILE_ROWS, FA3_DECODE_TILE_ROWS_TWO_MMA_WG
from trainfit.export.common import plan_facts
from trainfit.plan import make_plan
from trainfit.plan.rl_generation import vllm_fa3_one_mma_wg
from trainfit.spec.card import load_card_dict

BASE = {"model": "Qwen/Qwen3-8B", "method": "grpo", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
        "parallel": {"strategy": "fsdp"},
        "rollout": {"tensor_parallel": 2, "num_generations": 8, "prompts_per_step": 16, "prompt_len": 512,
                    "response_len": 1024}}


def _card(*, model: str = "Qwen/Qwen3-8B", gpu: str = "h100-sxm", rollout: dict | None = None,
          software: dict | None = None):
    d = {**BASE, "model": model, "hardware": {**BASE["hardware"], "gpu": gpu},
         "rollout": {**BASE["rollout"], **(rollout or {})}}
    if software:
        d["software"] = software
    return load_card_dict(d)


def _rows(card, monkeypatch) -> int:
    seen = []
    real = generation.generation_time

    def spy(**kw):
        seen.append(kw.get("decode_attention_rows", 0))
        return real(**kw)

    monkeypatch.setattr(generation, "generation_time", spy)
    make_plan(card)
    assert seen, "the plan ran no generation"
    return seen[-1]


def test_vllm_v1_on_hopper_pads_to_the_64_row_tile(monkeypatch):
    assert _rows(_card(), monkeypatch) == FA3_DECODE_TILE_ROWS == 64


@pytest.mark.parametrize("kw", [
    {"rollout": {"engine": "sglang"}},  # SGLang: its backend and tile differ by release (module docstring)
    {"rollout": {"vllm_engine": "v0"}},  # V0 does not hand the head counts to the scheduler metadata
    {"gpu": "a100-80gb"},  # FlashAttention-2 off Hopper
    {"model": "google/gemma-2-9b"},  # head dim 256: another tile
], ids=["sglang", "vllm-v0", "ampere", "head-dim-256"])
def test_no_padding_outside_the_modelled_scope(kw, monkeypatch):
    assert _rows(_card(**kw), monkeypatch) == 0


def test_a_vllm_pin_before_the_single_warpgroup_tile_pads_to_128_rows(monkeypatch):
    old = _card(software={"vllm": "0.8.4"})
    assert not vllm_fa3_one_mma_wg(old) and vllm_fa3_one_mma_wg(_card(software={"vllm": "0.8.5"}))
    assert vllm_fa3_one_mma_wg(_card()) and vllm_fa3_one_mma_wg(_card(software={"vllm": "main"}))
    assert _rows(old, monkeypatch) == FA3_DECODE_TILE_ROWS_TWO_MMA_WG == 128
    assert plan_facts(old)["software.vllm"] == "0.8.4"
