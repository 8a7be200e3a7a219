"""Memory assembly: the per-GPU byte terms of one training step (weights, gradients, optimizer
states, activations, logits, FSDP buffers, ...), the host-RAM terms per node, and the notes they imply.

Pure: no torch, no I/O beyond reading catalog data files.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

from trainfit.compute.expert_loop import bnb_nf4_experts
from trainfit.errors import CardError
from trainfit.memory import attention as attn
from trainfit.memory.activations import (ZERO_CENTRED_NORM_FAMILIES, ActivationBytes, activation_bytes,
                                        saved_frozen_weights)
from trainfit.memory.expert_loop_grads import loop_stack_grad_moment_bytes
from trainfit.memory.fsdp_no_sync import no_sync_step_grad_bytes, no_sync_unit_grad_bytes
from trainfit.memory.logits import (
    SOFTCAP_FAMILIES,
    HfLossCopies,
    hf_loss_copies,
    logits_bytes,
    megatron_vocab_parallel_ce_bytes,
    nanotron_sharded_ce_bytes,
    shifted_slice_copies,
)
from trainfit.memory.lora import (
    fp32_adapter_recompute_extra_bytes,
    lora_largest_tensor_params,
    lora_trainable_params,
    saved_module_params,
    targeted_groups,
)
from trainfit.memory import kbit_upcast, nf4_dequant, peft_variants
from trainfit.memory.optimizer import PAGED, master_weight_bytes, optimizer_state_bytes, step_temporary_bytes
from trainfit.memory.params import ParamBreakdown, TensorGroup, linear_groups, param_breakdown, param_tensors
from trainfit.memory.phases import StepTerms
from trainfit.memory.sharding import Sharding
from trainfit.memory.weights import WeightBytes, count_scale, total_params, weight_bytes
from trainfit.plan.fsdp_no_sync import fsdp_no_sync as resolved_fsdp_no_sync
from trainfit.plan.resolve import card_with, model_dtype, trainable_spec
from trainfit.spec.card import RunCard, verl_actor_loss
from trainfit.spec.enums import (
    KbitPrepare,
    AdapterDtype,
    ComputeDtype,
    Dtype,
    Fp8Recipe,
    FSDP_STRATEGIES,
    LayerKind,
    MasterWeights,
    MoeExperts,
    Offload,
    Optimizer,
    OptimizerImpl,
    Padding,
    QloraDequant,
    Scope,
    StatesDtype,
    KeptOutputDtype,
    LossKernel,
    Method,
    Strategy,
    TensorParallelImpl,
    ZERO_STAGES,
)
from trainfit.spec.model import ModelSpec
from trainfit.spec.training import LoraSpec, TrainableSpec
from trainfit.units import BYTES_PER_DTYPE, GIB

if TYPE_CHECKING:
    from collections.abc import Sequence

    from trainfit.memory.deepspeed import ZeroConfig

HOST_BYTES_PER_PROCESS = 3 * GIB
"""Assumed host RSS of one training process (Python, torch + CUDA libraries, data loader)."""


def peft_variant_of(card: RunCard, spec: ModelSpec) -> peft_variants.PeftVariant | None:
    """The card's DoRA / (IA)^3 / prompt-tuning method resolved against the model (None for other scopes)."""
    if card.scope not in (Scope.DORA, Scope.IA3, Scope.PROMPT_TUNING, Scope.PREFIX_TUNING):
        return None
    peft_variants.check_dense(spec, card.scope)
    if card.scope is Scope.DORA:
        return peft_variants.PeftVariant(scope=card.scope, lora=trainable_spec(card).lora)
    if card.scope is Scope.IA3:
        t, f = peft_variants.resolve_ia3(spec, card.ia3.targets, card.ia3.feedforward)
        return peft_variants.PeftVariant(scope=card.scope, ia3_targets=t, ia3_feedforward=f)
    section = card.prefix_tuning if card.scope is Scope.PREFIX_TUNING else card.prompt_tuning
    return peft_variants.PeftVariant(scope=card.scope, num_virtual_tokens=section.num_virtual_tokens or 0)


def variant_trained(card: RunCard, spec: ModelSpec) -> tuple[float, float] | None:
    """(trained parameters, trained tensors) of a DoRA / (IA)^3 / prompt-tuning card (DoRA: LoRA's A and B
    plus the magnitudes), scaled to a bare count; None for other scopes."""
    v = peft_variant_of(card, spec)
    if v is None:
        return None
    vp = peft_variants.trained_params(spec, v)
    params, tensors = float(vp.count), float(sum(t.count for t in vp.tensors))
    if v.scope is Scope.DORA:
        params += lora_trainable_params(spec, v.lora)
        tensors += 2.0 * sum(g.count * g.experts for g in targeted_groups(spec, v.lora))
    return params * count_scale(spec), tensors


def torchao_nf4_load(card: RunCard, spec: ModelSpec, groups, notes):  # noqa: ANN001, ANN201
    """QLoRA with a ``software.torchao`` pin before 0.2 (torchtune's NF4 path): the load phase holds what
    torchao 0.1's quantization leaves reserved (``trainfit.memory.nf4_load``); one GPU only."""
    if card.scope is not Scope.QLORA or card.world_size > 1:
        return groups, notes
    from dataclasses import replace as _replace

    from trainfit.memory import nf4_load
    from trainfit.spec.enums import Phase

    pin = (card.software.model_extra or {}).get("torchao")
    if not nf4_load.spikes(str(pin) if pin else None):
        return groups, notes
    peak_alloc, reserved = nf4_load.load_reserved_bytes(spec, trainable_spec(card).lora)
    out = []
    for g in groups:
        phases = []
        for p in g.phases:
            if p.phase is Phase.LOAD and reserved > p.reserved:
                temps = max(0.0, peak_alloc - p.allocated)
                p = _replace(p, components={**p.components, "nf4_quantize_temporaries": temps},
                             allocated=p.allocated + temps, reserved=float(reserved),
                             device=p.device + reserved - p.reserved, at="weights loaded (torchao 0.1 NF4)")
            phases.append(p)
        out.append(_replace(g, phases=tuple(phases)))
    note = (f"torchao {pin} NF4 (before pytorch/ao@6081796bc, 0.2): each to_nf4 holds two numel x 16 bf16"
            f" nearest-code tensors; building and loading the model peaks at {peak_alloc / GIB:.2f} GiB allocated"
            f" and leaves {reserved / GIB:.2f} GiB reserved (replayed, memory/nf4_load.py)")
    return tuple(out) if isinstance(groups, tuple) else out, [*notes, note]


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


def _autocast_frozen_copies(act: ActivationBytes, spec: ModelSpec, *, enabled: bool, scale: float) -> ActivationBytes:
    """An adapter on a frozen fp32 base under 16-bit autocast: autocast caches only the casts of leaves that require a
    gradient, so each frozen weight is cast anew at every use, and the matmul, whose input needs a gradient, saves that
    16-bit copy for the input's gradient (2 B per weight). Measured on this CPU (torch 2.13.0, saved_tensors_hooks): a
    frozen fp32 ``nn.Linear`` under ``torch.autocast('cpu', bfloat16)`` saves its bf16 weight and nothing else
    (``tests/unit/test_autocast_frozen_weight.py``). Per layer the linear weights whose input needs a gradient
    (``memory.activations.saved_frozen_weights``, shared with AutoGPTQ's unpacked weights): layer 0's attention input
    needs none (frozen embedding), so its q/k/v save nothing; norm weights are not cast by autocast (elementwise ops)
    and saved by no matmul. A frozen head saves its copy (its input needs a gradient)."""
    if not enabled:
        return act
    pb = param_breakdown(spec)
    per_layer = tuple(a + saved_frozen_weights(spec, i, input_needs_grad=i > 0, bytes_per_weight=2.0) * scale
                      for i, a in enumerate(act.per_layer))
    return replace(act, per_layer=per_layer, head=act.head + kbit_upcast.head_cast_copy_bytes(
        head_params=head_weight_params(pb, scale)))


def head_weight_params(pb: ParamBreakdown, scale: float) -> float:
    """The output head's weights as the plan counts them: ``lm_head``, or the embedding it is tied to, times the
    card's count scale."""
    return (pb.lm_head or pb.embedding) * scale


def fsdp_casts_gathered_params(card: RunCard, sharding: Sharding) -> bool:
    """fp32 weights with bf16/fp16 compute under an FSDP strategy that gathers parameters: FSDP mixed precision
    casts each shard to the compute dtype on its way into the all-gather, so the gathered parameters are 16-bit
    and autocast, finding 16-bit weights, makes no copies of them. FSDP2 ``MixedPrecisionPolicy(param_dtype)``
    (torch 2.13.0 ``distributed/fsdp/_fully_shard/_fsdp_collectives.py`` l.418-420: the all-gather input buffer
    is allocated in ``param_dtype``), FSDP1 ``MixedPrecision(param_dtype)``; set by torchtitan
    (``mixed_precision_param``), NeMo RL's DTensor policy (``MixedPrecisionPolicy(param_dtype=bfloat16,
    reduce_dtype=float32, output_dtype=float32)``, NVIDIA-NeMo/RL nemo_rl/models/dtensor/parallelize.py l.464-488
    @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf; the output casts are timed in ``compute.fsdp2_output_cast``) and
    accelerate (huggingface/accelerate 1.15.0
    ``utils/dataclasses.py`` l.2136-2143 ``set_mixed_precision``: ``param_dtype`` = the mixed-precision dtype for
    FSDP1 and FSDP2; ``utils/fsdp_utils.py`` l.779 passes it to ``fully_shard``). Only the gathered copy and the
    autocast copies change: the local shard, its gradient and the optimizer stay fp32. Traced (8 fake ranks,
    MixedPrecisionPolicy(bf16, fp32)): tests/trace/test_fsdp_mixed_precision.py.

    On one GPU FSDP casts too (FSDP2 builds each unit's ``param_dtype`` parameters on a one-rank mesh, torch 2.13.0
    ``distributed/fsdp/_fully_shard/_fsdp_param_group.py`` l.392-401, l.437-450; FSDP1 ``NO_SHARD`` its low-precision
    flat parameter, ``_flat_param.py`` l.1332-1333, l.1784-1803), but a one-GPU card at the default ``strategy:
    fsdp`` is a plain one-GPU run (HF Trainer, bf16 True, fp32 weights: autocast makes the copies), so the one-rank
    cast and units apply only where the card says ``fully_shard`` really runs: ``parallel.fsdp_one_rank``
    (``Sharding.one_rank_fsdp2``; prime-rl's ``setup_fsdp`` with ``MixedPrecisionPolicy(param_dtype=torch.bfloat16)``
    on the one-rank mesh and no ``torch.autocast``, PrimeIntellect-ai/prime-rl@d8f290ef0358a804f1912bd29ea1b37cc56894b4
    ``src/prime_rl/trainer/model.py`` l.156, l.457). The one-rank units: ``_fsdp_terms``.

    fp8 compute (only the linears' GEMMs; bf16 everywhere else) is gathered in bf16 the same way: torchtitan applies
    the one ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`` whatever ``model.converters`` says
    (pytorch/torchtitan@0da8901b1918fc21b5d43bbc693a120fc4281378 ``torchtitan/models/llama/parallelize_llama.py``
    l.94-98 ``apply_fsdp(param_dtype=mixed_precision_param, reduce_dtype=mixed_precision_reduce)``, l.341
    ``MixedPrecisionPolicy``; ``torchtitan/train.py`` l.129 runs the float8 converter before ``parallelize_fn``
    l.188/199), and torchao's ``Float8Linear`` casts the gathered bf16 weight to fp8 inside each matmul and saves the
    high-precision input and weight (pytorch/ao@8c81863ba85cce742244c0151c6683c5696bbe04
    ``torchao/float8/float8_linear.py`` ``matmul_with_hp_or_float8_args`` l.61-110); Transformer Engine linears under FSDP mixed precision receive the bf16
    gathered weight and make their fp8 copies from it (``memory.fp8``). torchtitan's own tables read the same peak for
    the bf16 and the float8 run (pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md: 77.0 / 76.8 GiB).
    torchao's fp8 all-gather (``enable_fsdp_float8_all_gather``, 1 B per gathered linear weight) is the card's
    ``precision.fp8_all_gather``: its gathered units are ``torchao_fp8_gather_units``, its time
    ``compute.float8_all_gather``. The gathered dtype of everything else: ``fsdp_gathered_dtype``."""
    return (sharding.gathers_params and card.parallel.strategy in FSDP_STRATEGIES
            and card.weights_dtype is Dtype.FP32
            and card.precision.compute in (ComputeDtype.BF16, ComputeDtype.FP16, ComputeDtype.FP8, ComputeDtype.FP4))


def fsdp_gathered_dtype(card: RunCard) -> Dtype:
    """The dtype FSDP mixed precision gathers the parameters in (``fsdp_casts_gathered_params``): the compute dtype,
    bf16 for fp8 compute (whose non-GEMM ops and ``param_dtype`` are bf16)."""
    return Dtype.BF16 if card.precision.compute.quantized_gemms else Dtype(card.precision.compute.value)


