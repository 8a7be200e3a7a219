"""Assemble a plan from a run card: resolve the model and GPU, compute every term, walk the phases.

Pure: no torch, no I/O beyond reading catalog data files.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache

from trainfit.catalog.gpus import GpuSpec, custom_gpu, resolve_gpu
from trainfit.catalog.models import resolve_model
from trainfit.memory.activations import ActivationBytes, activation_bytes
from trainfit.memory.logits import logits_bytes
from trainfit.memory.lora import lora_largest_tensor_params, lora_trainable_params, targeted_groups
from trainfit.memory.optimizer import PAGED, master_weight_bytes, optimizer_state_bytes, step_temporary_bytes
from trainfit.memory.overhead import OverheadBytes, overhead_bytes
from trainfit.memory.params import TensorGroup, param_breakdown, param_tensors
from trainfit.memory import attention as attn
from trainfit.memory.logits import SOFTCAP_FAMILIES
from trainfit.memory.phases import PhasePeak, StepTerms, step_max_transient, step_peaks
from trainfit.memory.sharding import Sharding, make_sharding
from trainfit.memory.weights import count_scale, total_params, weight_bytes
from trainfit.spec.card import RunCard
from trainfit.errors import CardError
from trainfit.spec.enums import (ComputeDtype, Dtype, LayerKind, MasterWeights, Method, Offload, Phase,
                                  RefPlacement, StatesDtype, Strategy)
from trainfit.spec.model import ModelSpec
from trainfit.spec.training import LoraSpec, TrainableSpec
from trainfit.units import BYTES_PER_DTYPE, GIB, MIB

HOST_BYTES_PER_PROCESS = 3 * GIB
"""Assumed host RSS of one training process (Python, torch + CUDA libraries, data loader)."""
_PERSISTENT = frozenset({"weights", "adapter_weights", "master_weights", "optimizer_states", "ddp_buckets", "gradients"})
_NOT_TRANSIENT = _PERSISTENT | {"activations"}
"""Components whose blocks are reused step after step (not fragmentation sources)."""
OUTSIDE_ALLOCATOR = ("paged_optimizer_states", "rollout_engine")
PAGEABLE = ("paged_optimizer_states",)
"""Components that nvidia-smi sees but torch's caching allocator does not (CUDA managed memory)."""


@dataclass(frozen=True, slots=True)
class PhaseResult:
    phase: Phase
    at: str
    components: dict[str, float]
    allocated: float
    reserved: float
    device: float
    overhead: OverheadBytes
    paged_resident: float = 0.0
    """Paged optimizer bytes resident on the card (included in ``device``)."""

    @property
    def tensor_bytes(self) -> float:
        """``allocated`` without the cuBLAS workspaces: the live tensors a fake-tensor trace measures."""
        return self.allocated - self.overhead.cublas_workspace


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """One group of identical GPUs (colocated RL and SFT: 'all'; split RL: 'train' and 'rollout')."""

    name: str
    gpus: int
    phases: tuple[PhaseResult, ...]


