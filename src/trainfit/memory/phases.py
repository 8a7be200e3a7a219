"""Compose the per-phase peaks of one steady-state training step on one GPU.

A step is a sequence of allocation events; each phase's peak is the largest live total at
any event in it. The events follow what PyTorch does (GROUND_TRUTH.md §2-4):

load
    the model's weights (sharded under ZeRO-3/FSDP), adapters.
forward
    persistent state + gradients still held under gradient accumulation + every saved
    activation (or only checkpointed layer inputs) + the loss's logits transient.
backward
    starts at the loss (logits' gradient buffers while all activations are alive), then walks
    the decoder layers from last to first: each layer's saved tensors (recomputed under
    checkpointing) are freed as its gradients appear.
optimizer_step
    persistent state + all gradients + the step's temporaries.

"Persistent" is weights, adapters, fp32 master weights and optimizer states: after the
warm-up step they live across the whole step. Gradients are freed by
``zero_grad(set_to_none=True)`` after the step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate

from trainfit.memory.activations import ActivationBytes
from trainfit.memory.logits import LogitsBytes
from trainfit.spec.enums import Phase


@dataclass(frozen=True, kw_only=True, slots=True)
class StepTerms:
    """Per-GPU byte terms after sharding and offload. Inputs to the phase walk."""

    weights: float
    adapter_weights: float
    master_weights: float
    optimizer_states: float
    grads_per_layer: tuple[float, ...]
    """Trainable gradient bytes each decoder layer adds in backward (sharded)."""
    grads_head: float
    """lm_head (or the tied embedding) + final norm gradients, allocated first in backward."""
    grads_embedding: float
    """Untied input-embedding gradient, allocated last in backward."""
    activations: ActivationBytes
    gradient_checkpointing: bool
    logits: LogitsBytes
    logits_grad_bf16: float
    """bf16 gradient of the logits flowing into lm_head's backward."""
    layer_backward_transient: tuple[float, ...]
    """Gradient buffers live inside one layer's backward, per layer."""
    optimizer_temporaries: float
    grad_accumulation: bool
    fsdp_root_unit: float = 0.0
    fsdp_layer_units: float = 0.0
    """Gathered layer units during compute (current + prefetched)."""
    fsdp_unsharded_grads: float = 0.0
    """Unsharded gradient of one unit before its reduce-scatter."""
    fsdp_root_grads: float = 0.0
    """lm_head (or tied) gradient, kept unsharded from its backward to the end of backward."""
    fsdp_root_embedding_grads: float = 0.0
    """Untied input-embedding gradient, unsharded at the end of backward before the root's reduce-scatter."""
    paged_optimizer_states: float = 0.0
    """bitsandbytes paged states: CUDA managed memory, outside torch's allocator."""
    fsdp_all_gathered: float = 0.0
    """fsdp_grad_op: every unit stays gathered from its forward to its backward."""
    fsdp_gathered_kept: bool = False
    """``fsdp_all_gathered`` stays whole to the end of backward instead of resharding unit by unit as the backward
    passes it (a pipeline stage under FSDP2: ``set_reshard_after_backward(False)`` on every micro-batch,
    ``trainfit.plan.fsdp_no_sync.pipeline_fsdp2_holds_unsharded``)."""
    ddp_buckets: float = 0.0
    zero2_bucket: float = 0.0
    autocast_weight_cache: float = 0.0
    """bf16 copies autocast makes of fp32 weights; cached until the autocast region (forward) ends."""
    activation_offload: bool = False
    """Saved tensors stream to host RAM; only the layer in flight is on the GPU."""
    offloaded_layers: int = 0
    """Transformer Engine's partial activation offload (``parallel.activation_offload_layers``): the first N decoder
    layers' saved activations leave the GPU on its default schedule (``partial_offload_alive_below``)."""
    checkpointed_layers: tuple[bool, ...] = ()
    """With ``gradient_checkpointing``: the decoder layers that run under checkpoint, the others keeping their
    activations (``ActivationBytes.checkpointing_only`` has folded that into ``activations``); empty: every layer."""
    in_backward_step: float = 0.0
    """Optimizer-in-backward: one parameter's gradient + step temporaries, live in backward."""
    tied_embedding_grad_transient: float = 0.0
    """Full fine-tuning with tied embeddings: the embedding backward's own gradient and the
    accumulated sum, live at the end of backward beside lm_head's gradient."""
    attention_forward_transient: float = 0.0
    """Eager attention: the score-sized tensors a full-attention layer holds at once in its forward,
    beyond what it saves (``trainfit.memory.attention``); 0 for fused (SDPA/flash) attention."""
    inflight_activations: float = 0.0
    """Pipeline parallel: saved activations of the schedule's other micro-batches in flight on this
    stage, alive through the forward and the backward of the one walked (``trainfit.memory.pipeline``)."""
    grads_other: float = 0.0
    """Interleaved pipeline: gradients of the stage's other model chunks, held while one chunk's
    backward is walked (0 before the stage's first backward)."""
    pipeline_buffers: float = 0.0
    """Pipeline parallel: the received stage inputs kept for their gradients, one per micro-batch in flight."""
    comm_forward_transient: float = 0.0
    """Context/expert parallel: the largest communication buffers one layer's forward holds at once
    (ring KV blocks, Ulysses all-to-all outputs, MoE dispatch/combine)."""
    layer_forward_transient: float = 0.0
    """A pipeline stage without the loss: what its last layer's forward holds besides the saved
    activations and the stage buffers (``trainfit.plan.ranks``); its forward peaks there."""
    adapter_forward_transient: float = 0.0
    """DoRA: the weight-norm temporaries of the largest adapted module, made and freed inside each layer's
    forward beside the activations saved so far (``peft_variants.dora_forward_transient_bytes``; under
    checkpointing the recompute's are in ``layer_backward_transient``). The allocator replay leaves them out:
    they add to allocated, the reserved beyond is the rest of the step's."""
    adapter_forward_what: str = "DoRA weight-norm temporaries"
    """What ``adapter_forward_transient`` is, for the peak's label (QLoRA: bitsandbytes' dequantisation temporaries,
    ``trainfit.memory.nf4_dequant``)."""
    accumulation_transient: float = 0.0
    """Gradient accumulation: the last gradient of the backward (the embedding's, computed whole
    before it is added into ``.grad``), live beside the gradients held from earlier micro-batches."""
    zero_ipg_buckets: float = 0.0
    """DeepSpeed ZeRO reduce bucket(s) (``trainfit.memory.deepspeed``): stages 1-2 in backward only,
    stage 3 from init on (``zero_ipg_persistent``)."""
    zero_ipg_persistent: bool = False
    zero_step_grads: float = 0.0
    """ZeRO: gradient bytes still alive when the step casts the partition to fp32."""
    layer_backward_released: tuple[float, ...] = ()
    """Per layer (empty: none): saved bytes of the layer its backward has already freed when
    ``layer_backward_transient`` is live. Eager attention: the post-attention norms' and the MLP block's, whose
    backward runs before the softmax backward (``trainfit.plan.terms.attention_backward_released``)."""
    expert_stack_grads: tuple[tuple[float, ...], ...] = ()
    """Per layer (empty: none): transformers v5's eager experts (``parallel.moe_experts: loop_v5``), the bytes of
    each whole stacked expert weight that gets a gradient, where their moment (``memory.expert_loop_grads``) is the
    layer's largest and so in ``layer_backward_transient``: the allocator replay makes them as those blocks."""
    expert_stacks_are_leaves: bool = False
    """With ``expert_stack_grads``: full fine-tuning (the stacks' gradient sums are the ``.grad``), else PEFT's
    merged stacks (the sums are transient)."""
    zero_step_cast: float = 0.0
    """ZeRO: the flat copy and the fp32 gradient of one group / sub-group at the step's cast."""
    zero_step_fp32_grad: float = 0.0
    """ZeRO: the fp32 gradient partition held through the optimizer call."""
    zero_step_keeps_grads: bool = False
    """ZeRO-3: the gradient partition buffer outlives the step (allocated at init)."""
    zero_persistent_params: float = 0.0
    """ZeRO-3: parameters below the persistence threshold, gathered on every rank."""
    grads_preallocated: bool = False
    """ZeRO-3: the gradient partitions exist from init, so forward holds them too."""
    optimizer_step_grads: float | None = None
    """Gradient bytes the optimizer step reads when they differ from what backward holds (None: ``grads_total``).
    FSDP1 ``no_sync``: the synced last backward reduce-scatters each unit's unsharded gradient and frees it, leaving
    the shards (``trainfit.memory.fsdp_no_sync.no_sync_step_grad_bytes``)."""
    grad_buffer: float = 0.0
    """A gradient accumulator's own buffer, made at init and kept (nanotron's ``FP32GradientAccumulator``: one zeroed
    fp32 buffer of every trained parameter, ``trainfit.plan.ranks.rank_terms``). The ``grads_*`` fields are then the
    16-bit ``.grad`` tensors autograd makes in each backward, freed once it returns (after being added into this
    buffer), so none is held across micro-batches or into the optimizer step."""
    gathered_forward: float = 0.0
    """ZeRO-3: parameter bytes the coordinator holds gathered at the forward's peak (loss)."""
    gathered_backward: float = 0.0
    """ZeRO-3: the most parameter bytes gathered at once in backward."""
    offload_staging: float = 0.0
    """Offload: GPU staging / in-flight transfer buffers alive through backward."""
    kept_output: float = 0.0
    """loop.keeps_output_through_backward: the model output's logits, which the loop keeps bound from the loss until
    the next micro-batch's forward returns its own: through backward and the optimizer step, and in the next forward
    beside the new output when the model returns it (``forward_peak``)."""
    graph_held_inputs: float = 0.0
    """bitsandbytes before 0.43.2 under the same loop (loop.keeps_output_through_backward: its output and loss bound
    until the next micro-batch's forward returns): the previous micro-batch's MatMul4Bit inputs, attributes of the
    graph the loss still references, alive through the optimizer step and the next forward up to its loss
    (``trainfit.memory.bnb_saved_input.graph_held_input_bytes``)."""
    ctx_held_inputs: float = 0.0
    """bitsandbytes before 0.43.2 under a non-reentrant checkpoint: this micro-batch's MatMul4Bit inputs, attributes of
    the first forward's graph nodes (its saved-tensor hooks see only ``save_for_backward``), alive beside the
    checkpointed inputs from the loss to the end of backward (``trainfit.memory.bnb_saved_input.ctx_held_input_bytes``)."""
    returned_kv_cache: float = 0.0
    """loop.returns_kv_cache: one micro-batch's key/value cache the checkpointed model returns (every attention
    layer's keys and values, ``trainfit.memory.returned_cache``), alive at the forward's end."""
    kv_cache_kept: bool = False
    """With ``returned_kv_cache`` and loop.keeps_output_through_backward: the bound output holds its cache through
    backward and the optimizer step, and beside the next forward's own cache until that forward returns."""
    kept_output_fp32: bool = False
    """loop.kept_output_dtype fp32: the kept logits are the fp32 copy the loss reads (the compute-dtype logits are
    freed before the log-softmax; ``trainfit.memory.alloc_sequence``)."""
    forward_at: str = "loss (log-softmax over the logits)"
    """Where the forward peaks when the loss dominates (a stage without the loss: its last layer)."""

    def layer_checkpointed(self, i: int) -> bool:
        """Decoder layer ``i`` runs under checkpoint (its forward keeps its input only, its backward recomputes)."""
        return self.gradient_checkpointing and (not self.checkpointed_layers or self.checkpointed_layers[i])

    @property
    def grads_total(self) -> float:
        return self.grads_head + sum(self.grads_per_layer) + self.grads_embedding + self.grads_other


