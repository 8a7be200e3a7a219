"""Pipeline stages: which layers a stage holds and how many micro-batches it keeps in flight.

Layers are split evenly by default: ``num_layers / (pp x v)`` per model chunk; pipeline rank ``s``
holds chunks ``c = 0 .. v-1`` covering layers ``[(c·pp + s)·Lc, (c·pp + s + 1)·Lc)`` (Megatron-LM's
interleaved assignment; v = 1 is the plain split).

Uneven first and last stages follow Megatron-Core's ``num_layers_in_first_pipeline_stage`` /
``num_layers_in_last_pipeline_stage`` (NVIDIA/Megatron-LM @d98e8a64ddf34856e74b24714e3bedb2f5a39553,
``megatron/core/transformer/transformer_block.py`` ``get_num_layers_to_build`` and
``megatron/core/transformer/transformer_layer.py`` ``get_transformer_layer_offset``): the first stage
holds F layers, the last L, the ``M = num_layers - F - L`` others split evenly over the middle stages
(``pp - 1`` or ``pp - 2`` of them); every stage cuts its share into v equal chunks, and model chunk c
of the whole pipeline is ``F/v`` layers on rank 0, ``M/(v·mid)`` on each middle rank, ``L/v`` on the
last, in rank order (chunk c starts at layer ``c·(F + M + L)/v``). ``transformer_config.py``
``__post_init__`` refuses what does not split: F and L divisible by v, M by the middle stages, the
middle share by v, and middle layers without middle stages (or the reverse). The embedding sits on rank 0 (chunk 0), the final norm, the
output head and the loss on rank pp-1 (last chunk). With tied embeddings and pp > 1 the last stage
keeps its own copy of the embedding matrix as the head (Megatron-LM
``share_embeddings_and_output_weights``: the two copies' gradients are all-reduced).

Any other split is a *layout* (``parallel.pipeline_layout``): the decoder layers of each of the ``pp x v``
virtual stages in model order, virtual stage i on rank ``i % pp`` as its chunk ``i // pp`` (Megatron-Core
``pipeline_model_parallel_layout``, ``megatron/core/transformer/pipeline_parallel_layer_layout.py``
``PipelineParallelLayerLayout.__init__`` and ``get_layer_offset`` at the same commit; torch's and NeMo
Automodel's loop-style stage assignment, ``stage_ids_this_rank``). Stages may be empty (Megatron prints
"(empty stage)"); a rank needs one layer in all. The recipes' rules that produce layouts are
``megatron_layout`` (``account_for_embedding/loss_in_pipeline_split``) and ``automodel_layout``. When a rank's
chunks differ in size the walked chunk is its largest: every in-flight forward is counted at that chunk's
activations, an upper bound (exact when the chunks are equal, as in every split above).

In-flight micro-batches follow Megatron-Core's schedules
(``megatron/core/pipeline_parallel/schedules.py``, ``get_pp_rank_microbatches``): rank ``s`` runs
``W`` warm-up forwards before its first backward,

* 1F1B (PipeDream-Flush, Narayanan et al. 2021 §2.2.1): ``W = pp - s - 1`` micro-batches;
* interleaved (§2.2.2): ``W = 2·(pp - s - 1) + (v - 1)·pp`` model-chunk forwards;

and when ``W`` reaches the total (``m`` micro-batches, ``m·v`` chunk forwards) everything is warm-up.
Before its first backward a rank therefore holds ``min(W + 1, total)`` forwards' activations: rank 0
holds pp micro-batches under 1F1B and ``pp·v + pp - 1`` chunk forwards, i.e.
``pp·(1 + (pp-1)/(pp·v))`` micro-batches' worth of its layers, when interleaved (Korthikanti et al.
2022 §4.2.3). Each later backward starts with one forward fewer in flight at the end of the step.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.memory.parallel import ParallelLayout
from trainfit.spec.enums import PipelineSchedule


@dataclass(frozen=True, slots=True)
class Stage:
    """One pipeline rank: its layers and its schedule's in-flight forwards."""

    index: int
    layers: tuple[int, ...]
    """Global indices of every layer the rank holds (all its chunks)."""
    chunk_layers: tuple[int, ...]
    """The layers of one model chunk (its first): what one forward or backward walks."""
    first: bool
    """Holds the embedding."""
    last: bool
    """Holds the final norm, the head and the loss."""
    warmup: int
    """Forwards (model-chunk forwards when interleaved) before the first backward."""
    total_forwards: int
    """Forwards of one step: micro-batches x chunks per rank."""

    @property
    def in_flight_first_backward(self) -> int:
        """Forwards whose activations are alive when the first backward starts."""
        return min(self.warmup + 1, self.total_forwards)

    @property
    def in_flight_later_backward(self) -> int:
        """At the second backward (gradients already held): one forward fewer at most."""
        return max(1, min(self.warmup + 1, self.total_forwards - 1))


