"""Offload: PCIe transfers and the CPU optimizer step (ZeRO-Offload / FSDP CPU offload).

Optimizer offload (Ren et al. 2021, "ZeRO-Offload", §4): gradients go down to host memory during
backward (overlapped with it as far as it lasts), the CPU runs Adam on the fp32 master
states, and the updated 16-bit parameters go back up before the next forward (exposed).

CPU Adam is bound by host memory bandwidth: it streams the fp32 parameter, gradient and two
moments in and the parameter, moments and a 16-bit copy out (``CPU_ADAM_BYTES_PER_PARAM``,
``rates.py``). Every rank of a node shares the node's host bandwidth.

Parameter offload also streams each rank's weight shard up for the forward, the backward and the
recompute; prefetch hides it behind the compute of the pass.

DeepSpeed ZeRO-1/2 with ``offload_optimizer`` (``deepspeed_zero12_offload_seconds``) does more than that, read in
deepspeedai/DeepSpeed ``deepspeed/runtime/zero/stage_1_and_2.py`` @1d7b90adc48d57c2283e8825f5c668a3730ff899
(``contiguous_gradients`` is forced on with CPU offload, l.236, so stage 1 and 2 share the path):

* At the accumulation boundary ``reduce_ipg_grads`` loops over the rank's partition one parameter tensor at a time
  (l.1489-1510 -> ``copy_grads_in_partition`` l.1415-1425): a norm in fp64 (``set_norm_for_param_grad_in_gpu``,
  l.1352), an inf/nan check whose Python truth test (``update_offload_overflow_tracker`` l.1261-1263 on
  ``_has_inf_or_nan`` l.2154-2159) waits for the GPU, and the gradient cast to fp32 and copied into the pinned host
  partition (``async_inplace_copy_grad_to_fp32_buffer_from_gpu`` l.1354-1369: 4 bytes per parameter over PCIe).
  Without ``overlap_comm`` (its default below stage 3) the copies run on the compute stream (l.1475-1483, "TODO:
  copy_grad_stream is disabled because of race with reduce. This hurts perf"); with it they run on the reduction
  stream, but that stream waits for the compute stream (``average_tensor`` l.1135) and each parameter's truth test waits for
  the copies before it, so the host launches nothing more of the backward until the loop ends: the copies are
  exposed either way.
* The step reads each parameter's norm back with one ``.item()`` per tensor
  (``complete_grad_norm_calculation_for_cpu_offload`` l.1386): a second round trip per tensor.
* Host passes besides CPU Adam (l.1995-2013): ``unscale_and_clip_grads`` multiplies the whole fp32 gradient
  partition on the CPU every step (l.2099-2114: read and write, 8 bytes per parameter), and the fp32 partition is
  converted to the 16-bit buffer on the CPU (l.2011-2012: its fp32 read, 4 bytes; the 2-byte write is the 16-bit
  copy already in ``CPU_ADAM_BYTES_PER_PARAM``) before the 16-bit copy goes up (l.2013). ``DeepSpeedCPUAdam.step``
  at that commit (``deepspeed/ops/adam/cpu_adam.py`` l.110-) takes no 16-bit output buffer.

ZeRO-3 offload is a different path (``stage3.py``: ``partition_grads`` copies on the reduce-and-partition stream,
the inf/nan flag accumulates on the device, l.2232-2243, read once per step) and keeps the general terms.

Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.compute.rates import CPU_ADAM_BYTES_PER_PARAM, DeviceRates


DS_GRAD_COPY_BYTES_PER_PARAM = 4.0
"""PCIe bytes per parameter of DeepSpeed ZeRO-1/2's gradient copy to the host: cast to fp32 on the GPU first
(``stage_1_and_2.py`` l.1365-1366 @1d7b90ad, ``src_tensor.float()`` unless fp16 master weights)."""
DS_HOST_EXTRA_BYTES_PER_PARAM = 12.0
"""Host-memory bytes per parameter of DeepSpeed ZeRO-1/2's step beyond CPU Adam's: the unscale/clip multiply of
the fp32 gradient partition (read + write, 8; ``unscale_and_clip_grads`` l.2099-2114 @1d7b90ad, applied every step)
and the fp32 read of the partition's conversion to 16 bits (4; l.2011-2012)."""
DS_BOUNDARY_HBM_BYTES_PER_PARAM = 52.0
"""GPU-memory bytes per bf16 parameter of the per-tensor work at the boundary (``stage_1_and_2.py`` @1d7b90ad):
the fp64 norm (``.double()`` 2 read + 8 written, ``norm`` 8 read: 18), ``_has_inf_or_nan`` (``.float()`` 2 + 4,
``isnan`` 4 + 1, ``isinf`` 4 + 1, ``logical_or`` 2 + 1, ``.float()`` 1 + 4, ``max`` 4: 28) and the copy's
``.float()`` (2 + 4: 6)."""
DS_BOUNDARY_KERNELS_PER_TENSOR = 8
"""Kernels per parameter tensor at the boundary: ``double``, ``norm``; ``float``, ``isnan``, ``isinf``,
``logical_or``, ``float``, ``max``; the copy's ``float`` (its device-to-host copy is timed as bytes)."""
DS_SYNCS_PER_TENSOR = 2
"""Host round trips per parameter tensor of the partition: the inf/nan truth test at the boundary (l.1262) and
the norm's ``.item()`` in the step (l.1386)."""