def autocast_copies_weights(card: RunCard, sharding: Sharding) -> bool:
    """Whether autocast makes 16-bit copies of the weights it uses (``_autocast_copies`` and the autocast weight
    cache): fp32 weights under 16-bit or fp8 compute, unless FSDP mixed precision already gathers them 16-bit
    (``fsdp_casts_gathered_params``). Read by the single-replica walk (``step_terms``) and the rank walk
    (``plan.ranks``)."""
    return (card.weights_dtype is Dtype.FP32 and card.precision.compute is not ComputeDtype.FP32
            and not fsdp_casts_gathered_params(card, sharding))


def bnb_saves_matmul_input(card: RunCard, spec: ModelSpec) -> bool:
    """A QLoRA card on bitsandbytes' 4-bit base with a ``software.bitsandbytes`` pin before 0.43.2, whose MatMul4Bit
    keeps its input (``memory.bnb_saved_input``); dense layers only (no MoE, no linear attention)."""
    if not (card.scope is Scope.QLORA and card.lora is not None and card.lora.dequant is QloraDequant.BITSANDBYTES
            and spec.moe is None and spec.linear_attention is None):
        return False
    from trainfit.memory import bnb_saved_input  # its version parser: imported by the QLoRA cards it can apply to

    pin = (card.software.model_extra or {}).get("bitsandbytes")
    return bnb_saved_input.saves_input(str(pin) if pin is not None else None)


def gptq_torch_dequant(card: RunCard) -> bool:
    """A QLoRA card whose GPTQ int4 base runs through AutoGPTQ's PyTorch unpacking (``lora.dequant:
    autogptq_torch``): each frozen linear then saves its fp16 weight for the backward
    (``memory.activations.saved_frozen_weight_bytes``)."""
    return (card.scope is Scope.QLORA and card.lora is not None
            and card.lora.dequant is QloraDequant.AUTOGPTQ_TORCH)


def bnb_loop_experts(card: RunCard) -> bool:
    """A QLoRA card whose routed experts run transformers < 5's per-expert loop on a bitsandbytes 4-bit base: each
    expert's linears are ``Linear4bit`` modules, stored in NF4 (``memory.weights`` docstring), the same condition the
    step time reads (``compute.expert_loop.bnb_nf4_experts``); v5's eager loop (``loop_v5``) slices bf16 3-D stacks."""
    lo = card.lora
    experts = card.parallel.moe_experts
    return (card.scope is Scope.QLORA and lo is not None and experts.per_expert
            and bnb_nf4_experts(nf4_base=True, gptq=lo.dequant is QloraDequant.AUTOGPTQ_TORCH,
                                torch_ops=lo.dequant is QloraDequant.TORCHAO or card.preset == "torchtune",
                                stacked=experts is MoeExperts.LOOP_V5))


def nf4_expert_stacks(card: RunCard) -> bool:
    """A QLoRA card whose 3-D expert stacks are quantized to NF4 while loading (``lora.quantize_moe_experts``: axolotl's
    ``patch_moe_quantization_on_load`` calls bitsandbytes' ``replace_parameter_4bit`` on each 3-D parameter named
    *expert*, with the base's quant type and double quant, axolotl-ai-cloud/axolotl src/axolotl/monkeypatch/moe_quant.py
    l.121-131 @753906cfc7a669e9b1788193174304bbd9059a8e): they are stored as NF4 like the quantized linears. Memory only:
    the step time keeps pricing the stacks as v5's bf16 grouped GEMMs."""
    return card.scope is Scope.QLORA and card.lora is not None and card.lora.quantize_moe_experts


def loop_would_quantize_experts(card: RunCard) -> bool:
    """Whether ``parallel.moe_experts`` loop would store this QLoRA card's routed experts in NF4: ``bnb_loop_experts``
    with transformers < 5's per-expert ``nn.Linear`` modules (``stacked`` false) in place of the card's layout."""
    lo = card.lora
    return (card.scope is Scope.QLORA and lo is not None
            and bnb_nf4_experts(nf4_base=True, gptq=lo.dequant is QloraDequant.AUTOGPTQ_TORCH,
                                torch_ops=lo.dequant is QloraDequant.TORCHAO or card.preset == "torchtune",
                                stacked=False))


def unquantized_expert_params(card: RunCard, spec: ModelSpec) -> int:
    """Routed-expert weights a quantized base (nf4, int8, fp8) keeps in the compute dtype, whole model: the fused 3-D
    expert parameters of transformers 5's MoE layers (and v5's eager loop, ``loop_v5``, which slices them), which
    bitsandbytes' loader does not convert (``memory.weights`` docstring: it replaces ``nn.Linear`` modules only,
    transformers 5.24.0 wheel integrations/bitsandbytes.py ``replace_with_bnb_linear`` l.184-228). 0 for a dense
    model, an unquantized base, transformers < 5's loop (``loop`` / ``loop_all``: per-expert linears), or stacks quantized
    while loading (``nf4_expert_stacks``)."""
    from trainfit.memory.quant import QUANTIZED

    if card.weights_dtype not in QUANTIZED or card.parallel.moe_experts.is_loop or nf4_expert_stacks(card):
        return 0
    return round(sum(g.weight_params for g in linear_groups(spec) if g.is_fused_experts) * count_scale(spec))


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


def logits_grad_bytes(card: RunCard, *, tokens: int, width: int, dtype_bytes: int) -> float:
    """The gradient of the logits before the output projection's backward, in the head output's dtype
    (``dtype_bytes``: the activation dtype, 2 B under 16-bit compute or autocast, 4 B for an fp32 model; an upcast
    in the loss, ``logits.float()``, casts its gradient back to the head output's dtype): none under a fused chunked
    kernel (Liger, TRL: each chunk's gradient is consumed inside the kernel); torchtune's chunked loss returns
    every chunk's logits from the decoder, so every chunk's gradient exists before the first output-projection
    backward (``TransformerDecoder.chunked_output``, pytorch/torchtune @1814feb17)."""
    if card.loss.chunked and card.loss.kernel is not LossKernel.TORCHTUNE:
        return 0.0
    if (card.loss.kernel is LossKernel.FLASH_ATTN and card.loss.inplace_backward
            and card.loop.keeps_output_through_backward):
        return 0.0  # flash-attn's in-place backward writes it into the logits the kept output holds (kept_output)
    return float(dtype_bytes) * tokens * width


def zero_master_states(card: RunCard, strategy: Strategy, *, train_bytes: float, use_master: bool,
                       state_bytes: float) -> tuple[bool, float, str | None]:
    """Whether an fp32 master copy is kept and the optimizer-state element bytes under DeepSpeed ZeRO,
    with the assumption line when they differ from what the card's precision section says: ZeRO (bf16/fp16)
    keeps an fp32 master partition and steps it, so its states are fp32 (deepspeed runtime/zero/
    stage_1_and_2.py l.560, stage3.py). The single-rank walk, the model-parallel rank walk and the
    optimizer step's time all use it.

    A Megatron-Core card (``tensor_parallel_impl: megatron``; its distributed optimizer is planned as ZeRO-1) that
    states ``precision.optimizer_states`` keeps them: Megatron-Core's precision-aware optimizer hands
    ``OptimizerConfig.exp_avg_dtype`` / ``exp_avg_sq_dtype`` to Transformer Engine's FusedAdam and the distributed
    optimizer allocates its Adam state shards in them (NVIDIA/Megatron-LM megatron/core/optimizer/__init__.py
    l.549-555, distrib_optimizer.py l.802-803 ``init_shard(self.config.exp_avg_dtype)``, optimizer_config.py l.197-207
    @2edffadb528ea07e261b0c02cdc42a7bb9c3197a), while the master copy stays fp32 (``main_params_dtype``). Without the
    precision-aware optimizer its states are fp32, as the override gives. The precision-aware moments exist for Adam
    only: ``exp_avg_dtype`` / ``exp_avg_sq_dtype`` name Adam's two moments and are handed to TE's FusedAdam
    (__init__.py l.549-555), so the branch reads adamw; the card refuses ``optimizer_states`` bf16 on a Megatron-Core
    card with another optimizer (``spec.card``).

    Such a card with ``precision.optimizer_impl: apex_distributed`` keeps a master copy only when its states' dtype
    differs from the trained weights': NeMo 1.0's ``distributed_fused_adam`` (Apex ``DistributedFusedAdam``) allocates
    its moments in the optimizer ``dtype`` and a parameter shard only with ``store_params`` (NVIDIA/apex
    apex/contrib/optimizers/distributed_fused_adam.py l.310-311, l.450-478 @f3f049246e5bdf6fdddf251ebe6b65dd4ca1ee29),
    which NeMo switches off when the optimizer ``dtype`` is the model's (NVIDIA/NeMo
    nemo/collections/nlp/models/language_modeling/megatron_base_model.py l.790-812
    @8e3d65dcfe3504689bfc5b6e67d502780aacad41): ``dtype: bf16`` on a bf16 O2 model keeps no master copy
    (``optimizer_states: bf16``). ``precision.master_weights`` is not what decides it: the built-in default card writes
    ``master_weights: none`` itself, and a Megatron card built from it keeps Megatron's fp32 master. Not modelled: the
    same optimizer at its default fp32 ``dtype`` on a bf16 model keeps ``store_param_remainders`` (l.808-810 there: the
    low 16 bits of each fp32 master, 2 B a parameter, not 4), which the card cannot state; such NeMo rows plan the fp32
    master, 2 B a parameter of the shard above the run's. NeMo's ``mcore_distributed_optim`` ignores ``optim.dtype``
    (its ``OptimizerConfig`` is built without it, nemo/core/classes/modelPT.py l.598-622 @v2.0.0 e938df32): fp32 master
    and moments."""
    if not (strategy in ZERO_STAGES and train_bytes < 4
            and card.precision.optimizer.value in ("adamw", "sgd", "adafactor")):
        return use_master, state_bytes, None
    if (card.parallel.tensor_parallel_impl is TensorParallelImpl.MEGATRON and card.precision.optimizer is Optimizer.ADAMW
            and card.precision.optimizer_states is not StatesDtype.SAME_AS_WEIGHTS):
        if card.precision.optimizer_impl is OptimizerImpl.APEX_DISTRIBUTED:  # store_params: dtype not the model's
            return state_bytes != train_bytes, state_bytes, None
        return True, state_bytes, None
    note = None
    if not use_master or state_bytes != 4.0:
        from trainfit.memory.deepspeed import DEEPSPEED_VERSION  # DeepSpeed-only module: imported where used

        note = ("DeepSpeed ZeRO (bf16/fp16) keeps an fp32 master partition and steps it, so the optimizer"
                " states are fp32 whatever precision.master_weights / optimizer_states say"
                f" (deepspeed {DEEPSPEED_VERSION} runtime/zero/stage_1_and_2.py l.560, stage3.py)")
    return True, 4.0, note


def runs_hf_modelling_code(card: RunCard) -> bool:
    """Whether the card's layers and loss are transformers' modelling code, the only code a ``software.transformers``
    pin describes. A Megatron-Core card (``tensor_parallel_impl: megatron``) builds its own ``GPTModel`` with
    Transformer Engine attention and ``vocab_parallel_cross_entropy`` whatever its default ``attention`` says, and a
    nanotron card its own ``LlamaModel`` and ``_ShardedCrossEntropy`` (``spec.enums.TensorParallelImpl``): neither runs
    transformers' SDPA path or causal-LM loss. (A torchtitan card runs torchtitan's own model too, but the card does
    not say so apart from ``dtensor``, which transformers' own tensor-parallel plan also uses.)"""
    return card.parallel.tensor_parallel_impl not in (TensorParallelImpl.MEGATRON, TensorParallelImpl.NANOTRON)


def hf_sdpa_of(card: RunCard) -> attn.HfSdpaCopies:
    """The SDPA copies of the card's transformers pin (``memory.attention.legacy_sdpa``) when its layers are
    transformers' (``runs_hf_modelling_code``), else none (v5's path, ``V5_SDPA``)."""
    return attn.legacy_sdpa(card.software.transformers) if runs_hf_modelling_code(card) else attn.V5_SDPA


def padding_mask_of(card: RunCard) -> bool:
    """Whether the card's batch hands transformers' layers an attention mask with zeros (``batch.padding`` mask), so
    its SDPA layers take the materialised 4-D mask (``memory.attention.sdpa_padding_masked``). Megatron-Core and
    nanotron cards are refused the mask (``spec.card``); their own attention takes none.

    Prefix tuning (scope ``prefix_tuning``) makes transformers keep the mask whatever it holds: the prefix cache makes
    the key length ``n + s`` differ from the query length, and ``_ignore_causal_mask_sdpa`` drops a mask only when
    they are equal (transformers 5.24.0 src/transformers/masking_utils.py l.292; ``memory.peft_variants``)."""
    masked = card.batch.padding is Padding.MASK or card.scope is Scope.PREFIX_TUNING
    return masked and runs_hf_modelling_code(card)


def hf_loss_of(card: RunCard, spec: ModelSpec) -> HfLossCopies:
    """The loss copies of the card's transformers pin (``memory.logits.hf_loss_copies``): none unless the model is
    transformers' (``runs_hf_modelling_code``); the shifted copy only when the model is called with labels and its own
    causal-LM loss runs, an SFT step (``Method.SFT``). PPO / GRPO actors (TRL, OpenRLHF, NeMo RL) and DPO (TRL's
    ``concatenated_forward``) call it without labels and compute the log-probs themselves (trl 0.19.1 wheel from
    PyPI, read 2026-12-03: trl/trainer/grpo_trainer.py l.865-867 ``model(input_ids=..., attention_mask=...,
    logits_to_keep=...)``, trl/trainer/dpo_trainer.py l.1494 ``model(input_ids, **model_kwargs)`` for a decoder-only
    model); reward models score a scalar head."""
    if not runs_hf_modelling_code(card):
        return HfLossCopies()
    return hf_loss_copies(card.software.transformers, spec.family, model_loss=card.method is Method.SFT)