@dataclass(frozen=True, slots=True)
class Plan:
    card: RunCard
    spec: ModelSpec
    gpu: GpuSpec
    sharding: Sharding
    params_total: int
    params_trainable: int
    params_without_embedding: int
    phases: tuple[PhaseResult, ...]
    host_ram: dict[str, float]
    assumptions: tuple[str, ...]
    warnings: tuple[str, ...]
    groups: tuple[GroupPlan, ...] = ()
    worst_group: str = "all"
    roles: tuple = ()
    rollout: object | None = None
    """``trainfit.methods.rl.RolloutSummary`` for PPO/GRPO."""
    step_seconds: float | None = None
    tokens_per_step: float | None = None
    """Tokens trained per optimizer step over all GPUs (RL: prompts x generations x length)."""
    time_parts: dict = field(default_factory=dict)
    """Seconds by part of the step (compute, communication, generation, ...)."""
    price: object | None = None
    """``trainfit.compute.cost.Price`` when the card names one."""

    @property
    def tokens_per_s(self) -> float | None:
        if not self.step_seconds or not self.tokens_per_step:
            return None
        return self.tokens_per_step / self.step_seconds

    @property
    def cost_per_hour(self) -> float | None:
        """Every GPU of the run is rented, also those of a split rollout group."""
        return None if self.price is None else self.price.per_gpu_hour * self.card.world_size

    @property
    def peak(self) -> PhaseResult:
        """The phase with the largest device figure; among ties (within 1 KiB: the phases of a step
        share the reserved high-water mark, or paged memory fills the card) the largest allocated."""
        top = max(p.device for p in self.phases) - 1024
        best = None
        for p in self.phases:
            if p.device >= top and (best is None or p.allocated > best.allocated):
                best = p
        return best

    @property
    def capacity_bytes(self) -> int:
        return self.gpu.memory_bytes

    @property
    def fits(self) -> bool:
        """The worst GPU's device peak fits its card, the rollout engine (if any) can start, and the
        node's stated host RAM holds what offload, sleep mode and loading need."""
        engine_ok = self.rollout is None or self.rollout.engine_fits
        return self.peak.device <= self.capacity_bytes and engine_ok and self.host_ram_fits

    @property
    def host_ram_fits(self) -> bool:
        """True unless the card states its host RAM per node and the plan needs more."""
        have = self.card.hardware.host_ram_gib
        return have is None or self.host_ram_bytes <= have * GIB

    @property
    def headroom_bytes(self) -> float:
        return self.capacity_bytes - self.peak.device

    @property
    def host_ram_bytes(self) -> float:
        return sum(self.host_ram.values())


def trainable_spec(card: RunCard) -> TrainableSpec:
    lo = card.lora
    return _trainable(card.scope, lo.rank, lo.alpha, card.lora_targets, lo.dropout, lo.double_quant,
                      4 if lo.adapter_dtype.value == "fp32" else 2)


@lru_cache(maxsize=1024)
def _trainable(scope, rank, alpha, targets, dropout, double_quant, adapter_bytes) -> TrainableSpec:  # noqa: ANN001
    if scope.value == "full":
        return TrainableSpec(scope=scope)
    lora = LoraSpec(rank=rank, alpha=alpha, targets=targets, dropout=dropout, double_quant=double_quant,
                    adapter_dtype_bytes=adapter_bytes)
    return TrainableSpec(scope=scope, lora=lora)


def gpu_of(card: RunCard) -> GpuSpec:
    hw = card.hardware
    if hw.gpu in ("", "custom"):
        if hw.gpu_memory_gib is None:
            raise CardError("hardware.gpu_memory_gib: required when hardware.gpu is 'custom'")
        return custom_gpu(hw.gpu_memory_gib)
    return resolve_gpu(hw.gpu)


@lru_cache(maxsize=4096)
def _lora_tensors(spec: ModelSpec, lora: LoraSpec) -> list[TensorGroup]:
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
        train_bytes = float(trainable.lora.adapter_dtype_bytes)
        tensors = _lora_tensors(spec, trainable.lora)
        largest = float(lora_largest_tensor_params(spec, trainable.lora))
    else:
        n_train = float(total_params(spec))
        train_bytes = BYTES_PER_DTYPE[wdtype.value]
        tensors = param_tensors(spec)
        largest = float(max(t.numel for t in tensors)) * scale
    grad_bytes = BYTES_PER_DTYPE[prec.grads.value] if prec.grads is not None else train_bytes
    use_master = prec.master_weights is MasterWeights.FP32 and train_bytes < 4
    state_bytes = {StatesDtype.FP32: 4.0, StatesDtype.BF16: 2.0}.get(prec.optimizer_states, 4.0 if use_master else train_bytes)
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
        notes.append(
            f"FSDP/ZeRO-3 units: one per decoder layer ({unit / GIB:.2f} GiB gathered), current + one prefetched;"
            + (" root unit (embedding, norm, lm_head) stays gathered from forward to the end of backward" if sharding.has_root_unit else "")
        )

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


def _large_tensor_count(spec: ModelSpec, sharding: Sharding, card: RunCard) -> int:
    return _large_tensors(spec, sharding.weights_divisor, card.scope.value == "full")


