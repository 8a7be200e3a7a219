"""DeepSpeed ZeRO-3's gradient norm, one partition at a time (``training.zero3_grad_norm_kernels``, cited there): two
bare-loop kernels per trained tensor in the optimizer step, whatever the world size; none without DeepSpeed's
gradient layout (``Parallel.zero3_grad_groups``)."""

from __future__ import annotations

from math import ceil

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import rates as rt
from trainfit.compute.optimizer_time import (CLIP_KERNELS, CLIP_SCALE_KERNELS, MULTI_TENSOR_CHUNK,
                                             optimizer_seconds)
from trainfit.compute.training import (ZERO3_NORM_KERNELS_PER_TENSOR, Parallel, train_step_time,
                                       zero3_grad_norm_kernels)
from trainfit.plan.time import zero3_grad_groups

H100 = rt.default_rates(resolve_gpu("h100-sxm"))
SMALL = from_catalog("Qwen/Qwen2.5-0.5B")
GROUPS = zero3_grad_groups(SMALL)
TENSORS = sum(len(g) for g in GROUPS)


def _opt(t):
    return next(p for p in t.phases if p.name == "optimizer_step")


def test_two_kernels_per_tensor_and_the_join():
    assert zero3_grad_norm_kernels(tensors=100) == 2 * 100 + 3
    assert zero3_grad_norm_kernels(tensors=0) == 0.0
    with pytest.raises(ValueError, match="zero3_grad_norm_kernels"):
        zero3_grad_norm_kernels(tensors=-1)


@pytest.mark.parametrize("ranks", [1, 8])
def test_the_norm_loop_reaches_the_optimizer_step(ranks):
    kw = dict(rates=H100, micro_batch_size=1, seq_len=256, micro_steps=1, trained_params=5e8, trained_tensors=290,
              gathered_weight_bytes=1e9, gradient_checkpointing=True)
    with_groups = train_step_time(SMALL, parallel=Parallel(strategy="zero3", ranks=ranks, gpus_per_node=8,
                                                           zero3_grad_groups=GROUPS, zero3_bucket_numel=10**9), **kw)
    without = train_step_time(SMALL, parallel=Parallel(strategy="zero3", ranks=ranks, gpus_per_node=8), **kw)
    added = _opt(with_groups).terms["kernels"] - _opt(without).terms["kernels"]
    # the clip's own norm is not launched a second time: only its scale stays (CLIP_SCALE_KERNELS a chunk)
    chunks = ceil(290 / MULTI_TENSOR_CHUNK)
    assert added == ZERO3_NORM_KERNELS_PER_TENSOR * TENSORS + 3 - (CLIP_KERNELS - CLIP_SCALE_KERNELS) * chunks
    assert _opt(with_groups).seconds > _opt(without).seconds


def test_norm_kernels_add_host_and_device_time_to_the_step():
    from trainfit.compute.optimizer_time import OptimizerTime
    from trainfit.compute.training import with_zero3_grad_norm

    memory_bound = OptimizerTime(0.010, 0.010, 0.001, 1e9, 25)
    t = with_zero3_grad_norm(memory_bound, rates=H100, kernels=1000)
    assert t.host_s == pytest.approx(0.001 + 1000 * H100.host_s_per_backward_kernel)
    assert t.device_s == pytest.approx(0.010 + 1000 * H100.device_s_per_kernel_min)
    assert t.seconds == max(t.host_s, t.device_s) and t.kernels == 1025


def test_the_per_expert_moe_pays_tens_of_thousands_of_launches():
    moe = from_catalog("Qwen/Qwen3-30B-A3B-Base")
    tensors = sum(len(g) for g in zero3_grad_groups(moe, expert_loop=True))
    assert tensors == 18_867  # 48 layers x 128 experts x 3 linears = 18,432 of them
    assert zero3_grad_norm_kernels(tensors=tensors) * H100.host_s_per_backward_kernel > 0.2


def test_the_zero3_norm_is_counted_once_the_clip_keeping_its_scale():
    kw = dict(params=1e9, tensors=500, optimizer="adamw", impl="fused", rates=H100, clip=True)
    full, scale_only = optimizer_seconds(**kw), optimizer_seconds(**kw, clip_norm=False)
    chunks = ceil(500 / MULTI_TENSOR_CHUNK)
    assert full.kernels - scale_only.kernels == (CLIP_KERNELS - CLIP_SCALE_KERNELS) * chunks
    assert scale_only.bytes_moved == full.bytes_moved  # the norm's read of the gradients stays, once
    assert optimizer_seconds(**{**kw, "clip": False}, clip_norm=False).kernels == chunks  # no clip: nothing to drop
