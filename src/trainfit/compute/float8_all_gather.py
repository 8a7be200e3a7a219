"""torchao's float8 FSDP2 all-gather (``precision.fp8_all_gather``): what moves, what is cast, and when.

torchao wraps each tensorwise dynamically scaled ``Float8Linear`` weight in ``WeightWithDynamicFloat8CastTensor``
when ``Float8LinearConfig.enable_fsdp_float8_all_gather`` is set (pytorch/ao @8c81863ba85cce742244c0151c6683c5696bbe04
``torchao/float8/float8_linear.py`` l.406-420). Its FSDP2 extension hooks (``torchao/float8/fsdp_utils.py`` l.218-268)
change four things, each a term below:

* **Collective bytes.** ``fsdp_pre_all_gather`` casts the rank's shard to float8 and hands FSDP2 its ``_data``
  (1 B per element) to all-gather, the scale as metadata (not gathered); ``fsdp_post_all_gather`` wraps the gathered
  bytes as a ``Float8Tensor``. So a float8 linear's weight is gathered at 1 B instead of ``param_dtype``'s 2 B
  (``gathered_bytes_saved``); embeddings, norms, the output head and any linear the converter skips keep
  ``param_dtype``. The gradients' reduce-scatter is unchanged (``reduce_dtype``: the linear's backward returns a
  high-precision weight gradient).
* **The shard cast.** The cast runs per all-gather, on FSDP2's all-gather copy-in stream, not the compute stream
  (pytorch/pytorch torch 2.13.0 ``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py`` l.336-337
  ``with device_handle.stream(all_gather_copy_in_stream): _get_param_all_gather_inputs``), so it delays the unit's
  all-gather, not the layer's kernels (``shard_cast_bytes`` / ``SHARD_CAST_KERNELS``). With precomputed scales it is
  ``hp_tensor_and_scale_to_float8`` (``float8_tensor.py`` l.153-154 ``_ToFloat8ConstrFunc.forward``:
  ``tensor.to(float32) * scale``, then ``float8_utils.py`` l.129-132 ``to_fp8_saturated``'s ``clamp`` and
  ``to(float8)``), eager: FSDP2's hooks sit outside the compiled
  blocks. A unit resharded after forward is gathered (and cast) again for its backward.
* **The linear's own casts.** ``matmul_with_hp_or_float8_args`` uses an already-float8 weight as is, forward and
  backward (``float8_linear.py`` l.100-101, l.157-159): no per-forward weight cast, no backward weight cast; the
  backward's ``grad_output @ weight`` still needs the row-major fp8 weight in the other layout, one
  ``preprocess_addmm`` ``contiguous()`` copy (1 + 1 B per element, ``float8_ops.py``) (``gathered_weight_casts``).
* **The scales.** ``precompute_float8_dynamic_scale_for_fsdp`` (``fsdp_utils.py`` l.28-75), run after the optimizer
  step (torchtitan's float8 converter ``post_optimizer_hook``; accelerate 1.15.0 ``accelerator.py`` l.2096-2100
  registers it as an optimizer step post-hook): one ``torch._foreach_norm(weights, ord=inf)`` over the local shards
  (one read), then ``stack`` / ``clamp`` on the DTensor, which "will issue a single all-reduce" of the amax vector
  (4 B per float8 linear), and a few one-element-per-linear kernels (``PRECOMPUTE_KERNELS``). Without the
  precompute each pre-all-gather cast all-reduces its own amax (``reduce_amax=True``): not modelled, the published
  recipes (torchtitan's, accelerate's) all precompute.

Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainfit.compute.float8_casts import EAGER_LAYOUT_COPY_BYTES, FP8_BYTES, FP32_BYTES, CastTraffic
from trainfit.memory.fp8 import FP8_GATHERED_BYTES, SCALE_BYTES  # one definition: the memory model's gathered bytes


def gathered_bytes_saved(*, linear_weight_params: float, gathered_dtype_bytes: float) -> float:
    """Bytes one full all-gather of the model moves less than the ``param_dtype`` one: ``linear_weight_params``
    float8 linear weight elements at 1 B instead of ``gathered_dtype_bytes`` (2 for bf16)."""
    return linear_weight_params * max(0.0, gathered_dtype_bytes - FP8_GATHERED_BYTES)


def shard_cast_bytes(*, shard_elements: float, shard_dtype_bytes: float) -> float:
    """HBM bytes of one pre-all-gather cast of ``shard_elements`` local weight elements held in
    ``shard_dtype_bytes`` (4: fp32 shards under FSDP2 mixed precision; 2: bf16 shards), with a precomputed scale:
    ``to(float32)`` (a no-op on an fp32 shard, else read 2 B write 4 B), ``* scale`` (4 + 4), ``clamp`` (4 + 4),
    ``to(float8)`` (4 + 1): 21 B per fp32 element, 27 B per bf16 one."""
    upcast = 0.0 if shard_dtype_bytes >= FP32_BYTES else shard_dtype_bytes + FP32_BYTES
    return shard_elements * (upcast + 2 * FP32_BYTES + 2 * FP32_BYTES + FP32_BYTES + FP8_BYTES)


def shard_cast_kernels(*, linears: float, shard_dtype_bytes: float) -> float:
    """Kernels of ``shard_cast_bytes`` for ``linears`` weights: ``* scale``, ``clamp``, ``to(float8)``, and the
    ``to(float32)`` of a 16-bit shard."""
    return linears * (3 + (0 if shard_dtype_bytes >= FP32_BYTES else 1))


PRECOMPUTE_KERNELS = 6
"""``precompute_float8_dynamic_scale_for_fsdp`` besides its norm: ``stack``, ``clamp`` (+ its all-reduce), ``to(float64)``,
the division, ``to(float32)``; counted with the ``_foreach_norm`` as one multi-tensor launch (6 in all): pytorch/ao
``torchao/float8/fsdp_utils.py`` l.70-83 @36027d82d1ad9949597ea16002ff4940374b1b94 (re-read)."""


def precompute_bytes(*, shard_elements: float, shard_dtype_bytes: float) -> float:
    """HBM bytes of the fused amax pass: ``_foreach_norm(ord=inf)`` reads every local float8 weight shard once."""
    return shard_elements * shard_dtype_bytes


def amax_vector_bytes(*, linears: float) -> float:
    """Bytes of the one all-reduce after the optimizer step: one fp32 amax per float8 linear."""
    return linears * SCALE_BYTES


def gathered_weight_casts(casts: CastTraffic) -> CastTraffic:
    """The linear's casts when its gathered weight is already float8 (module docstring): the input and output
    gradient casts unchanged; no weight cast forward, and backward only ``preprocess_addmm``'s layout copy of the
    gathered fp8 weight (1 + 1 B per element, one kernel), in place of the compiled column-major cast (2 + 1 B) or
    the eager copy (already that copy)."""
    return replace(casts, weight_forward_bytes=0.0, weight_forward_kernels=0.0,
                   weight_backward_bytes=EAGER_LAYOUT_COPY_BYTES, weight_backward_kernels=1.0)


@dataclass(frozen=True, slots=True)
class Fp8GatherShard:
    """One rank's float8 linear weights under torchao's float8 all-gather: ``shard_elements`` local weight elements
    (its model-parallel shard's float8 linears / the FSDP shard group), ``linears`` float8 linear weights, held in
    ``shard_dtype_bytes`` (4: fp32 shards under FSDP2 mixed precision)."""

    shard_elements: float
    linears: float
    shard_dtype_bytes: float = FP32_BYTES


def layer_gather_prep_seconds(shard: Fp8GatherShard, *, layers: int, hbm_bytes_per_s: float) -> float:
    """Seconds one layer's pre-all-gather casts take on the copy-in stream (``collectives.exposed_sharded``
    ``layer_gather_prep_s``): the layer's share of ``shard_cast_bytes`` at HBM bandwidth."""
    return shard_cast_bytes(shard_elements=shard.shard_elements / max(1, layers),
                            shard_dtype_bytes=shard.shard_dtype_bytes) / hbm_bytes_per_s