@dataclass(frozen=True, slots=True)
class PhasePeak:
    phase: Phase
    components: dict[str, float] = field(default_factory=dict)
    at: str = ""
    """The event inside the phase where the peak occurs."""

    @property
    def allocated(self) -> float:
        return sum(self.components.values())


def _persistent(t: StepTerms) -> dict[str, float]:
    return {
        "weights": t.weights,
        "adapter_weights": t.adapter_weights,
        "master_weights": t.master_weights,
        "optimizer_states": t.optimizer_states,
        "paged_optimizer_states": t.paged_optimizer_states,
        "ddp_buckets": t.ddp_buckets,
        **({"zero3_persistent_params": t.zero_persistent_params} if t.zero_persistent_params else {}),
        **({"zero_ipg_buckets": t.zero_ipg_buckets} if t.zero_ipg_persistent and t.zero_ipg_buckets else {}),
    }


def _best(phase: Phase, points: list[tuple[str, dict[str, float]]]) -> PhasePeak:
    at, comps = max(points, key=lambda p: sum(p[1].values()))
    return PhasePeak(phase, {k: v for k, v in comps.items()}, at)


def _last_unit(t: StepTerms) -> float:
    """FSDP2 keeps the last decoder layer's unit gathered from its forward into backward, where
    it is the first unit needed (measured with the fake-process-group trace: one unit at the loss)."""
    return t.fsdp_layer_units / 2


