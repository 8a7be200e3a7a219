"""NeMo RL's per-step trainer state offload (``plan.rl_offload.nemo_rl_offload_bytes``), read at NVIDIA-NeMo/RL
@9dbd9adc95a10f5946cceb36e1d5b31e2429e470: the DTensor (FSDP2) worker moves its rank's fp32 parameter shard and the
AdamW moments of that shard (no gradients: ``zero_grad`` after training), all pageable; the Megatron worker its
bf16 parameter buffers (pinned) and its optimizer state (pageable, 10 B per parameter under the precision-aware
optimizer); the gradient buffers are freed and re-zeroed, never copied; nothing moves when not colocated."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import resolve_model
from trainfit.compute.offload import (
    PAGEABLE_FIRST_TOUCH_BYTES_PER_S,
    host_copy_bytes_per_s,
    pageable_copy_bytes_per_s,
)
from trainfit.compute.rates import default_rates
from trainfit.memory.weights import total_params, weight_bytes
from trainfit.plan.rl_offload import (
    NEMO_RL_DTENSOR_OPTIMIZER_BYTES,
    NEMO_RL_DTENSOR_PARAM_BYTES,
    NEMO_RL_MEGATRON_OPTIMIZER_BYTES,
    nemo_rl_offload_bytes,
    trainer_state_offload_phase,
)
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import ComputeDtype, Dtype
from trainfit.spec.training import TrainableSpec

MODEL = "Qwen/Qwen2.5-7B"
H100 = default_rates(resolve_gpu("h100-sxm"))
RATES = dict(pcie_bytes_per_s=H100.pcie_bytes_per_s, host_memory_bytes_per_s=H100.host_memory_bytes_per_s,
             gpus_per_node=8)


def _card(parallel: dict, placement: str = "colocate") -> object:
    ro = {"placement": placement, "tensor_parallel": 1, "gpu_memory_utilization": 0.5, "prompts_per_step": 32,
          "num_generations": 4, "prompt_len": 256, "response_len": 512, "sleep_level": 1}
    if placement == "split":
        ro["nodes"] = 1  # the engine on one whole node, training on the other
    return load_card_dict({"model": MODEL, "method": "grpo", "preset": "nemo-rl",
                           "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2 if placement == "split" else 1},
                           "batch": {"micro_batch_size": 1}, "parallel": parallel, "rollout": ro})


def test_dtensor_moves_its_fp32_shard_and_adamw_moments_pageable():
    """8 GPUs, FSDP2: (4 B fp32 parameter + 8 B AdamW moments) / 8 per GPU, every byte pageable; the Megatron
    layout (full bf16 weights and gradients of the model-parallel rank) would be (2 + 2) B x N + 12 B x N / 8."""
    spec = resolve_model(MODEL)
    n = total_params(spec)
    card = _card({"strategy": "fsdp", "fsdp_version": "fsdp2"})
    pinned, pageable = nemo_rl_offload_bytes(card, spec, train_gpus=8)
    assert pinned == 0.0
    assert pageable == pytest.approx((NEMO_RL_DTENSOR_PARAM_BYTES + NEMO_RL_DTENSOR_OPTIMIZER_BYTES) * n / 8)
    assert pageable == pytest.approx(12 * n / 8)
    assert pageable < (2 + 2) * n + 12 * n / 8  # the Megatron layout: 4 B x N + 1.5 B x N
    t = trainer_state_offload_phase(card, spec, H100, train_gpus=8)
    # to the host into pages allocated anew each step (first touch), back from them at the staging rate
    assert t.terms["to_host"] == pytest.approx(pageable / PAGEABLE_FIRST_TOUCH_BYTES_PER_S, rel=1e-6)
    assert t.terms["to_device"] == pytest.approx(pageable / pageable_copy_bytes_per_s(**RATES), rel=1e-6)
    assert t.seconds == pytest.approx(t.terms["to_host"] + t.terms["to_device"], rel=1e-9)


def test_megatron_moves_weights_and_optimizer_not_gradients():
    spec = resolve_model(MODEL)
    n = total_params(spec)
    card = _card({"strategy": "zero1"})
    pinned, pageable = nemo_rl_offload_bytes(card, spec, train_gpus=8)
    bf16 = weight_bytes(spec, weights=Dtype.BF16, compute=ComputeDtype.BF16, trainable=TrainableSpec()).base
    assert pinned == pytest.approx(bf16)  # the parameter buffers only: no gradient bytes
    assert pageable == pytest.approx(NEMO_RL_MEGATRON_OPTIMIZER_BYTES * n / 8)
    t = trainer_state_offload_phase(card, spec, H100, train_gpus=8)
    assert t.terms["to_host"] == pytest.approx(pinned / host_copy_bytes_per_s(**RATES)
                                               + pageable / PAGEABLE_FIRST_TOUCH_BYTES_PER_S, rel=1e-6)
    assert t.terms["to_device"] == pytest.approx(pinned / host_copy_bytes_per_s(**RATES)
                                                 + pageable / pageable_copy_bytes_per_s(**RATES), rel=1e-6)


@pytest.mark.parametrize("parallel", [{"strategy": "zero1"}, {"strategy": "fsdp"}])
def test_nothing_moves_when_not_colocated(parallel):
    spec = resolve_model(MODEL)
    assert trainer_state_offload_phase(_card(parallel, placement="split"), spec, H100, train_gpus=8) is None


def test_verl_megatron_counts_no_gradient_bytes():
    """verl's Megatron offload frees ``grad_data`` and re-zeroes it on load: the round trip is the bf16 weights
    (update and sync, plus the old log-probs verl always recomputes) and the 12 B optimizer shard, pinned."""
    from trainfit.plan.rl_offload import STATE_OFFLOAD_OPTIMIZER_BYTES

    spec = resolve_model(MODEL)
    n = total_params(spec)
    card = load_card_dict({"model": MODEL, "method": "grpo", "preset": "verl",
                           "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
                           "batch": {"micro_batch_size": 1}, "parallel": {"strategy": "zero1"},
                           "rollout": {"tensor_parallel": 1, "gpu_memory_utilization": 0.5, "prompts_per_step": 32,
                                       "num_generations": 4, "prompt_len": 256, "response_len": 512,
                                       "sleep_level": 1, "trainer_offload": "params_and_optimizer"}})
    bf16 = weight_bytes(spec, weights=Dtype.BF16, compute=ComputeDtype.BF16, trainable=TrainableSpec()).base
    one_way = STATE_OFFLOAD_OPTIMIZER_BYTES * n / 8 + 3 * bf16
    t = trainer_state_offload_phase(card, spec, H100, train_gpus=8)
    assert t.terms["to_host"] == pytest.approx(one_way / host_copy_bytes_per_s(**RATES), rel=1e-6)


def test_vllm_sleep_copies_share_the_nodes_host_memory():
    """vLLM's level-1 sleep and wake copy every engine GPU's weights to and from pinned host memory at once: each
    GPU at the smaller of its host link and its share of the node's host-memory bandwidth (25 GB/s of 200 on 8
    H100s, not the 51.2 GB/s of its own PCIe link); one GPU alone keeps its link's rate."""
    from trainfit.compute.sleep_wake import KV_REMAP_S_PER_BYTE, sleep_wake_seconds

    w, kv = 16e9, 20e9
    eight = sleep_wake_seconds(level=1, weight_bytes_per_gpu=w, kv_cache_bytes_per_gpu=kv, rates=H100, gpus_per_node=8)
    one = sleep_wake_seconds(level=1, weight_bytes_per_gpu=w, kv_cache_bytes_per_gpu=kv, rates=H100)
    assert eight.sleep_s == pytest.approx(w / host_copy_bytes_per_s(**RATES))
    assert eight.wake_s == pytest.approx(eight.sleep_s + (w + kv) * KV_REMAP_S_PER_BYTE)
    assert one.sleep_s == pytest.approx(w / min(H100.pcie_bytes_per_s, H100.host_memory_bytes_per_s))
    assert eight.sleep_s > one.sleep_s
    level2 = sleep_wake_seconds(level=2, weight_bytes_per_gpu=w, kv_cache_bytes_per_gpu=kv, rates=H100, gpus_per_node=8)
    assert level2.sleep_s == 0.0  # nothing copied


def test_colocated_plan_sleeps_at_the_node_share():
    from trainfit.plan import make_plan

    plan = make_plan(_card({"strategy": "zero1"}))
    sw = next(p for p in plan.time.phases if p.name == "sleep_wake")
    bf16 = weight_bytes(resolve_model(MODEL), weights=Dtype.BF16, compute=ComputeDtype.BF16,
                        trainable=TrainableSpec()).base
    assert sw.terms["sleep"] == pytest.approx(bf16 / host_copy_bytes_per_s(**RATES), rel=0.02)
