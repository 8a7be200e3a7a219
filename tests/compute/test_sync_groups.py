"""Who joins the trainer -> engine sync group, as each framework's source sets it up, and what that does to a
broadcast that leaves the trainer's node: NeMo RL's non-colocated refit puts every policy worker and every vLLM
worker in one NCCL group (NVIDIA-NeMo/RL @9dbd9adc95a10f5946cceb36e1d5b31e2429e470 base_policy_worker.py /
vllm_backend.py ``init_collective``), as verl's fully-async paths do (``create_weight_sync_group``,
``init_checkpoint_engine``); verl's checkpoint engine (nccl backend, the default split path) builds its group from
actor rank 0 and the rollout workers alone (``build_topology`` @b178a3cd56f58b2d502255daba591e92833930a7)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import sync
from trainfit.compute.rates import default_rates
from trainfit.memory.weights import total_params

H100 = default_rates(resolve_gpu("h100-sxm"))
NDR_400G = 50e9


@pytest.mark.parametrize(("framework", "placement", "choice", "in_group"), [
    ("nemo-rl", "split", None, True),
    ("nemo-rl", "colocate", None, False),
    ("verl", "split", None, False),  # checkpoint engine, nccl: rank [0] + [-1] * (actors - 1)
    ("verl", "split", "per_parameter", True),  # fully-async base_detach_sync: every actor rank + offset
    ("verl", "split", "bucketed", True),  # fully-async checkpoint_engine.py: actor_ranks = range(actor_num)
    ("verl", "colocate", None, True),
    ("openrlhf", "split", None, False),
    ("trl", "split", None, False),
])
def test_trainer_ranks_in_group(framework, placement, choice, in_group):
    assert sync.framework_sync_mechanism(framework, placement, choice).trainer_ranks_in_group is in_group


def test_verl_checkpoint_engine_broadcast_leaves_through_one_nic():
    """Qwen2.5-72B (145 GB in bf16) from verl's checkpoint engine to four TP8 SGLang servers on other nodes: rank 0
    alone sends, so the bucketed broadcast is bounded by one 400 Gb/s NIC (145 GB / (50 GB/s x 0.8) = 3.6 s), where
    the fully-async bucketed path, whose group holds the whole trainer node, crosses on its 8 NICs."""
    spec = from_catalog("Qwen/Qwen2.5-72B")
    w, n = 2.0 * total_params(spec), sync.hf_tensor_count(spec)
    default = sync.framework_sync_mechanism("verl", "split")
    bucketed = sync.framework_sync_mechanism("verl", "split", "bucketed")

    def t(fs):
        return sync.weight_sync_seconds(mechanism=fs.mechanism, weight_bytes=w, num_tensors=n, train_shards=1, tp=8,
                                        engines=4, rates=H100, inter_node=True, gpus_per_node=8,
                                        nic_bytes_per_s=NDR_400G, bucket_bytes=fs.bucket_bytes,
                                        s_per_tensor=fs.s_per_tensor,
                                        sender_node_ranks=8 if fs.trainer_ranks_in_group else 1)

    one_nic = w / (NDR_400G * 0.8)
    assert one_nic < t(default).transfer_s < one_nic + 1.0  # + bucket hand-offs and each rank's HBM load
    assert t(bucketed).transfer_s < one_nic / 4


def test_nemo_rl_split_refit_leaves_through_every_nic_of_the_node():
    """DeepSeek-V3 (1.34 TB in bf16) from a 32-node trainer to 32 nodes of TP32 engines: the ring leaves the
    sending node through its 8 NICs, so the byte term is an eighth of the one-NIC one; the per-tensor host cost
    (~46k tensors) is unchanged."""
    spec = from_catalog("deepseek-ai/DeepSeek-V3")
    w, n = 2.0 * total_params(spec), sync.hf_tensor_count(spec)
    fs = sync.framework_sync_mechanism("nemo-rl", "split")

    def t(ranks: int):
        return sync.weight_sync_seconds(mechanism=fs.mechanism, weight_bytes=w, num_tensors=n, train_shards=1, tp=32,
                                        engines=8, rates=H100, inter_node=True, gpus_per_node=8,
                                        nic_bytes_per_s=NDR_400G, bucket_bytes=fs.bucket_bytes,
                                        s_per_tensor=fs.s_per_tensor, sender_node_ranks=ranks)

    one, eight = t(1), t(8)
    assert eight.per_tensor_s == pytest.approx(one.per_tensor_s)
    load = 2 * w / 32 / H100.hbm_bytes_per_s  # each engine rank copies its shard in, either way
    assert (eight.transfer_s - load) < (one.transfer_s - load) / 4
    assert eight.total_s < one.total_s
