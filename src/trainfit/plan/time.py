"""The step-time hook of a plan: a resolved card into seconds per optimizer step, phase by phase.

Training phases come from the op-level model of ``trainfit.compute.training`` (GEMMs at a
shape-dependent efficiency, memory-bound kernels at HBM bandwidth, fused attention, host cost per
kernel, the optimizer's traffic, collectives left exposed by the framework's overlap, offload).
PPO/GRPO add generation (``compute.generation``), the frozen log-prob passes, reward, weight sync
(``compute.sync``) and sleep/wake, summed, or overlapped when the card runs one step off-policy.

Self-contained: the rest of ``trainfit.plan`` calls only ``step_time_of``. Pure: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import ceil

from trainfit.catalog.gpus import GpuSpec
from trainfit.compute.inventory import Adapter
from trainfit.compute.rates import DeviceRates, default_rates
from trainfit.compute.training import OptimizerSpec, Parallel, PhaseTime, train_step_time
from trainfit.memory import attention as attn
from trainfit.memory.lora import lora_trainable_params, targeted_groups
from trainfit.memory.params import param_tensors
from trainfit.memory.sharding import Sharding
from trainfit.memory.weights import count_scale, total_params, weight_bytes
from trainfit.plan.resolve import trainable_spec
from trainfit.spec.card import RunCard
from trainfit.spec.enums import MasterWeights, Method, Scope, StatesDtype
from trainfit.spec.model import ModelSpec
from trainfit.units import BYTES_PER_DTYPE

COMPILE_MEMORY_FACTOR = 0.5
"""torch.compile (Inductor) fuses chains of pointwise ops (norm, rotary, SwiGLU, residual, the loss):
about half the memory-bound traffic remains (each chain reads its inputs and writes its output once)."""
COMPILE_KERNEL_FACTOR = 0.35
"""... and about a third of the kernels (and their host dispatch) remain."""


@dataclass(frozen=True, slots=True)
class StepTiming:
    """Seconds of one optimizer step on the slowest GPU, by phase."""

    total_s: float
    tokens_per_step: float
    """Tokens trained per optimizer step over all GPUs."""
    phases: tuple[PhaseTime, ...]
    assumptions: tuple[str, ...]

    @property
    def parts(self) -> dict[str, float]:
        return {p.name: p.seconds for p in self.phases}

    @property
    def bound(self) -> str:
        return max(self.phases, key=lambda p: p.seconds).bound if self.phases else "compute"


def rates_of(card: RunCard, gpu: GpuSpec, rates: DeviceRates | None) -> DeviceRates:
    r = rates or default_rates(gpu)
    if card.hardware.host_memory_gbps:
        r = replace(r, host_memory_bytes_per_s=card.hardware.host_memory_gbps * 1e9)
    if card.parallel.compile:
        r = replace(r, host_s_per_forward_kernel=r.host_s_per_forward_kernel * COMPILE_KERNEL_FACTOR,
                    host_s_per_backward_kernel=r.host_s_per_backward_kernel * COMPILE_KERNEL_FACTOR)
    return r


def adapter_of(card: RunCard, spec: ModelSpec) -> Adapter | None:
    if card.scope is Scope.FULL:
        return None
    lo = card.lora
    return Adapter(rank=lo.rank, targets=card.lora_targets, dropout=lo.dropout, nf4_base=card.scope is Scope.QLORA,
                   adapter_dtype_bytes=4 if lo.adapter_dtype.value == "fp32" else 2)


def _trained(card: RunCard, spec: ModelSpec) -> tuple[float, float, OptimizerSpec]:
    """(trained parameters, trained tensors, optimizer) of the card's model."""
    prec = card.precision
    trainable = trainable_spec(card)
    if trainable.lora is not None:
        params = lora_trainable_params(spec, trainable.lora) * count_scale(spec)
        tensors = 2.0 * sum(g.count * g.experts for g in targeted_groups(spec, trainable.lora))
        w = float(trainable.lora.adapter_dtype_bytes)
    else:
        params = float(total_params(spec))
        tensors = float(sum(t.count for t in param_tensors(spec)))
        w = BYTES_PER_DTYPE[card.weights_dtype.value]
    g = BYTES_PER_DTYPE[prec.grads.value] if prec.grads is not None else w
    master = prec.master_weights is MasterWeights.FP32 and w < 4
    s = {StatesDtype.FP32: 4.0, StatesDtype.BF16: 2.0}.get(prec.optimizer_states, 4.0 if master else w)
    opt = OptimizerSpec(name=prec.optimizer.value, impl=prec.optimizer_impl.value, weight_bytes=w, grad_bytes=g,
                        state_bytes=s, master=master, clip=True, in_backward=prec.optimizer_in_backward)
    return params, tensors, opt


