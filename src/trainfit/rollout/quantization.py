"""The rollout engine's fp8 weights (``rollout.quantization: fp8``), as NeMo RL runs vLLM with them.

NeMo RL's ``policy.generation.vllm_cfg.precision: fp8`` (NVIDIA-NeMo/RL
``nemo_rl/models/generation/vllm/quantization/fp8.py`` @9dbd9adc95a10f5946cceb36e1d5b31e2429e470, ``init_fp8``)
starts vLLM with ``quantization: fp8`` and a checkpoint-style quantization config, ``FP8_BLOCK_QUANT_KWARGS``:
e4m3 weights in 128 x 128 blocks (``weight_block_size: [128, 128]``) and ``activation_scheme: dynamic`` (each
GEMM input quantized per token in groups of 128 columns, DeepSeek-V3's recipe). The performance recipes
(``examples/configs/recipes/llm/performance/grpo-llama3.1-8b-instruct-2n8g-fp8-async-1off.yaml`` and
``grpo-deepseek-v3-64n8g-fp8-async-1off.yaml``, same commit) add ``use_deep_gemm: true`` (DeepGEMM's fp8 GEMMs
with fp32 block scales, ``VLLM_USE_DEEP_GEMM_E8M0=0``).

**Which weights.** vLLM's ``Fp8Config.get_quant_method`` (vllm-project/vllm v0.11.2, NeMo RL v0.5's pin,
``vllm/model_executor/layers/quantization/fp8.py`` lines 289-314; PyPI sdist https://pypi.org/project/vllm/0.11.2/,
read 2026-12-02) gives every ``LinearBase`` and ``FusedMoE`` layer the fp8 method unless its name is in
``ignored_layers``; the embedding and the ``ParallelLMHead`` (vocab-parallel embeddings, not linears), the norms
and the router gates built with ``quant_config=None`` (``deepseek_v2.py`` line 266-270) stay bf16. NeMo RL fills
``ignored_layers`` from ``quantization_ignored_layer_kws`` (a linear whose name contains a keyword stays bf16: the
DeepSeek-V3 recipe keeps ``a_proj`` / ``b_proj``, the latent-attention projections), the card's
``rollout.quantization_bf16_modules``. ``num_first_layers_in_bf16`` / ``num_last_layers_in_bf16`` (default 0, not
set by the recipes) are not modelled.

**Bytes** (``fp8_block_linear_bytes``): 1 B per weight plus one fp32 ``weight_scale_inv`` per 128 x 128 block
(``create_fp8_scale_parameter(BlockQuantScaleParameter, ...)``; ``Fp8MoEMethod.create_weights`` lines 745-760
for the experts' ``w13`` / ``w2``). The KV cache keeps the model dtype: ``kv_cache_dtype: auto``
(``examples/configs/grpo_math_1B.yaml`` line 248, which the recipes inherit).

**Refit.** The trainer sends bf16 as before: Megatron's export is unchanged, and the vLLM worker casts each fp8
weight on arrival (``vllm_backend.py`` ``update_weights_from_collective`` / ``update_weights_via_ipc_zmq`` call
``fp8.load_weights``, which runs ``cast_tensor_to_fp8_blockwise(v.to(torch.float), ...)`` on the whole Hugging
Face tensor, before vLLM's weight loader takes the rank's shard). So every engine rank quantizes the whole
model's fp8 weights at every refit (``refit_cast_params``), at ``FP8_CAST_BYTES_PER_PARAM`` of HBM traffic each.

Not modelled: the activations' per-token-group quantization kernel before each fp8 GEMM (one memory-bound pass
over the GEMM's input; inside the decode step's CUDA graph) and DeepGEMM's scale-layout post-processing at load.

Pure: no torch, no I/O.
"""

from __future__ import annotations

from math import ceil

from trainfit.errors import CardError
from trainfit.memory.params import LinearGroup, linear_groups, param_breakdown
from trainfit.memory.weights import count_scale
from trainfit.spec.enums import RolloutQuantization
from trainfit.spec.model import ModelSpec

FP8_BLOCK = 128
"""Rows and columns of one weight block sharing a scale (``weight_block_size: [128, 128]``)."""
FP8_SCALE_BYTES = 4
"""One fp32 ``weight_scale_inv`` per block."""
MODEL_DTYPE_BYTES = 2
"""bf16: what the engine holds without quantization, and what stays unquantized."""
FP8_CAST_BYTES_PER_PARAM = 49
"""HBM bytes ``cast_tensor_to_fp8_blockwise`` moves per weight (NeMo RL ``fp8.py`` @9dbd9adc, ``load_weights``):
``v.to(torch.float)`` (2 read + 4 written), the blocked ``permute(...).contiguous()`` (4 + 4), ``torch.abs`` (4 + 4),
``amax`` over each block (4), ``data_hp * scale_fp`` (4 + 4), ``torch.clamp`` (4 + 4), ``.to(float8_e4m3fn)``
(4 + 1), the permute back to the weight's layout (1 + 1): 49."""
REPLICATED_LINEARS = ("q_a_proj", "kv_a_proj_with_mqa")
"""Linears every tensor-parallel rank of a vLLM engine keeps whole (DeepSeek's latent down-projections,
``ReplicatedLinear`` / ``fused_qkv_a_proj`` with ``disable_tp``; ``memory.attention.mla_replicated_params``)."""
KV_LINEARS = ("k_proj", "v_proj")
"""Linears replicated past one KV head per rank (``QKVParallelLinear``, ``rollout.vllm.kv_heads_per_gpu``)."""