@lru_cache(maxsize=4096)
def _large_tensors(spec: ModelSpec, divisor: int, full: bool) -> int:
    """Live tensors over 1 MiB: parameter shards (with two states and a gradient when fully trained)
    plus about a dozen saved activations per layer."""
    big = sum(t.count for t in param_tensors(spec) if t.numel * 2 / divisor > MIB)
    states = 1 + (2 if full else 0) + 1  # weights, two states, gradient
    return big * states + 12 * spec.num_layers


def _assumptions(card: RunCard, spec: ModelSpec, sharding: Sharding) -> list[str]:
    from trainfit.memory import overhead as oh

    out = [
        "steady state after the first step: optimizer states exist; zero_grad(set_to_none=True) frees gradients",
        f"torch AdamW impl '{card.precision.optimizer_impl.value}'; states in "
        f"{card.precision.optimizer_states.value}",
        "the training loop keeps only the loss (transformers Trainer/TRL), so full bf16 logits are freed after forward",
        "allocated includes the cuBLAS + cuBLASLt workspaces (64 MiB on compute capability >= 9.0, 16 MiB before)",
        f"reserved = allocated + allocator rounding (half a {oh.LARGE_SEGMENT_BYTES // MIB} MiB granule per large tensor)"
        f" + {oh.FRAGMENTATION_OF_TRANSIENTS:.0%} of the step's largest transient (fragmentation, fitted on H200"
        " measurements); every phase of the repeated step shows the step's highest reserved",
        f"device = reserved + CUDA context {oh.CUDA_CONTEXT_BYTES // MIB} MiB (measured, H200)"
        + (f" + NCCL communicator {oh.NCCL_COMMUNICATOR_BYTES // MIB} MiB and buffers" if sharding.world_size > 1 else ""),
        f"host RAM: {HOST_BYTES_PER_PROCESS / GIB:.0f} GiB per training process + rank 0 loading the checkpoint",
        "GiB = 2^30 bytes, GB = 10^9 bytes",
    ]
    if card.preset:
        from trainfit.methods.presets import preset

        out.append(f"preset {card.preset}: {preset(card.preset).source}")
    if card.method in (Method.PPO, Method.GRPO):
        out.append(
            "RL losses use per-token log-probs (selective log-softmax); their logits are modelled with the"
            " cross-entropy mechanism of the SFT step (same order: 10-12 B per logit at the loss)"
        )
    if spec.assumed_shape:
        out.append(f"ASSUMED SHAPE: {spec.note}")
    if not spec.verified:
        out.append(f"UNVERIFIED MODEL CONFIG: {spec.name}: {spec.note}")
    return out


def model_spec_of(card: RunCard) -> ModelSpec:
    m = card.model
    if not isinstance(m, str) and m.config is not None:
        from trainfit.catalog.hf_config import spec_from_hf_config

        return spec_from_hf_config(m.config, name=m.id or "inline config", source="inline config in the run card")
    return resolve_model(_model_ref(card), revision=_revision(card))


def _card_with(card: RunCard, **paths: object) -> RunCard:
    """A copy of the card with fields replaced (``batch__seq_len`` sets ``batch.seq_len``), validated again."""
    from trainfit.spec.dotted import set_dotted

    data = card.model_dump(mode="json", exclude_unset=True)
    for key, value in paths.items():
        set_dotted(data, key.replace("__", "."), value)
    return RunCard.model_validate(data)


def _transient(peak: PhasePeak) -> float:
    return sum(v for k, v in peak.components.items() if k not in _NOT_TRANSIENT and k not in OUTSIDE_ALLOCATOR)


_STEP_PHASES = (
    frozenset({Phase.FORWARD, Phase.BACKWARD, Phase.OPTIMIZER_STEP}),
    frozenset({Phase.ACTOR_FORWARD, Phase.ACTOR_BACKWARD, Phase.ACTOR_OPTIMIZER_STEP}),
    frozenset({Phase.CRITIC_FORWARD, Phase.CRITIC_BACKWARD, Phase.CRITIC_OPTIMIZER_STEP}),
)
"""Phases of one model's repeated training step: the caching allocator keeps every block the step
ever reserved, so from the second step on each of them shows the step's highest reserved figure."""


