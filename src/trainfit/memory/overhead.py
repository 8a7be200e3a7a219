"""From allocated bytes to reserved bytes to what nvidia-smi shows.

Three figures are reported, as the tools that measure them define them:

allocated
    ``torch.cuda.max_memory_allocated``: the bytes of live tensors (what the phase model
    sums), rounded as the caching allocator rounds each request.
reserved
    ``torch.cuda.max_memory_reserved``: segments the caching allocator holds. Requests are
    rounded up to 512 B; requests over 1 MiB are served from segments rounded up to 2 MiB
    (``kRoundLarge``), so every large live tensor wastes on average half a 2 MiB granule.
    Blocks freed by one phase's transients (the logits, the optimizer's temporaries) are
    cached, not returned; when the next phase asks for differently sized blocks the cache
    cannot always split them, which is fragmentation. PyTorch's allocator notes give no
    closed form for it; we carry it as a stated fraction, ``FRAGMENTATION_OF_TRANSIENTS``, of the
    largest transient bytes of the step (the cached blocks stay reserved for the whole run, so every
    training phase carries it).
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
FRAGMENTATION_OF_TRANSIENTS = 0.10
"""Assumed share of the peak phase's transient bytes held as unusable cached blocks."""
CUDA_CONTEXT_BYTES = 512 * MIB
"""CUDA context with lazy module loading for a torch process (PyTorch 'CUDA semantics' notes:
a few hundred MiB, varying with the GPU, driver and CUDA version)."""
CUBLAS_WORKSPACE_BYTES = 32 * MIB
"""cuBLAS/cuBLASLt workspaces torch allocates per handle (CUBLAS_WORKSPACE_CONFIG default :4096:8)."""
NCCL_BUFFER_BYTES_PER_PEER_CHANNEL = 4 * MIB
"""NCCL_BUFFSIZE default (NCCL environment variable docs)."""
NCCL_CHANNELS = 2
"""Ring channels assumed per communicator for the buffer estimate (NCCL picks 2-32 by topology)."""


@dataclass(frozen=True, slots=True)
class OverheadBytes:
    rounding: float
    fragmentation: float
    cuda_context: float
    cublas_workspace: float
    nccl_buffers: float


def overhead_bytes(*, large_tensors: int, transient_bytes: float, world_size: int) -> OverheadBytes:
    """Overheads on top of the allocated peak.

    ``large_tensors``: live tensors at the peak that are over 1 MiB (each wastes half a granule
    on average). ``transient_bytes``: bytes at the peak that are not persistent state.
    """
    nccl = 0.0
    if world_size > 1:
        # send + receive buffers for the two ring neighbours on each channel
        nccl = 2 * 2 * NCCL_CHANNELS * NCCL_BUFFER_BYTES_PER_PEER_CHANNEL
    return OverheadBytes(
        rounding=large_tensors * LARGE_SEGMENT_BYTES / 2,
        fragmentation=FRAGMENTATION_OF_TRANSIENTS * transient_bytes,
        cuda_context=CUDA_CONTEXT_BYTES,
        cublas_workspace=CUBLAS_WORKSPACE_BYTES,
        nccl_buffers=nccl,
    )
