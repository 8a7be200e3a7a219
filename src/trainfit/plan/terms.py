"""Memory assembly: the per-GPU byte terms of one training step (weights, gradients, optimizer
states, activations, logits, FSDP buffers, ...), the host-RAM terms per node, and the notes they imply.

Pure: no torch, no I/O beyond reading catalog data files.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from trainfit.memory import attention as attn
from trainfit.memory.activations import ActivationBytes, activation_bytes
from trainfit.memory.logits import SOFTCAP_FAMILIES, logits_bytes
from trainfit.memory.lora import lora_largest_tensor_params, lora_trainable_params, targeted_groups
from trainfit.memory.optimizer import PAGED, master_weight_bytes, optimizer_state_bytes, step_temporary_bytes
from trainfit.memory.params import ParamBreakdown, TensorGroup, param_breakdown, param_tensors
from trainfit.memory.phases import StepTerms
from trainfit.memory.sharding import Sharding
from trainfit.memory.weights import WeightBytes, count_scale, total_params, weight_bytes
from trainfit.plan.resolve import trainable_spec
from trainfit.spec.card import RunCard
from trainfit.spec.enums import ComputeDtype, Dtype, LayerKind, MasterWeights, Offload, StatesDtype, Strategy
from trainfit.spec.model import ModelSpec
from trainfit.spec.training import LoraSpec, TrainableSpec
from trainfit.units import BYTES_PER_DTYPE, GIB

HOST_BYTES_PER_PROCESS = 3 * GIB
"""Assumed host RSS of one training process (Python, torch + CUDA libraries, data loader)."""


@lru_cache(maxsize=4096)
def lora_tensors(spec: ModelSpec, lora: LoraSpec) -> list[TensorGroup]:
    """The adapter's tensors: an A (rank x in) and a B (out x rank) per targeted weight and expert."""
    out: list[TensorGroup] = []
    for g in targeted_groups(spec, lora):
        r = lora.rank * g.lora_rank_multiplier
        out += [TensorGroup((r, g.in_features), g.count * g.experts), TensorGroup((g.out_features, r), g.count * g.experts)]
    return out


def _autocast_copies(act: ActivationBytes, spec: ModelSpec, *, enabled: bool, scale: float) -> ActivationBytes:
    """Autocast caches a bf16 copy of each fp32 weight it casts; matmuls save it for backward."""
    if not enabled:
        return act
    pb = param_breakdown(spec)
    per_layer = tuple(a + 2 * p * scale for a, p in zip(act.per_layer, pb.per_layer))
    return replace(act, per_layer=per_layer, head=act.head + 2 * (pb.lm_head or pb.embedding) * scale)


def trained_dtype_bytes(card: RunCard) -> tuple[float, float, bool, float]:
    """Bytes of one trained weight, of its gradient, whether an fp32 master copy is kept, and bytes of one
    optimizer-state element, as the card's precision section and scope set them."""
    prec = card.precision
    trainable = trainable_spec(card)
    if trainable.lora is not None:
        train_bytes = float(trainable.lora.adapter_dtype_bytes)
    else:
        train_bytes = BYTES_PER_DTYPE[card.weights_dtype.value]
    grad_bytes = BYTES_PER_DTYPE[prec.grads.value] if prec.grads is not None else train_bytes
    use_master = prec.master_weights is MasterWeights.FP32 and train_bytes < 4
    state_bytes = {StatesDtype.FP32: 4.0, StatesDtype.BF16: 2.0}.get(prec.optimizer_states, 4.0 if use_master else train_bytes)
    return train_bytes, grad_bytes, use_master, state_bytes


