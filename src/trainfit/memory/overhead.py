"""From allocated bytes to reserved bytes to what nvidia-smi shows.

Three figures are reported, as the tools that measure them define them:

allocated
    ``torch.cuda.max_memory_allocated``: the bytes of live tensors (what the phase model
    sums), rounded as the caching allocator rounds each request, plus the cuBLAS and cuBLASLt
    workspaces, which torch takes from the caching allocator once the first matmul runs.
reserved
    ``torch.cuda.max_memory_reserved``: segments the caching allocator holds. Requests are
    rounded up to 512 B; requests over 1 MiB are served from segments rounded up to 2 MiB
    (``kRoundLarge``), so every large live tensor wastes on average half a 2 MiB granule.
    Blocks freed by one phase's transients (the logits, the optimizer's temporaries) are
    cached, not returned; when the next phase asks for differently sized blocks the cache
    cannot always split them, which is fragmentation. PyTorch's allocator notes give no
    closed form for it; we carry it as a fraction, ``FRAGMENTATION_OF_TRANSIENTS``, of the
    largest transient bytes of the step, fitted on H200 measurements; where the planner can generate
    the step's allocation sequence (``trainfit.memory.alloc_sequence``: a plain step on one
    data-parallel rank) it replays it through the caching-allocator model instead. The cached blocks stay
    reserved for the whole run, so every phase of the repeated step shows the step's highest
    reserved figure (measured: forward, backward and optimizer step read the same).
device
    nvidia-smi's "memory used" for the process: reserved + the CUDA context (driver state and
    the loaded kernels of torch, cuBLAS, cuDNN, NCCL; lazily loaded since CUDA 11.7) + NCCL's
    communicator buffers, which are ``cudaMalloc``'d outside the caching allocator.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.units import MIB

LARGE_SEGMENT_BYTES = 2 * MIB
"""Caching allocator granule for requests over 1 MiB (c10/cuda/CUDACachingAllocator.cpp kRoundLarge)."""
FRAGMENTATION_OF_TRANSIENTS = 0.19
"""Share of the step's largest transient bytes held as cached blocks the peak cannot use.

Fitted, not derived: the median (0.194) of (reserved peak - allocated peak - rounding) / transient
over the 15 training cases of the fit set in ``benchmarks/gpu_calibration.md`` (H200, torch 2.11,
default allocator; per case from -0.05 to 1.24, the top being eager attention with checkpointing).
The held-out cases there were measured after this fit and never used for it.
``tests/memory/test_overhead_calibration.py`` recomputes the median from the committed raw files."""
CUDA_CONTEXT_BYTES = 701 * MIB
"""nvidia-smi's memory outside the caching allocator of a torch training process: the CUDA context
with lazily loaded modules plus the cuBLAS, SDPA and fused-AdamW kernels it loads. Measured in a
fresh process (``benchmarks/gpu_calibrate.py context``): 619 MiB after the first tensor, 685 after
the first bf16 matmul, 701 after SDPA forward/backward and fused AdamW, on an H200 with driver
580.159, CUDA 13.0 and torch 2.11. Other GPUs and CUDA versions differ by some tens of MiB."""
CUBLAS_WORKSPACE_SM90_BYTES = 32 * MIB
"""torch's default cuBLAS workspace on compute capability 9.0 only (``CUBLAS_WORKSPACE_CONFIG`` :4096:8; the source
below tests ``major == 9 && minor == 0``); cuBLASLt gets a workspace of the same size."""
CUBLAS_WORKSPACE_OTHER_BYTES = 4096 * 1024 * 2 + 16 * 1024 * 8
"""torch's default cuBLAS workspace on every compute capability but 9.0 (:4096:2:16:8): ``parseChosenWorkspaceSize``'s
``default_size = sm90 ? 4096 * 8 * 1024 : 4096 * 1024 * 2 + 16 * 1024 * 8`` (pytorch/pytorch
``aten/src/ATen/cuda/CublasHandlePool.cpp`` @26a39059ec580351411f180816c47e2ef5134ae1). At that commit the 32 MiB
branch is ``major == 9 && minor == 0`` only, so a Blackwell card (10.x, 12.x) and an Ampere / Ada card take this
default (``cublas_workspace_bytes``); not checked against other torch releases."""
NCCL_COMMUNICATOR_BYTES = 558 * MIB
"""nvidia-smi's growth when a process creates an NCCL communicator and runs its first all-reduce
(NCCL's kernels and internal allocations, outside the caching allocator): measured with one rank
on the H200 above (``benchmarks/gpu_calibrate.py context``)."""
NCCL_BUFFER_BYTES_PER_PEER_CHANNEL = 4 * MIB
"""NCCL_BUFFSIZE default (NCCL environment variable docs)."""
NCCL_CHANNELS = 2
"""Ring channels assumed per communicator for the buffer estimate (NCCL picks 2-32 by topology)."""


def cublas_workspace_bytes(*, compute_capability: str | None) -> float:
    """cuBLAS + cuBLASLt workspaces of the compute stream. torch allocates them through the caching
    allocator, so they count in ``memory_allocated``: measured 64 MiB on an H200 in every phase of
    every case of ``benchmarks/gpu_calibration.md`` (the trace, which runs no cuBLAS, lacks exactly
    that)."""
    parts = str(compute_capability).split(".") if compute_capability else ["0"]
    major, minor = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    sm90 = major == 9 and minor == 0  # CublasHandlePool.cpp @26a39059 (CUBLAS_WORKSPACE_OTHER_BYTES)
    return 2.0 * (CUBLAS_WORKSPACE_SM90_BYTES if sm90 else CUBLAS_WORKSPACE_OTHER_BYTES)


@dataclass(frozen=True, slots=True)
class OverheadBytes:
    rounding: float
    fragmentation: float
    cuda_context: float
    cublas_workspace: float
    nccl_buffers: float
    replayed: bool = False
    """rounding + fragmentation come from replaying the step's allocation sequence through the
    caching-allocator model (``trainfit.memory.alloc_sequence``), not from the fitted share."""
    stream_pools: float = 0.0
    """FSDP: blocks the all-gather and reduce-scatter streams' pools keep cached beyond allocated
    (``trainfit.memory.stream_pools``); in reserved beside rounding and fragmentation."""


def overhead_bytes(
    *, large_tensors: int, transient_bytes: float, world_size: int, compute_capability: str | None = None,
    after_first_matmul: bool = True,
) -> OverheadBytes:
    """Overheads on top of the allocated peak.

    ``large_tensors``: live tensors at the peak that are over 1 MiB (each wastes half a granule
    on average). ``transient_bytes``: bytes at the peak that are not persistent state.
    ``after_first_matmul``: False while loading (no cuBLAS workspace exists yet).
    """
    nccl = 0.0
    if world_size > 1:
        # the communicator itself, plus send + receive buffers for the two ring neighbours on each channel
        nccl = NCCL_COMMUNICATOR_BYTES + 2 * 2 * NCCL_CHANNELS * NCCL_BUFFER_BYTES_PER_PEER_CHANNEL
    return OverheadBytes(
        rounding=large_tensors * LARGE_SEGMENT_BYTES / 2,
        fragmentation=FRAGMENTATION_OF_TRANSIENTS * transient_bytes,
        cuda_context=CUDA_CONTEXT_BYTES,
        cublas_workspace=cublas_workspace_bytes(compute_capability=compute_capability) if after_first_matmul else 0.0,
        nccl_buffers=nccl,
    )