def fp8_linear_input_bytes(card: RunCard) -> float:
    """Bytes per element a trained linear saves of its input under Transformer Engine fp8 (``memory.fp8``); 0 when
    the card is not fp8 or its fp8 is torchao's (which saves the bf16 input)."""
    prec = card.precision
    recipe = prec.gemm_recipe
    if recipe is None:
        return 0.0
    from trainfit.memory.fp8 import saved_input_bytes, saves_quantized_input

    if not saves_quantized_input(recipe=recipe, tensor_parallel_impl=card.parallel.tensor_parallel_impl):
        return 0.0
    return saved_input_bytes(recipe=recipe)


GLU_INPUT_STORE_NOTE = ("precision.fp8_activation_input_store: each dense SwiGLU keeps fc1's output (gate and up) as"
                        " float8_e4m3fn for its backward, 1 B per element (Megatron-Core activation_func_fp8_input_store;"
                        " memory.activations.glu_saved_input_bytes); MoE experts' SwiGLU not changed")


def glu_input_bytes(card: RunCard, spec: ModelSpec) -> float:
    """Bytes per element a dense SwiGLU keeps of its input (``memory.activations.glu_saved_input_bytes``) under
    ``precision.fp8_activation_input_store``; 0 without it (the compute dtype's). Megatron-Core refuses the option for
    any MLP but SwiGLU (transformer_config.py ``__post_init__``), and so does the plan."""
    if not card.precision.fp8_activation_input_store:
        return 0.0
    from trainfit.errors import CardError
    from trainfit.memory.activations import glu_saved_input_bytes

    if not (spec.mlp_gated and spec.hidden_act == "silu"):
        raise CardError(f"precision.fp8_activation_input_store: Megatron-Core stores the activation input in fp8 only"
                        f" for SwiGLU; this model's MLP is {'gated' if spec.mlp_gated else 'ungated'}"
                        f" '{spec.hidden_act}'")
    return glu_saved_input_bytes(compute_dtype_bytes=2, fp8_input_store=True)


def torchao_nvfp4(card: RunCard) -> bool:
    """torchao's NVFP4 linears (``compute: fp4`` without Megatron-Core: torchtitan's NVFP4 converter)."""
    from trainfit.memory.fp8 import transformer_engine_linears

    recipe = card.precision.gemm_recipe
    return (card.precision.compute is ComputeDtype.FP4 and recipe is not None
            and not transformer_engine_linears(recipe=recipe, tensor_parallel_impl=card.parallel.tensor_parallel_impl))


def sac_saves_linear_outputs(card: RunCard) -> bool:
    """Whether torchtitan's per-op selective checkpointing saves (every second of) the linears' outputs: not for
    torchao NVFP4, whose ``scaled_mm`` is no op the policy saves (``memory.activations.selective_layer_bytes``)."""
    return not torchao_nvfp4(card)


def fp8_card_non_tn_gemm(card: RunCard) -> bool:
    """Whether the card's GPU runs fp8 GEMMs on non-TN layouts (TE ``is_non_tn_fp8_gemm_supported``: Blackwell), so
    an fp8 primary weight keeps no transpose (``memory.fp8.non_tn_fp8_gemm``); a custom GPU: False."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.errors import CatalogError
    from trainfit.memory.fp8 import non_tn_fp8_gemm

    try:
        return non_tn_fp8_gemm(resolve_gpu(card.hardware.gpu).compute_capability)
    except CatalogError:
        return False


def megatron_fsdp_fp8_params(card: RunCard) -> bool:
    """fp8 primary weights (per-tensor delayed / current scaling) under Megatron-FSDP (strategy fsdp on Megatron-Core
    layers): uint8 weight shards, gathered as 1 B units (``memory.fp8.megatron_fsdp_fp8_unit_bytes``)."""
    prec, par = card.precision, card.parallel
    return (prec.fp8_params and prec.fp8_recipe in (Fp8Recipe.DELAYED, Fp8Recipe.CURRENT)
            and par.strategy is Strategy.FSDP and par.tensor_parallel_impl is TensorParallelImpl.MEGATRON)


def fp8_weight_bytes(card: RunCard, spec: ModelSpec, *, scale: float, layers: Sequence[int] | None = None,
                     model_layers: int | None = None, shards: int = 1) -> tuple[float, str]:
    """(bytes an fp8 card adds to one rank's weights, one-line note). Without ``precision.fp8_params``: the fp8
    weight copies, transposes and scaling state beside the bf16 weights (``memory.fp8.fp8_model_bytes``). With it:
    the linears' fp8 primary weights (``fp8_param_model_bytes``) minus their bf16 weights, which are not kept
    (negative: a saving); the fp32 main params stay in the optimizer's terms. The linears: the dense ones, and on a
    Megatron-Core card (``memory.fp8.grouped_experts_in_fp8``) the routed experts the rank holds (``parallel.
    expert_parallel``: its ``experts / ep`` of each MoE layer); elsewhere the fused experts stay bf16.

    The layers ``precision.bf16_first_layers`` / ``bf16_last_layers`` keep in bf16 hold no quantised copy, and
    under quantised primary weights their bf16 weights (Megatron-Core builds them outside ``fp8_model_init`` too:
    ``get_fp8_context(is_init=True)`` is the same null context): each layer counts as ``spec``'s mean layer.
    ``layers``: the global indices of ``spec``'s decoder layers (a pipeline stage's ``Stage.layers``; default
    ``0..spec.num_layers``), ``model_layers``: the model's layer count (default ``spec.num_layers``): which of them
    are bf16 is read from the model's numbering (``PrecisionSpec.layer_quantized``), not the stage's.

    torchao NVFP4 (``torchao_nvfp4``) keeps its column-wise weight copy as a tensor saved for backward: a layer run
    under checkpoint drops it with its other saved tensors and its recompute makes it again, one layer at a time.
    So the quantised and checkpointed layers' copies are taken out, and one layer's copy is kept for the recompute
    (the layer being recomputed and run backward)."""
    from trainfit.memory import fp8
    from trainfit.units import BYTES_PER_DTYPE

    prec = card.precision
    recipe = prec.gemm_recipe
    ep = (card.parallel.expert_parallel if spec.moe is not None
          and fp8.grouped_experts_in_fp8(tensor_parallel_impl=card.parallel.tensor_parallel_impl) else None)
    n = spec.num_layers
    idx = range(n) if layers is None else layers
    quantized = [prec.layer_quantized(i, n if model_layers is None else model_layers) for i in idx]
    share = sum(quantized) / len(quantized) if quantized else 1.0  # the bf16 layers hold no quantised copies
    if not prec.quantized_params:
        te = fp8.transformer_engine_linears(recipe=recipe, tensor_parallel_impl=card.parallel.tensor_parallel_impl)
        b = share * fp8.fp8_model_bytes(spec, recipe=recipe, scale=scale, expert_parallel=ep, transformer_engine=te)
        if torchao_nvfp4(card) and card.parallel.checkpoints_layers and quantized:
            ckpt = card.parallel.checkpointed_layers(n) or (True,) * n
            both = sum(q and c for q, c in zip(quantized, ckpt, strict=True))
            copies = fp8.quantized_element_bytes(recipe) * fp8.fp8_linear_params(spec, expert_parallel=ep) * scale
            if both:
                b = max(0.0, b - both / n * copies) + copies / n
        return b, (f"{prec.compute.value} ({recipe.value} scaling): {b / 2**30:.2f} GiB of quantized weight copies,"
                   " their transposes / column-wise copies and scaling state (amax history / block scales) in the"
                   " weights (memory/fp8.py)")
    non_tn = fp8_card_non_tn_gemm(card)
    if megatron_fsdp_fp8_params(card):
        # Megatron-FSDP: the rank's shard of the uint8 row-wise data and the (unsharded, per-tensor) scaling state;
        # the transpose lives only in a gathered unit's backward (memory.fp8.megatron_fsdp_fp8_unit_bytes)
        lin = share * fp8.fp8_linear_params(spec, expert_parallel=ep) * scale
        kept = (fp8.megatron_fsdp_fp8_shard_bytes(linear_weight_params=lin, shards=shards)
                + share * fp8.fp8_param_model_bytes(spec, recipe=prec.gemm_recipe, non_tn_gemm=True, scale=scale,
                                                    expert_parallel=ep) - lin)
        bf16 = lin * BYTES_PER_DTYPE[card.weights_dtype.value] / max(1, shards)
        return kept - bf16, fp8_params_note(card, held_gib=kept / 2**30, bf16_gib=bf16 / 2**30)
    kept = share * fp8.fp8_param_model_bytes(spec, recipe=prec.gemm_recipe, non_tn_gemm=non_tn, scale=scale,
                                             expert_parallel=ep, transpose_cached=prec.fp8_param_transpose_cache)
    bf16 = share * fp8.fp8_linear_params(spec, expert_parallel=ep) * scale * BYTES_PER_DTYPE[card.weights_dtype.value]
    return kept - bf16, fp8_params_note(card, held_gib=kept / 2**30, bf16_gib=bf16 / 2**30)


def fp8_params_note(card: RunCard, *, held_gib: float | None = None, bf16_gib: float | None = None) -> str:
    """One line on a ``precision.fp8_params`` card's weights (the rank's GiB where given)."""
    from trainfit.memory import fp8

    prec = card.precision
    non_tn = fp8_card_non_tn_gemm(card)
    per = fp8.fp8_param_bytes_per_weight(recipe=prec.gemm_recipe, non_tn_gemm=non_tn,
                                         transpose_cached=prec.fp8_param_transpose_cache)
    size = (f", {held_gib:.2f} GiB with their scaling state, in place of {bf16_gib:.2f} GiB of bf16 weights"
            if held_gib is not None and bf16_gib is not None else "")
    if prec.fp4_params:
        return (f"NVFP4 primary weights (precision.fp4_params): the linears' weights held as NVFP4 ({per:g} B per"
                f" weight: row-wise and column-wise copies with their e4m3 scales){size}; no separate copy; the"
                " optimizer keeps fp32 main params; the data-parallel parameter all-gather moves the packed 0.5 B per"
                " linear weight (memory/fp8.py)")
    if prec.fp8_recipe is Fp8Recipe.MXFP8:
        return (f"MXFP8 primary weights (precision.fp8_params): the linears' weights held as MXFP8 ({per:g} B per"
                f" weight: row-wise and column-wise copies with their e8m0 scales){size}; the optimizer keeps fp32 main"
                " params; Megatron-Core all-gathers bf16 through the gradient buffer and casts it in (memory/fp8.py)")
    how = ("row-wise data only: the GPU runs non-TN fp8 GEMMs" if per == 1.0 and non_tn else
           "row-wise data only: the dgrad GEMM's transpose is made in each linear's backward and freed"
           " (precision.fp8_param_transpose_cache false), one linear's counted" if per == 1.0 else
           "a column-wise copy" if prec.fp8_recipe.value == "blockwise" else "the transpose TE keeps for the dgrad GEMM")
    return (f"fp8 primary weights (precision.fp8_params, {prec.fp8_recipe.value} scaling): the linears' weights held as"
            f" fp8 ({per:g} B per weight, {how}){size}; no separate fp8 copy; the optimizer keeps fp32 main params; the"
            " data-parallel parameter all-gather moves 1 B per linear weight (memory/fp8.py)")


def fp8_activation_note(card: RunCard) -> str:
    """What an fp8 card's linears save for backward (``fp8_linear_input_bytes``), one line."""
    fp8_in = fp8_linear_input_bytes(card)
    prec = card.precision
    if prec.compute is ComputeDtype.FP4 or prec.fp8_recipe is Fp8Recipe.MXFP8:
        recipe = prec.gemm_recipe.value
        if fp8_in:
            return (f"{recipe} activations: the linears save their input's column-wise {recipe} copy ({fp8_in:g} B per"
                    " element, block scales included) for the weight gradient (memory/fp8.py)")
        return (f"{recipe} activations: torchao's {recipe} linears save their bf16 input and re-quantize it in"
                " backward (memory/fp8.py)")
    if fp8_in:
        return (f"fp8 activations: Transformer Engine linears save their input's fp8 copy ({fp8_in:g} B per element)"
                " for the weight gradient, the attention projection beside the attention's bf16 output (memory/fp8.py)")
    return ("fp8 activations: torchao float8 linears (current scaling without Megatron-Core) save their bf16 input"
            " (memory/fp8.py)")


def zero_param_offload_refusal(*, strategy: Strategy, offload: Offload) -> str | None:
    """The refusal of parameter offload under DeepSpeed ZeRO-1/2, given the step's sharded strategy (``offload_param``
    is for ZeRO stage 3 only: https://www.deepspeed.ai/docs/config-json/, "Parameter offloading"); None where it does
    not apply. Raised by the memory walk and by ``fit_search.screen_time_row``, which times a job without the walk."""
    if strategy in ZERO_STAGES and offload is Offload.PARAMS_AND_OPTIMIZER and strategy is not Strategy.ZERO3:
        return (f"parallel.offload: DeepSpeed {strategy.value} cannot offload parameters (offload_param is"
                " ZeRO-3 only); allowed with it: none, optimizer")
    return None


