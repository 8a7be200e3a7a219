"""SkyRL's colocated weight sync before its packed CUDA-IPC buffer (``compute.sync.SKYRL_IPC_PER_TENSOR``): one handle
per tensor inside the 1 GB request batches, chosen by a ``software.skyrl-train`` pin before 0.3 (Megatron worker) or
0.4 (FSDP worker). Read at NovaSky-AI/SkyRL: skyrl_train-v0.2.0 (1ed499cc) megatron_worker.py l.383-440 and
fsdp_worker.py l.195-262 (``reduce_tensor`` per tensor); skyrl_train-v0.3.0 (b2a08a0f) megatron_worker.py packs
(``"packed": True``) while its fsdp_worker.py l.198-256 still sends ``"packed": False``."""

from __future__ import annotations

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
