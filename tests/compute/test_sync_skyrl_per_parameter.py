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


def test_colocated_per_parameter_is_the_loop_pr_161_timed() -> None:
    # one CUDA-IPC handle (2.5 ms) and one awaited request (2.8 s / 418 = 6.6986 ms) per tensor: 9.1986 ms; Qwen3-14B's
    # 443 tensors: 443 x 9.1986 ms = 4.075 s of host work against the 4.4 s PR #161 published for the whole loop
    colo = sync.framework_sync_mechanism("skyrl", Placement.COLOCATE, "per_parameter")
    assert colo.mechanism is sync.SyncMechanism.COLOCATED_CUDA_IPC and colo.bucket_bytes is None
    assert colo.s_per_tensor == pytest.approx(9.1986e-3, abs=1e-7)
    spec = from_catalog("Qwen/Qwen3-14B")
    t = sync.weight_sync_seconds(mechanism=colo.mechanism, weight_bytes=29.5e9, num_tensors=sync.hf_tensor_count(spec),
                                 train_shards=8, tp=2, rates=H100, engines=4, bucket_bytes=None,
                                 s_per_tensor=colo.s_per_tensor)
    assert t.per_tensor_s == pytest.approx(4.075, abs=0.001)
    assert t.total_s < 4.4
    # the default stays the 1 GiB CUDA-IPC buckets
    assert sync.framework_sync_mechanism("skyrl", Placement.COLOCATE).bucket_bytes == GIB


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