def _phase_results(
    peaks, *, spec: ModelSpec, sharding: Sharding, card: RunCard, capacity: float, at_least: float = 0.0,
    compute_capability: str | None = None,
) -> list[PhaseResult]:
    """Overheads per phase. The caching allocator never returns blocks within a run, so the
    fragmentation a step leaves is carried by every training phase: it is taken from the largest
    transient of the whole step, not of each phase alone; and each phase of a repeated step reports
    the step's reserved high-water mark (measured: ``benchmarks/gpu_calibration.md``)."""
    large = _large_tensor_count(spec, sharding, card)
    step_transient = max([at_least] + [_transient(p) for p in peaks if p.phase is not Phase.LOAD])
    out = [
        _with_overhead(p, large_tensors=large, world_size=sharding.world_size, capacity=capacity,
                       transient=0.0 if p.phase is Phase.LOAD else step_transient,
                       compute_capability=compute_capability)
        for p in peaks
    ]
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


def dpo_logits(step_card: RunCard, spec: ModelSpec):
    """DPO's sequence log-probs (TRL's concatenated forward, selective log-softmax row by row on
    bf16 logits): E = (chosen+rejected) x s x V bf16 logits and E' = the same over s-1 positions,
    whose per-row log-softmax outputs are saved for backward. Measured against the fake-tensor
    trace (tests/trace/test_grid_rl.py): forward and backward peak at 2E + 2E' bytes."""
    from trainfit.memory.logits import LogitsBytes

    b, s, v = step_card.batch.micro_batch_size, step_card.batch.seq_len, spec.vocab_size
    e, e_shift = b * s * v, b * (s - 1) * v
    return LogitsBytes(forward_peak=2.0 * e + 2.0 * e_shift, retained=2.0 * e_shift, backward_peak=2.0 * e + 2.0 * e_shift)


def _sft_like(card: RunCard, spec: ModelSpec, gpu: GpuSpec):
    """SFT, reward-model and DPO steps: one GPU group."""
    from trainfit.methods.rl import dpo_reference_pass

    sharding = make_sharding(
        strategy=card.parallel.strategy, gpus_per_node=card.hardware.gpus_per_node, nodes=card.hardware.nodes
    )
    step_card, step_spec, notes = card, spec, []
    if card.method is Method.RM:
        # pairwise: chosen and rejected run as one batch; a scalar score head replaces lm_head
        step_spec = replace(spec, head_outputs=1)
        step_card = _card_with(card, batch__micro_batch_size=2 * card.batch.micro_batch_size)
        notes.append("reward model: chosen+rejected pairs (2x micro-batch), scalar score head, no vocabulary logits")
    elif card.method is Method.DPO:
        step_card = _card_with(card, batch__micro_batch_size=2 * card.batch.micro_batch_size)
        notes.append("DPO: chosen+rejected concatenated (2x micro-batch) through the policy")
    terms, host, more = step_terms(step_card, step_spec, sharding)
    if card.method is Method.DPO and not card.loss.chunked:
        terms = replace(terms, logits=dpo_logits(step_card, spec))
    peaks = step_peaks(terms)
    if card.method is Method.DPO:
        ref_w, ref_tr = dpo_reference_pass(spec, step_card, terms, weights_divisor=sharding.weights_divisor)
        from trainfit.methods.roles import reference_placement

        place = reference_placement(card)
        notes.append(f"DPO reference: {place.value}")
        base = {k: v for k, v in peaks[1].components.items() if k in _PERSISTENT}
        extra = [PhasePeak(Phase.REF_LOGPROB, base | {"reference_weights": ref_w, "logprob_pass": ref_tr}, "reference log-probs")]
        peaks = [peaks[0]] + (extra if ref_tr else []) + [
            PhasePeak(p.phase, dict(p.components) | {"reference_weights": ref_w}, p.at) for p in peaks[1:]
        ]
    phases = _phase_results(peaks, spec=step_spec, sharding=sharding, card=card, capacity=gpu.memory_bytes,
                            at_least=step_max_transient(terms), compute_capability=gpu.compute_capability)
    groups = (GroupPlan("all", sharding.world_size, tuple(phases)),)
    return sharding, groups, host, more + notes, None


