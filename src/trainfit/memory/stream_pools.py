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

DeepSpeed ZeRO-2 and ZeRO-3 (``zero_step_sequence``, ``zero_replayed_overhead``; DeepSpeed 0.19.8, paths under
``deepspeed/runtime``)
    The compute stream's sequence is ``alloc_sequence``'s step with whole gradients (autograd makes them whole;
    DeepSpeed's hook takes each one as it appears: the ``grads`` hook point), without the optimizer states and
    the per-tensor step (DeepSpeed steps flat fp32 groups). One rank (rank 0; its partition is the start of the
    flat parameter order, reduced last):

    * IPG bucket: ``reduce_bucket_size`` elements of the gradient dtype. Stage 1-2: made at a backward's first
      gradient on the compute stream (``setup_buckets``, ``zero/stage_1_and_2.py`` l.3256-3278; two with
      ``overlap_comm``) and dropped at its end (``_release_ipg_buffers``, l.924-931); stage 3: from init
      (``zero/stage3.py`` l.782). A gradient that does not fit is flushed first; one larger than the bucket is
      reduced from where autograd made it and goes at the next flush (l.1422-1449); the others are copied in and
      the autograd tensor released (l.1455-1459; stage3.py l.1628-1638).
    * Stage 1-2 flush (``reduce_ipg_grads``, l.2205-2249): per destination rank the bucket's slices of its
      partition are flattened (``allreduce_bucket``, l.2367) on ``reduction_stream`` with ``overlap_comm``,
      else the compute stream (l.2414-2420); the rank's own gradients are copied into ``grads_in_partition``
      (l.2192), made at the first copy inside the same stream context (l.2249), so a block of the reduction
      stream's pool. ``_release_ipg_buffers`` sets it to None at each backward's end while the parameters'
      ``.grad`` views keep it: with accumulation the next backward makes a new one and the old one goes at
      that backward's end. The step (l.3108-3137) frees it after ``flatten`` (the flat copy, l.3117) and the
      fp32 cast (l.3118): copy freed, partition freed, the optimizer (torch AdamW makes ``exp_avg`` and
      ``exp_avg_sq`` of the flat fp32 partition at the first step; its temporaries), fp32 gradient freed.
      ``initialize_optimizer_states`` (l.937-951) made and dropped a zero fp32 gradient of the partition at
      init: a cached block. ``allgather_bucket_size`` only splits the in-place all-gather (no allocation).
    * Stage 3 gathered parameters: the coordinator's fetch runs ``all_gather_coalesced`` inside
      ``with stream(__allgather_stream)`` (``zero/partitioned_param_coordinator.py`` l.606) and waits inside
      it too (l.400-406): the flat all-gather output (``zero/partition_parameters.py`` l.1343) and each
      parameter's ``torch.cat`` of its partitions (l.795) are blocks of the all-gather stream's pool; the flat
      one goes after the wait, a parameter's at its release. Replayed layer by layer (a layer's parameters
      gathered at its forward and at its backward, in batches of ``stage3_prefetch_bucket_size``), a layer
      kept from forward to backward when the trace between its two uses is within ``stage3_max_reuse_distance``
      elements (l.634-666), the root's embedding and lm_head likewise; parameters under the persistence
      threshold stay gathered (persistent).
    * Stage 3 flush (``__reduce_and_partition_ipg_grads``, stage3.py l.1650-1690) on
      ``reduce_and_partition_stream`` (its own stream with ``overlap_comm``, else the default one, l.340-341):
      ``reduce_scatter_coalesced`` cats the padded partitions (``comm/coalesced_collectives.py`` l.107-122),
      none for a single tensor divisible by the world size; the partitions are added into the flat gradient
      partitions (l.791, from init).
    * Stage 3 init (``initialize_optimizer_states``, l.1301-1368): a zero fp32 buffer of the largest sub-group,
      dropped; then the bucket and the flat gradient partitions, which lands in that cached block where it fits.
      The step per sub-group (l.2910-2927, l.2686): flat copy, fp32 gradient, copy freed, states (first step),
      temporaries, fp32 gradient freed.

    Each stream's blocks replay in their own pool (``replay_streams``); the capped reserved (the allocator frees
    idle cached blocks before failing) is what the planner shows. ZeRO-1 (its epilogue reduction), CPU/NVMe
    offload and non-contiguous gradients are not generated: the fitted share stands there. The bucket logic is
    checked against DeepSpeed itself (``tests/memory/test_zero_stream_replay.py``); the layer-level gather and
    the rank-0 partition order are this module's approximations.

