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

That is the bound ``stream_pool_bytes`` returns, the planner's fallback where the step's sequence
cannot be generated (the replay below replaces it elsewhere): e.g. at the optimizer step every unit is resharded, so the
gathered pool's blocks are cached but idle; in the next forward the freed sharded gradients are.
It is a lower bound: the gathered pool's own fragmentation, frees delayed by ``record_stream`` and
the ``limit_all_gathers`` rate limiter's third unit in flight are not in it. The compute stream's
own fragmentation is then the fitted share (``trainfit.memory.overhead``), which stays beside it.

When ``cudaMalloc`` fails the allocator frees cached blocks that are not split, of every stream, and
retries (the same header comment), so the idle side-stream blocks never push
reserved past what the card leaves: ``capped_reserved_bytes``.

The replay (``fsdp_step_sequence``, ``replay_streams``, ``fsdp_replayed_overhead``)
    Where the step's allocation sequence can be generated (``trainfit.memory.alloc_sequence``) the
    bound is not needed: the compute stream's sequence of one rank (its weight and state shards,
    activations, the unsharded gradients before their reduce-scatter, the optimizer step) is
    generated with FSDP2's own allocations inserted at the layer boundaries, each tagged with the
    stream that allocates it, and every stream's blocks are replayed through its own
    ``CachingAllocator`` (a block freed on one stream is never reused by another). FSDP2, torch 2.13
    (``torch/distributed/fsdp/_fully_shard``):

    * all-gather copy-in stream: ``foreach_all_gather`` allocates the unit's flat all-gather output
      (world size x its shard) in ``with device_handle.stream(all_gather_copy_in_stream)``
      (``_fsdp_collectives.py`` lines 336-352) in forward and for the backward prefetch
      (``get_all_gather_streams``, ``_fsdp_param_group.py`` lines 116-127). In forward it is kept in
      ``comm_ctx.all_gather_state`` until the next unit's copy-out (``wait_for_unshard``, lines
      429-432 and 483-489), the last layer's until the root's post-forward (``_fsdp_state.py`` lines
      333-342; after the loss where the model computes it); in backward it is freed right after its
      copy-out;
    * compute stream: the copy-out's unsharded parameters, one tensor per parameter
      (``foreach_all_gather_copy_out`` -> ``alloc_all_gather_outputs``, ``_fsdp_collectives.py``
      lines 460-466), freed at ``reshard`` (after forward except for the root; in ``post_backward``
      before the reduce); the unsharded gradients (autograd); the reduce-scatter input
      (``foreach_reduce``, lines 600-604), kept in ``comm_ctx.reduce_scatter_states`` until the next
      unit's ``post_backward`` (one buffer, ``reduce_scatter_max_input_buffers``) and freed once its
      gradients are copied in;
    * reduce-scatter stream: ``reduce_output`` (the unit's sharded gradients, lines 611-616), whose
      views are the sharded ``.grad`` until ``zero_grad``.

    Backward prefetch: a unit's ``pre_backward`` all-gathers the unit before it (``_backward_prefetch``);
    the root (embedding, final norm, lm_head) is not resharded after forward and reduces its
    gradients in the final callback. ``replay_streams`` returns the sum of the pools' reserved and
    the peak of the summed allocated; reserved - allocated is the step's overhead, in place of the
    fitted share and this module's bound. FSDP1 differs (its unsharded flat parameter is a block of
    the unshard stream, its sharded gradient of the post-backward stream); the planner's terms are
    FSDP2's and so is the replay.

Pure: no torch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache

from trainfit.memory import alloc_sequence
from trainfit.memory.alloc_sequence import STREAM_SHIFT, AllocSequence, SequenceShape
from trainfit.memory.caching_allocator import ROUND_LARGE, CachingAllocator
from trainfit.memory.phases import StepTerms

COMPUTE, ALL_GATHER, REDUCE_SCATTER = 0, 1, 2
"""Stream ids of the replay: the default (compute) stream, FSDP2's all-gather copy-in stream (its
all-gather outputs) and its reduce-scatter stream (the sharded gradients)."""


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


def fsdp_supported(t: StepTerms) -> bool:
    """Whether ``fsdp_step_sequence`` models ``t``: FSDP2 full sharding (decoder-layer units resharded
    after forward, a root unit), and otherwise a step ``alloc_sequence`` generates."""
    if not (t.fsdp_root_unit > 0 and t.fsdp_layer_units > 0 and not t.fsdp_all_gathered):
        return False
    return alloc_sequence.supported(_compute_terms(t))


def _grad_ratio(t: StepTerms) -> float:
    """Unsharded over sharded gradient bytes of a decoder layer (the data-parallel shard count)."""
    top = max(t.grads_per_layer, default=0.0)
    return t.fsdp_unsharded_grads / top if top > 0 and t.fsdp_unsharded_grads > 0 else 1.0