def warmup_forwards(layout: ParallelLayout, stage: int) -> int:
    """Megatron-Core's warm-up count for pipeline rank ``stage`` (see the module docstring)."""
    pp, v, m = layout.pp, layout.virtual_stages, layout.micro_batches
    if pp == 1:
        return 0
    if v == 1:
        return min(pp - stage - 1, m)
    return min(2 * (pp - stage - 1) + (v - 1) * pp, m * v)


def schedule_table(micro_batches: int, chunks: int, group: int) -> list[tuple[int, int]]:
    """Megatron-Core's interleaved order of (micro-batch, model chunk) forwards on every rank
    (``get_schedule_table``, NVIDIA/Megatron-LM @d98e8a64ddf34856e74b24714e3bedb2f5a39553
    megatron/core/pipeline_parallel/schedules.py l.989-1015): groups of ``group`` micro-batches
    (``microbatch_group_size_per_vp_stage``, pp by default), each group through every chunk in turn, the last group
    holding what is left. Backward k walks the micro-batch of entry k through the chunks in reverse
    (``get_model_chunk_id`` l.1244-1249)."""
    table: list[tuple[int, int]] = []
    for lo in range(0, micro_batches, group):
        hi = micro_batches if lo + group >= micro_batches else lo + group
        table += [(mb, c) for c in range(chunks) for mb in range(lo, hi)]
    return table


def first_chunk_forwards_in_flight(layout: ParallelLayout, stage: int, *, later: bool) -> int:
    """Forwards of model chunk 0 (on rank 0 the one holding the embedding) whose saved activations are alive when
    pipeline rank ``stage`` starts its first backward (``later``: its second). 1F1B has one chunk: every in-flight
    forward (``Stage.in_flight_first_backward`` / ``in_flight_later_backward``). Interleaved: the forwards run so far
    (the warm-up, the steady state's forward ``k + W`` before backward ``k``, all of them when everything is
    warm-up) less those already walked back, counted in ``schedule_table``'s order (group size pp)."""
    pp, v, m = layout.pp, layout.virtual_stages, layout.micro_batches
    warm, total = warmup_forwards(layout, stage), m * v
    k = 1 if later else 0
    if v == 1:
        return max(1, min(warm + 1, total - k))
    table = schedule_table(m, v, pp)
    run = table[:min(warm + 1 + k, total)]
    done = {(mb, v - 1 - c) for mb, c in table[:k]}
    return sum(1 for f in run if f[1] == 0 and f not in done)


