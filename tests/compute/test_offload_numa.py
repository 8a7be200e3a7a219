"""A rank's CPU optimizer streams the NUMA node its pinned buffers lie on (compute/offload.py docstring,
``rank_host_memory_bytes_per_s``; card field ``hardware.host_numa_nodes``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.offload import (
    DS_HOST_EXTRA_BYTES_PER_PARAM,
    cpu_adam_seconds,
    deepspeed_zero12_offload_seconds,
    rank_host_memory_bytes_per_s,
)
from trainfit.compute.rates import CPU_ADAM_BYTES_PER_PARAM, default_rates
from trainfit.compute.training import SYNC_ROUND_TRIP_S

A100 = default_rates(resolve_gpu("a100-40gb"))
DGX_A100 = replace(A100, host_numa_nodes=8)  # two EPYC 7742 at four NUMA nodes a socket


def test_fewer_ranks_than_numa_nodes_each_stream_one_node():
    node = 200e9
    assert rank_host_memory_bytes_per_s(host_memory_bytes_per_s=node, ranks_per_node=2, host_numa_nodes=8) == node / 8
    # as many ranks as nodes or more: the node's bandwidth shared among the ranks, as before
    assert rank_host_memory_bytes_per_s(host_memory_bytes_per_s=node, ranks_per_node=8, host_numa_nodes=8) == node / 8
    assert rank_host_memory_bytes_per_s(host_memory_bytes_per_s=node, ranks_per_node=8, host_numa_nodes=2) == node / 8
    # one memory domain (the default): only the ranks divide it
    assert rank_host_memory_bytes_per_s(host_memory_bytes_per_s=node, ranks_per_node=2) == node / 2
    with pytest.raises(ValueError):
        rank_host_memory_bytes_per_s(host_memory_bytes_per_s=node, ranks_per_node=2, host_numa_nodes=0)


def test_default_rates_keep_one_memory_domain():
    assert A100.host_numa_nodes == 1
    assert cpu_adam_seconds(params_per_rank=1e9, ranks_per_node=2, rates=A100) == pytest.approx(
        2e9 * CPU_ADAM_BYTES_PER_PARAM / A100.host_memory_bytes_per_s)


def test_deepspeed_zero2_offload_on_two_of_eight_numa_nodes():
    # the DeepSpeed ZenFlow blog's ZeRO-2 offload: 2 ranks of a DGX A100, Qwen2.5-3B, 1.54e9 parameters a rank
    per_rank = 1.54e9
    kw = dict(params_per_rank=per_rank, tensors_per_rank=200, ranks_per_node=2, weight_bytes=2.0,
              sync_round_trip_s=SYNC_ROUND_TRIP_S)
    shared = deepspeed_zero12_offload_seconds(rates=A100, **kw)
    numa = deepspeed_zero12_offload_seconds(rates=DGX_A100, **kw)
    host_bytes = per_rank * (CPU_ADAM_BYTES_PER_PARAM + DS_HOST_EXTRA_BYTES_PER_PARAM)
    assert numa.cpu_step_s == pytest.approx(host_bytes / (A100.host_memory_bytes_per_s / 8))
    assert numa.cpu_step_s == pytest.approx(4 * shared.cpu_step_s)  # one node of eight, not half the host
    # only the host passes change: the copies and the boundary loop stay
    assert numa.transfer_s == shared.transfer_s
    assert numa.exposed_s - shared.exposed_s == pytest.approx(numa.cpu_step_s - shared.cpu_step_s)


def test_card_field_reaches_the_plan():
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    card = {"model": "Qwen/Qwen2.5-3B", "method": "sft", "scope": "full",
            "hardware": {"gpu": "a100-40gb", "gpus_per_node": 2, "nodes": 1},
            "parallel": {"strategy": "zero2", "offload": "optimizer"},
            "batch": {"micro_batch_size": 4, "seq_len": 512}}
    base = make_plan(load_card_dict(card)).step_seconds
    numa = make_plan(load_card_dict({**card, "hardware": {**card["hardware"], "host_numa_nodes": 8}})).step_seconds
    assert numa > base + 1.0  # 1.54e9 x 42 B at 25 GB/s instead of 100 GB/s: about 1.9 s more
    one = make_plan(load_card_dict({**card, "hardware": {**card["hardware"], "host_numa_nodes": 1}})).step_seconds
    assert one == pytest.approx(base)