def step_terms(card: RunCard, spec: ModelSpec, sharding: Sharding) -> tuple[StepTerms, dict[str, float], list[str]]:
    """Per-GPU byte terms, the host-RAM terms per node, and the assumptions made."""
    notes: list[str] = []
    prec = card.precision
    trainable = trainable_spec(card)
    scale = count_scale(spec)
    pb = param_breakdown(spec)
    wdtype = card.weights_dtype
    compute = prec.compute
    w = weight_bytes(spec, weights=wdtype, compute=compute, trainable=trainable)

    if trainable.lora is not None:
        n_train = lora_trainable_params(spec, trainable.lora) * scale
        tensors = lora_tensors(spec, trainable.lora)
        largest = float(lora_largest_tensor_params(spec, trainable.lora))
    else:
        n_train = float(total_params(spec))
        tensors = param_tensors(spec)
        largest = float(max(t.numel for t in tensors)) * scale
    train_bytes, grad_bytes, use_master, state_bytes = trained_dtype_bytes(card)
    opt = optimizer_state_bytes(optimizer=prec.optimizer, params=n_train, tensors=tensors, state_bytes=state_bytes)
    if trainable.lora is None:
        opt = opt if prec.optimizer.value in ("adamw", "paged_adamw") else opt * scale
    master = master_weight_bytes(params=n_train) if use_master else 0.0
    temps = step_temporary_bytes(
        optimizer=prec.optimizer, impl=prec.optimizer_impl, params=n_train, largest_tensor=largest, state_bytes=state_bytes
    )

    wd, gd, od = sharding.weights_divisor, sharding.grads_divisor, sharding.optimizer_divisor
    offload = card.parallel.offload
    host: dict[str, float] = {}
    ranks_per_node = min(card.hardware.gpus_per_node, sharding.world_size)
    weights_gpu, adapter_gpu = w.base / wd, w.adapter / wd
    opt_gpu, master_gpu, temps_gpu = opt / od, master / od, temps / od
    paged = prec.optimizer in PAGED and offload is Offload.NONE
    if paged:
        notes.append(
            "paged optimizer: bitsandbytes keeps the states in CUDA managed memory, outside torch's allocator;"
            " they count toward nvidia-smi (device) while resident and page to host RAM under pressure"
        )
    grads_scale = 1.0 / gd
    if offload is not Offload.NONE:
        host["optimizer_states"] = (opt + master) / od * ranks_per_node
        if sharding.strategy in (Strategy.ZERO1, Strategy.ZERO2, Strategy.ZERO3):
            host["fp32_gradients"] = 4.0 * n_train / od * ranks_per_node
            notes.append("optimizer offload (DeepSpeed ZeRO-Offload): fp32 gradient partitions live in host RAM")
        opt_gpu = master_gpu = temps_gpu = 0.0
        notes.append("optimizer step runs on the CPU (offloaded states); its temporaries are not on the GPU")
    if offload is Offload.PARAMS_AND_OPTIMIZER:
        host["weights"] = (w.base + w.adapter) / wd * ranks_per_node
        host["gradients"] = n_train * grad_bytes / gd * ranks_per_node
        weights_gpu = adapter_gpu = 0.0
        grads_scale = 0.0
        notes.append("parameter offload: weights and gradients live in host RAM; the GPU holds gathered units only")
    host["processes"] = HOST_BYTES_PER_PROCESS * ranks_per_node
    host["model_load"] = w.base  # rank 0 materialises the checkpoint (FSDP cpu_ram_efficient_loading)

    # gradients per layer, in backward order
    layers = spec.num_layers
    if trainable.lora is None:
        per_layer_grads = _scaled(pb.per_layer, scale * grad_bytes * grads_scale)
        head_params = (pb.lm_head or pb.embedding) + spec.hidden_size
        grads_head = head_params * scale * grad_bytes * grads_scale
        grads_embed = (pb.embedding if pb.lm_head else 0) * scale * grad_bytes * grads_scale
        # tied embeddings: the embedding's backward writes a second vocab x hidden gradient while
        # lm_head's is in .grad, and accumulating them makes a third (measured on the trace:
        # +2 x vocab x hidden x grad bytes at the end of backward, unsharded runs)
        tied_grad = 2 * pb.embedding * scale * grad_bytes if (not pb.lm_head and gd == 1
                                                              and not prec.optimizer_in_backward) else 0.0
    else:
        per = n_train * grad_bytes * grads_scale / layers
        per_layer_grads = tuple(per for _ in range(layers))
        grads_head = grads_embed = 0.0
        tied_grad = 0.0

    act_dtype = 4 if compute is ComputeDtype.FP32 else 2
    act = activation_bytes(
        spec,
        micro_batch_size=card.batch.micro_batch_size,
        seq_len=card.batch.seq_len,
        attention=card.attention,
        trainable=trainable,
        compute_dtype_bytes=act_dtype,
    )
    autocast = wdtype is Dtype.FP32 and compute is not ComputeDtype.FP32
    act = _autocast_copies(act, spec, enabled=autocast and trainable.lora is None, scale=scale)
    lg = logits_bytes(
        micro_batch_size=card.batch.micro_batch_size,
        seq_len=card.batch.seq_len,
        vocab_size=spec.vocab_size,
        hidden_size=spec.hidden_size,
        chunked=card.loss.chunked,
        head_outputs=spec.head_outputs,
        softcap_bytes_per_logit=act_dtype if spec.family in SOFTCAP_FAMILIES else 0,
    )
    tokens = card.batch.micro_batch_size * card.batch.seq_len
    eager = attn.runs_eager(spec.family, card.attention) and spec.num_full_attention_layers > 0
    scores = attn.score_elements(micro_batch_size=card.batch.micro_batch_size, seq_len=card.batch.seq_len,
                                 heads=spec.num_attention_heads, eager=eager)
    transient = _layer_transients(spec, tokens=tokens, dtype_bytes=act_dtype,
                                  attention_bytes=attn.backward_transient_bytes(scores=scores, dtype_bytes=act_dtype))
    attention_forward = attn.forward_transient_bytes(
        scores=scores, gradient_checkpointing=card.parallel.gradient_checkpointing, dtype_bytes=act_dtype)

    in_bwd = 0.0
    if prec.optimizer_in_backward:
        # each gradient is consumed by its parameter's step inside backward and freed at once
        in_bwd = largest * grad_bytes * grads_scale + step_temporary_bytes(
            optimizer=prec.optimizer, impl=prec.optimizer_impl, params=largest, largest_tensor=largest, state_bytes=state_bytes
        ) / od
        per_layer_grads = tuple(0.0 for _ in per_layer_grads)
        grads_head = grads_embed = 0.0
        temps_gpu = 0.0
        notes.append("optimizer in backward: gradients are freed as each parameter steps; no full gradient set exists")
    if card.parallel.activation_offload:
        host["activations"] = act.total(gradient_checkpointing=card.parallel.gradient_checkpointing) * ranks_per_node
        notes.append("activation offloading: saved tensors stream to host RAM; the GPU keeps the layer in flight")

    fsdp: dict[str, float] = {}
    if sharding.gathers_params:
        fsdp, note = _fsdp_terms(spec, sharding, trainable, w, pb=pb, scale=scale, n_train=n_train,
                                 grad_bytes=grad_bytes)
        notes.append(note)

    terms = StepTerms(
        weights=weights_gpu,
        adapter_weights=adapter_gpu,
        master_weights=master_gpu,
        optimizer_states=0.0 if paged else opt_gpu,
        paged_optimizer_states=opt_gpu if paged else 0.0,
        grads_per_layer=per_layer_grads,
        grads_head=grads_head,
        grads_embedding=grads_embed,
        activations=act,
        gradient_checkpointing=card.parallel.gradient_checkpointing,
        logits=lg,
        logits_grad_bf16=0.0 if card.loss.chunked else 2.0 * tokens * (spec.head_outputs or spec.vocab_size),
        layer_backward_transient=transient,
        attention_forward_transient=attention_forward,
        tied_embedding_grad_transient=tied_grad,
        optimizer_temporaries=temps_gpu,
        grad_accumulation=card.batch.grad_accum > 1,
        ddp_buckets=n_train * grad_bytes if sharding.ddp_bucket_copy else 0.0,
        zero2_bucket=spec.hidden_size**2 * grad_bytes if sharding.zero2_bucket else 0.0,
        activation_offload=card.parallel.activation_offload,
        autocast_weight_cache=(
            2.0 * (pb.linear_weights + (pb.lm_head or pb.embedding)) * scale / wd
            if autocast and trainable.lora is None
            else 0.0
        ),
        in_backward_step=in_bwd,
        **fsdp,
    )
    return terms, host, notes