def training_time(
    card: RunCard, spec: ModelSpec, rates: DeviceRates, *, ranks: int, gpus_per_node: int, micro_batch_size: int,
    seq_len: int, micro_steps: int,
):
    params, tensors, opt = _trained(card, spec)
    trainable = trainable_spec(card)
    w = weight_bytes(spec, weights=card.weights_dtype, compute=card.precision.compute, trainable=trainable)
    eager = attn.runs_eager(spec.family, card.attention) and spec.num_full_attention_layers > 0
    par = Parallel(strategy=card.parallel.strategy.value, ranks=ranks, gpus_per_node=gpus_per_node,
                   nic_bytes_per_s=card.hardware.nic_gbps_per_gpu * 1e9 / 8, offload=card.parallel.offload.value)
    t = train_step_time(
        spec, rates=rates, micro_batch_size=micro_batch_size, seq_len=seq_len, micro_steps=micro_steps,
        adapter=adapter_of(card, spec), eager_attention=eager, gradient_checkpointing=card.parallel.gradient_checkpointing,
        parallel=par, optimizer=opt, trained_params=params, trained_tensors=tensors,
        gathered_weight_bytes=w.base + w.adapter, count_scale=count_scale(spec),
        memory_factor=COMPILE_MEMORY_FACTOR if card.parallel.compile else 1.0,
        kernel_factor=COMPILE_KERNEL_FACTOR if card.parallel.compile else 1.0,
    )
    return t


def step_time_of(card: RunCard, spec: ModelSpec, gpu: GpuSpec, sharding: Sharding, rollout, *,
                 rates: DeviceRates | None = None) -> StepTiming | None:
    """The step's time on the slowest GPU; None when the GPU catalog lacks FLOP/s or bandwidth."""
    from trainfit.errors import TrainfitError

    if not gpu.bf16_dense_flops_per_s or not gpu.hbm_bytes_per_s:
        return None
    try:
        r = rates_of(card, gpu, rates)
        if card.method in (Method.PPO, Method.GRPO):
            from trainfit.plan.rl_time import rl_step_time

            return rl_step_time(card, spec, gpu, sharding, rollout, r)
        return _sft_time(card, spec, sharding, r)
    except TrainfitError:
        return None


def _sft_time(card: RunCard, spec: ModelSpec, sharding: Sharding, r: DeviceRates) -> StepTiming:
    world = sharding.world_size
    pairs = 2 if card.method in (Method.RM, Method.DPO) else 1
    mbs = card.batch.micro_batch_size * pairs
    step_spec = replace(spec, head_outputs=1) if card.method is Method.RM else spec
    t = training_time(card, step_spec, r, ranks=world, gpus_per_node=min(card.hardware.gpus_per_node, world),
                      micro_batch_size=mbs, seq_len=card.batch.seq_len, micro_steps=card.batch.grad_accum)
    phases = list(t.phases)
    if card.method is Method.DPO:
        fwd = next(p for p in t.phases if p.name == "forward")
        phases.insert(0, replace(fwd, name="reference_forward"))
    tokens = float(mbs * card.batch.seq_len * card.batch.grad_accum * world)
    total = sum(p.seconds for p in phases)
    return StepTiming(total, tokens, tuple(phases), t.assumptions)
