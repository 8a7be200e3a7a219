"""Copies to and from pageable host memory (``compute.offload.pageable_copy_bytes_per_s``): the CUDA driver stages
them through its own pinned buffer with a CPU copy, so they run at most at ``PAGEABLE_STAGING_BYTES_PER_S`` (DGX A100
``bandwidthTest --memory=pageable``: 10.0 GB/s host to device against 25.7 GB/s pinned), except over a coherent
NVLink-C2C host link (GH200 / GB200), where the GPU reads pageable memory directly. Which framework copies are
pageable: the ``compute.offload`` module docstring."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import resolve_model
from trainfit.compute.offload import (
    PAGEABLE_FIRST_TOUCH_BYTES_PER_S,
    PAGEABLE_STAGING_BYTES_PER_S,
    first_touch_copy_bytes_per_s,
    host_copy_bytes_per_s,
    pageable_copy_bytes_per_s,
    staging_bytes_per_s_of,
)
from trainfit.compute.rates import default_rates
from trainfit.memory.weights import total_params, weight_bytes
from trainfit.methods.presets import apply_preset
from trainfit.plan import make_plan
from trainfit.plan.rl_offload import NEMO_RL_MEGATRON_OPTIMIZER_BYTES, trainer_state_offload_phase
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import ComputeDtype, Dtype
from trainfit.spec.training import TrainableSpec

GB = 1e9
H100 = default_rates(resolve_gpu("h100-sxm"))


def test_pageable_rate_is_the_pinned_rate_capped_by_the_staging_copy():
    kw = dict(pcie_bytes_per_s=51.2 * GB, host_memory_bytes_per_s=200 * GB)
    # 8 GPUs: pinned 25 GB/s (the host-memory share), pageable the 10 GB/s staging copy
    assert host_copy_bytes_per_s(**kw, gpus_per_node=8) == pytest.approx(25 * GB)
    assert pageable_copy_bytes_per_s(**kw, gpus_per_node=8) == pytest.approx(PAGEABLE_STAGING_BYTES_PER_S)
    # a host-memory share below the staging rate binds both alike
    assert pageable_copy_bytes_per_s(**kw, gpus_per_node=32) == pytest.approx(host_copy_bytes_per_s(**kw, gpus_per_node=32))
    # no staging (coherent host link): the pinned rate
    assert pageable_copy_bytes_per_s(**kw, gpus_per_node=8, staging_bytes_per_s=None) == pytest.approx(25 * GB)
    with pytest.raises(ValueError):
        pageable_copy_bytes_per_s(**kw, gpus_per_node=8, staging_bytes_per_s=0.0)


def test_staging_only_behind_pcie():
    assert staging_bytes_per_s_of(coherent_host_link=False) == PAGEABLE_STAGING_BYTES_PER_S
    assert staging_bytes_per_s_of(coherent_host_link=True) is None
    assert resolve_gpu("gb200").host_link_bytes_per_s is not None  # NVLink-C2C: the plan passes coherent
    assert resolve_gpu("h100-sxm").host_link_bytes_per_s is None


def _verl_split_card(fsdp_version: str):
    ro = {"placement": "split", "nodes": 1, "prompt_len": 256, "response_len": 1024, "prompts_per_step": 32,
          "num_generations": 8, "tensor_parallel": 1, "gpu_memory_utilization": 0.7}
    card = {"model": "Qwen/Qwen2.5-7B", "method": "grpo", "preset": "verl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2}, "rollout": ro,
            "parallel": {"strategy": "fsdp", "offload": "params_and_optimizer", "fsdp_version": fsdp_version}}
    return load_card_dict(apply_preset(card, "verl"))


def test_verl_export_staging_pageable_under_fsdp2_pinned_under_fsdp1():
    """verl's FSDP2 offload is ``model.cpu()`` (pageable), FSDP1's ``flat_param_to(cpu, non_blocking=True)``
    (pinned): the same fp32 shard (about 3.8 GB a rank) is staged at 10 GB/s under FSDP2, 25 GB/s under FSDP1."""
    def staging(card):
        return next(p for p in make_plan(card).time.phases if p.name == "weight_sync").terms["staging"]

    kw = dict(pcie_bytes_per_s=H100.pcie_bytes_per_s, host_memory_bytes_per_s=H100.host_memory_bytes_per_s,
              gpus_per_node=8)
    fsdp2, fsdp1 = staging(_verl_split_card("fsdp2")), staging(_verl_split_card("fsdp1"))
    assert fsdp2 * pageable_copy_bytes_per_s(**kw) == pytest.approx(fsdp1 * host_copy_bytes_per_s(**kw))
    assert fsdp2 * pageable_copy_bytes_per_s(**kw) / GB == pytest.approx(30.46 / 8, rel=0.01)


def test_nemo_rl_megatron_optimizer_states_pageable_buffers_pinned():
    """NeMo RL's Megatron worker: the DDP parameter buffers through Megatron-Core's pinned ``offload_to_cpu`` (the
    gradient buffers are freed there, not copied), the optimizer states with ``v.to("cpu")`` (pageable)."""
    spec = resolve_model("Qwen/Qwen2.5-7B")
    card = load_card_dict({
        "model": "Qwen/Qwen2.5-7B", "method": "grpo", "preset": "nemo-rl",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1}, "batch": {"micro_batch_size": 1},
        "parallel": {"strategy": "zero1"},
        "rollout": {"tensor_parallel": 1, "gpu_memory_utilization": 0.5, "prompts_per_step": 32, "num_generations": 4,
                    "prompt_len": 256, "response_len": 512, "sleep_level": 1, "trainer_offload": "params_and_optimizer"}})
    n = total_params(spec)
    kw = dict(pcie_bytes_per_s=H100.pcie_bytes_per_s, host_memory_bytes_per_s=H100.host_memory_bytes_per_s,
              gpus_per_node=8)
    bf16 = weight_bytes(spec, weights=Dtype.BF16, compute=ComputeDtype.BF16, trainable=TrainableSpec()).base
    pinned = bf16  # the bf16 parameter buffers
    pageable = NEMO_RL_MEGATRON_OPTIMIZER_BYTES * n / 8
    t = trainer_state_offload_phase(card, spec, H100, train_gpus=8)
    assert t.terms["to_host"] == pytest.approx(pinned / host_copy_bytes_per_s(**kw)
                                               + pageable / PAGEABLE_FIRST_TOUCH_BYTES_PER_S, rel=1e-3)
    assert t.terms["to_device"] == pytest.approx(pinned / host_copy_bytes_per_s(**kw)
                                                 + pageable / pageable_copy_bytes_per_s(**kw), rel=1e-3)


def test_first_touch_caps_the_copy_to_fresh_pageable_memory_behind_pcie_only():
    """``v.to("cpu")`` into a host tensor allocated anew: at most ``PAGEABLE_FIRST_TOUCH_BYTES_PER_S`` (PyTorch's
    A100 ``Memcpy DtoH (Device -> Pageable)``, pytorch/pytorch PR #138018) behind PCIe; a coherent host link keeps
    the rate it is given (no measurement)."""
    assert PAGEABLE_FIRST_TOUCH_BYTES_PER_S < PAGEABLE_STAGING_BYTES_PER_S
    assert first_touch_copy_bytes_per_s(pageable_bytes_per_s=10 * GB, coherent_host_link=False) == \
        PAGEABLE_FIRST_TOUCH_BYTES_PER_S
    assert first_touch_copy_bytes_per_s(pageable_bytes_per_s=1 * GB, coherent_host_link=False) == 1 * GB
    assert first_touch_copy_bytes_per_s(pageable_bytes_per_s=90 * GB, coherent_host_link=True) == 90 * GB
