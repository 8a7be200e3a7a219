"""Optimizer step time: memory traffic per parameter, and kernels by implementation.

AdamW reads the parameter, its gradient and two moments, and writes the parameter and the
moments: ``w + g + 2s`` bytes in and ``w + 2s`` out per parameter (``w``, ``g``, ``s``: bytes of a
weight, a gradient, a state element). An fp32 master copy adds 4 in and 4 out, and the 16-bit copy
is written back (2). 8-bit optimizers (bitsandbytes) keep 1-byte states with a block scale
(the block scales are negligible) and dequantise/quantise in registers. SGD with momentum: one state.
Gradient clipping (the Trainer's default ``max_grad_norm=1.0``) reads every gradient for the norm
and reads and writes it for the scale.

Which bytes a card's precision gives (``plan.time._trained`` from ``plan.terms.trained_dtype_bytes`` and
``zero_master_states``), per parameter of the rank's shard, fused, without clipping:

* FSDP mixed precision, the card's ``precision.weights: fp32`` with ``compute: bf16`` (torchtitan ``training.dtype
  float32`` with ``mixed_precision_param bfloat16``, ``export.importers.read_torchtitan``; FSDP1 ``MixedPrecision``
  over an fp32 model): the shard the optimizer steps is the fp32 parameter itself (torch 2.13
  ``distributed/fsdp/_fully_shard/_fsdp_param.py`` ``init_dtype_attrs``: ``orig_dtype = sharded_param.dtype``, and
  ``all_gather_inputs`` casts the shard to ``param_dtype`` on its way into the all-gather, so no 16-bit copy is kept
  or written back; FSDP1 ``_flat_param.py`` ``_use_low_precision_shard`` copies the shard into a ``_mp_shard`` it
  frees after use); its gradient is fp32 (``_fsdp_collectives.py`` ``foreach_reduce`` reduce-scatters in
  ``reduce_dtype`` and casts the output to ``orig_dtype``; FSDP1 ``_runtime_utils.py``
  ``_cast_grad_to_param_dtype`` casts the sharded gradient to the flat parameter's dtype); the states follow the
  fp32 parameter. ``w = g = s = 4``, no master: 16 in, 12 out = 28 B (x 40 / 14 foreach);
* DeepSpeed ZeRO (bf16): bf16 parameters and gradients, an fp32 master partition and fp32 states: 14 in, 14 out
  = 28 B, of which 2 B the bf16 write-back; Megatron-Core's fp32 ``main_grad`` (``precision.grads fp32``): 30 B;
* pure bf16 (``precision.weights`` bf16 with no master, torchtune; also every FSDP card left at the default
  weights): ``w = g = s = 2``: 14 B.

The memory terms read the same fields, so a card that leaves an FSDP run's weights at bf16 is a pure-bf16 run to
both.

Kernels (PyTorch 2.x ``torch.optim.AdamW``), as ``trainfit trace --time`` counts them:

* ``fused``: ``_fused_adamw_`` over tensor lists, one launch per ``MULTI_TENSOR_CHUNK`` tensors, one
  pass over the data (the bytes above);
* ``foreach``: ``FOREACH_OPS`` = 8 ``_foreach_*`` ops, each one launch per chunk and each its own pass
  over its operands: the trace measures 40 bytes per parameter where the fused kernel moves 14
  (pure bf16), so ``MULTI_PASS_BYTES_FACTOR`` = 40 / 14;
* ``for_loop``: the same 8 ops per parameter tensor, each its own launch from Python, same bytes. When FSDP2
  (``fully_shard``) holds the parameters, gradients and states as DTensors (``dtensor_params``), each of those ops
  also goes through DTensor's dispatch first (``rates.DTENSOR_OP_HOST_S`` a op, measured); NeMo RL's DTensor policy
  runs exactly this (its configs set ``foreach: False, fused: False``, "when using Dtensor, we need to set foreach
  and fused to False": NVIDIA-NeMo/RL examples/configs/grpo_math_1B.yaml l.78-88
  @27d0af945b96c5bf9fa928bf45fd1a6ce016632d). A foreach op dispatches once for its list (0.3 us a tensor
  measured), not priced.

Sharded optimizers step only their rank's shard (``shard_params``). Megatron-Core's distributed optimizer under
expert parallel is two optimizers (a ``ChainedOptimizer``): one over the dense parameters, sharded over the
data x context-parallel group, one over the routed experts, sharded over the expert-data-parallel group
(NVIDIA/Megatron-LM @d98e8a64ddf34856e74b24714e3bedb2f5a39553 ``megatron/core/optimizer/__init__.py`` l. 1174-1247:
``filter_fn=lambda g: not g['is_expert_parallel']`` with ``data_parallel_group=intra_dp_cp_group``, then the
``expert_parallel_buffers`` with ``data_parallel_group=intra_expt_dp_group``; ``distrib_optimizer.py``
``_build_model_gbuf_range`` l. 200-245 splits each bucket into ``data_parallel_group.size()`` equal ranges). The
expert-data-parallel group (tp·cp·dp / (ep·etp) ranks) is usually smaller than the dense one, so a rank steps a
larger share of its experts: DeepSeek-V3 at pp 16, ep 16 on 256 GPUs steps all of its 16 local experts' states
(expert dp 1), not a sixteenth.

Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from trainfit.compute.rates import DTENSOR_OP_HOST_S, DeviceRates

MULTI_TENSOR_CHUNK = 110
"""Tensors per ``multi_tensor_apply`` launch: ATen's ``depth_to_max_tensors = {110, 64, 48, 36, 30}``
(pytorch/pytorch ``aten/src/ATen/native/cuda/MultiTensorApply.cuh`` @4b6fea91c74c185d6c4d58d88fffe6f41863919c), so 110
is the one-list figure (``_foreach_mul_`` on one list), not the 4-5 lists of ``_fused_adamw_`` (param, grad, two
moments: 36, 30), and a launch also stops at ``depth_to_max_blocks`` = 320 chunks of ``kChunkSize`` = 65536 elements
(21.0 M elements). Later versions of that file raise both for CUDA >= 13 builds (``CUDART_VERSION >= 13000``: 770
/ 448 / 336 / 252 / 210 tensors, 2240 blocks, the 32 KB kernel-argument limit, "naive values" from pytorch/pytorch
PR #134373). Checked (step-time benchmark): 36 tensors for fused, 64 for
foreach, and the 21 M-element cap move the H200 calibration rows by 1-3 points (Qwen3-30B-A3B LoRA fused -14 ->
-11 %), every subset median unchanged, all rows 10.2 -> 10.3 %; the rows span torch builds on both sides of CUDA 13,
so 110 stays."""
# ``_multi_tensor_adamw`` (capturable off, the step counts on the host): ``_foreach_mul_`` (weight decay), ``lerp_``,
# ``mul_``, ``addcmul_``, ``sqrt``, ``div_``, ``add_``, ``addcdiv_`` (pytorch/pytorch torch/optim/adamw.py
# @002d2f0bb40cf08beb74bce80f52ce4f2eda46a0)
FOREACH_OPS = 8
# ``_single_tensor_adamw``, per parameter: ``mul_``, ``lerp_``, ``mul_``, ``addcmul_``, ``sqrt``, the division,
# ``add_``, ``addcdiv_`` (``step_t += 1`` is a host tensor; torch/optim/adamw.py @002d2f0bb40cf08beb74bce80f52ce4f2eda46a0)
FOR_LOOP_OPS_PER_TENSOR = 8
MULTI_PASS_BYTES_FACTOR = 40.0 / 14.0
CLIP_KERNELS = 4
CLIP_SCALE_KERNELS = 1
"""Of the clip's kernels per chunk, the scale that remains when the gradient norm is taken elsewhere: DeepSpeed
ZeRO-3's ``step`` computes the norm in its own per-partition loop (``get_grad_norm_direct``, priced by
``training.zero3_grad_norm_kernels``) and clipping is then one ``mul_`` on each sub-group's flat fp32 gradient
(deepspeedai/DeepSpeed deepspeed/runtime/zero/stage3.py ``unscale_and_clip_grads``
@bdba8231bc8fc17980a5941437e6363dac69418d, v0.16.9), so the rest of ``CLIP_KERNELS`` (the foreach norm and its
join) is not launched a second time."""
HF_PARAM_GROUPS = 2
"""Parameter groups the HF Trainer hands its optimizer: the weight-decayed parameters and the rest
(transformers 5.24.0 wheel, transformers/trainer.py ``create_optimizer`` l.1273-1286: two groups, filtered by
``decay_parameters``)."""
ZERO12_NORM_KERNELS_PER_TENSOR = 2
"""Kernels DeepSpeed ZeRO-1/2's step launches per gradient of the rank's partition for the gradient norm:
``scaled_global_norm`` calls ``get_grad_norm_direct(self.averaged_gradients[i], self.params_in_partition[i])`` per
parameter group, which loops in Python over the partition's gradient views, ``torch.linalg.vector_norm(
g.data.double(), ord=2)`` each (the cast and the norm), then ``stack``, ``square``, ``sum`` and ``float``
(``ZERO12_NORM_JOIN_KERNELS``; deepspeedai/DeepSpeed deepspeed/runtime/zero/stage_1_and_2.py l.1676-1720,
l.1796-1815 @bdba8231bc8fc17980a5941437e6363dac69418d, v0.16.9); ``averaged_gradients[i]`` is the per-parameter
list ``get_flat_partition(..., return_tensor_list=True)`` builds (l.792-805)."""
ZERO12_NORM_JOIN_KERNELS = 4
"""The per-group join of ``get_grad_norm_direct`` (``stack``, ``square``, ``sum``, ``float``; deepspeedai/DeepSpeed
deepspeed/runtime/zero/stage_1_and_2.py l.1714-1716 @bdba8231bc8fc17980a5941437e6363dac69418d)."""
STATE_COUNT = {"adamw": 2, "adam": 2, "adamw_8bit": 2, "paged_adamw": 2, "paged_adamw_8bit": 2, "sgd": 1,
               "adafactor": 1, "lion": 1}


def shard_params(*, params: float, expert_params: float = 0.0, shards: int, expert_shards: int | None = None) -> float:
    """Trained parameters one rank's optimizer steps: the ``params − expert_params`` dense ones over ``shards``
    ranks, the ``expert_params`` routed-expert ones over ``expert_shards`` (default ``shards``; module docstring)."""
    dense = max(0.0, params - expert_params)
    return dense / max(1, shards) + max(0.0, expert_params) / max(1, shards if expert_shards is None else expert_shards)


@dataclass(frozen=True, slots=True)
class OptimizerTime:
    seconds: float
    device_s: float
    host_s: float
    bytes_moved: float
    kernels: float


def optimizer_bytes_per_param(
    *, optimizer: str, weight_bytes: float, grad_bytes: float, state_bytes: float, master: bool, clip: bool
) -> float:
    """Bytes read + written per trained parameter by one step."""
    states = STATE_COUNT.get(optimizer, 2)
    if "8bit" in optimizer:
        state_bytes = 1.0
    if master:
        per = (4 + grad_bytes + states * state_bytes) + (4 + states * state_bytes + weight_bytes)
    else:
        per = (weight_bytes + grad_bytes + states * state_bytes) + (weight_bytes + states * state_bytes)
    if clip:
        per += 2 * grad_bytes + grad_bytes
    return per


def optimizer_seconds(
    *, params: float, tensors: float, optimizer: str, impl: str, rates: DeviceRates, weight_bytes: float = 2.0,
    grad_bytes: float = 2.0, state_bytes: float = 4.0, master: bool = False, clip: bool = True,
    dtensor_params: bool = False, clip_norm: bool = True,
) -> OptimizerTime:
    """One step over ``params`` parameters in ``tensors`` tensors on one GPU (its shard). ``dtensor_params``: the
    parameters are DTensors (FSDP2), so a for-loop step's per-tensor ops each pay DTensor's dispatch
    (``rates.DTENSOR_OP_HOST_S``; module docstring). ``clip_norm`` False: the clip's norm is launched by the caller
    (DeepSpeed ZeRO-3's per-partition loop), so only its scale's ``CLIP_SCALE_KERNELS`` are counted here; the norm's
    read of the gradients stays in the bytes, counted once."""
    per = optimizer_bytes_per_param(optimizer=optimizer, weight_bytes=weight_bytes, grad_bytes=grad_bytes,
                                    state_bytes=state_bytes, master=master, clip=clip)
    fused = impl in ("fused", "apex_distributed")  # Apex's DistributedFusedAdam: one multi-tensor kernel too
    moved = params * per * (1.0 if fused else MULTI_PASS_BYTES_FACTOR)
    chunks = max(1, ceil(tensors / MULTI_TENSOR_CHUNK))
    if fused:
        kernels = chunks
    elif impl == "foreach":
        kernels = FOREACH_OPS * chunks
    else:
        kernels = FOR_LOOP_OPS_PER_TENSOR * tensors
    if clip:
        kernels += (CLIP_KERNELS if clip_norm else CLIP_SCALE_KERNELS) * chunks
    device = max(moved / rates.hbm_bytes_per_s, kernels * rates.device_s_per_kernel_min)
    host = kernels * rates.host_s_per_backward_kernel  # dispatched from C++ (foreach) or a bare loop
    if dtensor_params and impl == "for_loop":
        host += FOR_LOOP_OPS_PER_TENSOR * tensors * DTENSOR_OP_HOST_S
    return OptimizerTime(max(device, host), device, host, moved, kernels)


def deepspeed_flat_partitions(*, params: float, stage: int, sub_group_numel: float,
                              param_groups: int = HF_PARAM_GROUPS) -> float:
    """Tensors the optimizer DeepSpeed ZeRO wraps steps on a rank holding ``params`` trained elements: flat fp32
    partitions, not the model's tensors, so the step's launches do not grow with the number of trained tensors.

    Stage 1/2: one flat fp32 partition per parameter group (``single_partition_of_fp32_groups[i]``); ``step`` sets
    each one's ``.grad`` to the flattened gradient partition and ``_optimizer_step(i)`` runs ``self.optimizer.step()``
    on that group alone (deepspeedai/DeepSpeed deepspeed/runtime/zero/stage_1_and_2.py l.1820-1833, l.1895-1921
    @bdba8231bc8fc17980a5941437e6363dac69418d, v0.16.9). Stage 3: one flat fp32 tensor per sub-group, each parameter
    group cut into sub-groups of ``sub_group_size`` partition elements (``_create_fp16_sub_groups`` l.943-966);
    ``step`` loops over them and ``_optimizer_step`` sets ``param_groups[...]['params'] = [fp32_param]`` before
    ``self.optimizer.step()`` (deepspeed/runtime/zero/stage3.py l.972-987, l.2095-2140 @bdba8231). The dense
    remainder of each group after the last full sub-group is one more (the no-decay group: the norms and biases)."""
    if stage not in (1, 2, 3):
        raise ValueError("deepspeed_flat_partitions: stage in (1, 2, 3)")
    groups = max(1, param_groups)
    if stage < 3 or sub_group_numel <= 0:
        return float(groups)
    return float(groups - 1 + max(1, ceil(max(0.0, params) / sub_group_numel)))


def deepspeed_zero12_grad_norm_kernels(*, tensors: float, param_groups: int = HF_PARAM_GROUPS) -> float:
    """Kernels of DeepSpeed ZeRO-1/2's gradient norm over a rank partition of ``tensors`` gradients
    (``ZERO12_NORM_KERNELS_PER_TENSOR`` each, ``ZERO12_NORM_JOIN_KERNELS`` per parameter group, and the ``stack`` and
    ``vector_norm`` over the groups' norms)."""
    if tensors < 0:
        raise ValueError("deepspeed_zero12_grad_norm_kernels: tensors >= 0")
    return ZERO12_NORM_KERNELS_PER_TENSOR * tensors + ZERO12_NORM_JOIN_KERNELS * max(1, param_groups) + 2
