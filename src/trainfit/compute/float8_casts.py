"""The fp8 casts around each linear (``precision.compute: fp8``): bytes and kernels per element, by who runs them.

A dynamically scaled fp8 linear casts three bf16 tensors to fp8 per step: its input (``T × in``), its weight
(``in × out``) and its output gradient (``T × out``). Each cast is an amax reduction over the tensor, a scale,
and a scaling cast; the backward GEMMs need the input and the output gradient in the other layout too
(``torch._scaled_mm`` takes its first operand row-major and its second column-major). Who runs these kernels
sets their bytes:

* **Transformer Engine** (Megatron-Core, NeMo): fused cast(-transpose) kernels, counted by
  ``FP8_CAST_BYTES`` / ``FP8_TRANSPOSE_BYTES`` (below) and scaled by the compile factors like the other
  elementwise work (``TRANSFORMER_ENGINE``, unchanged).
* **torchao float8 under torch.compile** (torchtitan ``--model.converters float8``, accelerate's ``AORecipeKwargs``):
  torchao's own roofline of the Inductor kernels for tensorwise scaling (pytorch/ao
  ``torchao/testing/float8/roofline_utils.py`` ``get_tensor_memory_traffic_ovhd_s`` @8c81863ba85cce742244c0151c6683c5696bbe04,
  the same counts at ``torchao/testing/training/roofline_utils.py`` @d8bb51f63143188272e116c820d5f303c7017781 and
  ``torchao/float8/roofline_utils.py`` @d99785c0fdaa1dbfdbaf57923326edf2b8a7f1f8), ``fuse_with_prev=False``:

  - input and output gradient: kernel 1 ``max_abs`` stage 1 reads the bf16 tensor (2 B), kernel 2 its second
    stage (a few bytes, not counted), kernel 3 reads it again and writes fp8 twice, row- and column-major
    (2 + 1 + 1 B): 6 B per element in 3 kernels;
  - weight: the same amax (2 B, 2 kernels), a forward cast to the row-major fp8 copy (2 + 1 B) and a backward
    cast to the column-major one (2 + 1 B): 8 B per element in 4 kernels.

  These are already the fused kernels: the compile factors (``plan.time.COMPILE_MEMORY_FACTOR``) do not scale them
  again (``TORCHAO_COMPILED.fused``). An amax needs the whole tensor before its cast can start, so the
  reduction and the cast cannot share a pass.
* **torchao float8 in eager mode** (no compile): every op of ``hp_tensor_to_float8_dynamic`` is its own kernel
  (pytorch/ao ``torchao/float8/float8_utils.py`` ``tensor_to_amax`` ``torch.max(torch.abs(x))``, ``amax_to_scale``
  (``to(float64)``, ``clamp``, a division, ``to(float32)``: four one-element kernels), ``float8_tensor.py``
  ``_ToFloat8ConstrFunc.forward`` ``tensor.to(torch.float32) * scale`` then ``to_fp8_saturated``'s ``clamp`` and
  ``to(float8)``, @8c81863ba85cce742244c0151c6683c5696bbe04). Per element of one cast: ``abs`` 2 + 2 B, ``max``
  2 B, ``to(float32)`` 2 + 4 B, ``* scale`` 4 + 4 B, ``clamp`` 4 + 4 B, ``to(float8)`` 4 + 1 B: 33 B in 10 kernels.
  ``float8_linear.py`` ``matmul_with_hp_or_float8_args`` casts the input and the weight in forward; its
  backward casts the output gradient twice (``cast_config_grad_output`` for ``grad_input``,
  ``cast_config_grad_output_for_grad_weight`` for ``grad_weight``) and the saved bf16 input again
  (``cast_config_input_for_grad_weight``), and ``float8_ops.py`` ``preprocess_addmm`` copies each operand held in
  the wrong layout (``a_data.contiguous()``, ``b_data.t().contiguous().t()``: 1 + 1 B, one kernel): the fp8 weight
  for ``grad_input``, the transposed output gradient and the input for ``grad_weight``.

Two more torchao mechanisms: under tensor + sequence parallelism torchtitan's float8 plans cast the hidden-width
tensors on the sequence shard before their fp8 all-gather, once per module input (``sharded_cast_tokens``); and
torchtitan's per-op selective recompute keeps the amax, so it re-runs only the recomputed linears' casts
(``recompute_cast_bytes``). torchao's FSDP float8 all-gather of the weights
(``enable_fsdp_float8_all_gather``, the card's ``precision.fp8_all_gather``) removes the weight casts here and casts
the shards before the all-gather instead: ``compute.float8_all_gather``.

Checked and not charged (too small to explain the H100 fp8 rows' miss): delayed scaling's amax reduction. Transformer
Engine all-reduces (MAX) the concatenated amax buffer over the autocast's group once per forward (``autocast_exit`` ->
``reduce_and_update_fp8_tensors(forward=True)``) and once per backward (the first module's backward, ``forward=False``),
then runs one fused amax-and-scale update (NVIDIA/TransformerEngine ``transformer_engine/pytorch/quantization.py``
l.656-710, l.772-782; ``module/linear.py`` l.1467-1470 @d0067d0da6cb01811b8072a7d304f0e00344ce2b): two latency-bound
all-reduces of a few KB per micro-batch. ``collectives.nccl_collective_seconds`` gives 15 us (8 GPUs, one node), 0.16 ms
(64), 0.29 ms (512) and 0.39 ms (2,048) for 4-64 KB. On the rows with the largest fp8/bf16 miss this is 2 x 64 x 0.39 ms
= 50 ms of 10.8 s (Llama-3.1-70B, 2,048 H100, ga 64: 0.5 %) and 2 x 128 x 0.29 ms = 74 ms of 12.4 s (Grok-1, 512 H100,
ga 128: 0.6 %), against ratio misses of 8 % and 19 %. The larger part of the H100 gap is the backward GEMMs' rate
(``rates._FP8_PRECISE_ACCUMULATION_FRACTION``).

Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainfit.spec.enums import Fp4Recipe, Fp8Recipe

BF16_BYTES, FP32_BYTES, FP8_BYTES = 2.0, 4.0, 1.0

FP8_CAST_BYTES = 5.0
"""fp8 (``precision.compute: fp8``): every decoder linear's input and weight are scaled and cast per forward
(current scaling: an amax reduction reads the bf16 tensor (2 B) and the cast reads it again and writes fp8 (2 + 1);
delayed scaling fuses the amax into the cast but keeps the same budget, stated); backward casts the output
gradient the same way."""
FP8_TRANSPOSE_BYTES = 2.0
"""Backward needs the fp8 input and weight transposed (read 1 B, write 1 B per element: TE's transpose cache)
for the dX / dW GEMMs' column-major operands."""
FP8_FORWARD_KERNELS, FP8_BACKWARD_KERNELS = 4, 4
"""amax + cast for the input and for the weight; backward: amax + cast of the gradient, two transposes."""
FP8_WEIGHT_FORWARD_KERNELS, FP8_WEIGHT_BACKWARD_KERNELS = 2, 1
"""Of those, the weight's amax + cast, and the weight's transpose."""


@dataclass(frozen=True, slots=True)
class CastTraffic:
    """Bytes per element and kernels per linear of the fp8 casts of one linear, forward and backward."""

    input_forward_bytes: float
    """Per element of the linear's input (``T × in``), forward."""
    input_backward_bytes: float
    """Per element of the input, backward (its column-major fp8 copy for the weight gradient)."""
    weight_forward_bytes: float
    """Per weight element, each time the weight is cast (``inventory.step_inventory`` ``fp8_weight_casts``)."""
    weight_backward_bytes: float
    """Per weight element, backward (its other-layout fp8 copy for the input gradient)."""
    grad_output_backward_bytes: float
    """Per element of the output gradient (``T × out``), backward."""
    input_forward_kernels: float
    weight_forward_kernels: float
    backward_kernels: float
    """Backward kernels per linear for the output gradient and the input."""
    weight_backward_kernels: float
    fused: bool
    """The counts are already the fused kernels (a compiler's memory and kernel factors do not apply again)."""
    amax_bytes: float = 0.0
    """Of ``input_forward_bytes`` and ``weight_forward_bytes``, the amax reduction's: torchtitan's per-op policy
    saves ``aten.max`` ("for low precision training, it's useful to always save the result of max", pytorch/torchtitan
    torchtitan/models/llama/parallelize_llama.py ``_save_list`` @0da8901b1918fc21b5d43bbc693a120fc4281378), so its
    recompute re-runs only the casts (``recompute_cast_bytes``)."""
    amax_kernels: float = 0.0
    sequence_sharded: bool = False
    """Under tensor + sequence parallelism the hidden-width tensors are cast on the rank's sequence shard, before
    their fp8 all-gather, once per module input (``sharded_cast_tokens``)."""
    gemm_operand_bytes: float = 1.0
    """Bytes per GEMM operand element the casts produce, which picks the GEMMs' tensor-core rate
    (``gemm.gemm_seconds``' ``dtype_bytes``): 1 for fp8 and MXFP8, 0.5 for NVFP4."""
    transformer_engine: bool = False
    """Transformer Engine's linears (Megatron-Core's grouped experts run in the same recipe)."""
    split_quantize_kernels: float = 0.0
    """Kernels Transformer Engine's ``split_quantize`` launches for each split (local expert) of a grouped linear's
    quantised operand, where it quantises the splits one by one (``grouped_split_quantize_extra_kernels``); 0: one
    fused kernel for all the splits, or not Transformer Engine's grouped linear."""
    cast_bytes_per_s: float | None = None
    """The cast kernels' own published bandwidth, bytes read and written per second; where it is below the card's
    streaming rate (``rates.DeviceRates.hbm_bytes_per_s``, at which the plan prices memory-bound bytes) the bytes
    above are charged as ``cast_stream_bytes``; None: that streaming rate (``TORCHAO_MXFP8_CAST_BYTES_PER_S``)."""
    forward_split_accumulator: bool = False
    """The forward's fp8 GEMMs also accumulate at full precision (no cuBLASLt fast accumulation), as the backward's
    always do: Transformer Engine's ``Float8BlockScaling`` requires ``use_split_accumulator`` for fprop, dgrad and
    wgrad (NVIDIA/TransformerEngine ``transformer_engine/common/recipe/__init__.py`` l.438-460, against
    ``Float8CurrentScaling``'s fprop False, l.307-309, and ``_2X_ACC_FPROP = False`` for delayed scaling,
    ``pytorch/module/base.py`` l.83 @d0067d0da6cb01811b8072a7d304f0e00344ce2b). The rate: ``gemm.fp8_precise_rates``."""
    sac_counted_gemm: bool = True
    """The linear's GEMM is an op torchtitan's per-op selective checkpointing counts as a matmul (``aten.mm`` /
    ``aten.linear``, of which it saves every second one): true for bf16, torchao float8 and MXFP8 (``Float8Tensor``
    / ``MXTensor`` subclasses reach the policy's dispatch mode as ``aten.mm``). torchao's NVFP4 linear calls
    ``torch.nn.functional.scaled_mm``, which is in neither the matmul pair nor the save list, so the policy marks
    every one PREFER_RECOMPUTE (``inventory._sac_recomputed_gemms``)."""


TRANSFORMER_ENGINE = CastTraffic(
    input_forward_bytes=FP8_CAST_BYTES, input_backward_bytes=FP8_TRANSPOSE_BYTES,
    weight_forward_bytes=FP8_CAST_BYTES, weight_backward_bytes=FP8_TRANSPOSE_BYTES,
    grad_output_backward_bytes=FP8_CAST_BYTES,
    input_forward_kernels=FP8_FORWARD_KERNELS - FP8_WEIGHT_FORWARD_KERNELS,
    weight_forward_kernels=FP8_WEIGHT_FORWARD_KERNELS,
    backward_kernels=FP8_BACKWARD_KERNELS - FP8_WEIGHT_BACKWARD_KERNELS,
    weight_backward_kernels=FP8_WEIGHT_BACKWARD_KERNELS, fused=False, amax_bytes=BF16_BYTES, amax_kernels=1,
    transformer_engine=True,
)
"""Transformer Engine's casts (``FP8_*``), scaled by the compile factors as before."""


def compiled_amax_bytes(*, fused_with_producer: bool = False) -> float:
    """torchao roofline kernel 1 (``max_abs`` stage 1): reads the bf16 tensor once; 0 where it fuses into the
    kernel that produced the tensor (``fuse_with_prev``, not assumed: module docstring)."""
    return 0.0 if fused_with_producer else BF16_BYTES


def compiled_activation_cast_bytes() -> float:
    """Bytes per element of a compiled tensorwise cast of an activation or output gradient: the amax, then one
    kernel reading bf16 and writing both fp8 layouts (torchao roofline kernel 3)."""
    return compiled_amax_bytes() + BF16_BYTES + 2 * FP8_BYTES


def compiled_weight_cast_bytes() -> tuple[float, float]:
    """(forward, backward) bytes per weight element of a compiled tensorwise weight cast: the amax and the
    row-major cast forward (kernels 1 and 3), the column-major cast backward (kernel 4)."""
    return compiled_amax_bytes() + BF16_BYTES + FP8_BYTES, BF16_BYTES + FP8_BYTES


TORCHAO_COMPILED_AMAX_KERNELS = 2
"""The two stages of the compiled ``max_abs`` reduction (torchao roofline kernels 1 and 2: ``x_bf16 -> max_abs_stage_1
-> tmp``, ``tmp -> max_abs_stage_2 -> max_abs``, pytorch/ao @36027d82d1ad9949597ea16002ff4940374b1b94 ``torchao/testing/training/roofline_utils.py``
l.149-150)."""

_compiled_weight_fwd, _compiled_weight_bwd = compiled_weight_cast_bytes()
TORCHAO_COMPILED = CastTraffic(
    input_forward_bytes=compiled_activation_cast_bytes(), input_backward_bytes=0.0,
    weight_forward_bytes=_compiled_weight_fwd, weight_backward_bytes=_compiled_weight_bwd,
    grad_output_backward_bytes=compiled_activation_cast_bytes(),
    input_forward_kernels=TORCHAO_COMPILED_AMAX_KERNELS + 1, weight_forward_kernels=TORCHAO_COMPILED_AMAX_KERNELS + 1,
    backward_kernels=TORCHAO_COMPILED_AMAX_KERNELS + 1, weight_backward_kernels=1, fused=True,
    amax_bytes=compiled_amax_bytes(), amax_kernels=TORCHAO_COMPILED_AMAX_KERNELS, sequence_sharded=True,
)
"""torchao float8 tensorwise under torch.compile (module docstring): the input's column-major copy is written by
its forward cast, so its backward adds nothing."""


EAGER_AMAX_BYTES = (BF16_BYTES + BF16_BYTES) + BF16_BYTES
"""``torch.abs`` (read and write bf16) then ``torch.max`` (read bf16)."""
EAGER_AMAX_KERNELS = 2
"""``torch.max(torch.abs(x))``: torchao's tensorwise ``tensor_to_amax`` (pytorch/ao @36027d82d1ad9949597ea16002ff4940374b1b94 ``torchao/float8/float8_utils.py``
l.65)."""


def eager_cast_bytes() -> float:
    """Bytes per element of one eager ``hp_tensor_to_float8_dynamic`` (module docstring): ``abs``, ``max``,
    ``to(float32)``, ``* scale``, ``clamp``, ``to(float8)``."""
    scaled_cast = (BF16_BYTES + FP32_BYTES) + 2 * FP32_BYTES + 2 * FP32_BYTES + (FP32_BYTES + FP8_BYTES)
    return EAGER_AMAX_BYTES + scaled_cast


EAGER_CAST_KERNELS = 10
"""``abs``, ``max``, the four one-element scale kernels, ``to(float32)``, ``* scale``, ``clamp``, ``to(float8)``:
pytorch/ao @36027d82d1ad9949597ea16002ff4940374b1b94 ``torchao/float8/float8_utils.py`` ``tensor_to_amax`` l.65, ``amax_to_scale`` l.45-48 (``to(float64)``,
``clamp``, the division, ``to(float32)``), ``to_fp8_saturated`` l.136-137; ``torchao/float8/float8_training_tensor.py``
l.153-154 (``tensor.to(torch.float32) * scale``). The ``clamp`` is kept for PyTorch 2.11 and older (the docstring of
``to_fp8_saturated``: eager casts saturate from 2.12, the clamp is then a no-op kernel still launched)."""
EAGER_LAYOUT_COPY_BYTES = 2 * FP8_BYTES
"""``preprocess_addmm``'s ``contiguous()`` of an fp8 operand in the wrong layout: read 1 B, write 1 B."""

TORCHAO_EAGER = CastTraffic(
    input_forward_bytes=eager_cast_bytes(), input_backward_bytes=eager_cast_bytes() + EAGER_LAYOUT_COPY_BYTES,
    weight_forward_bytes=eager_cast_bytes(), weight_backward_bytes=EAGER_LAYOUT_COPY_BYTES,
    grad_output_backward_bytes=2 * eager_cast_bytes() + EAGER_LAYOUT_COPY_BYTES,
    input_forward_kernels=EAGER_CAST_KERNELS, weight_forward_kernels=EAGER_CAST_KERNELS,
    backward_kernels=3 * EAGER_CAST_KERNELS + 2, weight_backward_kernels=1, fused=False,
    amax_bytes=EAGER_AMAX_BYTES, amax_kernels=EAGER_AMAX_KERNELS, sequence_sharded=True,
)
"""torchao float8 tensorwise without torch.compile (module docstring): backward casts the output gradient twice
and the saved bf16 input once more, and copies the transposed output gradient, the input and the weight into
the layouts ``_scaled_mm`` takes."""


SHARED_INPUT_FOLLOWERS = frozenset({"k_proj", "v_proj", "up_proj"})
"""Linears that read the module input ``q_proj`` / ``gate_proj`` read: under float8 tensor parallelism
``PrepareFloat8ModuleInput`` casts that input once for all of them (torchtitan's ``attention`` and
``feed_forward`` plans; pytorch/ao ``torchao/float8/float8_tensor_parallel.py`` @8c81863ba85cce742244c0151c6683c5696bbe04:
"if there are multiple float8 users of the input activation, we perform fp8 allgather only once")."""


def sharded_cast_tokens(*, casts: CastTraffic, tokens: float, features: int, hidden_size: int,
                        sequence_shards: int, name: str = "") -> float:
    """Tokens whose ``features``-wide tensor a linear casts (input forward, or output gradient backward), given the
    rank's ``tokens`` after the sequence-parallel all-gather. torchao float8 tensor parallelism casts the hidden-width
    tensors on the sequence shard, before the fp8 all-gather: ``Float8ColwiseParallel`` / ``PrepareFloat8ModuleInput``
    the column-parallel inputs, ``Float8RowwiseParallel``'s ``NoopFwToFloat8BwDynamic`` (applied after the
    reduce-scatter) the row-parallel output gradients (pytorch/ao ``torchao/float8/float8_tensor_parallel.py``
    @8c81863ba85cce742244c0151c6683c5696bbe04): ``tokens / sequence_shards``, 0 for a linear whose input another one
    cast (``SHARED_INPUT_FOLLOWERS``). Otherwise ``tokens``."""
    if not casts.sequence_sharded or sequence_shards <= 1 or features != hidden_size:
        return tokens
    return 0.0 if name in SHARED_INPUT_FOLLOWERS else tokens / sequence_shards


def sharded_layout_copy_bytes(*, casts: CastTraffic, tokens: float, features: int, hidden_size: int,
                              sequence_shards: int, name: str = "") -> float:
    """Bytes of the backward layout copy of an fp8 tensor all-gathered row-major (the input for the weight
    gradient, the output gradient transposed): ``preprocess_addmm``'s ``contiguous()`` (1 + 1 B per element), which
    the sharded cast cannot write for the gathered tensor; 0 where the casts are not sequence-sharded."""
    if sharded_cast_tokens(casts=casts, tokens=tokens, features=features, hidden_size=hidden_size,
                           sequence_shards=sequence_shards, name=name) in (tokens, 0.0):
        return 0.0
    return EAGER_LAYOUT_COPY_BYTES * tokens * features


def cast_stream_bytes(*, casts: CastTraffic, bytes_moved: float, stream_bytes_per_s: float | None) -> float:
    """Bytes at the card's streaming rate ``stream_bytes_per_s`` (``rates.DeviceRates.hbm_bytes_per_s``) that take as
    long as ``bytes_moved`` at the cast kernels' own bandwidth: ``bytes_moved x stream_bytes_per_s /
    cast_bytes_per_s``; unchanged when the casts have no published rate of their own, when it is at or above the
    streaming rate, or when no streaming rate is given (None)."""
    rate = casts.cast_bytes_per_s
    if rate is None or not stream_bytes_per_s or rate >= stream_bytes_per_s:
        return bytes_moved
    return bytes_moved * stream_bytes_per_s / rate


def linear_cast_traffic(*, casts: CastTraffic, input_tokens: float, grad_tokens: float, in_features: int,
                        out_features: int, weight_elements: float, transposed_elements: float, weight_casts: float,
                        weight_transposes: float, copy_bytes: float = 0.0,
                        stream_bytes_per_s: float | None) -> tuple[float, float, float, float]:
    """(forward bytes, backward bytes, forward kernels, backward kernels) of one fp8 linear's operand casts: its
    input (``input_tokens`` x ``in_features``) and weight (``weight_elements``) forward; its output gradient
    (``grad_tokens`` x ``out_features``), input and transposed weight (``transposed_elements``) backward, plus
    ``copy_bytes`` (``sharded_layout_copy_bytes``); ``weight_casts`` / ``weight_transposes``: the weight casts per
    micro-step (the kernels'); ``stream_bytes_per_s``: the card's streaming rate (``cast_stream_bytes``)."""
    forward = casts.input_forward_bytes * input_tokens * in_features + casts.weight_forward_bytes * weight_elements
    backward = (casts.grad_output_backward_bytes * grad_tokens * out_features
                + casts.input_backward_bytes * input_tokens * in_features
                + casts.weight_backward_bytes * transposed_elements)
    return (cast_stream_bytes(casts=casts, bytes_moved=forward, stream_bytes_per_s=stream_bytes_per_s),
            cast_stream_bytes(casts=casts, bytes_moved=backward, stream_bytes_per_s=stream_bytes_per_s) + copy_bytes,
            casts.input_forward_kernels + casts.weight_forward_kernels * weight_casts,
            casts.backward_kernels + casts.weight_backward_kernels * weight_transposes)


def recompute_cast_bytes(*, casts: CastTraffic, input_elements: float, weight_elements: float,
                         stream_bytes_per_s: float | None) -> float:
    """Bytes a per-op selective recompute re-runs for one recomputed linear: the casts of its input and weight,
    not their amax (saved: ``CastTraffic.amax_bytes``); a weight that arrives already cast (torchao's float8
    all-gather, ``compute.float8_all_gather``: ``weight_forward_bytes`` 0) re-runs nothing. ``stream_bytes_per_s``:
    the card's streaming rate (``cast_stream_bytes``)."""
    return cast_stream_bytes(casts=casts, bytes_moved=(casts.input_forward_bytes - casts.amax_bytes) * input_elements
                             + max(0.0, casts.weight_forward_bytes - casts.amax_bytes) * weight_elements,
                             stream_bytes_per_s=stream_bytes_per_s)


def recompute_cast_kernels(*, casts: CastTraffic, input_casts: float, weight_casts: float) -> float:
    """Kernels of ``recompute_cast_bytes``: each cast less its amax kernels."""
    return ((casts.input_forward_kernels - casts.amax_kernels) * input_casts
            + max(0.0, casts.weight_forward_kernels - casts.amax_kernels) * weight_casts)


# Block-scaled recipes on Blackwell (``fp8_recipe: mxfp8``, ``compute: fp4`` / ``fp4_recipe: nvfp4``). Their scales
# are local to a block, written by the quantize kernel itself, so a cast is one pass over the bf16 tensor (no amax
# reduction) for MXFP8; NVFP4 adds one per-tensor amax pass for its second-level fp32 scale. Bytes per element of
# one quantised copy, its 1-B block scale included: MXFP8 1 + 1/32 (E8M0 per 32), NVFP4 0.5 + 1/16 (E4M3 per 16).
MXFP8_COPY_BYTES = FP8_BYTES + 1.0 / 32
NVFP4_COPY_BYTES = 0.5 + 1.0 / 16
"""NVFP4: E2M1 values two per byte and one E4M3 scale byte per 16 (block size 16, UE4M3 scale), besides one fp32
per-tensor scale: "0.5625 bytes per parameter" (NVIDIA NeMo Automodel docs, nemo_automodel.components.quantization.nvfp4,
https://docs.nvidia.com/nemo/automodel/nemo-automodel/nemo_automodel/components/quantization/nvfp4; the format:
https://developer.nvidia.com/blog/introducing-nvfp4-for-efficient-and-accurate-low-precision-inference/)."""


def block_scaled_cast_bytes(*, copies: int, copy_bytes: float, amax_passes: int = 0) -> float:
    """Bytes per element of one fused block-scaled quantize kernel: ``amax_passes`` reads of the bf16 tensor for a
    per-tensor amax, one read of it, ``copies`` quantised copies written (row-wise and / or column-wise)."""
    return amax_passes * BF16_BYTES + BF16_BYTES + copies * copy_bytes


TE_MXFP8 = CastTraffic(
    input_forward_bytes=block_scaled_cast_bytes(copies=2, copy_bytes=MXFP8_COPY_BYTES), input_backward_bytes=0.0,
    weight_forward_bytes=block_scaled_cast_bytes(copies=2, copy_bytes=MXFP8_COPY_BYTES), weight_backward_bytes=0.0,
    grad_output_backward_bytes=block_scaled_cast_bytes(copies=2, copy_bytes=MXFP8_COPY_BYTES),
    input_forward_kernels=1, weight_forward_kernels=1, backward_kernels=1, weight_backward_kernels=0, fused=True,
    transformer_engine=True, split_quantize_kernels=1,
)
"""Transformer Engine ``MXFP8BlockScaling``: ``MXFP8Quantizer`` with row-wise and column-wise usage writes both
copies from one read of the bf16 tensor (``transformer_engine/common/cast/mxfp8/quantize_mxfp8.cuh``, one kernel
for both directions; NVIDIA/TransformerEngine @d0067d0da6cb01811b8072a7d304f0e00344ce2b): the input and the weight
(cached for the step, ``is_first_microbatch``) in forward, the output gradient in backward; the backward GEMMs read
the column-wise copies, so nothing is transposed. The cast kernels are TE's own fused kernels: not scaled by the
compile factors."""

TE_NVFP4 = CastTraffic(
    input_forward_bytes=block_scaled_cast_bytes(copies=2, copy_bytes=NVFP4_COPY_BYTES, amax_passes=1),
    input_backward_bytes=0.0,
    weight_forward_bytes=block_scaled_cast_bytes(copies=2, copy_bytes=NVFP4_COPY_BYTES, amax_passes=1),
    weight_backward_bytes=0.0,
    grad_output_backward_bytes=block_scaled_cast_bytes(copies=2, copy_bytes=NVFP4_COPY_BYTES, amax_passes=1),
    input_forward_kernels=2, weight_forward_kernels=2, backward_kernels=2, weight_backward_kernels=0, fused=True,
    amax_bytes=BF16_BYTES, amax_kernels=1, gemm_operand_bytes=0.5, transformer_engine=True,
)
"""Transformer Engine ``NVFP4BlockScaling`` (recipe/__init__.py l.489-600 @d0067d0d): each quantised tensor needs
its per-tensor amax for the fp32 second-level scale (one read), then one kernel writes the row-wise copy and the
column-wise copy ("both versions are computed from the high precision input"; the column-wise input and output
gradient through the 16x16 random Hadamard transform for the weight gradient; stochastic rounding on the
gradient): input and weight in forward, output gradient in backward; 0.5 B elements, so the GEMMs run at the fp4
rate."""

TORCHAO_MXFP8_CAST_BYTES_PER_S = 5.5e12
"""The attained bandwidth of torchao's MXFP8 cast kernels on a B200, bytes/s (read + written bytes over kernel time,
``benchmarks/mx_formats/cast_bench.py``'s ``bytes_rw``: 2 B read, 1 + 1/32 B written per element, as counted here):
the dim0 cast under torch.compile 'up to 5.5 TB/s', the Triton dim1 cast 'up to 3.9 TB/s' (pytorch/ao
``torchao/prototype/mx_formats/README.md`` l.107-111 @d8bb51f63143188272e116c820d5f303c7017781, the page that
publishes the B200 training rows), and the CUDA dim1 kernel the ``mxfp8_cublas`` recipes select there
(``config.py`` ``from_recipe_name`` l.186-196: ``MXFP8Dim1CastKernelChoice.CUDA``) 'about 1.4x faster than the
existing Triton kernel' (pytorch/ao pull request #2513, 2025-07-09; pytorch/torchtitan pull request #1427): 1.4 x 3.9
= 5.5 TB/s, so both directions at 5.5 TB/s, at M = K = 16384 ('up to': the largest shapes). Compared where the casts
are priced with the card's own streaming rate (``rates.DeviceRates.hbm_bytes_per_s``: a B200's default 0.90 x its
catalog 8 TB/s = 7.2 TB/s, so the casts take 7.2 / 5.5 = 1.31 times the streaming time for their bytes; a calibrated
streaming rate moves the streaming side only). torchao's MXFP8 linear runs on Blackwell only (the cuBLAS block-scaled
GEMM), so the B200 figure is taken on its Blackwell peers too."""

TORCHAO_MXFP8 = CastTraffic(
    input_forward_bytes=block_scaled_cast_bytes(copies=1, copy_bytes=MXFP8_COPY_BYTES),
    input_backward_bytes=block_scaled_cast_bytes(copies=1, copy_bytes=MXFP8_COPY_BYTES),
    weight_forward_bytes=block_scaled_cast_bytes(copies=1, copy_bytes=MXFP8_COPY_BYTES),
    weight_backward_bytes=block_scaled_cast_bytes(copies=1, copy_bytes=MXFP8_COPY_BYTES),
    grad_output_backward_bytes=2 * block_scaled_cast_bytes(copies=1, copy_bytes=MXFP8_COPY_BYTES),
    input_forward_kernels=1, weight_forward_kernels=1, backward_kernels=3, weight_backward_kernels=1, fused=True,
    cast_bytes_per_s=TORCHAO_MXFP8_CAST_BYTES_PER_S,
)
"""torchao's MXFP8 linear (torchtitan ``MXFP8LinearConverter``): ``mx_mm`` (pytorch/ao
``torchao/prototype/moe_training/mxfp8_linear.py`` l.84-270 @36027d82d1ad9949597ea16002ff4940374b1b94) saves the
bf16 input and weight; forward casts both along dim 0 (``MXTensor.to_mx``: read 2 B, write 1 + 1/32 B); backward
casts the output gradient along dim 0 (dgrad) and dim 1 (wgrad), the weight along dim 1 (dgrad) and the saved input
along dim 1 (wgrad), each one dedicated kernel (``_to_mxfp8_dim1_kernel_wrapper``): no amax, no transposes. Already
fused kernels: not scaled by the compile factors; timed at their published bandwidth
(``TORCHAO_MXFP8_CAST_BYTES_PER_S``)."""

TORCHAO_NVFP4 = replace(TE_NVFP4, amax_bytes=0.0, amax_kernels=0.0, transformer_engine=False, sac_counted_gemm=False)
"""torchao's NVFP4 linear (torchtitan ``NVFP4LinearConverter``): ``nvfp4_mm_triton`` (pytorch/ao
``torchao/prototype/moe_training/nvfp4_training/nvfp4_linear.py`` l.159-301 @36027d82d1ad9949597ea16002ff4940374b1b94):
forward ``_rht_amax`` (one read of the input) then ``_rht_quantize_row_col`` (one read, row-wise and RHT'd
column-wise fp4 copies written), ``_weight_quantize_2d`` (global amax, then the 16x16-block row-wise and column-wise
copies); backward the same amax + quantize of the output gradient with stochastic rounding; the saved column-wise
input and weight feed the backward GEMMs, so nothing is cast again. Its amax is a dedicated kernel, not the
``aten.max`` torchtitan's per-op policy saves, so a recompute re-runs it (``amax_bytes`` 0), and its GEMM is not
one the policy saves (``sac_counted_gemm``). So its bytes and kernels are ``TE_NVFP4``'s (the same amax pass and two
copies per tensor), without TE's separate amax accounting."""


TE_BLOCKWISE = replace(TRANSFORMER_ENGINE, forward_split_accumulator=True, split_quantize_kernels=1)
"""Transformer Engine's ``Float8BlockScaling`` linears: the per-tensor casts' budget (unchanged), every GEMM at full
precision (``forward_split_accumulator``); a grouped linear's splits quantised one kernel each
(``Float8BlockQuantizer::quantize``, ``grouped_split_quantize_extra_kernels``)."""

TE_CURRENT = replace(TRANSFORMER_ENGINE, split_quantize_kernels=3)
"""Transformer Engine's ``Float8CurrentScaling`` linears: the per-tensor casts' budget (unchanged); a grouped linear's
splits quantised three kernels each, amax, scale and cast (``Float8CurrentScalingQuantizer::quantize_impl``,
``grouped_split_quantize_extra_kernels``). Delayed scaling keeps ``TRANSFORMER_ENGINE``: its splits share one fused
cast-transpose kernel."""

SPLIT_QUANTIZE_SOURCE = (
    "NVIDIA/TransformerEngine @4220403e831d29e93868f7793693ea83f6b8b05b (v2.16): "
    "transformer_engine/pytorch/module/grouped_linear.py l.177 and l.401-412 (tex.split_quantize of the input and of "
    "the output gradient); transformer_engine/pytorch/csrc/extensions/cast.cpp l.394-440 (multi_tensor_quantize_impl: "
    "'Currently only have fused kernel for FP8 delayed scaling', else 'Quantize kernels individually'); "
    "transformer_engine/pytorch/csrc/quantizer.cpp l.877-924 (current scaling: nvte_compute_amax_with_config, "
    "nvte_compute_scale_from_amax, nvte_quantize_v2), l.1295-1309 (block scaling) and l.1681-1691 (MXFP8: "
    "nvte_quantize_v2)")
"""Where the per-split quantisation of Transformer Engine's ``GroupedLinear`` is read (``grouped_split_quantize_extra_kernels``)."""


def grouped_split_quantize_extra_kernels(*, casts: CastTraffic, local_experts: float) -> tuple[float, float]:
    """(forward, backward) kernels of one Transformer Engine ``GroupedLinear`` call's quantisation beyond the one
    linear's cast budget the inventory charges per call (``input_forward_kernels`` / ``backward_kernels``).

    ``GroupedLinear`` (Megatron-Core's ``TEGroupedMLP``: one call per expert projection, fc1 and fc2) quantises its
    input in forward and its output gradient in backward with ``tex.split_quantize``, one quantizer per local expert
    (``SPLIT_QUANTIZE_SOURCE``). Its C++ ``multi_tensor_quantize_impl`` fuses the splits into one cast-transpose
    kernel for delayed scaling only; for every other recipe it calls each split's quantizer in turn: current scaling
    three kernels a split (the amax, the scale from it, the cast, which also writes the transpose), MXFP8 and block
    scaling one (``CastTraffic.split_quantize_kernels``). The per-call budget counts one split's worth, so each split
    beyond the first adds its quantizer's kernels, forward and backward alike; their bytes are the same rows either
    way (already counted by volume). The inventory launches them as bare kernels (``inventory.PassInventory.bare_kernels``):
    ``split_quantize``'s C++ loop issues them with no Python or module call around each, so neither the compile
    kernel factor nor the forward's per-op host rate (Python dispatch through transformers' modules) applies; the host
    pays the backward's per-kernel rate (``rates.HOST_S_PER_BACKWARD_KERNEL``: the autograd engine's C++ launches)
    either way. Unchanged through TE 2.18: ``GroupedLinear``'s grouped-tensor path with one
    ``group_quantize`` kernel is opt-in (``NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM``, default 0, grouped_linear.py
    ``_is_grouped_tensor_path_supported`` @v2.17), and TE's fused op sequence (the card's ``moe_expert_mlp: te_ops``)
    is not this module. The weights are left out: with fp8 primary weights nothing casts them in the layer, and
    otherwise they are cast once a step (a share of a kernel a call). NVFP4 splits are fused
    (``split_quantize``'s ``FUSED_NVFP4``): nothing added. ``local_experts`` 1 or fewer: nothing."""
    extra = max(0.0, float(local_experts) - 1.0) * casts.split_quantize_kernels
    return extra, extra


def cast_traffic(*, transformer_engine: bool, compiled: bool,
                 recipe: Fp8Recipe | Fp4Recipe | None = None) -> CastTraffic:
    """The casts of a card's fp8 / fp4 linears: Transformer Engine's, else torchao float8's, compiled or eager;
    ``recipe`` ``Fp8Recipe.MXFP8`` / ``Fp4Recipe.NVFP4``: the block-scaled casts of TE or torchao (``TE_MXFP8`` ...);
    the per-tensor recipes (or None) the casts above."""
    if recipe is Fp8Recipe.MXFP8:
        return TE_MXFP8 if transformer_engine else TORCHAO_MXFP8
    if recipe is Fp4Recipe.NVFP4:
        return TE_NVFP4 if transformer_engine else TORCHAO_NVFP4
    if transformer_engine:
        if recipe is Fp8Recipe.CURRENT:
            return TE_CURRENT
        return TE_BLOCKWISE if recipe is Fp8Recipe.BLOCKWISE else TRANSFORMER_ENGINE
    return TORCHAO_COMPILED if compiled else TORCHAO_EAGER
