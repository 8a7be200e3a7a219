"""Who joins the trainer -> engine sync group, as each framework's source sets it up, and what that does to a
broadcast that leaves the trainer's node: NeMo RL's non-colocated refit puts every policy worker and every vLLM
worker in one NCCL group (NVIDIA-NeMo/RL @9dbd9adc95a10f5946cceb36e1d5b31e2429e470 base_policy_worker.py /
vllm_backend.py ``init_collective``), as verl does (``_create_weight_sync_group``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import sync
from trainfit.compute.rates import default_rates
from trainfit.memory.weights import total_params

H100 = default_rates(resolve_gpu("h100-sxm"))
NDR_400G = 50e9


@pytest.mark.parametrize(("framework", "placement", "in_group"), [
    ("nemo-rl", "split", True),
    ("nemo-rl", "colocate", False),
    ("verl", "split", True),
    ("verl", "colocate", True),
    ("openrlhf", "split", False),
    ("trl", "split", False),
])
def test_trainer_ranks_in_group(framework, placement, in_group):
    assert sync.framework_sync_mechanism(framework, placement).trainer_ranks_in_group is in_group


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