def step_terms(card: RunCard, spec: ModelSpec, sharding: Sharding) -> tuple[StepTerms, dict[str, float], list[str]]:
    """Per-GPU byte terms, the host-RAM terms per node, and the assumptions made."""
    notes: list[str] = []
    if (sharding.strategy in ZERO_STAGES and card.scope is not Scope.FULL
            and card.lora.adapter_dtype is AdapterDtype.FP32
            and card.weights_dtype in (Dtype.NF4, Dtype.BF16, Dtype.FP16)
            and card.precision.compute is not ComputeDtype.FP32):
        # the engine casts every parameter to the mixed-precision dtype, the adapter too
        # (deepspeed runtime/engine.py _configure_distributed_model, _cast_module_mixed_precision)
        card = card_with(card, lora__adapter_dtype="bf16")
        notes.append("DeepSpeed (bf16) casts the LoRA adapter to bf16 with the model; its fp32 copy is the master partition")
    prec = card.precision
    trainable = trainable_spec(card)
    variant = peft_variant_of(card, spec)
    if variant is not None and variant.scope is not Scope.DORA:  # IA3 / prompt tuning: the probe LoRA (peft_variants)
        trainable = TrainableSpec(scope=Scope.LORA, lora=peft_variants.probe_lora(variant))
    seq_len = peft_variants.effective_seq_len(card.batch.seq_len, variant)
    scale = count_scale(spec)
    pb = param_breakdown(spec)
    wdtype = card.weights_dtype
    compute = ComputeDtype.BF16 if prec.compute.quantized_gemms else model_dtype(card)  # fp8 / fp4: only the GEMMs
    # PEFT's prepare_model_for_kbit_training: the non-4-bit parameters are fp32 (memory.kbit_upcast)
    kbit = card.scope is Scope.QLORA and card.lora.prepare_kbit is not KbitPrepare.NONE
    loop_nf4 = bnb_loop_experts(card) or nf4_expert_stacks(card)
    w = weight_bytes(spec, weights=wdtype, compute=ComputeDtype.FP32 if kbit else compute, trainable=trainable,
                     quantized_experts=loop_nf4)
    trl_cast = kbit and card.lora.prepare_kbit is KbitPrepare.TRL
    if trl_cast:  # TRL's peft_module_casting_to_bf16: the embeddings and the head go back to bf16 (memory.kbit_upcast)
        w = replace(w, base=w.base - kbit_upcast.trl_bf16_cast_saving_bytes(
            embedding_params=(pb.embedding + pb.positions) * scale, head_params=pb.lm_head * scale))

    if trainable.lora is not None:
        n_train = lora_trainable_params(spec, trainable.lora) * scale
        tensors = lora_tensors(spec, trainable.lora)
        largest = float(lora_largest_tensor_params(spec, trainable.lora))
    else:
        n_train = float(total_params(spec))
        tensors = param_tensors(spec)
        largest = float(max(t.numel for t in tensors)) * scale
    if variant is not None:
        vp = peft_variants.trained_params(spec, variant)
        if variant.scope is Scope.DORA:  # the magnitude vectors beside LoRA's A and B
            n_train, tensors, largest = n_train + vp.count * scale, tensors + list(vp.tensors), max(largest, vp.largest)
            w = replace(w, adapter=w.adapter + vp.count * scale * trainable.lora.adapter_dtype_bytes)
        else:
            n_train, tensors, largest = vp.count * scale, list(vp.tensors), float(vp.largest)
            w = replace(w, adapter=vp.count * scale * peft_variants.VARIANT_DTYPE_BYTES)
        notes += peft_variants.notes(spec, variant, micro_batch_size=card.batch.micro_batch_size,
                                     seq_len=card.batch.seq_len)
    train_bytes, grad_bytes, use_master, state_bytes = trained_dtype_bytes(card)
    zero = sharding.strategy in ZERO_STAGES
    use_master, state_bytes, note = zero_master_states(card, sharding.strategy, train_bytes=train_bytes,
                                                       use_master=use_master, state_bytes=state_bytes)
    notes += [note] if note else []
    opt = optimizer_state_bytes(optimizer=prec.optimizer, params=n_train, tensors=tensors, state_bytes=state_bytes)
    if trainable.lora is None:
        opt = opt if prec.optimizer.value in ("adamw", "paged_adamw") else opt * scale
    master = master_weight_bytes(params=n_train) if use_master else 0.0
    temps = step_temporary_bytes(
        optimizer=prec.optimizer, impl=prec.optimizer_impl, params=n_train, largest_tensor=largest, state_bytes=state_bytes
    )
    # lora.modules_to_save: PEFT trains a full copy of each named module beside the frozen original
    # (ModulesToSaveWrapper), in the original's dtype; torch AdamW keeps its states in that dtype
    n_lora = n_train
    saved_emb = saved_head = 0.0
    saved_bytes = 2.0 if wdtype not in (Dtype.FP32,) else 4.0
    if trainable.lora is not None and card.lora.modules_to_save:
        e, h_ = saved_module_params(spec, tuple(card.lora.modules_to_save))
        saved_emb, saved_head = e * scale, h_ * scale
        n_saved = saved_emb + saved_head
        s_master = zero or (prec.master_weights is MasterWeights.FP32 and saved_bytes < 4)
        s_state = 4.0 if s_master else {StatesDtype.FP32: 4.0, StatesDtype.BF16: 2.0}.get(prec.optimizer_states, saved_bytes)
        saved_tensors = [TensorGroup((spec.vocab_size, spec.hidden_size), int(bool(saved_emb)) + int(bool(saved_head)))]
        opt += optimizer_state_bytes(optimizer=prec.optimizer, params=n_saved, tensors=saved_tensors, state_bytes=s_state)
        master += master_weight_bytes(params=n_saved) if s_master else 0.0
        largest = max(largest, saved_emb, saved_head)
        temps = step_temporary_bytes(optimizer=prec.optimizer, impl=prec.optimizer_impl, params=n_lora,
                                     largest_tensor=largest, state_bytes=state_bytes) + step_temporary_bytes(
            optimizer=prec.optimizer, impl=prec.optimizer_impl, params=n_saved, largest_tensor=largest,
            state_bytes=s_state) * (0.0 if prec.optimizer_impl.value == "for_loop" else 1.0)
        w = replace(w, adapter=w.adapter + n_saved * saved_bytes)
        n_train = n_lora + n_saved
        notes.append(f"lora.modules_to_save: {', '.join(card.lora.modules_to_save)} trained in full"
                     f" ({n_saved / 1e6:.1f} M parameters, a copy beside the frozen original: PEFT ModulesToSaveWrapper)")
    if trainable.lora is not None and trainable.lora.dropout > 0 and trainable.lora.dropout_post:
        notes.append(f"lora.dropout {trainable.lora.dropout:g} on the adapter's output (lora.dropout_position post):"
                     " every adapted module saves a 1 B/element CUDA bool mask over its output beside what the"
                     " adapter saves without dropout")
    elif trainable.lora is not None and trainable.lora.dropout > 0:
        notes.append(f"lora.dropout {trainable.lora.dropout:g}: every adapted module saves its own dropout output (adapter"
                     " dtype) and a 1 B/element CUDA bool mask; the fp32 dropout-input gradients of a layer's backward"
                     " are not modelled")

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
        if sharding.strategy in ZERO_STAGES:
            host["fp32_gradients"] = 4.0 * n_train / od * ranks_per_node
            if sharding.strategy is not Strategy.ZERO3:
                # pinned bit16 copy of the partition the step writes back through, and the pinned gradient
                # staging buffer of the largest parameter (stage_1_and_2.py l.566-575, l.653-658)
                host["pinned_staging"] = (2.0 * n_train / od + 2.0 * largest) * ranks_per_node
            notes.append("optimizer offload (DeepSpeed ZeRO-Offload): fp32 gradient partitions live in host RAM")
        opt_gpu = master_gpu = temps_gpu = 0.0
        notes.append("optimizer step runs on the CPU (offloaded states); its temporaries are not on the GPU")
    if zero and offload is not Offload.NONE and sharding.strategy is not Strategy.ZERO1:
        # DeepSpeed ZeRO-Offload: each reduced gradient slice goes to the host fp32 buffer; no gradient
        # partition forms on the GPU (stage_1_and_2.py l.2172-2178; stage3.py l.333, l.791)
        grads_scale = 0.0
    if (why := zero_param_offload_refusal(strategy=sharding.strategy, offload=offload)) is not None:
        raise CardError(why)
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
    step_grads: dict[str, float] = {}  # FSDP1 no_sync: what the optimizer step reads (StepTerms.optimizer_step_grads)
    if trainable.lora is None:
        per_layer_grads = _scaled(pb.per_layer, scale * grad_bytes * grads_scale)
        head_params = (pb.lm_head or pb.embedding) + spec.hidden_size
        grads_head = head_params * scale * grad_bytes * grads_scale
        grads_embed = ((pb.embedding if pb.lm_head else 0) + pb.positions) * scale * grad_bytes * grads_scale  # + OPT's learned positions
        # tied embeddings: the embedding's backward writes a second vocab x hidden gradient while
        # lm_head's is in .grad, and accumulating them makes a third (measured on the trace:
        # +2 x vocab x hidden x grad bytes at the end of backward, unsharded runs)
        tied_grad = 2 * pb.embedding * scale * grad_bytes if (not pb.lm_head and gd == 1
                                                              and not prec.optimizer_in_backward) else 0.0
    else:
        per = n_lora * grad_bytes * grads_scale / layers
        per_layer_grads = tuple(per for _ in range(layers))
        s_grad = 2.0 if zero else saved_bytes
        grads_head = saved_head * s_grad * grads_scale
        grads_embed = saved_emb * s_grad * grads_scale
        tied_grad = 0.0

    if resolved_fsdp_no_sync(card) and sharding.gathers_params:
        # FSDP1 no_sync: each unit with a trainable parameter keeps its whole unsharded gradient (memory.fsdp_no_sync)
        per_layer_grads, grads_head, grads_embed = _no_sync_grads(spec, pb, trainable, scale=scale, n_train=n_train,
                                                                  saved=(saved_emb, saved_head), grad_bytes=grad_bytes)
        notes.append(f"FSDP1 no_sync accumulation: {sum(per_layer_grads) + grads_head + grads_embed:.3g} B of unsharded"
                     " gradients (every unit with a trainable parameter, frozen ones included) held across micro-batches")
        # the synced last backward reduce-scatters them: the optimizer step reads the shards
        step_grads["optimizer_step_grads"] = no_sync_step_grad_bytes(
            unsharded_grad_bytes=sum(per_layer_grads) + grads_head + grads_embed, shards=sharding.grads_divisor)

    act_dtype = 4 if compute is ComputeDtype.FP32 else 2
    # bitsandbytes before 0.43.2: each frozen 4-bit linear keeps its input for the backward (memory.bnb_saved_input),
    # counted in the layers' saved sets (memory.activations._linear)
    bnb_saves = bnb_saves_matmul_input(card, spec)
    act_kw = dict(
        micro_batch_size=card.batch.micro_batch_size,
        seq_len=seq_len,
        attention=card.attention,
        trainable=trainable,
        compute_dtype_bytes=act_dtype,
        selective=card.parallel.selective_checkpointing,
        compiled=card.parallel.compile,
        linear_input_bytes=fp8_linear_input_bytes(card),
        sac_saves_linear_outputs=sac_saves_linear_outputs(card),
        sac_saves_attention=card.parallel.sac_saves_attention,
        bf16_layers=(card.precision.bf16_first_layers, card.precision.bf16_last_layers),
        hf_sdpa=hf_sdpa_of(card),
        gptq_torch_dequant=gptq_torch_dequant(card),
        padding_mask=padding_mask_of(card),
        fp32_stream_autocast=trainable.lora is not None and autocast_copies_weights(card, sharding),
        glu_input_bytes=glu_input_bytes(card, spec),
    )
    act = activation_bytes(spec, **act_kw, frozen_saves_input=bnb_saves)
    bnb_ctx_held, graph_held, bnb_graph_ckpt = 0.0, 0.0, False
    if bnb_saves:
        # the kept inputs are ctx attributes: the first forward's graph holds them under a non-reentrant checkpoint
        # too (from each layer's forward to the end of backward, the recompute's own freed with it), and a loop that
        # keeps its output bound holds them into the next forward (memory.bnb_saved_input)
        from trainfit.memory import bnb_saved_input
        from trainfit.plan.checkpointing import checkpoint_reentrant  # noqa: PLC0415 - it imports this module

        ckpt_on = card.parallel.checkpointed_layers(spec.num_layers) or (
            (card.parallel.checkpoints_layers,) * spec.num_layers)
        reentrant = card.parallel.checkpoints_layers and checkpoint_reentrant(card)
        kept_in = bnb_saved_input.kept_input_bytes_per_layer(
            layers=spec.num_layers, linears={g.name: g.in_features for g in linear_groups(spec)},
            adapted=frozenset(g.name for g in targeted_groups(spec, trainable.lora)),
            tokens=card.batch.micro_batch_size * seq_len, dtype_bytes=act_dtype)
        bnb_graph_ckpt = card.parallel.checkpoints_layers and not reentrant
        if bnb_graph_ckpt:
            plain = activation_bytes(spec, **act_kw).per_layer
            act = replace(act, per_layer=tuple(p if c else a for a, p, c in zip(act.per_layer, plain, ckpt_on)))
        bnb_ctx_held = bnb_saved_input.ctx_held_input_bytes(kept_per_layer=kept_in, checkpointed=ckpt_on,
                                                             reentrant=reentrant)
        graph_held = bnb_saved_input.graph_held_input_bytes(
            kept_per_layer=kept_in, checkpointed=ckpt_on, reentrant=reentrant,
            loop_keeps_graph=card.loop.keeps_output_through_backward)
    if kbit:  # the recipe's fp32 residual stream: each checkpointed layer saves fp32 hidden states
        extra = kbit_upcast.checkpoint_input_extra_bytes(tokens=card.batch.micro_batch_size * seq_len,
                                                         hidden_size=spec.hidden_size, stream_bytes=act_dtype)
        # under TRL's cast the embedding is bf16: the first layer's input is bf16, and the bf16 head saves its own
        # weight (no autocast copy); under PEFT alone the fp32 head's bf16 copy is saved (memory.kbit_upcast)
        act = replace(act, checkpointed_per_layer=tuple(
            int(c + (0.0 if trl_cast and i == 0 else extra)) for i, c in enumerate(act.checkpointed_per_layer)),
                      head=act.head + (0 if trl_cast else int(kbit_upcast.head_cast_copy_bytes(
                          head_params=head_weight_params(pb, scale)))))
    if variant is not None:
        act = peft_variants.adjust_activations(act, spec, variant, micro_batch_size=card.batch.micro_batch_size,
                                               seq_len=seq_len, compute_dtype_bytes=act_dtype,
                                               zero_centred_norm=spec.family in ZERO_CENTRED_NORM_FAMILIES)
    if bnb_saves:
        notes.append(f"bitsandbytes {card.software.model_extra.get('bitsandbytes')}: MatMul4Bit keeps each frozen"
                     " 4-bit linear's input whose input needs a gradient (in the layers' saved activations)")
    mp_gather = fsdp_casts_gathered_params(card, sharding)
    autocast = autocast_copies_weights(card, sharding)
    act = _autocast_copies(act, spec, enabled=autocast and trainable.lora is None, scale=scale)
    act = _autocast_frozen_copies(act, spec, enabled=autocast and trainable.lora is not None, scale=scale)
    subset = card.parallel.checkpointed_layers(spec.num_layers)  # None: every layer as checkpoints_layers says
    if subset is not None:
        act = act.checkpointing_only(subset)
    # the last layer's forward (the forward peak's moment) runs under checkpoint
    last_ckpt = card.parallel.checkpoints_layers and (subset is None or bool(subset and subset[-1]))
    if saved_head:
        # a trainable head saves its input (the final norm's output) for its weight gradient
        act = replace(act, head=act.head + card.batch.micro_batch_size * seq_len * spec.hidden_size * act_dtype)
    # TRL's GRPO computes the completion's logits only (logits_to_keep; methods.roles.logit_positions)
    from trainfit.methods.roles import logit_positions

    logit_len = logit_positions(card, seq_len=seq_len)
    lg = logits_bytes(
        micro_batch_size=card.batch.micro_batch_size,
        seq_len=logit_len,
        vocab_size=spec.vocab_size,
        hidden_size=spec.hidden_size,
        chunked=card.loss.chunked,
        kernel=card.loss.kernel.value,
        compute_dtype_bytes=act_dtype,
        head_outputs=spec.head_outputs,
        softcap_bytes_per_logit=act_dtype if spec.family in SOFTCAP_FAMILIES else 0,
        compiled=card.parallel.compile,
        inplace_backward=card.loss.inplace_backward,
        logits_kept=_kept_output(card, spec, act_dtype, seq_len) > 0,
        head_trainable=card.scope is Scope.FULL,
        kept_fp32=_kept_fp32(card),
        verl_actor=verl_actor_loss(card),
        temperature_copy=card.loss.temperature_copy,
        loss_compiled=card.loss.compiled,
        loss_input_copy=loss_input_copy_of(card).forward_copy,
        loss_input_slice_backward=loss_input_copy_of(card).slice_backward,
        compute_dtype_loss=not card.loss.upcast,
        hf_loss=hf_loss_of(card, spec),
    )
    if (card.parallel.tensor_parallel_impl is TensorParallelImpl.MEGATRON and spec.head_outputs is None
            and not card.loss.chunked and spec.family not in SOFTCAP_FAMILIES):
        # Megatron-Core runs vocab_parallel_cross_entropy at every tensor-parallel size, one rank included
        lg = megatron_vocab_parallel_ce_bytes(tokens=card.batch.micro_batch_size * seq_len,
                                              local_vocab=spec.vocab_size, compute_dtype_bytes=act_dtype)
    elif (card.parallel.tensor_parallel_impl is TensorParallelImpl.NANOTRON and spec.head_outputs is None
          and not card.loss.chunked and spec.family not in SOFTCAP_FAMILIES):
        # nanotron's _ShardedCrossEntropy, one rank included (memory/logits.py)
        lg = nanotron_sharded_ce_bytes(tokens=card.batch.micro_batch_size * seq_len, local_vocab=spec.vocab_size,
                                       compute_dtype_bytes=act_dtype)
    tokens = card.batch.micro_batch_size * seq_len
    eager = attn.runs_eager(spec.family, card.attention) and spec.num_full_attention_layers > 0
    if card.parallel.checkpoints_layers and (subset is None or any(subset)):
        # eager attention's masks, inputs of every checkpointed layer: held from before the first layer's
        # forward to its backward
        mask = attn.eager_mask_bytes(spec, micro_batch_size=card.batch.micro_batch_size, seq_len=seq_len,
                                     eager=eager, dtype_bytes=act_dtype)
        # SDPA past a sliding window or under a padding mask: the bool masks the masked layers take
        # (memory.attention.sdpa_bool_mask_bytes)
        mask += attn.sdpa_bool_mask_bytes(spec, micro_batch_size=card.batch.micro_batch_size, seq_len=seq_len,
                                          attention=card.attention, padding_mask=padding_mask_of(card),
                                          copies=hf_sdpa_of(card), dtype_bytes=act_dtype)
        if mask:
            act = replace(act, checkpointed_embedding=act.checkpointed_embedding + mask)
    scores = attn.score_elements(micro_batch_size=card.batch.micro_batch_size, seq_len=seq_len,
                                 heads=spec.num_attention_heads, eager=eager)
    attention_bwd = attn.backward_transient_bytes(scores=scores, dtype_bytes=act_dtype, family=spec.family)
    transient = _layer_transients(spec, tokens=tokens, dtype_bytes=act_dtype, attention_bytes=attention_bwd)
    other = _layer_transients(spec, tokens=tokens, dtype_bytes=act_dtype)  # the moments besides attention's
    adapter_forward = 0.0
    if variant is not None and variant.scope is Scope.DORA:  # the weight-norm temporaries of each forward
        base_bytes = BYTES_PER_DTYPE[wdtype.value]
        ckpt = card.parallel.checkpoints_layers
        adapter_forward = peft_variants.dora_forward_transient_bytes(spec, variant, grad=not last_ckpt,
                                                                     base_dtype_bytes=base_bytes)
        if ckpt:  # the checkpointed layer's recompute in backward runs with grad
            recompute = peft_variants.dora_forward_transient_bytes(spec, variant, grad=True, base_dtype_bytes=base_bytes)
            on = subset or (True,) * len(transient)
            transient = tuple(max(x, recompute) if c else x for x, c in zip(transient, on))
            other = tuple(max(x, recompute) if c else x for x, c in zip(other, on))
    if card.scope is Scope.QLORA and card.lora.dequant is QloraDequant.BITSANDBYTES:
        # each Linear4bit's dequantised weight and fp32 absmax while its GEMM runs (memory/nf4_dequant.py): the forward
        # holds the fallback path's; the backward its own, and a checkpointed layer's recompute the forward's again.
        # The forward of a checkpointed last layer runs without grad: no adapter input copy to subtract
        pin = (card.software.model_extra or {}).get("bitsandbytes")
        fwd, fwd_no_grad, bwd = nf4_dequant.layer_moments(
            spec, rows=tokens, compute_dtype_bytes=act_dtype, double_quant=card.lora.double_quant,
            adapted=frozenset(g.name for g in targeted_groups(spec, trainable.lora)),
            adapter_dtype_bytes=trainable.lora.adapter_dtype_bytes,
            bitsandbytes_version=str(pin) if pin is not None else None,
            base_saves_input=bnb_saves and not bnb_graph_ckpt, first_forward_holds_input=bnb_graph_ckpt)
        on = (subset or (True,) * len(transient)) if card.parallel.checkpoints_layers else (False,) * len(transient)
        transient = tuple(max(x, bwd, fwd if c else 0.0) for x, c in zip(transient, on))
        other = tuple(max(x, bwd, fwd if c else 0.0) for x, c in zip(other, on))
        adapter_forward = max(adapter_forward, fwd_no_grad if last_ckpt else fwd)
    if _fp32_adapter_recompute(card, spec, trainable, act_dtype=act_dtype):
        # PEFT LoRA, fp32 adapters on a 16-bit base: a checkpointed layer's backward peaks in its recompute, at up_proj's
        # fp32 adapter output (memory.lora.fp32_adapter_recompute_extra_bytes), above the MLP's backward moment
        on = subset or (True,) * len(transient)
        mlp = [_layer_backward_transient(spec, i, tokens=tokens, dtype_bytes=act_dtype) for i in range(len(transient))]
        rec = [m + fp32_adapter_recompute_extra_bytes(tokens=tokens, hidden_size=spec.hidden_size,
                                                      compute_dtype_bytes=act_dtype, last_layer=i == len(transient) - 1)
               for i, m in enumerate(mlp)]
        transient = tuple(max(x, r) if c else x for x, r, c in zip(transient, rec, on))
        other = tuple(max(x, r) if c else x for x, r, c in zip(other, rec, on))
    kernel = act.kernel_extra(gradient_checkpointing=card.parallel.checkpoints_layers)
    if kernel:  # Gated DeltaNet layers: the chunked kernel's buffers (memory/activations._deltanet_live)
        transient = tuple(max(t, k) for t, k in zip(transient, kernel))
        other = tuple(max(t, k) for t, k in zip(other, kernel))
    stack_grads: tuple[tuple[float, ...], ...] = ()
    if card.parallel.moe_experts is MoeExperts.LOOP_V5 and spec.moe is not None:
        # transformers v5's eager experts: the stacked weights' gradient sums and the newest zero stack inside each
        # MoE layer's expert loop (memory/expert_loop_grads.py), beside one expert's share of the MLP's buffers
        transient, other, stack_grads = _loop_v5_stack_moments(card, spec, trainable, transient, other,
                                                               tokens=tokens, act_dtype=act_dtype)
    released = attention_backward_released(transient, other, act.after_attention_per_layer)
    attention_forward = attn.forward_transient_bytes(
        scores=scores, gradient_checkpointing=last_ckpt, dtype_bytes=act_dtype,
        family=spec.family)

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
    offloaded = card.parallel.activation_offload_layers or 0
    if offloaded:
        if offloaded >= layers:
            raise CardError(f"parallel.activation_offload_layers: {offloaded} must be below the model's {layers}"
                            " decoder layers (Transformer Engine keeps the last layer on the GPU)")
        host["activations"] = sum(act.per_layer[:offloaded]) * ranks_per_node
        notes.append(f"activation offloading of the first {offloaded} of {layers} layers (Transformer Engine's"
                     f" schedule): {layers - offloaded} layers' saved activations on the GPU at the peak")
    elif card.parallel.activation_offload:
        host["activations"] = act.total(gradient_checkpointing=card.parallel.checkpoints_layers) * ranks_per_node
        notes.append("activation offloading: saved tensors stream to host RAM; the GPU keeps the layer in flight")

    fsdp: dict[str, float] = {}
    if sharding.gathers_params:
        # under FSDP mixed precision the gathered units are in param_dtype (fsdp_gathered_dtype: the compute
        # dtype, bf16 for fp8 compute)
        w_gathered = weight_bytes(spec, weights=fsdp_gathered_dtype(card), compute=compute, trainable=trainable,
                                  quantized_experts=loop_nf4) \
            if mp_gather else w
        fsdp, note = _fsdp_terms(spec, sharding, trainable, w_gathered, pb=pb, scale=scale, n_train=n_train,
                                 grad_bytes=grad_bytes,
                                 unsharded_grad_bytes=BYTES_PER_DTYPE[fsdp_gathered_dtype(card).value]
                                 if mp_gather else grad_bytes)
        if megatron_fsdp_fp8_params(card) and fsdp.get("fsdp_layer_units"):
            fsdp, note = _megatron_fsdp_fp8_units(card, spec, fsdp, pb=pb, scale=scale)
        fsdp, note = torchao_fp8_gather_units(card, spec, fsdp, pb=pb, scale=scale,
                                              weights_divisor=sharding.weights_divisor) or (fsdp, note)
        if step_grads and not zero:
            # the gradient autograd makes for a unit spans its whole flat parameter (memory.fsdp_no_sync); from the
            # second micro-batch on it is added into the held .grad, both alive at once
            fsdp["fsdp_unsharded_grads"] = max(per_layer_grads, default=0.0)
        if not zero:
            notes.append(note)
    zero_terms: dict[str, float | bool] = {}
    if fsdp and not zero and offload is Offload.PARAMS_AND_OPTIMIZER:
        # FSDP2 CPUOffloadPolicy: each unit's local shard is copied to the GPU as its all-gather input
        # (FSDPParam.all_gather_inputs: sharded_param_data.to(device)), for the current and the prefetched
        # unit, and a unit's reduce-scatter output stays on the GPU until its copy to pinned host memory
        # completes (foreach_reduce: new_sharded_grad.to("cpu", non_blocking=True))
        staging = (fsdp.get("fsdp_layer_units", 0.0) + fsdp.get("fsdp_unsharded_grads", 0.0)) / sharding.weights_divisor
        zero_terms["offload_staging"] = staging
        notes.append(f"FSDP CPU offload: {staging / GIB:.2f} GiB of in-flight shard copies (all-gather inputs of the"
                     " current and prefetched unit, one unit's reduce-scatter output) stay on the GPU")
    if zero:
        grads_now = sum(per_layer_grads) + grads_head + grads_embed
        zero_terms, fsdp, temps_zero, zero_notes = _deepspeed_terms(
            card, spec, sharding, trainable, w, pb=pb, scale=scale, n_train=n_train, grad_bytes=grad_bytes,
            largest=largest, grads_total=grads_now, fsdp=fsdp, state_bytes=state_bytes)
        notes += zero_notes
        if offload is Offload.NONE and not prec.optimizer_in_backward:
            temps_gpu = temps_zero
        if offload is Offload.PARAMS_AND_OPTIMIZER:
            weights_gpu = adapter_gpu = 0.0

    from trainfit.plan.ranks import megatron_grad_buffer_held  # late: plan.ranks imports this module

    if megatron_grad_buffer_held(card) and card.parallel.strategy not in FSDP_STRATEGIES:
        # a Megatron-Core card without tensor / pipeline / expert parallelism: its DistributedDataParallel still makes
        # the one gradient buffer when it wraps the model and keeps it (plan.ranks.megatron_grad_buffer_held), so the
        # forward of the first micro-batch holds it too, not only the ZeRO-1 path's gradients from the backward on
        zero_terms["grads_preallocated"] = True
    # nanotron's FP32GradientAccumulator (parallel.grad_accumulation_pass), as on a model-parallel rank
    # (plan/ranks.py rank_terms): the fp32 buffer of every parameter, made at init and kept; the walked gradients
    # are the 16-bit .grad tensors, freed after each backward; DDP buckets them in their own dtype
    accumulator = card.parallel.grad_accumulation_pass and trainable.lora is None and not zero
    grad_buffer = 0.0
    if accumulator:
        grad_buffer = sum(per_layer_grads) + grads_head + grads_embed
        half = train_bytes / grad_bytes
        per_layer_grads = tuple(g * half for g in per_layer_grads)
        grads_head, grads_embed, tied_grad = grads_head * half, grads_embed * half, tied_grad * half
    if prec.compute.quantized_gemms:
        fp8_b, fp8_note = fp8_weight_bytes(card, spec, scale=scale, shards=wd if megatron_fsdp_fp8_params(card) else 1)
        weights_gpu += fp8_b
        notes.append(fp8_note)
        notes.append(fp8_activation_note(card))
    if card.precision.fp8_activation_input_store:
        notes.append(GLU_INPUT_STORE_NOTE)
    kv_returned = _returned_kv_cache(card, spec, act_dtype, seq_len)
    if kv_returned:
        kept = card.loop.keeps_output_through_backward
        notes.append(f"loop.returns_kv_cache: the model returns every attention layer's keys and values"
                     f" ({kv_returned / GIB:.2f} GiB a micro-batch), alive to the end of the forward"
                     + (", then with the kept output through backward, the optimizer step and beside the next"
                        " forward's" if kept else "") + " (memory.returned_cache)")
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
        gradient_checkpointing=card.parallel.checkpoints_layers,
        checkpointed_layers=subset or (),
        logits=lg,
        logits_grad_bf16=logits_grad_bytes(card, tokens=card.batch.micro_batch_size * logit_len,
                                           width=spec.head_outputs or spec.vocab_size,
                                           dtype_bytes=act_dtype),
        **({"forward_at": "loss (flash-attn's cross-entropy over the bf16 logits)"}
           if card.loss.kernel is LossKernel.FLASH_ATTN and spec.head_outputs is None else {}),
        layer_backward_transient=transient,
        layer_backward_released=released,
        expert_stack_grads=stack_grads,
        expert_stacks_are_leaves=trainable.lora is None,
        attention_forward_transient=attention_forward,
        layer_forward_transient=act.kernel_forward_checkpointed if card.parallel.checkpoints_layers else 0.0,
        adapter_forward_transient=adapter_forward,
        **({"adapter_forward_what": "bitsandbytes NF4 dequantisation temporaries"}
           if card.scope is Scope.QLORA and adapter_forward else {}),
        tied_embedding_grad_transient=tied_grad,
        optimizer_temporaries=temps_gpu,
        grad_accumulation=card.batch.grad_accum > 1,
        grad_buffer=grad_buffer,
        ddp_buckets=n_train * (train_bytes if accumulator else grad_bytes) if sharding.ddp_bucket_copy else 0.0,
        zero2_bucket=spec.hidden_size**2 * grad_bytes if (sharding.zero2_bucket and not zero) else 0.0,
        activation_offload=card.parallel.activation_offload and not offloaded,
        offloaded_layers=offloaded,
        autocast_weight_cache=(
            2.0 * (pb.linear_weights + (pb.lm_head or pb.embedding)) * scale / wd
            if autocast and trainable.lora is None
            else 0.0
        ),
        in_backward_step=in_bwd,
        kept_output=_kept_output(card, spec, act_dtype, seq_len),
        graph_held_inputs=graph_held,
        ctx_held_inputs=bnb_ctx_held,
        kept_output_fp32=_kept_fp32(card) and not card.loss.chunked,
        returned_kv_cache=kv_returned,
        kv_cache_kept=card.loop.returns_kv_cache and card.loop.keeps_output_through_backward,
        **fsdp,
        **zero_terms,
        **step_grads,
    )
    return terms, host, notes


