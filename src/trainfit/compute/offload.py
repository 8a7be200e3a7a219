"""Offload: PCIe transfers and the CPU optimizer step (ZeRO-Offload / FSDP CPU offload).

Optimizer offload (Ren et al. 2021, "ZeRO-Offload", §4): gradients go down to host memory during
backward (overlapped with it as far as it lasts), the CPU runs Adam on the fp32 master
states, and the updated 16-bit parameters go back up before the next forward (exposed).

CPU Adam is bound by host memory bandwidth: it streams the fp32 parameter, gradient and two
moments in and the parameter, moments and a 16-bit copy out (``CPU_ADAM_BYTES_PER_PARAM``,
``rates.py``). Every rank of a node shares the node's host bandwidth.

Parameter offload also streams each rank's weight shard up for the forward, the backward and the
recompute; prefetch hides it behind the compute of the pass.

Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.compute.rates import CPU_ADAM_BYTES_PER_PARAM, DeviceRates


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