def _rl(card: RunCard, spec: ModelSpec, gpu: GpuSpec):
    from trainfit.methods.rl import critic_spec_of, rl_groups
    from trainfit.methods.roles import group_sizes

    ro = card.rollout
    ctx = spec.max_position_embeddings
    if ctx is not None and ro.prompt_len + ro.response_len > ctx:
        raise CardError(
            f"rollout.response_len: prompt_len + response_len = {ro.prompt_len + ro.response_len} exceeds"
            f" {spec.name}'s context of {ctx} tokens"
        )
    train_gpus, _ = group_sizes(card)
    per_node = train_gpus // card.hardware.nodes
    # the actor's own step: its GPU group only (the rollout group is planned from the full card)
    actor_card = _card_with(
        card, batch__seq_len=ro.prompt_len + ro.response_len, hardware__gpus_per_node=per_node,
        rollout__placement="colocate", rollout__gpus=None,
    )
    sharding = make_sharding(strategy=card.parallel.strategy, gpus_per_node=per_node, nodes=card.hardware.nodes)
    actor, host, notes = step_terms(actor_card, spec, sharding)
    cspec = critic_spec_of(card, spec)
    critic = step_terms(actor_card, cspec, sharding)[0] if cspec is not None else None
    groups, summary, host2, notes2 = rl_groups(
        card, spec, actor, critic, critic_spec=cspec, gpu_memory=gpu.usable_memory_bytes,
        weights_divisor=sharding.weights_divisor,
    )
    host.update(host2)
    out = []
    for g in groups:
        phases = _phase_results(g.peaks, spec=spec, sharding=sharding, card=card, capacity=gpu.memory_bytes,
                                at_least=step_max_transient(actor) if g.name != "rollout" else 0.0,
                                compute_capability=gpu.compute_capability)
        out.append(GroupPlan(g.name, g.gpus, tuple(phases)))
    if not summary.engine_fits:
        notes2.append(f"ROLLOUT ENGINE CANNOT START: {summary.reason}")
    return sharding, tuple(out), host, notes + notes2, summary


def make_plan(card: RunCard) -> Plan:
    """The plan for a validated card."""
    spec = model_spec_of(card)
    gpu = gpu_of(card)
    if card.method in (Method.PPO, Method.GRPO):
        sharding, groups, host, notes, rollout = _rl(card, spec, gpu)
    else:
        sharding, groups, host, notes, rollout = _sft_like(card, spec, gpu)
    worst = max(groups, key=lambda g: max(p.device for p in g.phases))
    phases = worst.phases
    spill = max((p.components.get("paged_optimizer_states", 0.0) - p.paged_resident for p in phases), default=0.0)
    if spill > 0:
        host["paged_optimizer_spill"] = spill * min(card.hardware.gpus_per_node, sharding.world_size)
    pb = param_breakdown(spec)
    trainable = trainable_spec(card)
    n_train = (
        round(lora_trainable_params(spec, trainable.lora) * count_scale(spec)) if trainable.lora else total_params(spec)
    )
    warnings = []
    if card.parallel.strategy is Strategy.SINGLE and card.world_size > 1 and card.method not in (Method.PPO, Method.GRPO):
        warnings.append(f"strategy 'single' uses one GPU; the other {card.world_size - 1} are idle")
    if rollout is not None and rollout.preempts:
        warnings.append(f"rollout engine will preempt: {rollout.reason}")
    from trainfit.methods.roles import roles_of

    step_s, parts = step_time_of(card, spec, gpu, sharding, rollout)
    tokens_per_step = parts.pop("tokens_per_step", None)
    return Plan(
        card=card,
        spec=spec,
        gpu=gpu,
        sharding=sharding,
        params_total=total_params(spec),
        params_trainable=n_train,
        params_without_embedding=round(pb.without_embeddings * count_scale(spec)),
        phases=tuple(phases),
        host_ram=host,
        assumptions=tuple(_assumptions(card, spec, sharding) + notes),
        warnings=tuple(warnings),
        groups=groups,
        worst_group=worst.name,
        roles=tuple(roles_of(card, spec.name)) if card.method is not Method.SFT else (),
        rollout=rollout,
        step_seconds=step_s,
        tokens_per_step=tokens_per_step,
        time_parts=parts,
        price=price_of(card),
    )


