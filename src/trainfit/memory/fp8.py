"""Bytes fp8 training adds (``precision.compute: fp8``), by recipe. Pure: no torch, no I/O.

Sources (NVIDIA/TransformerEngine transformer_engine/common/recipe/__init__.py
@d0067d0da6cb01811b8072a7d304f0e00344ce2b: ``DelayedScaling`` l.173, ``amax_history_len: int = 1024``
l.255, ``Float8CurrentScaling`` l.286, ``Float8BlockScaling`` l.392):

* **delayed** (TE ``DelayedScaling``): every fp8 linear quantises its weight to an fp8 copy (1 B per
  weight) and, for the dgrad GEMM, its transpose (1 B per weight: TE's columnwise / transpose cache);
  both are kept from the layer's forward to its backward (saved for backward, or TE's weight workspace
  cached across micro-batches), so at the end of forward every linear's two fp8 copies are alive. Each
  linear also keeps its amax history, fp32, ``amax_history_len`` (1024) rows for its three forward
  tensors (input, weight, output) and two backward ones (output gradient, input gradient), plus an
  fp32 scale and inverse scale per tensor.
* **current** (TE ``Float8CurrentScaling``; torchao float8 ``tensorwise``, torchtitan's float8 converter):
  scales come from the tensor being cast, no history. torchao's ``matmul_with_hp_or_float8_args`` saves
  the high-precision input and weight and re-casts in backward, so the fp8 copies are transient (one
  linear at a time, left out here). Modelled as torchao: torchtitan's Llama-3.1-8B table (pytorch/torchtitan
  benchmarks/llama3_h100_202412_torchtitan.md, Table 1) reads 77.0 GiB with torch.compile and 76.8 GiB with
  compile + Float8, so no persistent fp8 weight copies. TE's ``Float8CurrentScaling`` keeps the fp8 weight
  and its transpose like delayed scaling (not what this recipe name plans); torchao's FSDP2 fp8 all-gather
  would shrink the gathered units (not modelled).
* **blockwise** (TE ``Float8BlockScaling``: 1x128 activation tiles, 128x128 weight blocks): the fp8 weight
  and its separately quantised transpose, plus one fp32 scale per 128x128 block of each.

Activations (``saved_input_bytes``): a Transformer Engine linear trained in fp8 saves, for its weight-gradient
GEMM, the fp8 copy of its input it quantised for the forward GEMM, not the 16-bit input. NVIDIA/TransformerEngine
``transformer_engine/pytorch/module/linear.py`` @v2.9 (70f536662ae10a62a54f4ed1ba92e3314c5cfd69) l.371-390:
``inputmat.update_usage(rowwise_usage=False, columnwise_usage=True)`` (or rowwise only when a sequence-parallel
all-gather of per-tensor fp8 follows in backward), ``saved_inputmat = inputmat``, ``prepare_for_saving(saved_inputmat,
...)``, the same since v2.1 (450146ae6a16e3aa220fa7089c6193458e8f8dca l.246-276); ``layernorm_linear.py`` @v2.9
l.406-458: the norm kernel writes ``ln_out`` in fp8 (``with_quantized_norm``), its row-wise half is dropped and it is
saved beside the bf16 norm input ``inputmat`` and the fp32 ``rsigma`` (v2.2 @c55e425ac5751c72bfa656560fc7c65ab7d895e9
on; v2.1 kept both halves of ``ln_out`` without sequence parallel: 2 B, as bf16); ``grouped_linear.py`` @v2.9
l.196-231: each expert GEMM's input, quantised by ``split_quantize``, column-wise only. Megatron-Core builds its
fp8 layers from these (TE ``LayerNormColumnParallelLinear`` for QKV and fc1, ``RowParallelLinear`` for the
attention projection and fc2, ``GroupedLinear`` for the experts); the core attention, the SwiGLU / GELU (which saves
its bf16 input), the router and the output layer stay bf16. Bytes per saved element by recipe:

* delayed / current (``Float8Tensor``): 1 B (the transpose, or the row-wise data under sequence parallel) plus one
  fp32 ``scale_inv`` per tensor (left out: 4 B per tensor);
* blockwise (``Float8BlockwiseQTensor``, 1x128 tiles): 1 B plus one fp32 scale per 128 elements
  (``float8_blockwise_tensor.py`` @v2.9 ``get_scale_shape`` l.112-170, ``dtype=torch.float32`` l.239).

A projection whose 16-bit input some other op keeps anyway (the attention's output, which the flash kernel saves
for its own backward) therefore saves an fp8 copy on top. torchao's float8 linears (``current`` on a torchtitan card)
save the high-precision input (above): the compute dtype's bytes, unchanged. Which stack a card runs:
``transformer_engine_linears``.

Routed experts (``grouped_experts_in_fp8``, ``routed_expert_gemms``): on a Megatron-Core card they are Transformer
Engine linears like the dense ones, and every fp8 term above applies to them per expert GEMM. Megatron-Core
(NVIDIA/Megatron-LM @64cb6bd7a155c4e742514ed1024407fb97d0a367) builds ``TEGroupedMLP`` (``moe/experts.py`` l.665-719)
from ``TEColumnParallelGroupedLinear`` / ``TERowParallelGroupedLinear``, subclasses of TE's ``GroupedLinear``
(``extensions/transformer_engine.py`` l.831, 1114, 1159), inside the same fp8 autocast, and builds each layer, its
experts included, inside the fp8 init context (``transformer_block.py`` l.286-288, ``fp8_utils.py`` l.424-441:
``fp8_model_init`` under ``--fp8-param-gather``). TE's ``GroupedLinear`` (NVIDIA/TransformerEngine
``transformer_engine/pytorch/module/grouped_linear.py`` @v2.9 70f536662ae10a62a54f4ed1ba92e3314c5cfd69) is one module
of ``num_gemms`` (the rank's local experts) weights ``weight{i}``, each treated as a ``te.Linear`` weight:

* fp8 copies: each expert's weight is quantised through ``get_weight_workspace`` (l.131-145, cached per
  ``weight{i}`` across micro-batches), given its column-wise / transpose usage when the input needs a gradient
  (l.208-210) and saved for backward (l.225-231): 1 B + 1 B per expert weight, as ``fp8_weight_copy_bytes``;
* scaling state: ``_num_fp8_tensors_per_gemm`` fwd 3, bwd 2 (l.614-617) and the recipe state sized
  ``num_gemms * 3`` / ``num_gemms * 2`` (``module/base.py`` l.767): ``FP8_TENSORS_PER_LINEAR`` per expert GEMM;
* fp8 primary weights: every ``weight{i}`` is registered with an ``fp8_meta_index`` (l.649-661), so under
  ``fp8_model_init`` ``reset_parameters`` replaces it by ``quantizer(param)`` (``base.py`` l.1278-1292), and an
  already-quantised weight is used as is (l.1373-1380): ``fp8_param_bytes_per_weight`` per expert weight;
* saved inputs: each GEMM's fp8 input, column-wise only (l.196-205; ``trainfit.memory.activations``, above).

Megatron-Core keeps the bf16 input instead only under ``save_original_input`` (at
d98e8a64ddf34856e74b24714e3bedb2f5a39553 ``moe/experts.py`` l.273-284: fc2 with ``moe_act`` recompute, fc1 with
expert offloading; not modelled). Other runtimes' fused experts (transformers ``grouped_mm``, torchtitan's grouped
experts under torchao float8) are 3-D parameters outside TE's and torchao's linear swaps: they stay bf16 here.

Block-scaled recipes on Blackwell (``fp8_recipe: mxfp8``, ``compute: fp4`` with ``fp4_recipe: nvfp4``), read at
NVIDIA/TransformerEngine @d0067d0da6cb01811b8072a7d304f0e00344ce2b:

* **mxfp8** (TE ``MXFP8BlockScaling``, ``transformer_engine/common/recipe/__init__.py`` l.337-390): E4M3 elements
  with one E8M0 (1 B) scale per 32 consecutive elements. The 1x32 blocks run along the GEMM's reduction axis, which
  is a different axis for the forward and the backward GEMMs, so ``MXFP8Quantizer`` writes a row-wise and a
  separately scaled column-wise copy (``tensor/mxfp8_tensor.py``: ``_rowwise_data`` / ``_columnwise_data``, each with
  its ``uint8`` ``scale_inv`` of shape ``[M, K/32]`` / ``[M/32, K]``, padded to 128x4): a cached weight is 1 B + 1 B
  per element plus 2 B per 32; the saved input (column-wise only) 1 B plus 1 B per 32.
* **nvfp4** (TE ``NVFP4BlockScaling``, recipe l.489-600): E2M1 elements (0.5 B, two per byte), one E4M3 (1 B) scale
  per 16 consecutive elements and one fp32 scale per tensor; "when Transformer Engine needs both the tensor and its
  transpose ... both versions are computed from the high precision input" (row-wise and column-wise data, each with
  a ``[M, K/16]``-shaped ``uint8`` scale, ``tensor/nvfp4_tensor.py`` ``get_scale_shape`` l.273-307, the weights'
  16x16 2-D blocks stored at the same 1x16 scale layout): a cached weight is 0.5 B + 0.5 B plus 2 B per 16; the
  saved input (column-wise only, random-Hadamard-transformed for the weight gradient) 0.5 B plus 1 B per 16.

Both are Transformer Engine's on a Megatron-Core card; elsewhere they are torchao's (torchtitan's
``MXFP8LinearConverter`` / ``NVFP4LinearConverter``), read at pytorch/ao @36027d82d1ad9949597ea16002ff4940374b1b94:

* torchao MXFP8 (``torchao/prototype/moe_training/mxfp8_linear.py``): the ``mx_mm`` autograd function saves the
  high-precision input and weight (``ctx.save_for_backward(input_hp, weight_hp)``, l.108) and quantises again in
  backward: no kept copies and the compute dtype's saved input, as torchao float8.
* torchao NVFP4 (``torchao/prototype/moe_training/nvfp4_training/nvfp4_linear.py``): ``nvfp4_mm_triton.forward``
  quantises the input row- and column-wise (l.197-199) and saves the column-wise fp4 input with its scales
  (``x_col_codes`` / ``x_col_sf``) and the column-wise fp4 weight with its scales (``Wt_fp4_x2`` / ``Wt_sf``) for
  backward (l.228-236): a 0.5625 B saved input (``saves_quantized_input``) and one column-wise weight copy at
  ``quantized_element_bytes`` per weight (``fp8_bytes``), held as saved tensors, so a checkpointed layer drops it
  (``plan.terms.fp8_weight_bytes``).
"""

