"""Allocator and device overheads: from a phase's live tensors (allocated) to torch's reserved
figure (rounding, fragmentation, the step's high-water mark) and to what nvidia-smi shows (CUDA
context, NCCL, memory outside the caching allocator, resident paged optimizer states).

Pure: no torch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from functools import lru_cache

from trainfit.memory import alloc_sequence, stream_pools
from trainfit.memory.logits import shifted_slice_copies
from trainfit.memory.overhead import cublas_workspace_bytes, overhead_bytes
from trainfit.memory.params import param_tensors
from trainfit.memory.phases import PhasePeak, StepTerms
from trainfit.memory.sharding import Sharding
from trainfit.memory.stream_pools import PoolPoint, capped_reserved_bytes, fsdp_supported, stream_pool_bytes
from trainfit.plan.resolve import model_dtype
from trainfit.plan.result import PhaseResult
from trainfit.spec.card import AllocatorKind, RunCard
from trainfit.spec.enums import FSDP_STRATEGIES, ZERO_STAGES, ComputeDtype, LossKernel, Method, Offload, Phase
from trainfit.spec.model import ModelSpec
from trainfit.units import MIB

PERSISTENT = frozenset({"weights", "adapter_weights", "master_weights", "optimizer_states", "ddp_buckets", "gradients",
                        "zero3_persistent_params", "zero_ipg_buckets", "reference_weights"})
"""Components that persist across the phases of a step. ``reference_weights`` (a frozen reference copy resident on
the GPU: DPO's ``gpu`` placement, the RL trainer group's reference) is allocated once, when the trainer builds and
places it (TRL's ``DPOTrainer.__init__``: ``self.ref_model = create_model_from_path(...)`` then
``prepare_deepspeed`` / ``prepare_fsdp`` / ``accelerator.prepare_model(self.ref_model, evaluation_mode=True)``,
huggingface/trl trl/trainer/dpo_trainer.py l.898-936 @f2cd57710ae345ea6428ae95363267fcf38a3dc8; ``sync_ref_model``
copies into it in place), and never freed: its blocks never return to the caching allocator's free pool, so no
later request splits them and it is no fragmentation source, as the policy's weights are not (PyTorch's CUDA
caching allocator reuses and splits freed cached blocks only: https://pytorch.org/docs/stable/notes/cuda.html,
"Memory management" and ``max_split_size_mb``). Before, it counted as transient, adding the fitted fragmentation
share of it to reserved (Qwen3-1.7B DPO on one H100: 20.61 -> 20.00 GiB reserved; no published memory row and no
golden figure moves)."""
_NOT_TRANSIENT = PERSISTENT | {"activations"}
"""Components whose blocks are reused step after step (not fragmentation sources)."""
OUTSIDE_ALLOCATOR = ("paged_optimizer_states", "rollout_engine")
PAGEABLE = ("paged_optimizer_states",)
"""Components that nvidia-smi sees but torch's caching allocator does not (CUDA managed memory)."""

_STEP_PHASES = (
    frozenset({Phase.FORWARD, Phase.BACKWARD, Phase.OPTIMIZER_STEP}),
    frozenset({Phase.ACTOR_FORWARD, Phase.ACTOR_BACKWARD, Phase.ACTOR_OPTIMIZER_STEP}),
    frozenset({Phase.CRITIC_FORWARD, Phase.CRITIC_BACKWARD, Phase.CRITIC_OPTIMIZER_STEP}),
)
"""Phases of one model's repeated training step: the caching allocator keeps every block the step
ever reserved, so from the second step on each of them shows the step's highest reserved figure."""


