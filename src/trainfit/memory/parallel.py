"""Model parallelism: the layout of one training replica and the shard one rank holds.

A run's training GPUs form a grid ``dp x cp x pp x tp`` (Megatron-LM's order; experts regroup the
``dp x cp`` ranks into ``ep`` expert groups). Every rank of a (tp, cp, ep, dp) slice holds the
same bytes, so ranks differ only by their pipeline stage; rank tp 0 holds the larger vocabulary
shard when tp does not divide the vocabulary (``torch.chunk`` and Megatron give the remainder to the
first ranks), so the worst rank is always ``(tp 0, pp s, cp 0, ep 0, dp 0)`` for some stage s.

Tensor parallel is modelled as a *shard spec*: one TP rank of a transformer layer is itself a layer
with ``heads / tp`` attention heads, ``kv_heads / tp`` KV heads, ``intermediate / tp`` MLP width and
``vocab / tp`` embedding rows, while the norms and every row-parallel bias stay whole (replicated),
exactly as Megatron-LM's ``ColumnParallelLinear``/``RowParallelLinear`` and torch's
``ColwiseParallel``/``RowwiseParallel`` split them (Shoeybi et al. 2019, §3). Running the
project's per-op parameter and activation models on that spec gives the rank's bytes with no second
formula. KV heads fewer than tp are replicated, one head per rank group (vLLM and Megatron-Core's
GQA replication), so their weights count ``head_dim`` per rank.

Refusals (``CardError``, one line each): layers not divisible by ``pp x virtual_stages``, attention
heads or KV heads not compatible with tp, Ulysses cp not dividing the heads of a TP rank, experts
not divisible by ep, expert width not divisible by expert tp, quantized weights with model
parallelism, LoRA with expert parallelism, tensor parallelism of whole-width q/k norms (OLMo 2).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from math import ceil

from trainfit.errors import CardError
from trainfit.memory.params import param_breakdown
from trainfit.spec.card import RunCard, divisors
from trainfit.spec.enums import ContextParallelKind, Dtype, PipelineSchedule, Scope
from trainfit.spec.model import LinearAttentionSpec, ModelSpec


@dataclass(frozen=True, slots=True)
class ParallelLayout:
    """Sizes of the parallel dimensions of the training GPUs (``dp`` is what the others leave)."""

    tp: int = 1
    sp: bool = False
    """Sequence parallel: norms and the residual stream on ``tokens / tp`` (needs tp > 1)."""
    cp: int = 1
    cp_kind: ContextParallelKind = ContextParallelKind.RING
    pp: int = 1
    schedule: PipelineSchedule = PipelineSchedule.ONE_F_ONE_B
    virtual_stages: int = 1
    """Model chunks per pipeline rank (interleaved schedule)."""
    ep: int = 1
    etp: int = 1
    """Tensor parallel size inside each expert."""
    dp: int = 1
    micro_batches: int = 1
    """Micro-batches per optimizer step (batch.grad_accum): what a pipeline schedule interleaves."""
    first_stage_layers: int | None = None
    """Decoder layers of pipeline rank 0 (Megatron-Core ``num_layers_in_first_pipeline_stage``); None: even split."""
    last_stage_layers: int | None = None
    """Decoder layers of the last pipeline rank (``num_layers_in_last_pipeline_stage``); None: even split."""
    stage_layout: tuple[int, ...] | None = None
    """Decoder layers of every virtual stage in model order, ``pp x virtual_stages`` of them, stage i on rank
    ``i % pp`` (``parallel.pipeline_layout``, Megatron-Core ``pipeline_model_parallel_layout``); None: the
    even split or the end-stage sizes above."""

    @property
    def trivial(self) -> bool:
        """No model parallelism at all: the planner's single-replica path applies unchanged."""
        return self.tp == self.cp == self.pp == self.ep == self.etp == 1

    @property
    def data_group(self) -> int:
        """Ranks that hold the same dense weights: data x context parallel (Megatron's
        ``data_parallel_group_with_cp``, torchtitan's ``dp_shard_cp`` mesh)."""
        return self.dp * self.cp

    @property
    def expert_data_group(self) -> int:
        """Ranks that hold the same experts: tensor x context x data / (expert x expert-tensor parallel).

        Megatron-Core's MoE parallel folding regroups a stage's tp x cp x dp ranks into the expert grid
        etp x ep x expert-dp (NVIDIA/Megatron-LM @d98e8a64ddf34856e74b24714e3bedb2f5a39553,
        ``megatron/core/parallel_state.py`` ``initialize_model_parallel``, lines 874-884:
        ``expert_data_parallel_size = world_size // (expert_tensor x expert_model x pipeline parallel)``,
        the expert rank generator laid over the same world as the dense one), so the experts'
        gradients and distributed-optimizer shards are spread over ``tp·cp·dp / (ep·etp)`` ranks, which
        is more than ``dp·cp / ep`` when the expert group folds tensor-parallel ranks in (etp < tp)."""
        return max(1, self.tp * self.cp * self.dp // (self.ep * self.etp))

    @property
    def chunks(self) -> int:
        """Model chunks in the whole pipeline: pp x virtual stages."""
        return self.pp * self.virtual_stages


@dataclass(frozen=True, slots=True)
class RankCoords:
    """Where a rank sits in the grid."""

    tp: int = 0
    pp: int = 0
    cp: int = 0
    ep: int = 0
    dp: int = 0

    def __str__(self) -> str:
        return f"(tp {self.tp}, pp {self.pp}, cp {self.cp}, ep {self.ep}, dp {self.dp})"


def layout_of(card: RunCard, train_gpus: int) -> ParallelLayout:
    """The card's layout over its training GPUs (the card validator checked the products)."""
    par = card.parallel
    return ParallelLayout(
        tp=par.tensor_parallel, sp=par.sequence_parallel, cp=par.context_parallel,
        cp_kind=par.context_parallel_kind, pp=par.pipeline_parallel, schedule=par.pipeline_schedule,
        virtual_stages=par.virtual_stages, ep=par.expert_parallel, etp=par.expert_tensor_parallel,
        dp=max(1, train_gpus // par.model_parallel), micro_batches=card.batch.grad_accum,
        first_stage_layers=par.pipeline_first_stage_layers, last_stage_layers=par.pipeline_last_stage_layers,
        stage_layout=par.pipeline_layout,
    )


def _allowed(n: int) -> str:
    """The divisors of ``n``, listed for an error message."""
    return ", ".join(map(str, divisors(n)))


def tensor_split_refusal(spec: ModelSpec, *, tp: int) -> str | None:
    """Why ``tp`` tensor-parallel ranks cannot split ``spec``'s attention, as the rest of a one-line refusal after its
    field name (``{tp} does not divide ...; allowed: ...``); None when they can. Megatron-Core asserts the same:
    attention heads and KV heads (or their replication when fewer than ``tp``) and the linear-attention heads
    divide evenly over the tensor-parallel ranks. The actor's check (``check_layout``) and a frozen model laid out
    on the actor's grid (``plan.walk``: the reward model) read it alike."""
    if tp <= 1:
        return None
    name, heads, kv = spec.name, spec.num_attention_heads, spec.num_kv_heads
    if spec.num_full_attention_layers:
        if heads % tp:
            return f"{tp} does not divide the {heads} attention heads of {name}; allowed: {_allowed(heads)}"
        if kv >= tp and kv % tp:
            return (f"{tp} does not divide the {kv} KV heads of {name}; allowed: {_allowed(kv)} or multiples of {kv}"
                    f" dividing {heads}")
        if kv < tp and tp % kv:
            return (f"{tp} KV-head shards cannot replicate the {kv} KV heads of {name} evenly; allowed:"
                    f" {_allowed(kv)} or multiples of {kv} dividing {heads}")
    la = spec.linear_attention
    if la is not None and spec.num_linear_attention_layers:
        for what, n in (("linear-attention key heads", la.num_key_heads), ("linear-attention value heads", la.num_value_heads)):
            if n % tp:
                return f"{tp} does not divide the {n} {what} of {name}; allowed: {_allowed(n)}"
    return None


def expert_split_refusal(spec: ModelSpec, *, ep: int, etp: int) -> tuple[str, str] | None:
    """Why ``ep`` expert-parallel and ``etp`` expert-tensor-parallel ranks cannot split ``spec``'s routed experts:
    (the ``parallel`` field, the rest of the one-line refusal with its allowed values); None when they can, and for a
    dense model (no experts to split; the actor's own card refuses ``ep`` > 1 on one in ``check_layout``)."""
    moe = spec.moe
    if moe is None:
        return None
    if moe.num_experts % ep:
        return ("expert_parallel", f"{ep} does not divide the {moe.num_experts} experts of {spec.name}; allowed:"
                                   f" {_allowed(moe.num_experts)}")
    if moe.expert_intermediate_size % etp:
        return ("expert_tensor_parallel", f"{etp} does not divide the expert width {moe.expert_intermediate_size} of"
                                          f" {spec.name}; allowed: {_allowed(moe.expert_intermediate_size)}")
    return None


def check_layout(card: RunCard, spec: ModelSpec, layout: ParallelLayout, seq_len: int) -> list[str]:
    """Refuse what cannot be split (``CardError``, one line) and return notes on what is replicated."""
    notes: list[str] = []
    name = spec.name
    if layout.trivial:
        return notes
    uneven = layout.first_stage_layers is not None or layout.last_stage_layers is not None
    if layout.pp > 1 and layout.stage_layout is not None:
        from trainfit.memory.pipeline import layout_problem

        why = layout_problem(spec.num_layers, layout.stage_layout, layout.pp)
        if why:
            raise CardError(f"parallel.pipeline_layout: {why} ({name}); allowed: {layout.chunks} non-negative counts"
                            f" summing to {spec.num_layers}, every pipeline rank holding at least one layer")
        uneven = True  # the layout replaces the even split's divisibility
    elif layout.pp > 1 and not uneven and spec.num_layers % layout.chunks:
        raise CardError(
            f"parallel.pipeline_parallel: {layout.pp} stages x {layout.virtual_stages} virtual stages = {layout.chunks}"
            f" does not divide the {spec.num_layers} layers of {name}; allowed products: {_allowed(spec.num_layers)},"
            " or set parallel.pipeline_first_stage_layers / pipeline_last_stage_layers (uneven end stages) or"
            " parallel.pipeline_layout (layers of every virtual stage)")
    if layout.pp > 1 and uneven and layout.stage_layout is None:
        from trainfit.memory.pipeline import split_problem

        why = split_problem(spec.num_layers, layout.pp, layout.virtual_stages, first=layout.first_stage_layers,
                            last=layout.last_stage_layers)
        if why:
            raise CardError(
                f"parallel.pipeline_first_stage_layers / pipeline_last_stage_layers: {why} ({name},"
                f" {spec.num_layers} layers, pipeline_parallel {layout.pp}); allowed: end-stage sizes divisible by"
                " virtual_stages whose remainder divides evenly over the middle stages x virtual_stages")
    if layout.virtual_stages > 1 and layout.micro_batches < layout.pp:
        raise CardError(
            f"batch.grad_accum: the interleaved schedule needs at least pipeline_parallel = {layout.pp} micro-batches"
            f" per step, got {layout.micro_batches} (Megatron-LM)")
    tp, heads, kv = layout.tp, spec.num_attention_heads, spec.num_kv_heads
    if tp > 1 and spec.qk_norm_full_width:
        # transformers gathers q/k/v to full width on every rank before the whole-width q/k norms
        # (Olmo2Config.base_model_tp_plan "colwise_gather_output", v5.24.0 models/olmo2/configuration_olmo2.py
        # l.54-58): not the head-sharded rank this module models
        # (OLMoE the same: OlmoeConfig.base_model_tp_plan, models/olmoe/configuration_olmoe.py l.47-51)
        raise CardError(f"parallel.tensor_parallel: {tp} with {name}: its q/k norms span all heads (OLMo 2, OLMoE), so"
                        " a rank's attention is not a head shard; tensor-parallel OLMo 2 / OLMoE is not modelled;"
                        " allowed: 1")
    if tp > 1 and spec.fused_projections:
        # transformers gathers the fused qkv_proj / gate_up_proj outputs to full width on every rank before slicing
        # them (Phi3Config.base_model_tp_plan "colwise_gather_output" / "rowwise_split_input", v5.24.0
        # models/phi3/configuration_phi3.py l.48-53): not the sharded rank this module models
        raise CardError(f"parallel.tensor_parallel: {tp} with {name}: transformers gathers its fused qkv_proj and"
                        " gate_up_proj outputs to full width on every rank (Phi-3), so a rank's layer is not a"
                        " shard; tensor-parallel Phi-3 is not modelled; allowed: 1")
    if tp > 1 and spec.fused_gate_up:
        # Glm4Config.base_model_tp_plan gathers gate_up_proj's output to full width ("colwise_gather_output",
        # transformers v5.24.0 models/glm4/configuration_glm4.py l.46-47): not the sharded rank this module models
        raise CardError(f"parallel.tensor_parallel: {tp} with {name}: transformers gathers its fused gate_up_proj output"
                        " to full width on every rank (GLM-4), so a rank's MLP is not a shard; tensor-parallel GLM-4 is"
                        " not modelled; allowed: 1")
    if (why := tensor_split_refusal(spec, tp=tp)) is not None:
        raise CardError(f"parallel.tensor_parallel: {why}")
    if tp > 1 and spec.num_full_attention_layers and kv < tp:
        notes.append(f"tensor parallel {tp} > {kv} KV heads: each KV head is replicated on {tp // kv} ranks"
                     " (Megatron-Core / vLLM GQA replication); k/v weights count one head per rank")
    if layout.cp > 1 and layout.cp_kind is ContextParallelKind.ULYSSES and spec.num_full_attention_layers:
        local = heads // tp
        if local % layout.cp:
            raise CardError(f"parallel.context_parallel: Ulysses {layout.cp} does not divide the {local} attention heads"
                            f" of a tensor-parallel rank of {name}; allowed: {_allowed(local)}")
        kv_local = max(1, kv // tp)
        if kv_local % layout.cp and layout.cp % kv_local:
            raise CardError(f"parallel.context_parallel: Ulysses {layout.cp} cannot split or replicate the {kv_local}"
                            f" KV heads of a tensor-parallel rank of {name}; allowed: {_allowed(kv_local)}")
        if kv_local < layout.cp:
            notes.append(f"Ulysses {layout.cp} > {kv_local} KV heads per TP rank: k and v are repeated to one head per"
                         " rank after the all-to-all (verl / DeepSpeed-Ulysses)")
    if layout.cp > 1 and seq_len % layout.cp:
        raise CardError(f"batch.seq_len: context parallel {layout.cp} needs a sequence length divisible by it, got {seq_len}")
    if layout.sp and (seq_len // layout.cp) % tp:
        raise CardError(f"batch.seq_len: sequence parallel splits the {seq_len // layout.cp} tokens of a rank over"
                        f" tensor_parallel {tp}; it must divide them")
    moe = spec.moe
    if (layout.ep > 1 or layout.etp > 1) and moe is None:
        raise CardError(f"parallel.expert_parallel: {name} has no experts; allowed for a dense model: 1")
    if (why := expert_split_refusal(spec, ep=layout.ep, etp=layout.etp)) is not None:
        raise CardError(f"parallel.{why[0]}: {why[1]}")
    if card.scope is Scope.QLORA or card.weights_dtype in (Dtype.NF4, Dtype.INT8, Dtype.FP8):
        raise CardError(f"precision.weights: {card.weights_dtype.value} weights with tensor, context, pipeline or expert"
                        " parallel are not modelled; allowed with them: bf16, fp16, fp32 (scope full or lora)")
    if card.scope is not Scope.FULL and layout.ep > 1:
        raise CardError("parallel.expert_parallel: LoRA on expert-parallel experts is not modelled; allowed with lora: 1")
    if spec.params_override is not None and tp > 1:
        notes.append("tensor parallel on a bare parameter count: the split follows the reference shape")
    return notes


@lru_cache(maxsize=1024)
def shard_spec(spec: ModelSpec, tp: int, etp: int = 1) -> ModelSpec:
    """One tensor-parallel rank's share of the model, as a model of its own (see the module docstring).

    Heads, KV heads (at least one: replicated below tp), MLP and shared-expert widths, DeltaNet heads
    and the vocabulary divide by ``tp`` (rank 0 takes the ceiling where it does not divide); the expert
    width divides by ``etp``; hidden size, head_dim, norms and the router stay whole.
    """
    if tp == 1 and etp == 1:
        return spec
    la = spec.linear_attention
    if la is not None and tp > 1:
        la = LinearAttentionSpec(num_key_heads=la.num_key_heads // tp, num_value_heads=la.num_value_heads // tp,
                                 key_head_dim=la.key_head_dim, value_head_dim=la.value_head_dim,
                                 conv_kernel_dim=la.conv_kernel_dim, state_dtype_bytes=la.state_dtype_bytes)
    moe = spec.moe
    if moe is not None:
        moe = replace(moe, expert_intermediate_size=moe.expert_intermediate_size // etp,
                      shared_expert_intermediate_size=ceil(moe.shared_expert_intermediate_size / tp))
    out = replace(
        spec,
        num_attention_heads=max(1, spec.num_attention_heads // tp),
        num_kv_heads=max(1, spec.num_kv_heads // tp),
        intermediate_size=ceil(spec.intermediate_size / tp),
        vocab_size=ceil(spec.vocab_size / tp),
        linear_attention=la,
        moe=moe,
    )
    if spec.params_override is not None:
        # keep the user's count-to-shape scale: the shard's override is its share of the user's count
        share = param_breakdown(replace(out, params_override=None)).total / param_breakdown(
            replace(spec, params_override=None)).total
        out = replace(out, params_override=round(spec.params_override * share))
    return out


class _Live:
    """Named references to buffers (bytes); a buffer is freed when no name holds it. Replays an
    algorithm's allocations in Python's reference order to find its high-water mark."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.sizes: dict[int, float] = {}
        self.cur = self.peak = 0.0
        self._n = 0

    def new(self, nbytes: float) -> int:
        self._n += 1
        self.sizes[self._n] = nbytes
        self.cur += nbytes
        self.peak = max(self.peak, self.cur)
        return self._n

    def bind(self, name: str, obj: int) -> None:
        old = self.names.get(name)
        self.names[name] = obj
        self._gc(old)

    def _gc(self, obj: int | None) -> None:
        if obj is not None and obj in self.sizes and obj not in self.names.values():
            self.cur -= self.sizes.pop(obj)


def ring_attention_backward_bytes(*, q_bytes: float, kv_bytes: float, lse_bytes: float, cp: int) -> float:
    """High-water of torch's ring attention backward on rank 0 above its inputs (the output gradient and
    the saved q, k, v, out, lse): ``_templated_ring_attention_backward`` with torch's default options
    (``torch/distributed/tensor/experimental/_context_parallel/_attention.py``, torch 2.13:
    round-robin load balancing, ``convert_to_f32``, K/V all-gathered once, dK/dV passed on with
    all-to-all). ``q_bytes``/``kv_bytes``: the rank's bf16 q and k (= v) blocks; ``lse_bytes``: its
    fp32 log-sum-exp. Replayed name by name; equals the fake-tensor trace to the byte
    (``trainfit.trace.context_parallel``)."""
    q, k, lse = q_bytes, kv_bytes, lse_bytes
    m = _Live()
    m.bind("grad_query", m.new(2 * q))  # fp32 accumulators (zeros_like)
    m.bind("grad_key", m.new(2 * k))
    m.bind("grad_value", m.new(2 * k))
    m.bind("key", m.new(k))  # key/value.contiguous() of the transposed HF views
    m.bind("value", m.new(k))
    for i in range(cp):
        if i > 0:
            m.bind("key", m.names["gathered"])
            m.bind("value", m.names["gathered"])
        if i != cp - 1:
            m.bind("next_kv", m.new(2 * k))  # torch.cat of k and v, kept by its name
            if i == 0:
                m.bind("gathered", m.new(2 * k * cp))  # all_gather_single of every rank's k and v
        if i > 0:
            m.bind("lse", m.new(lse / 2))  # the second half's logsumexp, made contiguous
        m.bind("k", m.names["key"])
        m.bind("v", m.names["value"])
        dq, dk, dv = m.new(q if i == 0 else q / 2), m.new(k), m.new(k)  # the op's outputs, then the names
        m.bind("grad_query_", dq)
        m.bind("grad_key_", dk)
        m.bind("grad_value_", dv)
        if i == 0:
            # flatten() copies the non-contiguous fp32 dK/dV, then torch.cat
            f1, f2 = m.new(2 * k), m.new(2 * k)
            cat = m.new(4 * k)
            m._gc(f1)
            m._gc(f2)
            m.bind("next_grad_kv", cat)
        else:
            m.bind("next_grad_kv", m.names["a2a"])
            m.bind("grad_key", m.names["a2a"])
            m.bind("grad_value", m.names["a2a"])
            m.bind("next_grad_kv", m.new(4 * k))
        m.bind("a2a", m.new(4 * k))  # permute_tensor to the next rank
        if i > 0:
            m.bind("grad_query", m.new(2 * q))  # _partial_update: torch.cat
    m.bind("grad_query", m.new(q))
    m.bind("next_grad_kv", m.new(2 * k))
    return m.peak


def ring_attention_forward_bytes(*, q_bytes: float, kv_bytes: float, lse_bytes: float, cp: int) -> float:
    """High-water of torch's ring attention forward on rank 0 above its inputs (q, k, v), output and
    log-sum-exp included (same source and options as ``ring_attention_backward_bytes``)."""
    q, k, lse = q_bytes, kv_bytes, lse_bytes
    m = _Live()
    m.bind("key", m.new(k))
    m.bind("value", m.new(k))
    for i in range(cp):
        if i > 0:
            m.bind("key", m.names["gathered"])
            m.bind("value", m.names["gathered"])
        if i != cp - 1:
            cat = m.new(2 * k)
            if i == 0:
                m.bind("gathered", m.new(2 * k * cp))
            m._gc(cat)  # next_kv = exchange_buffers(...) returns None
        m.bind("k", m.names["key"])
        m.bind("v", m.names["value"])
        if i == 0:
            m.bind("out", m.new(q))
            m.bind("logsumexp", m.new(lse))
            m.bind("merged_out", m.new(2 * q))  # out.to(float32)
            m.bind("merged_lse", m.names["logsumexp"])
            continue
        m.bind("out", m.new(q / 2))  # the second half of q against the whole block
        m.bind("logsumexp", m.new(lse / 2))
        block = m.new(q)  # block out.to(float32)
        t = m.new(lse / 2)
        s = m.new(lse / 2)
        m._gc(t)
        d = m.new(q)
        p = m.new(q)
        m._gc(d)
        new_out = m.new(q)
        m._gc(p)
        m._gc(s)
        t, b = m.new(lse / 2), m.new(lse / 2)  # lse - block_lse; log_sigmoid_forward (output, buffer)
        m._gc(t)
        new_lse = m.new(lse / 2)
        m._gc(b)
        m.bind("merged_lse", m.new(lse))  # _partial_update: torch.cat
        m.bind("merged_out", m.new(2 * q))
        m._gc(new_out)
        m._gc(new_lse)
        m._gc(block)
    m.new(q)  # merged out.to(bfloat16)
    return m.peak


def ulysses_attention_bytes(*, q_bytes: float, kv_bytes: float, lse_bytes: float, cp: int, kv_heads: int,
                            batch: int) -> tuple[float, float]:
    """(forward, backward) high-water of DeepSpeed-Ulysses attention as verl wraps it around an HF
    attention (``verl/utils/ulysses.py`` ``all_to_all_tensor``: ``tensor_split`` -> ``contiguous`` chunks,
    ``empty_like`` outputs, ``torch.cat``), above its inputs (forward: q, k, v; backward: the output
    gradient and the saved tensors), output and log-sum-exp included. ``kv_bytes``: the rank's k block
    before k and v are repeated to one head per rank (``kv_heads < cp``). The output's sequence chunks
    are contiguous views when ``batch == 1`` (no copy)."""
    q, lse = q_bytes, lse_bytes
    kr = kv_bytes * max(cp // kv_heads, 1)
    pre = 2 * kr if kr != kv_bytes else 0.0  # the repeated k and v, alive until all three are exchanged
    fwd = max(pre + 3 * q, pre + q + 3 * kr, pre + q + kr + 3 * kr,
              q + 2 * kr + q + lse + (q if batch > 1 else 0.0) + 2 * q)
    bwd = max(3 * q, 2 * q + 2 * kr)
    return fwd, bwd


def context_parallel_attention_backward_bytes(*, kind: ContextParallelKind, cp: int, tokens: int, q_dim: int,
                                              kv_dim: int, heads: int, kv_heads: int, batch: int,
                                              dtype_bytes: int, freed_before: float) -> float:
    """A context-parallel attention's backward buffers in a layer, above the layer's saved activations:
    the output gradient (q-sized) plus the ring's or Ulysses' high-water above its inputs, less
    ``freed_before``, what the layer saved after attention (o_proj's input, the second norm, the MLP)
    and has freed by the time attention's backward runs."""
    q = tokens * q_dim * dtype_bytes
    kv = tokens * kv_dim * dtype_bytes
    lse = tokens * heads * 4
    if kind is ContextParallelKind.RING:
        peak = ring_attention_backward_bytes(q_bytes=q, kv_bytes=kv, lse_bytes=lse, cp=cp)
    else:
        peak = ulysses_attention_bytes(q_bytes=q, kv_bytes=kv, lse_bytes=lse, cp=cp, kv_heads=kv_heads,
                                       batch=batch)[1]
    return max(0.0, q + peak - freed_before)


def context_parallel_attention_forward_bytes(*, kind: ContextParallelKind, cp: int, tokens: int, q_dim: int,
                                             kv_dim: int, heads: int, kv_heads: int, batch: int, dtype_bytes: int,
                                             saved_later: float, checkpointed: bool = False,
                                             hidden: int = 0, head_saved: float = 0.0) -> float:
    """A context-parallel attention's forward buffers in the last layer, above the whole step's saved
    activations: the ring's or Ulysses' high-water above its inputs, less what of it the layer saves
    (ring: output and log-sum-exp; Ulysses: the exchanged q, k, v, output, log-sum-exp and o_proj's
    input), plus Ulysses' un-exchanged q, k, v (HF's names keep them), less ``saved_later``: what the
    layer saves after attention (the second norm, the MLP; for the ring also o_proj's input copy).
    ``checkpointed``: the layer saves nothing, so the whole high-water counts, with its inputs q, k, v and
    the normalised layer input (``hidden`` wide) that the attention's caller keeps, less ``head_saved``
    (the head's saved tensors, counted in the step's but not there yet)."""
    q = tokens * q_dim * dtype_bytes
    kv = tokens * kv_dim * dtype_bytes
    lse = tokens * heads * 4
    if checkpointed:
        if kind is ContextParallelKind.RING:
            peak = ring_attention_forward_bytes(q_bytes=q, kv_bytes=kv, lse_bytes=lse, cp=cp)
        else:
            peak = ulysses_attention_bytes(q_bytes=q, kv_bytes=kv, lse_bytes=lse, cp=cp, kv_heads=kv_heads,
                                           batch=batch)[0]
        return max(0.0, peak + q + 2 * kv + tokens * hidden * dtype_bytes - head_saved)
    if kind is ContextParallelKind.RING:
        extra = ring_attention_forward_bytes(q_bytes=q, kv_bytes=kv, lse_bytes=lse, cp=cp) - q - lse
    else:
        kr = kv * max(cp // kv_heads, 1)
        peak = ulysses_attention_bytes(q_bytes=q, kv_bytes=kv, lse_bytes=lse, cp=cp, kv_heads=kv_heads, batch=batch)[0]
        extra = peak + q + 2 * kv - (q + 2 * kr + q + lse + q)
    return max(0.0, extra - saved_later)


EP_FORWARD_ROW_TENSORS = 6
"""(token, expert)-row tensors of hidden width that an expert-parallel MoE layer holds, unsaved, at the
end of its forward: the gathered rows, the dispatched (received) rows, the experts' output, its
arrival-order copy, and the weighted output before and after the inverse permutation (transformers'
``grouped_mm_experts_forward`` keeps its locals to the end; measured on ``trainfit.trace.expert_parallel``)."""


def expert_parallel_forward_bytes(*, tokens: int, top_k: int, hidden: int, dtype_bytes: int) -> float:
    """Bytes an expert-parallel MoE layer holds above its saved activations at the end of its forward
    (without checkpointing): ``EP_FORWARD_ROW_TENSORS`` tensors of ``tokens x top_k`` rows."""
    return float(EP_FORWARD_ROW_TENSORS * tokens * top_k * hidden * dtype_bytes)