def load_peak(t: StepTerms) -> PhasePeak:
    return PhasePeak(Phase.LOAD, {"weights": t.weights, "adapter_weights": t.adapter_weights}, "weights loaded")


def _holds_grads(t: StepTerms) -> bool:
    """Whether the ``grads_*`` gradients exist from before the backward (accumulated, or preallocated); not with a
    ``grad_buffer``, whose accumulator frees them after every backward."""
    return not t.grad_buffer and (t.grad_accumulation or t.grads_preallocated)


def forward_peak(t: StepTerms) -> PhasePeak:
    held_grads = t.grads_total if _holds_grads(t) else 0.0
    act = t.activations
    saved = act.total(gradient_checkpointing=t.gradient_checkpointing)
    if t.activation_offload:
        saved = act.head + (act.max_layer if not t.gradient_checkpointing else max(act.checkpointed_per_layer, default=0))
    elif t.offloaded_layers:
        # at the loss every offloaded layer's copy has finished and its GPU tensors are freed
        saved -= sum(act.per_layer[:t.offloaded_layers])
    if t.gradient_checkpointing:
        # without checkpointing the cached copies are the saved tensors already counted
        saved += t.autocast_weight_cache
    comps = _persistent(t) | {
        "gradients": held_grads + t.grad_buffer,
        "activations": saved + t.inflight_activations,
        "logits": t.logits.forward_peak,
        "fsdp_buffers": t.fsdp_root_unit + t.fsdp_all_gathered + _last_unit(t) + t.gathered_forward,
    }
    if t.graph_held_inputs:
        comps["graph_held_inputs"] = t.graph_held_inputs
    if t.ctx_held_inputs:
        comps["ctx_held_inputs"] = t.ctx_held_inputs
    if t.returned_kv_cache:
        # this forward's cache at its end, beside the previous micro-batch's while the loop still binds its output
        comps["kv_cache"] = t.returned_kv_cache * (2 if t.kv_cache_kept else 1)
    if t.pipeline_buffers:
        comps["pipeline_buffers"] = t.pipeline_buffers
    loss_point = PhasePeak(Phase.FORWARD, comps, t.forward_at)
    if t.kept_output and t.kept_output > t.logits.forward_peak - t.kept_output:
        # the loop rebinds its output when the model returns: the new logits made, the previous micro-batch's still bound
        returned = dict(comps, logits=t.kept_output, kept_output=t.kept_output)
        loss_point = PhasePeak(Phase.FORWARD, returned, "the model's output returned (the previous one still bound)")
    if t.adapter_forward_transient > max(t.logits.forward_peak, t.attention_forward_transient,
                                         t.layer_forward_transient, t.comm_forward_transient):
        adapter = dict(comps, logits=0.0, activation_transients=t.adapter_forward_transient)
        return PhasePeak(Phase.FORWARD, adapter, f"last layer's forward ({t.adapter_forward_what})")
    if t.attention_forward_transient and t.attention_forward_transient > t.logits.forward_peak:
        scores = dict(comps, logits=0.0, attention_scores=t.attention_forward_transient)
        return PhasePeak(Phase.FORWARD, scores, "last layer's attention (eager scores)")
    if t.layer_forward_transient > max(t.logits.forward_peak, t.comm_forward_transient):
        layer = dict(comps, logits=0.0, activation_transients=t.layer_forward_transient)
        return PhasePeak(Phase.FORWARD, layer, "last layer's forward (residual stream and MLP buffers)")
    if t.comm_forward_transient > t.logits.forward_peak:
        comm = dict(comps, logits=0.0, comm_buffers=t.comm_forward_transient)
        return PhasePeak(Phase.FORWARD, comm, "last layer's forward (context/expert parallel buffers)")
    return loss_point


