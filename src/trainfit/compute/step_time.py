"""Step time of a training step and of a generation (rollout) phase: a roofline, phase by phase.

Compute: ``seconds = FLOPs / (gpus · bf16_dense_flops_per_s · mfu)``, FLOPs from ``flops.py``. The
recompute forward of activation checkpointing is in the FLOPs, so ``mfu`` is applied to what the
GPU executes (strictly a hardware-FLOPs utilisation); with checkpointing off the two are the same.

``DEFAULT_MFU = 0.40``, one default for every card, overridable per call. Published dense bf16
training sits around it: torchtitan reports 33–39 % MFU for Llama 3.1 8B with FSDP on 8–128 H100
(``docs/performance.md``, Dec 2024) and 50–58 % on 64 A100 (its older table, counting non-causal
attention FLOPs); Megatron-LM reaches 44–52 % of A100 peak at scale (Narayanan et al. 2021, Table 1);
Hugging Face Trainer fine-tuning with padding and no compile is usually lower. Consumer PCIe cards
are not given a lower MFU here: their slower collectives are charged as communication time instead.
``benchmarks/step_times.md`` reports the error this default gives on published runs.

Communication, per GPU per optimizer step, ring collectives (``comm.py``), not overlapped with
compute unless ``overlap`` > 0 (FSDP and ZeRO-3 prefetch do overlap in practice; the default is the
conservative serial sum):

=============  ==============================================================================
strategy       volume
=============  ==============================================================================
ddp            all-reduce of the gradients, once per step (no_sync during accumulation)
zero1          reduce-scatter of the gradients + all-gather of the updated weights
zero2          as zero1, gradients reduced every micro-step
zero3, fsdp    all-gather of the weights in forward and again in backward + reduce-scatter of the
               gradients, every micro-step (ZeRO paper §7: 3× the DDP volume at one micro-step)
fsdp_grad_op   one all-gather per micro-step (kept to backward) + reduce-scatter
hsdp           fsdp inside a node + all-reduce of the gradient shard across nodes
=============  ==============================================================================

Offload over PCIe, per GPU per step (its shard): optimizer offload moves the gradients down and
the updated weights up (ZeRO-Offload, Ren et al. 2021); parameter offload also streams the weights
up for forward and backward (and the recompute). The CPU optimizer step itself is not timed.

Generation (``generation_time``): prefill is compute-bound, ``2·N·prompt_tokens / (tp·peak·mfu)``;
each decode step costs ``max(bytes read / hbm_bytes_per_s, FLOPs / (tp·peak·mfu))`` with bytes read =
the weight shard + the KV cache of the batch (Pope et al. 2022, "Efficiently Scaling Transformer
Inference", §2; the vLLM/PagedAttention paper, Kwon et al. 2023, §2.2), summed over the completion.

Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil
from typing import Iterable

from trainfit.catalog.gpus import GpuSpec
from trainfit.compute import comm
from trainfit.compute.flops import forward_flops_per_token, matmul_params, training_flops_per_token
from trainfit.errors import CardError
from trainfit.memory.weights import total_params
from trainfit.spec.enums import Offload, Scope, Strategy
from trainfit.spec.model import ModelSpec

DEFAULT_MFU = 0.40
"""Model FLOPs utilisation assumed when none is given (see the module docstring for the sources)."""

_GATHERS_PER_MICRO_STEP = {Strategy.ZERO3: 2, Strategy.FSDP: 2, Strategy.HSDP: 2, Strategy.FSDP_GRAD_OP: 1}


@dataclass(frozen=True, slots=True)
class PhaseTime:
    name: str
    seconds: float


def sum_phases(phases: Iterable[PhaseTime | float]) -> float:
    """A step's time: the plain sum of its phases (generation, reference log-probs, training, sync...)."""
    return sum(p.seconds if isinstance(p, PhaseTime) else float(p) for p in phases)