def phase_results(
    peaks, *, spec: ModelSpec, sharding: Sharding, card: RunCard, capacity: float, at_least: float = 0.0,
    compute_capability: str | None = None, terms: StepTerms | None = None,
) -> list[PhaseResult]:
    """Overheads per phase. The caching allocator never returns blocks within a run, so the
    fragmentation a step leaves is carried by every training phase: it is taken from the largest
    transient of the whole step, not of each phase alone; and each phase of a repeated step reports
    the step's reserved high-water mark (measured: ``benchmarks/gpu_calibration.md``).

    With ``terms`` (a plain SFT step on one data-parallel rank), reserved comes from replaying the
    step's allocation sequence through the caching-allocator model (``trainfit.memory.alloc_sequence``):
    reserved - allocated at its high-water mark is added to the step's highest allocated phase. An FSDP
    step (full sharding, no offload) is replayed per stream (``trainfit.memory.stream_pools``): the
    compute stream's sequence with FSDP2's all-gather and reduce-scatter buffers, each stream's blocks
    in its own pool; where that sequence cannot be generated the fitted share stands with the pools'
    lower bound beside it. A DeepSpeed ZeRO step without offload is replayed the same way
    (``stream_pools.zero_step_sequence``: the IPG bucket, its reductions on DeepSpeed's reduction stream,
    ZeRO-3's gathered parameters on the all-gather stream, the flat fp32 step); elsewhere (offload,
    ZeRO-1 with ``overlap_comm``) the fitted share stands.

    ``capacity``: the card's room, the CUDA total (``GpuSpec.usable_memory_bytes``, what ``Plan.fits`` is judged
    against): managed (paged) states stay resident and the allocator frees idle cached blocks or unmaps free pages
    only up to the memory CUDA can hand out, which is that total, not nvidia-smi's."""
    large = _large_tensor_count(spec, sharding, card)
    step_transient = max([at_least] + [_transient(p) for p in peaks if p.phase is not Phase.LOAD])
    out = [
        _with_overhead(p, large_tensors=large, world_size=sharding.world_size, capacity=capacity,
                       transient=0.0 if p.phase is Phase.LOAD else step_transient,
                       compute_capability=compute_capability)
        for p in peaks
    ]
    replayed = replayed_overhead(terms, spec=spec, card=card, compute_capability=compute_capability)
    if replayed is not None:
        out = _with_replayed(out, replayed, capacity=capacity, expandable=_replay_process(card, compute_capability)[1])
    elif terms is not None and _side_stream_pools(sharding, card):
        streams = fsdp_replayed_overhead(terms, spec=spec, card=card, sharding=sharding,
                                         compute_capability=compute_capability)
        if streams is not None:
            out = _with_replayed(out, streams[0], capacity=capacity, capped=True, side_pools=streams[1],
                                 expandable=_replay_process(card, compute_capability)[1])
        else:
            out = _with_stream_pools(out, terms, capacity=capacity, one_rank=sharding.one_rank_fsdp2)
    elif terms is not None and _zero_streams(sharding, card):
        streams = zero_replayed_overhead(terms, spec=spec, card=card, sharding=sharding,
                                         compute_capability=compute_capability)
        if streams is not None:
            out = _with_replayed(out, streams[0], capacity=capacity, capped=True, side_pools=streams[1])
    for group in _STEP_PHASES:
        members = [i for i, r in enumerate(out) if r.phase in group]
        if len(members) < 2:
            continue
        high = max(out[i].reserved for i in members)
        for i in members:
            r = out[i]
            if r.reserved == high:
                continue
            base = r.device - r.paged_resident + (high - r.reserved)
            resident = _paged_resident(r.components, capacity=capacity, device=base)
            out[i] = PhaseResult(r.phase, r.at, r.components, r.allocated, high, base + resident, r.overhead, resident)
    return out


_REPLAY: ContextVar[bool] = ContextVar("trainfit_replay_reserved", default=True)


@contextmanager
def fitted_reserved() -> Iterator[None]:
    """Plans made inside take reserved from the fitted fragmentation share, never from the replay
    (what the share's own fit on the measured cases needs: ``trainfit.accuracy.gpu``)."""
    token = _REPLAY.set(False)
    try:
        yield
    finally:
        _REPLAY.reset(token)


_FLOOR: ContextVar[list[int] | None] = ContextVar("trainfit_replay_floor", default=None)


@contextmanager
def replay_floor() -> Iterator[list[int]]:
    """Plans made inside take the replay's overhead as 0 wherever the replay would run, without
    replaying: reserved is then the step's highest allocated, a lower bound on the replayed figure
    (the replay's reserved - allocated is never negative, and reserved, device and the peak only grow
    with it). Each such plan appends to the yielded list: what ``fit`` screens its candidates with
    before replaying only those whose rank the replay can decide (``trainfit.fit_search``)."""
    token = _FLOOR.set([])
    try:
        yield _FLOOR.get()  # type: ignore[misc]
    finally:
        _FLOOR.reset(token)