def _compute_terms(t: StepTerms) -> StepTerms:
    """The terms of the compute stream's own sequence: the unsharded gradients in place of the sharded
    ones (autograd makes them whole; the sharded ones are the reduce-scatter stream's), no FSDP buffers
    (the hook makes them)."""
    k = _grad_ratio(t)
    return replace(
        t, fsdp_root_unit=0.0, fsdp_layer_units=0.0, fsdp_unsharded_grads=0.0, fsdp_root_grads=0.0,
        fsdp_root_embedding_grads=0.0, fsdp_all_gathered=0.0,
        grads_per_layer=tuple(g * k for g in t.grads_per_layer),
        grads_head=t.fsdp_root_grads if t.fsdp_root_grads else t.grads_head * k,
        grads_embedding=t.fsdp_root_embedding_grads if t.fsdp_root_embedding_grads else t.grads_embedding * k,
    )


class _Fsdp2:
    """FSDP2's allocations at the step's layer boundaries (the module docstring), as an
    ``alloc_sequence.step_sequence`` hook."""

    def __init__(self, *, layers: int, unit: list[int], root: list[int], grads: list[int], root_grads: int,
                 world: int) -> None:
        self.layers, self.unit, self.root, self.world = layers, unit, root, world
        self.grads, self.root_grads = grads, root_grads
        self.params: dict[int, list[int]] = {}
        self.prefetched: dict[int, int] = {}
        self.held: int | None = None
        self.rs_in: int | None = None
        self.rs_out: list[int] = []
        self.mark = 0
        self.micro = 0

    def _gather(self, e, unit: list[int]) -> int:
        return e.alloc(sum(unit), ALL_GATHER)

    def _copy_out(self, e, unit: list[int]) -> list[int]:
        return [e.alloc(n) for n in unit]

    def _free(self, e, keys) -> None:
        for k in keys:
            e.free(k)

    def _reduce(self, e, grads: list, nbytes: int) -> None:
        """``post_backward``'s reduce-scatter: the previous input goes, this unit's input is made and its
        unsharded gradients go, the output is made on the reduce-scatter stream."""
        if self.rs_in is not None:
            e.free(self.rs_in)
            self.rs_in = None
        new = grads[self.mark:]
        del grads[self.mark:]
        if nbytes <= 0 and not new:
            return
        self.rs_in = e.alloc(nbytes)
        self._free(e, (k for k, _ in new))
        out = e.alloc(max(1, nbytes // self.world), REDUCE_SCATTER)
        if self.micro > 1:  # accumulated into the held sharded gradient, then dropped
            e.free(out)
        else:
            self.rs_out.append(out)

    def __call__(self, point: str, i: int, e, grads) -> None:
        if point == "forward_start":
            self.micro += 1
            ag = self._gather(e, self.root)
            self.params[-1] = self._copy_out(e, self.root)
            self.held = ag
        elif point == "forward":
            if i > 0:
                self._free(e, self.params.pop(i - 1))
            ag = self._gather(e, self.unit)
            e.free(self.held)
            self.params[i] = self._copy_out(e, self.unit)
            self.held = ag
        elif point == "forward_end":
            self._free(e, self.params.pop(self.layers - 1))
        elif point == "forward_done":  # the root's post-forward frees the last all-gather output
            e.free(self.held)
            self.held = None
        elif point == "backward":
            if i == self.layers - 1:  # lm_head's gradients so far: the root's, reduced at the end
                self.mark = len(grads)
            else:
                self._post_backward(e, i + 1, grads)
            ag = self.prefetched.pop(i, None)
            if ag is None:
                ag = self._gather(e, self.unit)
            self.params[i] = self._copy_out(e, self.unit)
            e.free(ag)
            if i > 0:
                self.prefetched[i - 1] = self._gather(e, self.unit)
        elif point == "backward_layers_end":
            self._post_backward(e, 0, grads)
        elif point == "backward_end":
            self._free(e, self.params.pop(-1))
            self.mark = 0  # lm_head's (made first) and the embedding's
            self._reduce(e, grads, self.root_grads)
            if self.rs_in is not None:  # the final callback waits for the last reduce-scatter
                e.free(self.rs_in)
                self.rs_in = None
            self.mark = len(grads)
        elif point == "zero_grad":
            self._free(e, self.rs_out)
            self.rs_out = []

    def _post_backward(self, e, i: int, grads) -> None:
        self._free(e, self.params.pop(i))
        self._reduce(e, grads, self.grads[i])
        self.mark = len(grads)


def fsdp_step_sequence(t: StepTerms, shape: SequenceShape, *, world_size: int,
                       workspace: tuple[int, ...] = ()) -> AllocSequence | None:
    """One rank's step under FSDP2 (the module docstring), or None where it cannot be generated."""
    if world_size < 2 or not fsdp_supported(t):
        return None
    layers = len(t.activations.per_layer)
    unit_bytes = t.fsdp_layer_units / 2
    lp = [n for n in shape.layer_params if n > 0] or [1]
    unit = [int(unit_bytes * n / sum(lp)) for n in lp]
    head = [shape.embedding_params, *shape.head_params]
    root = [int(t.fsdp_root_unit * n / sum(head)) for n in head if n > 0]
    k = _grad_ratio(t)
    grads = [int(g * k) for g in t.grads_per_layer]
    root_grads = int(t.fsdp_root_grads + t.fsdp_root_embedding_grads)
    hook = _Fsdp2(layers=layers, unit=unit, root=root, grads=grads, root_grads=root_grads, world=world_size)
    return alloc_sequence.step_sequence(_compute_terms(t), shape, workspace=workspace, hook=hook)


@dataclass(frozen=True, slots=True)
class StreamReplay:
    reserved_bytes: int
    """The pools' reserved, summed (the step's high-water: no pool gives blocks back)."""
    allocated_bytes: int
    """The highest allocated of all pools together."""
    pool_reserved_bytes: tuple[int, ...]
    """Reserved per stream (``COMPUTE``, ``ALL_GATHER``, ``REDUCE_SCATTER``)."""
    pool_allocated_bytes: tuple[int, ...]
    """Each stream's own allocated high-water mark."""
    pool_allocated_at_peak: tuple[int, ...] = ()
    """Each stream's allocated bytes where their sum peaks."""

    @property
    def overhead(self) -> int:
        return self.reserved_bytes - self.allocated_bytes

    @property
    def side_idle_bytes(self) -> int:
        """What the side streams' pools hold cached and unused where the summed allocated peaks: reserved
        that only those streams could reuse (part of ``overhead``)."""
        return sum(r - a for r, a in zip(self.pool_reserved_bytes[1:], self.pool_allocated_at_peak[1:]))


def replay_streams(seq: AllocSequence, *, steps: int = 2, expandable: bool = False, streams: int = 3) -> StreamReplay:
    """Replay ``steps`` steps of ``seq`` in a fresh process, each stream's blocks in its own
    ``CachingAllocator`` (the key's stream, ``key >> STREAM_SHIFT``). Persistent blocks, optimizer states
    and cuBLAS workspaces are the compute stream's; a key may outlive its step (freed in the next)."""
    pools = [CachingAllocator(expandable=expandable) for _ in range(streams)]
    comp = pools[COMPUTE]
    for n in seq.persistent:
        if n:
            comp.held.append(comp.malloc(n))
    inserts: dict[int, list[tuple[int, int, int]]] = {}
    at = min(seq.first_step_extra_at, len(seq.step_events))
    inserts.setdefault(at, []).extend((1, -1 - j, m) for j, m in enumerate(seq.first_step_extra) if m)
    marks = seq.workspace_at if seq.workspace_at else (0,) * len(seq.workspace)
    for j, (i, n) in enumerate(zip(marks, seq.workspace)):
        if n:
            inserts.setdefault(min(i, len(seq.step_events)), []).append((1, -(1 << 40) - j, n))
    first: list[tuple[int, int, int]] = []
    for j in range(len(seq.step_events) + 1):
        first.extend(inserts.get(j, ()))
        if j < len(seq.step_events):
            first.append(seq.step_events[j])
    live: dict[int, tuple[CachingAllocator, object]] = {}
    total = comp.allocated
    peak = total
    at_peak = tuple(a.allocated for a in pools)
    for si, events in enumerate([first] + [list(seq.step_events)] * (steps - 1)):
        for sign, key, n in events:
            if sign > 0:
                if n:
                    a = pools[key >> STREAM_SHIFT] if key > 0 else comp
                    old = live.pop(key, None)
                    if old is not None:  # a key reused while its block lives: the old one goes first
                        total -= old[1].size
                        old[0].release(old[1])
                    blk = a.malloc(n)
                    live[key] = (a, blk)
                    total += blk.size
                    if total > peak:
                        peak = total
                        at_peak = tuple(x.allocated for x in pools)
            elif key >= 0:
                got = live.pop(key, None)
                if got is not None:
                    total -= got[1].size  # before ``release``, which merges it with its free neighbours
                    got[0].release(got[1])
    return StreamReplay(sum(a.reserved for a in pools), peak, tuple(a.reserved for a in pools),
                        tuple(a.peak_allocated for a in pools), at_peak)


def fsdp_replayed_overhead(t: StepTerms, shape: SequenceShape, *, world_size: int, workspace: tuple[int, ...] = (),
                           expandable: bool = False) -> tuple[int, int] | None:
    """(reserved - allocated at the high-water mark of two replayed FSDP2 steps, all streams; the part of it
    the side streams' pools hold idle there), or None where the sequence cannot be generated. Cached per
    terms and shape."""
    return _fsdp_overhead(t, shape, world_size, tuple(workspace), expandable)


@lru_cache(maxsize=4096)
def _fsdp_overhead(t: StepTerms, shape: SequenceShape, world_size: int, workspace: tuple[int, ...],
                   expandable: bool) -> tuple[int, int] | None:
    seq = fsdp_step_sequence(replace(t, ddp_buckets=0.0) if t.ddp_buckets else t, shape, world_size=world_size,
                             workspace=workspace)
    if seq is None:
        return None
    r = replay_streams(seq, expandable=expandable)
    buckets = -(-int(t.ddp_buckets) // ROUND_LARGE) * ROUND_LARGE - int(t.ddp_buckets) if t.ddp_buckets else 0
    return r.overhead + buckets, r.side_idle_bytes