from __future__ import annotations

from trainfit.spec.enums import Fp4Recipe, Fp8Recipe, TensorParallelImpl

AMAX_HISTORY_LEN = 1024
"""TE ``DelayedScaling.amax_history_len`` default: ``amax_history_len: int = 1024`` (NVIDIA/TransformerEngine
``transformer_engine/common/recipe/__init__.py`` @799cf76be3c1bb0a9d7995614a1af5a2a77a9e10)."""
FP8_TENSORS_PER_LINEAR = 5
"""Forward: input, weight, output; backward: output gradient, input gradient (TE's fp8 meta per module:
``num_fp8_tensors = self.fp8_meta["num_gemms"] * 3 if fwd else self.fp8_meta["num_gemms"] * 2``, NVIDIA/TransformerEngine
``transformer_engine/pytorch/module/base.py`` l.1139 @d0067d0da6cb01811b8072a7d304f0e00344ce2b)."""
FP32 = 4
BLOCK = 128
"""FP8 blockwise scaling's block edge, one fp32 scale per 1 x 128 activation tile and per 128 x 128 weight block:
DeepSeek-V3's fine-grained quantization (arXiv 2412.19437, section 3.3), which TE's ``Float8BlockScaling`` runs (the
"rather than 128" of https://nvidia.github.io/TransformerEngine/features/low_precision_training/mxfp8/mxfp8.html,
read 2026-12-04)."""
MX_BLOCK = 32
"""MXFP8: elements per E8M0 scale (1 B): "Block size is 32", one E8M0 scale per 32 consecutive values (same TE page,
https://nvidia.github.io/TransformerEngine/features/low_precision_training/mxfp8/mxfp8.html, read 2026-12-04)."""
NVFP4_BLOCK = 16
"""NVFP4: elements per E4M3 scale (1 B): "The NVFP4 recipe quantizes across 16 FP32 elements ... 16 FP4 output
values (E2M1) and 1 FP8 scaling factor (E4M3)" (cuDNN Block Scaling,
https://docs.nvidia.com/cudnn/latest/operations/BlockScaling/llms.txt, read 2026-12-04)."""
TE_ONLY_RECIPES = (Fp8Recipe.DELAYED, Fp8Recipe.BLOCKWISE)
"""Recipes no other stack runs: a card that names them runs Transformer Engine's linears."""