def _screening() -> bool:
    """Inside ``replay_floor``: record that this plan would replay, and skip the replay."""
    floor = _FLOOR.get()
    if floor is None:
        return False
    floor.append(1)
    return True


def card_sequence_shape(terms: StepTerms, *, spec: ModelSpec, card: RunCard) -> alloc_sequence.SequenceShape:
    """The tensor shapes of the card's step that every replay generates its sequence from."""
    shape = _sequence_shape(spec, card.batch.micro_batch_size, card.batch.seq_len, card.attention,
                            card.loss.chunked, terms.logits.retained > 0,
                            card.precision.optimizer_impl.value == "for_loop")
    if card.loss.kernel is LossKernel.FLASH_ATTN and shape.logit_elements and spec.head_outputs is None:
        # flash-attn's cross-entropy allocates as memory.logits.flash_attn_ce_bytes says
        shape = replace(shape, fused_ce_rows=card.batch.micro_batch_size * card.batch.seq_len,
                        fused_ce_inplace=card.loss.inplace_backward)
    elif card.loss.compiled and shape.logit_elements and spec.head_outputs is None:
        from trainfit.plan.terms import loss_input_copy_of

        # the compiled eager loss allocates as memory.logits.compiled_ce_bytes says: flash-attn's order, two saved rows
        shape = replace(shape, fused_ce_rows=card.batch.micro_batch_size * card.batch.seq_len, fused_ce_compiled=True,
                        fused_ce_slice_backward=loss_input_copy_of(card).slice_backward)
    elif not card.loss.upcast and shape.logit_elements and spec.head_outputs is None:
        # the model's own compute-dtype loss allocates as memory.logits.compute_dtype_ce_bytes says
        shape = replace(shape, ce_compute_dtype=True,
                        ce_compute_dtype_bytes=4 if model_dtype(card) is ComputeDtype.FP32 else 2,
                        ce_shift_copy=shifted_slice_copies(micro_batch_size=card.batch.micro_batch_size))
    return shape