def price_of(card: RunCard):
    from trainfit.compute.cost import Price, price_preset

    hw = card.hardware
    if hw.price_preset:
        return price_preset(hw.price_preset)
    if hw.price_per_gpu_hour is None:
        return None
    return Price(per_gpu_hour=hw.price_per_gpu_hour, currency=hw.currency or "")


def step_time_of(card: RunCard, spec: ModelSpec, gpu: GpuSpec, sharding: Sharding, rollout) -> tuple[float | None, dict]:
    """Roofline step time (``trainfit.compute``); None when the GPU catalog lacks FLOP/s or bandwidth."""
    from trainfit.compute.step_time import generation_time, sft_step_time, weight_sync_seconds
    from trainfit.errors import TrainfitError

    if not gpu.bf16_dense_flops_per_s or not gpu.hbm_bytes_per_s:
        return None, {}
    trainable = trainable_spec(card)
    lora_params = lora_trainable_params(spec, trainable.lora) * count_scale(spec) if trainable.lora else 0.0
    rl = card.method in (Method.PPO, Method.GRPO)
    ro = card.rollout
    seq = ro.prompt_len + ro.response_len if rl else card.batch.seq_len
    world = sharding.world_size
    if rl:
        tokens = ro.prompts_per_step * ro.num_generations * seq
    else:
        pairs = 2 if card.method in (Method.RM, Method.DPO) else 1
        tokens = card.batch.micro_batch_size * pairs * seq * card.batch.grad_accum * world
    try:
        train = sft_step_time(
            spec, gpu=gpu, gpus=world, tokens_per_step=tokens, scope=card.scope, lora_params=lora_params,
            gradient_checkpointing=card.parallel.gradient_checkpointing, strategy=card.parallel.strategy,
            offload=card.parallel.offload, inter_node=card.hardware.nodes > 1, seq_len=seq,
            micro_steps=card.batch.grad_accum, gpus_per_node=min(card.hardware.gpus_per_node, world),
        )
    except TrainfitError:
        return None, {}
    parts = {"train_compute": train.compute_s, "train_communication": train.comm_s, "offload": train.offload_s}
    if card.method is Method.PPO:
        parts["critic_train"] = train.total_s
    if card.method is Method.DPO:
        parts["reference_forward"] = train.compute_s / 3  # a forward is a third of forward+backward
    if rl and rollout is not None and rollout.engine_fits:
        w = weight_bytes(spec, weights=Dtype.BF16, compute=ComputeDtype.BF16, trainable=TrainableSpec()).base
        gen = generation_time(
            spec, gpu=gpu, tp=ro.tensor_parallel, prompts=ro.prompts_per_step, generations=ro.num_generations,
            prompt_len=ro.prompt_len, completion_len=ro.response_len, weight_bytes=w,
            kv_bytes_per_token=rollout.kv_bytes_per_token * ro.tensor_parallel, engines=rollout.engine_instances,
            max_batch=max(1, rollout.max_concurrency),
        )
        parts["generation"] = gen.total_s
        from trainfit.methods.roles import reference_placement, reward_model

        passes = (
            (card.method is Method.PPO)  # critic values
            + (card.method is Method.PPO or ro.num_iterations > 1)  # old-policy log-probs
            + (reference_placement(card) is not RefPlacement.NONE)
            + (reward_model(card) is not None)
        )
        parts["frozen_forward_passes"] = passes * train.compute_s / 3  # a forward is a third of a training step
        parts["weight_sync"] = weight_sync_seconds(weight_bytes=w / max(1, world), gpu=gpu,
                                                   colocated=ro.placement.value == "colocate")
    parts["tokens_per_step"] = float(tokens)
    return sum(v for k, v in parts.items() if k != "tokens_per_step"), parts


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


def _model_ref(card: RunCard) -> str | dict:
    m = card.model
    if isinstance(m, str):
        return m
    if m.params is not None:
        return {"params": m.params, **({"reference": m.reference} if m.reference else {})}
    ref = m.id or m.path
    if ref is None:
        raise CardError("model: give an id, a path, or params")
    return ref


def _revision(card: RunCard) -> str | None:
    return None if isinstance(card.model, str) else card.model.revision
