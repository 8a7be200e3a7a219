"""Per-rank byte terms under tensor, sequence, context, pipeline and expert parallelism.

One rank's step is the single-replica step of ``trainfit.plan.terms`` with four changes, each applied
once here:

* **Tensor (+ sequence) parallel** through the shard spec (``trainfit.memory.parallel.shard_spec``):
  weights, gradients, optimizer states, saved activations and the MLP's backward buffers of one TP
  rank come from the per-op models run on it. Korthikanti et al. 2022 (Table 2) give the same split
  for Megatron's GPT: without SP the layer norms and the column-parallel inputs are replicated and
  the rest is divided by t (their ``sbh(10 + 24/t + 5as/ht)``); with SP the norms and residual run on
  ``s/t`` tokens (``sequence_shards``). The mechanism is torch's DTensor tensor parallel (the plan
  torchtitan uses, traced exactly by ``trainfit.trace.tensor_parallel``): under SP the
  column-parallel projections save their all-gathered input (Megatron-LM saves the shard: 4·h·(1-1/t)
  B per token per layer less); the vocabulary-parallel cross-entropy (``loss_parallel``) peaks at 14 B
  per local logit in forward (bf16 logits, fp32 copy, the shifted logits and their exp) and 16 B in
  backward, keeping 4 B; the embedding's gradient under ``RowwiseParallel`` is a full-vocabulary
  Partial tensor, reduced to the rank's rows at the optimizer step (Megatron keeps only its rows).
* **Context parallel**: every token term holds ``seq / cp`` tokens. Ring attention (Liu et al. 2023) as
  torch implements it (load-balanced halves, K/V all-gathered once, fp32 merging and dK/dV accumulators)
  and Ulysses (Jacobs et al. 2023) as verl wraps it (all-to-all of q, k, v and the output) add their
  attention buffers, replayed allocation by allocation (``trainfit.memory.parallel``); under both
  o_proj saves a new q-sized tensor (Ulysses' all-to-all output; the contiguous copy of the ring's
  merged output), not a view of the attention output. Checked against rank 0's trace
  (``trainfit.trace.context_parallel``).
* **Pipeline parallel** (``trainfit.memory.pipeline``): the stage's layers, the embedding on the first,
  head, logits and loss on the last, and the schedule's other micro-batches in flight; each in-flight
  micro-batch's stage output and received input stay until its backward (as
  ``torch.distributed.pipelining`` keeps them; Megatron-LM frees the output's data after sending it),
  and a stage without the loss peaks in its last layer's forward (``rank_buffers``). Checked against
  one traced 1F1B stage (``trainfit.trace.pipeline``); the interleaved schedule rests on Megatron-Core's
  warm-up counts.
* **Expert parallel**: the rank holds ``experts / ep`` experts (``width / etp`` wide); dropless routing
  with balanced load sends it T·k token copies, so the experts' saved activations are those of T·k rows;
  the dispatch and combine all-to-alls add T·k·h buffers in and out per MoE layer while they run.

The data-parallel remainder is sharded by ``parallel.strategy`` over the data x context ranks (dense
terms) and the expert-data-parallel ranks, tp·cp·dp / (ep·etp) under Megatron-Core's MoE parallel
folding (experts): Megatron's distributed optimizer shards over its
``data_parallel_group_with_cp``, torchtitan's FSDP over ``dp_shard_cp``, DeepSpeed-Ulysses' ZeRO over the
sequence-data-parallel group.

Pure: no torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from math import ceil

from trainfit.errors import CardError
from trainfit.memory import attention as attn
from trainfit.memory.activations import (ARCH_FAMILIES, DROPOUT_MASK_BYTES, ActivationBytes, activation_bytes,
                                         compiled_rules_apply, dense_mlp_bytes, megatron_dense_mlp_bytes,
                                         megatron_moe_bytes, moe_block_bytes)
from trainfit.memory.lora import lora_largest_tensor_params, lora_trainable_params
from trainfit.memory.optimizer import PAGED, master_weight_bytes, optimizer_state_bytes, step_temporary_bytes
from trainfit.memory.parallel import ParallelLayout, shard_spec
from trainfit.memory.params import (
    ParamBreakdown, linear_groups, param_breakdown, param_tensors, routed_expert_layer_params,
)
from trainfit.memory.phases import StepTerms
from trainfit.memory.pipeline import Stage, first_chunk_forwards_in_flight
from trainfit.memory.sharding import Sharding
from trainfit.memory.weights import WeightBytes, count_scale
from trainfit.plan.fsdp_no_sync import pipeline_fsdp2_held_accumulation_bytes, pipeline_fsdp2_holds_unsharded
from trainfit.plan.rank_buffers import backward_buffers, comm_buffers, loss_region, stage_forward_transient
from trainfit.plan.resolve import model_dtype, trainable_spec
from trainfit.plan.terms import (HOST_BYTES_PER_PROCESS, hf_sdpa_of, _autocast_copies, _fsdp_terms, _megatron_fsdp_fp8_units,
                                 autocast_copies_weights, padding_mask_of, megatron_fsdp_fp8_params,
                                 fp8_linear_input_bytes, glu_input_bytes, fsdp_casts_gathered_params, fsdp_gathered_dtype,
                                 gptq_torch_dequant, sac_saves_linear_outputs,
                                 lora_tensors, torchao_fp8_gather_units, trained_dtype_bytes, zero_config_of,
                                 zero_master_states)
from trainfit.spec.card import RunCard
from trainfit.spec.enums import (ComputeDtype, ContextParallelKind, Fp8Recipe, LayerKind, MoeExperts, Offload,
                                 RecomputeModule, SelectiveCheckpointing, Strategy, TensorParallelImpl, ZERO_STAGES)
from trainfit.spec.model import DEEPSEEK_FAMILIES, DEEPSEEK_MOE_BLOCK, ModelSpec
from trainfit.spec.training import TrainableSpec
from trainfit.units import BYTES_PER_DTYPE

@dataclass(frozen=True, slots=True)
class RankParams:
    """Parameters on one rank (after tensor and expert parallel, before data-parallel sharding)."""

    layers: tuple[int, ...]
    """Per stage layer (stage order): dense + the rank's experts."""
    experts: tuple[int, ...]
    """Per stage layer: the rank's expert parameters (part of ``layers``)."""
    embedding: int
    head: int
    """Output head (or a tied embedding's copy on the last stage) + final norm."""
    largest_tensor: int
    lora_per_layer: float = 0.0

    @property
    def dense(self) -> int:
        return sum(self.layers) - sum(self.experts) + self.embedding + self.head

    @property
    def expert(self) -> int:
        return sum(self.experts)