Recipe = Fp8Recipe | Fp4Recipe


def quantized_element_bytes(recipe: Recipe) -> float:
    """Bytes of one quantised element of one copy (row-wise or column-wise), its block scale included: 1 B for the
    per-tensor fp8 recipes (one fp32 scale per tensor, left out), 1 + 4/128 for blockwise (fp32 per 1x128 tile), 1 +
    1/32 for mxfp8 (E8M0 per 32), 0.5 + 1/16 for nvfp4 (E4M3 per 16)."""
    if recipe is Fp4Recipe.NVFP4:
        return 0.5 + 1.0 / NVFP4_BLOCK
    if recipe is Fp8Recipe.MXFP8:
        return 1.0 + 1.0 / MX_BLOCK
    return 1.0 + (FP32 / BLOCK if recipe is Fp8Recipe.BLOCKWISE else 0.0)


def transformer_engine_linears(*, recipe: Recipe, tensor_parallel_impl: TensorParallelImpl) -> bool:
    """Whether a card's fp8 linears are Transformer Engine's: delayed and blockwise scaling exist only there, and a
    Megatron-Core card (``parallel.tensor_parallel_impl: megatron``: Megatron-LM, NeMo, Megatron-Bridge, whose fp8
    runs through TE) runs current scaling as TE's ``Float8CurrentScaling``; otherwise current scaling is torchao's
    float8 (torchtitan). mxfp8 and nvfp4 likewise: TE's ``MXFP8BlockScaling`` / ``NVFP4BlockScaling`` on a
    Megatron-Core card, torchao's MX / NVFP4 linears (torchtitan's converters) elsewhere."""
    return recipe in TE_ONLY_RECIPES or tensor_parallel_impl is TensorParallelImpl.MEGATRON