def _kept_output(card: RunCard, spec: ModelSpec, act_dtype: int, seq_len: int) -> float:
    """``out = model(...); out.loss.backward()``: the output object holds the logits (compute dtype, as
    lm_head returns them) from the loss until the loop rebinds it when the next micro-batch's forward returns, so
    through backward and the optimizer step (``memory.phases.StepTerms.kept_output``): Lit-GPT binds ``logits`` and
    ``loss`` in its loop body and steps the optimizer before the next ``logits = model(...)`` rebinds them
    (Lightning-AI/litgpt litgpt/finetune/lora.py l.268-285 @5895df1004c3d05ef69f7aeffcfee757dbc42d58), as torchtune's
    recipes of 2024-04 do (pytorch/torchtune recipes/lora_finetune_single_device.py l.447-475
    @fef3ed10dc9efe9e35b118e4397e84c680c0a737) and PEFT's MetaMathQA harness (``outputs = model(**batch, ...)`` then
    ``grad_scaler.step(optimizer)``, huggingface/peft method_comparison/MetaMathQA/run.py l.277-285
    @5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40). PEFT's model computes the loss inside its forward, so there the
    previous logits are still bound at the next loss too: not counted (the next forward counts them beside its new
    output only). ``loop.kept_output_dtype: fp32``:
    the loop holds an fp32 copy instead (prime-rl's SFT trainer: ``forward`` returns
    ``cast_float_and_contiguous(out)``, PrimeIntellect-ai/prime-rl src/prime_rl/trainer/model.py l.481-494 and
    models/layers/lm_head.py l.21-32 @d8f290ef0358a804f1912bd29ea1b37cc56894b4; sft/train.py l.246-272 keeps ``out``
    through ``.backward()``, ``del logits`` dropping a second name only): 4 bytes per logit; the loss's own
    tensors (``logits_bytes``'s eager path) are unchanged, as ``CrossEntropyLoss`` on fp32 logits saves its fp32
    log-softmax output the same way."""
    if not card.loop.keeps_output_through_backward or card.loss.chunked:
        return 0.0
    width = 4 if _kept_fp32(card) else act_dtype
    return float(card.batch.micro_batch_size * seq_len * (spec.head_outputs or spec.vocab_size) * width)


