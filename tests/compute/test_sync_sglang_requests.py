"""verl's weight-update requests into SGLang (``compute.sync.sglang_tensor_request_seconds``): per bucket, TP rank 0
serializes the tensors' CUDA-IPC handles once per TP rank, each copy holding every rank's handle, so the request bytes
grow with tp² per tensor; verl base64/JSON-encodes them and SGLang parses, forwards and broadcasts them to its ranks."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute import sync
from trainfit.compute.rates import default_rates
from trainfit.errors import CardError

H100 = default_rates(resolve_gpu("h100-sxm"))


def test_request_seconds_from_the_measured_bytes():
    # one tensor at TP 16: 16 copies of 65 + 16 x 404 bytes, 9 ns a byte over all copies, 3.1 ns over one
    copy = sync.SGLANG_TENSOR_ENTRY_BYTES + 16 * sync.SGLANG_IPC_HANDLE_BYTES
    assert copy == 6529
    want = copy * (16 * sync.S_PER_SGLANG_REQUEST_BYTE + sync.S_PER_SGLANG_OWN_COPY_BYTE)
    assert sync.sglang_tensor_request_seconds(num_tensors=1, tp=16) == pytest.approx(want, rel=1e-12)
    assert want == pytest.approx(0.96e-3, rel=0.01)


def test_request_cost_grows_with_tp_squared():
    t = {tp: sync.sglang_tensor_request_seconds(num_tensors=1000, tp=tp) for tp in (1, 2, 4, 8, 16)}
    for tp in (4, 8, 16):
        # the handles dominate: doubling tp about quadruples the cost
        assert 3.5 < t[tp] / t[tp // 2] < 4.1
    # at TP 2 it is small beside the per-tensor IPC cost it adds to
    assert t[2] / 1000 < 0.01 * sync.S_PER_TENSOR_IPC
    assert sync.sglang_tensor_request_seconds(num_tensors=0, tp=8) == 0.0


def test_request_seconds_refuses_nonsense():
    with pytest.raises(CardError):
        sync.sglang_tensor_request_seconds(num_tensors=-1, tp=2)
    with pytest.raises(CardError):
        sync.sglang_tensor_request_seconds(num_tensors=10, tp=0)
    with pytest.raises(CardError):
        sync.weight_sync_seconds(mechanism="nccl_broadcast", weight_bytes=1e9, num_tensors=10, train_shards=1, tp=1,
                                 rates=H100, request_s=-1.0)


def test_only_verl_into_sglang_posts_the_requests():
    assert sync.framework_sync_mechanism("verl", "split", engine="sglang").sglang_tensor_requests
    assert sync.framework_sync_mechanism("verl", "colocate", engine="sglang").sglang_tensor_requests
    assert not sync.framework_sync_mechanism("verl", "split", engine="vllm").sglang_tensor_requests
    # the fully-async trainer's own paths load tensor by tensor, no such request
    assert not sync.framework_sync_mechanism("verl", "split", "per_parameter", engine="sglang").sglang_tensor_requests
    assert not sync.framework_sync_mechanism("miles", "split", engine="sglang").sglang_tensor_requests


def test_request_seconds_add_to_the_host_cost():
    kw = {"mechanism": "nccl_broadcast", "weight_bytes": 100e9, "num_tensors": 5000, "train_shards": 8, "tp": 16,
          "rates": H100, "gpus_per_node": 8, "inter_node": True}
    base = sync.weight_sync_seconds(**kw)
    req = sync.sglang_tensor_request_seconds(num_tensors=5000, tp=16)
    with_req = sync.weight_sync_seconds(**kw, request_s=req)
    assert with_req.per_tensor_s == pytest.approx(base.per_tensor_s + req, rel=1e-12)
    assert with_req.total_s == pytest.approx(base.total_s + req, rel=1e-12)
    assert any("weight-update requests" in a for a in with_req.assumptions)
    assert not any("weight-update requests" in a for a in base.assumptions)