def saves_quantized_input(*, recipe: Recipe, tensor_parallel_impl: TensorParallelImpl) -> bool:
    """Whether a card's quantised linears save their input's quantised column-wise copy for the weight gradient
    (``saved_input_bytes``) rather than the 16-bit input: Transformer Engine's (``transformer_engine_linears``), and
    torchao's NVFP4 linear, whose ``nvfp4_mm_triton.forward`` saves ``x_col_codes`` / ``x_col_sf`` (the RHT'd
    column-wise fp4 input and its scales) and ``Wt_fp4_x2`` / ``Wt_sf`` (pytorch/ao
    ``torchao/prototype/moe_training/nvfp4_training/nvfp4_linear.py`` l.198-236
    @36027d82d1ad9949597ea16002ff4940374b1b94). torchao float8 and MXFP8 (``mx_mm.forward`` ``ctx.save_for_backward
    (input_hp, weight_hp)``, ``torchao/prototype/moe_training/mxfp8_linear.py`` l.108 there) save the 16-bit input."""
    return (transformer_engine_linears(recipe=recipe, tensor_parallel_impl=tensor_parallel_impl)
            or recipe is Fp4Recipe.NVFP4)


def saved_input_bytes(*, recipe: Recipe) -> float:
    """Bytes per element of the input a Transformer Engine fp8 / fp4 linear saves for its weight gradient (module
    docstring): its column-wise quantised copy, block scales included (``quantized_element_bytes``)."""
    return quantized_element_bytes(recipe)


def fp8_weight_copy_bytes(*, linear_weight_params: float, recipe: Recipe | None = None) -> float:
    """The fp8 copy of each linear weight and its transpose (1 B each per weight); mxfp8 / nvfp4: the row-wise and
    the column-wise copy at their element bytes, block scales included (``quantized_element_bytes``)."""
    if recipe in (Fp8Recipe.MXFP8, Fp4Recipe.NVFP4):
        return 2.0 * quantized_element_bytes(recipe) * linear_weight_params
    return 2.0 * linear_weight_params


def fp8_scaling_state_bytes(*, recipe: Recipe, linears: int, linear_weight_params: float) -> float:
    """Amax history and scales: delayed keeps ``AMAX_HISTORY_LEN`` fp32 amaxes per fp8 tensor per linear plus a
    scale and an inverse scale; current keeps the scales only; blockwise one fp32 scale per 128x128 weight block
    for the copy and its transpose; mxfp8 none beyond the block scales its copies carry (``fp8_weight_copy_bytes``);
    nvfp4 one fp32 per-tensor amax per quantised tensor (input, weight, output gradient) per linear."""
    if recipe is Fp8Recipe.MXFP8:
        return 0.0
    if recipe is Fp4Recipe.NVFP4:
        return float(linears * 3 * FP32)
    if recipe is Fp8Recipe.DELAYED:
        return float(linears * FP8_TENSORS_PER_LINEAR * (AMAX_HISTORY_LEN + 2) * FP32)
    if recipe is Fp8Recipe.CURRENT:
        return float(linears * FP8_TENSORS_PER_LINEAR * 2 * FP32)
    return 2.0 * FP32 * linear_weight_params / (BLOCK * BLOCK)


def fp8_bytes(*, recipe: Recipe, linears: int, linear_weight_params: float,
              transformer_engine: bool | None = None) -> float:
    """All fp8 / fp4 state one rank holds through a step for ``linears`` quantised linears of
    ``linear_weight_params`` (current scaling: torchao's, without kept copies). mxfp8 / nvfp4: TE's cached row- and
    column-wise weight copies where ``transformer_engine`` (``transformer_engine_linears``), nothing kept under
    torchao (module docstring)."""
    if recipe in (Fp8Recipe.MXFP8, Fp4Recipe.NVFP4):
        state = fp8_scaling_state_bytes(recipe=recipe, linears=linears, linear_weight_params=linear_weight_params)
        if transformer_engine:
            return fp8_weight_copy_bytes(linear_weight_params=linear_weight_params, recipe=recipe) + state
        if recipe is Fp4Recipe.NVFP4:  # torchao: the column-wise weight saved for the dgrad GEMM (module docstring)
            return quantized_element_bytes(recipe) * linear_weight_params + state
        return 0.0
    copies = 0.0 if recipe is Fp8Recipe.CURRENT else fp8_weight_copy_bytes(linear_weight_params=linear_weight_params)
    return copies + fp8_scaling_state_bytes(recipe=recipe, linears=linears, linear_weight_params=linear_weight_params)


