"""SkyRL's colocated weight sync before its packed CUDA-IPC buffer (``compute.sync.SKYRL_IPC_PER_TENSOR``): one handle
per tensor inside the 1 GB request batches, chosen by a ``software.skyrl-train`` pin before 0.3 (Megatron worker) or
0.4 (FSDP worker). Read at NovaSky-AI/SkyRL: skyrl_train-v0.2.0 (1ed499cc) megatron_worker.py l.383-440 and
fsdp_worker.py l.195-262 (``reduce_tensor`` per tensor); skyrl_train-v0.3.0 (b2a08a0f) megatron_worker.py packs
(``"packed": True``) while its fsdp_worker.py l.198-256 still sends ``"packed": False``."""

from __future__ import annotations

from math import ceil

import pytest

from trainfit.compute import sync
from trainfit.errors import CardError
from trainfit.spec.enums import Placement

GIB = 2**30


def test_release_flag_selects_one_handle_per_tensor_in_the_buckets() -> None:
    packed = sync.framework_sync_mechanism("skyrl", Placement.COLOCATE)
    old = sync.framework_sync_mechanism("skyrl", Placement.COLOCATE, ipc_handle_per_tensor=True)
    assert packed.s_per_tensor == sync.S_PER_TENSOR_BUCKETED
    assert old.s_per_tensor == sync.S_PER_TENSOR_IPC and old.bucket_bytes == packed.bucket_bytes == GIB
    assert old.mechanism is packed.mechanism is sync.SyncMechanism.COLOCATED_CUDA_IPC
    assert "1ed499cce4df7ef21462969707b0476bc3c7e0c8" in old.source and "reduce_tensor" in old.reason


def test_release_flag_keeps_the_per_parameter_loop() -> None:
    # the per-parameter loop makes a handle and an awaited request per tensor whatever the release
    per = sync.framework_sync_mechanism("skyrl", Placement.COLOCATE, "per_parameter")
    old = sync.framework_sync_mechanism("skyrl", Placement.COLOCATE, "per_parameter", ipc_handle_per_tensor=True)
    assert old.s_per_tensor == per.s_per_tensor == sync.S_PER_SKYRL_WEIGHT_REQUEST + sync.S_PER_TENSOR_IPC
    assert old.bucket_bytes is None and old.source == per.source


@pytest.mark.parametrize("framework, placement", [("verl", Placement.COLOCATE), ("skyrl", Placement.SPLIT)])
def test_release_flag_is_refused_off_skyrls_colocated_path(framework: str, placement: Placement) -> None:
    with pytest.raises(CardError, match="allowed with framework skyrl and placement colocate"):
        sync.framework_sync_mechanism(framework, placement, ipc_handle_per_tensor=True)


def test_packed_since_releases_are_the_tags_read() -> None:
    # skyrl_train-v0.3.0 holds #487 (Megatron packs); the FSDP worker packs from skyrl_train-v0.4.0
    assert sync.SKYRL_MEGATRON_PACKED_IPC_SINCE == (0, 3)
    assert sync.SKYRL_FSDP_PACKED_IPC_SINCE == (0, 4)


def test_per_tensor_handle_path_meets_pr_161s_batched_figure() -> None:
    """SkyRL pull request #161 (2025-08-19, merged as d07f293e9899e8c7fca037afb8ca3ddd88cf069b): the colocated FSDP sync
    of a 14B model on one 8 x H100 node, vLLM TP 2 (four engines), took 1.6 s once the requests were batched by 1 GB,
    with a CUDA-IPC handle, all_gather_object, barrier and device sync still per tensor: the loop of
    ``SKYRL_IPC_PER_TENSOR``. ``S_PER_SKYRL_WEIGHT_REQUEST`` uses only the difference from the unbatched 4.4 s, so the
    1.6 s is a check of ``S_PER_TENSOR_IPC`` on this path: 443 x 2.5 ms + 28 buckets of 1 GiB x 3 ms = 1.19 s of host
    work, 1.30 s with the bf16 gather (1.37 s with the fp32 one), -19 / -14 %."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.catalog.models import from_catalog
    from trainfit.compute.rates import default_rates

    old = sync.framework_sync_mechanism("skyrl", Placement.COLOCATE, ipc_handle_per_tensor=True)
    spec = from_catalog("Qwen/Qwen3-14B")
    t = sync.weight_sync_seconds(mechanism=old.mechanism, weight_bytes=29.5e9, num_tensors=sync.hf_tensor_count(spec),
                                 train_shards=8, tp=2, rates=default_rates(resolve_gpu("h100-sxm")), engines=4,
                                 bucket_bytes=old.bucket_bytes, s_per_tensor=old.s_per_tensor)
    assert t.per_tensor_s == pytest.approx(443 * 2.5e-3 + ceil(29.5e9 / GIB) * sync.S_PER_BUCKET, abs=1e-6)
    assert 0.75 * 1.6 < t.total_s < 1.25 * 1.6