Pure: no torch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache

from trainfit.memory import alloc_sequence
from trainfit.memory.alloc_sequence import STREAM_SHIFT, AllocSequence, SequenceShape
from trainfit.memory.caching_allocator import ROUND_LARGE, CachingAllocator
from trainfit.memory.caching_allocator import SMALL_SIZE as SMALL
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


class _Fsdp2OneRank(_Fsdp2):
    """FSDP2 on a one-rank mesh (torch 2.13.0, pytorch/pytorch@cf30153c4c131c8164ee7798e5022d810682e2cb): ``unshard``
    runs no all-gather and allocates nothing (``_fsdp_param_group.py`` l.388-403), so the backward prefetch holds
    nothing; ``wait_for_unshard`` casts each parameter's shard to ``param_dtype`` (``FSDPParam.all_gather_inputs``,
    ``_fsdp_param.py`` l.901, a temporary) and copies it into the parameter's unsharded storage, allocated on the
    compute stream (l.426-448). ``foreach_reduce`` is the multi-rank one: the fp32 input on the compute stream,
    ``reduce_output`` (the sharded gradient, the same size at one rank) on the reduce-scatter stream
    (``_fsdp_collectives.py`` l.597-631)."""

    def _gather(self, e, unit: list[int]) -> None:  # noqa: ARG002
        return None

    def _copy_out(self, e, unit: list[int]) -> list[int]:
        keys = []
        for n in unit:
            cast = e.alloc(n)
            keys.append(e.alloc(n))
            e.free(cast)
        return keys

    def __call__(self, point: str, i: int, e, grads) -> None:
        super().__call__(point, i, _NoneFree(e), grads)


class _NoneFree:
    """The sequence builder, with ``free(None)`` (a one-rank unit's absent all-gather output) doing nothing."""

    def __init__(self, e) -> None:  # noqa: ANN001
        self._e = e

    def alloc(self, n: int, stream: int = 0) -> int:
        return self._e.alloc(n, stream)

    def free(self, key: int | None) -> None:
        if key is not None:
            self._e.free(key)


def fsdp_step_sequence(t: StepTerms, shape: SequenceShape, *, world_size: int,
                       workspace: tuple[int, ...] = (), one_rank: bool = False) -> AllocSequence | None:
    """One rank's step under FSDP2 (the module docstring), or None where it cannot be generated. ``one_rank``: FSDP2
    on a one-rank mesh (``_Fsdp2OneRank``; ``t`` from ``plan.terms._fsdp_terms``' one-rank branch: one unit in
    flight, the unsharded gradients' term the ``param_dtype`` gradients plus the fp32 reduce input)."""
    if (world_size < 2 and not one_rank) or not fsdp_supported(t):
        return None
    if one_rank:
        return _one_rank_sequence(t, shape, workspace=workspace)
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