def backward_peak(t: StepTerms) -> PhasePeak:
    """Walk backward from the loss to the embedding and keep the largest point."""
    act = t.activations
    ckpt = t.gradient_checkpointing
    held = t.grads_total if _holds_grads(t) else 0.0
    base = _persistent(t)
    if t.zero_ipg_buckets and not t.zero_ipg_persistent:
        base = base | {"zero_buffers": t.zero_ipg_buckets}
    if t.offload_staging:
        base = base | {"offload_staging": t.offload_staging}
    if t.kept_output:
        base = base | {"kept_output": t.kept_output}
    if t.kv_cache_kept:
        base = base | {"kv_cache": t.returned_kv_cache}
    if t.ctx_held_inputs:
        base = base | {"ctx_held_inputs": t.ctx_held_inputs}
    fsdp_static = t.fsdp_root_unit + t.fsdp_root_grads
    layers = len(act.per_layer)
    emb = act.checkpointed_embedding if ckpt else act.embedding
    # saved bytes of layers < l that are still alive when layer l runs its backward
    kept = (0.0 for _ in range(layers)) if t.activation_offload else (
        act.checkpointed_per_layer if ckpt else act.per_layer)
    saved_prefix = list(accumulate(kept, initial=0.0))
    if t.offloaded_layers:
        saved_prefix = partial_offload_alive_below(act.per_layer, offloaded_layers=t.offloaded_layers)
    if t.activation_offload:
        emb = 0.0
    # at the embedding's own backward the layers' shared inputs (rotary cos/sin, eager masks) are gone
    emb_end = emb if act.embedding_backward is None else min(emb, act.embedding_backward)
    alive_all = emb + saved_prefix[layers] + act.head + t.inflight_activations
    pipe = {"pipeline_buffers": t.pipeline_buffers} if t.pipeline_buffers else {}

    def grads(new: float) -> float:
        return max(held, new) + t.grad_buffer

    points = [
        (
            "loss backward (logits gradient)",
            base
            | {
                "gradients": grads(0.0),
                "activations": alive_all,
                "logits": t.logits.backward_peak,
                # lm_head's gradient is not there yet; the last layer's unit is
                "fsdp_buffers": t.fsdp_root_unit + t.fsdp_all_gathered + _last_unit(t) + t.gathered_forward,
            } | pipe,
        ),
        (
            "lm_head backward",
            base
            | {
                "gradients": grads(t.grads_head),
                "activations": alive_all,
                "logits": t.logits_grad_bf16,
                "fsdp_buffers": fsdp_static + t.fsdp_all_gathered + t.gathered_forward,
            } | pipe,
        ),
    ]
    # decoder layers, last to first: totals from running sums (itertools.accumulate runs in C), then
    # the component dict for the largest only
    base_total = sum(base.values())
    fsdp_layer = fsdp_static + t.fsdp_layer_units + t.fsdp_unsharded_grads + t.gathered_backward
    best: tuple[float, int, float, float] | None = None
    released = t.layer_backward_released
    if layers:
        order = range(layers - 1, -1, -1)
        new_grads = list(accumulate((t.grads_per_layer[i] for i in order), initial=t.grads_head))[1:]
        step = 0.0 if t.fsdp_gathered_kept else t.fsdp_all_gathered / layers
        const = (base_total + t.zero2_bucket + emb + fsdp_layer + t.in_backward_step + t.inflight_activations
                 + t.pipeline_buffers + t.grad_buffer)
        def total(k: int) -> float:
            i, g = layers - 1 - k, new_grads[k]
            return (const + (held if held > g else g) + saved_prefix[i] + act.per_layer[i]
                    + t.layer_backward_transient[i] - (released[i] if released else 0.0)
                    + t.fsdp_all_gathered - k * step)

        ends = None if t.offloaded_layers else _candidates(
            layers, act.per_layer, t.grads_per_layer, t.layer_backward_transient, act.checkpointed_per_layer, released)
        if ends is not None:
            k = max(ends, key=lambda j: (total(j), -j))  # the first maximum among the candidates
        else:
            totals = [total(k) for k in range(layers)]
            k = max(range(layers), key=totals.__getitem__)  # first maximum: the highest layer on ties
        layer = layers - 1 - k
        best = (total(k), layer, new_grads[k], t.fsdp_all_gathered - k * step)
    if best is not None:
        _, layer, g, gath = best
        points.append(
            (
                f"layer {layer} backward",
                base
                | {
                    "gradients": grads(g) + t.zero2_bucket,
                    "activations": emb + saved_prefix[layer] + act.per_layer[layer] + t.inflight_activations
                    - (released[layer] if released else 0.0),
                    "logits": 0.0,
                    "optimizer_temporaries": t.layer_backward_transient[layer] + t.in_backward_step,
                    "fsdp_buffers": fsdp_layer + gath,
                } | pipe,
            )
        )
    points.append(
        (
            "embedding backward",
            base
            | {
                "gradients": grads(t.grads_total) + t.tied_embedding_grad_transient
                + (t.accumulation_transient if t.grad_accumulation else 0.0),
                "activations": emb_end + t.inflight_activations,
                "logits": 0.0,
                "fsdp_buffers": fsdp_static + t.fsdp_root_embedding_grads + t.gathered_backward
                + (t.fsdp_all_gathered if t.fsdp_gathered_kept else 0.0),
            } | pipe,
        )
    )
    peak = _best(Phase.BACKWARD, points)
    comps = dict(peak.components)
    # the in-layer gradient buffers are activation gradients; the in-backward step's are the optimizer's
    inner = comps.pop("optimizer_temporaries", 0.0)
    comps["optimizer_temporaries"] = min(inner, t.in_backward_step)
    comps["activation_gradients"] = inner - comps["optimizer_temporaries"]
    return PhasePeak(Phase.BACKWARD, comps, peak.at)