def compute_seconds(*, flops: float, gpus: int, peak_flops_per_s: float, mfu: float) -> float:
    """``flops / (gpus · peak · mfu)``."""
    if not 0.0 < mfu <= 1.0:
        raise CardError(f"mfu: must be within (0, 1], got {mfu}")
    return flops / (gpus * peak_flops_per_s * mfu)


def _peak(gpu: GpuSpec) -> float:
    if not gpu.bf16_dense_flops_per_s:
        raise CardError(f"gpu '{gpu.id}': the catalog has no bf16 peak; time cannot be estimated")
    return gpu.bf16_dense_flops_per_s


@dataclass(frozen=True, slots=True)
class StepTime:
    """One optimizer step of supervised training (also the policy update of RL methods)."""

    compute_s: float
    comm_s: float
    offload_s: float
    total_s: float
    tokens_per_s: float
    """Trained tokens per second, all GPUs together."""
    flops_per_token: float
    """Executed FLOPs per token (recompute included)."""
    model_flops_per_token: float
    """FLOPs per token as MFU counts them (no recompute)."""
    mfu: float
    assumptions: tuple[str, ...]


def sharded_comm_seconds(
    *,
    strategy: Strategy,
    gpus: int,
    weight_bytes: float,
    grad_bytes: float,
    link_bytes_per_s: float,
    micro_steps: int = 1,
    gpus_per_node: int | None = None,
    inter_node_bytes_per_s: float = comm.DEFAULT_INTER_NODE_BYTES_PER_S,
) -> float:
    """Collective seconds per optimizer step (table in the module docstring). ``weight_bytes``: all
    weights in the dtype they are gathered in (frozen ones too); ``grad_bytes``: trained ones only."""
    if strategy is Strategy.SINGLE or gpus <= 1:
        return 0.0
    ring = dict(link_bytes_per_s=link_bytes_per_s)
    if strategy is Strategy.DDP:
        return comm.all_reduce_seconds(total_bytes=grad_bytes, ranks=gpus, **ring)
    if strategy in (Strategy.ZERO1, Strategy.ZERO2):
        reduces = micro_steps if strategy is Strategy.ZERO2 else 1
        rs = reduces * comm.reduce_scatter_seconds(total_bytes=grad_bytes, ranks=gpus, **ring)
        return rs + comm.all_gather_seconds(total_bytes=grad_bytes, ranks=gpus, **ring)
    group = gpus
    cross = 0.0
    if strategy is Strategy.HSDP and gpus_per_node and gpus > gpus_per_node:
        group = gpus_per_node
        cross = comm.all_reduce_seconds(
            total_bytes=grad_bytes / group, ranks=ceil(gpus / group), link_bytes_per_s=inter_node_bytes_per_s
        )
    gathers = _GATHERS_PER_MICRO_STEP[strategy] * micro_steps
    ag = gathers * comm.all_gather_seconds(total_bytes=weight_bytes, ranks=group, **ring)
    rs = micro_steps * comm.reduce_scatter_seconds(total_bytes=grad_bytes, ranks=group, **ring)
    return ag + rs + cross


def offload_seconds(
    *, offload: Offload, shard: int, weight_bytes: float, grad_bytes: float, trained_weight_bytes: float,
    recompute: bool, micro_steps: int, pcie_bytes_per_s: float,
) -> float:
    """Host <-> device seconds per GPU per step (its ``1/shard`` of each term)."""
    if offload is Offload.NONE:
        return 0.0
    moved = grad_bytes + trained_weight_bytes
    if offload is Offload.PARAMS_AND_OPTIMIZER:
        moved += (3 if recompute else 2) * micro_steps * weight_bytes
    return comm.transfer_seconds(total_bytes=moved / shard, link_bytes_per_s=pcie_bytes_per_s)