def fp8_block_linear_bytes(*, in_features: int, out_features: int) -> float:
    """Bytes of one block-quantized fp8 weight: ``in x out`` e4m3 values + ``ceil(out/128) x ceil(in/128)`` fp32
    scales (Llama-3.1-8B's gate_proj, 4096 -> 14336: 58,720,256 + 14,336 B)."""
    return float(in_features * out_features
                 + FP8_SCALE_BYTES * ceil(out_features / FP8_BLOCK) * ceil(in_features / FP8_BLOCK))


def is_quantized(quantization: RolloutQuantization) -> bool:
    return quantization is RolloutQuantization.FP8


def _kept(group: LinearGroup, bf16_modules: tuple[str, ...]) -> bool:
    return any(k in group.name for k in bf16_modules)


def check_bf16_modules(spec: ModelSpec, bf16_modules: tuple[str, ...]) -> None:
    """Every keyword of ``rollout.quantization_bf16_modules`` names a part of at least one linear of ``spec`` (a
    keyword that matches nothing is a typo, not a setting). Raises ``CardError`` (one line)."""
    names = [g.name for g in linear_groups(spec)]
    for k in bf16_modules:
        if not any(k in n for n in names):
            raise CardError(f"rollout.quantization_bf16_modules: '{k}' is in no linear of {spec.name}; allowed: parts"
                            f" of {', '.join(sorted(set(names)))}")


def fp8_groups(spec: ModelSpec, bf16_modules: tuple[str, ...] = ()) -> list[LinearGroup]:
    """The linear groups vLLM stores in fp8: every decoder linear and fused expert not kept in bf16."""
    return [g for g in linear_groups(spec) if not _kept(g, bf16_modules)]


def _group_fp8_bytes(g: LinearGroup) -> float:
    return g.count * g.experts * fp8_block_linear_bytes(in_features=g.in_features, out_features=g.out_features)


def _rank_share(spec: ModelSpec, g: LinearGroup, tp: int) -> float:
    """The share of ``g``'s weights one of ``tp`` ranks holds (``rollout.vllm.weights_per_gpu_params``)."""
    if tp <= 1:
        return 1.0
    if spec.mla is not None and g.name in REPLICATED_LINEARS:
        return 1.0
    if spec.mla is None and g.name in KV_LINEARS:
        from trainfit.rollout.vllm import kv_heads_per_gpu

        return kv_heads_per_gpu(spec, tp=tp) / spec.num_kv_heads
    return 1.0 / tp


def engine_weight_bytes(spec: ModelSpec, *, quantization: RolloutQuantization,
                        bf16_modules: tuple[str, ...] = ()) -> float:
    """The whole model's bytes as the engine holds them: bf16, less what each fp8 linear saves
    (``2·n − fp8_block_linear_bytes``), scaled to a bare parameter count (``count_scale``)."""
    total = MODEL_DTYPE_BYTES * param_breakdown(spec).total
    if is_quantized(quantization):
        total -= sum(MODEL_DTYPE_BYTES * g.weight_params - _group_fp8_bytes(g) for g in fp8_groups(spec, bf16_modules))
    return total * count_scale(spec)


def engine_rank_weight_bytes(spec: ModelSpec, *, tp: int, quantization: RolloutQuantization,
                             bf16_modules: tuple[str, ...] = ()) -> float:
    """Bytes one of ``tp`` ranks holds and reads every decode step: its bf16 share
    (``rollout.vllm.weights_per_gpu_params``) less each fp8 linear's saving times the rank's share of it (whole for
    the linears vLLM replicates). Scales are counted as the whole tensor's share (exact when a shard is a whole
    number of 128-wide blocks)."""
    from trainfit.rollout.vllm import weights_per_gpu_params

    total = MODEL_DTYPE_BYTES * weights_per_gpu_params(spec, tp=tp)
    if is_quantized(quantization):
        total -= sum(_rank_share(spec, g, tp) * (MODEL_DTYPE_BYTES * g.weight_params - _group_fp8_bytes(g))
                     for g in fp8_groups(spec, bf16_modules))
    return total * count_scale(spec)


def routed_expert_bytes_per_param(spec: ModelSpec, *, quantization: RolloutQuantization,
                                  bf16_modules: tuple[str, ...] = ()) -> float:
    """Bytes per routed-expert weight as the engine reads them: bf16, or fp8 with its block scales
    (``decode_step.routed_expert_bytes``)."""
    experts = [g for g in linear_groups(spec) if g.is_fused_experts]
    if not is_quantized(quantization) or not experts:
        return float(MODEL_DTYPE_BYTES)
    fp8 = [g for g in experts if not _kept(g, bf16_modules)]
    params = sum(g.weight_params for g in experts)
    stored = sum(_group_fp8_bytes(g) for g in fp8) + sum(MODEL_DTYPE_BYTES * g.weight_params
                                                         for g in experts if g not in fp8)
    return stored / params


