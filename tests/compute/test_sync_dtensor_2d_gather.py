"""``full_tensor()`` of an FSDP2 x TP parameter gathers the inner (TP) mesh dimension first and then the outer (FSDP)
one over the whole tensor (``compute.sync.dtensor_full_tensor_gather_seconds``: torch 2.7.0's
``_gen_transform_infos_non_cached`` walks a sharded source's mesh dimensions in reverse, pytorch/pytorch
torch/distributed/tensor/_redistribute.py l.92-127 @134179474539648ba7dee1317959529fbd0e7f89; FSDP2 puts its
dimension outer, torch/distributed/fsdp/_fully_shard/_fsdp_param.py l.285-329)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute import collectives, sync
from trainfit.compute.rates import default_rates
from trainfit.errors import CardError

H100 = default_rates(resolve_gpu("h100-sxm"))
GB = 1e9
NIC = 50 * GB
KW = dict(gather_bytes=282 * GB, num_tensors=723, gpus_per_node=8, rates=H100, nic_bytes_per_s=NIC)


def test_tp_filling_the_node_leaves_one_nic_per_rank_for_the_whole_tensor():
    t = sync.dtensor_full_tensor_gather_seconds(outer_shards=8, inner_shards=8, **KW)
    # the FSDP stage alone: each rank receives 7/8 of every full tensor through its own NIC
    one_nic = collectives.ring_bus_bytes_per_s(rates=H100, crosses_nodes=True, nic_bytes_per_s=NIC, local_ranks=1)
    assert t > 7 / 8 * 282 * GB / one_nic
    # a flat ring over all 64 ranks crosses at the node's eight NICs together: far less
    flat = sync._gather_seconds(weight_bytes=282 * GB, num_tensors=723, shards=64, rates=H100, crosses_nodes=True,
                                nic_bytes_per_s=NIC, s_per_tensor=None, gpus_per_node=8)
    assert t > 3 * flat


def test_the_inner_stage_gathers_the_fsdp_shard_inside_the_node():
    # one node: both stages on NVLink; the TP stage moves 1/outer of the bytes
    both = sync.dtensor_full_tensor_gather_seconds(outer_shards=2, inner_shards=4, **KW)
    outer_only = sync.dtensor_full_tensor_gather_seconds(outer_shards=2, inner_shards=1, **KW)
    inner_only = sync.dtensor_full_tensor_gather_seconds(outer_shards=1, inner_shards=4, **KW)
    assert both > outer_only > 0
    assert inner_only > 0
    assert both == pytest.approx(outer_only + sync.dtensor_full_tensor_gather_seconds(
        outer_shards=1, inner_shards=4, **{**KW, "gather_bytes": KW["gather_bytes"] / 2}))


def test_weight_sync_uses_it_for_inner_shards_and_keeps_the_flat_ring_otherwise():
    base = dict(mechanism="colocated_cuda_ipc", weight_bytes=141 * GB, gather_bytes=282 * GB, num_tensors=723,
                train_shards=64, tp=4, rates=H100, engines=16, inter_node=True, gpus_per_node=8,
                nic_bytes_per_s=NIC)
    flat = sync.weight_sync_seconds(**base)
    nested = sync.weight_sync_seconds(**base, inner_shards=8)
    assert nested.gather_s == pytest.approx(sync.dtensor_full_tensor_gather_seconds(outer_shards=8, inner_shards=8,
                                                                                   **KW))
    assert nested.gather_s > flat.gather_s
    assert (nested.transfer_s, nested.per_tensor_s) == (flat.transfer_s, flat.per_tensor_s)
    with pytest.raises(CardError):
        sync.weight_sync_seconds(**base, inner_shards=3)


def test_rejects_bad_arguments():
    with pytest.raises(CardError):
        sync.dtensor_full_tensor_gather_seconds(outer_shards=0, inner_shards=8, **KW)


def _plan_gather(torch_pin: str | None, *, tp: int = 8) -> float:
    from trainfit.plan import make_plan
    from trainfit.spec.card import RunCard

    card = {
        "model": {"id": "meta-llama/Llama-3.1-70B"}, "method": "grpo", "preset": "nemo-rl",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 8},
        "parallel": {"strategy": "fsdp", "fsdp_version": "fsdp2", "tensor_parallel": tp, "sequence_parallel": True},
        "precision": {"weights": "fp32", "compute": "bf16"},
        "batch": {"micro_batch_size": 1, "seq_len": 4096},
        "rollout": {"placement": "colocate", "tensor_parallel": 4, "prompt_len": 512, "response_len": 1024},
    }
    if torch_pin:
        card["software"] = {"torch": torch_pin}
    plan = make_plan(RunCard.model_validate(card))
    return {t.name: t for t in plan.time.phases}["weight_sync"].terms["gather"]


def test_plan_takes_the_inner_first_gather_before_torch_210_only():
    unpinned, t27, t210 = _plan_gather(None), _plan_gather("2.7.0"), _plan_gather("2.10.0")
    assert unpinned == pytest.approx(t27)
    # torch 2.10 plans the column-parallel (_StridedShard) parameters by its graph search: not read, the flat ring
    assert t210 < t27 / 3