def _fsdp_terms(
    spec: ModelSpec, sharding: Sharding, trainable: TrainableSpec, w: WeightBytes, *, pb: ParamBreakdown,
    scale: float, n_train: float, grad_bytes: float,
) -> tuple[dict[str, float], str]:
    """FSDP/ZeRO-3 buffers (bytes per GPU) of a strategy that gathers parameters, and the note that
    describes them: the gathered layer units (current + one prefetched), or the whole gathered model
    when it is not resharded after forward; one layer's unsharded gradients; the root unit."""
    wd, layers = sharding.weights_divisor, spec.num_layers
    fsdp: dict[str, float] = {}
    bpp = (w.base + w.adapter) / (pb.total * scale + (n_train if trainable.lora else 0))
    unit = pb.largest_layer * scale * bpp
    head_unit = (pb.embedding + pb.lm_head + spec.hidden_size) * scale * bpp
    layer_grad_unit = (pb.largest_layer * scale if trainable.lora is None else n_train / layers) * grad_bytes
    if sharding.reshards_after_forward:
        fsdp["fsdp_layer_units"] = 2 * unit
    else:
        fsdp["fsdp_all_gathered"] = (w.base + w.adapter) * (1 - 1 / wd) - head_unit
        fsdp["fsdp_layer_units"] = 0.0
    fsdp["fsdp_unsharded_grads"] = layer_grad_unit
    if sharding.has_root_unit:
        fsdp["fsdp_root_unit"] = head_unit
        if trainable.lora is None:
            # lm_head's (or the tied matrix's) gradient appears first; an untied embedding's last
            fsdp["fsdp_root_grads"] = (pb.lm_head or pb.embedding) * scale * grad_bytes
            fsdp["fsdp_root_embedding_grads"] = (pb.embedding if pb.lm_head else 0) * scale * grad_bytes
    else:
        fsdp["fsdp_layer_units"] = 2 * max(unit, (pb.lm_head or pb.embedding) * scale * bpp)
    note = (
        f"FSDP/ZeRO-3 units: one per decoder layer ({unit / GIB:.2f} GiB gathered), current + one prefetched;"
        + (" root unit (embedding, norm, lm_head) stays gathered from forward to the end of backward" if sharding.has_root_unit else "")
    )
    return fsdp, note