def optimizer_peak(t: StepTerms) -> PhasePeak:
    comps = _persistent(t) | {
        # an accumulator's buffer is what the step reads; its 16-bit gradients were freed after the backward
        "gradients": t.grad_buffer if t.grad_buffer else (
            t.grads_total if t.optimizer_step_grads is None else t.optimizer_step_grads),
        "optimizer_temporaries": t.optimizer_temporaries,
    }
    # what a loop that keeps its output bound until the next forward still holds
    held = (({"kept_output": t.kept_output} if t.kept_output else {})
            | ({"graph_held_inputs": t.graph_held_inputs} if t.graph_held_inputs else {})
            | ({"kv_cache": t.returned_kv_cache} if t.kv_cache_kept else {}))
    comps |= held
    if not (t.zero_step_cast or t.zero_step_fp32_grad):
        return PhasePeak(Phase.OPTIMIZER_STEP, comps, "optimizer.step()")
    # DeepSpeed ZeRO: the partition is flattened and cast to fp32 (both alive beside the gradient
    # partition), then the optimizer steps the fp32 gradient (stage 1-2 freed the partition first)
    cast = _persistent(t) | {"gradients": t.zero_step_grads, "zero_step_buffers": t.zero_step_cast,
                             "optimizer_temporaries": 0.0} | held
    step = _persistent(t) | {"gradients": t.zero_step_grads if t.zero_step_keeps_grads else 0.0,
                             "zero_step_buffers": t.zero_step_fp32_grad,
                             "optimizer_temporaries": t.optimizer_temporaries} | held
    if sum(cast.values()) >= sum(step.values()):
        return PhasePeak(Phase.OPTIMIZER_STEP, cast, "gradient partition cast to fp32 (DeepSpeed ZeRO step)")
    return PhasePeak(Phase.OPTIMIZER_STEP, step, "optimizer.step() on the fp32 partition")