def _one_rank_sequence(t: StepTerms, shape: SequenceShape, *, workspace: tuple[int, ...]) -> AllocSequence:
    """``fsdp_step_sequence`` at one rank: the compute stream's unsharded gradients are the ``param_dtype`` ones
    (``t.fsdp_unsharded_grads`` less the fp32 reduce input, which is the sharded gradient's size); the hook's reduce
    input and output are the sharded (fp32) gradients' size."""
    layers = len(t.activations.per_layer)
    lp = [n for n in shape.layer_params if n > 0] or [1]
    unit = [int(t.fsdp_layer_units * n / sum(lp)) for n in lp]
    head = [shape.embedding_params, *shape.head_params]
    root = [int(t.fsdp_root_unit * n / sum(head)) for n in head if n > 0]
    top = max(t.grads_per_layer, default=0.0)
    k = max(0.0, t.fsdp_unsharded_grads / top - 1.0) if top > 0 else 1.0  # param_dtype / fp32 gradient bytes
    # the root's gradients are planned in param_dtype already; its reduce input and output are fp32
    root_grads = (t.fsdp_root_grads + t.fsdp_root_embedding_grads) / k if k > 0 else 0.0
    compute = replace(
        t, fsdp_root_unit=0.0, fsdp_layer_units=0.0, fsdp_unsharded_grads=0.0, fsdp_root_grads=0.0,
        fsdp_root_embedding_grads=0.0, fsdp_all_gathered=0.0,
        grads_per_layer=tuple(g * k for g in t.grads_per_layer),
        grads_head=t.fsdp_root_grads if t.fsdp_root_grads else t.grads_head * k,
        grads_embedding=t.fsdp_root_embedding_grads if t.fsdp_root_embedding_grads else t.grads_embedding * k)
    hook = _Fsdp2OneRank(layers=layers, unit=unit, root=root, grads=[int(g) for g in t.grads_per_layer],
                         root_grads=int(root_grads), world=1)
    return alloc_sequence.step_sequence(compute, shape, workspace=workspace, hook=hook)


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
    releasable_at_peak: int = 0
    """Bytes of whole free segments (every pool) where the summed allocated peaks: what the allocator can
    give back before an allocation fails (recorded with ``replay_streams(releasable=True)``)."""

    @property
    def overhead(self) -> int:
        return self.reserved_bytes - self.allocated_bytes

    @property
    def side_idle_bytes(self) -> int:
        """What the side streams' pools hold cached and unused where the summed allocated peaks: reserved
        that only those streams could reuse (part of ``overhead``)."""
        return sum(r - a for r, a in zip(self.pool_reserved_bytes[1:], self.pool_allocated_at_peak[1:]))


def replay_streams(seq: AllocSequence, *, steps: int = 2, expandable: bool = False, streams: int = 3,
                   init_free: tuple[int, ...] = (), first_step_at: tuple[tuple[int, int], ...] = (),
                   releasable: bool = False) -> StreamReplay:
    """Replay ``steps`` steps of ``seq`` in a fresh process, each stream's blocks in its own
    ``CachingAllocator`` (the key's stream, ``key >> STREAM_SHIFT``). Persistent blocks, optimizer states
    and cuBLAS workspaces are the compute stream's; a key may outlive its step (freed in the next).
    ``init_free``: compute-stream blocks made after the persistent ones, before the first step, in order:
    a negative size is made and freed at once (its block cached), a positive one kept; ``first_step_at``: (event index, bytes) of further blocks the first step makes and keeps
    (DeepSpeed's optimizer states, made where each group steps). ``releasable``: record the whole free
    segments where the summed allocated peaks (``StreamReplay.releasable_at_peak``).

    Cold-start null result: binding the pools' ``malloc``/``release`` and ``live.pop`` once outside the event loop
    changed a cold default ``trainfit plan --json`` by 0.05% of its valgrind instructions (1,593.1M -> 1,592.4M):
    the replay's cost is the allocator model's own work (``CachingAllocator.malloc``/``release``, ~27k calls)."""
    pools = [CachingAllocator(expandable=expandable) for _ in range(streams)]
    comp = pools[COMPUTE]
    for n in seq.persistent:
        if n:
            comp.held.append(comp.malloc(n))
    for n in init_free:  # in order: n > 0 made and kept, n < 0 made and freed at once
        if n > 0:
            comp.held.append(comp.malloc(n))
        elif n < 0:
            comp.release(comp.malloc(-n))
    inserts: dict[int, list[tuple[int, int, int]]] = {}
    at = min(seq.first_step_extra_at, len(seq.step_events))
    inserts.setdefault(at, []).extend((1, -1 - j, m) for j, m in enumerate(seq.first_step_extra) if m)
    for j, (i, m) in enumerate(first_step_at):
        if m:
            inserts.setdefault(min(i, len(seq.step_events)), []).append((1, -(1 << 41) - j, m))
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
    free_at_peak = 0
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
                        if releasable:
                            free_at_peak = _whole_free_segments(pools)
            elif key >= 0:
                got = live.pop(key, None)
                if got is not None:
                    total -= got[1].size  # before ``release``, which merges it with its free neighbours
                    got[0].release(got[1])
    return StreamReplay(sum(a.reserved for a in pools), peak, tuple(a.reserved for a in pools),
                        tuple(a.peak_allocated for a in pools), at_peak, free_at_peak)


