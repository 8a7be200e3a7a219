"""SkyRL's per-parameter weight sync (``rollout.weight_sync: per_parameter`` with the skyrl preset, split): one awaited
engine request per tensor, priced at ``compute.sync.S_PER_SKYRL_WEIGHT_REQUEST`` (SkyRL PR #161's batching
measurement)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import sync
from trainfit.compute.rates import default_rates
from trainfit.spec.enums import Placement

H100 = default_rates(resolve_gpu("h100-sxm"))
GIB = 2**30


def _batches_sent_past(tensor_bytes: tuple[float, ...], threshold_bytes: float) -> int:
    """SkyRL's batched IPC loop (fsdp_worker.py l.160-181 @d07f293e): a request once the batch exceeds the
    threshold, and one for the rest."""
    sent, current = 0, 0.0
    for b in tensor_bytes:
        current += b
        if current > threshold_bytes:
            sent, current = sent + 1, 0.0
    return sent + (1 if current else 0)


def test_request_cost_is_the_pr_161_difference_over_the_requests_batching_removed() -> None:
    spec = from_catalog("Qwen/Qwen3-14B")
    tensors = sync.hf_tensor_count(spec)
    batches = _batches_sent_past(sync.hf_tensor_bytes(spec), 1.0 * GIB)
    assert (tensors, batches) == (443, 25)
    assert sync.S_PER_SKYRL_WEIGHT_REQUEST == pytest.approx((4.4 - 1.6) / (tensors - batches))
    assert 6.5e-3 < sync.S_PER_SKYRL_WEIGHT_REQUEST < 7.0e-3


def test_per_parameter_selects_the_per_tensor_request_loop_and_the_default_keeps_packed_buckets() -> None:
    per = sync.framework_sync_mechanism("skyrl", Placement.SPLIT, "per_parameter")
    assert per.mechanism is sync.SyncMechanism.NCCL_BROADCAST and per.bucket_bytes is None
    assert per.s_per_tensor == sync.S_PER_SKYRL_WEIGHT_REQUEST
    assert per.gathers_trainer_dtype and not per.trainer_ranks_in_group and not per.broadcasts_whole_bucket
    assert "MarinSkyRL" in per.source and "d07f293e9899e8c7fca037afb8ca3ddd88cf069b" in per.source
    default = sync.framework_sync_mechanism("skyrl", Placement.SPLIT)
    assert default.bucket_bytes == GIB and default.s_per_tensor == sync.S_PER_TENSOR_BUCKETED
    assert per.sends_trainer_state_dict and not default.sends_trainer_state_dict
    # colocated SkyRL has no per-parameter variant here: the choice leaves its CUDA-IPC buckets
    assert sync.framework_sync_mechanism("skyrl", Placement.COLOCATE, "per_parameter").bucket_bytes == GIB


def test_each_tensor_pays_one_awaited_request_beside_its_broadcast() -> None:
    # Qwen3-235B-A22B as a transformers 5 trainer holds it: 1,037 tensors; 1,037 x 6.6986 ms = 6.946 s of requests
    spec = from_catalog("Qwen/Qwen3-235B-A22B")
    n = sync.trainer_tensor_count(spec, fused_experts=True)
    assert n == 1037
    kw = dict(mechanism=sync.SyncMechanism.NCCL_BROADCAST, weight_bytes=470e9, num_tensors=n, train_shards=64, tp=8,
              rates=H100, engines=4, inter_node=True, gpus_per_node=8)
    per = sync.weight_sync_seconds(**kw, bucket_bytes=None, s_per_tensor=sync.S_PER_SKYRL_WEIGHT_REQUEST)
    packed = sync.weight_sync_seconds(**kw, bucket_bytes=GIB, s_per_tensor=sync.S_PER_TENSOR_BUCKETED)
    assert per.per_tensor_s == pytest.approx(6.946, abs=0.001)
    assert per.gather_s == pytest.approx(packed.gather_s)
    assert per.total_s > packed.total_s