def sft_step_time(
    spec: ModelSpec,
    *,
    gpu: GpuSpec,
    gpus: int,
    tokens_per_step: float,
    scope: Scope | str,
    lora_params: float,
    gradient_checkpointing: bool,
    strategy: Strategy | str,
    offload: Offload | str,
    mfu: float | None = None,
    inter_node: bool = False,
    seq_len: float | None = None,
    micro_steps: int = 1,
    gpus_per_node: int | None = None,
    weight_bytes: float | None = None,
    grad_bytes_per_param: float = 2.0,
    overlap: float = 0.0,
    inter_node_bytes_per_s: float = comm.DEFAULT_INTER_NODE_BYTES_PER_S,
    link_efficiency: float = 1.0,
) -> StepTime:
    """Seconds of one optimizer step over ``tokens_per_step`` tokens (global, all micro-steps, all GPUs).

    ``gpus``: data-parallel ranks sharing the step. ``seq_len``: the length each token attends within
    (None: attention FLOPs left out). ``weight_bytes``: all weights as gathered (default: parameters ×
    2, bf16); gradients are ``grad_bytes_per_param`` per trained parameter (bf16 reduce by default).
    """
    scope, strategy, offload = Scope(scope), Strategy(strategy), Offload(offload)
    if gpus < 1 or tokens_per_step <= 0:
        raise CardError(f"gpus and tokens_per_step: must be positive, got {gpus} and {tokens_per_step}")
    adapter = scope is not Scope.FULL
    if adapter and not lora_params:
        raise CardError(f"lora_params: scope {scope} needs the adapter's parameter count")
    mfu_used = DEFAULT_MFU if mfu is None else mfu
    f = training_flops_per_token(
        spec, seq_len=seq_len, lora_params=lora_params, adapter=adapter, recompute=gradient_checkpointing
    )
    compute = compute_seconds(flops=f.total * tokens_per_step, gpus=gpus, peak_flops_per_s=_peak(gpu), mfu=mfu_used)

    params = total_params(spec)
    trained = lora_params if adapter else params
    w_bytes = params * 2.0 if weight_bytes is None else weight_bytes
    g_bytes = trained * grad_bytes_per_param
    crosses = inter_node or bool(gpus_per_node and gpus > gpus_per_node and strategy is not Strategy.HSDP)
    link = comm.link_bytes_per_s(
        gpu, inter_node=crosses, inter_node_bytes_per_s=inter_node_bytes_per_s, efficiency=link_efficiency
    )
    comm_s = sharded_comm_seconds(
        strategy=strategy, gpus=gpus, weight_bytes=w_bytes, grad_bytes=g_bytes, link_bytes_per_s=link,
        micro_steps=micro_steps, gpus_per_node=gpus_per_node, inter_node_bytes_per_s=inter_node_bytes_per_s,
    )
    shard = 1 if strategy in (Strategy.SINGLE, Strategy.DDP) else gpus
    off_s = offload_seconds(
        offload=offload, shard=shard, weight_bytes=w_bytes, grad_bytes=g_bytes, trained_weight_bytes=trained * 2.0,
        recompute=gradient_checkpointing, micro_steps=micro_steps,
        pcie_bytes_per_s=comm.pcie_bytes_per_s(gpu) if offload is not Offload.NONE else 1.0,
    )
    total = comm.overlapped_seconds(compute_s=compute, exposed_s=comm_s + off_s, overlap=overlap)
    notes = [
        f"mfu {mfu_used:.2f} of {gpu.id}'s dense bf16 peak ({_peak(gpu) / 1e12:.0f} TFLOP/s)"
        + (" (default)" if mfu is None else ""),
        f"link {link / 1e9:.0f} GB/s per direction ({'inter-node' if crosses else 'NVLink' if gpu.nvlink else 'PCIe'})",
        f"communication and compute overlap: {overlap:.0%}",
    ]
    if seq_len is None:
        notes.append("attention FLOPs left out (no sequence length given)")
    if offload is not Offload.NONE:
        notes.append("offload: PCIe transfers timed; the CPU optimizer step is not")
    if scope is Scope.QLORA:
        notes.append("qlora: 4-bit dequantization kernels not timed")
    return StepTime(
        compute_s=compute, comm_s=comm_s, offload_s=off_s, total_s=total, tokens_per_s=tokens_per_step / total,
        flops_per_token=f.total, model_flops_per_token=f.model, mfu=mfu_used, assumptions=tuple(notes),
    )


