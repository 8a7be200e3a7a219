"""A colocated engine starts beside what the trainer already holds (``methods.rl.trainer_bytes_at_engine_start``):
SGLang's ``mem_fraction_static`` is a share of the memory free before the model is loaded (sglang 0.5.8
model_runner.py l.365 ``min_per_gpu_memory = self.init_torch_distributed()``, model_runner_kv_cache_mixin.py
l.138-140 ``rest_memory = available_gpu_memory - total_gpu_memory * (1 - self.mem_fraction_static)``); vLLM refuses
to start when less than ``gpu_memory_utilization x total`` is free (vllm/v1/worker/utils.py ``request_memory``,
0.20.0 wheel l.403-410)."""

from __future__ import annotations

import copy

import pytest

import trainfit

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.memory.overhead import CUDA_CONTEXT_BYTES as TRAINER_CUDA_CONTEXT_BYTES
from trainfit.methods.rl import ENGINE_FIRST_PRESETS, trainer_bytes_at_engine_start
from trainfit.rollout.vllm import EngineConfig, engine_memory

GIB = 2**30
BASE = {"method": "grpo", "model": "Qwen/Qwen3-8B", "preset": "verl", "hardware.gpu": "h100-sxm",
        "hardware.gpus_per_node": 4, "rollout.engine": "sglang", "rollout.gpu_memory_utilization": 0.65}


def _plan(**over):
    return trainfit.plan({}, overrides={**BASE, **over})


def _weights(plan) -> float:
    load = next(p for p in plan.to_dict()["phases"] if p["name"] == "load")
    return load["components"]["weights"]


def test_sglang_fraction_is_of_memory_free_before_loading():
    spec = from_catalog("Qwen/Qwen2.5-7B")
    total = 80 * GIB
    cfg = EngineConfig(tp=1, max_model_len=4096, gpu_memory_utilization=0.5, static_fraction=True)
    alone = engine_memory(spec, gpu_memory_bytes=total, engine=cfg)
    beside = engine_memory(spec, gpu_memory_bytes=total, engine=cfg, other_used_bytes=10 * GIB)
    # rest = (free0 - weights) - (1 - f) x free0 = f x free0 - weights, free0 = total - context - other
    assert alone.kv_cache_available == pytest.approx(0.5 * (total - alone.cuda_context) - alone.weights)
    assert alone.kv_cache_available - beside.kv_cache_available == pytest.approx(0.5 * 10 * GIB)


def test_verl_sglang_engine_shrinks_with_the_trainer_shard():
    # the reviewer's case: verl, SGLang at 0.65, Qwen3-8B on 4 H100s: the fp32 actor shard (7.63 GiB) is on the GPU
    # when the engine starts (verl builds the actor before _build_rollout, no param_offload here)
    p4 = _plan()
    w4 = _weights(p4)
    assert w4 == pytest.approx(7.63 * GIB, rel=0.01)
    assert p4.fits  # 79.50 of 79.19 GiB with the fraction taken of the device total
    gpu = resolve_gpu("h100-sxm").usable_memory_bytes
    ctx = 512 * 2**20
    # SGLang's schedulers are processes of their own: the trainer process's CUDA context is on the GPU too
    # (methods.rl.engine_in_trainer_process)
    trainer_ctx = TRAINER_CUDA_CONTEXT_BYTES
    assert p4.rollout.kv_cache_bytes == pytest.approx(
        0.65 * (gpu - ctx - w4 - trainer_ctx) - p4.rollout.engine_weights_bytes, rel=0.005)
    # more GPUs, a smaller shard, a larger pool
    p8 = _plan(**{"hardware.gpus_per_node": 8})
    assert p8.rollout.kv_cache_bytes > p4.rollout.kv_cache_bytes
    assert p8.rollout.kv_cache_bytes - p4.rollout.kv_cache_bytes == pytest.approx(0.65 * (w4 - _weights(p8)),
                                                                                   rel=0.02)
    assert any("engine start-up" in n for n in p4.assumptions)


def test_offloaded_or_engine_first_trainers_hold_nothing_at_start():
    off = _plan(**{"rollout.trainer_offload": "params_and_optimizer"})
    on = _plan()
    # param_offload: verl moves the actor to the host before _build_rollout; only the trainer's context stays
    assert off.rollout.kv_cache_bytes - on.rollout.kv_cache_bytes == pytest.approx(0.65 * _weights(on), rel=0.02)
    assert any(f"holds {TRAINER_CUDA_CONTEXT_BYTES / GIB:.2f} GiB" in n for n in off.assumptions)
    for preset in ENGINE_FIRST_PRESETS:
        card = _plan(preset=preset).card
        assert trainer_bytes_at_engine_start(card, None) == 0.0  # never reads the actor
    split = _plan(**{"rollout.placement": "split", "rollout.gpus": 4, "hardware.gpus_per_node": 8}).card
    assert trainer_bytes_at_engine_start(split, None) == 0.0


def test_vllm_refuses_to_start_beside_a_large_trainer():
    # one GPU, the fp32 actor (30.5 GiB) resident: 0.9 x 79.2 GiB is not free when vLLM starts
    plan = _plan(**{"hardware.gpus_per_node": 1, "rollout.engine": "vllm", "rollout.gpu_memory_utilization": 0.9})
    assert not plan.rollout.engine_fits and "free memory at start-up" in plan.rollout.reason
    small = _plan(**{"hardware.gpus_per_node": 1, "rollout.engine": "vllm", "rollout.gpu_memory_utilization": 0.5})
    assert "free memory at start-up" not in small.rollout.reason