def shard_cast_host_seconds(shard: Fp8GatherShard, *, host_s_per_kernel: float) -> float:
    """Host seconds of one full gather's shard casts: ``shard_cast_kernels`` eager aten calls from FSDP2's hook, on
    the thread that launches the layers' kernels (the stream context moves only their device work), at
    ``host_s_per_kernel`` (a bare aten call's rate, ``inventory.PassInventory.bare_kernels``). The Python of
    ``_ToFloat8ConstrFunc.apply`` and of the ``Float8Tensor`` it builds is not counted beyond that."""
    return shard_cast_kernels(linears=shard.linears, shard_dtype_bytes=shard.shard_dtype_bytes) * host_s_per_kernel


def precompute_seconds(shard: Fp8GatherShard, *, hbm_bytes_per_s: float, host_s_per_kernel: float,
                       all_reduce_s: float) -> float:
    """Seconds of ``precompute_float8_dynamic_scale_for_fsdp`` once per optimizer step, on the compute stream: the
    fused amax read (``precompute_bytes``) or its ``PRECOMPUTE_KERNELS`` launches, whichever is longer, then the one
    all-reduce of the amax vector (``all_reduce_s``, the caller's NCCL price of ``amax_vector_bytes``)."""
    device_s = precompute_bytes(shard_elements=shard.shard_elements,
                                shard_dtype_bytes=shard.shard_dtype_bytes) / hbm_bytes_per_s
    return max(device_s, PRECOMPUTE_KERNELS * host_s_per_kernel) + all_reduce_s