@lru_cache(maxsize=4096)
def _scaled(values: tuple[int, ...], factor: float) -> tuple[float, ...]:
    return tuple(v * factor for v in values)


@lru_cache(maxsize=4096)
def _layer_transients(spec: ModelSpec, *, tokens: int, dtype_bytes: int, attention_bytes: float = 0.0) -> tuple[float, ...]:
    """Per layer: the larger of the MLP's activation gradients and (full-attention layers with eager
    attention) the attention backward's score-sized buffers; they do not overlap in time."""
    return tuple(
        max(_layer_backward_transient(spec, i, tokens=tokens, dtype_bytes=dtype_bytes),
            attention_bytes if spec.layer_kind(i) is LayerKind.FULL_ATTENTION else 0.0)
        for i in range(spec.num_layers))


def _layer_backward_transient(spec: ModelSpec, layer: int, *, tokens: int, dtype_bytes: int) -> float:
    """Activation-gradient buffers inside one layer's backward: the MLP's, the widest.

    down_proj's input gradient and the gate/up output gradients (three tokens × width tensors)
    are live together while SwiGLU's backward runs.
    """
    if spec.moe is not None and spec.moe.is_moe_layer(layer):
        width_tokens = tokens * spec.moe.experts_per_token * spec.moe.expert_intermediate_size
    else:
        width_tokens = tokens * spec.intermediate_size
    return 3 * width_tokens * dtype_bytes