def step_peaks(t: StepTerms) -> list[PhasePeak]:
    return [load_peak(t), forward_peak(t), backward_peak(t), optimizer_peak(t)]


_PERIODS = (1, 2, 4, 8)


def _period(n: int, *series: tuple[float, ...]) -> int:
    """The smallest period (1, 2, 4 or 8) every series of length n repeats with, or 0 for none."""
    for p in _PERIODS:
        if n >= 2 * p and all(s[p:] == s[:-p] for s in series if s):
            return p
    return 0


def _class_ends(n: int, period: int) -> set[int]:
    """First and last index of each residue class of 0..n-1 modulo ``period``."""
    return {k for r in range(min(period, n)) for k in (r, r + ((n - 1 - r) // period) * period)}


def partial_offload_alive_below(per_layer: tuple[float, ...] | list[float], *, offloaded_layers: int) -> list[float]:
    """Saved bytes of the layers below layer i that are on the GPU when layer i runs its backward, for each i, and
    (last entry) of all layers at the loss, under Transformer Engine's default partial activation offload of the
    first ``offloaded_layers`` = N of L layers (``DefaultOffloadSynchronizer._init_offload_synchronization_dicts``,
    ``fwd_step``, ``bwd_step``, transformer_engine/pytorch/cpu_offload.py l.602-647, NVIDIA/TransformerEngine
    @e7c550c5f80636cf841a8204b1d6f85a5f3f28b7, the TE that Megatron-Bridge @067f987df03b8355b03192d88d70f1709fedf51a
    locks in uv.lock, through Megatron-Core's TransformerBlock ``get_cpu_offload_context``,
    megatron/core/transformer/transformer_block.py l.298-311, NVIDIA/Megatron-LM
    @2a75ac12c54ba6a42b34024756820bf819a2e25f):

    - layer r < N starts its copy to pinned host memory before layer r + 1's forward and its GPU tensors are freed
      before layer L - N + r's forward (the compute stream waits for the copy there): at the loss every offloaded
      layer is gone, the other L - N are kept;
    - in backward, layer r's copy back starts at layer L - 1 - N + r's backward (``start_reload_map``) into new GPU
      tensors, freed after layer r's own backward (``release_all_memory``).

    So at layer i's backward the GPU holds the kept layers N <= r < i and the reloaded layers
    max(0, i - L + 1 + N) <= r < min(N, i): with equal layers L - N layers including layer i itself, TE's stated
    "peak memory usage of saving activations is (num_layers - num_offloaded_layers) * T" (l.607-615). TE skips
    tensors under 256 Ki elements (``_check_if_offload``, l.454-460): a layer's small tensors (norm statistics) stay,
    not counted here."""
    layers = len(per_layer)
    n = offloaded_layers
    if not 0 <= n < layers:
        raise ValueError(f"partial_offload_alive_below: offloaded_layers {n} must be in [0, {layers})")
    out = []
    for i in range(layers):
        kept = sum(per_layer[n:i]) if i > n else 0.0
        lo = max(0, i - layers + 1 + n)
        out.append(kept + sum(per_layer[lo:min(n, i)]))
    out.append(sum(per_layer[n:]))
    return out


def _candidates(layers: int, *series: tuple[float, ...]) -> list[int] | None:
    """Backward-walk positions k (k = 0 is the last layer) that can hold the first maximum.

    When the per-layer terms repeat with a period (identical layers: 1; Qwen3.5's 3 DeltaNet + 1
    attention: 4), the total within one residue class is linear in k plus max(held, rising
    gradients), a convex function, so its largest point is an end of the class. Layer 0 may differ
    (an adapter run without checkpointing saves less there): it is then a candidate of its own.
    None when the layers follow no such pattern (the caller walks them all).
    """
    p = _period(layers, *series)
    if p:
        return sorted(_class_ends(layers, p))
    p = _period(layers - 1, *(s[1:] for s in series if s))
    if p:
        # layers 1..L-1 are k = 0..L-2 (periodic in k as in the layer index); layer 0 is k = L-1
        return sorted(_class_ends(layers - 1, p) | {layers - 1})
    return None


def step_max_transient(t: StepTerms) -> float:
    """The largest transient bytes (not persistent state, not saved activations) at any event of
    the step, peak or not: what the caching allocator ends up holding as reusable blocks."""
    last = _last_unit(t)
    fsdp_static = t.fsdp_root_unit + t.fsdp_root_grads
    layer = max(t.layer_backward_transient, default=0.0) + t.in_backward_step
    return max(
        t.logits.forward_peak + t.fsdp_root_unit + t.fsdp_all_gathered + last,
        t.logits.backward_peak + t.fsdp_root_unit + t.fsdp_all_gathered + last,
        t.logits_grad_bf16 + fsdp_static + t.fsdp_all_gathered + last,
        layer + fsdp_static + t.fsdp_layer_units + t.fsdp_unsharded_grads + t.fsdp_all_gathered,
        fsdp_static + t.fsdp_root_embedding_grads,
        t.optimizer_temporaries,
        t.comm_forward_transient,
        t.layer_forward_transient,
        t.accumulation_transient if t.grad_accumulation else 0.0,
        t.zero_step_cast,
        t.gathered_backward + (0.0 if t.zero_ipg_persistent else t.zero_ipg_buckets) + t.offload_staging,
    )
