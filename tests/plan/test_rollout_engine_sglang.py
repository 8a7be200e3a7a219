"""``rollout.engine: sglang``: planned with vLLM's memory and generation model, SGLang's overlap scheduler
(``compute.decode_step``, "SGLang's overlap scheduler"), its per-tensor CUDA-IPC weight load under verl
(``compute.sync.SGLANG_VERL_LOAD``) and its memory release (``compute.sleep_wake``, ``host_backup``)."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import sync
from trainfit.compute.rates import default_rates
from trainfit.compute.sleep_wake import sleep_wake_seconds
from trainfit.errors import CardError
from trainfit.export.importers import read_verl
from trainfit.plan import make_plan
from trainfit.rollout.vllm import EngineConfig, engine_memory
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import SERVING_ENGINES, RolloutEngine

BASE = dict(model="Qwen/Qwen2.5-7B", method="grpo", preset="verl", hardware={"gpu": "h100-sxm", "gpus_per_node": 8},
            parallel={"strategy": "fsdp"},
            rollout={"engine": "vllm", "sleep_level": 2, "gpu_memory_utilization": 0.5, "tensor_parallel": 2})


def _card(engine: str, **ro):
    c = copy.deepcopy(BASE)
    c["rollout"].update(engine=engine, **ro)
    return load_card_dict(c)


def _phases(plan) -> dict[str, float]:
    return {ph.name: ph.seconds for ph in plan.time.phases}


def test_sglang_is_a_serving_engine_and_a_card_value():
    assert RolloutEngine("sglang") in SERVING_ENGINES and RolloutEngine.HF not in SERVING_ENGINES
    with pytest.raises(CardError, match="rollout.engine") as e:
        _card("sglangx")
    assert "sglang" in str(e.value) and "vllm" in str(e.value)


def test_verl_sglang_loads_one_ipc_handle_per_tensor_same_buckets():
    for placement in ("colocate", "split"):
        v = sync.framework_sync_mechanism("verl", placement)
        s = sync.framework_sync_mechanism("verl", placement, engine="sglang")
        assert s.s_per_tensor == sync.S_PER_TENSOR_IPC and v.s_per_tensor == sync.S_PER_TENSOR_BUCKETED
        assert (s.mechanism, s.bucket_bytes, s.broadcasts_whole_bucket) == (v.mechanism, v.bucket_bytes,
                                                                         v.broadcasts_whole_bucket)
        assert "105cec05" in s.source
    # frameworks whose SGLang path is not read keep their path
    assert sync.framework_sync_mechanism("nemo-rl", "split", engine="sglang") == sync.framework_sync_mechanism(
        "nemo-rl", "split")


def test_plan_differs_in_weight_sync_kv_pool_and_overlap_scheduler_only(monkeypatch):
    s = make_plan(_card("sglang"))
    off = make_plan(_card("sglang", sglang_overlap_schedule=False))
    # verl before 0.8 builds its vLLM engine with the custom all-reduce off (NCCL), its SGLang engine with it on
    # (plan.rl_generation.engine_custom_all_reduce): compared with the custom kernel on both
    monkeypatch.setattr("trainfit.plan.rl_generation.engine_custom_all_reduce", lambda card: False)
    nccl = _phases(make_plan(_card("vllm")))
    monkeypatch.setattr("trainfit.plan.rl_generation.engine_custom_all_reduce", lambda card: True)
    v = make_plan(_card("vllm"))
    pv, ps, po = _phases(v), _phases(s), _phases(off)
    assert nccl.pop("generation") != pv["generation"] and nccl == {k: x for k, x in pv.items() if k != "generation"}
    assert ps.pop("weight_sync") > pv.pop("weight_sync")
    assert ps.pop("sleep_wake") > pv.pop("sleep_wake")  # a larger KV pool to re-map
    # the overlap scheduler hides the per-step host work; without it the generation is vLLM's (KV not limiting here)
    assert ps.pop("generation") < pv.pop("generation") == po["generation"]
    assert ps == pv  # log-probs, update
    assert s.rollout.kv_cache_bytes > v.rollout.kv_cache_bytes


def test_mem_fraction_static_holds_weights_and_kv_only():
    spec = from_catalog("Qwen/Qwen2.5-7B")
    total = 80 * 2**30
    cfg = EngineConfig(tp=1, max_model_len=4096, gpu_memory_utilization=0.5)
    v = engine_memory(spec, gpu_memory_bytes=total, engine=cfg)
    s = engine_memory(spec, gpu_memory_bytes=total, engine=replace(cfg, static_fraction=True))
    # SGLang: KV = free after the weights - (1 - fraction) x the memory free before loading (the CUDA context
    # already held); activations, graphs, workspaces on top
    assert s.kv_cache_available == pytest.approx(0.5 * (total - s.cuda_context) - s.weights)
    assert s.kv_cache_available - v.kv_cache_available == pytest.approx(
        v.profiled_peak + v.non_torch + v.cuda_graphs - 0.5 * v.cuda_context)
    assert s.total_device_bytes > 0.5 * total >= v.total_device_bytes - v.cuda_context
    assert s.fits and v.fits
    # a fraction that leaves no KV pool after the weights does not start
    small = engine_memory(spec, gpu_memory_bytes=total, engine=replace(cfg, gpu_memory_utilization=0.15,
                                                                         static_fraction=True))
    assert not small.fits and "mem_fraction_static" in small.reason


def test_sglang_release_frees_without_host_copy():
    r = default_rates(resolve_gpu("h100-sxm"))
    w, kv = 8e9, 30e9
    v1 = sleep_wake_seconds(level=1, weight_bytes_per_gpu=w, kv_cache_bytes_per_gpu=kv, rates=r)
    s1 = sleep_wake_seconds(level=1, weight_bytes_per_gpu=w, kv_cache_bytes_per_gpu=kv, rates=r, host_backup=False)
    v2 = sleep_wake_seconds(level=2, weight_bytes_per_gpu=w, kv_cache_bytes_per_gpu=kv, rates=r)
    s2 = sleep_wake_seconds(level=2, weight_bytes_per_gpu=w, kv_cache_bytes_per_gpu=kv, rates=r, host_backup=False)
    assert s1.sleep_s == 0 and s1.total_s < v1.total_s  # no PCIe copy, the weights stay
    assert s2.total_s == pytest.approx(v2.total_s)  # level 2: the same re-map
    # level 1 keeps the weights on the GPU while asleep: more resident memory than vLLM's level 1, no host copy
    pv, ps = make_plan(_card("vllm", sleep_level=1)), make_plan(_card("sglang", sleep_level=1))
    assert ps.peak.device >= pv.peak.device


def test_verl_export_and_import_round_trip_the_engine():
    from trainfit.export.verl import build

    for engine in ("sglang", "vllm"):
        text = build(_card(engine)).text
        assert f"actor_rollout_ref.rollout.name={engine}" in text
        assert read_verl(text).card["rollout"]["engine"] == engine


def test_trl_and_openrlhf_export_sglang_as_vllm_with_a_note():
    from trainfit.export import openrlhf, trl

    for mod in (trl, openrlhf):
        e = mod.build(_card("sglang"))
        assert any("rollout.engine sglang" in n and "exported as vllm" in n for n in e.notes)
        assert mod.build(_card("vllm")).text.replace("\n", "") in e.text.replace("\n", "") or "vllm" in e.text