def _whole_free_segments(pools: list[CachingAllocator]) -> int:
    """Bytes of the large pools' free blocks that are whole segments (not split): what the allocator's
    ``release_cached_blocks`` can give back when a ``cudaMalloc`` fails (split segments stay)."""
    if any(a.expandable for a in pools):
        return 0
    return sum(b.size for a in pools for b in a._by_key.values()
               if b.prev is None and b.next is None and not b.small)


def fsdp_replayed_overhead(t: StepTerms, shape: SequenceShape, *, world_size: int, workspace: tuple[int, ...] = (),
                           expandable: bool = False, one_rank: bool = False) -> tuple[int, int] | None:
    """(reserved - allocated at the high-water mark of two replayed FSDP2 steps, all streams; the part of it
    the side streams' pools hold idle there), or None where the sequence cannot be generated. Cached per
    terms and shape."""
    return _fsdp_overhead(t, shape, world_size, tuple(workspace), expandable, one_rank)


@lru_cache(maxsize=4096)
def _fsdp_overhead(t: StepTerms, shape: SequenceShape, world_size: int, workspace: tuple[int, ...],
                   expandable: bool, one_rank: bool = False) -> tuple[int, int] | None:
    seq = fsdp_step_sequence(replace(t, ddp_buckets=0.0) if t.ddp_buckets else t, shape, world_size=world_size,
                             workspace=workspace, one_rank=one_rank)
    if seq is None:
        return None
    r = replay_streams(seq, expandable=expandable)
    buckets = -(-int(t.ddp_buckets) // ROUND_LARGE) * ROUND_LARGE - int(t.ddp_buckets) if t.ddp_buckets else 0
    return r.overhead + buckets, r.side_idle_bytes


# --------------------------------------------------------------------------------------------
# DeepSpeed ZeRO-2 and ZeRO-3
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ZeroLayout:
    """What sizes and places DeepSpeed ZeRO's own allocations on one rank (``trainfit.memory.deepspeed``
    resolves the config; element counts)."""

    stage: int
    dp: int
    grad_bytes: int
    """Bytes per gradient element (the IPG bucket's and the gradient partition's dtype)."""
    bucket_numel: int
    """``reduce_bucket_size``."""
    overlap_comm: bool
    """Reductions on DeepSpeed's own stream (stage 1-2 ``reduction_stream``, stage 3
    ``reduce_and_partition_stream``); without it on the compute stream."""
    partition_numel: int
    """The rank's gradient partition (trainable elements / dp, padded)."""
    sub_group_numel: int
    """The fp32 group one optimizer call steps (stage 1-2: the partition; stage 3: ``sub_group_size``)."""
    param_bytes: float = 2.0
    """Stage 3: bytes per gathered parameter element."""
    prefetch_numel: int = 0
    """Stage 3: ``stage3_prefetch_bucket_size``."""
    max_reuse_distance: int = 0
    """Stage 3: ``stage3_max_reuse_distance``."""
    persistence_threshold: int = 0
    """Stage 3: parameters of at most this many elements stay gathered (persistent, not replayed)."""


def _zero_compute_terms(t: StepTerms, z: ZeroLayout) -> StepTerms:
    """The compute stream's own sequence under ZeRO: whole gradients as autograd makes them (the hook takes
    them into the bucket), no ZeRO or FSDP-style terms (the hook makes them), optimizer states and the step's
    temporaries left to the hook (DeepSpeed steps flat fp32 groups, not per tensor)."""
    k = float(z.dp) if z.stage > 1 else 1.0  # stage 1 keeps whole gradients (the planner's terms too)
    return replace(
        t, fsdp_root_unit=0.0, fsdp_layer_units=0.0, fsdp_unsharded_grads=0.0, fsdp_root_grads=0.0,
        fsdp_root_embedding_grads=0.0, fsdp_all_gathered=0.0, zero_ipg_buckets=0.0, zero_ipg_persistent=False,
        zero_step_grads=0.0, zero_step_cast=0.0, zero_step_fp32_grad=0.0, zero_step_keeps_grads=False,
        zero_persistent_params=0.0, grads_preallocated=False, gathered_forward=0.0, gathered_backward=0.0,
        optimizer_states=0.0, optimizer_temporaries=0.0,
        grads_per_layer=tuple(g * k for g in t.grads_per_layer), grads_head=t.grads_head * k,
        grads_embedding=t.grads_embedding * k,
    )


def zero_supported(t: StepTerms, z: ZeroLayout) -> bool:
    """Whether ``zero_step_sequence`` models ``t``: ZeRO-2 or ZeRO-3 without offload (DeepSpeed's stage-1
    epilogue and the offload paths are not generated), and a step ``alloc_sequence`` generates."""
    if z.stage not in (1, 2, 3) or z.dp < 1 or t.offload_staging or not (t.zero_step_fp32_grad > 0):
        return False
    if z.stage == 1 and z.overlap_comm:  # stage 1 reducing in backward at the accumulation boundary: not generated
        return False
    return alloc_sequence.supported(_zero_compute_terms(t, z))


class _Zero:
    """DeepSpeed ZeRO-2/3's allocations at the step's gradient and layer boundaries, as an
    ``alloc_sequence.step_sequence`` hook (module docstring of ``zero_step_sequence``)."""

    def __init__(self, z: ZeroLayout, *, total_numel: float, layer_gather: list[list[int]], root: list[int],
                 head: list[int], layers: int, kept: list[bool], emb_kept: bool, temporaries: float,
                 micro_steps: int = 1) -> None:
        self.z = z
        self.side = REDUCE_SCATTER if z.overlap_comm else COMPUTE
        self.total = total_numel
        self.layer_gather, self.root, self.head_params = layer_gather, root, head
        self.layers, self.kept, self.emb_kept = layers, kept, emb_kept
        self.temporaries = temporaries
        self.fill = 0.0
        self.count = 0
        """Elements and parameters in the bucket."""
        self.hi = total_numel
        self.lo = 0.0
        self.micro = 0
        self.micro_steps = micro_steps
        self.held: list[tuple[int, int]] = []
        """Stage 1: the whole gradients held to the epilogue."""
        self.done = 0.0
        self.pending: list[int] = []
        self.buckets: list[int] = []
        self.part: int | None = None
        self.old_part: int | None = None
        self.gathered: dict[int, list[int]] = {}
        self.states_after: list[tuple[int, int]] = []
        """(key of the event after which the first step makes a group's states, the states' bytes)."""

    # -- gradients: the IPG bucket and its reduction --------------------------------------------------
    def _flush(self, e) -> None:
        """``reduce_ipg_grads`` (stage 1-2) / ``__reduce_and_partition_ipg_grads`` (stage 3) of what the bucket
        holds, the flat range [hi - fill, hi) of the parameters (reverse order, rank 0's partition first)."""
        z, gb = self.z, self.z.grad_bytes
        if self.fill <= 0:
            return
        if z.stage == 1:  # the epilogue walks the parameters in their own (flat) order
            lo, hi = self.lo, self.lo + self.fill
        else:
            lo, hi = self.hi - self.fill, self.hi
        if z.stage < 3:
            # average_tensor: per destination rank the bucket's slices of its partition, flattened in
            # allreduce_bucket (stage_1_and_2.py l.2367) on ``stream`` (l.2416-2420); allreduce_no_retain
            # splits only past numel_per_bucket (= the bucket) at a tensor's end, so one flat copy per rank
            p = max(1, z.partition_numel)
            for r in range(z.dp):
                ov = min(hi, (r + 1) * p) - max(lo, r * p)
                if ov > 0:
                    e.free(e.alloc(int(ov * gb), self.side))
                if r == 0 and ov > 0 and self.part is None:
                    # copy_grads_in_partition: the rank's contiguous gradient partition (l.2192), made
                    # inside reduce_ipg_grads's ``with stream(stream)`` (l.2249)
                    self.part = e.alloc(int(z.partition_numel * gb), self.side)
        else:
            # __avg_scatter_grads -> reduce_scatter_coalesced: torch.cat of the padded partitions
            # (coalesced_collectives.py l.107-122) on reduce_and_partition_stream (stage3.py l.1669), except
            # a single tensor divisible by the world size (l.102-104)
            if not (self.count == 1 and self.fill % z.dp == 0):
                e.free(e.alloc(int(self.fill * gb), self.side))
        for k in self.pending:
            e.free(k)
        self.pending = []
        self.hi, self.lo, self.fill, self.count = lo, hi, 0.0, 0

    def _grads(self, e, made) -> bool:
        z = self.z
        if z.stage < 3 and not self.buckets:
            # setup_buckets at the first gradient of a backward (stage_1_and_2.py l.3256-3278; process_gradients
            # calls it at every stage, l.2286)
            self.buckets = [e.alloc(z.bucket_numel * z.grad_bytes) for _ in range(2 if z.overlap_comm else 1)]
        if z.stage == 1:
            # stage 1 without overlap_comm reduces nothing in backward (process_gradients, l.2289): the gradients
            # stay whole, as autograd made them, until the epilogue; the first micro-step's are held (later
            # ones accumulate into them)
            if self.micro == 1:
                self.held.extend(made)
            return False
        self._take(e, made)
        return True

    def _take(self, e, made) -> None:
        """``reduce_independent_p_g_buckets_and_remove_grads`` for each new gradient (l.1415-1465)."""
        z = self.z
        for key, nbytes in made:
            n = nbytes / z.grad_bytes
            if self.fill + n > z.bucket_numel:
                self._flush(e)
            if n > z.bucket_numel:  # an extra-large gradient is reduced from where autograd made it
                self.pending.append(key)
            else:  # copied into the bucket and the autograd tensor released (l.1455-1459; stage3.py l.1628-1638)
                e.free(key)
            self.fill += n
            self.count += 1

    # -- stage 3: gathered parameters -----------------------------------------------------------------
    def _gather(self, e, unit: int, params: list[int]) -> None:
        """The coordinator's fetch: per batch (the current module, then up to ``prefetch`` elements) one flat
        all-gather output, then each parameter's own ``torch.cat`` in ``wait``, all on the all-gather stream
        (partitioned_param_coordinator.py l.400-406 and l.606; partition_parameters.py l.1343 and l.795);
        the flat buffer goes once the parameters are copied out."""
        if unit in self.gathered or not params:
            return
        pb, keys = self.z.param_bytes, []
        batch: list[int] = []
        limit = max(1, self.z.prefetch_numel)

        def run(b: list[int]) -> None:
            flat = e.alloc(int(sum(b) * pb), ALL_GATHER)
            keys.extend(e.alloc(int(n * pb), ALL_GATHER) for n in b)
            e.free(flat)

        for n in params:  # parameters are added to a fetch until it reaches the prefetch budget (l.452-488)
            batch.append(n)
            if sum(batch) >= limit:
                run(batch)
                batch = []
        if batch:
            run(batch)
        self.gathered[unit] = keys

    def _release(self, e, unit: int) -> None:
        for k in self.gathered.pop(unit, []):
            e.free(k)

    # -- the step ---------------------------------------------------------------------------------------
    def _step(self, e) -> None:
        """Stage 1-2 (stage_1_and_2.py l.3108-3137): the flat copy of the partition's gradients (l.3117), its
        fp32 form (l.3118), the copy freed, the gradient partition freed (l.3128), the optimizer on the fp32
        partition (its states made at the first step), the fp32 gradient freed. Stage 3: the same per
        sub-group (stage3.py l.2686), the gradient partitions kept (allocated at init)."""
        z = self.z
        sub = max(1, z.sub_group_numel)
        left = float(z.partition_numel) if z.stage == 3 else float(sub)
        per_elem = self.temporaries / sub
        while left > 0:
            n = int(min(left, sub))
            left -= n
            flat = e.alloc(int(n * z.grad_bytes))
            fp32 = e.alloc(n * 4)
            e.free(flat)
            marker = flat
            if z.stage < 3 and self.old_part is not None:
                e.free(self.old_part)
                marker = self.old_part
                self.old_part = None
            self.states_after += [(marker, n * 4), (marker, n * 4)]  # exp_avg, exp_avg_sq (torch AdamW, lazily)
            temps = e.allocs([int(x) for x in alloc_sequence._chunks(per_elem * n, n * 4)]) if per_elem else []
            e.frees(temps)
            e.free(fp32)

    def __call__(self, point: str, i: int, e, grads):
        if point == "grads":
            return self._grads(e, grads)
        stage3 = self.z.stage == 3
        if point == "forward_start":
            self.micro += 1
        if point == "forward_start" and stage3:
            self._gather(e, -1, self.root)
        elif point == "forward" and stage3:
            if i == 0:
                if not self.emb_kept:
                    self._release(e, -1)
            elif not self.kept[i - 1]:
                self._release(e, i - 1)
            self._gather(e, i, self.layer_gather[i])
        elif point == "forward_end" and stage3:
            if not self.kept[self.layers - 1]:
                self._release(e, self.layers - 1)
            if self.head_params:
                self._gather(e, -2, self.head_params)
            else:  # tied: lm_head is the embedding's weight
                self._gather(e, -1, self.root)
        elif point == "backward" and stage3:
            if i == self.layers - 1:
                self._release(e, -2)
                if not self.emb_kept:
                    self._release(e, -1)
            else:
                self._release(e, i + 1)
            self._gather(e, i, self.layer_gather[i])
        elif point == "backward_layers_end" and stage3:
            self._release(e, 0)
            self._gather(e, -1, self.root)
        elif point == "backward_end" and self.z.stage == 1:
            if self.micro == self.micro_steps:
                # the epilogue (reduce_gradients, l.958-980): each parameter in order through the bucket, its
                # whole gradient copied in and released; the rank's own copied into the gradient partition.
                # The bucket stays: the other ranks' parameters' .grad are views of it until the step frees them
                self._take(e, list(reversed(self.held)))
                self._flush(e)
                self.held = []
                self.old_part, self.part = self.part, None
                self.lo, self.fill, self.count = 0.0, 0.0, 0
        elif point == "backward_end":
            self._flush(e)
            if stage3:
                self._release(e, -1)
            else:
                # _release_ipg_buffers (l.924-931): the buckets go; the partition's storage lives on in the
                # parameters' .grad views until the step (or the next backward's partition replaces it)
                for k in self.buckets:
                    e.free(k)
                self.buckets = []
                if self.old_part is not None and self.part is not None:
                    e.free(self.old_part)
                    self.old_part = None
                if self.part is not None:
                    self.old_part, self.part = self.part, None
            self.hi, self.fill, self.count = self.total, 0.0, 0
        elif point == "zero_grad":
            if self.z.stage == 1:  # free_grad_in_param_list(params_not_in_partition), l.3103: the bucket's views
                for k in self.buckets:
                    e.free(k)
                self.buckets = []
            self._step(e)
            self.micro = 0
        return None


def zero_step_sequence(t: StepTerms, shape: SequenceShape, z: ZeroLayout, *,
                       workspace: tuple[int, ...] = ()) -> tuple[AllocSequence, tuple[int, ...],
                                                                 tuple[tuple[int, int], ...]] | None:
    """One rank's step under DeepSpeed ZeRO-2 or ZeRO-3 (no offload): (the sequence, blocks made and freed at
    init, (event index, bytes) of the optimizer states the first step makes), or None where it cannot be
    generated (``zero_supported``)."""
    if not zero_supported(t, z):
        return None
    ct = _zero_compute_terms(t, z)
    layers = len(t.activations.per_layer)
    total = ct.grads_total / z.grad_bytes
    thr = z.persistence_threshold
    layer_gather = [n for n in shape.layer_params if n > thr]
    root = [shape.embedding_params] if shape.embedding_params > thr else []
    head = [n for n in shape.head_params if n > thr]  # an untied lm_head; tied: the embedding again
    lsum = sum(layer_gather)
    hsum = sum(head) or sum(root)
    ck = 2 if t.gradient_checkpointing else 1
    # stage 3 keeps a module gathered on release when it is used again within max_reuse_distance elements
    # of the trace (partitioned_param_coordinator.py l.634-666): a layer's forward and its backward are
    # (L-1-i) later layers' forward, the head twice and their backward (with the recompute) apart
    kept = [(layers - 1 - i) * lsum * (1 + ck) + 2 * hsum < z.max_reuse_distance for i in range(layers)]
    emb_kept = layers * lsum * (1 + ck) + 2 * hsum < z.max_reuse_distance
    hook = _Zero(z, total_numel=total, layer_gather=[layer_gather] * layers, root=root, head=head,
                 layers=layers, kept=kept, emb_kept=emb_kept, temporaries=t.optimizer_temporaries,
                 micro_steps=2 if t.grad_accumulation else 1)
    seq = alloc_sequence.step_sequence(ct, shape, workspace=workspace, hook=hook)
    if seq is None:
        return None
    if z.stage == 3:
        # initialize_optimizer_states (stage3.py l.1304-1306, 1366-1368): a zero fp32 gradient buffer of the
        # largest sub-group, dropped at its end; then the IPG bucket (l.782) and the flat gradient partitions
        # (l.791), kept from init on (the latter lands in the former's cached block where it fits)
        init = (-int(min(z.sub_group_numel, z.partition_numel) * 4), int(t.zero_ipg_buckets), int(t.zero_step_grads))
        seq = replace(seq, persistent=seq.persistent + ((int(t.zero_persistent_params),)
                                                        if t.zero_persistent_params > SMALL else ()))
    else:
        # initialize_optimizer_states (stage_1_and_2.py l.937-951): a zero fp32 gradient of the partition is
        # made and dropped at init, its block cached
        init = (-int(z.partition_numel * 4),)
    where = {ev[1]: j for j, ev in enumerate(seq.step_events) if ev[0] < 0}
    states = tuple((where[k] + 1, n) for k, n in hook.states_after if k in where)
    return seq, init, states


def zero_replayed_overhead(t: StepTerms, shape: SequenceShape, z: ZeroLayout, *, workspace: tuple[int, ...] = (),
                           expandable: bool = False) -> tuple[int, int] | None:
    """(reserved - allocated at the high-water mark of two replayed ZeRO steps, all streams; the part of it in
    whole free segments where the summed allocated peaks, of any pool: what the allocator releases before an
    allocation fails, so what a card's room can cap), or None where the sequence cannot be generated. Cached."""
    return _zero_overhead(t, shape, z, tuple(workspace), expandable)


@lru_cache(maxsize=1024)
def _zero_overhead(t: StepTerms, shape: SequenceShape, z: ZeroLayout, workspace: tuple[int, ...],
                   expandable: bool) -> tuple[int, int] | None:
    got = zero_step_sequence(t, shape, z, workspace=workspace)
    if got is None:
        return None
    seq, init, states = got
    r = replay_streams(seq, expandable=expandable, init_free=init, first_step_at=states, releasable=True)
    return r.overhead, min(r.overhead, r.releasable_at_peak)