def _replay_process(card: RunCard, compute_capability: str | None) -> tuple[tuple[int, int], bool]:
    """(the two cuBLAS workspaces a replay's process makes, whether its allocator uses expandable segments)."""
    ws = int(cublas_workspace_bytes(compute_capability=compute_capability) // 2)
    return (ws, ws), card.hardware.allocator is AllocatorKind.EXPANDABLE_SEGMENTS


def replayed_overhead(
    terms: StepTerms | None, *, spec: ModelSpec, card: RunCard, compute_capability: str | None = None,
) -> int | None:
    """Reserved beyond allocated at the step's high-water mark, from the replayed allocation sequence;
    None where it cannot be generated (the fitted share stands); 0 inside ``replay_floor``."""
    if (terms is None or not _REPLAY.get() or card.method is not Method.SFT
            or not alloc_sequence.supported(terms)):
        return None
    if _screening():
        return 0
    shape = card_sequence_shape(terms, spec=spec, card=card)
    workspace, expandable = _replay_process(card, compute_capability)
    return alloc_sequence.replayed_overhead(terms, shape, workspace=workspace,
                                            expandable=expandable)


def fsdp_replayed_overhead(
    terms: StepTerms, *, spec: ModelSpec, card: RunCard, sharding: Sharding, compute_capability: str | None = None,
) -> tuple[int, int] | None:
    """(reserved beyond allocated at the FSDP step's high-water mark, the part the side streams' pools hold
    idle), from the per-stream replay (``stream_pools.fsdp_replayed_overhead``); None where the sequence
    cannot be generated; (0, 0) inside ``replay_floor``."""
    if not _REPLAY.get() or card.method is not Method.SFT or not fsdp_supported(terms):
        return None
    if _screening():
        return 0, 0
    shape = card_sequence_shape(terms, spec=spec, card=card)
    workspace, expandable = _replay_process(card, compute_capability)
    return stream_pools.fsdp_replayed_overhead(terms, shape, world_size=sharding.weights_divisor,
                                               workspace=workspace, expandable=expandable,
                                               one_rank=sharding.one_rank_fsdp2)


def _zero_streams(sharding: Sharding, card: RunCard) -> bool:
    """DeepSpeed ZeRO without offload: the step ``stream_pools.zero_step_sequence`` generates (ZeRO-1 only
    without ``overlap_comm``: ``stream_pools.zero_supported``)."""
    return sharding.strategy in ZERO_STAGES and card.parallel.offload is Offload.NONE


def zero_layout(terms: StepTerms, *, spec: ModelSpec, card: RunCard, sharding: Sharding,
                shape: alloc_sequence.SequenceShape) -> stream_pools.ZeroLayout | None:
    """The rank's ZeRO layout from the card's resolved DeepSpeed config (``trainfit.memory.deepspeed``) and the
    step's terms (the fp32 group and gradient partition sizes the planner computed); None without a step cast."""
    from trainfit.plan.terms import zero_config_of

    stage = ZERO_STAGES[sharding.strategy]
    cfg = zero_config_of(card, spec, stage)
    fp32 = terms.zero_step_fp32_grad
    if fp32 <= 0 or not cfg.contiguous_gradients:
        return None
    sub = fp32 / 4.0
    grad_bytes = max(1, round((terms.zero_step_cast - fp32) / sub))
    dp = max(1, sharding.shard_group)
    part = terms.zero_step_grads / grad_bytes if stage == 3 else sub
    numel = shape.embedding_params + sum(shape.layer_params) * spec.num_layers + sum(shape.head_params)
    pbytes = terms.weights * sharding.weights_divisor / numel if numel else 2.0
    return stream_pools.ZeroLayout(
        stage=stage, dp=dp, grad_bytes=int(grad_bytes), bucket_numel=int(cfg.reduce_bucket_size),
        overlap_comm=cfg.overlap_comm, partition_numel=int(part), sub_group_numel=int(sub),
        param_bytes=round(pbytes, 3), prefetch_numel=int(cfg.prefetch_bucket_size),
        max_reuse_distance=int(cfg.max_reuse_distance), persistence_threshold=int(cfg.param_persistence_threshold))


def zero_replayed_overhead(
    terms: StepTerms, *, spec: ModelSpec, card: RunCard, sharding: Sharding, compute_capability: str | None = None,
) -> tuple[int, int] | None:
    """(reserved beyond allocated at the ZeRO step's high-water mark, the part DeepSpeed's side streams' pools
    hold idle), from the per-stream replay (``stream_pools.zero_replayed_overhead``); None where the sequence
    cannot be generated (the fitted share stands); (0, 0) inside ``replay_floor``."""
    if not _REPLAY.get() or card.method is not Method.SFT:
        return None
    shape = card_sequence_shape(terms, spec=spec, card=card)
    z = zero_layout(terms, spec=spec, card=card, sharding=sharding, shape=shape)
    if z is None or not stream_pools.zero_supported(terms, z):
        return None
    if _screening():
        return 0, 0
    workspace, expandable = _replay_process(card, compute_capability)
    return stream_pools.zero_replayed_overhead(terms, shape, z, workspace=workspace,
                                               expandable=expandable)


def _with_replayed(out: list[PhaseResult], overhead: int, *, capacity: float, capped: bool = False,
                   side_pools: int = 0, expandable: bool = False) -> list[PhaseResult]:
    """Every training phase of the step shows the step's highest allocated + the replay's overhead.
    ``capped``: cached blocks of other streams' pools are idle at the peak, and the allocator frees
    idle cached blocks before an allocation fails, so those pools' share stays within the card's room
    (``stream_pools.capped_reserved_bytes``); allocated and the compute stream's own fragmentation are
    never capped. ``side_pools``: the part of
    ``overhead`` that FSDP's side streams' pools hold idle (``overhead.stream_pools``; the rest beyond
    rounding is ``fragmentation``)."""
    for group in _STEP_PHASES:
        members = [i for i, r in enumerate(out) if r.phase in group]
        if not members:
            continue
        high = max(out[i].allocated for i in members) + overhead
        for i in members:
            r = out[i]
            if capped:
                # only the side streams' pools are idle whole segments at the peak, which the allocator
                # frees before an allocation fails; the compute stream's fragmentation sits in split
                # segments it cannot free, so it is never capped away
                outside = r.device - r.paged_resident - r.reserved
                top = max(out[j].allocated for j in members)
                idle = min(side_pools, overhead)
                high = capped_reserved_bytes(reserved_bytes=top + overhead - idle, extra_bytes=idle,
                                             room_bytes=capacity - outside)
            if expandable:
                # expandable segments: the replay's free space is whole free pages of the segments, which
                # ``release_cached_blocks`` unmaps before a mapping fails (pytorch/pytorch
                # c10/cuda/CUDACachingAllocator.cpp @e9865f53f2566a471b5130d31034807e14755851 ``malloc``: alloc_block,
                # then release_available_cached_blocks / release_cached_blocks and a retry; ``release_blocks``
                # unmaps an expandable segment's free blocks, as memory.expandable_segments reads it), so it stays
                # within the card's room; the rounding inside live blocks does not
                outside = r.device - r.paged_resident - r.reserved
                top = max(out[j].allocated for j in members)
                kept = top + min(r.overhead.rounding, overhead)
                high = capped_reserved_bytes(reserved_bytes=kept, extra_bytes=max(0.0, high - kept),
                                             room_bytes=capacity - outside)
            reserved = max(high, r.allocated)
            base = r.device - r.paged_resident + (reserved - r.reserved)
            resident = _paged_resident(r.components, capacity=capacity, device=base)
            rounding = min(r.overhead.rounding, reserved - r.allocated)
            pools = min(side_pools, reserved - r.allocated - rounding)
            oh = replace(r.overhead, rounding=rounding, fragmentation=reserved - r.allocated - rounding - pools,
                         replayed=True, stream_pools=pools)
            out[i] = PhaseResult(r.phase, r.at, r.components, r.allocated, reserved, base + resident, oh, resident)
    return out


@lru_cache(maxsize=1024)
def _sequence_shape(spec: ModelSpec, b: int, s: int, attention, chunked: bool, full_logits: bool,
                    per_tensor_step: bool = False):
    from trainfit.memory.attention import runs_eager

    h, L = spec.hidden_size, spec.num_layers
    layer: list[int] = []
    head = [h]
    for g in param_tensors(spec):
        numel = 1
        for d in g.shape:
            numel *= d
        if g.shape == (spec.vocab_size, h):
            head += [numel] * (g.count - 1)  # an untied lm_head (the first is the embedding)
        elif g.count >= L and L:
            layer += [numel] * (g.count // L)
        else:
            head += [numel] * g.count
    tokens = b * s
    v = spec.vocab_size if spec.head_outputs is None else spec.head_outputs
    eager = runs_eager(spec.family, attention)
    return alloc_sequence.SequenceShape(
        layer_params=tuple(layer), embedding_params=spec.vocab_size * h, head_params=tuple(head),
        residual_bytes=tokens * h * 2, mlp_bytes=tokens * (spec.intermediate_size or 0) * 2, logit_elements=tokens * v if (full_logits and not chunked) else 0,
        input_bytes=2 * tokens * 8, optimizer_per_tensor=per_tensor_step, eager_score_bytes=b * spec.num_attention_heads * s * s * 2 if eager else 0,
        q_bytes=tokens * (spec.q_dim or 0) * 2, kv_bytes=tokens * (spec.kv_dim or 0) * 2, qk_norm=bool(spec.qk_norm),
    )


def _side_stream_pools(sharding: Sharding, card: RunCard) -> bool:
    """FSDP (1 and 2) gathers parameters on its all-gather stream and reduce-scatters gradients on its
    own stream (``trainfit.memory.stream_pools``); with offload the sharded gradients go to host."""
    return (sharding.strategy in FSDP_STRATEGIES and sharding.gathers_params
            and card.parallel.offload is Offload.NONE)


def _with_stream_pools(out: list[PhaseResult], t: StepTerms, *, capacity: float,
                       one_rank: bool = False) -> list[PhaseResult]:
    """Every training phase's reserved + what the side-stream pools keep idle at the step's peak
    (a step-wide figure, like the rest of reserved), capped where the allocator would free it.

    ``one_rank`` (FSDP2 on a one-rank mesh, ``Sharding.one_rank_fsdp2``): no all-gather runs, and
    ``wait_for_unshard`` allocates the unsharded parameters on the current (compute) stream (torch 2.13.0
    ``_fsdp_param_group.py`` l.426-448, pytorch/pytorch@cf30153c4c131c8164ee7798e5022d810682e2cb), so the gathered
    units are no side pool's; ``foreach_reduce`` still allocates ``reduce_output`` (the sharded gradients) on the
    reduce-scatter stream (``_fsdp_collectives.py`` l.610-616), so the gradient pool stays."""
    group = _STEP_PHASES[0]
    members = [i for i, r in enumerate(out) if r.phase in group]
    if not members:
        return out
    points = [PoolPoint(allocated_bytes=out[i].allocated,
                        gathered_bytes=0.0 if one_rank else out[i].components.get("fsdp_buffers", 0.0),
                        gradient_bytes=out[i].components.get("gradients", 0.0)) for i in members]
    extra = stream_pool_bytes(points=points,
                              gathered_pool_bytes=0.0 if one_rank
                              else t.fsdp_root_unit + t.fsdp_all_gathered + t.fsdp_layer_units,
                              gradient_pool_bytes=t.grads_total)
    if extra <= 0:
        return out
    for i in members:
        r = out[i]
        outside = r.device - r.paged_resident - r.reserved
        reserved = capped_reserved_bytes(reserved_bytes=r.reserved, extra_bytes=extra, room_bytes=capacity - outside)
        if reserved == r.reserved:
            continue
        base = r.device - r.paged_resident + (reserved - r.reserved)
        resident = _paged_resident(r.components, capacity=capacity, device=base)
        oh = replace(r.overhead, stream_pools=extra if reserved == r.reserved + extra else reserved - r.reserved)
        out[i] = PhaseResult(r.phase, r.at, r.components, r.allocated, reserved, base + resident, oh, resident)
    return out


def _paged_resident(components: dict[str, float], *, capacity: float, device: float) -> float:
    """Managed (paged) memory stays resident only as far as the card has room beside ``device``
    (everything else on it); the rest pages to host."""
    pageable = sum(components.get(k, 0.0) for k in PAGEABLE)
    return min(pageable, max(0.0, capacity - device)) if pageable else 0.0


def _with_overhead(
    peak: PhasePeak, *, large_tensors: int, world_size: int, capacity: float, transient: float,
    compute_capability: str | None = None,
) -> PhaseResult:
    outside = sum(peak.components.get(k, 0.0) for k in OUTSIDE_ALLOCATOR)
    pageable = sum(peak.components.get(k, 0.0) for k in PAGEABLE)
    loading = peak.phase is Phase.LOAD
    oh = overhead_bytes(
        large_tensors=large_tensors if not loading else large_tensors // 4,
        transient_bytes=transient,
        world_size=world_size if not loading else 1,
        compute_capability=compute_capability,
        after_first_matmul=not loading,
    )
    # the cuBLAS workspaces come from the caching allocator: they are part of the allocated figure
    allocated = peak.allocated - outside + oh.cublas_workspace
    reserved = allocated + oh.rounding + oh.fragmentation
    device = reserved + oh.cuda_context + oh.nccl_buffers + (outside - pageable)
    resident = _paged_resident(peak.components, capacity=capacity, device=device)
    comps = {k: v for k, v in peak.components.items() if v}
    if oh.cublas_workspace:
        comps["cublas_workspace"] = oh.cublas_workspace
    return PhaseResult(peak.phase, peak.at, comps, allocated, reserved, device + resident, oh, resident)


def _transient(peak: PhasePeak) -> float:
    return sum(v for k, v in peak.components.items() if k not in _NOT_TRANSIENT and k not in OUTSIDE_ALLOCATOR)


def _large_tensor_count(spec: ModelSpec, sharding: Sharding, card: RunCard) -> int:
    return _large_tensors(spec, sharding.weights_divisor, card.scope.value == "full")


@lru_cache(maxsize=4096)
def _large_tensors(spec: ModelSpec, divisor: int, full: bool) -> int:
    """Live tensors over 1 MiB: parameter shards (with two states and a gradient when fully trained)
    plus about a dozen saved activations per layer."""
    big = sum(t.count for t in param_tensors(spec) if t.numel * 2 / divisor > MIB)
    states = 1 + (2 if full else 0) + 1  # weights, two states, gradient
    return big * states + 12 * spec.num_layers
