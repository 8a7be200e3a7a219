"""An engine in processes of its own keeps its own CUDA context beside the trainer's on a colocated GPU, in every
phase (``methods.rl.engine_in_trainer_process``); an engine inside the trainer's process shares the trainer's."""

from __future__ import annotations

import pytest

import trainfit
from trainfit.methods.rl import VERL_VLLM_OWN_PROCESS_SINCE, engine_in_trainer_process
from trainfit.rollout.vllm import CUDA_CONTEXT_BYTES

GIB = 2**30
BASE = {"method": "grpo", "model": "Qwen/Qwen3-8B", "hardware.gpu": "h100-sxm", "hardware.gpus_per_node": 8,
        "rollout.sleep_level": 1, "rollout.gpu_memory_utilization": 0.4}


def _engine(plan, phase: str) -> float:
    return next(p for p in plan.to_dict()["phases"] if p["name"] == phase)["components"]["rollout_engine"]


def _plan(**over):
    return trainfit.plan({}, overrides={**BASE, **over})


@pytest.mark.parametrize("preset", ["openrlhf", "nemo-rl", "skyrl"])
def test_ray_actor_engines_hold_their_own_context(preset):
    own = _plan(preset=preset)
    assert not engine_in_trainer_process(own.card)[0]
    # asleep (level 1: weights and KV away) the engine keeps its context, non-torch workspaces and graphs
    asleep = _engine(own, "actor_forward")
    trl = _plan(preset="trl")
    assert engine_in_trainer_process(trl.card)[0]
    # the same engine config (TRL vs the preset: graphs and workspaces alike at this gmu), one context apart
    assert asleep - _engine(trl, "actor_forward") == pytest.approx(CUDA_CONTEXT_BYTES, rel=0.02)
    assert any("processes of its own" in n for n in own.assumptions)
    assert not any("processes of its own" in n for n in trl.assumptions)


def test_verl_vllm_own_process_from_0_7_1_and_sglang_always():
    new = _plan(preset="verl")
    old = _plan(preset="verl", **{"software.verl": "0.6.0"})
    assert VERL_VLLM_OWN_PROCESS_SINCE == (0, 7, 1)
    assert not engine_in_trainer_process(new.card)[0] and engine_in_trainer_process(old.card)[0]
    # vLLM V0 or a vLLM before 0.8.5: the verl before the process-separated server (VERL_OWN_PROCESS_MIN_VLLM)
    assert engine_in_trainer_process(_plan(preset="verl", **{"rollout.vllm_engine": "v0"}).card)[0]
    assert engine_in_trainer_process(_plan(preset="verl", **{"software.vllm": "0.8.4"}).card)[0]
    assert not engine_in_trainer_process(_plan(preset="verl", **{"software.vllm": "0.8.5"}).card)[0]
    sg = _plan(preset="verl", **{"software.verl": "0.6.0", "rollout.engine": "sglang"})
    assert not engine_in_trainer_process(sg.card)[0]
    # the rollout phase's engine carries the context under v0.9's own processes, not under 0.6's shared one
    assert _engine(new, "rollout") - _engine(old, "rollout") == pytest.approx(
        CUDA_CONTEXT_BYTES + (new.rollout.kv_cache_bytes - old.rollout.kv_cache_bytes), rel=0.01)


def test_split_placement_counts_the_engine_context_once():
    # the engine's own GPUs: the plan's device overhead holds its one context; the engine component does not
    p = _plan(preset="openrlhf", **{"rollout.placement": "split", "rollout.gpus": 4})
    group = next(g for g in p.groups if g.name == "rollout")
    comps = next(ph for ph in group.phases if ph.phase.value == "rollout").components
    assert comps["rollout_engine"] == pytest.approx(p.rollout.engine_device_bytes - CUDA_CONTEXT_BYTES)