# ------------------------------------------------------------------------------------------------
# generation
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GenTime:
    """One rollout phase: every prompt's ``generations`` completions, on ``engines`` engines of ``tp`` GPUs."""

    prefill_s: float
    decode_s: float
    total_s: float
    generated_tokens: int
    tokens_per_s: float
    """Generated tokens per second, all engines together."""
    first_step_bandwidth_s: float
    """Decode step at the first token, if bandwidth-bound (weights + KV read)."""
    first_step_compute_s: float
    """Decode step at the first token, if compute-bound."""
    bound: str
    """'bandwidth', 'compute' or 'mixed' (crosses over during the completion)."""
    assumptions: tuple[str, ...]


def _sum_max_linear(a1: float, b1: float, a2: float, b2: float, steps: int) -> float:
    """Σ_{t=0}^{steps−1} max(a1 + b1·t, a2 + b2·t), in closed form."""

    def arith(a: float, b: float, lo: int, hi: int) -> float:  # Σ_{t=lo}^{hi−1} (a + b·t)
        n = hi - lo
        return 0.0 if n <= 0 else n * a + b * (lo + hi - 1) * n / 2

    if b1 == b2:
        return arith(max(a1, a2), b1, 0, steps)
    cross = (a2 - a1) / (b1 - b2)  # where the lines meet; after it the steeper line is the larger
    split = min(max(ceil(cross), 0), steps)
    (a_lo, b_lo), (a_hi, b_hi) = sorted(((a1, b1), (a2, b2)), key=lambda line: line[1])
    return arith(a_lo, b_lo, 0, split) + arith(a_hi, b_hi, split, steps)


def _decode_wave(
    spec: ModelSpec, *, batch: int, prompt_len: int, completion_len: int, weight_shard_bytes: float,
    kv_shard_bytes_per_token: float, hbm: float, flops_per_s: float,
) -> tuple[float, float, float, float]:
    """(seconds, first bandwidth step, first compute step, last-step ratio compute/bandwidth)."""
    attn_per_ctx = 4.0 * spec.q_dim * spec.num_full_attention_layers  # non-causal: one query sees all keys
    n2 = 2 * matmul_params(spec)
    a1 = (weight_shard_bytes + batch * prompt_len * kv_shard_bytes_per_token) / hbm
    b1 = batch * kv_shard_bytes_per_token / hbm
    a2 = batch * (n2 + attn_per_ctx * prompt_len) / flops_per_s
    b2 = batch * attn_per_ctx / flops_per_s
    total = _sum_max_linear(a1, b1, a2, b2, completion_len)
    last = completion_len - 1
    return total, a1, a2, (a2 + b2 * last) / (a1 + b1 * last)


