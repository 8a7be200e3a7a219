"""Reserved bytes that FSDP's side-stream pools keep beyond allocated.

PyTorch's caching allocator keeps cached blocks per CUDA stream: "Allocations are associated with a
stream. Once freed, blocks can be re-allocated on the same stream, but not on any other stream"
(the header comment of ``c10/cuda/CUDACachingAllocator.cpp``, pytorch/pytorch). FSDP allocates two
families of its buffers on side streams (torch 2.13):

gathered parameters (the all-gather stream)
    FSDP1 unshards every ``FlatParameter`` inside ``with stream(unshard_stream): handle.unshard()``
    (``torch/distributed/fsdp/_runtime_utils.py`` lines 304-306; the streams are made in
    ``_init_streams``, lines 263-269), so the padded unsharded flat parameter is a block of the
    unshard stream's pool; freeing it (``_flat_param.py`` lines 1818-1821) returns it there, after a
    ``record_stream`` on the compute stream. FSDP2 allocates its all-gather output on the all-gather
    stream (``_fully_shard/_fsdp_collectives.py`` lines 336 and 363).
sharded gradients (the reduce-scatter stream)
    FSDP1's reduce-scatter output ``new_sharded_grad = torch.empty_like(chunks[0])`` is allocated
    inside ``with stream(post_backward_stream)`` (``_runtime_utils.py`` lines 755 and 901) and kept
    as the sharded gradient until ``zero_grad``; FSDP2's ``reduce_output`` is allocated on the
    reduce-scatter stream (``_fsdp_collectives.py`` lines 611-612) and every sharded ``.grad`` is a
    view of it (line 754).

Each pool therefore holds, from the second step on, at least its own high-water mark, whatever the
other pools hold at that moment; the step's reserved is at least the sum of the pools' high-water
marks, while the allocated peak is the peak of their sum. With phase points ``p`` (allocated
``A_p``, gathered ``g_p``, sharded gradients ``r_p``), the gathered pool's high-water mark ``G``
and the gradient pool's ``R``::

    reserved - allocated >= max_p (A_p - g_p - r_p) + G + R - max_p A_p     (>= 0)

That is the bound this module returns: e.g. at the optimizer step every unit is resharded, so the
gathered pool's blocks are cached but idle; in the next forward the freed sharded gradients are.
It is a lower bound: the gathered pool's own fragmentation, frees delayed by ``record_stream`` and
the ``limit_all_gathers`` rate limiter's third unit in flight are not in it. The compute stream's
own fragmentation is the fitted share (``trainfit.memory.overhead``), which stays beside it.

When ``cudaMalloc`` fails the allocator frees cached blocks that are not split, of every stream, and
retries (the same header comment), so the idle side-stream blocks never push
reserved past what the card leaves: ``capped_reserved_bytes``.

Pure: no torch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PoolPoint:
    """One point of the step: its allocated bytes and the parts of them in the side-stream pools."""

    allocated_bytes: float
    gathered_bytes: float
    """Gathered (unsharded) parameters alive at the point: the all-gather stream's pool. Where the
    figure also holds compute-stream buffers (unsharded gradients) it is capped at the pool's
    high-water mark, which only lowers the bound."""
    gradient_bytes: float
    """Sharded gradients alive at the point: the reduce-scatter stream's pool."""


def stream_pool_bytes(
    *, points: Iterable[PoolPoint], gathered_pool_bytes: float, gradient_pool_bytes: float,
) -> float:
    """Reserved beyond the allocated peak that the side-stream pools keep (the bound above).

    ``gathered_pool_bytes``: the all-gather pool's high-water mark (root unit + the units gathered at
    once); ``gradient_pool_bytes``: the reduce-scatter pool's (all sharded gradients)."""
    if gathered_pool_bytes < 0 or gradient_pool_bytes < 0:
        raise ValueError("pool bytes must be >= 0")
    pts = list(points)
    if not pts:
        return 0.0
    peak = max(p.allocated_bytes for p in pts)
    compute = max(
        p.allocated_bytes - min(p.gathered_bytes, gathered_pool_bytes) - min(p.gradient_bytes, gradient_pool_bytes)
        for p in pts
    )
    return max(0.0, compute + gathered_pool_bytes + gradient_pool_bytes - peak)


def capped_reserved_bytes(*, reserved_bytes: float, extra_bytes: float, room_bytes: float) -> float:
    """``reserved_bytes + extra_bytes``, but idle cached blocks are released before an allocation
    fails: never above ``room_bytes`` (the card's memory less what lies outside the caching
    allocator) unless ``reserved_bytes`` already is."""
    return max(reserved_bytes, min(reserved_bytes + extra_bytes, room_bytes))
