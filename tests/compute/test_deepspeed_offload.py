"""DeepSpeed ZeRO-1/2 optimizer offload: the terms read in stage_1_and_2.py (compute/offload.py docstring)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute.offload import (
    DS_BOUNDARY_HBM_BYTES_PER_PARAM,
    DS_GRAD_COPY_BYTES_PER_PARAM,
    DS_HOST_EXTRA_BYTES_PER_PARAM,
    deepspeed_zero12_offload_seconds,
    offload_seconds,
)
from trainfit.compute.rates import CPU_ADAM_BYTES_PER_PARAM, default_rates
from trainfit.compute.training import SYNC_ROUND_TRIP_S, Parallel, train_step_time

A100 = default_rates(resolve_gpu("a100-40gb"))
QWEN8 = from_catalog("Qwen/Qwen3-8B")
PARAMS, TENSORS = 8.19e9, 399


def _offload(strategy: str, offload: str = "optimizer") -> float:
    t = train_step_time(QWEN8, rates=A100, micro_batch_size=1, seq_len=2048, trained_params=PARAMS,
                        trained_tensors=TENSORS, gathered_weight_bytes=2 * PARAMS,
                        parallel=Parallel(strategy=strategy, ranks=2, gpus_per_node=2, offload=offload))
    return next(p for p in t.phases if p.name == "offload").seconds


def test_zero12_offload_counts_each_term_of_the_deepspeed_path():
    per_rank = PARAMS / 2
    t = deepspeed_zero12_offload_seconds(params_per_rank=per_rank, tensors_per_rank=TENSORS / 2, ranks_per_node=2,
                                         weight_bytes=2.0, sync_round_trip_s=SYNC_ROUND_TRIP_S, rates=A100)
    # CPU Adam (30 B) + unscale/clip multiply (8 B) + the conversion's fp32 read (4 B), both ranks on one host
    assert DS_HOST_EXTRA_BYTES_PER_PARAM == 12.0
    assert t.cpu_step_s == pytest.approx(PARAMS * (CPU_ADAM_BYTES_PER_PARAM + 12.0) / A100.host_memory_bytes_per_s)
    # the gradient goes down in fp32 (4 B) and the 16-bit weights come up, neither hidden
    copies = per_rank * (DS_GRAD_COPY_BYTES_PER_PARAM + 2.0) / A100.pcie_bytes_per_s
    assert t.transfer_s == pytest.approx(copies)
    loop = per_rank * DS_BOUNDARY_HBM_BYTES_PER_PARAM / A100.hbm_bytes_per_s
    assert t.exposed_s > t.cpu_step_s + copies + loop


def test_zero1_and_zero2_offload_take_the_deepspeed_path():
    z1, z2 = _offload("zero1"), _offload("zero2")
    assert z1 == pytest.approx(z2)
    generic = offload_seconds(params_per_rank=PARAMS / 2, ranks_per_node=2, grad_bytes=2.0, weight_bytes=2.0,
                              params_offloaded=False, weight_shard_bytes=0.0, passes=2, backward_s=10.0,
                              compute_s=10.0, rates=A100)
    # more than the general term even with its gradient copy fully hidden
    assert z2 > generic.exposed_s * 1.3


def test_zero3_offload_keeps_the_general_terms():
    # stage3.py copies on its own stream and checks inf/nan on the device: not the ZeRO-1/2 loop
    z3 = _offload("zero3")
    per_rank = PARAMS / 2
    cpu = PARAMS * CPU_ADAM_BYTES_PER_PARAM / A100.host_memory_bytes_per_s
    assert z3 < cpu + per_rank * 6.0 / A100.pcie_bytes_per_s
    assert z3 < _offload("zero2")


def test_the_host_step_is_cpu_adam_with_deepspeeds_extra_passes():
    """DeepSpeed's host step is the CPU-Adam step with the clip and conversion passes' bytes added. By hand, A100
    host (200 GB/s, one NUMA node) shared by 2 ranks: 100 GB/s a rank; 8.19e9 / 2 = 4.095e9 parameters a rank:
    plain step 4.095e9 x 30 B / 100e9 = 1.2285 s; DeepSpeed's 4.095e9 x (30 + 12) B / 100e9 = 1.7199 s."""
    from trainfit.compute.offload import cpu_adam_seconds

    ds = deepspeed_zero12_offload_seconds(params_per_rank=PARAMS / 2, tensors_per_rank=TENSORS / 2, ranks_per_node=2,
                                          weight_bytes=2.0, sync_round_trip_s=SYNC_ROUND_TRIP_S, rates=A100)
    assert A100.host_memory_bytes_per_s == 200e9 and A100.host_numa_nodes == 1  # the inputs of the hand figures
    assert cpu_adam_seconds(params_per_rank=PARAMS / 2, ranks_per_node=2, rates=A100) == pytest.approx(1.2285)
    assert ds.cpu_step_s == pytest.approx(1.7199)