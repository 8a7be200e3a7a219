"""One optimizer step of training, op by op: the time twin of ``memory/phases.py``.

Each pass (forward, recompute, backward) is timed from its op inventory (``inventory.py``):

    device_s = Σ GEMMs (gemm.py) + fused attention (attention_time.py) + memory-bound bytes / HBM
               (the strided ones at ``STRIDED_BANDWIDTH_SHARE`` of it)
    host_s   = kernels × host seconds per kernel (eager PyTorch dispatch)
    seconds  = max(device_s, host_s)                       (no host-device synchronisation in the pass)
             = Σ_segments max(host_seg, device_seg) + per sync: refill + round trip   (``synced_seconds``)

The max is the steady state of a producer (the Python/autograd thread queueing kernels) and a
consumer (the GPU): whichever is slower sets the pace, layer after layer. Small models on fast
cards are host-bound ("launch"), large ones compute-bound.

A host-device synchronisation (``.item()``, a boolean-mask index, a blocking copy: packed rows in transformers'
flash attention, ``inventory.PACKED_FLASH_FORWARD_SYNCS``) stops the producer until the consumer has drained its
queue, so the pass splits into segments that each start on an empty queue.

Then the optimizer step (``optimizer_time.py``), the collectives left exposed by the framework's
overlap (``collectives.py``) and offload (``offload.py``). The step is::

    micro_steps × (forward + recompute + backward + exposed per-micro-step comm)
      + optimizer step + exposed per-step comm + exposed offload

Pure Python: no torch import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

from trainfit.compute import collectives as coll
from trainfit.compute.attention_time import attention_seconds, mem_efficient_attention_seconds
from trainfit.compute.dist_optimizer import megatron_bucket_params
from trainfit.compute.te_host import (te_attention_select_host_seconds, te_backward_host_seconds,
                                     te_forward_host_seconds, te_forward_kernels, te_linear_calls)
from trainfit.compute.expert_loop import zero3_expert_gathers
from trainfit.compute.float8_all_gather import (Fp8GatherShard, amax_vector_bytes, layer_gather_prep_seconds,
                                               precompute_seconds, shard_cast_host_seconds)
from trainfit.compute.gemm import (fp8_precise_rates, gemm_seconds, grouped_mm_seconds,
                                   multi_stream_grouped_gemm_seconds)
from trainfit.compute.inventory import (BACKWARD_BYTES_FACTOR, BACKWARD_KERNEL_FACTOR, LORA_BACKWARD_BYTES_FACTOR,
                                       LORA_BACKWARD_KERNEL_FACTOR, LORA_DROPOUT_BYTES, LORA_DROPOUT_KERNELS,
                                       LORA_ELEMENTWISE_BYTES, LORA_EXTRA_KERNELS, Adapter, ChainedRead, Gemm,
                                       PassInventory, peft_param_wrapper_calls, step_inventory)
from trainfit.compute.moe_time import expert_token_shards
from trainfit.compute.model_parallel import (ModelParallelComm, host_slack_exposed_s, model_parallel_comm,
                                            pipeline_bubble_micro_steps,
                                            tied_embedding_grad_sync_s)
from trainfit.compute.offload import (
    deepspeed_zero12_offload_seconds,
    fsdp2_host_add_bytes_per_s,
    fsdp2_offload_accumulation_seconds,
    layer_offload_stall_seconds,
    offload_seconds,
    rank_host_memory_bytes_per_s,
    torch_cpu_adamw_s_per_param,
    torch_cpu_adamw_seconds,
)
from trainfit.compute.optimizer_time import (HF_PARAM_GROUPS, OptimizerTime, deepspeed_flat_partitions,
                                             deepspeed_zero12_grad_norm_kernels, optimizer_seconds, shard_params)
from trainfit.compute.rates import (
    FSDP2_UNIT_BACKWARD_HOST_S, FSDP2_UNIT_FORWARD_HOST_S,
    FSDP2_UNIT_GRAD_FORWARD_HOST_S, FSDP_ADAPTER_UNIT_BACKWARD_HOST_S, FSDP_ADAPTER_UNIT_FORWARD_HOST_S,
    FSDP_ADAPTER_UNIT_GRAD_FORWARD_HOST_S, FSDP_UNIT_BACKWARD_HOST_S, FSDP_UNIT_FORWARD_HOST_S,
    FSDP_UNIT_GRAD_FORWARD_HOST_S,
    HF_ROOT_MODULES, PEFT_PARAM_WRAPPER_HOST_S, PEFT_PARAM_WRAPPER_NOGRAD_RATIO, ZERO3_MODULE_BACKWARD_HOST_S,
    ZERO3_MODULE_FORWARD_HOST_S, ZERO3_REDUCE_BUCKET_HOST_S, DeviceRates, group_rates,
    nograd_forward_host_s_per_kernel,
)
from trainfit.spec.enums import MoeDispatcher, MoeLoadBalancing, MoeRouting, ThdRopeLoop
from trainfit.spec.model import ModelSpec

if TYPE_CHECKING:
    from trainfit.compute.float8_casts import CastTraffic
    from trainfit.compute.te_host import TeLinearCalls

BOUNDS = ("compute", "memory", "launch", "communication", "offload", "idle")

STRIDED_BANDWIDTH_SHARE = 0.46
"""Bandwidth of PyTorch's non-vectorised elementwise loop (an operand broadcast or strided: the norms'
broadcast multiplies, rotary, ``inventory.PassInventory.strided_bytes``) over its vectorised one, same
op and size. Measured on an H200 with PyTorch 2.9.1 (cu128), fp16 (1024, 10240): ``torch.prelu`` with its
per-channel weight broadcast 1.18 TB/s against ``leaky_relu`` (same-shape) 2.57 TB/s, 0.46
(https://github.com/tile-ai/TileOPs/pull/500, 2026-03-14: the PR's H200 table, "PyTorch (TB/s)" column,
leaky_relu 2.57, prelu (C=10240) 1.18); the same card, a bias-add broadcast 0.62 against
a same-shape add 1.39 TB/s, 0.45 (pull request #537, 2026-03-16). Taken for every card (the loop is the
same code); compiled kernels (``memory_factor`` < 1: Inductor's fused Triton kernels load broadcast operands
as blocks) keep the streaming rate."""

SYNC_ROUND_TRIP_S = 6e-6
"""Seconds the host spends in one synchronising read of a device value beyond the wait for the queue: the
device-to-host copy's submission, 5-7 us per ``cudaMemcpyAsync`` call measured by Wu et al., "DualPath: Breaking the
Storage Bandwidth Bottleneck in Agentic LLM Inference" (arXiv 2602.21548, 2026-02-25, section 5.2); the midpoint,
a lower bound (the copy itself and the host's wake-up from ``cudaStreamSynchronize`` come on top). Not fitted."""


@dataclass(frozen=True, slots=True)
class PhaseTime:
    """Seconds of one phase of a step on the slowest GPU, with its dominant term."""

    name: str
    seconds: float
    bound: str
    """compute | memory | launch | communication | offload"""
    terms: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PassTime:
    seconds: float
    gemm_s: float
    attention_s: float
    memory_s: float
    host_s: float
    sync_s: float = 0.0
    """Of ``seconds``, what the pass's host-device synchronisations add (``synced_seconds``)."""

    @property
    def bound(self) -> str:
        device = self.gemm_s + self.attention_s + self.memory_s
        if self.host_s > device:
            return "launch"
        return "compute" if self.gemm_s + self.attention_s >= self.memory_s else "memory"

    def __add__(self, o: "PassTime") -> "PassTime":
        return PassTime(self.seconds + o.seconds, self.gemm_s + o.gemm_s, self.attention_s + o.attention_s,
                        self.memory_s + o.memory_s, self.host_s + o.host_s, self.sync_s + o.sync_s)

    def scaled(self, f: float) -> "PassTime":
        return PassTime(self.seconds * f, self.gemm_s * f, self.attention_s * f, self.memory_s * f, self.host_s * f,
                        self.sync_s * f)


ZERO_PASS = PassTime(0.0, 0.0, 0.0, 0.0, 0.0)


def fp32_grad_accumulation_seconds(*, params: float, tensors: float, grad_bytes: float, accumulator_bytes: float,
                                   hbm_bytes_per_s: float, device_s_per_kernel: float,
                                   host_s_per_tensor: float = 0.0) -> PassTime:
    """One micro-batch's accumulation of the rank's 16-bit gradients (``grad_bytes`` each) into its fp32 gradient
    buffer (``accumulator_bytes`` each, read and written), one ``add_`` kernel per parameter tensor, on the compute
    stream after the backward: ``params x (grad_bytes + 2 x accumulator_bytes)`` over HBM plus each kernel's fixed
    device cost (``device_s_per_kernel``), or the host's loop issuing them where that is longer: ``_accumulate_grad``
    is a Python call per parameter tensor (a buffer lookup, the ``add_``, ``half_param.grad = None``, the fp32
    parameter's ``.grad`` re-pointed), ``host_s_per_tensor`` each (``train_step_time`` charges the bare-loop rate the
    optimizer's for-loop path charges per kernel, ``rates.host_s_per_backward_kernel``).

    nanotron with ``accumulate_grad_in_fp32`` (huggingface/nanotron @c252843039cc167ff8d6894b87172af4637eb14b,
    src/nanotron/optim/gradient_accumulator.py): ``FP32GradientAccumulator.backward`` runs ``loss.backward()`` and then,
    for every parameter of the rank (the grad buffers cover all of them, not the ZeRO-1 shard: ``build_grad_buffers``,
    ``grad_buckets_named_params``), ``_accumulate_grad``: ``fp32_grad.add_(half_param.grad)`` and ``half_param.grad =
    None`` (l.204-223); the pipeline engine calls it for every micro-batch (src/nanotron/parallel/pipeline_parallel/
    engine.py ``PipelineEngine.backward`` l.86). Under DDP (ZeRO-0) the step's last micro-batch makes the same ``add_``
    per parameter in the communication hook instead, inside the backward (``fp32_accum_hook`` l.328-341): the same
    bytes. Megatron-Core folds this add into the weight-gradient GEMM (``gradient_accumulation_fusion``), so it has no
    such pass."""
    if params <= 0:
        return ZERO_PASS
    memory_s = params * (grad_bytes + 2 * accumulator_bytes) / hbm_bytes_per_s
    kernels_s = max(1.0, tensors) * device_s_per_kernel
    host_s = max(1.0, tensors) * host_s_per_tensor
    return PassTime(max(memory_s + kernels_s, host_s), 0.0, 0.0, memory_s + kernels_s, host_s)


def nanotron_fused_tensors(spec: ModelSpec) -> int:
    """Parameter tensors the card's model counts that nanotron's Llama fuses away: q, k and v in one ``qkv_proj``,
    gate and up in one ``gate_up_proj`` (huggingface/nanotron @c252843039cc167ff8d6894b87172af4637eb14b
    src/nanotron/models/llama.py l.223-238, l.384-389, no biases there), 3 a decoder layer. Only for a model that
    Llama class builds: separate q/k/v projections and a dense gated MLP (no MoE, MLA or linear attention); 0 for
    any other, whose tensors are counted as the card's model holds them."""
    llama_like = spec.mlp_gated and spec.moe is None and spec.mla is None and spec.linear_attention is None
    return 3 * spec.num_layers if llama_like else 0


def fsdp_unit_host_seconds(*, fsdp2: bool, grad: bool) -> tuple[float, float]:
    """(forward, backward) host seconds of one FSDP unit's hooks: FSDP1's or FSDP2's (``fsdp2``), the forward's in a
    pass that records autograd (``grad``: training and its recompute) or not (log-prob passes), measured
    (``rates.FSDP_HOOK_RATIOS``)."""
    if fsdp2:
        return (FSDP2_UNIT_GRAD_FORWARD_HOST_S if grad else FSDP2_UNIT_FORWARD_HOST_S), FSDP2_UNIT_BACKWARD_HOST_S
    return (FSDP_UNIT_GRAD_FORWARD_HOST_S if grad else FSDP_UNIT_FORWARD_HOST_S), FSDP_UNIT_BACKWARD_HOST_S


def interleaved(a: PassTime, b: PassTime) -> tuple[PassTime, PassTime]:
    """Two passes whose kernels interleave layer by layer (checkpoint recompute runs inside backward,
    one layer at a time): the host queue and the GPU pace the pair together, ``max(Σ device, Σ host)``,
    not each pass alone. The pair's seconds are shared in proportion to each pass's own time."""
    device = a.gemm_s + a.attention_s + a.memory_s + b.gemm_s + b.attention_s + b.memory_s
    pair = max(device, a.host_s + b.host_s) + a.sync_s + b.sync_s  # a sync drains the pair's queue too
    alone = a.seconds + b.seconds
    if alone <= 0:
        return a, b
    f = pair / alone
    return (PassTime(a.seconds * f, a.gemm_s, a.attention_s, a.memory_s, a.host_s, a.sync_s),
            PassTime(b.seconds * f, b.gemm_s, b.attention_s, b.memory_s, b.host_s, b.sync_s))


def sequenced(a: PassTime, b: PassTime) -> PassTime:
    """Pass ``a`` then pass ``b`` on one host thread and one stream, the queue not drained between them (the layers'
    forward then the head's; the head's backward then the layers'): a two-machine flow shop (S. M. Johnson, Naval
    Research Logistics Quarterly 1(1), 1954, as ``synced_seconds``) whose jobs keep their order. In the fluid limit
    (many small kernels a pass) the last kernel ends at the latest of: every kernel on the device back to back
    (``Da + Db``), ``a`` queued by the host then ``b`` run (``Ha + Db``), and both queued by the host (``Ha + Hb``)::

        seconds = max(Da + Db, Ha + Db, Ha + Hb)

    never more than the two passes apart (``max(Ha, Da) + max(Hb, Db)``: a device-bound head after host-bound layers
    is the same; the head's backward GEMMs run while the host queues the layers' backward, which the sum missed) and
    never less than ``max(Σ device, Σ host)``. Non-decreasing in each pass's host and device seconds. A pass with
    host-device synchronisations (``sync_s``) drains the queue inside it, so the two are then added as they are."""
    if b.seconds <= 0.0 and b.host_s <= 0.0:
        return a
    if a.seconds <= 0.0 and a.host_s <= 0.0:
        return b
    if a.sync_s > 0.0 or b.sync_s > 0.0:
        return a + b
    da, db = a.gemm_s + a.attention_s + a.memory_s, b.gemm_s + b.attention_s + b.memory_s
    seconds = max(da + db, a.host_s + db, a.host_s + b.host_s)
    return PassTime(seconds, a.gemm_s + b.gemm_s, a.attention_s + b.attention_s, a.memory_s + b.memory_s,
                    a.host_s + b.host_s, 0.0)


def synced_seconds(*, host_s: float, device_s: float, kernels: float, syncs: float,
                   round_trip_s: float = SYNC_ROUND_TRIP_S) -> float:
    """Seconds of a pass of ``kernels`` kernels (``host_s`` to queue them, ``device_s`` to run them) whose host
    waits ``syncs`` times for the GPU to drain its queue.

    The syncs cut the pass into ``syncs + 1`` segments, each ``1 / (syncs + 1)`` of the work (a sync per layer, or a
    fixed number per layer: the layers are alike). The first segment follows a queue already full (the steady state
    of the module docstring); each later one starts empty, so its first kernel's launch or its last kernel's run is
    not overlapped: a two-stage pipeline of ``n`` jobs of host time ``h`` and device time ``g`` each runs
    ``n·max(h, g) + min(h, g)`` (the two-machine flow shop, S. M. Johnson, Naval Research Logistics Quarterly 1(1),
    1954). So::

        seconds = Σ_segments max(host_seg, device_seg) + syncs · (min(h, g) + round_trip_s)

    with ``h``, ``g`` the mean per-kernel host and device seconds (a segment holds at least one kernel); without syncs
    it is ``max(host_s, device_s)``, and never more than ``host_s + device_s`` plus the round trips (no overlap).
    """
    if syncs <= 0 or kernels <= 0:
        return max(host_s, device_s)
    segments = syncs + 1
    host_seg, device_seg = host_s / segments, device_s / segments
    refill = min(host_seg, device_seg) / max(1.0, kernels / segments)
    return segments * max(host_seg, device_seg) + syncs * (refill + round_trip_s)


def checkpointed_forward_host_s_per_kernel(*, rates: DeviceRates, reentrant_share: float) -> float:
    """Host seconds per kernel of the decoder layers' first forward when ``reentrant_share`` of them run under a
    re-entrant checkpoint: those layers' forward runs under ``torch.no_grad`` and records no autograd graph, so it pays
    the no-grad forward's rate (``rates.nograd_forward_host_s_per_kernel``); the other layers the grad forward's.

    Mechanism: torch's ``CheckpointFunction.forward`` runs ``with torch.no_grad(): outputs = run_function(*args)``
    and its backward re-runs the function under ``torch.enable_grad()`` before ``torch.autograd.backward``
    (pytorch/pytorch torch/utils/checkpoint.py @0008d771a4015b0b43165ea470653b52e92b2148 ``CheckpointFunction``;
    its docstring: "The reentrant variant does not record the autograd graph during the forward pass, as it runs
    with the forward pass under torch.no_grad"). torch 2.0's ``checkpoint`` defaults to ``use_reentrant=True``, so a
    model that calls it without the keyword (Qwen (1.0)'s ``QWenModel.forward``) checkpoints re-entrantly. Megatron's
    ``CheckpointFunction`` is an ``autograd.Function`` too, whose ``forward`` runs with grad mode off likewise; but
    Megatron-Core's Transformer Engine layers launch their linears' and attention's kernels inside TE's autograd
    Functions (``_Linear``, ``_LayerNormLinear``, fused attention), where grad mode is off in a plain forward too, so the
    per-op saving measured on transformers' eager layers (``rates.NOGRAD_FORWARD_OP_RATIO``) goes only to their other
    kernels: ``train_step_time`` passes ``reentrant_share`` times ``outside_te_kernel_share``. The recompute in backward records the graph (the grad forward's rate, unchanged). No constant:
    the rates are the identified ones."""
    no_grad = nograd_forward_host_s_per_kernel(
        host_s_per_forward_kernel=rates.host_s_per_forward_kernel,
        host_s_per_backward_kernel=rates.host_s_per_backward_kernel, backward_kernel_factor=BACKWARD_KERNEL_FACTOR)
    share = min(1.0, max(0.0, reentrant_share))
    return share * no_grad + (1.0 - share) * rates.host_s_per_forward_kernel


MEGATRON_GRAD_ENABLED_FORWARD_KERNELS_PER_LAYER = 2
"""Kernels of a Megatron-Core decoder layer's forward that record autograd even under ``torch.no_grad``: its two
bias-dropout-adds (attention output + residual, MLP output + residual, one kernel each in the inventory), which the
layer runs inside ``self.bias_dropout_add_exec_handler()``, set to ``torch.enable_grad`` (NVIDIA/Megatron-LM
@7094270c6fa1dbc6b2e99072171e3a559ca36d0f megatron/core/transformer/transformer_layer.py l.366, 470, 542)."""


def outside_te_kernel_share(inv: PassInventory, *, calls: TeLinearCalls, quantized: bool,
                            casts: CastTraffic | None, te_layers: bool, layers: float = 0.0) -> float:
    """Of a decoder-layer forward's kernels (``inv``), the share launched outside Transformer Engine's autograd
    Functions: 1 for transformers' eager layers (``te_layers`` false); for Megatron-Core's TE layers the kernels
    less TE's linears' (``te_host.te_forward_kernels``), the fused attention's (one per call,
    ``inv.attention_calls``: ``FusedAttnFunc``) and the context-parallel attention's glue around those calls
    (``inv.te_function_kernels``: ring ``AttnFuncWithCP``, a2a ``AttnFuncWithCPAndQKVOA2A``). A Function's forward runs with grad mode off whether or not the
    caller's is (``torch.is_grad_enabled()`` reads False inside a Python ``Function.forward`` called with grad on,
    torch 2.13.0+cpu on this project's CPU, 2026-12-03; the C++ API's ``Function::apply`` holds
    ``AutoGradMode grad_mode(false)`` around ``forward``, torch/csrc/autograd/custom_function.h l.505 of that wheel), so
    a re-entrant checkpoint's ``torch.no_grad`` saves nothing inside it. Nor on the ``layers`` layers' bias-dropout-adds,
    which Megatron-Core runs under ``torch.enable_grad`` (``MEGATRON_GRAD_ENABLED_FORWARD_KERNELS_PER_LAYER``). It
    saves the recording of the layer's other ops, plain torch calls: the unfused rotary embedding, the MoE router's
    softmax / top-k and the token permutation (NVIDIA/Megatron-LM @7094270c6fa1dbc6b2e99072171e3a559ca36d0f
    megatron/core/transformer/moe/router.py l.157, 166; moe/moe_utils.py ``permute`` l.230). Some of them are
    Megatron's own fused Functions (megatron/core/fusions/fused_bias_swiglu.py l.61 ``BiasSwiGLUFunction``) and save
    nothing either: counted as outside, an upper bound on the saving."""
    if not te_layers:
        return 1.0
    if inv.kernels <= 0.0:
        return 0.0
    te = (te_forward_kernels(calls=calls, quantized=quantized, casts=casts) + inv.attention_calls
          + inv.te_function_kernels + MEGATRON_GRAD_ENABLED_FORWARD_KERNELS_PER_LAYER * layers)
    return min(1.0, max(0.0, 1.0 - te / inv.kernels))


def launch_blocking_syncs(*, kernels: float, host_syncs: float) -> float:
    """Host syncs of a pass of ``kernels`` kernels run under ``CUDA_LAUNCH_BLOCKING=1`` (``loop.launch_blocking``): one
    after every kernel but the last, so ``synced_seconds`` cuts the pass into one segment per kernel and the host's
    dispatch of each kernel no longer overlaps the kernel before it: about ``host_s + device_s`` plus a round trip per
    kernel, instead of ``max(host_s, device_s)``. Never fewer than the pass's own ``host_syncs``.

    Mechanism: "Programmers can globally disable asynchronicity of kernel launches for all CUDA applications running
    on a system by setting the CUDA_LAUNCH_BLOCKING environment variable to 1. This feature is provided for debugging
    purposes only" (CUDA C++ Programming Guide, asynchronous concurrent execution, as quoted in
    https://discuss.pytorch.org/t/cuda-launch-blocking-1-reduces-the-training-speed/160924, read 2026-12-03; the
    variable: https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html, read
    2026-12-03). A run that sets it: BigScience's BLOOM-176B scripts ('export CUDA_LAUNCH_BLOCKING=1',
    bigscience-workshop/bigscience train/tr11-176B-ml/tr11-176B-ml.slurm l.203 and chronicles-prequel.md l.436-462
    @9e64edec2ad1fb9263bf39ba616a84ff64b4d947: 'all CUDA operations become synchronous'). No constant: the host and
    device seconds are the pass's own, the round trip ``SYNC_ROUND_TRIP_S``."""
    return max(host_syncs, kernels - 1.0)


def l2_chained_bytes(chained_reads: tuple[ChainedRead, ...], *,
                     rates: DeviceRates) -> tuple[float, float]:
    """Of a pass's chained reads (``inventory.PassInventory.chained_reads``: a kernel reading what the kernel just
    before it wrote or read), the contiguous and strided bytes served from L2: those of the chains whose working set
    fits in what the card keeps at the L2 rate (``rates.l2_resident_bytes``). ``pass_seconds`` prices them at
    ``rates.l2_read_bytes_per_s`` instead of device memory's rate.

    Mechanism: L2 is the last level before device memory, shared by every SM; a line a kernel wrote or read stays
    there until newer traffic evicts it, so the next kernel's read of it hits L2 when the tensors in between fit.
    The catalog's figures are a read-only streaming kernel's, measured per card as the data set grows
    (te42kyfo/gpu-benches ``gpu-l2-cache``, cited in each GPU entry): on an L40 5.2 TB/s up to 89.5 MiB, then the
    0.8 TB/s of GDDR6; on an H200 9.9 TB/s up to 39.5 MiB, then 3.9 TB/s. A card without them (None) prices every
    read at device memory's rate. Only the chains counted in the inventory (eager RMSNorm, ``NORM_CHAINED_*``; PEFT's
    fp32-adapter casts, scale and add around lora_A / lora_B, ``FP32_LORA_CHAINED_*``) are priced so; the other
    elementwise kernels read a GEMM's output or a saved activation first (not counted)."""
    if not rates.l2_read_bytes_per_s or rates.l2_resident_bytes <= 0:
        return 0.0, 0.0
    fit = [c for c in chained_reads if c.working_set_bytes <= rates.l2_resident_bytes]
    return sum(c.contiguous_bytes for c in fit), sum(c.strided_bytes for c in fit)


def _window_attention_seconds(*, forward_flops: float, seq_len: float, rates: DeviceRates, backward: bool,
                              head_dim: float | None, kernel: str, fp8_recipe: str, fp32: bool,
                              row_tokens: float = 0.0, window_tokens: float = 0.0) -> float:
    """Seconds of the windowed layers' attention at their key-loop length: in fp32 the memory-efficient kernel
    (3xTF32), else the card's kernel without the softmax exponential bound (attention_time module docstring); an fp8
    kernel at its measured windowed rate for rows of ``row_tokens`` and a window of ``window_tokens``
    (``attention_time.fp8_window_attention_ratio``)."""
    if fp32:
        return mem_efficient_attention_seconds(forward_flops=forward_flops, seq_len=seq_len, rates=rates,
                                               backward=backward, head_dim=head_dim, fp32=True)
    return attention_seconds(forward_flops=forward_flops, seq_len=seq_len, rates=rates, backward=backward,
                             head_dim=head_dim, kernel=kernel, exp_bound=False, fp8_recipe=fp8_recipe,
                             window_row_tokens=row_tokens or seq_len, window_tokens=window_tokens)


def gemm_call_seconds(g: Gemm, *, rates: DeviceRates) -> float:
    """Seconds of one launch of ``g`` (all its groups), by the kernel that runs it."""
    return (multi_stream_grouped_gemm_seconds if g.launch_per_group else grouped_mm_seconds if g.grouped_kernel
            else gemm_seconds)(m=g.m, n=g.n, k=g.k, groups=g.groups, rates=rates, dtype_bytes=g.dtype_bytes)


def adapted_projections(inv: PassInventory, *, rates: DeviceRates, adapted: tuple[str, ...], backward: bool,
                        dropout: bool, host_s_per_kernel: float, hooks_s: float, scale: float = 1.0,
                        memory_factor: float = 1.0, kernel_factor: float = 1.0) -> tuple[tuple[float, float, float], ...]:
    """(calls, device seconds, host seconds) of one call of each adapted linear group in a pass, for
    ``collectives.rate_limited_adapter_units_seconds``. Device: its frozen GEMM and its adapter's (forward ``name``,
    ``name.A``, ``name.B``; backward ``name.dX`` and ``name.B.dX`` ... ``name.A.dW``) plus the adapter's elementwise
    bytes at HBM bandwidth (``inventory``'s ``LORA_ELEMENTWISE_BYTES`` and ``LORA_DROPOUT_BYTES`` per element, the
    backward's by its factors), ``scale`` times the work (``train_step_time``'s ``count_scale``). Host: ``hooks_s``
    (the two adapter units' hooks) plus the call's kernels as the inventory counts them (the frozen GEMM, the two
    adapter GEMMs or their four backward GEMMs, the scale and add, the dropout) at ``host_s_per_kernel``;
    ``memory_factor`` / ``kernel_factor`` as ``pass_seconds``. bf16 adapters on a 16-bit or 4-bit base: the fp32
    adapters' casts and the 4-bit dequantisation are left out (small beside the GEMM)."""
    out = []
    drop_k, drop_b = (LORA_DROPOUT_KERNELS, LORA_DROPOUT_BYTES) if dropout else (0.0, 0.0)
    if backward:
        kernels = 1 + 4 + LORA_BACKWARD_KERNEL_FACTOR * LORA_EXTRA_KERNELS + BACKWARD_KERNEL_FACTOR * drop_k
        out_b, in_b = LORA_BACKWARD_BYTES_FACTOR * LORA_ELEMENTWISE_BYTES, BACKWARD_BYTES_FACTOR * drop_b
    else:
        kernels = 1 + 2 + LORA_EXTRA_KERNELS + drop_k
        out_b, in_b = LORA_ELEMENTWISE_BYTES, drop_b
    for name in adapted:
        own = [g for g in inv.gemms if g.name in (name, name + ".dX") or g.name.startswith(name + ".A")
               or g.name.startswith(name + ".B")]
        base = [g for g in own if g.name in (name, name + ".dX")]
        calls = sum(g.count for g in base)
        if calls <= 0:
            continue
        tokens, out_f, in_f = (base[0].m, base[0].k, base[0].n) if backward else (base[0].m, base[0].n, base[0].k)
        gemm_s = sum(gemm_call_seconds(g, rates=rates) * g.count for g in own) / calls
        mem_s = (out_b * out_f + in_b * in_f) * tokens * memory_factor / rates.hbm_bytes_per_s
        out.append((calls, scale * (gemm_s + mem_s), hooks_s + kernels * kernel_factor * host_s_per_kernel))
    return tuple(out)


def rate_limited(t: PassTime, *, exposed_s: float) -> PassTime:
    """``t`` where a stretch of it is paced by the host's waits (FSDP1's rate limiter): at least its device time plus
    ``exposed_s``; what that adds is kept as synchronisation time (``PassTime.sync_s``), so ``sequenced`` and
    ``interleaved`` keep it too."""
    seconds = max(t.seconds, t.gemm_s + t.attention_s + t.memory_s + exposed_s)
    return PassTime(seconds, t.gemm_s, t.attention_s, t.memory_s, t.host_s, t.sync_s + seconds - t.seconds)


def pass_seconds(inv: PassInventory, *, rates: DeviceRates, seq_len: float, backward: bool,
                 memory_factor: float = 1.0, kernel_factor: float = 1.0, attention_kernel: str = "auto",
                 launch_blocking: bool = False, attention_fp8: str = "",
                 fp8_precise_forward: bool = False) -> PassTime:
    """Time of one pass from its inventory (module docstring). ``memory_factor`` / ``kernel_factor``
    scale the memory-bound bytes and the kernel count (kernel fusion by a compiler); ``launch_blocking``: every
    kernel launch waits for the kernel (``launch_blocking_syncs``); ``attention_fp8``: fp8 attention's recipe
    ("mxfp8" / "fp8", ``attention_time.fp8_attention_ratio``; "": bf16 attention). A backward's fp8 GEMMs run
    without fast accumulation (``gemm.fp8_precise_rates``), a forward's too where ``fp8_precise_forward`` (Transformer
    Engine's blockwise recipe, ``float8_casts.CastTraffic.forward_split_accumulator``)."""
    gemm_rates = fp8_precise_rates(rates) if backward or fp8_precise_forward else rates
    gemm = sum(gemm_call_seconds(g, rates=gemm_rates) * g.count for g in inv.gemms)
    win, hd = inv.window_attention_forward_flops, inv.attention_head_dim  # windowed layers at their key-loop length
    fp32_attn = inv.attention_dtype_bytes >= 4  # fp32 q / k / v: the memory-efficient kernel in 3xTF32
    # SDPA handed an explicit mask runs the memory-efficient kernel (attention_time module docstring); fp32 always
    masked = inv.attention_forward_flops - win if fp32_attn else inv.masked_attention_forward_flops
    attn = (attention_seconds(forward_flops=inv.attention_forward_flops - win - masked, seq_len=seq_len, rates=rates,
                              backward=backward, head_dim=hd, kernel=attention_kernel, fp8_recipe=attention_fp8)
            + mem_efficient_attention_seconds(forward_flops=masked, seq_len=seq_len, rates=rates, backward=backward,
                                              head_dim=hd, fp32=fp32_attn)
            + _window_attention_seconds(forward_flops=win, seq_len=inv.window_attention_seq, rates=rates,
                                        backward=backward, head_dim=hd, kernel=attention_kernel,
                                        fp8_recipe=attention_fp8, fp32=fp32_attn, row_tokens=seq_len,
                                        window_tokens=inv.attention_window_tokens))
    # a compiler's fused kernels read contiguously; the strided reads of kernels it cannot fuse (part of both the
    # fused and the strided bytes, inventory.PassInventory.fused_strided_bytes) keep the strided rate
    bare_strided = inv.fused_strided_bytes
    strided = inv.strided_bytes - bare_strided if memory_factor >= 1.0 else 0.0
    fused = inv.fused_bytes  # already counted as fused (inventory.PassInventory.fused_bytes): not scaled again
    # reads a chain of eager kernels finds in L2 (l2_chained_bytes); none once a compiler fuses the chain
    l2_contiguous, l2_strided = l2_chained_bytes(inv.chained_reads, rates=rates) if memory_factor >= 1.0 else (0.0, 0.0)
    mem = ((inv.memory_bytes - strided - fused - l2_contiguous) * memory_factor + fused - bare_strided
           + (strided + bare_strided - l2_strided) / STRIDED_BANDWIDTH_SHARE) / rates.hbm_bytes_per_s
    if l2_contiguous or l2_strided:
        mem += (l2_contiguous + l2_strided / STRIDED_BANDWIDTH_SHARE) / rates.l2_read_bytes_per_s
    per_kernel = rates.host_s_per_backward_kernel if backward else rates.host_s_per_forward_kernel
    kernels = (inv.kernels - inv.fused_kernels) * kernel_factor + inv.fused_kernels
    # bare aten calls outside module forwards (inventory.PassInventory.bare_kernels): the backward's rate either way
    host = (kernels - inv.bare_kernels) * per_kernel + inv.bare_kernels * rates.host_s_per_backward_kernel
    syncs = launch_blocking_syncs(kernels=kernels, host_syncs=inv.host_syncs) if launch_blocking else inv.host_syncs
    # a loop launched right after a sync on slices shorter to run than to launch (inventory.PassInventory
    # .serial_kernels): the GPU idles through it, its host seconds do not overlap the pass's other device work
    serial_host = inv.serial_kernels * rates.host_s_per_backward_kernel
    seconds = synced_seconds(host_s=host - serial_host, device_s=gemm + attn + mem,
                             kernels=max(1.0, kernels - inv.serial_kernels) if inv.serial_kernels else kernels,
                             syncs=syncs) + serial_host
    return PassTime(seconds, gemm, attn, mem, host, seconds - max(gemm + attn + mem, host))


@dataclass(frozen=True, kw_only=True, slots=True)
class Parallel:
    """How the data-parallel group shares the step (per-GPU view)."""

    strategy: str = "single"
    """single | ddp | zero1 | zero2 | zero3 | fsdp | fsdp_grad_op | hsdp"""
    ranks: int = 1
    gpus_per_node: int = 1
    nic_bytes_per_s: float = 25e9
    offload: str = "none"
    """none | optimizer | params_and_optimizer"""
    expert_ranks: int = 0
    """Ranks that reduce the routed experts' gradients and shard their optimizer state (Megatron-Core's
    expert-data-parallel group, ``collectives`` module docstring); 0: the same as ``ranks``."""
    expert_gpus_per_node: int = 1
    """How many of the expert-data-parallel group's ranks share a node."""
    overlap_param_gather: bool = False
    """ZeRO-1 as Megatron-Core's distributed optimizer with ``overlap_param_gather``: the parameter all-gather hides
    behind the next step's first forward, bucket by bucket (``dist_optimizer``)."""
    grad_reduce_after_backward: bool = False
    """DDP / ZeRO-1/2: the gradients are all-reduced once after the last backward, exposed
    (``collectives.exposed_data_parallel`` ``reduce_after_backward``: nanotron's ZeRO-1 with fp32 accumulation), whose
    optimizer step then copies the gathered parameters back slice by slice
    (``collectives.nanotron_zero1_gather_copies_seconds``)."""
    grad_accumulation_pass: bool = False
    """Every micro-batch's 16-bit gradients are added into the fp32 gradient buffer by a pass of its own
    (``fp32_grad_accumulation_seconds``: nanotron's ``FP32GradientAccumulator``)."""
    fsdp2: bool = False
    """Strategies fsdp / fsdp_grad_op / hsdp: the hooks are FSDP2's (``fully_shard``); False: FSDP1's
    (``FullyShardedDataParallel``). Picks the hooks' host seconds per unit (``fsdp_unit_host_seconds``)."""
    hsdp_shard: int = 0
    """Strategy hsdp: the ranks of one shard group (the card's ``parallel.hsdp_shard_size``); 0: ``gpus_per_node``."""
    overlap_comm: bool = True
    """False: DeepSpeed ZeRO without ``overlap_comm`` reduces the gradients on the compute stream, exposed
    (``collectives.reductions_on_compute_stream``); True: every other schedule, overlapped."""
    zero1_shard: int = 0
    """Strategy zero1: the ranks of one ZeRO-1 group (the card's ``parallel.zero1_shard_size``): optimizer states
    split over them and the updated parameters handed back inside the group; 0: every data-parallel rank."""
    zero1_broadcast_per_rank: bool = False
    """Strategy zero1: the updated parameters handed back as one broadcast per group rank (the card's
    ``parallel.zero1_param_sync: broadcast_per_rank``, ``collectives.zero1_param_sync_seconds``); False: one
    all-gather."""
    zero_all_reduce_bucket: int = 0
    """ZeRO-1/2 as DeepSpeed runs it: each reduce bucket of this many gradient elements is all-reduced in full, every
    rank keeping its own slices (``collectives.deepspeed_bucket_all_reduce``); 0: a reduce-scatter (Megatron-Core's
    distributed optimizer and every other ZeRO-1/2)."""
    ddp_bucket_bytes: float = 0.0
    """Strategy ddp as torch DDP runs it: one all-reduce per bucket of this many bytes of the parameters' gradients
    (``collectives.ddp_bucketed_all_reduce``); 0: the whole buffer in one collective (Megatron's DDP)."""
    zero3_grad_groups: tuple[tuple[int, ...], ...] = ()
    """Strategy zero3 as DeepSpeed runs it: the elements of each gradient one micro-step's backward produces, in the
    order it finishes them, grouped as the head's, each decoder layer's, the input embedding's (``plan.time.
    zero3_grad_groups``); with ``zero3_bucket_numel`` they set the reduce buckets the backward flushes
    (``zero3_reduce_buckets``: each beyond the first costs the host ``rates.ZERO3_REDUCE_BUCKET_HOST_S``) and how far
    the host may run ahead of the device (``zero3_coupled_seconds``). Empty: neither priced."""
    zero3_bucket_numel: int = 0
    """The ZeRO-3 ``reduce_bucket_size`` in elements (0: none)."""
    deepspeed_zero_stage: int = 0
    """The ZeRO stage when DeepSpeed runs it (1, 2 or 3; 0: any other optimizer sharding): its wrapped optimizer steps
    flat fp32 partitions (``optimizer_time.deepspeed_flat_partitions``), and at stages 1/2 its gradient norm loops
    over the rank's partition (``optimizer_time.deepspeed_zero12_grad_norm_kernels``)."""
    zero_sub_group_numel: float = 0.0
    """DeepSpeed ZeRO-3's ``sub_group_size``: partition elements per flat fp32 sub-group the optimizer steps."""
    fsdp_adapter_units: bool = False
    """FSDP1 with PEFT's wrap policy: each adapter linear (``lora_A``, ``lora_B``) is a unit of its own (the card's
    ``parallel.fsdp_adapter_units``): their hooks, and the rate limiter's pacing of the adapted projections
    (``collectives.rate_limited_adapter_units_seconds``)."""


@dataclass(frozen=True, slots=True)
class HsdpLinks:
    """HSDP's two groups and the link each runs over (``hsdp_links``)."""

    shard: int
    replicas: int
    shard_bus_bytes_per_s: float
    replica_bus_bytes_per_s: float
    shard_crosses_nodes: bool
    replica_crosses_nodes: bool
    replica_nodes: int
    """Nodes one replica group spans (``replicas / (gpus_per_node / shard)``), for NCCL's latency."""
    shard_nodes: int
    """Nodes the widest shard group spans (``collectives.domain_span``), for NCCL's latency."""


def intra_link_text(rates: DeviceRates) -> str:
    """The collectives note's link remark: on GPUs without peer-to-peer (GeForce cards over PCIe,
    ``rates._geforce_without_p2p``) NCCL stages every transfer through host memory, which is why their bus
    bandwidth is a fraction of the slot's; empty where peer-to-peer runs (NVLink, a bridge or PCIe)."""
    return "" if rates.p2p or rates.nvlink else ", PCIe without peer-to-peer: staged through host memory"


def data_ring_bus_bytes_per_s(parallel: Parallel, rates: DeviceRates, *, ranks: int) -> float:
    """Ring bus bandwidth of a sharded strategy's gathers over ``ranks`` consecutive data-parallel ranks: NVLink in
    a node, else the NICs of the group's GPUs in each node (``collectives.ring_bus_bytes_per_s``; HSDP's groups:
    ``hsdp_links``)."""
    return coll.ring_bus_bytes_per_s(rates=rates, crosses_nodes=ranks > parallel.gpus_per_node,
                                     nic_bytes_per_s=parallel.nic_bytes_per_s,
                                     local_ranks=min(ranks, parallel.gpus_per_node))


def replica_link_text(links: HsdpLinks, rates: DeviceRates) -> str:
    """Where an HSDP replica group's all-reduce runs, for the hsdp note: through the NICs when it spans nodes, else
    over the node's link (``rates``: NVLink; on bridged PCIe cards, ``rates.bridge_group_gpus`` set, PCIe between the
    bridge groups, as ``hsdp_links`` times it; else in the node, on its one link)."""
    if links.replica_crosses_nodes:
        return "through the NICs"
    if rates.nvlink:
        return "over NVLink"
    return "over PCIe between bridge groups" if rates.bridge_group_gpus else "in the node"


def hsdp_links(parallel: Parallel, rates: DeviceRates) -> HsdpLinks:
    """Strategy hsdp over ``parallel.ranks`` data x context ranks: a shard group of ``parallel.hsdp_shard`` ranks
    (0: ``gpus_per_node``; at most ``ranks``) and ``ranks / shard`` replicas of it.

    torch lays the data-parallel ranks out as a 2-D ``(replicate, shard)`` mesh, the shard dimension innermost
    (pytorch/pytorch @cf30153c4c131c8164ee7798e5022d810682e2cb, the torch 2.13.0 wheel: FSDP2
    ``torch/distributed/fsdp/_fully_shard/_fully_shard.py`` l. 172-177 "If 2D, then parameters are sharded across the
    1st dim and replicated across the 0th dim (HSDP)"; FSDP1 ``HYBRID_SHARD`` ``_init_utils.py`` l. 143-153 takes
    ``process_group`` = mesh dim 1 and ``_inter_node_pg`` = dim 0; ``init_device_mesh`` numbers ranks row-major), as
    verl's ``create_device_mesh`` ``(world_size // fsdp_size, fsdp_size)`` and torchtitan's
    ``[dp_replicate, dp_shard]`` mesh do. So a shard group is ``shard`` consecutive ranks (``init_device_mesh``
    l. 1578-1582: a row-major layout over ``arange(world)``; ``_init_one_process_group`` l. 499-604 builds one NCCL
    communicator per row of that dimension, ``split_group`` / ``new_group``): on NVLink when it fits in a node (a
    divisor of ``gpus_per_node``, or the job is one node), else through the NICs of its GPUs in the node that holds
    the fewest of them (``collectives.domain_ranks``), over the nodes its widest group spans
    (``collectives.domain_span``: a group of 3 on 8-GPU hosts, ranks 6, 7 | 8, spans two). A
    replica group is every ``shard``-th rank: ``gpus_per_node / shard`` of them share a node (one when the shard
    group spans nodes), so it stays on NVLink within one node and otherwise leaves through those GPUs' NICs, the
    node's ``shard`` replica groups side by side on its NICs (``collectives.ring_bus_bytes_per_s``).

    On bridged PCIe cards (``rates.bridge_group_gpus``: the node's ring crosses PCIe) a shard group inside a node that
    fits one bridge group runs on the bridge (``rates.group_rates``: consecutive ranks share a bridge, the pairing of
    NVIDIA/nccl-tests issue #178's ``nvidia-smi topo``); its replica group takes every ``shard``-th rank, one from
    each bridge group, and crosses PCIe at the node ring's rate (``replica_link_text``)."""
    ranks = max(1, parallel.ranks)
    per_node = max(1, parallel.gpus_per_node)
    shard = max(1, min(ranks, parallel.hsdp_shard or per_node))
    replicas = max(1, ranks // shard)
    shard_local = coll.domain_ranks(ranks=shard, domain_gpus=min(per_node, ranks))
    shard_crosses = shard_local < shard
    replica_local = min(replicas, max(1, per_node // shard))
    replica_crosses = replicas > replica_local
    nic = parallel.nic_bytes_per_s
    shard_rates = rates if shard_crosses else group_rates(rates, ranks=shard)
    return HsdpLinks(
        shard=shard, replicas=replicas,
        shard_bus_bytes_per_s=coll.ring_bus_bytes_per_s(rates=shard_rates, crosses_nodes=shard_crosses,
                                                        nic_bytes_per_s=nic, local_ranks=shard_local),
        replica_bus_bytes_per_s=coll.ring_bus_bytes_per_s(rates=rates, crosses_nodes=replica_crosses,
                                                          nic_bytes_per_s=nic, local_ranks=replica_local),
        shard_crosses_nodes=shard_crosses, replica_crosses_nodes=replica_crosses,
        replica_nodes=coll.group_nodes(ranks=replicas, ranks_per_node=replica_local),
        shard_nodes=coll.domain_span(ranks=shard, domain_gpus=min(per_node, ranks)))


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelParallel:
    """Tensor / context / pipeline / expert sizes of the run (the spec given to the step is already one
    rank's shard: heads, MLP width and vocabulary / tp, layers / pp)."""

    tp: int = 1
    sequence_parallel: bool = False
    cp: int = 1
    ulysses: bool = False
    pp: int = 1
    virtual_stages: int = 1
    ep: int = 1
    etp: int = 1
    """Expert tensor parallel: the ranks that split each expert's width (and share their routed tokens)."""
    full_q_dim: int = 0
    full_kv_dim: int = 0
    tp_bus_bytes_per_s: float = 1.0
    tp_nodes: int = 1
    """Nodes (NVLink domains) one tensor-parallel group spans, for NCCL's latency of its all-reduces."""
    cp_nodes: int = 1
    """Nodes one context-parallel group spans (NCCL's latency of its all-to-alls and ring sends)."""
    pp_nodes: int = 1
    """Nodes one pipeline group spans (> 1: a stage's send crosses nodes, NCCL's network p2p latency)."""
    cp_bus_bytes_per_s: float = 1.0
    ep_bus_bytes_per_s: float = 1.0
    pp_bytes_per_s: float = 1.0
    tp_comm_overlap: bool = False
    """Transformer Engine userbuffers overlap the TP collectives with the GEMMs (``model_parallel`` docstring)."""
    pp_scatter_gather: bool = False
    """Megatron-LM's scatter/gather pipeline sends (``model_parallel.model_parallel_comm``)."""
    sp_async_backward: bool = False
    """Megatron-Core / Transformer Engine layers: without userbuffers the sequence-parallel backward hides the column
    modules' input re-gather and gradient reduce-scatter behind their GEMMs (``model_parallel.te_sp_backward_pair_s``)."""
    sp_gather_bytes_per_element: float = 0.0
    """Bytes per element of the sequence-parallel all-gathers (Transformer Engine gathers the quantised tensor and its
    scales; 0: the activation dtype)."""
    frozen_weights: bool = False
    """LoRA's frozen base linears: no wgrad GEMM, no input re-gather (``model_parallel.te_sp_backward_pair_s``)."""
    moe_dispatcher: MoeDispatcher = MoeDispatcher.ALLTOALL
    """How the EP group moves routed tokens (``compute.moe_dispatch``); DEEPEP reads the three fields below."""
    fused_expert_mlp: bool = False
    """Megatron-Core's ``TEGroupedMLP`` through Transformer Engine's op fuser (``MoeExpertMlp.TE_OPS``): no eager
    activation steps nor bias loop (``inventory.step_inventory``)."""
    ep_ranks_per_node: int = 1
    """Ranks of one expert-parallel group that share a node (NVLink domain)."""
    ep_nic_bytes_per_s: float = 1.0
    """One GPU's usable NIC rate (its share of the node's network)."""
    ep_nvlink_bytes_per_s: float = 1.0
    """One GPU's usable NVLink rate inside the node."""
    ep_comm_overlap: bool = False
    """Megatron-Core ``overlap_moe_expert_parallel_comm``: a micro-batch's forward all-to-alls hide behind another's
    backward and vice versa (``model_parallel.ep_overlap_exposed``)."""
    moe_routing: MoeRouting = MoeRouting.UNIFORM
    """The router's pick of experts, for DeepEP's per-node rows (``compute.moe_dispatch``)."""
    ep_ring_bus_bytes_per_s: float = 0.0
    """Ring bus rate over the ``etp·ep`` ranks, for the all-gather dispatcher's collectives (0: ``ep_bus_bytes_per_s``)."""
    ep_load_factor: float = 1.0
    """The busiest EP rank's routed rows over the mean rank's (``moe_time.busiest_rank_load_factor``; 1: balanced
    routing or no EP): the expert GEMMs and the EP all-to-all of every rank take that rank's time."""

    @property
    def active(self) -> bool:
        return self.tp * self.cp * self.pp * self.ep > 1


@dataclass(frozen=True, kw_only=True, slots=True)
class OptimizerSpec:
    name: str = "adamw"
    impl: str = "fused"
    weight_bytes: float = 2.0
    grad_bytes: float = 2.0
    state_bytes: float = 4.0
    master: bool = False
    clip: bool = True
    in_backward: bool = False


def torch_cpu_adamw_step(*, strategy: str, offload: str, optimizer: OptimizerSpec,
                         torch_cpu_offload: bool = True) -> bool:
    """Whether an offloaded optimizer step is torch's AdamW on the single-tensor path (``offload.
    torch_cpu_adamw_seconds``): torch FSDP's CPU offload (``fsdp``, ``fsdp_grad_op``, ``hsdp`` with ``offload``
    params_and_optimizer, FSDP1 ``CPUOffload(offload_params=True)`` / FSDP2 ``CPUOffloadPolicy``: torch FSDP has no
    optimizer-only offload; DeepSpeed's offload runs its own CPU Adam) of Adam / AdamW built without ``fused=True``
    (``impl`` foreach or for_loop). ``torch_cpu_offload`` False: the framework moves the state between phases itself
    and steps on the GPU instead of wrapping the module with FSDP's offload (``plan.time.torch_fsdp_cpu_offload``:
    verl's FSDP workers)."""
    return (torch_cpu_offload and strategy in ("fsdp", "fsdp_grad_op", "hsdp") and offload == "params_and_optimizer"
            and optimizer.name in ("adamw", "adam") and optimizer.impl in ("foreach", "for_loop"))


def torch_cpu_adamw_element_bytes(optimizer: OptimizerSpec) -> float:
    """Bytes of the elements torch's host AdamW step streams (``offload.torch_cpu_adamw_seconds``): 4 where it steps
    an fp32 master copy (``master``), else the larger of the parameter's and the states' bytes, as the memory plan
    holds them."""
    return 4.0 if optimizer.master else max(optimizer.weight_bytes, optimizer.state_bytes)


@dataclass(frozen=True, slots=True)
class TrainStepTime:
    phases: tuple[PhaseTime, ...]
    total_s: float
    tokens: float
    """Tokens per optimizer step on one GPU."""
    assumptions: tuple[str, ...]

    @property
    def bound(self) -> str:
        return max(self.phases, key=lambda p: p.seconds).bound if self.phases else "compute"


def _phase(name: str, t: PassTime) -> PhaseTime:
    terms = {"gemm": t.gemm_s, "attention": t.attention_s, "memory_bound": t.memory_s, "host_launch": t.host_s}
    return PhaseTime(name, t.seconds, t.bound, terms | ({"host_sync": t.sync_s} if t.sync_s else {}))


def _fp8_weight_casts(*, fp8: bool, fp8_params: bool, fp8_weight_cache: bool, micro_steps: int) -> float:
    """Share of micro-steps that cast the fp8 weights (``inventory.step_inventory`` ``fp8_weight_casts``): none with
    fp8 primary weights (the optimizer step writes them), once per step under Transformer Engine's weight cache,
    else every micro-step."""
    if fp8 and fp8_params:
        return 0.0
    return 1.0 / max(1, micro_steps) if fp8 and fp8_weight_cache else 1.0


@lru_cache(maxsize=8192)
def train_step_time(
    spec: ModelSpec, *, rates: DeviceRates, micro_batch_size: int, seq_len: int, micro_steps: int = 1,
    adapter: Adapter | None = None, eager_attention: bool = False, gradient_checkpointing: bool = False,
    parallel: Parallel = Parallel(), optimizer: OptimizerSpec = OptimizerSpec(), trained_params: float,
    trained_tensors: float, gathered_weight_bytes: float, count_scale: float = 1.0, memory_factor: float = 1.0,
    kernel_factor: float = 1.0, model_parallel: ModelParallel = ModelParallel(), attention_context: float | None = None,
    selective: str = "none", fp8: bool = False, fp8_weight_cache: bool = False, work_cv: float = 0.0,
    expert_params: float = 0.0, causal_skip: bool = True, window_mask: bool = False, mask_layers: int = 0,
    sdpa_copy_bytes_per_token: float = 0.0, sdpa_copy_kernels: int = 0,
    window_mask_dtype_bytes: float = 2.0, fused_cross_entropy: bool = False,
    compiled_cross_entropy: bool = False, fp8_params: bool = False, fp8_param_transpose: bool = True,
    fp8_param_transpose_every_micro: bool = False,
    recompute_layer_share: float = 1.0, packed_flash_syncs: bool = False, expert_loop: bool = False,
    expert_loop_every: bool = False, expert_loop_stacked: bool = False, expert_hit_share: float | None = None,
    zero3_expert_leaf: bool = True, fsdp2_copies: bool = False, fp8_casts: CastTraffic | None = None,
    fp8_layer_share: float = 1.0, fp8_gather: Fp8GatherShard | None = None,
    megatron_experts: bool = False, expert_streams: bool = False, expert_padding: bool = False,
    recompute_modules: tuple[str, ...] = (),
    moe_eager_launch: bool = False, moe_load_balancing: MoeLoadBalancing | None = None,
    unpad_call_syncs: bool = False, attention_kernel: str = "auto", attention_fp8: str = "",
    vocab_chunk_columns: int = 0, nemo_rl_loss: str = "", loss_sequences: float = 1.0,
    head: bool = True, scan_syncs: float = 0.0, attention_call_syncs: float = 0.0, rope_loop_samples: float = 0.0, rope_loop_context_parallel: int = 1,
    rope_loop_form: ThdRopeLoop = ThdRopeLoop.COPY,
    loss_input_copy: bool = False, loss_input_slice_backward: bool = False,
    a2a_thd_sequences: float = 0.0, te_ring_context_parallel: int = 1, te_layers: bool = False,
    launch_blocking: bool = False,
    recompute_whole_layer: bool = False, activation_offload_layers: int = 0,
    activation_offload_bytes_per_layer: float = 0.0, activation_offload_copy_bytes_per_s: float = 0.0,
    checkpoint_copy_s_per_micro_batch: float = 0.0, op_recomputes_attention: bool = False, fsdp2_offload_copy_bytes_per_s: tuple[float, float] | None = None,
    fsdp2_fp32_outputs: bool = False, fsdp2_pipeline_held: bool = False,
    fsdp2_pipeline_reshard_after_forward: bool = True, host_one_thread: bool = False, torch_cpu_offload: bool = True,
    forward_shares: bool = False, head_positions: int | None = None, model_dtype_bytes: float | None = None,
) -> TrainStepTime:
    """Seconds of one optimizer step on one GPU (all GPUs of a data-parallel group run in lockstep).

    ``model_dtype_bytes``: as ``inventory.step_inventory`` (4: a model trained in fp32 without autocast,
    ``precision.compute`` fp32: its forward and backward GEMMs at the card's fp32 rate, ``gemm._model_compute_s``).

    ``forward_shares``: the communication phases also carry what a forward-only pass over the same micro-steps pays
    (each model-parallel kind's ``forward``, the FSDP units' ``forward_gathers``, the pipeline bubble's
    ``forward_micro_step``): DPO's reference forward (``plan.time.reference_forward_of``).

    ``trained_params`` / ``trained_tensors``: the whole model's trained parameters and tensors;
    ``gathered_weight_bytes``: all weights in the dtype FSDP/ZeRO-3 gathers them in;
    ``count_scale``: a user's bare parameter count over the reference shape's (scales the work);
    ``selective``: ``op`` | ``core_attention`` recompute only what that selective checkpointing drops
    (``inventory.StepInventory.recompute``); ``recompute_layer_share``: the share of the decoder layers that run
    under checkpoint (torchtitan's every n-th layer: floor(L / n) / L, ``RunCard.parallel.checkpointed_layers``);
    only their forward is recomputed; ``fp8``: the decoder linears' GEMMs at the fp8 rate, plus their casts;
    ``fp8_weight_cache``: the fp8 weights are cast once per step, not per micro-step (Transformer Engine's
    ``is_first_microbatch`` cache, ``inventory.step_inventory``); ``fp8_params``: fp8 primary weights (``memory.fp8``):
    no weight casts (the optimizer step writes the fp8 weights: ``optimizer.weight_bytes`` is then their mean bytes,
    which the data-parallel all-gather moves too), their transpose once per step where ``fp8_param_transpose``
    (TE ``post_all_gather_processing`` on GPUs without non-TN fp8 GEMMs), every micro-step where
    ``fp8_param_transpose_every_micro`` (Megatron-FSDP: after each backward all-gather, ``memory.fp8``);
    ``host_one_thread``: each rank's host-side torch ops (``offload.torch_cpu_adamw_seconds``,
    ``offload.fsdp2_host_add_bytes_per_s``) run on one thread, as the launcher sets ``OMP_NUM_THREADS``
    (``plan.time.host_one_thread_per_rank``); ``torch_cpu_offload``: an FSDP ``params_and_optimizer`` offload is
    torch FSDP's own, whose optimizer steps on the host (``torch_cpu_adamw_step``; False for verl's FSDP workers);
    ``work_cv``: relative spread of one micro-batch's tokens across the data-parallel ranks (variable-length RL
    sequences, ``collectives.micro_batch_token_cv``; 0 for fixed-length training data). The ranks run in lockstep,
    so the slowest rank's device time, with its extra tokens and the per-GPU speed spread
    (``collectives.lockstep_excess``), sets the pace; where it stays under the host's launch time (a launch-bound
    step) it adds nothing;
    ``expert_params``: the routed-expert parameters among ``trained_params``, reduced and optimizer-sharded over
    ``parallel.expert_ranks`` (``collectives.exposed_data_parallel`` / ``exposed_sharded``,
    ``optimizer_time.shard_params``; HSDP keeps them with the dense parameters);
    ``attention_context`` / ``causal_skip`` / ``window_mask`` / ``mask_layers`` / ``window_mask_dtype_bytes`` /
    ``sdpa_copy_*``: as
    ``inventory.step_inventory`` (context parallel; packed rows with
    per-sample attention, ``attention_time`` module docstring); ``fused_cross_entropy``: as ``inventory.step_inventory``
    (flash-attn's loss kernel); ``compiled_cross_entropy``: as ``inventory.step_inventory`` (the eager loss under
    torch.compile, ``loss.compiled``); ``packed_flash_syncs``: as ``inventory.step_inventory`` (packed rows in
    transformers' flash attention synchronise the host in every attention call: ``synced_seconds``); ``expert_loop``:
    the routed
    experts as transformers < 5's Python loop (``inventory.step_inventory``; ``expert_loop_every``: 4.51-4.52's loop
    over every expert, as there; ``expert_loop_stacked``: transformers v5's eager experts, as there;
    ``expert_hit_share``: the share of experts the loop runs, as there); under ZeRO-3
    without
    ``zero3_expert_leaf`` each expert linear is then gathered on its own (``expert_loop.zero3_expert_gathers``);
    ``fp8_casts``: who casts the fp8 linears' operands (``float8_casts.cast_traffic``; None: Transformer Engine);
    ``fp8_layer_share``: the share of the decoder layers run quantised (``inventory.step_inventory``);
    ``fp8_gather``: the rank's float8 weight shards under torchao's float8 all-gather (``float8_all_gather``): their
    casts before each all-gather (copy-in stream, host launches) and the scales' precompute after the optimizer step;
    ``megatron_experts``: the routed experts are Megatron-Core's ``TEGroupedMLP`` (``inventory.step_inventory``:
    gpt-oss's eager clamp and per-expert bias loop, ``moe_time.megatron_expert_elementwise``); ``expert_streams``:
    outside Megatron-Core the routed GEMMs loop one cuBLAS GEMM per local expert (``MoeExperts.GROUPED_STREAMS``);
    ``expert_padding``: behind torchtitan's padded wrapper (``MoeExperts.GROUPED_PADDED``,
    ``inventory.step_inventory``);
    ``recompute_modules``: Megatron-Core's ``--recompute-modules`` beyond core_attn (core_attn among them when
    listed): the recompute pass is what they re-run (``inventory.StepInventory.recompute_modules``), the recomputed
    forward repeats the collectives of none of them but ``moe``'s expert-parallel dispatch and combine (its
    ``tensor_parallel.checkpoint`` re-runs the whole MoE layer, NVIDIA/Megatron-LM moe/moe_layer.py l.286-323
    @92c8482e6dcd11c3666c61bb8d1f7e8d0730ed13); core_attn's context-parallel exchange as ``selective``'s;
    ``unpad_call_syncs``: as ``inventory.step_inventory`` (llm-foundry before v0.5.0 unpads in every attention call);
    ``attention_kernel``: the fused attention kernel's rates (``attention_time`` module docstring; auto: the
    architecture's default); ``attention_fp8``: fp8 attention's recipe (``pass_seconds``); ``vocab_chunk_columns``:
    as ``inventory.step_inventory`` (prime-rl's chunked log-prob
    head, ``prime_rl_head``); ``nemo_rl_loss`` / ``loss_sequences``: as ``inventory.step_inventory`` (NeMo RL's
    per-sequence GRPO loss, ``nemo_rl_pg_loss``); ``head``: False when the timed pipeline rank holds no output head
    (``plan.time.timed_rank_holds_head``): its final norm, head and loss are not timed; ``scan_syncs``: host-synchronising
    reads of single device elements the loop makes per micro-batch (``token_scan_seconds``), a ``loop_scan`` phase;
    ``attention_call_syncs``: as ``inventory.step_inventory`` (host syncs in every attention layer's forward);
    ``rope_loop_samples`` / ``rope_loop_context_parallel`` / ``rope_loop_form``: as ``inventory.step_inventory`` (Megatron-Core's
    per-sample thd RoPE loop); ``te_ring_context_parallel``: as ``inventory.step_inventory`` (Transformer Engine's
    ring context-parallel glue, ``compute.cp_ring``); ``a2a_thd_sequences``: as ``inventory.step_inventory``
    (Transformer Engine's a2a thd chunk reorders); ``te_layers``: the decoder layers are Megatron-Core's Transformer
    Engine modules, whose linears' Python forward and backward add host seconds per call beyond the per-kernel
    rates times ``kernel_factor``
    (``te_host.te_forward_host_seconds`` / ``te_backward_host_seconds``; a full recompute's forward too);
    ``op_recomputes_attention``: with ``selective`` ``op``, the attention forward re-runs too
    (``inventory.StepInventory.recompute``, ``RunCard.parallel.sac_saves_attention``);
    ``recompute_whole_layer``: full recompute by a re-entrant checkpoint (Megatron's, DeepSpeed's, torch's with
    ``use_reentrant=True``), which re-runs the layer's last linear and residual add too
    (``inventory.StepInventory.layers_recompute_whole``); otherwise torch's non-re-entrant checkpoint, which stops at
    the last saved tensor. The card chooses (``plan.checkpointing.checkpoint_reentrant``: ``loop.checkpoint_reentrant``,
    else the default of the card's framework and software pins).
    ``fsdp2_offload_copy_bytes_per_s``: (pageable, fresh-page) copy rates of a sharded FSDP2 trainer under
    ``CPUOffloadPolicy`` (``plan.time.fsdp2_offload_copy_rates``, which returns None for every other layout): set, and
    with more than one micro-batch, the host-side gradient accumulation is priced
    (``offload.fsdp2_offload_accumulation_seconds``).
    ``fsdp2_fp32_outputs``: as ``inventory.step_inventory`` (FSDP2 modules with ``output_dtype=float32``, NeMo RL's
    DTensor policy: ``compute.fsdp2_output_cast``).
    ``fsdp2_pipeline_held``: a pipeline stage under FSDP2 (``plan.fsdp_no_sync.pipeline_fsdp2_holds_unsharded``):
    its reduce-scatters and their copy-in run once, after its last backward, and its unsharded gradients accumulate
    on the GPU (``collectives.exposed_sharded`` and ``fsdp2_copy_seconds`` ``held_to_last_backward``); no FSDP2
    CPU-offload accumulation on the host. ``fsdp2_pipeline_reshard_after_forward``: whether it still gathers every
    micro-batch (FSDP2's default) or once a step (torchtitan under pipeline parallel).
    """
    mp = model_parallel
    gradient_checkpointing = gradient_checkpointing or selective != "none" or bool(recompute_modules)
    inv = step_inventory(spec, micro_batch_size=micro_batch_size, seq_len=seq_len, adapter=adapter,
                         head_positions=head_positions, model_dtype_bytes=model_dtype_bytes,
                         eager_attention=eager_attention, attention_context=attention_context, causal_skip=causal_skip,
                         window_mask=window_mask, window_mask_dtype_bytes=window_mask_dtype_bytes,
                         mask_layers=mask_layers,
                         sdpa_copy_bytes_per_token=sdpa_copy_bytes_per_token, sdpa_copy_kernels=sdpa_copy_kernels,
                         sequence_shards=mp.tp if mp.sequence_parallel else 1, fp8=fp8,
                         fp8_weight_casts=_fp8_weight_casts(fp8=fp8, fp8_params=fp8_params,
                                                            fp8_weight_cache=fp8_weight_cache, micro_steps=micro_steps),
                         fp8_weight_transposes=(
                             (1.0 if fp8_param_transpose_every_micro else 1.0 / max(1, micro_steps))
                             if fp8_param_transpose else 0.0) if fp8 and fp8_params else None,
                         expert_parallel=mp.ep, expert_token_shards=expert_token_shards(
                             tp=mp.tp, etp=mp.etp, ep=mp.ep, sequence_parallel=mp.sequence_parallel),
                         expert_load_factor=mp.ep_load_factor, moe_dispatcher=mp.moe_dispatcher,
                         fused_expert_mlp=mp.fused_expert_mlp,
                         fused_cross_entropy=fused_cross_entropy,
                         compiled_cross_entropy=compiled_cross_entropy, packed_flash_syncs=packed_flash_syncs,
                         loss_input_copy=loss_input_copy, loss_input_slice_backward=loss_input_slice_backward,
                         expert_loop=expert_loop, expert_loop_stacked=expert_loop_stacked,
                         expert_loop_every=expert_loop_every, expert_hit_share=expert_hit_share,
                         fp8_casts=fp8_casts, megatron_experts=megatron_experts,
                         moe_eager_launch=moe_eager_launch, moe_load_balancing=moe_load_balancing,
                         fp8_layer_share=fp8_layer_share,
                         expert_streams=expert_streams, expert_padding=expert_padding,
                         unpad_call_syncs=unpad_call_syncs, attention_call_syncs=attention_call_syncs,
                         expert_bias_probs_grad=mp.moe_routing is not MoeRouting.CONSECUTIVE,
                         vocab_chunk_columns=vocab_chunk_columns, nemo_rl_loss=nemo_rl_loss, loss_sequences=loss_sequences,
                         rope_loop_samples=rope_loop_samples, rope_loop_context_parallel=rope_loop_context_parallel,
                         rope_loop_form=rope_loop_form,
                         # Megatron-Core's unfused RoPE under a YaRN concentration (inventory.megatron_rope_work)
                         megatron_rope=te_layers and spec.rotary_concentration != 1.0,
                         a2a_thd_sequences=a2a_thd_sequences, te_ring_context_parallel=te_ring_context_parallel,
                         attention_fp8=attention_fp8, hbm_bytes_per_s=rates.hbm_bytes_per_s,
                         fsdp2_fp32_outputs=fsdp2_fp32_outputs)
    kw = dict(rates=rates, seq_len=attention_context or seq_len, memory_factor=memory_factor, kernel_factor=kernel_factor,
              attention_kernel=attention_kernel, launch_blocking=launch_blocking, attention_fp8=attention_fp8,
              fp8_precise_forward=bool(fp8 and fp8_casts is not None and fp8_casts.forward_split_accumulator))
    head_fwd = pass_seconds(inv.head_forward, backward=False, **kw) if head else ZERO_PASS
    head_bwd = pass_seconds(inv.head_backward, backward=True, **kw) if head else ZERO_PASS
    # the decoder layers' passes: the host hooks below are theirs; the head joins each pass after them (sequenced)
    # a re-entrant checkpoint's first forward records no autograd graph (checkpointed_forward_host_s_per_kernel);
    # Transformer Engine's linears and fused attention launch their kernels inside TE's own autograd Functions, grad
    # mode off either way: the discount measured on transformers' eager layers goes to the layers' other kernels only
    reentrant_share = (recompute_layer_share * outside_te_kernel_share(
        inv.layers_forward, calls=te_linear_calls(spec), quantized=fp8, casts=fp8_casts, te_layers=te_layers,
        layers=spec.num_layers)
        if gradient_checkpointing and recompute_whole_layer and selective == "none" and not recompute_modules
        else 0.0)
    fwd_kw = kw if reentrant_share <= 0.0 else {**kw, "rates": replace(rates, host_s_per_forward_kernel=(
        checkpointed_forward_host_s_per_kernel(rates=rates, reentrant_share=reentrant_share)))}
    fwd = pass_seconds(inv.layers_forward, backward=False, **fwd_kw).scaled(count_scale)
    rec_inv = (inv.recompute_modules(recompute_modules) if recompute_modules
               else inv.recompute(selective, whole_layer=recompute_whole_layer,
                                  op_recomputes_attention=op_recomputes_attention))
    rec = (pass_seconds(rec_inv, backward=False, **kw).scaled(count_scale * recompute_layer_share)
           if gradient_checkpointing else ZERO_PASS)
    bwd = pass_seconds(inv.layers_backward, backward=True, **kw).scaled(count_scale)
    # host work outside the kernels (Python hooks, TE calls): paced by the larger of host and device, or added in
    # full when each kernel launch waits for its kernel (launch_blocking)
    def hosted(t: PassTime, *, hooks_s: float) -> PassTime:
        return _with_host_seconds(t, hooks_s=hooks_s, serial=launch_blocking)

    if te_layers:
        # Transformer Engine's linears run their forward and backward in Python (autograd Functions): per call, what
        # the published CPU time exceeds the per-kernel rate pass_seconds charged for its kernels by (the rate times
        # kernel_factor); the grouped linears loop over their GEMMs in Python both ways (compute.te_host)
        calls = te_linear_calls(spec)
        te_fwd_s = te_forward_host_seconds(calls=calls, quantized=fp8, gpu_id=rates.gpu_id, casts=fp8_casts,
                                           host_s_per_forward_kernel=rates.host_s_per_forward_kernel * kernel_factor)
        # the attention-backend selection TE re-runs per layer when consecutive layers' windows differ
        te_fwd_s += te_attention_select_host_seconds(spec, gpu_id=rates.gpu_id)
        fwd = hosted(fwd, hooks_s=te_fwd_s)
        bwd = hosted(bwd, hooks_s=te_backward_host_seconds(
            calls=calls, quantized=fp8, gpu_id=rates.gpu_id, casts=fp8_casts,
            host_s_per_backward_kernel=rates.host_s_per_backward_kernel * kernel_factor))
        if gradient_checkpointing and selective == "none" and not recompute_modules:
            # full recompute re-runs every checkpointed layer's forward, its TE calls with it
            rec = hosted(rec, hooks_s=te_fwd_s * recompute_layer_share)
    # PEFT's ParamWrapper registers and removes a parametrization around every forward of each wrapped expert stack
    # and router weight (inventory.peft_param_wrapper_calls), the recompute's forward included
    wrapper_s = peft_param_wrapper_calls(spec, adapter=adapter, megatron_experts=megatron_experts,
                                         expert_streams=expert_streams, expert_loop=expert_loop,
                                         expert_loop_stacked=expert_loop_stacked) * PEFT_PARAM_WRAPPER_HOST_S
    if wrapper_s > 0.0:
        fwd = hosted(fwd, hooks_s=wrapper_s * count_scale)
        if gradient_checkpointing:
            rec = hosted(rec, hooks_s=wrapper_s * count_scale * recompute_layer_share)
    if parallel.strategy in ("fsdp", "fsdp_grad_op", "hsdp"):
        # torch FSDP's per-unit pre/post-forward hooks (unshard, stream waits, reshard) run in Python in every
        # forward, the recompute's included, recording autograd: fsdp_unit_host_seconds per unit (the layers and the
        # root), FSDP1's or FSDP2's (parallel.fsdp2).
        # A one-rank mesh too (a card that states fsdp on one GPU: a trainer that wraps with fully_shard whatever
        # the world size): FSDP2's unshard still runs its hook path there, only the collective is skipped
        # (pytorch/pytorch @cf30153c4c131c8164ee7798e5022d810682e2cb, the torch 2.13.0 wheel,
        # torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py ``unshard`` l.392-401 and
        # ``wait_for_unshard`` l.417-470: the shard copied parameter by parameter into the unsharded tensors)
        unit_fwd_s, unit_bwd_s = fsdp_unit_host_seconds(fsdp2=parallel.fsdp2, grad=True)
        # PEFT's wrap policy makes each adapter linear a unit too (Parallel.fsdp_adapter_units): two per adapted call,
        # at the adapter unit's measured hook rates; the first forward under a re-entrant checkpoint records no
        # autograd graph (reentrant_share of it at the no-grad rate)
        adapted = (tuple(g.name[:-2] for g in inv.layers_forward.gemms if g.name.endswith(".A"))
                   if parallel.fsdp_adapter_units and adapter is not None and not parallel.fsdp2 else ())
        adapter_units = 2 * sum(g.count for g in inv.layers_forward.gemms if g.name in adapted)
        a_fwd_s = (reentrant_share * FSDP_ADAPTER_UNIT_FORWARD_HOST_S
                   + (1.0 - reentrant_share) * FSDP_ADAPTER_UNIT_GRAD_FORWARD_HOST_S)
        hooks_s = fsdp_units(spec) * unit_fwd_s
        fwd = hosted(fwd, hooks_s=hooks_s + adapter_units * a_fwd_s)
        if gradient_checkpointing:
            rec = hosted(rec, hooks_s=(hooks_s + adapter_units * FSDP_ADAPTER_UNIT_GRAD_FORWARD_HOST_S)
                         * recompute_layer_share)
        # ... and its pre- and post-backward hooks (unshard and prefetch, the gradient's cast, reduce-scatter and
        # accumulation) in every backward, from the autograd engine's thread
        bwd = hosted(bwd, hooks_s=fsdp_units(spec) * unit_bwd_s + adapter_units * FSDP_ADAPTER_UNIT_BACKWARD_HOST_S)
        if adapted and parallel.ranks > 1 and parallel.strategy in ("fsdp", "hsdp"):
            # FULL_SHARD frees each unit after its forward, recompute and backward; the rate limiter then paces the
            # adapted projections by their units' hooks and their own kernels' launches
            # (collectives.rate_limited_adapter_units_seconds; one rank runs NO_SHARD, nothing freed or waited on)
            pkw = dict(adapted=adapted, dropout=adapter.dropout > 0, scale=count_scale, memory_factor=memory_factor,
                       kernel_factor=kernel_factor)
            fwd = rate_limited(fwd, exposed_s=coll.rate_limited_adapter_units_seconds(projections=adapted_projections(
                inv.layers_forward, rates=rates, backward=False, hooks_s=2 * a_fwd_s,
                host_s_per_kernel=fwd_kw["rates"].host_s_per_forward_kernel, **pkw)))
            if gradient_checkpointing:  # only the checkpointed layers' calls
                rec = rate_limited(rec, exposed_s=coll.rate_limited_adapter_units_seconds(projections=tuple(
                    (calls * recompute_layer_share, d, h) for calls, d, h in adapted_projections(
                        rec_inv, rates=rates, backward=False, hooks_s=2 * FSDP_ADAPTER_UNIT_GRAD_FORWARD_HOST_S,
                        host_s_per_kernel=rates.host_s_per_forward_kernel, **pkw))))
            bwd = rate_limited(bwd, exposed_s=coll.rate_limited_adapter_units_seconds(projections=adapted_projections(
                inv.layers_backward, rates=fp8_precise_rates(rates), backward=True,
                hooks_s=2 * FSDP_ADAPTER_UNIT_BACKWARD_HOST_S, host_s_per_kernel=rates.host_s_per_backward_kernel,
                **pkw)))
        if fp8_gather is not None and parallel.ranks > 1:
            # torchao's float8 all-gather: each gather's shard casts are eager aten calls the hook makes on the host
            # thread (their kernels run on the copy-in stream: layer_gather_prep_s below); the backward re-gathers
            # the units resharded after forward
            cast_host_s = shard_cast_host_seconds(fp8_gather, host_s_per_kernel=rates.host_s_per_backward_kernel)
            fwd = hosted(fwd, hooks_s=cast_host_s)
            if parallel.strategy != "fsdp_grad_op":
                bwd = hosted(bwd, hooks_s=cast_host_s)
    if parallel.strategy == "zero3":
        # DeepSpeed ZeRO-3 hooks every submodule (fetch / release / prefetch bookkeeping): rates.ZERO3_MODULE_*_HOST_S,
        # on one rank too (zero3_hooks_on_one_rank)
        modules = zero3_hooked_modules(spec, expert_loop=expert_loop,
                                       leaf=zero3_expert_leaf)
        # ... PEFT's LoRA wrappers and their lora_dropout / lora_A / lora_B included (peft_lora_called_modules)
        adapted_gemms = {g.name for g in inv.layers_forward.gemms} if adapter is not None else set()
        modules += peft_lora_called_modules(
            adapted_calls=sum(g.count for g in inv.layers_forward.gemms if g.name + ".A" in adapted_gemms),
            per_call=(DSCHAT_LORA_CALLED_MODULES if adapter is not None and adapter.single_module_lora
                      else PEFT_LORA_CALLED_MODULES))
        fwd = hosted(fwd, hooks_s=modules * ZERO3_MODULE_FORWARD_HOST_S)
        # ... and flushes its gradient reduce buckets from the backward's hooks: ZERO3_REDUCE_BUCKET_HOST_S each, on
        # more than one rank only (the rate was taken from multi-rank runs; the one-rank measurement,
        # ZERO3_HOOKS_ON_ONE_RANK, timed the per-module hooks, not the bucket flush)
        buckets = (zero3_reduce_buckets(grad_numels=tuple(n for g in parallel.zero3_grad_groups for n in g),
                                        bucket_numel=parallel.zero3_bucket_numel)
                   if parallel.zero3_grad_groups and parallel.zero3_bucket_numel > 0 and parallel.ranks > 1 else 0)
        buckets_s = max(0, buckets - 1) * ZERO3_REDUCE_BUCKET_HOST_S
        bwd = hosted(bwd, hooks_s=modules * ZERO3_MODULE_BACKWARD_HOST_S + buckets_s)
        if gradient_checkpointing:  # the recomputed layers' modules run their forward hooks again
            rec = hosted(rec, hooks_s=(modules - HF_ROOT_MODULES) * ZERO3_MODULE_FORWARD_HOST_S
                                     * recompute_layer_share)
    # autograd runs the head's backward before the layers' (the reverse of the forward, which ends with the head);
    # under launch_blocking the passes carry their synchronisations and sequenced adds them as they are
    fwd = sequenced(fwd, head_fwd.scaled(count_scale))
    bwd = sequenced(head_bwd.scaled(count_scale), bwd)
    if gradient_checkpointing and not launch_blocking:  # launch_blocking: nothing overlaps, each pass is serial
        rec, bwd = interleaved(rec, bwd)
    if parallel.grad_accumulation_pass and adapter is None:
        # the 16-bit gradients added into the fp32 buffer after every backward (fp32_grad_accumulation_seconds), over
        # the tensors nanotron's model holds (nanotron_fused_tensors), one Python call each
        bwd = bwd + fp32_grad_accumulation_seconds(
            params=trained_params, tensors=trained_tensors - nanotron_fused_tensors(spec),
            grad_bytes=optimizer.weight_bytes, accumulator_bytes=optimizer.grad_bytes,
            hbm_bytes_per_s=rates.hbm_bytes_per_s, device_s_per_kernel=rates.device_s_per_kernel_min,
            host_s_per_tensor=rates.host_s_per_backward_kernel)
    if (parallel.strategy == "zero3" and parallel.ranks > 1 and parallel.zero3_grad_groups
            and parallel.zero3_bucket_numel):
        # the backward's host waits on the reduce of the bucket three flushes back (zero3_coupled_seconds)
        coupled = zero3_coupled_seconds(
            grad_groups=parallel.zero3_grad_groups, bucket_numel=parallel.zero3_bucket_numel,
            backward_host_s=bwd.host_s, backward_device_s=bwd.gemm_s + bwd.attention_s + bwd.memory_s,
            recompute_host_s=rec.host_s, recompute_device_s=rec.gemm_s + rec.attention_s + rec.memory_s,
        ) + rec.sync_s + bwd.sync_s
        pair = rec.seconds + bwd.seconds
        if coupled > pair > 0:
            f = coupled / pair
            rec = PassTime(rec.seconds * f, rec.gemm_s, rec.attention_s, rec.memory_s, rec.host_s, rec.sync_s)
            bwd = PassTime(bwd.seconds * f, bwd.gemm_s, bwd.attention_s, bwd.memory_s, bwd.host_s, bwd.sync_s)
    notes = [f"rates: {', '.join(rates.sources)}" if rates.sources else "rates: defaults"]

    # optimizer, on this GPU's shard
    st = parallel.strategy
    ranks = max(1, parallel.ranks)
    shard = ranks if st in ("zero1", "zero2", "zero3", "fsdp", "fsdp_grad_op", "hsdp") else 1
    if st == "zero1" and 0 < parallel.zero1_shard < ranks:
        shard = parallel.zero1_shard  # InternEvo's zero1 groups: the optimizer steps 1/zero1 of the parameters
    hsdp = hsdp_links(parallel, rates) if st == "hsdp" else None
    if hsdp is not None:
        shard = hsdp.shard
    eranks = max(1, parallel.expert_ranks or ranks)
    eshard = eranks if st in ("zero1", "zero2", "zero3", "fsdp", "fsdp_grad_op") else shard
    opt_params = shard_params(params=trained_params, expert_params=expert_params, shards=shard, expert_shards=eshard)
    # DeepSpeed's ZeRO steps its flat fp32 partitions, not the model's tensors (deepspeed_flat_partitions)
    ds_stage = parallel.deepspeed_zero_stage if st in ("zero1", "zero2", "zero3") else 0
    opt_tensors = (deepspeed_flat_partitions(params=opt_params, stage=ds_stage,
                                             sub_group_numel=parallel.zero_sub_group_numel)
                   if ds_stage else trained_tensors)
    opt = optimizer_seconds(params=opt_params, tensors=opt_tensors, optimizer=optimizer.name,
                            impl=optimizer.impl, rates=rates, weight_bytes=optimizer.weight_bytes,
                            grad_bytes=optimizer.grad_bytes, state_bytes=optimizer.state_bytes,
                            master=optimizer.master, clip=optimizer.clip,
                            dtensor_params=parallel.fsdp2 and st in ("fsdp", "fsdp_grad_op", "hsdp"),
                            clip_norm=not ((st == "zero3" and parallel.zero3_grad_groups) or ds_stage in (1, 2)))
    if st == "zero3" and parallel.zero3_grad_groups:
        # DeepSpeed ZeRO-3's step takes the gradient norm one partition at a time (zero3_grad_norm_kernels); its clip
        # is then the scale alone (optimizer_time.CLIP_SCALE_KERNELS), the norm's bytes counted once in the clip's
        opt = with_zero3_grad_norm(opt, rates=rates, kernels=zero3_grad_norm_kernels(
            tensors=sum(len(g) for g in parallel.zero3_grad_groups)))
    elif ds_stage in (1, 2) and optimizer.clip:
        # ZeRO-1/2 loops over the gradients of the rank's partition for the norm (the tensors cut by its boundaries
        # in it too: one more per group), the same bare-loop pricing as ZeRO-3's
        opt = with_zero3_grad_norm(opt, rates=rates, kernels=deepspeed_zero12_grad_norm_kernels(
            tensors=trained_tensors / max(1, shard) + HF_PARAM_GROUPS))
    opt_s = 0.0 if parallel.offload != "none" else opt.seconds
    opt_phase = PhaseTime("optimizer_step", opt_s, "launch" if opt.host_s > opt.device_s else "memory",
                          {"bytes_moved": opt.bytes_moved, "kernels": opt.kernels})

    # One GPU timeline per micro-step (gpu_timeline_exposed_s): on one side the passes' host-paced time (the TP
    # collectives' exposure per pass included, and under Megatron-Core's EP overlap the all-to-alls that outlast the
    # other direction's paced pass); on the other the GPU's work: its device time, the TP collectives on the compute
    # stream, the overlapped all-to-alls that outlast the other direction's device time, the slowest GPU's extra
    # device time. The micro-step is the longer side: one stretch of idle GPU time absorbs one thing, so more host
    # time never shortens it. Serial terms (non-overlapped EP, whose dispatcher syncs the host; context parallel;
    # the pipeline sends) add to both sides.
    paced = fwd.seconds + rec.seconds + bwd.seconds - sum(p.sync_s for p in (fwd, rec, bwd))
    device = sum(p.gemm_s + p.attention_s + p.memory_s for p in (fwd, rec, bwd))
    world = max(1, parallel.ranks) * mp.tp * mp.pp
    excess = coll.slowest_rank_excess(ranks=world)
    both = (coll.lockstep_excess(ranks=world, data_ranks=parallel.ranks, work_cv=work_cv)
            if excess and work_cv > 0 and parallel.ranks > 1 else excess)
    mpc = ModelParallelComm()
    tp_raw = tp_fwd_raw = host_ep = device_ep = 0.0
    ep_overlapped = False
    if mp.active:
        def mp_comm(f: PassTime, b: PassTime, blocking: bool) -> ModelParallelComm:
            return model_parallel_comm_of(spec, mp, tokens=micro_batch_size * seq_len, fwd=f, bwd=b,
                                          recompute=gradient_checkpointing and (not recompute_modules
                                                                                or "core_attn" in recompute_modules),
                                          rates=rates, micro_steps=micro_steps,
                                          recompute_collectives=selective != "core_attention" and not recompute_modules,
                                          expert_recompute="moe" in recompute_modules, launch_blocking=blocking)

        mpc = mp_comm(fwd, bwd, launch_blocking)
        tp_raw, tp_fwd_raw = mpc.tensor_s, mpc.tensor_forward_s
        if mpc.tensor_s and not launch_blocking:
            # the TP collectives run on the GPU's timeline: a launch-bound pass's GPU slack absorbs them
            # (model_parallel.host_slack_exposed_s), the forward's in the forward, the recomputed forward's (run
            # layer by layer inside the backward) and the backward's in the backward; CUDA_LAUNCH_BLOCKING leaves no
            # slack
            tp_fwd = tensor_parallel_slack_exposed_s(comm_s=mpc.tensor_forward_s, passes=(fwd,))
            mpc = replace(mpc, tensor_s=tp_fwd + tensor_parallel_slack_exposed_s(
                comm_s=mpc.tensor_s - mpc.tensor_forward_s, passes=(rec, bwd)), tensor_forward_s=tp_fwd)
        ep_overlapped = bool(mpc.expert_s) and mp.ep_comm_overlap and not launch_blocking
        if ep_overlapped:
            # Megatron-Core's combined 1F1B hides each direction's all-to-alls behind the other direction's pass:
            # as long as that pass lasts with its exposed TP collectives on the host-paced side, with its device
            # work and TP collectives on the GPU's (model_parallel.ep_overlap_exposed)
            tp_back_raw = tp_raw - tp_fwd_raw
            host_ep = mpc.expert_s if not mpc.tensor_s else mp_comm(
                replace(fwd, seconds=fwd.seconds + mpc.tensor_forward_s),
                replace(bwd, seconds=bwd.seconds + mpc.tensor_s - mpc.tensor_forward_s), False).expert_s
            device_ep = mp_comm(replace(fwd, seconds=fwd.gemm_s + fwd.attention_s + fwd.memory_s + tp_fwd_raw),
                             replace(bwd, seconds=bwd.gemm_s + bwd.attention_s + bwd.memory_s + tp_back_raw),
                             False).expert_s
    (ep_gpu, speed, uneven), ep_host = gpu_timeline_exposed_s(
        paced_s=paced + mpc.tensor_s, device_s=device + tp_raw,
        terms_s=(device_ep, device * excess, device * (both - excess)), host_extra_s=host_ep)
    # That pooled budget holds for the micro-steps whose next forward the host queues while the GPU still runs the
    # backward; the last one ends on its own passes' timeline: the backward's share of the slowest GPU's extra device
    # time is not spent in the forward's idle GPU time (lockstep_flow_shop, a flow shop over the passes in order: the
    # forward, the recompute with the backward, the overlapped all-to-alls' remainder). What that tail adds beyond the
    # pooled budget goes to the slowest GPU's wait (to the all-to-alls when the GPUs have no spread)
    dev_fwd = fwd.gemm_s + fwd.attention_s + fwd.memory_s
    timeline = lockstep_flow_shop(
        paced_s=(fwd.seconds - fwd.sync_s + mpc.tensor_forward_s,
                 rec.seconds + bwd.seconds - rec.sync_s - bwd.sync_s + mpc.tensor_s - mpc.tensor_forward_s,
                 host_ep if ep_overlapped else 0.0),
        line_s=(dev_fwd * (1.0 + both) + tp_fwd_raw, (device - dev_fwd) * (1.0 + both) + tp_raw - tp_fwd_raw,
                device_ep if ep_overlapped else 0.0),
        micro_steps=micro_steps)
    tail_s = max(0.0, timeline.micro_step_s - (paced + mpc.tensor_s + ep_gpu + ep_host + speed + uneven))
    if tail_s:
        if speed + uneven > 0:
            f = (speed + uneven + tail_s) / (speed + uneven)
            speed, uneven = speed * f, uneven * f
        elif excess:
            speed, uneven = speed + tail_s * excess / both, uneven + tail_s * (both - excess) / both
        else:
            ep_host += tail_s
    if ep_overlapped:
        mpc = replace(mpc, expert_s=ep_gpu + ep_host)
    # the data-parallel collectives (FSDP / ZeRO-3 gathers and reduce-scatters, DDP / ZeRO-1/2 bucket reductions) run
    # on their own process group's stream beside the compute stream, whose time includes the TP collectives it waits
    # on and, on the slowest GPU, which sets the lockstep pace, its extra device time: each pass's window is the time
    # it holds that GPU's compute stream (lockstep_flow_shop; with no wait, its paced time plus its exposed TP
    # collectives, data_parallel_window_s), its syncs' round trips added
    fwd_window_s = timeline.windows_s[0] + fwd.sync_s
    bwd_window_s = timeline.windows_s[1] + rec.sync_s + bwd.sync_s
    # communication
    crosses = ranks > parallel.gpus_per_node if hsdp is None else hsdp.shard_crosses_nodes
    bus = data_ring_bus_bytes_per_s(parallel, rates, ranks=ranks) if hsdp is None else hsdp.shard_bus_bytes_per_s
    grad_bytes = trained_params * optimizer.grad_bytes
    layers = spec.num_layers
    comm = coll.CommTime(0.0, 0.0)
    sharded: dict | None = None  # exposed_sharded's arguments, for FSDP / ZeRO-3 / HSDP
    held = fsdp2_pipeline_held and parallel.fsdp2 and st == "fsdp"
    if (ranks > 1 or eranks > 1) and st != "single":
        if st in ("zero3", "fsdp", "fsdp_grad_op", "hsdp"):
            group = shard
            root_frac = root_unit_share(spec, embedding_unit=fsdp2_copies)
            # the routed experts (none in the root unit) are sharded over their own group
            expert_frac = expert_params / trained_params if trained_params > 0 else 0.0
            dense_w, dense_g = gathered_weight_bytes * (1 - expert_frac), grad_bytes * (1 - expert_frac)
            layer_w = dense_w * (1 - root_frac) / layers
            layer_g = dense_g * (1 - root_frac) / layers
            # HSDP: each unit's gradient shard is all-reduced across the shard group's replicas (``hsdp_links``)
            # behind the remaining backward, per micro-step as torch does by default (``collectives.exposed_sharded``)
            replicas = hsdp.replicas if hsdp is not None else 1
            sharded = dict(
                layers=layers, layer_weight_bytes=layer_w, layer_grad_bytes=layer_g,
                root_weight_bytes=dense_w * root_frac, root_grad_bytes=dense_g * root_frac,
                ranks=group, bus_bytes_per_s=bus, **_nccl_groups(parallel, rates, group=group, eranks=eranks,
                                                                    hsdp=hsdp),
                layer_forward_s=fwd_window_s / layers, layer_backward_s=bwd_window_s / layers,
                micro_steps=micro_steps,
                reshard_after_forward=fsdp2_pipeline_reshard_after_forward if held else st != "fsdp_grad_op",
                # a pipeline stage under FSDP2: gathered once, reduce-scattered after its last backward
                # (collectives.exposed_sharded held_to_last_backward)
                held_to_last_backward=held,
                # FSDP1's rate limiter with PEFT's adapter units in every layer: no layer compute hides a layer's
                # gathers (collectives.rate_limiter_exposes_layer_gathers)
                layer_gathers_hidden=not coll.rate_limiter_exposes_layer_gathers(
                    adapter_units=parallel.fsdp_adapter_units and adapter is not None, fsdp2=parallel.fsdp2,
                    reshard_after_forward=st in ("fsdp", "hsdp"), ranks=group),
                expert_layer_weight_bytes=gathered_weight_bytes * expert_frac / layers,
                expert_layer_grad_bytes=grad_bytes * expert_frac / layers, expert_ranks=eranks,
                expert_bus_bytes_per_s=_expert_bus(rates, parallel, eranks),
                replica_layer_grad_bytes=grad_bytes * (1 - root_frac) / layers / group,
                replica_root_grad_bytes=grad_bytes * root_frac / group, replica_ranks=replicas,
                replica_bus_bytes_per_s=hsdp.replica_bus_bytes_per_s if hsdp is not None else None,
                replica_shares_link=hsdp is not None and hsdp.shard_crosses_nodes == hsdp.replica_crosses_nodes,
                expert_layer_gathers=zero3_expert_gathers(
                    local_experts=spec.moe.num_experts, leaf=zero3_expert_leaf or st != "zero3")
                if expert_loop and spec.moe is not None else 1.0,
                # torchao's float8 all-gather casts each unit's shards on the copy-in stream first
                layer_gather_prep_s=layer_gather_prep_seconds(
                    fp8_gather, layers=layers, hbm_bytes_per_s=rates.hbm_bytes_per_s) if fp8_gather is not None else 0.0,
            )
            comm = coll.exposed_sharded(**sharded)
            wire = coll.exposed_sharded(**{**sharded, "latency_s": 0.0})
            if not parallel.overlap_comm and st == "zero3":
                comm = coll.reductions_on_compute_stream(overlapped=comm,
                                                         gathers_only=coll.exposed_sharded_gathers(**sharded))
        else:
            stage = {"ddp": 0, "zero1": 1, "zero2": 2}.get(st, 0)
            dense = trained_params - expert_params
            dp_kw = dict(
                grad_bytes=dense * optimizer.grad_bytes, weight_bytes=dense * optimizer.weight_bytes, ranks=ranks,
                bus_bytes_per_s=bus, **_nccl_groups(parallel, rates, group=ranks, eranks=eranks),
                backward_s=bwd_window_s,
                micro_steps=micro_steps, zero_stage=stage, expert_grad_bytes=expert_params * optimizer.grad_bytes,
                expert_weight_bytes=expert_params * optimizer.weight_bytes, expert_ranks=eranks,
                expert_bus_bytes_per_s=_expert_bus(rates, parallel, eranks),
                overlap_param_gather=parallel.overlap_param_gather, forward_s=fwd_window_s,
                gather_bucket_bytes=megatron_bucket_params(data_parallel=ranks) * optimizer.weight_bytes,
                reduce_after_backward=parallel.grad_reduce_after_backward,
                bucket_all_reduce_bytes=parallel.zero_all_reduce_bucket * optimizer.grad_bytes,
                ddp_bucket_bytes=parallel.ddp_bucket_bytes,
                ddp_last_tensor_bytes=input_embedding_grad_bytes(spec, grad_bytes=optimizer.grad_bytes,
                                                                 trained=adapter is None or adapter.saved_embedding),
                **zero1_group_of(parallel, rates, ranks=ranks, bus_bytes_per_s=bus)._asdict(),
            )
            comm = coll.exposed_data_parallel(**dp_kw)
            wire = coll.exposed_data_parallel(**{**dp_kw, "latency_s": 0.0})
            if parallel.grad_reduce_after_backward and stage == 1 and ranks > 1:
                # nanotron's ZeRO-1 step copies the gathered parameters back slice by slice
                # (collectives.nanotron_zero1_gather_copies_seconds); its Llama holds 3 tensors a layer fewer than the
                # card counts, q/k/v fused in qkv_proj and gate/up in gate_up_proj (src/nanotron/models/llama.py
                # l.223, l.384, huggingface/nanotron @c252843039cc167ff8d6894b87172af4637eb14b)
                groups = _nccl_groups(parallel, rates, group=ranks, eranks=eranks)
                copies_s = coll.nanotron_zero1_gather_copies_seconds(
                    ranks=ranks, tensors=max(1.0, trained_tensors - 3 * layers),
                    gather_s=coll.all_gather_seconds(total_bytes=dense * optimizer.weight_bytes, ranks=ranks,
                                                     bus_bytes_per_s=bus, nodes=groups["nodes"],
                                                     intra_link=groups["intra_link"]),
                    device_s_per_copy=rates.device_s_per_kernel_min)
                comm = coll.CommTime(comm.total_s + copies_s, comm.exposed_s + copies_s)
                notes.append(f"nanotron ZeRO-1: the parameter all-gather's {ranks} x"
                             f" {max(1.0, trained_tensors - 3 * layers):.0f} slice copies add {copies_s:.3f} s")
            if not parallel.overlap_comm and st in ("zero1", "zero2"):
                comm = coll.reductions_on_compute_stream(overlapped=comm)
        # the compute that hides the collectives runs slower beside them: they take a share of its HBM bandwidth
        # (collectives.hbm_contention_exposed_by_group), over the step's windows. Where they run at several rates
        # (HSDP's replica all-reduces, the routed experts' own group) each group is charged its own hidden seconds at
        # its own rate (_hidden_wire_by_group)
        groups: list[tuple[float, tuple[str, ...]]] = [(bus, ())]
        if hsdp is not None and hsdp.replicas > 1:
            groups.append((hsdp.replica_bus_bytes_per_s, _REPLICA_BYTES))
        if expert_params > 0 and eranks > 1:
            groups.append((_expert_bus(rates, parallel, eranks),
                           _SHARDED_EXPERT_BYTES if sharded is not None else _DP_EXPERT_BYTES))
        if len(groups) == 1:
            hidden = ((max(0.0, wire.total_s - wire.exposed_s), bus),)
        elif sharded is not None:
            hidden = _hidden_wire_by_group(coll.exposed_sharded, sharded, groups=groups,
                                           dense_keys=_SHARDED_DENSE_BYTES)
        else:
            hidden = _hidden_wire_by_group(coll.exposed_data_parallel, dp_kw, groups=groups, dense_keys=_DP_DENSE_BYTES)
        before_contention_s = comm.exposed_s
        comm = coll.hbm_contention_exposed_by_group(comm=comm, compute_s=(fwd_window_s + bwd_window_s) * micro_steps,
                                                    groups=hidden, hbm_bytes_per_s=rates.hbm_bytes_per_s)
        contention_s = comm.exposed_s - before_contention_s
        if launch_blocking:
            # CUDA_LAUNCH_BLOCKING=1: each NCCL launch returns when its collective has finished, so the backward's
            # next kernel waits for every reduction (and a gather for its forward): nothing is hidden
            # (launch_blocking_syncs cites the CUDA programming guide's text)
            comm = coll.CommTime(comm.total_s, comm.total_s)
            contention_s = 0.0
        notes.append(f"collectives at {bus / 1e9:.0f} GB/s bus bandwidth ({'crossing nodes' if crosses else 'in a node'}"
                     f"{intra_link_text(rates)});"
                     f" {comm.total_s:.3f} s in all, {comm.exposed_s:.3f} s not hidden by compute"
                     + (f" ({contention_s:.3f} s of it the compute beside them slowed by their HBM traffic,"
                        " collectives.hbm_contention_exposed)" if contention_s > 5e-4 else ""))
        if hsdp is not None and hsdp.replicas > 1:
            where = replica_link_text(hsdp, rates)
            notes.append(f"hsdp: shard groups of {hsdp.shard} ranks"
                         f" ({'spanning nodes' if hsdp.shard_crosses_nodes else 'in a node'}); each unit's gradient"
                         f" shard is all-reduced across {hsdp.replicas} replicas {where}"
                         f" ({hsdp.replica_bus_bytes_per_s / 1e9:.0f} GB/s bus) on its own stream, behind the remaining"
                         " backward")
        if parallel.overlap_param_gather and st == "zero1":
            notes.append("distributed optimizer overlap_param_gather: the parameter all-gather waits for the next"
                         f" step's first forward and hides behind it in buckets of"
                         f" {megatron_bucket_params(data_parallel=ranks) / 1e6:.0f}M parameters, the first exposed")

    # offload
    off_s = 0.0
    if parallel.offload != "none":
        passes = (3 if gradient_checkpointing else 2) * micro_steps
        ds_zero12 = st in ("zero1", "zero2") and parallel.offload == "optimizer"  # DeepSpeed's own offload path
        torch_step = torch_cpu_adamw_step(strategy=st, offload=parallel.offload, optimizer=optimizer,
                                          torch_cpu_offload=torch_cpu_offload)
        off = deepspeed_zero12_offload_seconds(
            params_per_rank=opt_params, tensors_per_rank=trained_tensors / max(1, ranks),
            ranks_per_node=min(ranks, parallel.gpus_per_node), weight_bytes=optimizer.weight_bytes,
            sync_round_trip_s=SYNC_ROUND_TRIP_S, rates=rates,
        ) if ds_zero12 else offload_seconds(
            params_per_rank=opt_params, ranks_per_node=min(ranks, parallel.gpus_per_node),
            grad_bytes=optimizer.grad_bytes, weight_bytes=optimizer.weight_bytes,
            params_offloaded=parallel.offload == "params_and_optimizer",
            weight_shard_bytes=gathered_weight_bytes / shard, passes=passes,
            # the copies run on the copy engine beside the backward (its checkpoint recompute inside it, as the
            # reductions above see it) and beside the communication the step leaves exposed (already a phase): hidden
            # behind both, not behind the backward a second time, so the step is max(backward + exposed
            # communication, copies), non-decreasing in the backward. The copy engine also runs while the compute
            # stream waits on its TP collectives, so each pass counts with them (data_parallel_window_s): host-device
            # copies on their own stream overlap kernel execution and other streams' work (CUDA C++ Programming
            # Guide, https://docs.nvidia.com/cuda/cuda-c-programming-guide/ section "Overlap of Data Transfer and
            # Kernel Execution")
            backward_s=bwd_window_s + comm.exposed_s,
            compute_s=fwd_window_s + bwd_window_s + comm.exposed_s, rates=rates,
            # torch FSDP's CPU offload steps the loop's own torch.optim.AdamW on the host: off the fused kernel, the
            # single-tensor path, on one thread a rank where the launcher sets it (offload.torch_cpu_adamw_seconds)
            cpu_step_s=torch_cpu_adamw_seconds(
                params_per_rank=opt_params, element_bytes=torch_cpu_adamw_element_bytes(optimizer),
                ranks_per_node=min(ranks, parallel.gpus_per_node), rates=rates, one_thread=host_one_thread,
            ) if torch_step else None,
        )
        off_s = off.exposed_s
        if fsdp2_offload_copy_bytes_per_s is not None and micro_steps > 1 and not held:
            # FSDP2's CPUOffloadPolicy accumulates every later micro-batch's gradient on the host, each unit's copy
            # blocking behind its reduce-scatter and, under HSDP, its replica all-reduce
            # (offload.fsdp2_offload_accumulation_seconds), the experts' over their own group: the reductions as
            # exposed_sharded prices them, one after another (collectives.sharded_reductions_seconds)
            rs_s = (coll.sharded_reductions_seconds(
                **{k: v for k, v in sharded.items() if k in coll.SHARDED_REDUCTION_KEYWORDS})
                if sharded is not None else 0.0)
            # exposed_sharded already charged each micro-batch's reductions where they outran the backward; in the
            # later micro-batches the whole of them is the accumulation's, so that share of the communication goes
            gathers_only = (coll.exposed_sharded_gathers(**sharded) if sharded is not None
                            else coll.CommTime(0.0, 0.0))
            gathers_exposed = gathers_only.total_s if launch_blocking else gathers_only.exposed_s
            reductions_exposed = max(0.0, comm.exposed_s - gathers_exposed) / micro_steps
            comm = coll.CommTime(comm.total_s, comm.exposed_s - (micro_steps - 1) * reductions_exposed)
            pageable, fresh = fsdp2_offload_copy_bytes_per_s
            # the host shard's .grad is in the sharded parameters' dtype, whatever the reduce dtype: foreach_reduce
            # casts the reduce-scatter output back to orig_dtype, the sharded parameter's dtype (torch 2.13.0
            # _fsdp_collectives.py l.696 _to_dtype_if_needed(reduce_output, orig_dtype); _fsdp_param.py l.588
            # orig_dtype = sharded_param.dtype): 4 B for fp32 shards under a mixed-precision policy, 2 B for bf16 ones
            shard_bytes = optimizer.weight_bytes
            acc_s = fsdp2_offload_accumulation_seconds(
                grad_bytes_per_rank=opt_params * shard_bytes,
                unit_grad_bytes_per_rank=opt_params * shard_bytes / max(1, layers), micro_steps=micro_steps,
                pageable_bytes_per_s=pageable, first_touch_bytes_per_s=fresh,
                host_add_bytes_per_s=fsdp2_host_add_bytes_per_s(
                    rank_share_bytes_per_s=rank_host_memory_bytes_per_s(
                        host_memory_bytes_per_s=rates.host_memory_bytes_per_s,
                        ranks_per_node=min(ranks, parallel.gpus_per_node), host_numa_nodes=rates.host_numa_nodes),
                    element_bytes=shard_bytes, one_thread=host_one_thread),
                reduce_scatter_s=rs_s)
            off_s += acc_s
            notes.append(f"FSDP2 CPU offload, {micro_steps} micro-batches: each later one's gradient reduce-scatter,"
                         f" blocking copy to pageable host memory and host-side add per unit"
                         f" ({opt_params * shard_bytes / 1e9:.2f} GB a micro-batch, {shard_bytes:g} B an element, the"
                         f" sharded parameters' dtype), {acc_s:.2f} s exposed; the"
                         f" {(micro_steps - 1) * reductions_exposed:.2f} s of those micro-batches' reductions the"
                         " collectives had exposed are counted here instead")
        numa = (f", at most one of its {rates.host_numa_nodes} NUMA nodes a rank" if rates.host_numa_nodes > 1 else "")
        cpu_kind = "torch AdamW on the host (single-tensor path)" if torch_step else "CPU Adam"
        rate = f"at {rates.host_memory_bytes_per_s / 1e9:.0f} GB/s host memory (shared by the node's ranks{numa})"
        if torch_step and host_one_thread:
            per_param_s = torch_cpu_adamw_s_per_param(torch_cpu_adamw_element_bytes(optimizer))
            if off.cpu_step_s <= opt_params * per_param_s * (1.0 + 1e-9):  # the rank's one thread binds
                rate = f"at {per_param_s * 1e9:.1f} ns a parameter on one thread a rank"
        notes.append(f"offload: {cpu_kind} {off.cpu_step_s:.2f} s {rate}, PCIe {rates.pcie_bytes_per_s / 1e9:.0f} GB/s"
                     + ("; DeepSpeed ZeRO-1/2: the fp32 gradient copy down and a host round trip per tensor at the"
                        " boundary exposed, the clip and 16-bit conversion passes on the host" if ds_zero12 else ""))

    act_off_s = 0.0
    if activation_offload_layers:
        # Transformer Engine's partial activation offload (parallel.activation_offload_layers): each micro-batch's
        # offloaded layers go to pinned host memory and come back on one side stream, the node's GPUs at once
        # (activation_offload_copy_bytes_per_s: compute.offload.host_copy_bytes_per_s over the host's GPUs); the
        # compute stream waits where a copy is late (layer_offload_stall_seconds). Its layers last as long as the
        # compute stream does, the TP collectives it waits on included (data_parallel_window_s): the side stream's
        # copies run beside those waits as beside kernels (CUDA C++ Programming Guide, "Overlap of Data Transfer and
        # Kernel Execution", https://docs.nvidia.com/cuda/cuda-c-programming-guide/). The backward's layers hold their
        # recompute under checkpointing (bwd_window_s is backward + recompute + their TP): a checkpointed layer re-runs
        # its forward inside the backward, and the reload copies run beside that as beside the gradient kernels
        layers = max(1, spec.num_layers)
        copy_rate = activation_offload_copy_bytes_per_s
        if copy_rate <= 0:
            raise ValueError("activation offload: the host copy rate must be > 0")
        fw, bw = layer_offload_stall_seconds(
            layers=layers, offloaded_layers=activation_offload_layers, forward_s_per_layer=fwd_window_s / layers,
            backward_s_per_layer=bwd_window_s / layers,
            copy_s_per_layer=activation_offload_bytes_per_layer / copy_rate)
        act_off_s = (fw + bw) * micro_steps
        notes.append(f"activation offload of {activation_offload_layers} of {layers} layers:"
                     f" {activation_offload_bytes_per_layer / 1e9:.2f} GB a layer each way at {copy_rate / 1e9:.0f} GB/s"
                     f" per micro-batch; the compute stream waits {fw:.3f} s in the forward and {bw:.3f} s in the"
                     " backward of each")

    if checkpoint_copy_s_per_micro_batch:
        # Unsloth's offloaded checkpoint (preset unsloth): each layer input's copy to the host and back on the compute
        # stream, in its order (compute.offload.offloaded_checkpoint_copy_seconds); a full activation offload has no
        # other time term, and compute.unsloth_layers counts the copy's launch only, not its transfer
        act_off_s += checkpoint_copy_s_per_micro_batch * micro_steps
        notes.append(f"offloaded checkpoint: each layer input to the host and back on the compute stream,"
                     f" {checkpoint_copy_s_per_micro_batch:.3f} s a micro-batch")

    phases = [
        _phase("forward", fwd.scaled(micro_steps)),
        *([_phase("recompute", rec.scaled(micro_steps))] if gradient_checkpointing else []),
        _phase("backward", bwd.scaled(micro_steps)),
    ]
    if mp.active:
        # each kind's forward share (``forward``): what a forward-only pass of the same micro-steps pays (DPO's
        # reference forward, plan.time.reference_forward_of)
        for name, secs, fwd_s in (("tensor_parallel", mpc.tensor_s, mpc.tensor_forward_s),
                                  ("context_parallel", mpc.context_s, mpc.context_forward_s),
                                  ("expert_parallel", mpc.expert_s, mpc.expert_forward_s),
                                  ("pipeline_p2p", mpc.pipeline_p2p_s, mpc.pipeline_p2p_forward_s)):
            if secs:
                phases.append(PhaseTime(name, secs * micro_steps, "communication",
                                        {"forward": fwd_s * micro_steps} if forward_shares else {}))
        bubble = pipeline_bubble_micro_steps(pp=mp.pp, virtual_stages=mp.virtual_stages)
        if bubble:
            # the idle slots last a whole micro-step of the timed stage, the slowest GPU's wait included: the bubble is
            # (p - 1) micro-batches' forward and backward time (Narayanan et al. 2021, arXiv:2104.04473 §2.2.1), and the
            # stages run those micro-batches at the lockstep pace of the slowest GPU
            micro = fwd.seconds + rec.seconds + bwd.seconds + mpc.total_s + speed + uneven
            # a forward-only schedule's micro-step: the forward and its collectives (forward_micro_step)
            forward_micro = (fwd.seconds + mpc.tensor_forward_s + mpc.context_forward_s + mpc.expert_forward_s
                             + mpc.pipeline_p2p_forward_s)
            phases.append(PhaseTime("pipeline_bubble", bubble * micro, "idle",
                                    {"idle_micro_steps": bubble, "micro_step": micro}
                                    | ({"forward_micro_step": forward_micro} if forward_shares else {})))
            notes.append(f"pipeline: {mp.pp} stages x {mp.virtual_stages} chunk(s), {micro_steps} micro-batches;"
                         f" the bubble idles {bubble:.2f} micro-steps; "
                         + ("the last stage (with the head) is timed" if head else
                            "the busiest stage, which does not hold the head, is timed"))
    if excess:
        # the spread is the GPUs' (clocks, thermals): the slowest GPU's device time sets the pace only where it
        # outlasts the micro-step's host-paced time; the GPU slack the TP collectives and overlapped all-to-alls left
        # absorbs it (gpu_timeline_exposed_s). The syncs' round trips (``sync_s``) are serial, no slack
        terms = {"ranks": world, "excess": excess}
        speed *= micro_steps
        uneven *= micro_steps
        if work_cv > 0 and parallel.ranks > 1:
            # the slowest rank's device time with its extra tokens, beyond what the speed spread already adds
            terms.update(work_cv=work_cv, uneven_work=uneven)
        phases.append(PhaseTime("slowest_rank", speed + uneven, "compute", terms))
        notes.append(f"lockstep: the slowest of {world} GPUs sets the pace, its device time +{excess:.1%}"
                     f" (per-GPU speed spread {coll.SLOWEST_RANK_SIGMA:.0%}, compute/collectives.py),"
                     f" +{speed:.3f} s beyond the host-paced passes"
                     + (f"; unequal micro-batches (tokens spread {work_cv:.1%} across ranks) +{uneven:.3f} s"
                        if work_cv > 0 and parallel.ranks > 1 else ""))
    if scan_syncs > 0:
        scan_s = token_scan_seconds(syncs=scan_syncs, rates=rates)
        phases.append(PhaseTime("loop_scan", scan_s * micro_steps, "launch", {"syncs": scan_syncs * micro_steps}))
        notes.append(f"the loop walks a GPU tensor element by element: {scan_syncs:.0f} host-synchronising reads a"
                     f" micro-batch, {scan_s:.3f} s each micro-batch with the GPU idle (token_scan_seconds)")
    phases.append(opt_phase)
    if fp8_gather is not None and st in ("fsdp", "fsdp_grad_op", "hsdp") and ranks > 1:
        amax_s = coll.all_reduce_seconds(total_bytes=amax_vector_bytes(linears=fp8_gather.linears), ranks=shard,
                                         bus_bytes_per_s=bus, **{k: v for k, v in _nccl_groups(
                                             parallel, rates, group=shard, eranks=eranks, hsdp=hsdp).items()
                                             if k in ("nodes", "intra_link")})
        pre_s = precompute_seconds(fp8_gather, hbm_bytes_per_s=rates.hbm_bytes_per_s,
                                   host_s_per_kernel=rates.host_s_per_backward_kernel, all_reduce_s=amax_s)
        phases.append(PhaseTime("fp8_scale_precompute", pre_s, "memory", {}))
        notes.append(f"torchao float8 all-gather: the weight shards cast to fp8 before each all-gather (copy-in"
                     f" stream) and one amax pass + all-reduce after the optimizer step, {pre_s * 1e3:.2f} ms")
    if comm.exposed_s:
        # ``forward_gathers``: the FSDP / ZeRO-3 units' forward all-gathers alone, the first exposed and each later one
        # behind the layer before it (collectives.exposed_forward_gathers): a forward-only pass over the same units
        # pays them again (DPO's reference forward, plan.time.reference_forward_of)
        extra = ({"forward_gathers": micro_steps * coll.exposed_forward_gathers(**sharded)}
                 if sharded and forward_shares else {})
        phases.append(PhaseTime("communication", comm.exposed_s, "communication", {"total": comm.total_s} | extra))
    if mp.pp > 1 and spec.tie_word_embeddings and adapter is None:
        # the end stages' copies of the tied embedding: their gradients all-reduced after the data-parallel reduction
        # (model_parallel.tied_embedding_grad_sync_s); a frozen embedding (adapters) has none
        tied_s = tied_embedding_grad_sync_s(vocab_rows=spec.vocab_size, hidden=spec.hidden_size,
                                            grad_bytes=optimizer.grad_bytes, pp=mp.pp, bytes_per_s=mp.pp_bytes_per_s,
                                            crosses_nodes=mp.pp_nodes > 1)
        if tied_s:
            phases.append(PhaseTime("tied_embedding_sync", tied_s, "communication", {}))
            notes.append(f"tied embeddings under {mp.pp} pipeline stages: the first and last stage all-reduce the"
                         f" {spec.vocab_size} x {spec.hidden_size} embedding gradient after the data-parallel"
                         f" reduction, {tied_s:.3f} s exposed")
    if off_s:
        phases.append(PhaseTime("offload", off_s, "offload", {}))
    if act_off_s:
        phases.append(PhaseTime("activation_offload", act_off_s, "offload", {}))
    if fsdp2_copies and st in ("fsdp", "fsdp_grad_op", "hsdp") and ranks > 1:
        copy_s = fsdp2_copy_seconds(gathered_weight_bytes=gathered_weight_bytes,
                                    root_share=root_unit_share(spec, embedding_unit=True),
                                    trained_params=trained_params, grad_bytes=optimizer.grad_bytes,
                                    reshard_after_forward=fsdp2_pipeline_reshard_after_forward if held
                                    else st != "fsdp_grad_op", micro_steps=micro_steps,
                                    hbm_bytes_per_s=rates.hbm_bytes_per_s, held_to_last_backward=held)
        phases.append(PhaseTime("fsdp_copies", copy_s, "memory", {}))
        notes.append(f"FSDP2 (fully_shard, parallel.fsdp_version): all-gather copy-out and reduce-scatter copy-in on"
                     f" the compute stream, {copy_s:.3f} s (fsdp1's flat parameters have none)"
                     + ("; a pipeline stage: gathered once and reduce-scattered after its last backward, the unsharded"
                        " gradients summed on the GPU each later micro-batch" if held else ""))
    total = sum(p.seconds for p in phases)
    return TrainStepTime(tuple(phases), total, float(micro_batch_size * seq_len * micro_steps), tuple(notes))


def _unit_pipeline_exposed_seconds(*, unit_s: float, layers: int, pass_s: float, micro_steps: float,
                                   once_s: float) -> float:
    """Seconds a per-unit transfer of ``unit_s`` (a layer's all-gather, or its shard copied in from host memory)
    adds to a no-grad pass of ``pass_s`` seconds over ``layers`` units, run ``micro_steps`` times: the first unit's
    transfer is exposed and each later one only beyond the previous unit's compute (``pass_s / layers``); ``once_s``
    (the root unit's, once a pass) is exposed whole."""
    return micro_steps * (unit_s + (layers - 1) * max(0.0, unit_s - pass_s / layers)) + once_s


def hsdp_phase_end_ranks(parallel: Parallel, *, gather_ranks: int) -> int:
    """Ranks whose slowest GPU bounds a sharded no-grad pass (``forward_only_time``): the per-layer gathers hold
    ``gather_ranks`` in lockstep (``zero3`` / ``fsdp``: every rank; ``hsdp``: the shard group, ``hsdp_links``), but a
    single-controller RL trainer ends the phase only when every rank has returned its share (volcengine/verl
    ``verl/single_controller/ray/base.py`` ``func_generator`` l.48-62 @b178a3cd56f58b2d502255daba591e92833930a7:
    ``ray.get`` on every rank's output before ``collect_fn``; NVIDIA-NeMo/RL ``get_all_worker_results``), and a GPU's
    speed is its own for the whole pass (Sinha et al., SC'22, arXiv 2208.11035), so the slowest of all
    ``parallel.ranks`` GPUs sets the phase. For ``hsdp`` that is every replica of the shard group, not the group
    alone; for the other strategies it is ``gather_ranks`` already. The data-parallel token spread (``work_cv``) is a
    per-micro-batch draw inside the lockstep group and stays there (``collectives.lockstep_excess``)."""
    if parallel.strategy == "hsdp":
        return max(gather_ranks, parallel.ranks)
    return gather_ranks


def lockstep_wait_seconds(*, device_s: float, paced_s: float, excess: float) -> float:
    """Seconds the slowest of the ranks in lockstep adds to a micro-step whose GPU work takes ``device_s`` on one
    GPU and whose passes take ``paced_s`` (the larger of their host and device time, less the syncs' round trips):
    that GPU's work is ``device_s · (1 + excess)`` (``collectives.slowest_rank_excess`` / ``lockstep_excess``), and
    it sets the pace only beyond ``paced_s``: ``max(0, device_s · (1 + excess) − paced_s)``. A device-bound step
    (``paced_s == device_s``) waits ``excess · device_s``; a launch-bound one, whose GPU idles behind the host's
    launches, waits only for what its slack does not absorb."""
    return max(0.0, device_s * (1.0 + excess) - paced_s)


def tensor_parallel_slack_exposed_s(*, comm_s: float, passes: tuple[PassTime, ...],
                                    launch_blocking: bool = False) -> float:
    """Seconds that ``comm_s`` of tensor-parallel collectives on the compute stream add to ``passes`` (bare passes:
    their host-paced time less the syncs' round trips against their device time), after a launch-bound pass's GPU
    slack absorbed what it can (``model_parallel.host_slack_exposed_s``). The one rule for every pass that carries
    TP collectives: the training step's forward, and its recomputed forward with its backward (``train_step_time``),
    and the RL no-grad log-prob / reference / values forwards (``forward_only_time``), whose host-bound micro-batches
    leave the GPU the same idle time between launches. ``launch_blocking`` (CUDA_LAUNCH_BLOCKING=1): the host waits
    for every kernel, no slack, ``comm_s`` in full."""
    if launch_blocking or not comm_s:
        return comm_s
    return host_slack_exposed_s(comm_s=comm_s, device_s=sum(p.gemm_s + p.attention_s + p.memory_s for p in passes),
                                paced_s=sum(p.seconds - p.sync_s for p in passes))


@dataclass(frozen=True, slots=True)
class ForwardOnlyPass(PassTime):
    """A no-grad pass (``forward_only_time``) and, not counted in its ``seconds``, the seconds its tensor-parallel
    collectives add over its micro-batches after the pass's GPU slack absorbed its share
    (``tensor_parallel_slack_exposed_s``)."""

    tensor_parallel_s: float = 0.0


def data_parallel_window_s(*, paced_s: float, tensor_parallel_exposed_s: float) -> float:
    """Seconds of a pass (forward; or recompute and backward, interleaved layer by layer) behind which the
    data-parallel collectives can hide: its host-paced time ``paced_s`` plus the seconds its tensor-parallel
    collectives add to the compute stream beyond it (``tensor_parallel_exposed_s``: what a launch-bound pass's GPU
    slack did not absorb, ``model_parallel.host_slack_exposed_s``; with TP communication overlap, what outlasts the
    GEMMs). Per layer the pass lasts ``max(data-parallel traffic, compute stream)``, the compute stream's time with its
    TP collectives, so each second of it hides at most one second of the data-parallel stream's traffic, whether the
    compute stream then runs kernels, waits on a TP collective or idles behind the host.

    Mechanism: every process group has its own NCCL stream per device, and a collective first makes that stream wait
    for the caller's stream, then runs on it (pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp
    @0007e752d518810f0f8942a830dbbbfc69f34577: ``getNCCLComm`` "Creates the NCCL streams", ``ncclStreams_`` keyed by
    device; ``collective`` "First let NCCL streams wait for input tensors allocation streams"). The TP collectives are
    called synchronously on the TP group, so the compute stream waits for them (NVIDIA/Megatron-LM
    megatron/core/tensor_parallel/mappings.py l.146, l.186 @d98e8a64ddf34856e74b24714e3bedb2f5a39553: the
    sequence-parallel all-gather and reduce-scatter without ``async_op``; torch's DTensor plans wait on the functional
    collective's result before the next op), while the data-parallel traffic runs on the data-parallel group's stream
    beside it: FSDP2 gathers on its all-gather stream "overlapping next all-gather with current forward compute" and
    reduce-scatters on its reduce-scatter stream, a "separate execution thread" (pytorch/pytorch
    torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py ``FSDPCommContext.lazy_init``
    @002a76fbfea0ac0f199e4b8e2a0691074796c908); Megatron-Core's overlapped gradient reduce-scatter runs on the NCCL
    stream beside the gradient compute (megatron/core/distributed/param_and_grad_buffer.py l.677-679, the same
    commit).

    Left without this window (the TP exposure added after the data-parallel exposure priced against ``paced_s``
    alone), a communication-bound backward paid ``max(traffic, backward) + TP``, and with activation recompute, whose
    launch-bound passes' slack absorbs the TP collectives, ``max(traffic, recompute + backward)``: the recompute made
    the step faster (Qwen3-8B, FSDP over 2 H100 nodes, TP 4 + sequence parallel, fp32 gradients: 0.2133 -> 0.2040
    s). Not counted: the context-parallel and expert-parallel exchanges and the pipeline sends (not split by pass
    here), nor the NIC a TP group spanning nodes shares with the data-parallel traffic."""
    return paced_s + max(0.0, tensor_parallel_exposed_s)


def gpu_timeline_exposed_s(*, paced_s: float, device_s: float, terms_s: tuple[float, ...],
                           host_extra_s: float = 0.0) -> tuple[tuple[float, ...], float]:
    """What a micro-step's GPU-side terms and a host-side extra add beyond its host-paced time, one budget for all.

    The GPU's timeline holds ``device_s`` (the passes' device work, and anything already on it, such as the TP
    collectives on the compute stream), then ``terms_s`` in order (overlapped EP all-to-alls past the other
    direction's device time, the slowest GPU's extra device time, ...); the host's holds ``paced_s`` (the passes
    paced by the larger of host and device time, with what the GPU's timeline already exposed; ``paced_s >=
    device_s``) and ``host_extra_s`` (an all-to-all that outlasts the other direction's paced pass). The micro-step
    lasts ``max(paced_s + host_extra_s, device_s + sum(terms_s))``: the GPU's idle time behind the host's launches
    (``paced_s - device_s``) absorbs each term once, in order, and the host side's extra only where it outlasts the
    whole GPU line. Returns each term's exposure and the host extra's; they sum to that micro-step less
    ``paced_s``, which never falls as ``paced_s`` grows (host time, all else equal).

    The mechanism is the one of ``model_parallel.host_slack_exposed_s`` (an NCCL collective or a slower GPU's kernels
    only delay the compute stream, the host walks past) and ``lockstep_wait_seconds``, applied to all of them at once:
    priced apart, each against the whole slack, adding host time shortened the step (more slack hid each term
    again).

    Outside this budget (``train_step_time``): ring / Ulysses context-parallel exchanges and the pipeline sends add
    to both sides (no forward / backward split of them here); Megatron-Core's non-overlapped all-to-alls too (its
    dispatcher syncs the host). Two terms still read the host-paced passes alone, so on some Megatron MoE cards an
    eager router (more host work, the same device work) still plans up to 1.8 % faster than a fused one, and a
    load-balancing loss up to 2.6 % faster than none (on 66 and 47 of 173 mapped rows; without the two, none): the
    data-parallel overlap window (``communication``: a longer host-paced forward hides more of an overlapped
    all-gather, while the slowest rank's wait, which lengthens the same window, is not counted in it), and
    ``synced_seconds``' refill, which averages the device seconds over the pass's kernels (kernels with host time
    and no device time shorten it)."""
    line = device_s
    edge = max(paced_s, device_s)
    out = []
    for t in terms_s:
        line += max(0.0, t)
        new = max(edge, line)
        out.append(new - edge)
        edge = new
    return tuple(out), max(0.0, paced_s + max(0.0, host_extra_s) - edge)


@dataclass(frozen=True, slots=True)
class LockstepTimeline:
    """A step's micro-steps on the slowest GPU's timeline (``lockstep_flow_shop``): the mean seconds of a micro-step,
    and of each pass the mean seconds it holds that GPU's compute stream a micro-step (its data-parallel window)."""

    micro_step_s: float
    windows_s: tuple[float, ...]


def lockstep_flow_shop(*, paced_s: tuple[float, ...], line_s: tuple[float, ...], micro_steps: int) -> LockstepTimeline:
    """The slowest GPU's timeline over a step of ``micro_steps`` micro-steps, each the passes ``paced_s`` / ``line_s``
    in order (the forward, then the recompute with the backward, ...): pass ``k`` takes ``paced_s[k]`` of host-paced
    time (the larger of its host and device time on one GPU, its exposed TP collectives included) and ``line_s[k]``
    of the slowest GPU's device work (its device time with its TP collectives, times ``1 + excess``,
    ``lockstep_wait_seconds``). The ranks run in lockstep, so that GPU sets the pace; its kernels of a pass cannot
    start before the host has queued the passes before it, and the host queues the next micro-step's forward while
    it still runs the previous backward: a two-machine flow shop whose jobs keep their order (S. M. Johnson, Naval
    Research Logistics Quarterly 1(1), 1954; the fluid bound ``sequenced`` uses). With ``c_k`` the running sum of
    ``paced - line`` over one micro-step's passes and ``C_k`` its running maximum (``c_0 = C_0 = 0``), the step ends
    at::

        (m - 1) · max(Σ paced, Σ line) + Σ line + max_k c_k

    the last micro-step's tail (no slack of an earlier pass absorbs a later pass's extra device time: in a
    one-micro-batch step the backward's wait is not spent in the forward's idle GPU time) plus ``m - 1`` micro-steps
    of one pooled budget (``gpu_timeline_exposed_s``). Each pass's window is the time between the slowest GPU
    finishing the previous pass and finishing it: ``line_k + C_k - C_{k-1}`` in the first micro-step and
    ``line_k + K_k - K_{k-1}`` in every later one (``K_k = max(c_last + C_k, C_last)``, ``K_0 = C_last``); the mean
    of each over the micro-steps is returned, and the windows sum to the micro-step. A pass with no wait keeps its
    paced time; a waiting pass's window holds its wait (that GPU's compute stream is busy for it). Every finish time
    is non-decreasing in each pass's paced seconds and each window's increase is no more than the step's, so a
    term that one window hides second for second never shortens the step."""
    if len(paced_s) != len(line_s):
        raise ValueError("lockstep_flow_shop: paced_s and line_s must have one entry a pass")
    c, top, prefix = 0.0, 0.0, [0.0]
    for p, l in zip(paced_s, line_s):
        c += p - l
        top = max(top, c)
        prefix.append(top)
    last, top_all = c, prefix[-1]
    steady = [top_all] + [max(last + t, top_all) for t in prefix[1:]]
    first = [l + prefix[k + 1] - prefix[k] for k, l in enumerate(line_s)]
    later = [l + steady[k + 1] - steady[k] for k, l in enumerate(line_s)]
    m = max(1, micro_steps)
    windows = tuple((f + (m - 1) * s) / m for f, s in zip(first, later))
    return LockstepTimeline(sum(windows), windows)


def token_scan_seconds(*, syncs: float, rates: DeviceRates) -> float:
    """Seconds of a Python loop that reads ``syncs`` single elements of a GPU tensor, one after another, each
    behind a one-element kernel: ``bool(t[i] == 0)`` launches an ``eq`` kernel and reads its result, so the host
    waits for the device after every kernel and the device idles while the host dispatches the next one.

    prime-rl's RL trainer (PrimeIntellect-ai/prime-rl @d8f290ef0358a804f1912bd29ea1b37cc56894b4): every micro-batch
    moves ``position_ids`` to the GPU (src/prime_rl/trainer/rl/train.py l.308) and, after the forward, calls
    ``get_response_lengths(position_ids)`` (l.367) to split the loss per sequence; that function
    (src/prime_rl/trainer/utils.py l.59-92) runs ``for i in range(1, len(position_ids)): if position_ids[i] == 0 and
    ...`` over the flattened micro-batch, one ``eq`` kernel and one device-to-host read per token (the ``and``
    short-circuits where a position is not 0; one sequence of ``arange(S)`` positions, as the fake benchmark data
    has, takes no other branch). The loop runs inside the timed step (step_start_time l.268 to l.447) with the GPU
    otherwise idle: the first read waits for the forward, the backward is queued only after the loop. It was
    removed on 2026-06-15 (commit fa21395a68728ffb80e61cb660e9b921e4c76430, "improve sequence packing").

    Priced with the existing rates, nothing fitted: each ``eq`` is a bare aten call from a Python loop, at the host
    seconds per backward kernel (the rate ``inventory.PassInventory.bare_kernels`` takes), the kernel runs
    ``device_s_per_kernel_min``, and each read is a sync (``synced_seconds``: one kernel a segment, its round trip)."""
    n = max(0.0, float(syncs))
    if n <= 0:
        return 0.0
    return synced_seconds(host_s=n * rates.host_s_per_backward_kernel, device_s=n * rates.device_s_per_kernel_min,
                          kernels=n, syncs=n)


def input_embedding_grad_bytes(spec: ModelSpec, *, grad_bytes: float, trained: bool = True) -> float:
    """Reduced bytes of the input embedding's gradient on one rank (``spec``: the rank's shard, its vocabulary split by
    the tensor-parallel size): the gradient torch DDP's backward finishes last, whose bucket is reduced after the
    backward (``collectives.ddp_bucketed_all_reduce`` ``last_tensor_bytes``). ``grad_bytes``: bytes a reduced gradient
    element; ``trained`` False (adapters: the embedding is frozen): none. PEFT's ``modules_to_save`` copy of
    ``embed_tokens`` is trained in full and its gradient is still the backward's last (``Adapter.saved_embedding``)."""
    from trainfit.memory.params import param_breakdown

    return param_breakdown(spec).embedding * grad_bytes if trained else 0.0


def root_unit_share(spec: ModelSpec, *, embedding_unit: bool = False) -> float:
    """The root FSDP unit's share of the model's parameters: what a wrap by decoder layer leaves outside the layers'
    units (``memory.params.param_breakdown``: parameters minus the decoder layers'), the token and position embeddings,
    the final norm and an untied head (a tied head is the embedding's tensor). verl's FSDP1 wrap policy wraps the
    ``_no_split_modules`` only (volcengine/verl verl/utils/fsdp_utils.py ``get_fsdp_wrap_policy`` l.56 on
    @e0d035cd4a6a5c29835516a58d78710a28e73b18), so the root keeps all of them. ``embedding_unit``: FSDP2 as verl's
    ``apply_fsdp2`` applies it also gives every ``nn.Embedding`` its own ``fully_shard`` unit when the embeddings are
    untied (verl/utils/fsdp_utils.py l.507-537 @b178a3cd56f58b2d502255daba591e92833930a7), so the root keeps the final
    norm and the head. Qwen2.5-7B: 14.3 % under FSDP1, 7.2 % under FSDP2; the tied Qwen2.5-0.5B: 27.6 % either way.

    ``train_step_time``'s collectives (the root gathered once a step, the layers every micro-step),
    ``fsdp2_copy_seconds``' root share and ``forward_only_time``'s once-a-pass gather and host-shard copy all read it
    (it replaces a round 8 % share)."""
    from trainfit.memory.params import param_breakdown

    bd = param_breakdown(spec)
    if bd.total <= 0:
        return 0.0
    outside = bd.total - sum(bd.per_layer)
    if embedding_unit and bd.lm_head > 0:
        outside -= bd.embedding + bd.positions
    return max(0.0, outside) / bd.total


def fsdp2_copy_seconds(*, gathered_weight_bytes: float, root_share: float, trained_params: float,
                       grad_bytes: float, unsharded_grad_bytes: float = 2.0, reshard_after_forward: bool = True,
                       micro_steps: int = 1, hbm_bytes_per_s: float, held_to_last_backward: bool = False) -> float:
    """Seconds of FSDP2's (``fully_shard``) copies on the compute stream in one step: each all-gather's copy-out
    and each reduce-scatter's copy-in, memory-bound, in line with the layers' kernels.

    pytorch/pytorch @cf30153c4c131c8164ee7798e5022d810682e2cb (the torch 2.13.0 wheel)
    ``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``: ``foreach_all_gather_copy_out`` waits for the
    all-gather on ``current_stream()`` (l. 447) and ``split_with_sizes_copy`` copies the flat output into the
    parameters' unsharded tensors (l. 485-489): the unit's gathered bytes read and written (2 x). ``foreach_reduce``
    runs ``foreach_reduce_scatter_copy_in`` (``chunk_cat`` of the unsharded gradients into the ``reduce_dtype``
    buffer, l. 603 and 778-786) before ``reduce_scatter_stream.wait_stream(current_stream)`` (l. 607): the
    ``unsharded_grad_bytes`` (the 16-bit ``param_dtype``) gradient read and the ``grad_bytes`` (``reduce_dtype``)
    buffer written per trained parameter. Per micro-step (FSDP2 gathers and reduces every micro-step by default):
    the forward gathers every unit, the backward again those resharded after forward (all but the root's
    ``root_share``, which the root keeps). FSDP1 is not charged: its flat parameter all-gathers into the flat buffer
    its views read. Llama 3 8B on 8 GPUs, bf16 gathers, fp32 reduce: 2 x 16.1 GB x 1.92 + 8.03e9 x 6 B = 110 GB a
    step. ``train_step_time(fsdp2_copies=True)`` adds it as the ``fsdp_copies`` phase; ``plan.time`` asks for it
    where the card's ``parallel.fsdp_version`` is fsdp2 (``spec.enums.FsdpVersion``); ``forward_only_time``
    charges the copy-out alone (no-grad passes).

    ``held_to_last_backward`` (a pipeline stage under FSDP2, ``collectives.exposed_sharded``): the gathers' copy-outs
    as that schedule gathers (once a step, or with ``reshard_after_forward`` each micro-batch's forward and backward
    gather of the non-root units), one copy-in after the last backward, of the held gradient in the reduce dtype
    (``grad_bytes`` read and written), and the held gradient's accumulation on the GPU:
    ``to_accumulated_grad_if_needed`` upcasts the first micro-batch's gradient to the reduce dtype when it differs
    (``unsharded_grad_bytes`` read, ``grad_bytes`` written) and every later micro-batch's is added in
    (``accumulate_unsharded_grad_if_needed``, or autograd's in-place add when the dtypes match: the held gradient read
    and written, the new one read), torch 2.13.0 _fsdp_param.py l.802-821, _fsdp_param_group.py l.603-612."""
    if held_to_last_backward:
        upcast = unsharded_grad_bytes + grad_bytes if unsharded_grad_bytes != grad_bytes else 0.0
        adds = max(0, micro_steps - 1) * (2.0 * grad_bytes + unsharded_grad_bytes)
        # gathered once, or (reshard_after_forward) in each micro-batch's forward and backward but the root, once
        # (collectives.exposed_sharded)
        copy_out = 2.0 * gathered_weight_bytes * (
            root_share + micro_steps * 2.0 * (1.0 - root_share) if reshard_after_forward else 1.0)
        return (copy_out + trained_params * (upcast + adds + 2.0 * grad_bytes)) / hbm_bytes_per_s
    gathers = 1.0 + ((1.0 - root_share) if reshard_after_forward else 0.0)
    per_micro = 2.0 * gathered_weight_bytes * gathers + trained_params * (unsharded_grad_bytes + grad_bytes)
    return micro_steps * per_micro / hbm_bytes_per_s


def _nccl_groups(parallel: Parallel, rates: DeviceRates, *, group: int, eranks: int,
                 hsdp: HsdpLinks | None = None) -> dict:
    """The nodes each data-parallel group spans and the intra-node link, for NCCL's latency of its collectives
    (``collectives.nccl_collective_seconds``): the dense group's ``group`` ranks ``gpus_per_node`` to a node (HSDP:
    the shard group, and its replicas: ``HsdpLinks.replica_nodes``), the experts' ``expert_gpus_per_node``."""
    kw = dict(nodes=hsdp.shard_nodes if hsdp is not None else
              coll.group_nodes(ranks=group, ranks_per_node=max(1, parallel.gpus_per_node)),
              expert_nodes=coll.group_nodes(ranks=eranks, ranks_per_node=parallel.expert_gpus_per_node),
              intra_link=coll.IntraLink.of(nvlink=rates.nvlink))
    if hsdp is not None:
        kw["replica_nodes"] = hsdp.replica_nodes
    return kw


class Zero1Group(NamedTuple):
    """The ZeRO-1 group as ``collectives.exposed_data_parallel`` reads it (its ``gather_*`` and ``grad_all_reduce``
    keywords, ``_asdict()``); the defaults are the data group's reduce-scatter and one all-gather."""

    gather_ranks: int | None = None
    gather_nodes: int | None = None
    gather_bus_bytes_per_s: float | None = None
    gather_broadcast_per_rank: bool = False
    grad_all_reduce: bool = False


def zero1_group_of(parallel: Parallel, rates: DeviceRates, *, ranks: int, bus_bytes_per_s: float) -> Zero1Group:
    """The ZeRO-1 group for ``collectives.exposed_data_parallel``: with ``zero1_shard`` smaller than the ``ranks``
    data-parallel ranks, the parameters are handed back over that many consecutive ranks (inside a node when they fit
    in one, at the NVLink ring rate; else over the nodes they span at the data group's ring rate ``bus_bytes_per_s``)
    and the gradients all-reduced over all ``ranks`` (``grad_all_reduce``: each rank steps the summed 1/group slice,
    which one reduce-scatter over the ``ranks`` does not leave it; InternEvo's ``reduce_tensor(dst_rank=None)``,
    ``collectives.INTERNEVO_ZERO1_REDUCE``); the per-rank broadcasts of ``zero1_broadcast_per_rank``; the defaults
    (the data group's reduce-scatter, one all-gather) otherwise."""
    if parallel.strategy != "zero1":
        return Zero1Group()
    per_rank = parallel.zero1_broadcast_per_rank
    group = parallel.zero1_shard
    if not 0 < group < ranks:
        return Zero1Group(gather_broadcast_per_rank=per_rank)
    per_node = max(1, parallel.gpus_per_node)
    local = group <= per_node
    return Zero1Group(
        gather_ranks=group, gather_nodes=coll.group_nodes(ranks=group, ranks_per_node=per_node),
        gather_bus_bytes_per_s=coll.ring_bus_bytes_per_s(rates=rates, crosses_nodes=False,
                                                         nic_bytes_per_s=parallel.nic_bytes_per_s,
                                                         local_ranks=group) if local else bus_bytes_per_s,
        gather_broadcast_per_rank=per_rank, grad_all_reduce=True)


_SHARDED_DENSE_BYTES = ("layer_weight_bytes", "layer_grad_bytes", "root_weight_bytes", "root_grad_bytes")
_SHARDED_EXPERT_BYTES = ("expert_layer_weight_bytes", "expert_layer_grad_bytes")
_REPLICA_BYTES = ("replica_layer_grad_bytes", "replica_root_grad_bytes")
_DP_DENSE_BYTES = ("grad_bytes", "weight_bytes", "ddp_last_tensor_bytes")
_DP_EXPERT_BYTES = ("expert_grad_bytes", "expert_weight_bytes")
"""The byte counts of each process group in ``collectives.exposed_sharded`` (the shard group, the routed experts'
group, HSDP's replica group) and ``collectives.exposed_data_parallel`` (the data-parallel group, the experts')."""


def _hidden_wire_by_group(schedule: Callable[..., coll.CommTime], kwargs: dict, *,
                          groups: list[tuple[float, tuple[str, ...]]],
                          dense_keys: tuple[str, ...]) -> tuple[tuple[float, float], ...]:
    """Per process group (its bus bytes per second, its byte keywords; ``()``: the dense group, ``dense_keys``), the
    hidden seconds of ``schedule`` (``exposed_sharded`` / ``exposed_data_parallel`` with ``kwargs``) priced without
    NCCL's latency and with every other listed group's bytes zeroed: what that group moves while compute runs
    beside it, for ``collectives.hbm_contention_exposed_by_group``. A group's schedule alone, so adding another
    group, or a slower link for it, leaves this group's hidden seconds as they were."""
    own = [keys or dense_keys for _, keys in groups]
    every = {k for keys in own for k in keys}
    out = []
    for (bus, _), keys in zip(groups, own):
        alone = schedule(**{**kwargs, "latency_s": 0.0, **dict.fromkeys(every - set(keys), 0.0)})
        out.append((max(0.0, alone.total_s - alone.exposed_s), bus))
    return tuple(out)


def _expert_bus(rates: DeviceRates, parallel: Parallel, eranks: int) -> float:
    """Ring bus rate of the expert-data-parallel group (``Parallel.expert_gpus_per_node`` of its ranks per node)."""
    return coll.ring_bus_bytes_per_s(rates=rates, crosses_nodes=eranks > parallel.expert_gpus_per_node,
                                     nic_bytes_per_s=parallel.nic_bytes_per_s,
                                     local_ranks=min(eranks, parallel.expert_gpus_per_node))


def column_gemm_shares(spec: ModelSpec, *, moe_layers: int) -> tuple[float, float]:
    """The QKV and fc1 (column-parallel) modules' shares of a mean layer's linear GEMM FLOPs (their weights' share
    of the layer's active linear weights; an MoE layer's top-k experts and shared expert count as its MLP), for
    ``model_parallel.te_sp_backward_pair_s``; the attention core and the head are not in the denominator."""
    h, g = spec.hidden_size, (3 if spec.mlp_gated else 2)
    qkv, proj = h * (spec.q_dim + 2 * spec.kv_dim), spec.q_dim * h
    dense_mlp = g * h * spec.intermediate_size
    layers = max(1, spec.num_layers)
    moe_mlp = 0.0
    if spec.moe is not None and moe_layers:
        m = spec.moe
        moe_mlp = g * h * (m.experts_per_token * m.expert_intermediate_size + m.shared_expert_intermediate_size)
    dense_layers = layers - moe_layers
    mean_layer = qkv + proj + (dense_layers * dense_mlp + moe_layers * moe_mlp) / layers
    if mean_layer <= 0:
        return 0.0, 0.0
    return qkv / mean_layer, (dense_mlp * (g - 1) / g) / mean_layer


def model_parallel_comm_of(spec: ModelSpec, mp: ModelParallel, *, tokens: float, rates: DeviceRates, recompute: bool,
                           fwd: PassTime = ZERO_PASS, bwd: PassTime = ZERO_PASS,
                           recompute_collectives: bool = True, micro_steps: int = 1,
                           expert_recompute: bool = False, launch_blocking: bool = False) -> ModelParallelComm:
    """The model-parallel traffic of one micro-step of ``tokens`` on a rank of ``spec``'s shard (``fwd`` / ``bwd``:
    the passes whose attention hides ring context-parallel exchanges, whose GEMMs hide overlapped TP collectives and
    which hide each other's overlapped EP all-to-alls; ``recompute_collectives``: False where only core attention is
    recomputed; ``micro_steps``: per step, for the EP overlap's unpaired first and last micro-batches;
    ``expert_recompute``: the EP dispatch and combine repeat in a recomputed MoE layer whatever the others do;
    ``launch_blocking``: ``CUDA_LAUNCH_BLOCKING=1``, nothing hidden, ``model_parallel.model_parallel_comm``)."""
    full = max(1, spec.num_full_attention_layers)
    moe_layers = sum(1 for i in range(spec.num_layers) if spec.moe.is_moe_layer(i)) if spec.moe else 0
    attention_column_share, mlp_column_share = column_gemm_shares(spec, moe_layers=moe_layers)
    return model_parallel_comm(
        tokens=tokens, hidden=spec.hidden_size, q_dim=mp.full_q_dim or spec.q_dim, kv_dim=mp.full_kv_dim or spec.kv_dim,
        layers=spec.num_layers, attention_layers=spec.num_full_attention_layers, moe_layers=moe_layers,
        top_k=spec.moe.experts_per_token if spec.moe else 0, tp=mp.tp, cp=mp.cp, ulysses=mp.ulysses, ep=mp.ep,
        pp=mp.pp, recompute=recompute, tp_bus_bytes_per_s=mp.tp_bus_bytes_per_s,
        tp_nodes=mp.tp_nodes, cp_nodes=mp.cp_nodes, pp_nodes=mp.pp_nodes,
        cp_bus_bytes_per_s=mp.cp_bus_bytes_per_s, ep_bus_bytes_per_s=mp.ep_bus_bytes_per_s,
        pp_bytes_per_s=mp.pp_bytes_per_s, attention_forward_s_per_layer=fwd.attention_s / full,
        attention_backward_s_per_layer=bwd.attention_s / full, virtual_stages=mp.virtual_stages,
        experts=spec.moe.num_experts * mp.ep if spec.moe else 0, sequence_parallel=mp.sequence_parallel,
        recompute_collectives=recompute_collectives, tp_comm_overlap=mp.tp_comm_overlap,
        expert_recompute=expert_recompute, pp_scatter_gather=mp.pp_scatter_gather, launch_blocking=launch_blocking,
        sp_async_backward=mp.sp_async_backward, sp_gather_bytes_per_element=mp.sp_gather_bytes_per_element,
        attention_column_share=attention_column_share, mlp_column_share=mlp_column_share,
        frozen_weights=mp.frozen_weights,
        gemm_forward_s=fwd.gemm_s, gemm_backward_s=bwd.gemm_s, moe_dispatcher=mp.moe_dispatcher,
        ep_ranks_per_node=mp.ep_ranks_per_node, ep_nic_bytes_per_s=mp.ep_nic_bytes_per_s,
        ep_nvlink_bytes_per_s=mp.ep_nvlink_bytes_per_s, moe_groups=spec.moe.n_group if spec.moe else 1,
        moe_groups_per_token=spec.moe.topk_group if spec.moe else 1, ep_comm_overlap=mp.ep_comm_overlap,
        compute_forward_s=fwd.seconds, compute_backward_s=bwd.seconds, micro_steps=micro_steps,
        moe_routing=mp.moe_routing, etp=mp.etp, ep_ring_bus_bytes_per_s=mp.ep_ring_bus_bytes_per_s,
        ep_load_factor=mp.ep_load_factor,
    )


def fsdp_units(spec: ModelSpec) -> int:
    """Units of a torch FSDP model whose hooks run in every forward: one per decoder layer (the wrap policy's
    ``_no_split_modules``, or ``fully_shard`` per layer) and the root (embedding, final norm, head)."""
    return spec.num_layers + 1


ZERO3_HOOKS_ON_ONE_RANK = (
    "A DeepSpeed ZeRO-3 engine on one rank pays its per-module hooks as on eight: DeepSpeedZeRoOffload.__init__ calls"
    " setup_zero_stage3_hooks whatever the world size (deepspeedai/DeepSpeed deepspeed/runtime/zero/parameter_offload.py"
    " l.269 and l.343-355 @1d35db76a07b9aba002ddb98d793ec148275c6cf, v0.13.1; DeepSpeedZeroOptimizer_Stage3 builds it"
    " unconditionally, stage3.py l.177), and fetch_sub_module / release_sub_module keep their bookkeeping there; only"
    " the parameter all-gather takes its one-partition path. Measured, not fitted: tools/measure_zero3_one_rank_hooks.py"
    " (a fake process group of 1 or of 8 ranks, the rates' transformers 5.24 Qwen2 of 8 layers, 111 modules, ZeRO-3"
    " engine vs plain, deepspeed 0.19.8, torch 2.13.0+cpu, one thread, best of 8 interleaved rounds of 10, two runs"
    " each, 2026-12-03): per module, grad forward 162 / 174 us on one rank against 188 us on eight (a second 8-rank"
    " run, 497, was taken under load), backward 154 / 170 against 170 us: the 8-rank rates (175 / 160 us) are"
    " charged as they are")
"""Why ``train_step_time`` and ``forward_only_time`` charge ``rates.ZERO3_MODULE_*_HOST_S`` on one rank (a card that
states zero3 on one GPU: Qwen (1.0)'s finetune_ds.sh on a single A100). The gather, its reduce-scatter, the
backward's wait on it (``zero3_coupled_seconds``) and the reduce-bucket flush (``rates.ZERO3_REDUCE_BUCKET_HOST_S``,
not measured on one rank) stay multi-rank only."""


PEFT_LORA_CALLED_MODULES = 4
"""Modules whose forward runs per linear PEFT's LoRA wraps, beyond the wrapped linear itself (now its
``base_layer``): the ``lora.Linear`` wrapper, and in its ``forward`` ``lora_B(lora_A(dropout(x)))``, three more module
calls (``lora_dropout[adapter]`` an ``nn.Identity`` at dropout 0, ``lora_A[adapter]`` and ``lora_B[adapter]``, each an
``nn.Linear``; peft 0.21.2 wheel, peft/tuners/lora/layer.py ``Linear.forward`` l.1087-1102). DeepSpeed ZeRO-3 hooks
every submodule (``ZERO3_MODULE_*_HOST_S``), so each of the four pays its hooks."""


DSCHAT_LORA_CALLED_MODULES = 1
"""Modules DeepSpeed-Chat's LoRA adds per adapted linear: ``LinearLayer_LoRA`` replaces the ``nn.Linear`` (one module
for one) and its ``forward`` calls ``self.lora_dropout`` (``nn.Identity`` at dropout 0), the factors being plain
parameters (deepspeedai/DeepSpeedExamples applications/DeepSpeed-Chat/dschat/utils/module/lora.py
@e86d0c6d38d65158836c275e2d7b6a8f8e92f026 ``LinearLayer_LoRA.forward``)."""


def peft_lora_called_modules(*, adapted_calls: float, per_call: int = PEFT_LORA_CALLED_MODULES) -> float:
    """Modules a LoRA implementation adds to a forward over ``adapted_calls`` adapted-linear calls, ``per_call`` each
    (PEFT: ``PEFT_LORA_CALLED_MODULES``; DeepSpeed-Chat: ``DSCHAT_LORA_CALLED_MODULES``); a stacked expert parameter's
    ``ParamWrapper`` is priced apart (``inventory.peft_param_wrapper_calls``)."""
    if adapted_calls < 0 or per_call < 0:
        raise ValueError("peft_lora_called_modules: adapted_calls >= 0 and per_call >= 0")
    return float(per_call * adapted_calls)


def zero3_hooked_modules(spec: ModelSpec, *, expert_loop: bool = False, leaf: bool = True) -> int:
    """Modules of a transformers causal LM whose forward runs, each hooked by DeepSpeed ZeRO-3: per decoder layer the
    layer, its attention and projections (q, k, v, o; MLA's q_a, q_a norm, q_b, kv_a, kv_a norm, kv_b, o), q/k norms,
    the MLP with its linears and ``act_fn``, the layer norms (a Qwen2 layer: 13, Qwen3 15, counted on transformers
    5.24); an MoE block as itself, its router, the fused experts and their ``act_fn`` (transformers 5), the shared
    expert; under ``expert_loop`` (transformers < 5) the block, its router and every expert's MLP (the MLP, three
    linears, ``act_fn``: all experts get tokens, as ``expert_loop.zero3_expert_gathers`` assumes), or the block alone
    when it is a ZeRO-3 ``leaf`` (its children are not hooked); plus ``rates.HF_ROOT_MODULES``. Linear-attention
    layers are counted as attention layers (an approximation)."""
    attn = 1 + (7 if spec.mla is not None else 4) + (2 if spec.qk_norm else 0)
    dense_mlp = 2 + (3 if spec.mlp_gated else 2)
    moe_layers = spec.num_moe_layers
    if spec.moe is None:
        moe_mlp = dense_mlp
    elif expert_loop:
        moe_mlp = 1 if leaf else 2 + 5 * spec.moe.num_experts
    else:
        shared = (2 + (3 if spec.mlp_gated else 2) + int(spec.moe.shared_expert_gate)
                  if spec.moe.shared_expert_intermediate_size else 0)
        moe_mlp = 4 + shared
    per_layer = 1 + attn + spec.norms_per_layer
    return (spec.num_layers * per_layer + moe_layers * moe_mlp + (spec.num_layers - moe_layers) * dense_mlp
            + HF_ROOT_MODULES)


ZERO3_NORM_KERNELS_PER_TENSOR = 2
"""Kernels DeepSpeed ZeRO-3's step launches per trained parameter for the gradient norm: ``step`` calls
``_get_norm_groups`` unconditionally, and without CPU offload ``get_grad_norm_direct`` loops over the rank's gradient
partitions in Python, ``g.to(device, non_blocking=True).double().norm(2)`` each (the ``to`` a no-op on the same
device; the ``double`` cast and the norm two kernels), before one ``stack`` / ``pow`` / ``sum``
(deepspeedai/DeepSpeed deepspeed/runtime/zero/stage3.py l.1761-1801 and l.1881-1888, ``step`` l.2108
@bdba8231bc8fc17980a5941437e6363dac69418d, v0.16.9; the same loop at v0.17.1 2ce55057999bdf1c9bf26cb5f000a8a9fb97e2d9).
Every rank holds a partition of every parameter, so the loop runs over all trained tensors at any world size: a
transformers < 5 MoE's per-expert linears make it tens of thousands of launches (Qwen3-30B-A3B: 18,432 expert
weights of 18,867)."""


def zero3_grad_norm_kernels(*, tensors: int) -> float:
    """Kernels of DeepSpeed ZeRO-3's per-partition gradient norm over ``tensors`` trained tensors
    (``ZERO3_NORM_KERNELS_PER_TENSOR`` each, and the ``stack``, ``pow`` and ``sum`` that join them)."""
    if tensors < 0:
        raise ValueError("zero3_grad_norm_kernels: tensors >= 0")
    return float(ZERO3_NORM_KERNELS_PER_TENSOR * tensors + 3) if tensors else 0.0


def with_zero3_grad_norm(opt: OptimizerTime, *, rates: DeviceRates, kernels: float) -> OptimizerTime:
    """``opt`` with the per-partition norm's ``kernels`` added: launched from a bare Python loop, priced on the host
    as the optimizer's other bare-loop kernels (``rates.host_s_per_backward_kernel``), each at least
    ``rates.device_s_per_kernel_min`` on the device (the partitions are small: a 1.57M-element expert weight over
    16 ranks is 98k elements). ``opt`` is priced with ``optimizer_seconds(clip_norm=False)``: this loop is the step's
    one gradient norm, so the clip keeps only its scale (``optimizer_time.CLIP_SCALE_KERNELS``), and the norm's read of
    the gradients stays counted once, in the clip's bytes (no bytes are added here)."""
    host = opt.host_s + kernels * rates.host_s_per_backward_kernel
    device = opt.device_s + kernels * rates.device_s_per_kernel_min
    return OptimizerTime(max(host, device), device, host, opt.bytes_moved, opt.kernels + kernels)


def zero3_reduce_buckets(*, grad_numels: tuple[int, ...], bucket_numel: int) -> int:
    """Gradient reduce buckets DeepSpeed ZeRO-3 flushes in one backward whose gradients become ready in the order of
    ``grad_numels`` (elements each): a gradient that would take a non-empty bucket past ``bucket_numel`` elements
    first flushes it (``reduce_independent_p_g_buckets_and_remove_grads``: ``if bucket.elements + param.ds_numel >
    self.reduce_bucket_size and bucket.elements > 0``), so a gradient larger than the bucket is reduced alone; the
    backward's epilogue flushes the last one (``independent_gradient_partition_epilogue`` l.1407; deepspeed 0.19.8
    from PyPI, deepspeed/runtime/zero/stage3.py l.1569-1590). Under the HF Trainer's ``auto`` (hidden^2 elements) nearly
    every linear weight is a bucket of its own."""
    if bucket_numel < 1:
        raise ValueError("zero3_reduce_buckets: bucket_numel >= 1")
    buckets, held = 0, 0
    for n in grad_numels:
        if n < 0:
            raise ValueError("zero3_reduce_buckets: gradient sizes >= 0")
        if held > 0 and held + n > bucket_numel:
            buckets, held = buckets + 1, 0
        held += n
    return buckets + (1 if held > 0 else 0)


ZERO3_REDUCE_EVENTS_OUTSTANDING = 2
"""DeepSpeed ZeRO-3's ``max_param_reduce_events``: before it issues a bucket's reduce, the host drops the completed
reduce events and, while more than this many are outstanding, waits on the oldest (``__reduce_and_partition_ipg_grads``:
``if len(self.param_reduce_events) > self.max_param_reduce_events: self.param_reduce_events.popleft().synchronize()``;
deepspeed 0.19.8 from PyPI, deepspeed/runtime/zero/stage3.py l.462, 1663-1667). A bucket's reduce first waits for the
compute stream (``reduce_and_partition_stream.wait_stream(default_stream)`` as each gradient joins the bucket), so
the host can be at most three buckets ahead of the device's backward."""


def zero3_coupled_seconds(*, grad_groups: tuple[tuple[int, ...], ...], bucket_numel: int, backward_host_s: float,
                          backward_device_s: float, recompute_host_s: float = 0.0,
                          recompute_device_s: float = 0.0) -> float:
    """Seconds of one micro-step's recompute + backward under DeepSpeed ZeRO-3 when the host may run only
    ``ZERO3_REDUCE_EVENTS_OUTSTANDING`` + 1 reduce buckets ahead of the device: a replay of the backward gradient by
    gradient (``grad_groups``: the head's, each decoder layer's, the input embedding's, in backward order). Each
    gradient takes an equal share of ``backward_host_s`` (the hooks and launches are per module, about one per
    gradient) and a share of ``backward_device_s`` in proportion to its elements (a linear's weight-gradient and
    input-gradient GEMMs scale with its weight); under gradient checkpointing each layer's recompute (an equal share
    of ``recompute_host_s`` / ``recompute_device_s``) runs before its gradients, with no reduce of its own. The host
    issues a gradient's kernels, then its hook flushes the bucket when the gradient would overflow it
    (``zero3_reduce_buckets``): that bucket's reduce is ready when the device has run the kernels queued at its last
    gradient, and the host first waits for the oldest outstanding reduce while more than
    ``ZERO3_REDUCE_EVENTS_OUTSTANDING`` are; the epilogue flushes the last bucket and synchronises the reduce stream
    (``independent_gradient_partition_epilogue``, stage3.py l.1407-1414). The reduces' own time is the communication
    phase's. With buckets as large as the model the result is ``max(host, device)``; with one gradient per bucket
    (the HF Trainer's auto) a layer's host-heavy small modules cannot hide behind its GEMM-heavy ones."""
    numels = [n for g in grad_groups for n in g]
    if not numels or bucket_numel < 1:
        return max(backward_host_s + recompute_host_s, backward_device_s + recompute_device_s)
    total = float(sum(numels)) or 1.0
    h_grad = backward_host_s / len(numels)
    layers = max(0, len(grad_groups) - 2)
    rh = recompute_host_s / layers if layers else 0.0
    rd = recompute_device_s / layers if layers else 0.0
    host = device = 0.0
    held, ready = 0, 0.0
    events: list[float] = []

    def flush() -> None:
        nonlocal host, held
        while events and events[0] <= host:
            events.pop(0)
        if len(events) > ZERO3_REDUCE_EVENTS_OUTSTANDING:
            host = max(host, events.pop(0))
        events.append(ready)
        held = 0

    for g, group in enumerate(grad_groups):
        if 0 < g <= layers and (rh or rd):
            host += rh
            device = max(device, host) + rd
        for n in group:
            host += h_grad
            device = max(device, host) + backward_device_s * n / total
            if held > 0 and held + n > bucket_numel:
                flush()
            held += n
            ready = device
    if held:
        flush()
    return max(host, device)


def _with_host_seconds(t: PassTime, *, hooks_s: float, serial: bool = False) -> PassTime:
    """``t`` with ``hooks_s`` more host time and no more device work: the pass is paced by the larger of the two;
    ``serial``: the host waits for every kernel (``launch_blocking_syncs``), so the hooks' seconds add in full."""
    if hooks_s <= 0.0:
        return t
    device = t.gemm_s + t.attention_s + t.memory_s
    seconds = (t.seconds + hooks_s if serial
               else t.seconds - max(device, t.host_s) + max(device, t.host_s + hooks_s))
    return PassTime(seconds, t.gemm_s, t.attention_s, t.memory_s, t.host_s + hooks_s, t.sync_s)


@lru_cache(maxsize=8192)
def forward_only_time(
    spec: ModelSpec, *, rates: DeviceRates, micro_batch_size: int, seq_len: int, micro_steps: int,
    adapter: Adapter | None = None, eager_attention: bool = False, parallel: Parallel = Parallel(),
    gathered_weight_bytes: float = 0.0, count_scale: float = 1.0, memory_factor: float = 1.0,
    kernel_factor: float = 1.0, attention_context: int | None = None, expert_parallel: int = 1,
    expert_token_shards: float = 1.0, expert_load_factor: float = 1.0, fp8: bool = False, fp8_weight_cache: bool = False, fp8_params: bool = False,
    fp8_casts: CastTraffic | None = None, fp8_layer_share: float = 1.0,
    packed_flash_syncs: bool = False, expert_loop: bool = False, zero3_expert_leaf: bool = True,
    hooked_units: int = 0, fsdp2_copies: bool = False, unshard_once: bool = False, expert_loop_every: bool = False,
    expert_loop_stacked: bool = False, expert_hit_share: float | None = None, attention_kernel: str = "auto",
    nemo_rl_loss: str = "", loss_sequences: float = 1.0, fused_cross_entropy: bool = False,
    megatron_experts: bool = False, expert_streams: bool = False,
    expert_padding: bool = False, head: bool = True,
    moe_eager_launch: bool = False, entropy_bytes_per_logit: float = 0.0, entropy_kernels: int = 0,
    rope_loop_samples: float = 0.0, rope_loop_context_parallel: int = 1, a2a_thd_sequences: float = 0.0,
    rope_loop_form: ThdRopeLoop = ThdRopeLoop.COPY,
    te_ring_context_parallel: int = 1, head_positions: int | None = None,
    te_layers: bool = False, window_mask: bool = False, mask_layers: int = 0, window_mask_dtype_bytes: float = 2.0,
    attention_fp8: str = "", work_cv: float = 0.0, data_ranks: int = 0, host_shard_bytes_per_s: float = 0.0,
    fsdp2_fp32_outputs: bool = False, adapter_enabled: bool = True,
    moe_dispatcher: MoeDispatcher = MoeDispatcher.ALLTOALL, fused_expert_mlp: bool = False,
    tensor_parallel_comm_s: float = 0.0, launch_blocking: bool = False, model_dtype_bytes: float | None = None,
) -> ForwardOnlyPass:
    """A no-grad forward over ``micro_steps`` micro-batches (log-probs, values, rewards) on one GPU:
    the layers and the head (the log-softmax and gather cost about what the loss does), plus the
    per-layer all-gathers a sharded model leaves exposed. ``model_dtype_bytes``: as ``inventory.step_inventory`` (4: a role
    model loaded in float32 and run without autocast, its GEMMs at the card's fp32 rate, ``gemm._model_compute_s``). ``expert_parallel`` / ``expert_token_shards``: as
    ``inventory.step_inventory`` (an expert-parallel shard's router and dispatch). ``fp8`` / ``fp8_weight_cache``:
    as ``train_step_time`` (a model trained in fp8 runs its no-grad forwards in fp8 too: Megatron-Core's fp8
    context wraps every forward, torchao's Float8Linear is the module; ``fp8_casts``: who casts, as
    ``train_step_time``); ``fp8_params``: fp8 primary weights, as
    ``train_step_time``: no weight casts (the optimizer step writes the fp8 weights: Megatron fp8_utils.py
    quantize_param_shard l.396-453 @d98e8a64), and a forward needs no weight transpose; ``packed_flash_syncs``,
    ``expert_loop`` / ``expert_loop_every`` / ``expert_hit_share``: as ``train_step_time`` (the loop's per-expert
    GEMMs, kernels and host syncs; a no-grad pass
    holds no ZeRO-3 expert gathers beyond the sharded weights' own all-gather below).

    Host per kernel: ``rates.nograd_forward_host_s_per_kernel`` (the training steps' identified
    forward-plus-backward sum split by the CPU-measured per-op ratios of a grad forward, its backward and a no-grad
    forward). ``hooked_units``: FSDP units whose forward hooks run in every micro-batch (a sharded model not
    unsharded before the pass: verl's ``compute_log_prob`` loops ``_forward_micro_batch`` under ``torch.no_grad()``
    on the FSDP module, volcengine/verl verl/workers/actor/dp_actor.py l.179-225
    @2c8b2b995f36a7cd159b5a9beb5d5ed37cae0fc1, l.418-472 @b178a3cd56f58b2d502255daba591e92833930a7), each
    ``fsdp_unit_host_seconds(grad=False)`` (FSDP1's or FSDP2's, ``parallel.fsdp2``) of host time per micro-batch on
    top of the kernels' (0: unsharded, or kept unsharded across the pass, ``unshard_once``). NeMo RL's
    ``unshard_fsdp2_model`` does not keep it so: its layers are resharded after every micro-batch's forward (the RL
    log-prob passes count these units for its DTensor policy), so its passes pay the hooks too.
    ``attention_kernel``: as ``train_step_time``.
    Strategy zero3 (one rank too, ``ZERO3_HOOKS_ON_ONE_RANK``): a DeepSpeed engine's per-module hooks, ``zero3_hooked_modules`` x
    ``rates.ZERO3_MODULE_FORWARD_HOST_S`` per micro-batch, the experts counted as ``train_step_time`` counts them
    (fused; under ``expert_loop`` every expert's modules, or the block alone where ``zero3_expert_leaf``).

    ``fsdp2_copies`` (FSDP2, ``fully_shard``, under fsdp / fsdp_grad_op / hsdp over more than one rank): each
    all-gather's copy-out on the compute stream, as ``fsdp2_copy_seconds`` charges a training step, without the
    reduce-scatter copy-in (no gradients): the gathered bytes read and written, in ``memory_s``. Which units are
    gathered how often (pytorch/pytorch @cf30153c4c131c8164ee7798e5022d810682e2cb, the torch 2.13.0 wheel,
    ``torch/distributed/fsdp/_fully_shard/``): the root keeps its parameters after forward (``_fsdp_state.py``
    l. 203-207 ``post_forward_mesh_info = None``; ``_fsdp_param_group.py`` l. 499-502 ``reshard`` returns in
    FORWARD), and a no-grad pass runs no backward to reshard them, so the next micro-batch's ``unshard`` is a no-op
    (l. 375-376): the root's share (``root_unit_share``) is gathered once a pass, the other units every micro-batch
    (fsdp_grad_op: every unit once). ``unshard_once``: the whole model unsharded once before the pass and kept so
    (FSDP2 ``reshard_after_forward=False`` on every unit, or ``set_reshard_after_forward(False)``): one copy-out a
    pass; an explicit ``unshard()`` alone is not that (``_fsdp_hooked_units``). FSDP1 has no copy-out (its views read the
    flat all-gather buffer). ``nemo_rl_loss`` / ``loss_sequences``: as ``inventory.step_inventory`` (NeMo RL Megatron's
    packed log-prob head, ``megatron_logprob``); ``fused_cross_entropy``: as ``inventory.step_inventory`` (the log-probs
    from flash-attn's kernel: verl's ``logprobs_from_logits``, ``memory.logits`` module doc). ``megatron_experts`` /
    ``expert_streams``, ``expert_padding`` and ``head``: as ``train_step_time`` (the log-prob forward runs the
    training forward's expert modules; False: the timed pipeline rank holds no output head), so a log-prob pass prices the layers the training
    pass of the same card prices. ``moe_dispatcher`` / ``fused_expert_mlp``: as ``inventory.step_inventory`` (the
    dispatcher's routed-row work and, for gpt-oss experts, its float32 bias loop or the op fuser that runs neither
    the eager activation nor the bias loop; ``ModelParallel.moe_dispatcher`` / ``fused_expert_mlp``). ``entropy_bytes_per_logit`` / ``entropy_kernels``: an entropy over every token's
    logits the pass also takes (verl's old-policy pass, ``inventory.VERL_ENTROPY_COMPILED_BYTES``), memory-bound bytes
    and kernels on the head; 0: none. Not for a value or reward head (``spec.head_outputs``). ``rope_loop_samples`` /
    ``rope_loop_context_parallel`` / ``a2a_thd_sequences`` / ``te_ring_context_parallel``: as ``train_step_time``
    (Megatron-Core's per-sample thd RoPE loop, Transformer Engine's a2a thd reorders and its ring glue run in the
    forward whether or not it records a graph). ``fsdp2_fp32_outputs``: as ``train_step_time`` (the forward's casts).
    ``te_layers``: as ``train_step_time`` (the forward's share, against the no-grad per-kernel rate charged).
    ``window_mask``: as ``inventory.step_inventory`` (the sliding-window layers run SDPA with transformers'
    materialised window mask, which ``_ignore_causal_mask_sdpa`` builds whether or not the pass records a graph:
    every key block of those layers and the mask's conversion; ``memory.attention.sdpa_window_masked``);
    ``mask_layers`` / ``window_mask_dtype_bytes``: as ``train_step_time``. ``attention_fp8``: as ``train_step_time``
    (Transformer
    Engine's fp8 attention runs in every forward under the fp8 autocast, a no-grad one included: its casts and the fp8
    kernel's rate).
    ``work_cv``: relative spread of one micro-batch's tokens across the ``data_ranks`` data-parallel ranks (0: all the
    gathering ranks) that hold different sequences, as ``train_step_time``'s: the sharded ranks gather every layer
    together, so each micro-batch runs at the pace of the rank with the most tokens (``collectives.lockstep_excess``,
    charged on the pass as the speed spread is). 0 for fixed-length sequences.

    The slowest rank (``collectives.slowest_rank_excess``, the per-GPU speed spread, and ``work_cv`` above) is charged
    as ``train_step_time`` charges the update's: on the pass's device time beyond its host-paced time
    (``lockstep_wait_seconds``), so a launch-bound pass, whose GPU idles between the host's launches, absorbs it. A
    sharded pass (``zero3`` / ``fsdp`` / ``hsdp``) waits at every layer's gather; an unsharded one over more than one
    rank (``ddp``, ``zero1`` / ``zero2``, ``fsdp_grad_op``, Megatron's data / tensor / pipeline ranks), and a sharded
    one handed no ``gathered_weight_bytes`` (no per-layer gather to hold the ranks in lockstep), waits once, at
    the end: the controller collects every rank's share before the phase ends (NVIDIA-NeMo/RL
    ``nemo_rl/models/policy/lm_policy.py`` ``get_logprobs`` l.224-241 and ``get_reference_policy_logprobs``
    l.286-305: each worker's shard run by ``run_all_workers_sharded_data``, then ``get_all_worker_results``, whose
    ``MultiWorkerFuture.get_results`` calls ``ray.get`` on every worker's future, ``nemo_rl/distributed/
    worker_groups.py`` l.41-100, @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf; volcengine/verl's worker calls, the
    actor's ``compute_log_prob`` among them, run ``ray.get`` on every rank's output before ``collect_fn``,
    ``verl/single_controller/ray/base.py`` ``func_generator`` l.48-62 @b178a3cd56f58b2d502255daba591e92833930a7),
    and the slowest GPU's share takes ``1 + excess`` of the others' device time (Sinha et al., SC'22, arXiv
    2208.11035: a GPU's speed is its own, so the slowest stays slowest for the whole pass). Only the speed spread
    there: no per-layer lockstep, so no per-micro-batch token draw; a rank's share is many sequences (verl also
    balances the shares' tokens, ``ray_trainer.py`` ``_balance_batch``).

    ``host_shard_bytes_per_s``: the sharded weights live in pinned host memory (FSDP's CPU offload of parameters,
    ``CPUOffload(offload_params=True)`` / ``CPUOffloadPolicy``), copied to the GPU at this rate, unit by unit, before
    each all-gather: FSDP1's ``FlatParamHandle.pre_unshard`` runs ``flat_param_to(device, non_blocking=True)`` on
    the pre-unshard stream, which the all-gather's stream waits for, and a frozen unit's reshard only points back at
    its pinned host shard (no copy back), every micro-batch (pytorch/pytorch torch/distributed/fsdp/_flat_param.py
    ``pre_unshard`` l.1307-1340, the pinned ``_local_shard`` l.1260, torch 2.13.0; ``_runtime_utils._unshard``). The
    rank's shard of each layer's gathered bytes is added to that layer's gather, which the previous layer's compute
    hides as it hides the gather. The root unit (embeddings, head: ``root_unit_share``) is not resharded after a
    forward (FSDP1 ``_post_forward_reshard`` frees only non-root units; FSDP2's root keeps its parameters,
    ``fsdp2_copies``' note), so its shard is copied once a pass, exposed. 0: the shards are on the GPU.

    PEFT's adapters run in a no-grad forward as in the training forward (``train_step_time``'s mechanisms, forward
    only): each ``ParamWrapper`` (LoRA on transformers v5's 3-D expert stacks and the router weight,
    ``inventory.peft_param_wrapper_calls``) registers and removes its parametrization around every call, priced at
    ``rates.PEFT_PARAM_WRAPPER_HOST_S`` x ``rates.PEFT_PARAM_WRAPPER_NOGRAD_RATIO`` per call and micro-batch; its merge
    is evaluated twice per forward, grad or not (``rates.PEFT_PARAM_WRAPPER_NOGRAD_RATIO``), which the shared inventory
    already counts (``<name>.BA`` and ``<name>.BA.check``, ``inventory.peft_merged_expert_gemms``). FSDP1 with PEFT's
    wrap policy (``parallel.fsdp_adapter_units``): each adapter linear is a unit whose no-grad forward hooks run with
    the layers' (``hooked_units`` > 0), two per adapted call at ``rates.FSDP_ADAPTER_UNIT_FORWARD_HOST_S``, and under
    FULL_SHARD over more than one rank the rate limiter paces the adapted projections by them
    (``collectives.rate_limited_adapter_units_seconds``), as in the training forward. The limiter's queue then also
    holds the adapter units' frees: FSDP1's forward wrapper runs ``_post_forward_reshard`` after every unit's forward
    whatever the grad mode (torch/distributed/fsdp/fully_sharded_data_parallel.py l.841-859, ``_runtime_utils.py``
    ``_post_forward_reshard`` l.486-499, ``_reshard`` l.320-326 queue a free event for every non-root FULL_SHARD unit;
    torch 2.13.0 @cf30153c4c131c8164ee7798e5022d810682e2cb), so each layer's gather waits for its layer's compute
    and is exposed in full, as in the training forward (``collectives.rate_limiter_exposes_layer_gathers``); only
    the host copy of a CPU-offloaded shard, issued before the limiter's wait (``_unshard`` l.292-303), still runs
    behind the previous layer. A pass under ``disable_adapter()`` runs no adapter unit: the queue holds the layers'
    frees alone and the gathers hide as without adapter units.
    ``adapter_enabled``: False for a pass run inside PEFT's ``disable_adapter()`` (the reference log-probs of a LoRA
    policy, ``RefPlacement.LORA_DISABLED``): every LoRA layer then calls its base layer alone (peft 0.21.2
    peft/tuners/lora/layer.py ``Linear.forward`` and ``ParamWrapper.forward`` l.2698-2713, ``if
    self.disable_adapters``), so no adapter GEMM, merge, ``ParamWrapper`` cycle or adapter unit runs (a tiny Qwen3-MoE
    with LoRA all-linear, no-grad forward: 29 ``mm`` and 8 ``baddbmm`` enabled, 11 and none disabled); a 4-bit
    base is still dequantised.

    ``tensor_parallel_comm_s``: seconds per micro-batch of the pass's tensor-parallel collectives on its compute
    stream. What they add is priced as the training step's forward prices its own
    (``tensor_parallel_slack_exposed_s``: a host-bound micro-batch's GPU slack absorbs them; ``launch_blocking``
    leaves none) and returned as ``tensor_parallel_s`` over the micro-batches, not counted in the seconds returned
    (the caller adds it, ``plan.rl_passes``). Before, the no-grad passes paid their TP whole while the update's
    forward, the same layers with the same host pacing, had its slack absorb them. The per-layer
    gathers and host copies run on their own streams beside the compute stream, so they hide behind the micro-batch's
    paced time plus these waits (``data_parallel_window_s``), as the training step's data-parallel traffic does: left
    out, a communication-bound log-prob pass paid ``max(gathers, forward) + TP`` while the update's forward paid
    ``max(gathers, forward + TP)``."""
    if adapter is not None and not adapter_enabled:
        adapter = replace(adapter, targets=())  # the frozen (possibly 4-bit) base alone: no module is adapted
    inv = step_inventory(spec, micro_batch_size=micro_batch_size, seq_len=seq_len, adapter=adapter,
                         head_positions=head_positions, model_dtype_bytes=model_dtype_bytes,
                         window_mask=window_mask, window_mask_dtype_bytes=window_mask_dtype_bytes,
                         mask_layers=mask_layers,
                         eager_attention=eager_attention, attention_context=attention_context,
                         expert_parallel=expert_parallel, expert_token_shards=expert_token_shards,
                         expert_load_factor=expert_load_factor, fp8=fp8,
                         fp8_weight_casts=_fp8_weight_casts(fp8=fp8, fp8_params=fp8_params,
                                                            fp8_weight_cache=fp8_weight_cache, micro_steps=micro_steps),
                         fp8_casts=fp8_casts, fp8_layer_share=fp8_layer_share, packed_flash_syncs=packed_flash_syncs, expert_loop=expert_loop,
                         expert_loop_every=expert_loop_every, expert_loop_stacked=expert_loop_stacked,
                         expert_hit_share=expert_hit_share, nemo_rl_loss=nemo_rl_loss,
                         fsdp2_fp32_outputs=fsdp2_fp32_outputs,
                         loss_sequences=loss_sequences, fused_cross_entropy=fused_cross_entropy,
                         megatron_experts=megatron_experts, expert_streams=expert_streams,
                         expert_padding=expert_padding, moe_eager_launch=moe_eager_launch,
                         moe_dispatcher=moe_dispatcher, fused_expert_mlp=fused_expert_mlp,
                         rope_loop_samples=rope_loop_samples, rope_loop_context_parallel=rope_loop_context_parallel,
                         rope_loop_form=rope_loop_form,
                         # Megatron-Core's unfused RoPE under a YaRN concentration (inventory.megatron_rope_work)
                         megatron_rope=te_layers and spec.rotary_concentration != 1.0,
                         a2a_thd_sequences=a2a_thd_sequences, te_ring_context_parallel=te_ring_context_parallel,
                         attention_fp8=attention_fp8, hbm_bytes_per_s=rates.hbm_bytes_per_s)
    if entropy_bytes_per_logit and spec.head_outputs is None:
        logits = float(micro_batch_size) * seq_len * spec.vocab_size
        inv = replace(inv, head_forward=replace(
            inv.head_forward, memory_bytes=inv.head_forward.memory_bytes + entropy_bytes_per_logit * logits,
            kernels=inv.head_forward.kernels + entropy_kernels))
    no_grad = replace(rates, host_s_per_forward_kernel=nograd_forward_host_s_per_kernel(
        host_s_per_forward_kernel=rates.host_s_per_forward_kernel,
        host_s_per_backward_kernel=rates.host_s_per_backward_kernel, backward_kernel_factor=BACKWARD_KERNEL_FACTOR))
    kw = dict(rates=no_grad, seq_len=attention_context or seq_len, memory_factor=memory_factor,
              kernel_factor=kernel_factor, backward=False, attention_kernel=attention_kernel,
              attention_fp8=attention_fp8,
              fp8_precise_forward=bool(fp8 and fp8_casts is not None and fp8_casts.forward_split_accumulator))
    one = pass_seconds(inv.layers_forward, **kw).scaled(count_scale)  # the layers' hooks below, then the head (sequenced)
    head_one = (pass_seconds(inv.head_forward, **kw) if head else ZERO_PASS).scaled(count_scale)
    one = _with_host_seconds(one, hooks_s=hooked_units * fsdp_unit_host_seconds(fsdp2=parallel.fsdp2, grad=False)[0])
    if te_layers:  # Transformer Engine's Python forward beyond the per-kernel rate charged (compute.te_host)
        one = _with_host_seconds(one, hooks_s=te_forward_host_seconds(
            calls=te_linear_calls(spec), quantized=fp8, gpu_id=rates.gpu_id, casts=fp8_casts,
            host_s_per_forward_kernel=no_grad.host_s_per_forward_kernel * kernel_factor)
            + te_attention_select_host_seconds(spec, gpu_id=rates.gpu_id))
    if parallel.strategy == "zero3":  # a DeepSpeed ZeRO-3 engine's per-module hooks, one rank too
        modules = zero3_hooked_modules(spec, expert_loop=expert_loop,
                                       leaf=zero3_expert_leaf)
        one = _with_host_seconds(one, hooks_s=modules * ZERO3_MODULE_FORWARD_HOST_S)
    # PEFT's ParamWrapper cycles around every wrapped expert stack and router weight (peft_param_wrapper_calls), at
    # the no-grad share of the measured cycle
    wrapper_s = peft_param_wrapper_calls(spec, adapter=adapter, megatron_experts=megatron_experts,
                                         expert_streams=expert_streams, expert_loop=expert_loop,
                                         expert_loop_stacked=expert_loop_stacked) * PEFT_PARAM_WRAPPER_HOST_S
    one = _with_host_seconds(one, hooks_s=wrapper_s * PEFT_PARAM_WRAPPER_NOGRAD_RATIO * count_scale)
    # FSDP1 with PEFT's wrap policy: the adapter linears' own units hook every no-grad forward with the layers' units
    # (two per adapted call), and under FULL_SHARD the rate limiter paces the adapted projections by them
    adapted = (tuple(g.name[:-2] for g in inv.layers_forward.gemms if g.name.endswith(".A"))
               if (parallel.fsdp_adapter_units and adapter is not None and not parallel.fsdp2 and hooked_units > 0
                   and parallel.strategy in ("fsdp", "fsdp_grad_op", "hsdp")) else ())
    if adapted:
        adapter_units = 2 * sum(g.count for g in inv.layers_forward.gemms if g.name in adapted)
        one = _with_host_seconds(one, hooks_s=adapter_units * FSDP_ADAPTER_UNIT_FORWARD_HOST_S)
        if parallel.ranks > 1 and parallel.strategy in ("fsdp", "hsdp"):
            one = rate_limited(one, exposed_s=coll.rate_limited_adapter_units_seconds(projections=adapted_projections(
                inv.layers_forward, rates=no_grad, adapted=adapted, backward=False, dropout=adapter.dropout > 0,
                hooks_s=2 * FSDP_ADAPTER_UNIT_FORWARD_HOST_S, host_s_per_kernel=no_grad.host_s_per_forward_kernel,
                scale=count_scale, memory_factor=memory_factor, kernel_factor=kernel_factor)))
    one = sequenced(one, head_one)
    total = one.scaled(micro_steps)
    # the TP collectives the compute stream waits on, less what a launch-bound micro-batch's GPU slack absorbs, as in
    # the update's forward (tensor_parallel_slack_exposed_s)
    tensor_parallel_exposed_s = tensor_parallel_slack_exposed_s(comm_s=tensor_parallel_comm_s, passes=(one,),
                                                                launch_blocking=launch_blocking)
    # the per-unit transfers hide behind the compute stream's time, its TP waits included (data_parallel_window_s)
    window_s = data_parallel_window_s(paced_s=one.seconds, tensor_parallel_exposed_s=tensor_parallel_exposed_s)
    if parallel.strategy in ("zero3", "fsdp", "hsdp") and parallel.ranks > 1 and gathered_weight_bytes:
        if parallel.strategy == "hsdp":  # gathers over the shard group only (``hsdp_links``)
            links = hsdp_links(parallel, rates)
            ranks, bus, nodes = links.shard, links.shard_bus_bytes_per_s, links.shard_nodes
        else:
            ranks = parallel.ranks
            bus = data_ring_bus_bytes_per_s(parallel, rates, ranks=ranks)
            nodes = coll.group_nodes(ranks=ranks, ranks_per_node=parallel.gpus_per_node)
        layers = spec.num_layers
        ag = coll.all_gather_seconds(total_bytes=gathered_weight_bytes / layers, ranks=ranks, bus_bytes_per_s=bus,
                                     nodes=nodes,
                                     intra_link=coll.IntraLink.of(nvlink=rates.nvlink))
        gather_s = ag
        limiter_exposes = bool(adapted) and coll.rate_limiter_exposes_layer_gathers(
            adapter_units=True, fsdp2=parallel.fsdp2, reshard_after_forward=parallel.strategy in ("fsdp", "hsdp"),
            ranks=ranks)
        root_copy_s = 0.0
        if host_shard_bytes_per_s > 0:  # each layer's local shard copied from pinned host memory first (docstring)
            root = root_unit_share(spec, embedding_unit=fsdp2_copies)
            ag += gathered_weight_bytes * (1.0 - root) / layers / ranks / host_shard_bytes_per_s
            root_copy_s = gathered_weight_bytes * root / ranks / host_shard_bytes_per_s
        if limiter_exposes:
            # FSDP1's rate limiter with the adapter units running: each layer's gather waits for its layer's compute
            # (collectives.rate_limiter_exposes_layer_gathers), only its host copy, issued before the wait
            # (``_unshard``: ``pre_unshard`` then ``dequeue_if_needed``), runs behind the previous layer
            copy_s = ag - gather_s
            exposed = micro_steps * layers * (gather_s + max(0.0, copy_s - window_s / layers)) + root_copy_s
        else:
            exposed = _unit_pipeline_exposed_seconds(unit_s=ag, layers=layers, pass_s=window_s,
                                                     micro_steps=micro_steps, once_s=root_copy_s)
        # the per-layer gathers hold the ranks in lockstep: the slowest sets the pace (collectives.slowest_rank_excess),
        # and with unequal micro-batches the rank holding the most tokens (collectives.lockstep_excess, ``work_cv``);
        # as in train_step_time, only its device time beyond the host-paced pass (lockstep_wait_seconds). The speed
        # spread is over every rank (``hsdp_phase_end_ranks``): under hsdp the gathers tie the shard group only,
        # but the phase still ends when the slowest GPU of all the replicas returns its share
        exposed += lockstep_wait_seconds(
            device_s=total.gemm_s + total.attention_s + total.memory_s, paced_s=total.seconds - total.sync_s,
            excess=coll.lockstep_excess(ranks=hsdp_phase_end_ranks(parallel, gather_ranks=ranks),
                                        data_ranks=min(ranks, data_ranks or ranks), work_cv=work_cv))
        total = PassTime(total.seconds + exposed, total.gemm_s, total.attention_s, total.memory_s, total.host_s,
                         total.sync_s)
    elif parallel.ranks > 1:
        # no per-layer gathers (unsharded, or a sharded pass handed no gathered bytes), but the phase still ends when
        # the slowest of the ranks returns its share (the controller collects every rank's results): its device time
        # beyond the host-paced pass (lockstep_wait_seconds)
        wait = lockstep_wait_seconds(device_s=total.gemm_s + total.attention_s + total.memory_s,
                                     paced_s=total.seconds - total.sync_s,
                                     excess=coll.slowest_rank_excess(ranks=parallel.ranks))
        total = PassTime(total.seconds + wait, total.gemm_s, total.attention_s, total.memory_s, total.host_s,
                         total.sync_s)
    elif host_shard_bytes_per_s > 0 and gathered_weight_bytes and parallel.ranks <= 1:
        # one rank: FSDP still wraps the model with its CPU offload and copies each unit's whole (unsharded) weights
        # in before the unit runs, hidden behind the previous unit's compute as the gathers above are
        layers = spec.num_layers
        root = root_unit_share(spec, embedding_unit=fsdp2_copies)
        exposed = _unit_pipeline_exposed_seconds(
            unit_s=gathered_weight_bytes * (1.0 - root) / layers / host_shard_bytes_per_s, layers=layers,
            pass_s=window_s, micro_steps=micro_steps, once_s=gathered_weight_bytes * root / host_shard_bytes_per_s)
        total = PassTime(total.seconds + exposed, total.gemm_s, total.attention_s, total.memory_s, total.host_s,
                         total.sync_s)
    if fsdp2_copies and parallel.strategy in ("fsdp", "fsdp_grad_op", "hsdp") and parallel.ranks > 1 \
            and gathered_weight_bytes:
        every_micro = (0.0 if unshard_once or parallel.strategy == "fsdp_grad_op"
                       else 1.0 - root_unit_share(spec, embedding_unit=True))
        gathered = gathered_weight_bytes * (1.0 + (micro_steps - 1) * every_micro)
        copy_s = fsdp2_copy_seconds(gathered_weight_bytes=gathered, root_share=0.0, trained_params=0.0,
                                    grad_bytes=0.0, reshard_after_forward=False, hbm_bytes_per_s=rates.hbm_bytes_per_s)
        total = PassTime(total.seconds + copy_s, total.gemm_s, total.attention_s, total.memory_s + copy_s,
                         total.host_s, total.sync_s)
    return ForwardOnlyPass(total.seconds, total.gemm_s, total.attention_s, total.memory_s, total.host_s, total.sync_s,
                           tensor_parallel_s=micro_steps * tensor_parallel_exposed_s)
