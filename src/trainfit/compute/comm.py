"""Collective and host-transfer times: bytes over a link, ring algorithms, no overlap unless asked.

Ring collectives over ``n`` ranks (Patarasuk & Yuan 2009; NCCL's nccl-tests ``PERFORMANCE.md``
"bus bandwidth"): each rank sends and receives ``(n−1)/n·S`` bytes for an all-gather or a
reduce-scatter of a buffer of ``S`` bytes, and ``2·(n−1)/n·S`` for an all-reduce. The time is that
volume over the slowest link in the ring, per direction.

Links (``GpuSpec``): NVLink is NVIDIA's total bidirectional figure, so one direction is half of it;
PCIe is per direction for x16 already. A ring that crosses nodes runs at the inter-node link
(``DEFAULT_INTER_NODE_BYTES_PER_S``). These are peak rates: NCCL's measured bus bandwidth is lower
(typically 70–90 % on NVLink), and GeForce cards without peer-to-peer (the RTX 4090) route
through host memory, well below the PCIe peak. ``efficiency`` scales the link if you know yours.

Pure Python: no torch import.
"""

from __future__ import annotations

from trainfit.catalog.gpus import GpuSpec
from trainfit.errors import CardError

DEFAULT_INTER_NODE_BYTES_PER_S = 25e9
"""One 200 Gb/s InfiniBand / RoCE NIC per GPU = 25·10⁹ B/s per direction."""


def intra_node_bytes_per_s(gpu: GpuSpec) -> float:
    """Per-direction GPU-to-GPU bandwidth inside one node: NVLink/2 when the card has it, else PCIe."""
    if gpu.nvlink and gpu.nvlink_bytes_per_s:
        return gpu.nvlink_bytes_per_s / 2
    if gpu.pcie_bytes_per_s:
        return gpu.pcie_bytes_per_s
    raise CardError(f"gpu '{gpu.id}': the catalog has no NVLink or PCIe bandwidth; time cannot be estimated")


def link_bytes_per_s(
    gpu: GpuSpec,
    *,
    inter_node: bool = False,
    inter_node_bytes_per_s: float = DEFAULT_INTER_NODE_BYTES_PER_S,
    efficiency: float = 1.0,
) -> float:
    """The bandwidth a ring collective runs at: the slowest hop (inter-node when the ring crosses nodes)."""
    bw = intra_node_bytes_per_s(gpu)
    if inter_node:
        bw = min(bw, inter_node_bytes_per_s)
    return bw * efficiency


def pcie_bytes_per_s(gpu: GpuSpec) -> float:
    """Host <-> device bandwidth per direction (x16)."""
    if not gpu.pcie_bytes_per_s:
        raise CardError(f"gpu '{gpu.id}': the catalog has no PCIe bandwidth; offload time cannot be estimated")
    return gpu.pcie_bytes_per_s


def all_gather_seconds(*, total_bytes: float, ranks: int, link_bytes_per_s: float) -> float:
    """Ring all-gather of a ``total_bytes`` buffer (each rank holds 1/ranks): ``(n−1)/n·S / bw``."""
    if ranks <= 1:
        return 0.0
    return (ranks - 1) / ranks * total_bytes / link_bytes_per_s


def reduce_scatter_seconds(*, total_bytes: float, ranks: int, link_bytes_per_s: float) -> float:
    """Ring reduce-scatter: the same volume as an all-gather."""
    return all_gather_seconds(total_bytes=total_bytes, ranks=ranks, link_bytes_per_s=link_bytes_per_s)


def all_reduce_seconds(*, total_bytes: float, ranks: int, link_bytes_per_s: float) -> float:
    """Ring all-reduce = reduce-scatter + all-gather: ``2·(n−1)/n·S / bw``."""
    return 2 * all_gather_seconds(total_bytes=total_bytes, ranks=ranks, link_bytes_per_s=link_bytes_per_s)


def transfer_seconds(*, total_bytes: float, link_bytes_per_s: float) -> float:
    """Point-to-point copy (weight sync trainer -> rollout engine, host <-> device)."""
    return total_bytes / link_bytes_per_s


def overlapped_seconds(*, compute_s: float, exposed_s: float, overlap: float = 0.0) -> float:
    """``compute + exposed − overlap·min(compute, exposed)``: ``overlap`` is the fraction of the shorter
    of the two that hides under the other (0 = serial, the default; 1 = perfect overlap)."""
    if not 0.0 <= overlap <= 1.0:
        raise CardError(f"overlap: must be within [0, 1], got {overlap}")
    return compute_s + exposed_s - overlap * min(compute_s, exposed_s)