def generation_time(
    spec: ModelSpec,
    *,
    gpu: GpuSpec,
    tp: int,
    prompts: int,
    generations: int,
    prompt_len: int,
    completion_len: int,
    weight_bytes: float,
    kv_bytes_per_token: float,
    engines: int = 1,
    max_batch: int | None = None,
    mfu_prefill: float | None = None,
    mfu_decode: float | None = None,
    prefix_sharing: bool = True,
) -> GenTime:
    """Seconds to generate ``prompts × generations`` completions of ``completion_len`` tokens.

    ``weight_bytes``: the whole model's weights as the engine holds them (split over ``tp``).
    ``kv_bytes_per_token``: KV cache bytes of one token over all layers (split over ``tp``).
    ``max_batch``: most sequences decoded at once per engine (vLLM ``max_num_seqs``); more run in waves.
    ``prefix_sharing``: the ``generations`` samples of a prompt share one prefill (vLLM prefix caching).
    Every decode step is assumed to read all weights (for MoE at small batch, an upper bound) and
    every wave to run all its sequences to ``completion_len``; tensor-parallel all-reduces are not timed.
    """
    if min(tp, prompts, generations, prompt_len, completion_len, engines) < 1:
        raise CardError("generation: tp, prompts, generations, prompt_len, completion_len, engines must be >= 1")
    if not gpu.hbm_bytes_per_s:
        raise CardError(f"gpu '{gpu.id}': the catalog has no memory bandwidth; decode time cannot be estimated")
    peak = _peak(gpu) * tp
    m_pre = DEFAULT_MFU if mfu_prefill is None else mfu_prefill
    m_dec = DEFAULT_MFU if mfu_decode is None else mfu_decode
    seqs = ceil(prompts * generations / engines)
    prefill_seqs = ceil(prompts / engines) if prefix_sharing else seqs
    prefill_flops = prefill_seqs * prompt_len * forward_flops_per_token(spec, context_len=prompt_len, causal=True)
    prefill = compute_seconds(flops=prefill_flops, gpus=1, peak_flops_per_s=peak, mfu=m_pre)
    hbm = gpu.hbm_bytes_per_s * tp
    batch = seqs if max_batch is None else min(seqs, max_batch)
    waves = [batch] * (seqs // batch) + ([seqs % batch] if seqs % batch else [])
    decode = 0.0
    first_bw = first_comp = ratio = 0.0
    for i, b in enumerate(waves):
        s, bw0, c0, r = _decode_wave(
            spec, batch=b, prompt_len=prompt_len, completion_len=completion_len, weight_shard_bytes=weight_bytes,
            kv_shard_bytes_per_token=kv_bytes_per_token, hbm=hbm, flops_per_s=peak * m_dec,
        )
        decode += s
        if i == 0:
            first_bw, first_comp, ratio = bw0, c0, r
    first_ratio = first_comp / first_bw
    bound = "compute" if min(first_ratio, ratio) >= 1 else "bandwidth" if max(first_ratio, ratio) <= 1 else "mixed"
    total = prefill + decode
    generated = prompts * generations * completion_len
    notes = (
        f"prefill mfu {m_pre:.2f}, decode mfu {m_dec:.2f}" + (" (default)" if mfu_prefill is None and mfu_decode is None else ""),
        f"{engines} engine(s) of tp={tp}; {len(waves)} decode wave(s) of up to {batch} sequences",
        "prefill shared by the samples of a prompt" if prefix_sharing else "each sample prefilled separately",
        "tensor-parallel all-reduces, scheduling and sampling not timed",
    )
    return GenTime(
        prefill_s=prefill, decode_s=decode, total_s=total, generated_tokens=generated,
        tokens_per_s=generated / total, first_step_bandwidth_s=first_bw, first_step_compute_s=first_comp,
        bound=bound, assumptions=notes,
    )


def weight_sync_seconds(*, weight_bytes: float, gpu: GpuSpec, colocated: bool, inter_node: bool = False,
                        inter_node_bytes_per_s: float = comm.DEFAULT_INTER_NODE_BYTES_PER_S) -> float:
    """Trainer -> rollout engine weight update: the weights once over the link (an HBM copy when the
    engine shares the trainer's GPUs, ``colocated``)."""
    if colocated:
        if not gpu.hbm_bytes_per_s:
            raise CardError(f"gpu '{gpu.id}': the catalog has no memory bandwidth")
        return comm.transfer_seconds(total_bytes=weight_bytes, link_bytes_per_s=gpu.hbm_bytes_per_s)
    link = comm.link_bytes_per_s(gpu, inter_node=inter_node, inter_node_bytes_per_s=inter_node_bytes_per_s)
    return comm.transfer_seconds(total_bytes=weight_bytes, link_bytes_per_s=link)