def stage_layer_counts(num_layers: int, pp: int, *, first: int | None = None, last: int | None = None,
                       layout: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """Decoder layers of each pipeline rank (all its chunks): a ``layout``'s virtual stages summed per rank
    (stage i on rank ``i % pp``); else ``first`` / ``last`` on the end ranks when set (Megatron-Core
    ``num_layers_in_{first,last}_pipeline_stage``), the rest evenly over the others.
    Assumes the split was checked (``split_problem`` / ``layout_problem``)."""
    if layout is not None:
        return tuple(sum(layout[s::pp]) for s in range(pp))
    if pp == 1:
        return (num_layers,)
    mid = pp - (first is not None) - (last is not None)
    rest = num_layers - (first or 0) - (last or 0)
    each = rest // mid if mid else 0
    counts = [each] * pp
    if first is not None:
        counts[0] = first
    if last is not None:
        counts[-1] = last
    return tuple(counts)


def layout_rank_chunks(layout: tuple[int, ...], pp: int) -> tuple[tuple[tuple[int, ...], ...], ...]:
    """Per pipeline rank, the global layer indices of each of its chunks (chunk c of rank s = virtual stage
    ``c·pp + s``), for a layout of ``pp x v`` virtual-stage sizes in model order."""
    starts = [sum(layout[:i]) for i in range(len(layout))]
    v = len(layout) // pp
    return tuple(tuple(tuple(range(starts[c * pp + s], starts[c * pp + s] + layout[c * pp + s])) for c in range(v))
                 for s in range(pp))


def layout_problem(num_layers: int, layout: tuple[int, ...], pp: int) -> str | None:
    """Why a checked-shape layout (``spec.card`` validated its length and signs) does not fit a model of
    ``num_layers`` decoder layers, or None; a rank without any decoder layer (Megatron's standalone loss
    stage) is not modelled."""
    if sum(layout) != num_layers:
        return f"its {len(layout)} stages hold {sum(layout)} decoder layers, the model has {num_layers}"
    empty = [s for s, n in enumerate(stage_layer_counts(num_layers, pp, layout=layout)) if n == 0]
    if empty:
        return f"pipeline rank {empty[0]} holds no decoder layer (a rank without layers is not modelled)"
    return None


def megatron_layout(num_layers: int, pp: int, v: int, *, embedding: bool, loss: bool) -> tuple[int, ...]:
    """Megatron-Core's split with ``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split``
    (NVIDIA/Megatron-LM @d98e8a64ddf34856e74b24714e3bedb2f5a39553, ``megatron/core/transformer/transformer_block.py``
    ``get_num_layers_to_build``): the embedding and the loss each count as one layer, ``(num_layers + e + l) /
    (pp x v)`` per virtual stage, then the first virtual stage (rank 0, chunk 0) builds one decoder layer fewer
    for the embedding and the last (rank pp-1, chunk v-1) one fewer for the loss. Raises ``ValueError`` where
    Megatron-Core's asserts would (the padded count not divisible by pp, a rank's share by v, or a negative end)."""
    padded = num_layers + embedding + loss
    if padded % pp or (padded // pp) % v:
        raise ValueError(f"{num_layers} layers + {int(embedding) + int(loss)} do not split over {pp} stages x {v}"
                         " virtual stages (Megatron-Core get_num_layers_to_build)")
    each = padded // (pp * v)
    out = [each] * (pp * v)
    out[0] -= embedding
    out[-1] -= loss
    if min(out) < 0:
        raise ValueError("not enough layers in the first or last virtual stage (Megatron-Core)")
    return tuple(out)


def nanotron_layout(num_layers: int, pp: int, *, layer_cost: float, head_cost: float) -> tuple[int, ...]:
    """nanotron's split of a Llama's ``num_layers`` decoder layers over ``pp`` stages, balanced by its own block costs
    (huggingface/nanotron @c252843039cc167ff8d6894b87172af4637eb14b): ``build_model`` (src/nanotron/models/base.py
    l.190-236) walks the pipeline blocks in model order (the embedding, the decoder layers, the final norm, the
    lm_head, the fp32 cast, the loss: ``LlamaModel`` / ``LlamaForTraining`` l.790-993), gives each to the current rank
    and moves to the next rank once the cumulative cost exceeds ``total x (rank + 1) / pp``, so the block that crosses
    a threshold stays on the rank before it. The costs are ``get_block_compute_costs`` (src/nanotron/models/llama.py
    l.913-925): a decoder layer ``4 x heads x head_dim x hidden + 3 x ffn x hidden`` (``layer_cost``), the lm_head
    ``vocab x hidden`` (``head_cost``), every other block 0; tied or not, the head is costed. Returns the decoder layers
    per rank (one chunk each). Raises ``ValueError`` if a rank would hold no decoder layer."""
    if pp <= 1:
        return (num_layers,)
    costs = [0.0] + [float(layer_cost)] * num_layers + [0.0, float(head_cost)]
    total = sum(costs)
    thresholds = [total * ((r + 1) / pp) for r in range(pp)]  # as base.py l.225 computes them
    counts = [0] * pp
    rank, cumulative = 0, 0.0
    for i, cost in enumerate(costs):
        if 1 <= i <= num_layers:
            counts[rank] += 1
        cumulative += cost
        if cumulative > thresholds[rank]:
            rank += 1
    if min(counts) == 0:
        raise ValueError(f"nanotron's cost split leaves a pipeline rank without decoder layers: {counts}")
    return tuple(counts)


def automodel_layout(num_layers: int, pp: int, v: int) -> tuple[int, ...]:
    """NeMo Automodel's split of ``num_layers`` over ``pp x v`` stages (NVIDIA-NeMo/Automodel
    @2861c4143cd335539213b1b6d0c890cb17682444, ``nemo_automodel/components/distributed/pipelining/functional.py``
    ``generate_hf_model_fqn_per_model_part``): ``num_layers // stages`` each and one more on the first
    ``num_layers % stages``; ``stage_ids_this_rank`` (style "loop") puts stage i on rank ``i % pp``, as the
    layout does. The embedding goes with stage 0, the norm and lm_head with the last stage."""
    stages = pp * v
    if stages > num_layers:
        raise ValueError(f"{stages} stages exceed the {num_layers} layers (NeMo Automodel)")
    base, extra = divmod(num_layers, stages)
    return tuple(base + (i < extra) for i in range(stages))


def split_problem(num_layers: int, pp: int, v: int, *, first: int | None, last: int | None) -> str | None:
    """Why ``num_layers`` cannot be split over ``pp`` ranks x ``v`` chunks (Megatron-Core's checks), or None."""
    if pp == 1:
        return None
    if first is None and last is None:
        return None if num_layers % (pp * v) == 0 else f"{pp} stages x {v} virtual stages do not divide {num_layers} layers"
    for name, n in (("first", first), ("last", last)):
        if n is not None and n % v:
            return f"the {name} stage's {n} layers do not divide into {v} virtual stages"
    mid = pp - (first is not None) - (last is not None)
    rest = num_layers - (first or 0) - (last or 0)
    if rest < 0 or bool(rest) != bool(mid):
        return f"{rest} layers are left for {mid} middle stages"
    if mid and rest % (mid * v):
        return f"the {rest} middle layers do not divide over {mid} middle stages x {v} virtual stages"
    return None


def stage_of(layout: ParallelLayout, num_layers: int, stage: int) -> Stage:
    """Pipeline rank ``stage`` of a model of ``num_layers`` decoder layers (see the module docstring)."""
    pp, v = layout.pp, layout.virtual_stages
    if layout.stage_layout is not None and pp > 1:
        chunks = list(layout_rank_chunks(layout.stage_layout, pp)[stage])
        walked = max(chunks, key=len)  # the first of the largest (see the module docstring)
    else:
        counts = stage_layer_counts(num_layers, pp, first=layout.first_stage_layers, last=layout.last_stage_layers)
        per_chunk = [n // v for n in counts]  # layers of one model chunk on each rank
        span = sum(per_chunk)  # layers of one virtual stage over the whole pipeline
        start = sum(per_chunk[:stage])
        chunks = [tuple(range(c * span + start, c * span + start + per_chunk[stage])) for c in range(v)]
        walked = chunks[0]
    return Stage(
        index=stage,
        layers=tuple(i for ch in chunks for i in ch),
        chunk_layers=walked,
        first=stage == 0,
        last=stage == pp - 1,
        warmup=warmup_forwards(layout, stage),
        total_forwards=layout.micro_batches * v,
    )


def schedule_note(layout: ParallelLayout) -> str:
    """One line: the schedule, what rank 0 keeps in flight and an uneven split's end stages."""
    s0 = Stage(index=0, layers=(), chunk_layers=(), first=True, last=layout.pp == 1, warmup=warmup_forwards(layout, 0),
               total_forwards=layout.micro_batches * layout.virtual_stages)
    uneven = ""
    if layout.stage_layout is not None and layout.pp > 1:
        counts = stage_layer_counts(sum(layout.stage_layout), layout.pp, layout=layout.stage_layout)
        uneven = (f"; layout: {list(layout.stage_layout)} decoder layers per virtual stage (stage i on rank i %"
                  f" {layout.pp}), {list(counts)} per rank; a rank's in-flight forwards are counted at its largest"
                  " chunk")
    elif layout.first_stage_layers is not None or layout.last_stage_layers is not None:
        ends = [f"{which} stage {n} layers" for which, n in (("first", layout.first_stage_layers),
                                                            ("last", layout.last_stage_layers)) if n is not None]
        uneven = (f"; uneven split: {', '.join(ends)}, the rest even over the middle stages (Megatron-Core"
                  " num_layers_in_first/last_pipeline_stage)")
    if layout.schedule is PipelineSchedule.INTERLEAVED and layout.virtual_stages > 1:
        what = (f"interleaved, {layout.virtual_stages} chunks per rank: rank 0 holds {s0.in_flight_first_backward}"
                f" chunk forwards in flight (Narayanan et al. 2021 §2.2.2, Megatron-Core get_pp_rank_microbatches)")
    else:
        what = (f"1F1B: rank 0 holds {s0.in_flight_first_backward} micro-batches in flight"
                " (pp - rank, at most the micro-batches; Narayanan et al. 2021 §2.2.1)")
    return (f"pipeline {layout.pp} stages, {layout.micro_batches} micro-batches per step, {what}; the first stage"
            " holds the embedding, the last the final norm, head, logits and loss" + uneven)