@dataclass(frozen=True, slots=True)
class OffloadTime:
    cpu_step_s: float
    transfer_s: float
    exposed_s: float


def host_copy_bytes_per_s(*, pcie_bytes_per_s: float, host_memory_bytes_per_s: float, gpus_per_node: int) -> float:
    """One GPU's host <-> device copy rate while every GPU of its node copies at once: its own link
    (``pcie_bytes_per_s``: PCIe or the host link) or its share of the host's memory bandwidth, whichever is lower."""
    return min(pcie_bytes_per_s, host_memory_bytes_per_s / gpus_per_node)


def cpu_adam_seconds(*, params_per_rank: float, ranks_per_node: int, rates: DeviceRates) -> float:
    """Host seconds of one Adam step over each rank's ``params_per_rank`` (all ranks of a node at once)."""
    return params_per_rank * ranks_per_node * CPU_ADAM_BYTES_PER_PARAM / rates.host_memory_bytes_per_s


def offload_seconds(
    *, params_per_rank: float, ranks_per_node: int, grad_bytes: float, weight_bytes: float,
    params_offloaded: bool, weight_shard_bytes: float, passes: int, backward_s: float, compute_s: float,
    rates: DeviceRates,
) -> OffloadTime:
    """Exposed seconds per optimizer step on one GPU."""
    cpu = cpu_adam_seconds(params_per_rank=params_per_rank, ranks_per_node=ranks_per_node, rates=rates)
    down = params_per_rank * grad_bytes / rates.pcie_bytes_per_s
    up = params_per_rank * weight_bytes / rates.pcie_bytes_per_s
    exposed = cpu + up + max(0.0, down - backward_s)
    transfer = down + up
    if params_offloaded:
        stream = passes * weight_shard_bytes / rates.pcie_bytes_per_s
        transfer += stream
        exposed += max(0.0, stream - compute_s)
    return OffloadTime(cpu, transfer, exposed)


def deepspeed_zero12_offload_seconds(
    *, params_per_rank: float, tensors_per_rank: float, ranks_per_node: int, weight_bytes: float,
    sync_round_trip_s: float, rates: DeviceRates,
) -> OffloadTime:
    """Exposed seconds per optimizer step on one GPU of DeepSpeed ZeRO-1/2 with ``offload_optimizer`` (module
    docstring): the boundary's per-tensor loop (norm and inf/nan kernels over ``DS_BOUNDARY_HBM_BYTES_PER_PARAM``, a
    host round trip per tensor, ``sync_round_trip_s`` each, a lower bound) and its fp32 gradient copy down, both
    exposed; CPU Adam plus the host's clip and conversion passes, all ranks of the node at once over the node's host
    bandwidth; the 16-bit weights back up. The copies of a node's ranks run at once (``host_copy_bytes_per_s``).
    ``tensors_per_rank``: parameter tensors in the rank's partition."""
    host_bytes = params_per_rank * ranks_per_node * (CPU_ADAM_BYTES_PER_PARAM + DS_HOST_EXTRA_BYTES_PER_PARAM)
    cpu = host_bytes / rates.host_memory_bytes_per_s
    copy_rate = host_copy_bytes_per_s(pcie_bytes_per_s=rates.pcie_bytes_per_s,
                                      host_memory_bytes_per_s=rates.host_memory_bytes_per_s,
                                      gpus_per_node=ranks_per_node)
    down = params_per_rank * DS_GRAD_COPY_BYTES_PER_PARAM / copy_rate
    up = params_per_rank * weight_bytes / copy_rate
    loop = (params_per_rank * DS_BOUNDARY_HBM_BYTES_PER_PARAM / rates.hbm_bytes_per_s
            + tensors_per_rank * (DS_BOUNDARY_KERNELS_PER_TENSOR * rates.device_s_per_kernel_min
                                  + DS_SYNCS_PER_TENSOR * sync_round_trip_s))
    return OffloadTime(cpu, down + up, cpu + down + up + loop)