class LossInputCopy(NamedTuple):
    """``loop.loss_input_copy`` as the step runs it (``loss_input_copy_of``)."""

    forward_copy: bool
    """``.contiguous()`` copies the shifted slice: the copy kernel, and the compiled loss saves the copy."""
    slice_backward: bool
    """Backward's ``slice_backward``: a zero-filled gradient of the logits' shape beside the slice's gradient."""


def loss_input_copy_of(card: RunCard) -> LossInputCopy:
    """``loop.loss_input_copy``: the loop hands the compiled loss ``logits[..., :-1, :].contiguous()`` and keeps
    ``logits`` bound through ``loss.backward()`` (OLMo-core ``Trainer.get_losses``, allenai/OLMo-core
    src/olmo_core/train/trainer.py l.924, l.1167-1197 @4f2c8ef59f9268b7f3aae0c127b52a45d4c1c706). The copy (its kernel,
    and the compiled loss saving it instead of the kept logits) only with more than one sequence per micro-batch
    (``memory.logits.shifted_slice_copies``: one sequence's slice is contiguous and ``.contiguous()`` returns it); the
    slice stays in autograd either way, so backward's ``slice_backward`` (its zero fill and copy, and the zero-filled
    gradient beside the slice's) runs whenever the flag is set."""
    on = card.loop.loss_input_copy
    return LossInputCopy(forward_copy=on and shifted_slice_copies(micro_batch_size=card.batch.micro_batch_size),
                         slice_backward=on)


def _returned_kv_cache(card: RunCard, spec: ModelSpec, act_dtype: int, seq_len: int) -> float:
    """``loop.returns_kv_cache``: the keys and values of every full-attention layer that the checkpointed model
    returns in its output (``trainfit.memory.returned_cache``); 0 without the flag. Multi-head latent attention
    returns its own cache layout, not planned (CardError naming the field)."""
    if not card.loop.returns_kv_cache:
        return 0.0
    if spec.mla is not None:
        raise CardError("loop.returns_kv_cache: the returned cache of multi-head latent attention is not planned;"
                          " allowed for this model: false")
    from trainfit.memory.returned_cache import returned_kv_cache_bytes  # cards with the flag only (cold start)

    return returned_kv_cache_bytes(num_layers=spec.num_full_attention_layers,
                                   micro_batch_size=card.batch.micro_batch_size, seq_len=seq_len,
                                   kv_dim=spec.kv_dim, act_bytes=act_dtype)


def _kept_fp32(card: RunCard) -> bool:
    return card.loop.keeps_output_through_backward and card.loop.kept_output_dtype is KeptOutputDtype.FP32


def zero_config_of(card: RunCard, spec: ModelSpec, stage: int) -> ZeroConfig:
    """The card's ``deepspeed`` section resolved for this model (``auto`` as the HF Trainer fills it)."""
    from trainfit.memory.deepspeed import resolve_zero_config

    ds = card.deepspeed
    off = card.parallel.offload
    return resolve_zero_config(
        stage=stage, hidden_size=spec.hidden_size,
        offload_optimizer=off is not Offload.NONE, offload_param=off is Offload.PARAMS_AND_OPTIMIZER and stage == 3,
        reduce_bucket_size=ds.reduce_bucket_size, allgather_bucket_size=ds.allgather_bucket_size,
        stage3_prefetch_bucket_size=ds.stage3_prefetch_bucket_size,
        stage3_max_live_parameters=ds.stage3_max_live_parameters,
        stage3_max_reuse_distance=ds.stage3_max_reuse_distance,
        stage3_param_persistence_threshold=ds.stage3_param_persistence_threshold,
        sub_group_size=ds.sub_group_size, contiguous_gradients=ds.contiguous_gradients, overlap_comm=ds.overlap_comm,
    )


def _layer_modules(spec: ModelSpec, i: int) -> tuple[int, ...]:
    """Element counts of a decoder layer's parameterised submodules, in forward order (what the
    ZeRO-3 coordinator fetches one by one); norms, biases and scalars are left to persistence."""
    h = spec.hidden_size
    mods: list[int] = []
    if spec.layer_kind(i) is LayerKind.FULL_ATTENTION:
        q_out = 2 * spec.q_dim if spec.attn_output_gate else spec.q_dim
        if spec.fused_projections or spec.fused_qkv:  # Phi-3: one qkv_proj module; Qwen (1.0): one c_attn
            mods += [h * (q_out + 2 * spec.kv_dim), spec.q_dim * h]
        else:
            mods += [h * q_out, h * spec.kv_dim, h * spec.kv_dim, spec.q_dim * h]
    else:
        la = spec.linear_attention
        assert la is not None
        mods += [h * la.conv_dim, h * la.value_dim, h * la.num_value_heads, h * la.num_value_heads, la.value_dim * h]
    if spec.moe is not None and spec.moe.is_moe_layer(i):
        moe = spec.moe
        mods += [moe.num_experts * h, moe.num_experts * 2 * h * moe.expert_intermediate_size,
                 moe.num_experts * moe.expert_intermediate_size * h]
        if moe.shared_expert_intermediate_size:
            sh = moe.shared_expert_intermediate_size
            mods += [h * sh, h * sh, sh * h]
    elif spec.fused_mlp:  # Phi-3, GLM-4: one gate_up_proj module
        mods += [h * 2 * spec.intermediate_size, spec.intermediate_size * h]
    else:
        mods += [h * spec.intermediate_size] * 2 + [spec.intermediate_size * h]
    return tuple(mods)


