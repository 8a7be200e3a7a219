"""verl on vLLM 0.5.4 / 0.6.3: ``gpu_memory_utilization`` is a share of the memory remaining after the trainer, the
engine's weights and the profile run (verl/third_party/vllm/vllm_v_0_6_3/worker.py l.187-205 @72429f21:
``num_gpu_blocks = int((free_gpu_memory * self.cache_config.gpu_memory_utilization) // cache_block_size)``; docs/
examples/config.rst l.312-315 there), not vLLM's share of the total (``rollout.vllm.EngineConfig.remaining_fraction``,
``methods.rl.verl_remaining_fraction``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

import trainfit
from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.methods.rl import engine_for, verl_remaining_fraction
from trainfit.rollout.vllm import EngineConfig, engine_memory

GIB = 2**30
BASE = {"method": "grpo", "model": "Qwen/Qwen3-8B", "preset": "verl", "hardware.gpu": "a100-80gb",
        "hardware.gpus_per_node": 8}


def _plan(**over):
    return trainfit.plan({}, overrides={**BASE, **over})


def test_share_of_what_remains_after_the_profile_run():
    spec = from_catalog("Qwen/Qwen2.5-7B")
    total = 80 * GIB
    cfg = EngineConfig(tp=1, max_model_len=4096, gpu_memory_utilization=0.5, remaining_fraction=True)
    m = engine_memory(spec, gpu_memory_bytes=total, engine=cfg, other_used_bytes=10 * GIB)
    rest = total - m.cuda_context - 10 * GIB - m.weights - m.profiled_peak - m.non_torch
    assert m.kv_cache_available == pytest.approx(0.5 * rest)
    assert m.fits and not m.cuda_graphs_in_budget  # V0 captures graphs after the KV cache
    # no start-up refusal: the patched worker only records the free memory; vLLM's own rule refuses at 0.9
    busy = replace(cfg, gpu_memory_utilization=0.9)
    assert engine_memory(spec, gpu_memory_bytes=total, engine=busy, other_used_bytes=20 * GIB).fits
    own = engine_memory(spec, gpu_memory_bytes=total, engine=replace(busy, remaining_fraction=False),
                        other_used_bytes=20 * GIB)
    assert not own.fits and "free memory at start-up" in own.reason


def test_verl_pin_before_0_7_plans_the_remaining_share():
    old = _plan(**{"software.vllm": "0.6.3"})
    new = _plan(**{"software.vllm": "0.8.4"})
    assert verl_remaining_fraction(old.card) and not verl_remaining_fraction(new.card)
    assert not verl_remaining_fraction(_plan(preset="trl", **{"software.vllm": "0.6.3"}).card)
    gpu = resolve_gpu("a100-80gb").usable_memory_bytes
    ctx = 512 * 2**20
    load = next(p for p in old.to_dict()["phases"] if p["name"] == "load")["components"]
    trainer = load["weights"]  # the fp32 actor shard, resident when verl builds the rollout (no param_offload)
    r = old.rollout
    em, _, _ = engine_for(old.card, old.spec, gpu_memory=gpu, other_used_bytes=trainer)
    assert em.kv_cache == pytest.approx(r.kv_cache_bytes)  # the plan's engine is this one
    assert em.kv_cache_available == pytest.approx(
        0.5 * (gpu - ctx - trainer - em.weights - em.profiled_peak - em.non_torch))
    assert r.kv_cache_bytes > new.rollout.kv_cache_bytes  # 0.5 of what remains > 0.5 of the total less the engine
    assert any("verl on vLLM 0.6.3" in n for n in old.assumptions)
    # fewer GPUs, a larger trainer shard, a smaller cache
    assert _plan(**{"software.vllm": "0.6.3", "hardware.gpus_per_node": 4}).rollout.kv_cache_bytes < r.kv_cache_bytes