def rank_params(spec: ModelSpec, ss: ModelSpec, layout: ParallelLayout, stage: Stage, card: RunCard) -> RankParams:
    """What the stage's TP/EP rank holds (``ss``: its shard spec)."""
    pb = param_breakdown(ss)
    ep = layout.ep
    experts = tuple(routed_expert_layer_params(ss, i) // ep for i in stage.layers)
    layers = tuple(pb.per_layer[i] - routed_expert_layer_params(ss, i) + e for i, e in zip(stage.layers, experts))
    if stage.last and ss.mtp_layers:  # DeepSeek-V3 MTP modules run after the last layer, beside the head
        moe_layer = next((i for i in range(ss.num_layers) if routed_expert_layer_params(ss, i)), None)
        mtp_e = (routed_expert_layer_params(ss, moe_layer) // ep) if moe_layer is not None else 0
        mtp_full = routed_expert_layer_params(ss, moe_layer) if moe_layer is not None else 0
        extra = pb.per_layer[ss.num_layers:]
        experts += (mtp_e,) * len(extra)
        layers += tuple(n - mtp_full + mtp_e for n in extra)
    tied = not pb.lm_head
    emb = pb.embedding if stage.first else 0
    head = 0
    if stage.last:
        head = (pb.lm_head or (pb.embedding if layout.pp > 1 else 0)) + ss.hidden_size
    largest = 0
    for g in linear_groups(ss):
        largest = max(largest, g.in_features * g.out_features * (g.experts // ep if g.is_fused_experts else 1))
    if emb or (stage.last and (not tied or layout.pp > 1)):
        largest = max(largest, pb.embedding if (emb or tied) else pb.lm_head)
    lora = trainable_spec(card).lora
    per = 0.0
    if lora is not None:
        per = lora_trainable_params(ss, lora) * count_scale(ss) / ss.num_layers
        largest = lora_largest_tensor_params(ss, lora)
    return RankParams(layers=layers, experts=experts, embedding=emb, head=head, largest_tensor=largest,
                      lora_per_layer=per)


def rank_weight_share(card: RunCard, spec: ModelSpec, sharding: Sharding, layout: ParallelLayout,
                      stage: Stage) -> float:
    """Fraction of the model's parameters one rank of pipeline stage ``stage`` keeps resident: its tp/pp/ep shard
    (``rank_params``) under the data-parallel sharding of the weights (dense and expert divisors, ``_term_divisors``),
    as ``rank_terms`` counts the policy's ``weights``: what a frozen copy laid out like the policy holds there."""
    ss = shard_spec(spec, layout.tp, layout.etp)
    rp = rank_params(spec, ss, layout, stage, card)
    total = param_breakdown(spec).total * count_scale(spec)
    if not total:
        return 0.0
    return count_scale(ss) * _term_divisors(sharding.weights_divisor, layout).of(rp.dense, rp.expert) / total


def stage_spec(ss: ModelSpec, stage: Stage) -> ModelSpec:
    """The shard spec cut to the stage's layers (for per-layer counts of its own); its windowed layers renumbered
    to the stage's, as ``plan.time`` does for its shard."""
    types = tuple(ss.layer_types[i] for i in stage.layers) if ss.layer_types else ()
    return replace(ss, num_layers=len(stage.layers), layer_types=types,
                   sliding_layers=tuple(j for j, i in enumerate(stage.layers) if i in ss.sliding_layers))


@dataclass(frozen=True, slots=True)
class _Divisors:
    dense: int
    expert: int

    def of(self, dense: float, expert: float) -> float:
        return dense / self.dense + expert / self.expert


def _term_divisors(d: int, layout: ParallelLayout) -> _Divisors:
    """Dense terms shard over ``d`` of the data x context ranks; the experts over the same fraction of the
    expert-data-parallel ranks (``ParallelLayout.expert_data_group``: tp·cp·dp / (ep·etp) under
    Megatron-Core's parallel folding)."""
    if d <= 1:
        return _Divisors(1, 1)
    return _Divisors(d, max(1, d * layout.expert_data_group // layout.data_group))


def rank_terms(card: RunCard, spec: ModelSpec, sharding: Sharding, layout: ParallelLayout, stage: Stage, *,
               later: bool) -> tuple[StepTerms, dict[str, float]]:
    """One rank's step terms and its host-RAM terms per node.

    ``later``: the stage's second and later backwards (gradients of earlier micro-batches held, one
    forward fewer in flight); else its first backward (no gradient yet). Without pipeline parallel
    ``later`` is plain gradient accumulation (more than one micro-batch).
    """
    prec = card.precision
    trainable = trainable_spec(card)
    ss = shard_spec(spec, layout.tp, layout.etp)
    scale = count_scale(ss)
    rp = rank_params(spec, ss, layout, stage, card)
    sspec = stage_spec(ss, stage)
    wdtype = card.weights_dtype
    bpp = BYTES_PER_DTYPE[wdtype.value]
    lora = trainable.lora
    wdiv = _term_divisors(sharding.weights_divisor, layout)
    gdiv = _term_divisors(sharding.grads_divisor, layout)
    odiv = _term_divisors(sharding.optimizer_divisor, layout)
    n_lora = rp.lora_per_layer * len(stage.layers)

    train_bytes, grad_bytes, use_master, state_bytes = trained_dtype_bytes(card)
    use_master, state_bytes, _ = zero_master_states(card, sharding.strategy, train_bytes=train_bytes,
                                                    use_master=use_master, state_bytes=state_bytes)
    if lora is None:
        n_opt = scale * odiv.of(rp.dense, rp.expert)  # trained parameters whose states this rank keeps
        n_grad = scale * gdiv.of(rp.dense, rp.expert)
        tensors = param_tensors(ss)
        full_n = param_breakdown(ss).total * scale
    else:
        n_opt, n_grad = n_lora / odiv.dense, n_lora / gdiv.dense
        tensors = lora_tensors(ss, lora)
        full_n = lora_trainable_params(ss, lora) * scale
    # optimizer states of the rank: the optimizer's bytes per trained parameter on the shard spec
    opt_full = optimizer_state_bytes(optimizer=prec.optimizer, params=full_n, tensors=tensors, state_bytes=state_bytes)
    opt = opt_full * n_opt / full_n if full_n else 0.0
    master = master_weight_bytes(params=n_opt) if use_master else 0.0
    largest = rp.largest_tensor * scale
    temps = step_temporary_bytes(optimizer=prec.optimizer, impl=prec.optimizer_impl, params=n_opt,
                                 largest_tensor=largest / odiv.dense, state_bytes=state_bytes)
    zero_step: dict[str, float | bool] = {}
    if _deepspeed_zero(card) and card.parallel.offload is Offload.NONE and not prec.optimizer_in_backward:
        temps, zero_step = _zero_step(card, spec, sharding.strategy, partition=n_opt, grad_bytes=grad_bytes,
                                      state_bytes=state_bytes)
    weights = scale * bpp * wdiv.of(rp.dense, rp.expert)
    adapter = n_lora * train_bytes / wdiv.dense if lora is not None else 0.0

    offload = card.parallel.offload
    host: dict[str, float] = {}
    per_node = min(card.hardware.gpus_per_node, sharding.world_size)
    grads_scale = 1.0
    if offload is not Offload.NONE:
        host["optimizer_states"] = (opt + master) * per_node
        opt = master = temps = 0.0
    if offload is Offload.PARAMS_AND_OPTIMIZER:
        host["weights"] = (weights + adapter) * per_node
        host["gradients"] = n_grad * grad_bytes * per_node
        weights = adapter = 0.0
        grads_scale = 0.0
    host["processes"] = HOST_BYTES_PER_PROCESS * per_node
    host["model_load"] = param_breakdown(spec).total * count_scale(spec) * bpp

    # gradients: the walked chunk's layers one by one, the stage's other chunks held (later backwards)
    pos = {layer: k for k, layer in enumerate(stage.layers)}
    tied = not param_breakdown(ss).lm_head
    # a pipeline stage under FSDP2 holds its unsharded gradients (in the reduce dtype) and gathered parameters to
    # the end of its last backward; the optimizer step reads the reduce-scattered shards
    # (pipeline_fsdp2_holds_unsharded). Under CPU offload too: only the reduce-scattered shard goes to the host,
    # the held unsharded gradient stays on the GPU (pipeline_fsdp2_holds_unsharded)
    pp_held = pipeline_fsdp2_holds_unsharded(card) and sharding.gathers_params
    held_scale = 1.0 if pp_held else grads_scale  # the walked gradients' share on the GPU
    step_grads: dict[str, float] = {}
    if pp_held:
        step_grads["optimizer_step_grads"] = grads_scale * (
            n_grad * grad_bytes if lora is None else n_lora * grad_bytes / gdiv.dense)
    hdiv = _term_divisors(1, layout) if pp_held else gdiv  # the divisors of the walked (held) gradients
    if lora is None:
        g = scale * grad_bytes * held_scale
        per_layer = [g * ((rp.layers[pos[i]] - rp.experts[pos[i]]) / hdiv.dense + rp.experts[pos[i]] / hdiv.expert)
                     for i in stage.layers]
        grads_head = g * rp.head / hdiv.dense
        grads_emb = g * rp.embedding / hdiv.dense
        if tied and layout.pp == 1:
            # one matrix: its gradient appears first, in the head's backward
            grads_head, grads_emb = grads_head + grads_emb, 0.0
        elif (layout.tp > 1 and stage.first and gdiv.dense == 1
              and card.parallel.tensor_parallel_impl is TensorParallelImpl.DTENSOR):
            # RowwiseParallel embedding: a full-vocabulary Partial gradient, reduced to the rank's rows
            # (a new tensor) at the optimizer step; sharded gradients (FSDP) reduce-scatter it in backward.
            # Megatron's VocabParallelEmbedding masks the other ranks' tokens and all-reduces its output, so
            # its weight gradient is its own rows (megatron/core/tensor_parallel/layers.py)
            temps += grads_emb
            grads_emb = g * spec.vocab_size * spec.hidden_size
    else:
        per_layer = [n_lora * grad_bytes * held_scale / hdiv.dense / len(stage.layers) for _ in stage.layers]
        grads_head = grads_emb = 0.0
    held_transient = 0.0
    if pp_held and lora is None:
        # the stage's last backward adds a new unsharded gradient into the held one: autograd's own accumulation,
        # one tensor at a time, when the gradient is already in the reduce dtype; else FSDP2's post-backward
        # (accumulate_unsharded_grad_if_needed) adds the whole unit's new gradients, in the gathered dtype, after the
        # unit's backward (pipeline_fsdp2_held_accumulation_bytes). Every earlier micro-batch's gradients are held
        # through the whole backward, so the largest unit (a decoder layer, or the root's embedding / norm and head)
        # or tensor sets it
        held_transient = pipeline_fsdp2_held_accumulation_bytes(
            unit_grad_bytes=max(grads_emb + grads_head, max(per_layer, default=0.0)),
            largest_tensor_grad_bytes=scale * grad_bytes * rp.largest_tensor / hdiv.dense,
            grad_dtype_bytes=grad_bytes,
            gathered_dtype_bytes=BYTES_PER_DTYPE[fsdp_gathered_dtype(card).value]
            if fsdp_casts_gathered_params(card, sharding) else bpp)
    # nanotron's FP32GradientAccumulator (parallel.grad_accumulation_pass, precision.grads fp32): its fp32 buffer of
    # every parameter the rank holds (ZeRO-1 too) is made at init and kept; the walked gradients are autograd's
    # 16-bit .grad tensors, which live until loss.backward() returns and are then added into it and freed
    # (huggingface/nanotron src/nanotron/optim/gradient_accumulator.py l.77-80, 163-173 (torch.zeros of every
    # parameter the accumulator is given: grad_buckets_named_params, the whole model under ZeRO-1 too, helpers.py
    # l.364-368), l.204-223 (backward, then add_ and .grad = None) @c252843039cc167ff8d6894b87172af4637eb14b)
    accumulator = card.parallel.grad_accumulation_pass and lora is None
    grad_buffer = n_grad * grad_bytes if accumulator else 0.0
    if accumulator:
        half = bpp / grad_bytes
        per_layer = [x * half for x in per_layer]
        grads_head, grads_emb = grads_head * half, grads_emb * half
    walked = [pos[i] for i in stage.chunk_layers]
    grads_walk = tuple(per_layer[k] for k in walked)
    grads_other = sum(per_layer) - sum(grads_walk) if later else 0.0
    tied_grad = 0.0
    if lora is None and layout.pp == 1 and tied and gdiv.dense == 1 and not prec.optimizer_in_backward:
        tied_grad = 2 * rp.embedding * scale * (bpp if accumulator else grad_bytes)

    mp_gather = fsdp_casts_gathered_params(card, sharding)  # gathered in param_dtype: fsdp_gathered_dtype
    autocast = autocast_copies_weights(card, sharding) and lora is None
    act = _activations(card, spec, ss, layout, stage, trainable, autocast=autocast)
    in_flight = stage.in_flight_later_backward if later else stage.in_flight_first_backward
    ckpt = card.parallel.checkpoints_layers
    one = act.total(gradient_checkpointing=ckpt)
    offloaded = card.parallel.activation_offload_layers or 0
    if offloaded >= len(stage.layers):
        raise CardError(f"parallel.activation_offload_layers: {offloaded} must be below the stage's"
                        f" {len(stage.layers)} decoder layers (Transformer Engine keeps the last layer on the GPU)")
    full_offload = card.parallel.activation_offload and not offloaded
    # the head's saved inputs are alive for head_forwards_in_flight of the in-flight forwards (the current one among
    # them on the last rank), the token ids (the first rank's embedding less the rotary cos/sin every chunk saves,
    # checkpointed_embedding) for the chunk-0 forwards only (first_chunk_forwards_in_flight); the other in-flight
    # forwards hold decoder layers (and the cos/sin) only
    heads = head_forwards_in_flight(stage)
    ids = act.checkpointed_embedding if stage.first else 0.0
    embedded = first_chunk_forwards_in_flight(layout, stage.index, later=later) if stage.first else 0
    held = (in_flight - 1) * (one - act.head - ids) + (heads - 1) * act.head + (embedded - 1) * ids
    inflight = 0.0 if full_offload else held
    b, s_loc = card.batch.micro_batch_size, card.batch.seq_len // layout.cp
    tokens = b * s_loc
    a = 4 if model_dtype(card) is ComputeDtype.FP32 else 2
    seq_tokens = tokens // (layout.tp if layout.sp else 1)
    unit = a * seq_tokens * spec.hidden_size  # one residual-stream tensor of a micro-batch
    # torch.distributed.pipelining keeps each in-flight micro-batch's stage output and received input
    # (the latter is the checkpointed first layer's saved input under checkpointing) until its backward;
    # Megatron-Core with deallocate_pipeline_outputs frees the output once sent (pipeline_output_bytes), and its
    # first layer's norm saves the received tensor itself (pipeline_input_bytes)
    pipe = 0.0
    if layout.pp > 1:
        out = pipeline_output_bytes(unit=unit, last=stage.last,
                                    deallocated=card.parallel.pipeline_outputs_deallocated)
        received = pipeline_input_bytes(unit=unit, first=stage.first, checkpointed=ckpt,
                                        megatron=card.parallel.tensor_parallel_impl is TensorParallelImpl.MEGATRON)
        pipe = in_flight * (out + received)
    layer_fwd = 0.0 if stage.last else stage_forward_transient(ss, stage, ckpt=ckpt, unit=unit, tokens=tokens, a=a)

    lg, lg_grad = loss_region(card, spec, ss, layout, stage, tokens=tokens, act_dtype=a)
    trans = backward_buffers(card, ss, layout, stage, tokens=tokens, dtype_bytes=a)
    comm = comm_buffers(card, ss, layout, stage, tokens=tokens, dtype_bytes=a)
    layer_trans = tuple(max(trans[k], comm[k]) for k in walked)
    eager = attn.runs_eager(spec.family, card.attention) and spec.num_full_attention_layers > 0
    scores = attn.score_elements(micro_batch_size=b, seq_len=s_loc, heads=ss.num_attention_heads, eager=eager)
    attention_forward = attn.forward_transient_bytes(scores=scores, gradient_checkpointing=ckpt, dtype_bytes=a,
                                                     family=spec.family)

    in_bwd = 0.0
    if prec.optimizer_in_backward:
        in_bwd = largest * grad_bytes * grads_scale / gdiv.dense + step_temporary_bytes(
            optimizer=prec.optimizer, impl=prec.optimizer_impl, params=largest, largest_tensor=largest,
            state_bytes=state_bytes) / odiv.dense
        grads_walk = tuple(0.0 for _ in grads_walk)
        grads_head = grads_emb = grads_other = 0.0
        temps = 0.0
    if offloaded:
        host["activations"] = sum(act.per_layer[:offloaded]) * per_node
    elif card.parallel.activation_offload:
        # every in-flight forward offloaded: the same heads and embeddings as kept on the GPU otherwise
        host["activations"] = (one + held) * per_node

    fsdp: dict[str, float] = {}
    if sharding.gathers_params:
        pb_stage = ParamBreakdown(embedding=rp.embedding, lm_head=max(0, rp.head - ss.hidden_size) if rp.head else 0,
                                  linear_weights=sum(rp.layers), other=ss.hidden_size if rp.head else 0,
                                  largest_layer=max(rp.layers, default=0), per_layer=rp.layers)
        gather_bpp = BYTES_PER_DTYPE[fsdp_gathered_dtype(card).value] if mp_gather else bpp
        w_stage = WeightBytes(base=gather_bpp * pb_stage.total * scale, adapter=n_lora * train_bytes)
        fsdp, _ = _fsdp_terms(sspec, sharding, trainable, w_stage, pb=pb_stage, scale=scale,
                              n_train=n_lora if lora is not None else pb_stage.total * scale, grad_bytes=grad_bytes,
                              reshard_after_forward=False if pp_held else None)
        if megatron_fsdp_fp8_params(card) and fsdp.get("fsdp_layer_units"):
            fsdp, _ = _megatron_fsdp_fp8_units(card, sspec, fsdp, pb=pb_stage, scale=scale)
        fsdp = (torchao_fp8_gather_units(card, sspec, fsdp, pb=pb_stage, scale=scale,
                                         weights_divisor=sharding.weights_divisor) or (fsdp, ""))[0]
    paged = prec.optimizer in PAGED and offload is Offload.NONE
    if prec.compute.quantized_gemms:  # the stage's fp8 weights / copies and scaling state (memory/fp8.py)
        from trainfit.plan.terms import fp8_weight_bytes

        weights += fp8_weight_bytes(card, sspec, scale=scale, layers=stage.layers, model_layers=spec.num_layers,
                                    shards=wdiv.dense if megatron_fsdp_fp8_params(card) else 1)[0]
    terms = StepTerms(
        weights=weights,
        adapter_weights=adapter,
        master_weights=master,
        optimizer_states=0.0 if paged else opt,
        paged_optimizer_states=opt if paged else 0.0,
        grads_per_layer=grads_walk,
        grads_head=grads_head,
        grads_embedding=grads_emb,
        grads_other=grads_other,
        activations=act,
        gradient_checkpointing=ckpt,
        logits=lg,
        logits_grad_bf16=lg_grad,
        layer_backward_transient=layer_trans,
        attention_forward_transient=attention_forward,
        tied_embedding_grad_transient=tied_grad,
        optimizer_temporaries=temps,
        grad_accumulation=later,
        grads_preallocated=megatron_grad_buffer_held(card),
        ddp_buckets=_ddp_bucket_bytes(card, sharding, layout, n_grad=n_grad, grad_bytes=grad_bytes, half_bytes=bpp),
        zero2_bucket=spec.hidden_size ** 2 * grad_bytes if sharding.zero2_bucket else 0.0,
        activation_offload=full_offload,
        offloaded_layers=offloaded,
        autocast_weight_cache=2.0 * (sum(rp.layers) + rp.head + rp.embedding) * scale / wdiv.dense if autocast else 0.0,
        in_backward_step=in_bwd,
        inflight_activations=inflight,
        pipeline_buffers=pipe,
        comm_forward_transient=max(comm_buffers(card, ss, layout, stage, tokens=tokens, dtype_bytes=a, forward=True,
                                                head_saved=act.head).values(), default=0.0),
        forward_at="loss (log-softmax over the logits)" if stage.last else "end of the stage's forward (output sent)",
        layer_forward_transient=layer_fwd,
        grad_buffer=grad_buffer,
        accumulation_transient=held_transient if pp_held else 0.0 if accumulator else scale * grad_bytes
        * grads_scale * ((rp.embedding or max(rp.layers, default=0) and rp.largest_tensor) / gdiv.dense)
        if lora is None else 0.0,
        fsdp_gathered_kept=pp_held and bool(fsdp.get("fsdp_all_gathered")),
        **fsdp,
        **zero_step,
        **step_grads,
    )
    return terms, host


def pipeline_output_bytes(*, unit: float, last: bool, deallocated: bool) -> float:
    """Bytes of a stage's output that each in-flight micro-batch keeps until its backward: ``unit`` (one
    residual-stream tensor of a micro-batch, bytes) on every rank but the last (which sends none), 0 when the
    framework deallocates sent outputs. Megatron-Core's ``deallocate_output_tensor`` replaces the sent output's
    ``.data`` with a one-element tensor, keeping only its ``grad_fn`` (NVIDIA/Megatron-LM
    @d98e8a64ddf34856e74b24714e3bedb2f5a39553 megatron/core/pipeline_parallel/schedules.py l.171-201, called after
    each send), when ``config.deallocate_pipeline_outputs`` is set: Megatron-LM sets it for every run
    (megatron/training/argument_utils.py l.305 at that commit) and Megatron-Bridge's GPTModelProvider defaults it
    to True (NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/models/gpt_provider.py l.162
    @067f987df03b8355b03192d88d70f1709fedf51a); Megatron-Core's own default is False (model_parallel_config.py
    l.405), which is what mbridge's TransformerConfig keeps (ISEEKYAN/mbridge mbridge/core/llm_bridge.py
    ``_build_base_config`` @0656235e14d1cd43149dbc3d5d825c6e089fe630 sets no value)."""
    return 0.0 if last or deallocated else unit


def pipeline_input_bytes(*, unit: float, first: bool, checkpointed: bool, megatron: bool) -> float:
    """Bytes of a stage's received input that each in-flight micro-batch keeps beyond the layers' saved activations:
    ``unit`` (one residual-stream tensor of a micro-batch) on every rank but the first, none under full checkpointing
    (the checkpointed first layer saves that input, already in its figure), and none under Megatron-Core: its
    TransformerBlock runs the received tensor itself as the first layer's input (``hidden_states =
    self.input_tensor`` and ``make_viewless_tensor``, which shares its storage: NVIDIA/Megatron-LM
    @d98e8a64ddf34856e74b24714e3bedb2f5a39553 megatron/core/transformer/transformer_block.py l.588, l.605), and that
    layer's Transformer Engine norm saves its input tensor, not a copy (``save_for_backward(x, rstdevs)``,
    ``LayerNormLinear`` ``inputmat``: ``MEGATRON_TE_NORM_SOURCES``), which the Megatron layer figure already counts
    (``megatron_te_norm_savings`` leaves the norm its compute-dtype input). torch.distributed.pipelining with the
    per-op (transformers) layers keeps it apart: the eager RMSNorm saves an fp32 copy, not the received tensor (the
    pipeline stage trace of the accuracy grid)."""
    return 0.0 if first or checkpointed or megatron else unit


def head_forwards_in_flight(stage: Stage) -> int:
    """Forwards of the last model chunk (the one holding the final norm, the head, MTP and the loss) whose saved
    activations are alive at a backward of pipeline rank ``stage``: 1 on the last rank, 0 elsewhere (no head); the
    rank's other in-flight forwards hold decoder layers only.

    Megatron-Core's interleaved schedule (NVIDIA/Megatron-LM @d98e8a64ddf34856e74b24714e3bedb2f5a39553,
    ``megatron/core/pipeline_parallel/schedules.py``): the last rank warms up with ``(v - 1) x g`` forwards
    (l.964-965, ``g = microbatch_group_size_per_vp_stage``, pp by default), i.e. chunks 0 .. v-2 of the first group
    (``get_schedule_table`` l.989-1015); in the steady state forward ``k + W`` and backward ``k`` run in one
    iteration (l.1733-1749) and ``get_model_chunk_id`` (l.1244-1249) maps both to chunk v-1 of the same micro-batch
    whenever the forward is of chunk v-1 (the backward walks the chunks in reverse). So the last chunk's forward is
    always followed by its own backward. torch.distributed.pipelining's ScheduleInterleaved1F1B (torchtitan) orders
    the same way: warm-up ``(v - 1) x microbatches_per_round`` on the last rank, forward and backward stage indices
    that both give its last local stage for the first round of the steady state (torch 2.13.0
    torch/distributed/pipelining/schedules.py l.2884-2886, l.2981-2992). Under 1F1B the last rank warms up with
    none (l.957). Every forward is
    warm-up on the last rank only with fewer micro-batches than stages, which the interleaved schedule refuses
    (``memory.parallel.check_layout``). Before this, the walked chunk's figure with the head was counted for every
    in-flight forward: DeepSeek-V3 on 256 GB200 (PP 4, VP 4, 13 forwards in flight on the last rank) planned
    12 x 5.66 GiB of head activations that are never alive together (last rank 209.9 -> 142.0 GiB). Published
    memory point #413 (torchtitan Llama 3.1 405B, PP 8 interleaved, reserved 72.7 GiB) moves -39.0% -> -45.3%: its
    over-counted head had hidden part of an underestimate that lies elsewhere.

    Megatron-Core's ``overlap_moe_expert_parallel_comm`` (``parallel.moe_comm_overlap``) changes neither count. Its
    interleaved schedule warms up with one forward more (schedules.py l.966-969), but its steady state then runs
    forward ``k + W + 1`` and backward ``k`` as one combined step (l.1735, l.1890-1905 -> ``combined_1f1b.py``
    ``combined_forward_backward_step`` -> ``TransformerModelChunkSchedulePlan.run``,
    megatron/core/models/common/model_chunk_schedule_plan.py l.500-630 at the same commit) whose order is: the
    backward chunk's post-process (the head and loss backward, l.551-552) first, then forward layer i paired with
    backward layer ``L - 1 - i`` (each backward layer released after its pair, l.560-574), and the forward chunk's
    post-process (the head forward, l.617-618) last. So at the step's first backward the rank holds the ``W + 1``
    warm-up forwards, the count ``warmup_forwards`` + 1 without the overlap; the pairs keep their sum at that count
    (plus the paired forward layer, a one-layer transient not modelled here); and the new micro-batch's head runs
    only after the old one's is freed: one head alive on the last rank, not two. PP = 1
    (``forward_backward_no_pipelining`` l.778 -> ``combined_1f1b_schedule_for_no_pipelining``, combined_1f1b.py
    l.59-117: the first micro-batch's forward alone, then forward i + 1 with backward i) is the same order with no
    warm-up: one micro-batch in flight. Checked by the replay in tests/unit/test_pipeline_head_in_flight.py."""
    return 1 if stage.last else 0


def megatron_grad_buffer_held(card: RunCard) -> bool:
    """Whether the rank's gradients exist before its first backward: Megatron-Core's ``DistributedDataParallel``
    (``parallel.tensor_parallel_impl`` megatron) makes one contiguous gradient buffer of every parameter it trains
    when it wraps the model (``_ParamAndGradBuffer.__init__``: ``self.grad_data = torch.zeros(self.numel,
    dtype=self.grad_dtype, ...)``, ``param.main_grad`` a view into it; megatron/core/distributed/
    param_and_grad_buffer.py l.628-633 and the mapping after it) and only zeroes it at the start of each iteration
    (``DistributedDataParallel.zero_grad_buffer`` -> ``buffer.reset()`` = ``self.grad_data.zero_()``,
    distributed_data_parallel.py l.487-501, param_and_grad_buffer.py l.772-776; NVIDIA/Megatron-LM
    @5cb6dbb3ed04e6fa11a862d90fe898ac2d3ddfad, core_r0.12.0). So the buffer is held through every forward, the first
    micro-batch's too, as ZeRO-3's preallocated partitions are (``StepTerms.grads_preallocated``); without it a run of
    one micro-batch per step and no pipeline planned its forward with no gradient at all. Not where nanotron's
    accumulator already holds its own buffer (``grad_buffer``). Published check that does not depend on the rows'
    lengths: ms-swift's Megatron-SWIFT pair of one command, full 2 * 70GiB and LoRA 2 * 14GiB (Qwen2.5-7B-Instruct, TP 2,
    16 rows, one micro-batch; modelscope/ms-swift docs/source_en/Megatron-SWIFT/LoRA-Training.md, first printed
    @ea766ff5b4bbcec67b14309ab6203245e64b3298) differ by 56 GiB; the plans differ by 57 GiB with the buffer, 43 without
    (benchmarks points 703 / 704)."""
    return (card.parallel.tensor_parallel_impl is TensorParallelImpl.MEGATRON
            and not card.parallel.grad_accumulation_pass)


def _ddp_bucket_bytes(card: RunCard, sharding: Sharding, layout: ParallelLayout, *, n_grad: float, grad_bytes: float,
                      half_bytes: float) -> float:
    """The rank's torch DDP bucket copy of its gradients (``Sharding.ddp_bucket_copy``: ``gradient_as_bucket_view``
    False). nanotron's fp32 accumulation (``parallel.grad_accumulation_pass``) wraps the model in DDP only at ZeRO-0
    over more than one data-parallel rank (``make_ddp = dp > 1 and not (accumulate_grad_in_fp32 and zero_stage > 0)``,
    huggingface/nanotron src/nanotron/trainer.py l.786-788, DistributedDataParallel l.847-852 without
    gradient_as_bucket_view @c252843039cc167ff8d6894b87172af4637eb14b); that DDP buckets the bf16 parameters' bf16
    .grad, its comm hook adding each bucket into the fp32 buffer (optim/gradient_accumulator.py get_fp32_accum_hook),
    so the bucket is the parameters' dtype, not precision.grads."""
    if not card.parallel.grad_accumulation_pass or trainable_spec(card).lora is not None:
        return n_grad * grad_bytes if sharding.ddp_bucket_copy else 0.0
    return n_grad * half_bytes if sharding.strategy is Strategy.DDP and layout.data_group > 1 else 0.0


def _deepspeed_zero(card: RunCard) -> bool:
    """Whether a model-parallel card's ZeRO strategy is DeepSpeed's: zero2 and zero3 always (the card refuses them
    with tensor or pipeline parallel); zero1 only under Ulysses context parallel alone, since zero1 with tensor,
    pipeline or expert parallel or ring context parallel is Megatron-Core's distributed optimizer."""
    par = card.parallel
    if par.strategy in (Strategy.ZERO2, Strategy.ZERO3):
        return True
    return (par.strategy is Strategy.ZERO1 and par.context_parallel > 1
            and par.context_parallel_kind is ContextParallelKind.ULYSSES
            and par.tensor_parallel == par.pipeline_parallel == par.expert_parallel == 1)


def _zero_step(card: RunCard, spec: ModelSpec, strategy: Strategy, *, partition: float, grad_bytes: float,
               state_bytes: float) -> tuple[float, dict[str, float | bool]]:
    """DeepSpeed ZeRO's optimizer step on a rank holding ``partition`` trained elements: the optimizer's
    temporaries (bytes) and the step's StepTerms fields, as the single-replica plan charges them
    (``trainfit.plan.terms._deepspeed_terms``, ``trainfit.memory.deepspeed.zero_buffers``).

    DeepSpeed hands the optimizer one flat fp32 tensor at a time: stages 1-2 the partition of a parameter
    group, stage 3 one sub-group of about ``sub_group_size`` elements. Stage 3's ``step`` loops over the
    sub-groups; ``_prepare_fp32_grad_for_sub_group`` makes ``self.flatten(averaged_gradients[i]).to(fp32)`` of
    that sub-group only, ``_optimizer_step`` sets ``param_groups[g]['params'] = [fp32_partitioned_groups_flat[i]]``
    and steps, the bit16 update is an in-place ``copy_`` of the flat fp32 sub-group, ``_release_sub_group``
    drops its fp32 gradient (deepspeed 0.19.8 (PyPI) runtime/zero/stage3.py l.1235-1262, 2683-2700,
    2731-2738, 2854-2864, 2909-2927; deepspeedai/DeepSpeed deepspeed/runtime/zero/stage3.py l.1185, 2398,
    2448, 2585, 2628 @edaa72212672436c7be7fb49c5d5f5c4fb97b4641). A torch AdamW's foreach / for-loop temporaries
    are therefore sized by that flat tensor, not by the rank's whole partition nor by its largest parameter.
    DeepSpeed's own FusedAdam (what an ``optimizer`` section of type Adam/AdamW builds without ``torch_adam``
    or CPU offload: runtime/engine.py ``get_optimizer_configuration`` l.2377-2409 at 0.19.8, l.2133 at the
    commit above) updates in place through ``multi_tensor_applier`` (ops/adam/fused_adam.py l.179-193): no
    temporaries, which ``precision.optimizer_impl: fused`` gives."""
    from trainfit.memory.deepspeed import zero_buffers  # DeepSpeed-only module: imported where used

    stage = ZERO_STAGES[strategy]
    cfg = zero_config_of(card, spec, stage)
    buf = zero_buffers(cfg, dp=1, trainable_numel=partition, grad_bytes=grad_bytes, largest_param=0)
    prec = card.precision
    temps = step_temporary_bytes(optimizer=prec.optimizer, impl=prec.optimizer_impl, params=buf.optimizer_flat_numel,
                                 largest_tensor=buf.optimizer_flat_numel, state_bytes=state_bytes)
    return temps, {"zero_step_grads": partition * grad_bytes, "zero_step_cast": buf.step_cast,
                   "zero_step_fp32_grad": buf.step_fp32_grad, "zero_step_keeps_grads": stage == 3}


def _activations(card: RunCard, spec: ModelSpec, ss: ModelSpec, layout: ParallelLayout, stage: Stage,
                 trainable, *, autocast: bool) -> ActivationBytes:  # noqa: ANN001
    """Saved bytes of one forward of the walked chunk on this rank (per-op model on the shard spec);
    ``autocast``: autocast's 16-bit weight copies are saved (``autocast_copies_weights``, full training)."""
    prec = card.precision
    a = 4 if model_dtype(card) is ComputeDtype.FP32 else 2
    b, s_loc = card.batch.micro_batch_size, card.batch.seq_len // layout.cp
    fp8_in = fp8_linear_input_bytes(card)
    # Megatron-Core's module recomputes other than core_attn: the per-op figure runs without them
    # (layer_selective_checkpointing), megatron_recompute_freed drops what they free
    act = activation_bytes(ss, micro_batch_size=b, seq_len=s_loc, attention=card.attention, trainable=trainable,
                           compute_dtype_bytes=a, sequence_shards=layout.tp if layout.sp else 1,
                           selective=card.parallel.layer_selective_checkpointing,
                           compiled=card.parallel.compile, linear_input_bytes=fp8_in,
                           sac_saves_linear_outputs=sac_saves_linear_outputs(card),
                           sac_saves_attention=card.parallel.sac_saves_attention,
                           bf16_layers=(card.precision.bf16_first_layers, card.precision.bf16_last_layers),
                           hf_sdpa=hf_sdpa_of(card),
                           gptq_torch_dequant=gptq_torch_dequant(card),
                           padding_mask=padding_mask_of(card), glu_input_bytes=glu_input_bytes(card, ss))
    act = _autocast_copies(act, ss, enabled=autocast, scale=count_scale(ss))
    extra = 0.0
    if layout.cp > 1:
        # o_proj saves a new tensor, not a view of the attention output: Ulysses' all-to-all output, or the
        # contiguous copy of the ring's merged output (torch.cat of its load-balanced halves, laid out
        # (batch, heads, seq, dim)); Ulysses repeats fewer KV heads than cp to one per rank. Transformer Engine
        # fp8: o_proj saves its fp8 copy of that tensor instead, already in the per-op figure (memory.activations)
        extra = b * s_loc * a * ss.q_dim if trainable.lora is None and not fp8_in else 0
        if layout.cp_kind is ContextParallelKind.ULYSSES:
            extra += max(0.0, 2 * a * b * card.batch.seq_len * ss.head_dim * (1 - ss.num_kv_heads / layout.cp))
    sp_less = _by_layer_precision(card, ss, lambda lib: megatron_activation_savings(
        card, ss, layout, tokens=b * s_loc, dtype_bytes=a, trainable=trainable, linear_input_bytes=lib), fp8_in)
    per_layer = tuple(act.per_layer[i] + (extra if ss.layer_kind(i) is LayerKind.FULL_ATTENTION else 0)
                      - sp_less.get(i, 0.0) for i in stage.chunk_layers)
    ckpt = tuple(act.checkpointed_per_layer[i] for i in stage.chunk_layers)
    core_attn = card.parallel.layer_selective_checkpointing is SelectiveCheckpointing.CORE_ATTENTION
    if core_attn:
        # Megatron's selective recompute keeps everything outside the attention core, the shards among it
        ckpt = tuple(max(0.0, c - sp_less.get(i, 0.0)) for c, i in zip(ckpt, stage.chunk_layers))
    modules = card.parallel.megatron_recompute_modules - {RecomputeModule.CORE_ATTN}
    if modules and card.parallel.tensor_parallel_impl is TensorParallelImpl.MEGATRON:
        # each layer keeps all but what its module recomputes free (megatron_recompute_freed); not modelled: one
        # layer's recomputed tensors live during its backward
        te_norms = bool(megatron_te_norm_savings(
            ss, layout, tokens=b * s_loc, dtype_bytes=a,
            compiled=card.parallel.compile and compiled_rules_apply(ss, trainable=trainable, attention=card.attention)))
        freed = _by_layer_precision(card, ss, lambda lib: megatron_recompute_freed(
            ss, layout, modules, tokens=b * s_loc, dtype_bytes=a, linear_input_bytes=lib,
            probs_in_experts=card.parallel.moe_probs_in_experts, te_norms=te_norms), fp8_in)
        per_layer = tuple(max(0.0, n - freed.get(i, 0.0)) for n, i in zip(per_layer, stage.chunk_layers))
        if core_attn:
            ckpt = tuple(max(0.0, c - freed.get(i, 0.0)) for c, i in zip(ckpt, stage.chunk_layers))
    rope = act.embedding - act.checkpointed_embedding
    # SDPA past a sliding window or under a padding mask: the bool masks built once per forward before the stage's
    # first layer, inputs of every checkpointed layer (memory.attention.sdpa_bool_mask_bytes), as plan.terms holds
    # them on one rank; every stage's forward builds its own (a (b, 1, s, s) mask, no head or hidden dimension, so
    # tensor parallel does not split it)
    masks = attn.sdpa_bool_mask_bytes(ss, micro_batch_size=b, seq_len=s_loc, attention=card.attention,
                                      padding_mask=padding_mask_of(card), copies=hf_sdpa_of(card),
                                      dtype_bytes=a) if card.parallel.checkpoints_layers else 0
    return ActivationBytes(
        per_layer=per_layer,
        checkpointed_per_layer=ckpt,
        embedding=act.embedding if stage.first else rope,
        head=act.head - sp_less.get("head", 0.0) if stage.last else 0,
        checkpointed_embedding=(act.checkpointed_embedding if stage.first else 0) + masks,
        # embedding_backward stays None (the whole embedding figure): a rank of a parallel layout is only
        # traced at its whole step, whose backward peak lies elsewhere (llama pp2 stage 0, 4 micro-batches:
        # 106.1 MB, inside a layer; 73-90 MB at each embedding_dense_backward)
    )


RESIDUAL_DROPOUT_FAMILIES = frozenset({"opt", "mpt"})
"""Layer models that save a dropout mask on the residual branch after the attention and the MLP output."""


def _by_layer_precision(card: RunCard, ss: ModelSpec, per_layer: Callable[[float], dict], linear_input_bytes: float,
                        ) -> dict:
    """A per-layer dict of ``per_layer(linear_input_bytes)`` (``megatron_activation_savings``,
    ``megatron_recompute_freed``) whose layers ``precision.bf16_first_layers`` / ``bf16_last_layers`` keep in bf16
    (``PrecisionSpec.layer_quantized``, global indices of the model's spec ``ss``) take ``per_layer(0.0)``: their
    linears save the compute dtype's input, not a quantised copy. Other keys (``"head"``) keep the quantised run's."""
    quantized = per_layer(linear_input_bytes)
    prec = card.precision
    if not linear_input_bytes or not (prec.bf16_first_layers or prec.bf16_last_layers):
        return quantized
    bf16 = per_layer(0.0)
    out = {k: v for k, v in quantized.items() if not isinstance(k, int)}
    for i in range(ss.num_layers):
        v = (quantized if prec.layer_quantized(i, ss.num_layers) else bf16).get(i, 0.0)
        if v:
            out[i] = v
    return out


def megatron_activation_savings(card: RunCard, ss: ModelSpec, layout: ParallelLayout, *, tokens: int, dtype_bytes: int,
                                trainable: TrainableSpec, linear_input_bytes: float = 0.0) -> dict:
    """Bytes per layer (and ``"head"``) a Megatron-Core rank saves less than the per-op model
    (torch's DTensor plan, whose ``ColwiseParallel`` projections save their all-gathered
    input). Megatron's column-parallel linears save the sequence shard of their input and all-gather it again for
    the weight gradient (``LinearWithGradAccumulationAndAsyncCommunication.forward``: ``ctx.save_for_backward(input,
    weight)`` before the all-gather into the global ``mpu`` buffer; megatron-core 0.16.1 (PyPI)
    ``megatron/core/tensor_parallel/layers.py``, checked on a fake 2-rank group: the saved input is the
    ``[s/tp, b, h]`` shard; Transformer Engine's fused norm + linear does the same, saving ``ln_out`` and gathering it
    in backward when ``ln_out_needs_gather``, NVIDIA/TransformerEngine
    ``transformer_engine/pytorch/module/layernorm_linear.py`` @3ec878759cc601d088dfa5c0a4772acf4317b190; Korthikanti
    et al. 2022 §4.2.2): the attention's QKV input, a dense
    MLP's fc1 input and the output layer's input hold ``T/tp`` tokens, not ``T``. The bias-dropout-add after each
    row-parallel projection runs on the reduce-scattered shard, so its mask is ``T/tp`` tokens too. Empty unless
    ``parallel.tensor_parallel_impl`` is megatron with sequence parallel and a full-scope card (a frozen base saves
    no linear inputs). A MoE block of the Qwen3-MoE layout is counted as
    Megatron-Core runs it (``memory.activations.megatron_moe_bytes``: the sequence shard's tokens, the expert rows
    all-gathered over expert tensor parallel, the fused SwiGLU), with or without sequence parallel; DeepSeek-V3's
    attention and MoE blocks likewise (``megatron_mla_savings``, ``memory.arch_activations.megatron_deepseek_moe_bytes``:
    the fused weighted SwiGLU, no expert output kept by the combine); gpt-oss keeps its per-op figure. A dense
    SiLU-gated MLP (DeepSeek-V3's dense layers too) runs the fused SwiGLU
    (``memory.activations.megatron_dense_mlp_bytes``: ``act(gate)`` not kept twice; nothing to save where the compiled
    rules already recompute it), with or without sequence parallel. ``linear_input_bytes``: Transformer Engine fp8,
    whose QKV and fc1 save (and gather again) their input's fp8 copy at these bytes per element (``memory.fp8``); the output layer
    stays ``dtype_bytes``."""
    if not (card.parallel.tensor_parallel_impl in (TensorParallelImpl.MEGATRON, TensorParallelImpl.NANOTRON)
            and trainable.lora is None and card.scope.value == "full"):
        return {}
    if card.parallel.tensor_parallel_impl is TensorParallelImpl.NANOTRON:
        # nanotron (spec/enums.py TensorParallelImpl): only the column-parallel linears' sequence-shard inputs, its
        # MLP per-op (GLUActivation) and no Megatron MoE / MLA layers
        return nanotron_activation_savings(ss, layout, tokens=tokens, dtype_bytes=dtype_bytes)
    moe_less = megatron_moe_savings(ss, layout, tokens=tokens, dtype_bytes=dtype_bytes,
                                    linear_input_bytes=linear_input_bytes,
                                    probs_in_experts=card.parallel.moe_probs_in_experts)
    compiled = card.parallel.compile and compiled_rules_apply(ss, trainable=trainable, attention=card.attention)
    glu_less = megatron_dense_mlp_savings(ss, tokens=tokens, dtype_bytes=dtype_bytes,
                                          linear_input_bytes=linear_input_bytes, compiled=compiled)

    mla_less = megatron_mla_savings(ss, layout, tokens=tokens, dtype_bytes=dtype_bytes)
    norm_less = megatron_te_norm_savings(ss, layout, tokens=tokens, dtype_bytes=dtype_bytes, compiled=compiled)

    def is_moe(i: int) -> bool:
        return ss.moe is not None and ss.moe.is_moe_layer(i)

    if not (layout.sp and layout.tp > 1):
        less = {i: mla_less + (moe_less if is_moe(i) else glu_less) + norm_less.get(i, 0.0) for i in range(ss.num_layers)}
        if norm_less.get("head"):
            less["head"] = norm_less["head"]
        return {i: v for i, v in less.items() if v}
    h = ss.hidden_size
    gathered_less = tokens - tokens // layout.tp
    head_unit = dtype_bytes * gathered_less * h
    unit = (ceil(linear_input_bytes * tokens * h) - ceil(linear_input_bytes * (tokens // layout.tp) * h)
            if linear_input_bytes else head_unit)
    mask = gathered_less * h * DROPOUT_MASK_BYTES if ss.family in RESIDUAL_DROPOUT_FAMILIES and ss.dropout > 0 else 0
    out: dict = {"head": float(head_unit + norm_less.get("head", 0.0))}
    for i in range(ss.num_layers):
        less = 2 * mask + norm_less.get(i, 0.0)
        if ss.layer_kind(i) is LayerKind.FULL_ATTENTION and ss.family not in DEEPSEEK_FAMILIES:
            less += unit
        less += mla_less
        if not is_moe(i):
            less += unit + glu_less
        else:
            less += moe_less
        out[i] = float(less)
    return out


MEGATRON_TE_NORM_SOURCES = (
    "NVIDIA/Megatron-LM @92c8482e6dcd11c3666c61bb8d1f7e8d0730ed13: megatron/core/models/gpt/gpt_layer_specs.py"
    " l.250-261 (the input norm fused into linear_qkv, TELayerNormColumnParallelLinear; a dense MLP's pre-MLP norm"
    " into linear_fc1; any other norm backend.layer_norm), l.352-357 (q_layernorm / k_layernorm"
    " backend.layer_norm(for_qk=True)), megatron/core/extensions/transformer_engine_spec_provider.py l.53-60"
    " (layer_norm: TENorm), megatron/core/extensions/transformer_engine.py l.206-238 (TENorm: te.pytorch.RMSNorm);"
    " NVIDIA/TransformerEngine v2.8 (40c69e751a47ec87786283e125c5eb264101270f)"
    " transformer_engine/pytorch/ops/basic/rmsnorm.py l.187-202 (RMSNorm: rmsnorm_fwd, ctx.save_for_backward(x,"
    " rstdevs)), transformer_engine/pytorch/module/layernorm_linear.py l.208 and l.448-458 (LayerNormLinear saves"
    " inputmat, ln_out, mu, rsigma)")
"""Where ``megatron_te_norm_savings`` reads what Megatron-Core's Transformer Engine norms save."""


def megatron_te_norm_savings(ss: ModelSpec, layout: ParallelLayout, *, tokens: int, dtype_bytes: int,
                             compiled: bool = False) -> dict:
    """Bytes per layer (and ``"head"``) a Megatron-Core rank's RMSNorms save less than the per-op (eager
    transformers) figure, ``memory.activations._norm``: Transformer Engine's fused kernels save the norm's input in
    the compute dtype and one fp32 rstd per row (``RMSNorm``: ``save_for_backward(x, rstdevs)``; the input norm
    fused into ``linear_qkv``, ``LayerNormLinear``: ``inputmat``, ``ln_out`` (the linear's saved input, counted
    apart), ``mu`` (empty for RMSNorm), ``rsigma``), with no fp32 copy of the input (``MEGATRON_TE_NORM_SOURCES``).
    The per-op figure keeps that fp32 copy (``4·w`` per token), so each norm saves ``4·w`` bytes a token less: the
    input and pre-MLP norms on the residual stream (``tokens / tp`` under sequence parallel), the per-head q/k norms
    over every token at the shard's q/k widths, the final norm (``"head"``). Empty where the per-op figure already
    keeps no fp32 copy (``compiled``: the compiled rules), for zero-centred and fp32-weight norms, an fp32 compute
    dtype, layer layouts other than two norms a layer, and the families with their own layer model
    (``arch_activations``)."""
    from trainfit.memory.activations import _WEIGHT_ON_FP32_NORM, FP32, ZERO_CENTRED_NORM_FAMILIES

    if (compiled or dtype_bytes == FP32 or ss.family in ARCH_FAMILIES or ss.family in ZERO_CENTRED_NORM_FAMILIES
            or ss.family in _WEIGHT_ON_FP32_NORM or ss.norms_per_layer != 2 or ss.post_block_norms):
        return {}
    t = tokens // (layout.tp if layout.sp else 1)
    residual = FP32 * t * ss.hidden_size
    qk = FP32 * tokens * (ss.q_dim + ss.kv_dim) if ss.qk_norm and not ss.qk_norm_full_width else 0
    out: dict = {"head": float(residual)}
    for i in range(ss.num_layers):
        out[i] = float(2 * residual + (qk if ss.layer_kind(i) is LayerKind.FULL_ATTENTION else 0))
    return out


def nanotron_activation_savings(ss: ModelSpec, layout: ParallelLayout, *, tokens: int, dtype_bytes: int) -> dict:
    """Bytes per layer (and ``"head"``) a nanotron rank saves less than the per-op model under sequence parallel
    (``tp_mode`` REDUCE_SCATTER): with ``tp_recompute_allgather`` (default True) its column-parallel linear saves
    the sequence shard of its input and gathers it again in backward (huggingface/nanotron
    src/nanotron/parallel/tensor_parallel/functional.py l.213-216, src/nanotron/config/parallelism_config.py l.37
    @c252843039cc167ff8d6894b87172af4637eb14b), so ``qkv_proj``'s, ``gate_up_proj``'s and ``lm_head``'s saved
    inputs hold ``T/tp`` tokens, not ``T`` (the same saving as ``megatron_activation_savings``' first term; nanotron's
    MLP is per-op, so no fused-SwiGLU saving). Empty without sequence parallel."""
    if not (layout.sp and layout.tp > 1):
        return {}
    unit = float(dtype_bytes * (tokens - tokens // layout.tp) * ss.hidden_size)
    out: dict = {"head": unit}
    for i in range(ss.num_layers):
        attention = ss.layer_kind(i) is LayerKind.FULL_ATTENTION
        out[i] = unit * (int(attention) + int(ss.moe is None or not ss.moe.is_moe_layer(i)))
    return out


def megatron_mla_savings(ss: ModelSpec, layout: ParallelLayout, *, tokens: int, dtype_bytes: int) -> float:
    """Bytes a Megatron-Core rank saves less per DeepSeek-V3 attention block than the per-op figure
    (``memory.arch_activations``: ``mla_bytes - megatron_mla_bytes``): the sequence shard of the down projections'
    input and of the compressed q / kv branch, a contiguous value instead of the whole kv up-projection output held
    by a view, no contiguous copy of the attention output. 0 for other families."""
    if ss.family not in DEEPSEEK_FAMILIES or ss.mla is None:
        return 0.0
    from trainfit.memory.arch_activations import megatron_mla_bytes, mla_bytes

    return float(mla_bytes(ss, tokens=tokens, compute_dtype_bytes=dtype_bytes)
                 - megatron_mla_bytes(ss, tokens=tokens, sequence_shards=layout.tp if layout.sp else 1,
                                      compute_dtype_bytes=dtype_bytes))


def megatron_mla_up_proj_freed(ss: ModelSpec, layout: ParallelLayout, *, tokens: int, dtype_bytes: int) -> float:
    """Bytes ``mla_up_proj`` (``--recompute-modules mla_up_proj``) frees per DeepSeek-V3 attention block on a
    Megatron-Core rank: the query, key and value (``memory.arch_activations.megatron_mla_bytes`` without, less with
    the recompute). 0 for other families."""
    if ss.family not in DEEPSEEK_FAMILIES or ss.mla is None:
        return 0.0
    from trainfit.memory.arch_activations import megatron_mla_bytes

    kw = dict(tokens=tokens, sequence_shards=layout.tp if layout.sp else 1, compute_dtype_bytes=dtype_bytes)
    return float(megatron_mla_bytes(ss, recompute_up_proj=False, **kw) - megatron_mla_bytes(ss, recompute_up_proj=True, **kw))


def megatron_moe_savings(ss: ModelSpec, layout: ParallelLayout, *, tokens: int, dtype_bytes: int,
                         linear_input_bytes: float = 0.0, probs_in_experts: bool = True) -> float:
    """Bytes a Megatron-Core rank saves less per MoE layer than the per-op figure (``memory.activations``: the
    whole block on the rank's ``tokens``, the experts on ``tokens · k`` rows, ``act(gate)`` kept beside the SwiGLU
    input): ``moe_block_bytes - megatron_moe_bytes``. ``probs_in_experts`` (the card's
    ``parallel.moe_probs_in_experts``): the combine keeps no expert output. gpt-oss: Megatron-Core's block
    (``memory.arch_activations.megatron_gpt_oss_moe_bytes``). What Megatron-Core's module recomputes free beyond
    this: ``megatron_recompute_freed``. 0 for a dense model and for the other families with their own layer model
    (``arch_activations``)."""
    shards = layout.tp if layout.sp else 1
    if ss.moe is not None and ss.family == "gpt_oss":
        from trainfit.memory.arch_activations import gpt_oss_moe_block_bytes, megatron_gpt_oss_moe_bytes

        return float(gpt_oss_moe_block_bytes(ss, tokens=tokens, compute_dtype_bytes=dtype_bytes)
                     - megatron_gpt_oss_moe_bytes(ss, tokens=tokens, sequence_shards=shards,
                                                  expert_tensor_parallel=layout.etp, compute_dtype_bytes=dtype_bytes,
                                                  probs_in_experts=probs_in_experts))
    if ss.moe is not None and ss.family in DEEPSEEK_MOE_BLOCK:  # GLM-4.5 too: DeepSeek-V3's block
        from trainfit.memory.arch_activations import deepseek_moe_block_bytes, megatron_deepseek_moe_bytes

        return float(deepseek_moe_block_bytes(ss, tokens=tokens, compute_dtype_bytes=dtype_bytes)
                     - megatron_deepseek_moe_bytes(ss, tokens=tokens, sequence_shards=layout.tp if layout.sp else 1,
                                                   expert_tensor_parallel=layout.etp, compute_dtype_bytes=dtype_bytes,
                                                   probs_in_experts=probs_in_experts))
    if ss.moe is None or ss.family in ARCH_FAMILIES:
        return 0.0
    per_op = moe_block_bytes(ss, tokens=tokens, compute_dtype_bytes=dtype_bytes, linear_input_bytes=linear_input_bytes)
    meg = megatron_moe_bytes(ss, tokens=tokens, sequence_shards=layout.tp if layout.sp else 1,
                             expert_tensor_parallel=layout.etp, compute_dtype_bytes=dtype_bytes,
                             linear_input_bytes=linear_input_bytes, probs_in_experts=probs_in_experts)
    return float(per_op - meg)


MEGATRON_RECOMPUTE_SOURCES = (
    "NVIDIA/Megatron-LM @92c8482e6dcd11c3666c61bb8d1f7e8d0730ed13: megatron/core/transformer/transformer_config.py"
    " l.374-389 and l.1109-1127 (recompute_modules: core_attn, moe_act, layernorm, mla_up_proj, mlp, moe,"
    " shared_experts for any GPT model; default [core_attn]), l.1129-1132 (moe_act needs moe_grouped_gemm),"
    " l.1156-1163 (moe_act / layernorm refused with fp8 delayed scaling); transformer_layer.py l.378-414 ('layernorm':"
    " input_layernorm and pre_mlp_layernorm where they are not IdentityOp; 'mlp': dense layers only), l.616-621 and"
    " l.680-684 (the pre-MLP norm under CheckpointWithoutOutput, its output discarded after the MLP), l.521-550 (the"
    " input norm likewise after the attention), l.648-663 (tensor_parallel.checkpoint(self.mlp, False,"
    " pre_mlp_layernorm_output)); models/gpt/gpt_layer_specs.py l.250-261, l.344, l.368, l.446-475 (Transformer"
    " Engine fuses the input norm into linear_qkv and a dense MLP's pre-MLP norm into linear_fc1, so both are"
    " IdentityOp; multi-latent attention's input norm and a MoE layer's pre-MLP norm stay separate modules);"
    " moe/moe_layer.py l.120-126, l.224-236 (shared_experts: tensor_parallel.checkpoint(self.shared_experts, False,"
    " hidden_states)), l.286-323 (moe: router, dispatch, experts and combine under one tensor_parallel.checkpoint);"
    " moe/experts.py TEGroupedMLP l.802-805, l.958-970 (moe_act: CheckpointWithoutOutput around the activation);"
    " tensor_parallel/random.py l.407-437 (CheckpointFunction: the forward under no_grad, save_for_backward(*args):"
    " the module keeps only its input), l.483-504 and l.612-624 (CheckpointWithoutOutput: its input saved, its"
    " output's storage resized to 0 once the consumer's forward is done)")
"""Where ``megatron_recompute_freed`` and ``megatron_recompute_refusal`` read Megatron-Core's module recompute."""


def megatron_recompute_applies(spec: ModelSpec) -> frozenset[RecomputeModule]:
    """The ``recompute_modules`` that recompute something of ``spec`` under Megatron-Core and that trainfit's layer
    model holds (``MEGATRON_RECOMPUTE_SOURCES``): core_attn and layernorm always (layernorm re-runs the norms
    Transformer Engine does not fuse into a linear: multi-latent attention's input norm and a MoE layer's pre-MLP
    norm; none in a dense non-MLA layer); mlp with a dense layer; moe and moe_act with MoE layers; shared_experts
    with DeepSeek-V3's shared experts (the other MoE layouts' layer model does not hold shared experts);
    mla_up_proj with multi-latent attention. Only core_attn for the families whose Megatron figure is not modelled
    (GPT-2, GPT-NeoX, MPT, OPT)."""
    M = RecomputeModule
    if spec.family in ("gpt2", "gpt_neox", "mpt", "opt"):
        return frozenset({M.CORE_ATTN})
    out = {M.CORE_ATTN, M.LAYERNORM}
    moe = spec.moe
    if moe is None or any(not moe.is_moe_layer(i) for i in range(spec.num_layers)):
        out.add(M.MLP)
    if moe is not None:
        out |= {M.MOE, M.MOE_ACT}
        if moe.shared_expert_intermediate_size and spec.family in DEEPSEEK_MOE_BLOCK:
            out.add(M.SHARED_EXPERTS)
    if spec.mla is not None and spec.family in DEEPSEEK_FAMILIES:
        out.add(M.MLA_UP_PROJ)
    return frozenset(out)


def megatron_recompute_refusal(card: RunCard, spec: ModelSpec) -> str | None:
    """One line refusing the card's Megatron-Core module recompute (``ParallelSection.megatron_recompute_modules``)
    where it cannot run or is not modelled, else None: any module but core_attn needs tensor_parallel_impl megatron,
    full-parameter training (its figures are full-training ones; mla_up_proj as before), a model it applies to
    (``megatron_recompute_applies``), moe_act grouped experts and no fp8 delayed scaling (Megatron-Core's own refusals,
    ``MEGATRON_RECOMPUTE_SOURCES``); mla_up_proj tensor, pipeline or expert parallel."""
    par = card.parallel
    M = RecomputeModule
    mods = par.megatron_recompute_modules
    if not mods - {M.CORE_ATTN}:
        return None
    if par.selective_checkpointing is SelectiveCheckpointing.MODULES:
        key, given = "parallel.recompute_modules", "[" + ", ".join(m.value for m in par.recompute_modules or ()) + "]"
    else:
        key, given = "parallel.selective_checkpointing", par.selective_checkpointing.value
    order = [m for m in M]
    if par.tensor_parallel_impl is not TensorParallelImpl.MEGATRON:
        return (f"{key}: {given} is Megatron-Core's --recompute-modules, planned with tensor_parallel_impl megatron;"
                " allowed otherwise: selective_checkpointing none, op, core_attention")
    applies = megatron_recompute_applies(spec)
    bad = [m.value for m in order if m in mods and m not in applies]
    if bad:
        return (f"{key}: {', '.join(bad)} recomputes nothing trainfit models in {spec.name}; allowed for this model:"
                f" {', '.join(m.value for m in order if m in applies)}")
    full = card.scope.value == "full" and trainable_spec(card).lora is None
    if not full and mods - {M.CORE_ATTN, M.MLA_UP_PROJ}:
        return (f"{key}: {given} is modelled for full-parameter training (its freed bytes are full-training ones);"
                f" allowed with scope {card.scope.value}: core_attn, mla_up_proj")
    if M.MLA_UP_PROJ in mods and par.model_parallel * par.expert_parallel == 1:
        return (f"{key}: mla_up_proj is Megatron-Core's recompute of multi-latent attention, planned with tensor,"
                " pipeline or expert parallel; allowed otherwise: none, op, core_attention")
    if M.MOE_ACT in mods and par.moe_experts is not MoeExperts.GROUPED:
        return (f"{key}: moe_act needs Megatron-Core's grouped experts (--moe-grouped-gemm); allowed:"
                " parallel.moe_experts grouped")
    prec = card.precision
    if prec.compute is ComputeDtype.FP8 and prec.fp8_recipe is Fp8Recipe.DELAYED and mods & {M.MOE_ACT, M.LAYERNORM}:
        return (f"{key}: moe_act and layernorm recompute are refused by Megatron-Core under fp8 delayed scaling;"
                " allowed: precision.fp8_recipe current or blockwise")
    return None


def megatron_recompute_freed(ss: ModelSpec, layout: ParallelLayout, modules: frozenset[RecomputeModule], *,
                             tokens: int, dtype_bytes: int, linear_input_bytes: float = 0.0,
                             probs_in_experts: bool = True, te_norms: bool = False) -> dict[int, float]:
    """Bytes per decoder layer that Megatron-Core's module recomputes (``modules``, core_attn aside: that one is the
    checkpointed layer's selective figure) free on this rank beyond the Megatron figure (``per-op -
    megatron_activation_savings``), ``tokens`` = b·s, ``t = tokens / sequence shards``
    (``MEGATRON_RECOMPUTE_SOURCES``):

    * ``layernorm``: a norm under ``CheckpointWithoutOutput`` saves nothing itself and keeps its input (``t·a·h``, the
      residual stream) while its output's storage is freed wherever it was saved: multi-latent attention's input norm
      (its output is the down projections' saved input) and a MoE layer's pre-MLP norm (the router's saved input;
      DeepSeek-V3's shared experts' fc1 input; the ``moe`` / ``shared_experts`` checkpoint's input) each free their
      per-op figure (``memory.activations.residual_norm_bytes`` on ``t`` tokens) plus that output less the input.
      Transformer Engine fuses the other norms into a linear: nothing to recompute.
    * ``moe_act``: the experts' fc2 input (``megatron_moe_bytes(recompute_moe_act=True)`` and its DeepSeek-V3 and
      gpt-oss forms).
    * ``moe``: the MoE layer under ``tensor_parallel.checkpoint`` keeps only its input (the norm output, ``t·a·h``):
      the whole Megatron block figure (shared experts included) less that.
    * ``shared_experts`` (without ``moe``): DeepSeek-V3's shared experts keep only their input, already counted as
      their fc1's saved input: their figure less ``t·a·h``.
    * ``mlp``: a dense layer's MLP (its fused pre-MLP norm inside) keeps only its input, the residual stream: the
      norm's per-op figure plus the Megatron dense MLP figure (fc1 saving the ``t``-token shard under sequence
      parallel) less ``t·a·h``.
    * ``mla_up_proj``: ``megatron_mla_up_proj_freed``."""
    from trainfit.memory.activations import residual_norm_bytes

    M = RecomputeModule
    a, h = dtype_bytes, ss.hidden_size
    shards = layout.tp if layout.sp else 1
    t = tokens // shards
    moe = ss.moe
    mla = ss.family in DEEPSEEK_FAMILIES and ss.mla is not None
    norm = residual_norm_bytes(ss, tokens=t, compute_dtype_bytes=a) if M.LAYERNORM in modules or M.MLP in modules else 0
    if norm and te_norms:  # the figure the layer already holds: Transformer Engine's norm (megatron_te_norm_savings)
        norm -= 4 * t * h
    up_proj = megatron_mla_up_proj_freed(ss, layout, tokens=tokens, dtype_bytes=a) if M.MLA_UP_PROJ in modules else 0
    block = act_less = shared_less = 0
    norm_out_saved = False  # something in the Megatron block saves the pre-MLP norm's output
    if moe is not None:
        kw = dict(tokens=tokens, sequence_shards=shards, expert_tensor_parallel=layout.etp, compute_dtype_bytes=a,
                  probs_in_experts=probs_in_experts)
        if ss.family == "gpt_oss":
            from trainfit.memory.arch_activations import megatron_gpt_oss_moe_bytes as fig
            norm_out_saved = True  # the router's F.linear input
        elif ss.family in DEEPSEEK_MOE_BLOCK:
            from trainfit.memory.arch_activations import megatron_deepseek_moe_bytes as fig
            norm_out_saved = bool(moe.shared_expert_intermediate_size)  # the shared experts' fc1 input
            if M.SHARED_EXPERTS in modules:
                shared_less = fig(ss, **kw) - fig(ss, shared=False, **kw) - t * a * h
        else:
            fig = megatron_moe_bytes
            kw["linear_input_bytes"] = linear_input_bytes
            norm_out_saved = True  # the router's F.linear input
        block = fig(ss, **kw)
        if M.MOE_ACT in modules:
            act_less = block - fig(ss, recompute_moe_act=True, **kw)
    dense_mlp = 0
    if M.MLP in modules:
        unit = 0
        if layout.sp and layout.tp > 1:
            unit = (ceil(linear_input_bytes * tokens * h) - ceil(linear_input_bytes * t * h) if linear_input_bytes
                    else a * (tokens - t) * h)
        dense_mlp = norm + megatron_dense_mlp_bytes(ss, tokens=tokens, compute_dtype_bytes=a,
                                                    linear_input_bytes=linear_input_bytes) - unit - t * a * h
    out: dict[int, float] = {}
    for i in range(ss.num_layers):
        moe_i = moe is not None and moe.is_moe_layer(i)
        less = up_proj
        if M.LAYERNORM in modules and mla:
            less += norm  # the input norm: its output (the down projections' input) freed, its input kept
        if moe_i:
            if M.LAYERNORM in modules:
                held = norm_out_saved or M.MOE in modules or M.SHARED_EXPERTS in modules
                less += norm + (t * a * h if held else 0) - t * a * h
            if M.MOE in modules:
                less += block - t * a * h
            else:
                less += act_less + shared_less
        elif M.MLP in modules:
            less += dense_mlp
        if less:
            out[i] = float(less)
    return out


def megatron_dense_mlp_savings(ss: ModelSpec, *, tokens: int, dtype_bytes: int, linear_input_bytes: float = 0.0,
                               compiled: bool = False) -> float:
    """Bytes a Megatron-Core rank saves less per dense MLP than the per-op figure: ``act(gate)`` over ``tokens`` x the
    shard's intermediate width for a SiLU-gated MLP (``dense_mlp_bytes - megatron_dense_mlp_bytes``). 0 where the
    compiled rules (``compiled``) already recompute it, for other activations and for the families with their own
    layer model (``arch_activations``)."""
    if ss.family in ARCH_FAMILIES and ss.family not in DEEPSEEK_FAMILIES:  # DeepSeek-V3's dense MLP is the Llama one
        return 0.0
    kw = {"tokens": tokens, "compute_dtype_bytes": dtype_bytes, "linear_input_bytes": linear_input_bytes,
          "compiled": compiled}
    return float(dense_mlp_bytes(ss, **kw) - megatron_dense_mlp_bytes(ss, **kw))