def _deepspeed_terms(
    card: RunCard, spec: ModelSpec, sharding: Sharding, trainable: TrainableSpec, w: WeightBytes, *,
    pb: ParamBreakdown, scale: float, n_train: float, grad_bytes: float, largest: float, grads_total: float,
    fsdp: dict[str, float], state_bytes: float,
) -> tuple[dict[str, float | bool], dict[str, float], float, list[str]]:
    """DeepSpeed ZeRO's own buffers as StepTerms fields (``trainfit.memory.deepspeed``), the FSDP-style
    fields replaced for stage 3, and the optimizer temporaries of the flat fp32 partition."""
    from trainfit.memory.deepspeed import DEEPSPEED_VERSION, gathered_params, persistent_numel, zero_buffers

    stage = ZERO_STAGES[sharding.strategy]
    cfg = zero_config_of(card, spec, stage)
    dp = sharding.shard_group
    bpp = (w.base + w.adapter) / (pb.total * scale + (n_train if trainable.lora else 0))
    sizes = tuple((t.numel, t.count) for t in param_tensors(spec))
    if trainable.lora is not None:
        sizes += tuple((t.numel, t.count) for t in lora_tensors(spec, trainable.lora))
    persist = persistent_numel(cfg, sizes) * scale if stage == 3 else 0.0
    buf = zero_buffers(cfg, dp=dp, trainable_numel=n_train, grad_bytes=grad_bytes, largest_param=int(largest),
                       persistent_numel=persist, param_bytes=bpp)
    prec = card.precision
    temps = step_temporary_bytes(optimizer=prec.optimizer, impl=prec.optimizer_impl, params=buf.optimizer_flat_numel,
                                 largest_tensor=buf.optimizer_flat_numel, state_bytes=state_bytes)
    out: dict[str, float | bool] = {
        "zero_ipg_buckets": buf.ipg_buckets,
        "zero_ipg_persistent": stage == 3,
        "zero_step_grads": grads_total if stage > 1 else n_train * grad_bytes / dp,
        "zero_step_cast": buf.step_cast,
        "zero_step_fp32_grad": buf.step_fp32_grad,
        "zero_step_keeps_grads": stage == 3,
        "zero_persistent_params": buf.persistent_params,
        "grads_preallocated": stage == 3 and not cfg.offload_optimizer,
        "offload_staging": buf.offload_grad_staging,
    }
    notes = [f"DeepSpeed ZeRO-{stage} buffers (deepspeed {DEEPSPEED_VERSION}): reduce bucket"
             f" {cfg.reduce_bucket_size:.3g} elements x{2 if cfg.overlap_comm and stage < 3 else 1}"
             f" ({buf.ipg_buckets / GIB:.2f} GiB)"
             + (f", fp32 gradient partition at the step {buf.step_fp32_grad / GIB:.2f} GiB" if buf.step_fp32_grad else "")
             + ("; the optimizer steps one flat fp32 partition" if buf.optimizer_flat_numel else "")]
    if stage == 3 and sharding.gathers_params:
        threshold = cfg.param_persistence_threshold
        layers = tuple(tuple(int(n * scale) for n in _layer_modules(spec, i) if n > threshold)
                       for i in range(spec.num_layers))
        head = int((pb.lm_head or 0) * scale)
        emb = int(pb.embedding * scale)
        g = gathered_params(layers, embedding=emb if emb > threshold else 0, head=head if head > threshold else 0,
                            tied=not pb.lm_head, prefetch_bucket_size=cfg.prefetch_bucket_size,
                            max_live_parameters=cfg.max_live_parameters, max_reuse_distance=cfg.max_reuse_distance,
                            recompute=card.parallel.checkpoints_layers)
        biggest = max([n for layer in layers for n in layer] + [1])
        fsdp = dict(fsdp, fsdp_layer_units=0.0, fsdp_all_gathered=0.0, fsdp_root_unit=0.0, fsdp_root_grads=0.0,
                    fsdp_root_embedding_grads=0.0,
                    fsdp_unsharded_grads=biggest * grad_bytes if trainable.lora is None else 0.0)
        out["gathered_forward"] = g.at_loss * bpp
        out["gathered_backward"] = g.backward_peak * bpp
        notes.append(f"ZeRO-3 gathered parameters: {g.at_loss * bpp / GIB:.2f} GiB kept from the end of forward"
                     f" (reuse distance {cfg.max_reuse_distance:.3g} elements), {g.backward_peak * bpp / GIB:.2f} GiB"
                     f" at most in backward; {persist * bpp / GIB:.2f} GiB of persistent parameters"
                     f" (<= {threshold:,} elements each)")
    return out, fsdp, temps, notes


def frozen_pass_gathered_bytes(card: RunCard, spec: ModelSpec, sharding: Sharding, *,
                               bytes_per_param: float, own_engine: bool = False) -> tuple[float, float]:
    """(most gathered at once, gathered while the head runs) in bytes, for one no-grad forward of ``spec`` whose
    engine shards it like the trained model on ``sharding`` (``bytes_per_param``: its weights' bytes per parameter);
    0 where nothing is gathered.

    ZeRO-3: TRL wraps a frozen reference or reward model as its own stage-3 engine (``prepare_deepspeed``,
    huggingface/trl trl/models/utils.py l.236-273 @f2cd57710ae345ea6428ae95363267fcf38a3dc8: the policy's config
    copied, l.245, then ``stage3_param_persistence_threshold`` = 10·hidden and ``stage3_prefetch_bucket_size`` =
    0.9·hidden² of the frozen model's own hidden size set over it, l.254-264; ``deepspeed.initialize`` then
    ``model.eval()``, l.271-272; its ``stage3_max_live_parameters`` and ``stage3_max_reuse_distance`` stay the
    policy's), and its forward runs the stage-3 coordinator over its own modules: ``memory.deepspeed.gathered_params``
    over the forward alone (``forward_only``), the embedding first and the head (the embedding again when tied, kept
    across the pass within the reuse distance) last, with the modules of at most the persistence threshold left to
    persistence. ``own_engine``: the trained engine's own no-grad pass (old-policy log-probs, a LoRA policy with its
    adapters off), the same trace under the card's own ZeRO settings (``zero_config_of``). Open: other frameworks
    build their frozen engines' configs themselves (OpenRLHF's ``get_eval_ds_config``); their settings are planned
    as TRL's here, not checked.
    FSDP: its own layer units and root unit (embedding, final norm, lm_head or a score head), sized as
    ``_fsdp_terms`` sizes the trained model's (the two fields ``methods.rl._gathered`` reads)."""
    from trainfit.memory.deepspeed import gathered_params

    if not sharding.gathers_params:
        return 0.0, 0.0
    pb = param_breakdown(spec)
    scale = count_scale(spec)
    if sharding.strategy is Strategy.ZERO3:
        cfg = zero_config_of(card, spec, 3)
        if not own_engine:
            h = spec.hidden_size
            cfg = replace(cfg, param_persistence_threshold=10 * h, prefetch_bucket_size=int(0.9 * h * h))
        threshold = cfg.param_persistence_threshold
        layers = tuple(tuple(int(n * scale) for n in _layer_modules(spec, i) if n > threshold)
                       for i in range(spec.num_layers))
        emb = int(pb.embedding * scale)
        head = int((pb.lm_head or pb.embedding) * scale)
        g = gathered_params(layers, embedding=emb if emb > threshold else 0, head=head if head > threshold else 0,
                            tied=not pb.lm_head, prefetch_bucket_size=cfg.prefetch_bucket_size,
                            max_live_parameters=cfg.max_live_parameters, max_reuse_distance=cfg.max_reuse_distance,
                            recompute=False, forward_only=True)
        return g.forward_peak * bytes_per_param, g.at_head * bytes_per_param
    w = WeightBytes(base=pb.total * scale * bytes_per_param, adapter=0.0)
    fsdp, _ = _fsdp_terms(spec, sharding, TrainableSpec(), w, pb=pb, scale=scale, n_train=0.0,
                          grad_bytes=bytes_per_param)
    units = fsdp.get("fsdp_layer_units", 0.0) + fsdp.get("fsdp_root_unit", 0.0)
    return units, units


def _megatron_fsdp_fp8_units(card: RunCard, spec: ModelSpec, fsdp: dict[str, float], *, pb: ParamBreakdown,
                             scale: float) -> tuple[dict[str, float], str]:
    """Megatron-FSDP's gathered layer units with fp8 primary weights (``memory.fp8.megatron_fsdp_fp8_unit_bytes``):
    current + one prefetched unit at 1 B per linear weight, plus, on a GPU without non-TN fp8 GEMMs, the transpose
    the current unit's backward builds; the root unit (embedding, lm_head: not fp8) unchanged."""
    from trainfit.memory import fp8

    layers = max(1, spec.num_layers)
    unit_linear = fp8.fp8_linear_params(spec) * scale / layers
    unit, transpose = fp8.megatron_fsdp_fp8_unit_bytes(
        unit_params=pb.largest_layer * scale, unit_linear_params=unit_linear,
        other_bytes_per_param=BYTES_PER_DTYPE[card.weights_dtype.value], non_tn_gemm=fp8_card_non_tn_gemm(card))
    out = dict(fsdp, fsdp_layer_units=2 * unit + transpose)
    note = (f"Megatron-FSDP units with fp8 primary weights: one per decoder layer ({unit / GIB:.2f} GiB gathered, the"
            " linears' weights as uint8), current + one prefetched"
            + (f"; the backward's transpose of one unit ({transpose / GIB:.2f} GiB)" if transpose else "")
            + "; root unit (embedding, norm, lm_head) stays gathered from forward to the end of backward")
    return out, note


def torchao_fp8_gather_units(card: RunCard, spec: ModelSpec, fsdp: dict[str, float], *, pb: ParamBreakdown,
                             scale: float, weights_divisor: float) -> tuple[dict[str, float], str] | None:
    """The gathered layer units (current + one prefetched) under torchao's float8 all-gather
    (``precision.fp8_all_gather``; ``memory.fp8.torchao_fp8_gather_unit_bytes``): the linears' weights at 1 B, the
    norms in ``param_dtype``; the root unit (embedding, norm, output head: not float8) unchanged. Where the model is
    not resharded after forward (``fsdp_grad_op``: ``fsdp_all_gathered``, no layer units) the whole gathered model
    takes the same per-linear saving (``memory.fp8.torchao_fp8_all_gathered_bytes``, the non-local
    ``1 - 1 / weights_divisor`` of each weight). None without gathered parameters, or where some layers keep bf16
    linears (their unit, the larger, stays)."""
    if not (card.precision.fp8_all_gather and (fsdp.get("fsdp_layer_units") or fsdp.get("fsdp_all_gathered"))):
        return None
    layers = max(1, spec.num_layers)
    if card.precision.quantized_layer_share(layers) < 1.0:
        return None
    from trainfit.memory import fp8

    other = BYTES_PER_DTYPE[fsdp_gathered_dtype(card).value if card.weights_dtype is Dtype.FP32
                           else card.weights_dtype.value]
    if not fsdp.get("fsdp_layer_units"):
        gathered = fp8.torchao_fp8_all_gathered_bytes(
            all_gathered_bytes=fsdp["fsdp_all_gathered"], linear_params=fp8.fp8_linear_params(spec) * scale,
            linears=fp8.fp8_linear_count(spec), other_bytes_per_param=other,
            gathered_share=1 - 1 / max(1.0, weights_divisor))
        note = (f"FSDP with torchao's float8 all-gather, not resharded after forward: the gathered model"
                f" ({gathered / GIB:.2f} GiB) holds the linears' weights as fp8 from forward to the end of backward;"
                " root unit (embedding, norm, output) in param_dtype")
        return dict(fsdp, fsdp_all_gathered=gathered), note
    unit = fp8.torchao_fp8_gather_unit_bytes(
        unit_params=pb.largest_layer * scale, unit_linear_params=fp8.fp8_linear_params(spec) * scale / layers,
        unit_linears=fp8.fp8_linear_count(spec) / layers, other_bytes_per_param=other)
    note = (f"FSDP units with torchao's float8 all-gather: one per decoder layer ({unit / GIB:.2f} GiB gathered, the"
            " linears' weights as fp8), current + one prefetched; root unit (embedding, norm, output) in param_dtype")
    return dict(fsdp, fsdp_layer_units=2 * unit), note