def grouped_experts_in_fp8(*, tensor_parallel_impl: TensorParallelImpl) -> bool:
    """Whether a card's routed experts are Transformer Engine fp8 GEMMs (module docstring): Megatron-Core's
    ``TEGroupedMLP`` (``parallel.tensor_parallel_impl: megatron``); elsewhere the fused experts stay bf16."""
    return tensor_parallel_impl is TensorParallelImpl.MEGATRON


def routed_expert_gemms(spec, *, expert_parallel: int) -> tuple[int, int]:
    """(GEMMs, weight elements) of the routed experts one expert-parallel rank holds of ``spec``: each fused
    expert projection (``LinearGroup.is_fused_experts``: gate/up as one, down) is one TE ``GroupedLinear`` per MoE
    layer of ``experts / expert_parallel`` GEMMs (Megatron-Core's ``num_local_experts``). ``spec`` keeps every
    expert (the full model, or ``memory.parallel.shard_spec``, which splits the experts' width, not their
    number), so its fused groups are its routed ones (``LinearGroup.routed``), and ``expert_parallel`` =
    experts leaves one GEMM per projection."""
    from trainfit.memory.params import linear_groups

    groups = [g for g in linear_groups(spec) if g.is_fused_experts]
    gemms = sum(g.count * (g.experts // expert_parallel) for g in groups)
    return gemms, sum(g.count * (g.experts // expert_parallel) * g.in_features * g.out_features for g in groups)


def _fp8_linears(spec, *, expert_parallel: int | None) -> tuple[int, int]:
    """(linears / GEMMs, weight elements) run in fp8: the dense linears, plus the rank's routed expert GEMMs when
    ``expert_parallel`` is given (TE grouped experts); None: the fused experts stay bf16."""
    from trainfit.memory.params import linear_groups
    from trainfit.memory.weights import quantized_linear_params

    linears, params = sum(g.count for g in linear_groups(spec) if not g.is_fused_experts), quantized_linear_params(spec)
    if expert_parallel is None:
        return linears, params
    gemms, expert_params = routed_expert_gemms(spec, expert_parallel=expert_parallel)
    return linears + gemms, params + expert_params


def fp8_linear_count(spec, *, expert_parallel: int | None = None) -> int:
    """Linears / GEMMs of ``spec`` run in fp8 (``_fp8_linears``)."""
    return _fp8_linears(spec, expert_parallel=expert_parallel)[0]


def fp8_linear_params(spec, *, expert_parallel: int | None = None) -> int:
    """Weight elements of ``spec``'s fp8 linears (``_fp8_linears``): what fp8 primary weights replace."""
    return _fp8_linears(spec, expert_parallel=expert_parallel)[1]


def fp8_model_bytes(spec, *, recipe: Recipe, scale: float = 1.0, expert_parallel: int | None = None,
                    transformer_engine: bool | None = None) -> float:
    """``fp8_bytes`` for every dense linear of ``spec`` and, given ``expert_parallel`` (Transformer Engine grouped
    experts, ``grouped_experts_in_fp8``), every routed expert GEMM of one expert-parallel rank; without it the fused
    experts stay bf16. Weights scaled by ``scale`` (the rank's share of the parameters)."""
    linears, params = _fp8_linears(spec, expert_parallel=expert_parallel)
    return fp8_bytes(recipe=recipe, linears=linears, linear_weight_params=params * scale,
                     transformer_engine=transformer_engine)


# fp8 primary weights (``precision.fp8_params``): Transformer Engine ``quantized_model_init`` (``fp8_model_init``,
# deprecated alias) / Megatron ``--fp8-param-gather`` / NeMo ``fp8_params``. Sources (NVIDIA/TransformerEngine
# @d0067d0da6cb01811b8072a7d304f0e00344ce2b): ``transformer_engine/pytorch/quantization.py`` l.847-925 (the context
# sets ``fp8_parameters``; modules "hold only quantized copies of its parameters, as opposed to the default behavior
# where both higher precision and quantized copies are present"); ``module/base.py`` l.911 (``primary_weights_in_fp8``)
# and l.1836-1865 (each weight is replaced by ``quantizer(param)`` with ``set_usage(rowwise=True, columnwise=...)``),
# l.835-845 (an already-quantized weight is used as is: no per-forward cast, no workspace); ``tensor/float8_tensor.py``
# l.414-430 (``Float8CurrentScalingQuantizer.inner_tensor_specs``: a ``Float8Tensor`` holds ``_data`` (uint8) and, for column-wise use, a separate ``_transpose`` only where
# the GPU lacks non-TN fp8 GEMMs; one fp32 ``_scale_inv``); ``utils.py`` l.658-663 ``is_non_tn_fp8_gemm_supported``:
# compute capability 10.x-11.x and >= 13.0 (Blackwell) need no transpose (v2.1 @450146ae: ``>= (10, 0)``, utils.py
# l.254-258; float8_tensor.py l.270-285 builds the transpose only without it); ``tensor/utils.py`` l.1404-1430
# ``post_all_gather_processing``: after the distributed optimizer's all-gather, ``Float8Tensor`` "if backend does not
# support non-transposed FP8 GEMM, pre-create[s] the transpose", ``Float8BlockwiseQTensor`` creates its column-wise
# storage. NVIDIA/Megatron-LM @d98e8a64ddf34856e74b24714e3bedb2f5a39553: ``megatron/core/distributed/
# param_and_grad_buffer.py`` l.894, 921-923 (an fp8 parameter's buffer is ``torch.uint8``: the all-gather moves 1 B
# per weight), ``megatron/core/optimizer/distrib_optimizer.py`` l.420-445 (the shard's fp32 main params are made from
# the fp8 weights or their high-precision init value: master weights unchanged), ``megatron/core/fp8_utils.py``
# l.396-453 (``quantize_param_shard``: the step casts the fp32 main shard straight into the fp8 weights,
# ``cast_master_weights_to_fp8``) and l.687-709 (``post_all_gather_processing``); ``megatron/training/arguments.py``
# l.1095-1097 (``--fp8-param-gather`` needs the distributed optimizer or an FSDP).


# Megatron-FSDP with fp8 primary weights (Megatron-Bridge's FP8 presets set ``fp8_param_gather`` True, and the
# performance scripts' ``set_megatron_fsdp_overrides`` run Megatron-FSDP with ``data_parallel_sharding_strategy
# optim_grads_params`` and ``keep_fp8_transpose_cache = False``: NVIDIA-NeMo/Megatron-Bridge
# src/megatron/bridge/training/mixed_precision.py l.272-289 and scripts/performance/utils/helpers.py l.35-41,
# l.116-121 @7af9601c9da746d21481194356295bfe23df3737 (v0.2.0); scripts/performance/utils/overrides.py l.94-102
# @067f987df03b8355b03192d88d70f1709fedf51a). Megatron-FSDP (NVIDIA/Megatron-LM
# megatron/core/distributed/fsdp/src/megatron_fsdp/ @3097d81dd48633acad6bd08fb7c960a124e37c83, the Megatron-LM
# Megatron-Bridge 26.04-alpha.rc2 pins): an fp8 parameter group's model-weight buffer is ``torch.uint8``
# (param_and_grad_buffer.py l.2212-2225), sharded over the data-parallel ranks and all-gathered per unit: 1 B per
# weight both in the shard and in the gathered unit; its main weights are the fp32 ``main_weight_buffer``
# (l.2281-2300; unchanged) and its main gradients bf16 (l.2222). A separate transpose buffer is made only for MXFP8
# (l.2230-2238, mixed_precision.py l.182-189 ``fp8_need_transpose_data``); a per-tensor fp8 weight's transpose is
# built by ``fp8_create_transpose_cache`` (TE ``post_all_gather_processing``: only where the GPU lacks non-TN fp8
# GEMMs) after the backward all-gather of each unit (megatron_fsdp.py l.486-490) and dropped when the unit is
# released (l.575-581, ``keep_fp8_transpose_cache`` False). The same at the other pins:
# @0d8e0714cd29c01e164fe6de9f532182bdffa942 (v0.2.0's: uint8 buffer param_and_grad_buffer.py l.1817; the released unit's transpose invalidated, megatron_fsdp.py
# l.492-504, so TE rebuilds it in the next backward) and @2a75ac12c54ba6a42b34024756820bf819a2e25f (067f987d's:
# l.2632-2635; megatron_fsdp.py l.498, l.626). The current-scaling step's per-tensor amax all-reduce (one fp32 per
# linear) is not timed.


def megatron_fsdp_fp8_shard_bytes(*, linear_weight_params: float, shards: int) -> float:
    """Bytes one rank keeps of the fp8 primary weights under Megatron-FSDP: its 1/``shards`` of the uint8 row-wise
    data (no transpose is kept between steps)."""
    return 1.0 * linear_weight_params / max(1, shards)


def megatron_fsdp_fp8_unit_bytes(*, unit_params: float, unit_linear_params: float, other_bytes_per_param: float,
                                 non_tn_gemm: bool) -> tuple[float, float]:
    """(one gathered layer unit, the transpose its backward adds) under Megatron-FSDP with per-tensor fp8 primary
    weights: the unit's linear weights at 1 B (the uint8 buffer), its other parameters (norms) at
    ``other_bytes_per_param``; on a GPU without non-TN fp8 GEMMs the backward builds a 1 B transpose of the unit's
    linear weights after its all-gather and drops it with the unit."""
    unit = unit_linear_params * 1.0 + max(0.0, unit_params - unit_linear_params) * other_bytes_per_param
    return unit, (0.0 if non_tn_gemm else 1.0 * unit_linear_params)


FP8_GATHERED_BYTES = 1.0
"""Bytes per gathered torchao float8 linear weight element: ``Float8Tensor._data`` (e4m3, 1 B)."""
SCALE_BYTES = 4.0
"""One fp32 scale per torchao float8 linear (``_precomputed_scale``, ``local_scale_tensor[i]``; pytorch/ao
@8c81863ba85cce742244c0151c6683c5696bbe04 ``torchao/float8/fsdp_utils.py`` l.236, 246-268)."""


def torchao_fp8_gather_unit_bytes(*, unit_params: float, unit_linear_params: float, unit_linears: float,
                                  other_bytes_per_param: float) -> float:
    """One gathered layer unit under torchao's float8 FSDP2 all-gather (``precision.fp8_all_gather``): the unit's
    float8 linear weights arrive as ``Float8Tensor._data`` at 1 B each, with one fp32 scale per linear from
    ``fsdp_post_all_gather``'s metadata (pytorch/ao @8c81863ba85cce742244c0151c6683c5696bbe04
    ``torchao/float8/fsdp_utils.py`` l.236, 246-268), its other parameters (norms) in ``other_bytes_per_param``
    (``param_dtype``). The fp32 (or bf16) shards, their gradients and the optimizer are unchanged; no transpose is
    kept (the backward's layout copy is a transient of the GEMM)."""
    return (unit_linear_params * FP8_GATHERED_BYTES + unit_linears * SCALE_BYTES
            + max(0.0, unit_params - unit_linear_params) * other_bytes_per_param)


def torchao_fp8_all_gathered_bytes(*, all_gathered_bytes: float, linear_params: float, linears: float,
                                   other_bytes_per_param: float, gathered_share: float) -> float:
    """The whole gathered model kept from forward to the end of backward (FSDP2 ``reshard_after_forward=False``,
    strategy ``fsdp_grad_op``) under torchao's float8 all-gather: ``all_gathered_bytes`` (the ``gathered_share`` of
    every parameter not held locally, in ``other_bytes_per_param``) with the ``linear_params`` float8 linear weight
    elements at 1 B (``Float8Tensor._data``, kept unsharded until the backward ends) plus one fp32 scale for each of
    the ``linears`` (``fsdp_post_all_gather``'s metadata; pytorch/ao @8c81863ba85cce742244c0151c6683c5696bbe04
    ``torchao/float8/fsdp_utils.py`` l.236, 246-268): the per-linear saving of ``torchao_fp8_gather_unit_bytes``
    over every layer at once."""
    saved = linear_params * gathered_share * max(0.0, other_bytes_per_param - FP8_GATHERED_BYTES)
    return max(0.0, all_gathered_bytes - saved) + linears * SCALE_BYTES


def non_tn_fp8_gemm(compute_capability: str | None) -> bool:
    """TE ``is_non_tn_fp8_gemm_supported``: Blackwell (10.x, 11.x, >= 13.0) runs fp8 GEMMs on either layout, so a
    per-tensor fp8 weight keeps no transpose. Unknown capability: False (the transpose is kept, the larger)."""
    if not compute_capability:
        return False
    major, _, minor = compute_capability.partition(".")
    cc = (int(major), int(minor or 0))
    return (10, 0) <= cc < (12, 0) or cc >= (13, 0)


# The transpose of a per-tensor fp8 primary weight on a GPU without non-TN fp8 GEMMs (Hopper, Ada), by Transformer
# Engine release. Transformer Engine 1.x builds it for the dgrad GEMM and caches it on the weight only when asked:
# NVIDIA/TransformerEngine v1.6rc2 (090e72412e06f44fe43aa4c4564ae11469961c9a) ``transformer_engine/pytorch/module/
# linear.py`` l.408-413, in the backward: "Primary weights are in FP8." ``weight_t_fp8 = weight.transpose_2d(
# cache=ctx.is_first_microbatch is not None, ...)``, and ``float8_tensor.py`` l.575-576 ``if not cache: return
# tex.fp8_transpose(self._data, self._fp8_dtype)``: a new tensor, freed after that linear's dgrad GEMM
# (``layernorm_linear.py`` the same); v1.10 (08a85d3b2657f1d4e0b478f6682c17fe6bba8b05) ``module/linear.py`` l.960-977
# fills the cache in the forward only when ``is_first_microbatch`` is truthy, l.449 ``weight_fp8.transpose_2d()``
# (``fill_cache`` False) in the backward, and ``Float8Tensor.to_float8`` (``float8_tensor.py``) makes no transpose at
# initialisation. Megatron-Core passes ``is_first_microbatch`` None when its ``disable_parameter_transpose_cache`` is
# set (NVIDIA/Megatron-LM 24.09-alpha.rc0 (dd182053afc66a2195e018571537c8ce9f890df4) ``megatron/core/transformer/
# custom_layers/transformer_engine.py`` l.171-172 ``None if self.disable_parameter_transpose_cache else
# self.is_first_microbatch``), so the transpose then lives one linear at a time in the backward:
# ``transpose_cached`` False. From Transformer Engine 2.0 on the forward itself asks for the column-wise usage
# whenever the input needs a gradient and keeps it on the weight: v2.2 (c55e425ac5751c72bfa656560fc7c65ab7d895e9)
# ``module/linear.py`` l.190-196 ``columnwise_usage = is_grad_enabled and inp.requires_grad``, ``module/base.py``
# l.990-996 (an fp8 primary weight: ``tensor.update_usage(..., columnwise_usage=quantizer.columnwise_usage)``,
# also with ``is_first_microbatch`` None), ``tensor/float8_tensor.py`` l.425-460 (``update_usage`` creates
# ``_transpose`` and drops it only when the column-wise usage is not asked for, as in a no-grad forward); nothing in
# Megatron-Core's distributed-optimizer path drops it (25.04-alpha.rc1: only its custom FSDP releases
# ``param._transpose``). A frozen base weight (LoRA) is no exception: its input still needs the gradient for the
# adapters below, so the dgrad GEMM, and with it the transpose, is still run.


def fp8_param_bytes_per_weight(*, recipe: Recipe, non_tn_gemm: bool, transpose_cached: bool = True) -> float:
    """Bytes a linear's fp8 primary weight holds per element, scales aside: 1 B of row-wise data, plus 1 B for the
    transpose (per-tensor delayed/current scaling without non-TN GEMMs, unless ``transpose_cached`` is False: the
    Transformer Engine 1.x transpose made in the backward and freed, comment above) or the separately quantised
    column-wise copy (blockwise, every GPU); mxfp8 / nvfp4: both copies with their block scales
    (``fp8_weight_copy_bytes``; an NVFP4 primary weight's column-wise copy is the 16x16-block transpose TE builds after
    the all-gather, ``post_all_gather_processing``)."""
    if recipe in (Fp8Recipe.MXFP8, Fp4Recipe.NVFP4):
        return 2.0 * quantized_element_bytes(recipe)
    if recipe is Fp8Recipe.BLOCKWISE:
        return 2.0
    return 1.0 if non_tn_gemm or not transpose_cached else 2.0


FUSED_INPUT_PROJECTIONS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))
"""Projections Megatron-Core holds as one weight (``linear_qkv``, ``linear_fc1``): their transposes are one tensor."""


def largest_linear_weight_params(spec) -> int:
    """Weight elements of the largest single linear weight of one decoder layer of ``spec`` (dense linears, fused
    experts aside), with q/k/v and gate/up summed as Megatron-Core's fused ``linear_qkv`` / ``linear_fc1``: the most
    one in-flight transpose holds."""
    from trainfit.memory.params import linear_groups

    sizes: dict[str, int] = {}
    for g in linear_groups(spec):
        if g.is_fused_experts:
            continue
        key = g.name
        for fused in FUSED_INPUT_PROJECTIONS:
            for part in fused:
                if g.name.endswith(part):
                    key = g.name[: -len(part)] + "+".join(fused)
        sizes[key] = sizes.get(key, 0) + g.in_features * g.out_features
    return max(sizes.values(), default=0)


def fp8_param_model_bytes(spec, *, recipe: Recipe, non_tn_gemm: bool, scale: float = 1.0,
                          expert_parallel: int | None = None, transpose_cached: bool = True) -> float:
    """The dense linears' fp8 primary weights of ``spec`` (``fp8_param_bytes_per_weight``) and their scaling state
    (``fp8_scaling_state_bytes``: amax history, scales, block scales for both copies): what replaces their bf16
    weights and the separate fp8 copies (``fp8_model_bytes``). Given ``expert_parallel``, one expert-parallel rank's
    routed expert weights too (TE ``GroupedLinear`` weights are fp8 primary weights alike); else they stay bf16.
    ``transpose_cached`` False (a per-tensor recipe on a GPU without non-TN GEMMs): 1 B per weight plus the one
    transpose in flight, the largest linear's (``largest_linear_weight_params``, 1 B each, at ``scale``), counted
    through the step: at most that one linear above the forward's true bytes."""
    linears, params = _fp8_linears(spec, expert_parallel=expert_parallel)
    p = params * scale
    per = fp8_param_bytes_per_weight(recipe=recipe, non_tn_gemm=non_tn_gemm, transpose_cached=transpose_cached)
    in_flight = 0.0
    if per < fp8_param_bytes_per_weight(recipe=recipe, non_tn_gemm=non_tn_gemm):
        in_flight = 1.0 * largest_linear_weight_params(spec) * scale
    return per * p + in_flight + fp8_scaling_state_bytes(recipe=recipe, linears=linears, linear_weight_params=p)