def fp8_matmul_share(spec: ModelSpec, *, quantization: RolloutQuantization, bf16_modules: tuple[str, ...] = ()) -> float:
    """The share of one token's matmul FLOPs (``compute.flops.matmul_params``: active experts, the head) that runs
    in fp8 GEMMs: the fp8 linears' per-token weights (routed experts at ``top-k / E``) over the per-token matmul
    weights. The head (``ParallelLMHead``) and the bf16 modules stay bf16. 0 without quantization."""
    if not is_quantized(quantization):
        return 0.0
    from trainfit.compute.flops import matmul_params

    moe = spec.moe
    active = 0.0
    for g in fp8_groups(spec, bf16_modules):
        per = g.count * g.in_features * g.out_features
        active += per * (moe.experts_per_token if g.is_fused_experts and moe is not None else g.experts)
    return min(1.0, active * count_scale(spec) / matmul_params(spec))


def linear_flops_per_s(*, bf16_flops_per_s: float, fp8_flops_per_s: float | None, fp8_share: float) -> float:
    """The rate one token's matmul FLOPs run at when ``fp8_share`` of them run at ``fp8_flops_per_s`` and the rest
    at ``bf16_flops_per_s``: ``1 / (share / fp8 + (1 − share) / bf16)``. Without an fp8 rate (a card without fp8
    tensor cores, refused by the card) or share 0: the bf16 rate."""
    if fp8_share <= 0 or not fp8_flops_per_s:
        return bf16_flops_per_s
    return 1.0 / (fp8_share / fp8_flops_per_s + (1.0 - fp8_share) / bf16_flops_per_s)


def refit_cast_params(spec: ModelSpec, *, quantization: RolloutQuantization, bf16_modules: tuple[str, ...] = ()) -> float:
    """Weights each engine rank casts to fp8 at every refit (module docstring: the whole Hugging Face tensor, before
    the rank's shard is taken); 0 without quantization."""
    if not is_quantized(quantization):
        return 0.0
    return sum(g.weight_params for g in fp8_groups(spec, bf16_modules)) * count_scale(spec)


def card_engine_rank_bytes(card, spec: ModelSpec) -> float | None:
    """The weight bytes one rank of the card's vLLM engine holds when ``rollout.quantization`` quantizes them
    (``engine_rank_weight_bytes``), after checking ``rollout.quantization_bf16_modules`` against ``spec``; None
    without quantization (the engine's own bf16 sizing)."""
    ro = card.rollout
    if not is_quantized(ro.quantization):
        return None
    kept = tuple(ro.quantization_bf16_modules)
    check_bf16_modules(spec, kept)
    return engine_rank_weight_bytes(spec, tp=ro.tensor_parallel, quantization=ro.quantization, bf16_modules=kept)


FP8_CAST_PEAK_BYTES_PER_ELEMENT = 12
"""Bytes ``cast_tensor_to_fp8_blockwise`` holds at once per element of the tensor it casts (NeMo RL ``fp8.py``
@9dbd9adc): the blocked fp32 copy, ``data_hp * scale_fp`` and its ``torch.clamp``, three fp32 tensors alive together
(the first fp32 copy is freed as the blocked one replaces it; the e4m3 results are 1 B each, after the product)."""


def _hf_tensor_elements(g: LinearGroup) -> int:
    """Elements of one of the group's Hugging Face tensors, the unit the refit sends and casts: one expert's matrix,
    its gate and up apart (trainfit fuses them, ``lora_rank_multiplier`` 2)."""
    n = g.in_features * g.out_features
    return n // 2 if g.is_fused_experts and g.lora_rank_multiplier == 2 else n


def refit_cast_peak_bytes(spec: ModelSpec, *, quantization: RolloutQuantization,
                          bf16_modules: tuple[str, ...] = ()) -> float:
    """Transient bytes on each engine rank while the refit casts its largest fp8 tensor
    (``FP8_CAST_PEAK_BYTES_PER_ELEMENT`` per element; Llama-3.1-8B's gate_proj: 58.7M elements, 0.70 GB); 0 without
    quantization."""
    if not is_quantized(quantization):
        return 0.0
    groups = fp8_groups(spec, bf16_modules)
    return float(FP8_CAST_PEAK_BYTES_PER_ELEMENT * max((_hf_tensor_elements(g) for g in groups), default=0))


def card_refit_cast_peak_bytes(card, spec: ModelSpec) -> float:
    """``refit_cast_peak_bytes`` for the card's vLLM engine (0 for another engine or without quantization)."""
    ro = card.rollout
    if ro.engine.value != "vllm":
        return 0.0
    return refit_cast_peak_bytes(spec, quantization=ro.quantization, bf16_modules=tuple(ro.quantization_bf16_modules))