def _no_sync_grads(spec: ModelSpec, pb: ParamBreakdown, trainable: TrainableSpec, *, scale: float, n_train: float,
                   saved: tuple[float, float], grad_bytes: float) -> tuple[tuple[float, ...], float, float]:
    """Per-layer, head and embedding gradient bytes held under FSDP1 ``no_sync`` accumulation (units: one per decoder
    layer, and the root with the embedding, final norm and head): each unit's whole unsharded flat parameter once any
    of its parameters trains (``memory.fsdp_no_sync.no_sync_unit_grad_bytes``). LoRA: the adapters of a layer train
    in its unit; the root trains only with ``lora.modules_to_save``."""
    layers = max(1, spec.num_layers)
    lora = trainable.lora is not None
    n_adapter = (n_train - saved[0] - saved[1]) if lora else 0.0
    per_layer = tuple(
        no_sync_unit_grad_bytes(unit_params=p * scale + n_adapter / layers,
                                unit_trainable_params=n_adapter / layers if lora else p * scale,
                                grad_dtype_bytes=grad_bytes)
        for p in pb.per_layer)
    root = (pb.embedding + pb.lm_head + pb.positions + spec.hidden_size) * scale
    root_trainable = (saved[0] + saved[1]) if lora else root
    grads_root = no_sync_unit_grad_bytes(unit_params=root, unit_trainable_params=root_trainable,
                                         grad_dtype_bytes=grad_bytes)
    return per_layer, grads_root, 0.0


def _fsdp_terms(
    spec: ModelSpec, sharding: Sharding, trainable: TrainableSpec, w: WeightBytes, *, pb: ParamBreakdown,
    scale: float, n_train: float, grad_bytes: float, reshard_after_forward: bool | None = None,
    unsharded_grad_bytes: float | None = None,
) -> tuple[dict[str, float], str]:
    """FSDP/ZeRO-3 buffers (bytes per GPU) of a strategy that gathers parameters, and the note that
    describes them: the gathered layer units (current + one prefetched), or the whole gathered model
    when it is not resharded after forward; one layer's unsharded gradients; the root unit.
    ``reshard_after_forward``: None follows the strategy (``Sharding.reshards_after_forward``); False keeps every
    unit gathered (a pipeline stage under FSDP2, ``plan.fsdp_no_sync.pipeline_fsdp2_holds_unsharded``).

    FSDP2 on a one-rank mesh (``Sharding.one_rank_fsdp2``) takes torch's world-size-1 branches
    (pytorch/pytorch@cf30153c4c131c8164ee7798e5022d810682e2cb, torch 2.13.0): ``FSDPParamGroup.unshard`` allocates
    nothing (``_fsdp_param_group.py`` l.388-403: no all-gather, so the backward prefetch of the next unit holds no
    bytes) and ``wait_for_unshard`` allocates each parameter's unsharded ``param_dtype`` storage and copies the cast
    shard into it (l.426-448): one layer unit in flight, not two. Its backward makes the unit's gradients in
    ``param_dtype`` (``unsharded_grad_bytes`` per parameter; None: ``grad_bytes``) and ``foreach_reduce`` copies
    them into an fp32 (``reduce_dtype``) reduce-scatter input of the unit's size, then into a ``reduce_output`` that
    becomes the sharded gradient (``_fsdp_collectives.py`` l.597-631); the input is kept in
    ``comm_ctx.reduce_scatter_state`` until the next unit's reduce, so a layer's backward holds its own
    ``param_dtype`` gradients and the previous unit's fp32 input. Traced on fake tensors at world size 1
    (``MixedPrecisionPolicy(bf16, fp32)``, torch's ``FSDPMemTracker``): tests/trace/test_fsdp_one_rank_trace.py.

    Open (not modelled; numbers unchanged): prime-rl's ``setup_fsdp`` (PrimeIntellect-ai/prime-rl
    ``src/prime_rl/trainer/model.py`` l.210-216 @d8f290ef) passes ``reshard_after_forward=True`` to the root
    ``fully_shard`` and, on an untied model, shards ``embed_tokens`` and ``[lm_head, norm]`` as units of their own;
    an older version (@008cbefc9e7ee3c344fc8657ac11bea9564e9050, ``setup_fsdp``) also keeps the last decoder layer
    gathered (``reshard_after_forward=False`` for it). The plan's root unit held from forward to the end of backward
    therefore over-plans the loss moment of such a run by up to the embedding's ``param_dtype`` copy."""
    wd, layers = sharding.weights_divisor, spec.num_layers
    reshards = sharding.reshards_after_forward if reshard_after_forward is None else reshard_after_forward
    fsdp: dict[str, float] = {}
    bpp = (w.base + w.adapter) / (pb.total * scale + (n_train if trainable.lora else 0))
    unit = pb.largest_layer * scale * bpp
    head_unit = (pb.embedding + pb.lm_head + spec.hidden_size) * scale * bpp
    layer_grad_unit = (pb.largest_layer * scale if trainable.lora is None else n_train / layers) * grad_bytes
    one_rank = sharding.one_rank_fsdp2 and wd == 1
    if one_rank:
        fsdp["fsdp_layer_units"] = unit
    elif reshards:
        fsdp["fsdp_layer_units"] = 2 * unit
    else:
        fsdp["fsdp_all_gathered"] = (w.base + w.adapter) * (1 - 1 / wd) - head_unit
        fsdp["fsdp_layer_units"] = 0.0
    fsdp["fsdp_unsharded_grads"] = layer_grad_unit
    if one_rank:
        # this unit's param_dtype gradients and the previous unit's fp32 reduce-scatter input (docstring)
        fsdp["fsdp_unsharded_grads"] = layer_grad_unit / grad_bytes * ((unsharded_grad_bytes or grad_bytes) + grad_bytes)
    if sharding.has_root_unit:
        fsdp["fsdp_root_unit"] = head_unit
        if trainable.lora is None:
            # lm_head's (or the tied matrix's) gradient appears first; an untied embedding's last (one rank: in
            # param_dtype, reduced in the final callback)
            root_grad_bytes = (unsharded_grad_bytes or grad_bytes) if one_rank else grad_bytes
            fsdp["fsdp_root_grads"] = (pb.lm_head or pb.embedding) * scale * root_grad_bytes
            fsdp["fsdp_root_embedding_grads"] = (pb.embedding if pb.lm_head else 0) * scale * root_grad_bytes
    else:
        fsdp["fsdp_layer_units"] = (1 if one_rank else 2) * max(unit, (pb.lm_head or pb.embedding) * scale * bpp)
    if one_rank:
        return fsdp, (f"FSDP2 on one rank: each decoder layer's unit unsharded into param_dtype storage"
                      f" ({unit / GIB:.2f} GiB) around its use, one at a time (no all-gather, no prefetch); its"
                      " gradients pass through an fp32 reduce buffer kept until the next unit's reduce"
                      + ("; root unit (embedding, norm, lm_head) unsharded from forward to the end of backward"
                         if sharding.has_root_unit else ""))
    note = (
        f"FSDP/ZeRO-3 units: one per decoder layer ({unit / GIB:.2f} GiB gathered), current + one prefetched;"
        + (" root unit (embedding, norm, lm_head) stays gathered from forward to the end of backward" if sharding.has_root_unit else "")
    )
    return fsdp, note


@lru_cache(maxsize=4096)
def _scaled(values: tuple[int, ...], factor: float) -> tuple[float, ...]:
    return tuple(v * factor for v in values)


def _fp32_adapter_recompute(card: RunCard, spec: ModelSpec, trainable: TrainableSpec, *, act_dtype: int) -> bool:
    """Whether a checkpointed layer's recompute moment (``memory.lora.fp32_adapter_recompute_extra_bytes``) applies:
    PEFT LoRA (not QLoRA, DoRA or another variant) with adapters wider than the 16-bit compute dtype, whole layers
    checkpointed (``gradient_checkpointing: true``), a dense model, gate/up/down all adapted (the moment's
    intermediate-wide terms cancel only then). PEFT's LoRA dropout (on the input) changes none of it: ``lora_A``
    saves the module's fp32 dropout output in place of its fp32 cast, the same bytes (its masks are in the saved
    set).

    Not with ``lora.dropout_position: post`` and dropout (``LoraSpec.dropout_post``; without dropout the card reads
    post as no setting), which names NeMo Automodel's own ``LinearLoRA``, not PEFT's module: its
    forward runs ``lora_B(lora_A(x)) * scale`` with no cast of ``x`` to the adapter's dtype, its adapters in the base
    weight's dtype unless ``lora_dtype`` is given (NVIDIA-NeMo/Automodel nemo_automodel/components/_peft/lora.py
    ``LinearLoRA._init_adapter`` and ``LinearLoRA.forward`` @03bd7a9b6a3b5f3248bb4af2e9e3c8131a5c2378), so PEFT's
    fp32 ``up_proj`` moment is not what it holds.

    Not under Megatron-Core's core-attention recompute (``selective_checkpointing: core_attention`` or a
    ``recompute_modules`` list): only the attention core re-runs, the MLP never does, so no ``up_proj`` recompute
    moment exists. Not under per-op SAC (``gradient_checkpointing: selective``): its policy saves every other matmul's
    output, so the recompute at ``up_proj`` holds a different set, which no trace here has measured.

    Not for OLMo 2's post-block norms (``ModelSpec.post_block_norms``): there the MLP's input is the residual itself
    (``residual = hidden_states``, ``self.mlp(hidden_states)``, huggingface/transformers
    src/transformers/models/olmo2/modeling_olmo2.py l.313-314 @v5.24.0), one a·h local rather than two, and the
    trace shows no recompute moment above the plan's backward moments: OLMo-2-0425-1B LoRA (all-linear r 16, SDPA,
    bf16, ``benchmarks/trace_prime_rl_rl_step.py 4096 16384 lora model=allenai/OLMo-2-0425-1B``) traced 4.016 /
    7.363 GiB in layer 15's backward; planned (less the 64 MiB cuBLAS workspace) without the moment 4.015 / 7.349,
    with it at one local 4.062 / 7.537 (+1.1 / +2.4 %), at two 4.077 / 7.599. The moment is left out there."""
    lora = trainable.lora
    if card.scope is not Scope.LORA or lora is None or spec.moe is not None or spec.post_block_norms:
        return False
    if lora.dropout_post:
        return False
    if card.parallel.gradient_checkpointing is not True:
        return False
    if lora.adapter_dtype_bytes <= act_dtype:
        return False
    names = {g.name.rsplit(".", 1)[-1] for g in targeted_groups(spec, lora)}
    return {"gate_proj", "up_proj", "down_proj"} <= names


@lru_cache(maxsize=4096)
def _layer_transients(spec: ModelSpec, *, tokens: int, dtype_bytes: int, attention_bytes: float = 0.0) -> tuple[float, ...]:
    """Per layer: the larger of the MLP's activation gradients and (full-attention layers with eager
    attention) the attention backward's score-sized buffers; they do not overlap in time."""
    return tuple(
        max(_layer_backward_transient(spec, i, tokens=tokens, dtype_bytes=dtype_bytes),
            attention_bytes if spec.layer_kind(i) is LayerKind.FULL_ATTENTION else 0.0)
        for i in range(spec.num_layers))


def attention_backward_released(transient: tuple[float, ...], other: tuple[float, ...],
                                after_attention: tuple[int, ...]) -> tuple[float, ...]:
    """Per layer: the saved bytes gone when the layer's backward holds ``transient`` (its largest moment).

    Where eager attention's backward buffers (``other``: the layer's moments without them) are the largest,
    the layer's backward has by then run the MLP block's and the post-attention norms' backward, which freed
    what they saved (``ActivationBytes.after_attention_per_layer``): the attention moment stands at the saved
    set less those, above the others' moment by at most ``transient - other``. Empty when nothing is known
    to be freed (a family with its own layer model, or no eager attention)."""
    if not after_attention or all(t <= o for t, o in zip(transient, other)):
        return ()
    return tuple(max(0.0, min(float(a), t - o)) for t, o, a in zip(transient, other, after_attention))


def _loop_v5_stack_moments(card: RunCard, spec: ModelSpec, trainable: TrainableSpec, transient: tuple[float, ...],
                           other: tuple[float, ...], *, tokens: int, act_dtype: int,
                           ) -> tuple[tuple[float, ...], tuple[float, ...], tuple[tuple[float, ...], ...]]:
    """``parallel.moe_experts: loop_v5``: each MoE layer's backward moment of the stacked expert weights' gradients
    (``expert_loop_grads.loop_stack_grad_moment_bytes``) plus one expert's share of the MLP's activation-gradient
    buffers (the loop runs one expert's rows at a time), where it is the layer's largest. Returns the transients,
    the moments besides attention's, and per layer the stacks that get a gradient (empty where their moment is not
    the largest), for the allocator replay."""
    assert spec.moe is not None
    lora = trainable.lora
    groups = [g for g in (targeted_groups(spec, lora) if lora is not None else linear_groups(spec))
              if g.routed and g.experts > 1]
    if not groups:  # LoRA that leaves the stacks frozen: no stack gradient
        return transient, other, ()
    stack = tuple(float(g.experts * g.in_features * g.out_features * BYTES_PER_DTYPE[card.weights_dtype.value])
                  for g in groups)
    moment = loop_stack_grad_moment_bytes(stack_bytes=stack, stacks_are_leaves=lora is None)
    new_t, new_o, blocks = [], [], []
    for i, (t_i, o_i) in enumerate(zip(transient, other)):
        if not spec.moe.is_moe_layer(i):
            new_t.append(t_i)
            new_o.append(o_i)
            blocks.append(())
            continue
        m = moment + _layer_backward_transient(spec, i, tokens=tokens, dtype_bytes=act_dtype) / spec.moe.num_experts
        new_t.append(max(t_i, m))
        new_o.append(max(o_i, m))
        blocks.append(stack if m >= t_i else ())
    return tuple(new_t), tuple(new_o), tuple(blocks)


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
