"""Closed sets of choices. Cards, CLI flags and the core all speak these enums."""

from enum import StrEnum


class Method(StrEnum):
    SFT = "sft"
    RM = "rm"
    DPO = "dpo"
    PPO = "ppo"
    GRPO = "grpo"


class Scope(StrEnum):
    """What trains. ``dora``, ``ia3``, ``prompt_tuning`` and ``prefix_tuning`` are PEFT's methods of those names on a
    frozen base (``trainfit.memory.peft_variants``): DoRA is LoRA with ``use_dora=True`` (the ``lora`` section),
    (IA)^3 learned scaling vectors (the ``ia3`` section), prompt tuning a soft prompt of virtual tokens
    prepended to every sequence (the ``prompt_tuning`` section), prefix tuning trained keys and values of virtual
    tokens before every layer's own (``PrefixTuningConfig``, the ``prefix_tuning`` section)."""

    FULL = "full"
    LORA = "lora"
    QLORA = "qlora"
    DORA = "dora"
    IA3 = "ia3"
    PROMPT_TUNING = "prompt_tuning"
    PREFIX_TUNING = "prefix_tuning"


class Dtype(StrEnum):
    """Storage dtype of the model weights."""

    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    INT8 = "int8"
    NF4 = "nf4"


class ComputeDtype(StrEnum):
    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    """The linear layers' GEMMs in fp8 (E4M3 forward, E5M2/E4M3 gradients) with bf16 everywhere else;
    the recipe is ``precision.fp8_recipe``."""
    FP4 = "fp4"
    """The linear layers' GEMMs in fp4 (E2M1 elements with block scales) on Blackwell's block-scaled tensor cores,
    bf16 everywhere else; the recipe is ``precision.fp4_recipe``."""

    @property
    def quantized_gemms(self) -> bool:
        """Whether the linears' GEMMs run below 16 bits (fp8 or fp4), with their operand casts and copies."""
        return self in (ComputeDtype.FP8, ComputeDtype.FP4)


class Fp8Recipe(StrEnum):
    """How fp8 GEMM inputs are scaled.

    * ``delayed``: Transformer Engine's ``DelayedScaling`` (transformer_engine/common/recipe/__init__.py):
      per-tensor scales from an amax history of the previous steps (``amax_history_len`` 1024).
    * ``current``: per-tensor scales from the tensor being cast (TE ``Float8CurrentScaling``; torchao
      float8 ``tensorwise`` dynamic scaling, torchtitan's float8 converter).
    * ``blockwise``: one scale per 1x128 activation tile and 128x128 weight block (TE
      ``Float8BlockScaling``, DeepSeek-V3's recipe; torchao ``rowwise`` is per row).
    * ``mxfp8``: OCP microscaling, one E8M0 (power-of-two, 1 B) scale per 32 consecutive elements along the
      GEMM's reduction dimension, run on Blackwell's block-scaled tensor cores (TE ``MXFP8BlockScaling``; torchao
      ``MXLinear``, torchtitan's ``MXFP8LinearConverter``). Each tensor is quantised row-wise and column-wise
      separately (the 1x32 blocks run along different axes), so there is no transpose of quantised data.
    """

    DELAYED = "delayed"
    CURRENT = "current"
    BLOCKWISE = "blockwise"
    MXFP8 = "mxfp8"


class Fp4Recipe(StrEnum):
    """How fp4 GEMM inputs are scaled (``precision.compute: fp4``).

    * ``nvfp4``: NVIDIA's NVFP4: E2M1 elements, one E4M3 scale per 16 consecutive elements and one fp32
      scale per tensor (TE ``NVFP4BlockScaling``: 16x16 2-D blocks for the weights, random Hadamard transforms on
      the weight-gradient GEMM's inputs, stochastic rounding of the gradients; torchao's NVFP4 training, torchtitan's
      ``NVFP4LinearConverter``).
    """

    NVFP4 = "nvfp4"


class SelectiveCheckpointing(StrEnum):
    """Selective activation checkpointing (``parallel.gradient_checkpointing: selective``).

    * ``op``: torchtitan's per-op SAC (``activation_checkpoint.mode: selective``,
      ``selective_ac_option: op``): each decoder layer is checkpointed with
      ``torch.utils.checkpoint.create_selective_checkpoint_contexts`` and a policy that saves the
      outputs of every other ``aten.mm`` and of the fused attention kernels, and recomputes the rest.
    * ``core_attention``: Megatron-LM ``--recompute-granularity selective`` (default
      ``--recompute-modules core_attn``): only the attention core (QK^T, softmax, dropout, attention
      over V) is recomputed (Korthikanti et al. 2022, §5).
    * ``mla_up_proj``: Megatron-Core ``--recompute-modules mla_up_proj`` (multi-latent attention only, with
      Megatron tensor parallel): the up projections and RoPE re-run in backward, their query / key / value freed
      after the attention forward (NVIDIA/Megatron-LM megatron/core/transformer/multi_latent_attention.py l.77-80,
      l.215-217, l.502-508 @7094270c6fa1dbc6b2e99072171e3a559ca36d0f).
    * ``layernorm_moe_act``: Megatron-Core ``--recompute-modules layernorm moe_act`` (MoE models with Megatron
      tensor parallel): the norms Transformer Engine does not fuse into a linear (a MoE layer's
      pre-MLP norm) and the experts' activation re-run in backward, their outputs (the router's input, the expert
      fc2's input) freed after the forward (NVIDIA/Megatron-LM megatron/core/transformer/transformer_layer.py
      l.381-402, l.616-621, l.680-684, moe/experts.py l.802-805, l.958-970
      @92c8482e6dcd11c3666c61bb8d1f7e8d0730ed13).
    * ``modules``: Megatron-Core ``--recompute-granularity selective --recompute-modules ...`` with the list in
      ``parallel.recompute_modules`` (``RecomputeModule``); ``core_attention``, ``mla_up_proj`` and
      ``layernorm_moe_act`` are the lists [core_attn], [mla_up_proj] and [layernorm, moe_act]
      (``ParallelSection.megatron_recompute_modules``).
    """

    NONE = "none"
    OP = "op"
    CORE_ATTENTION = "core_attention"
    MLA_UP_PROJ = "mla_up_proj"
    LAYERNORM_MOE_ACT = "layernorm_moe_act"
    MODULES = "modules"


class RecomputeModule(StrEnum):
    """One entry of Megatron-Core's ``recompute_modules`` (NVIDIA/Megatron-LM
    megatron/core/transformer/transformer_config.py l.374-389 and l.1112-1127, the allowed set, default
    ["core_attn"] l.1109-1110, @92c8482e6dcd11c3666c61bb8d1f7e8d0730ed13). ``layernorm``, ``moe_act`` and
    ``mla_up_proj`` run under ``CheckpointWithoutOutput`` (the output freed after its consumer, recomputed in
    backward); ``core_attn``, ``mlp``, ``moe`` and ``shared_experts`` under ``tensor_parallel.checkpoint`` (the
    module keeps only its input and re-runs its forward in backward). Where each applies, and what it frees:
    ``plan.ranks.megatron_recompute_freed``; what it re-runs: ``compute.inventory.StepInventory.recompute_modules``."""

    CORE_ATTN = "core_attn"
    MOE_ACT = "moe_act"
    LAYERNORM = "layernorm"
    MLA_UP_PROJ = "mla_up_proj"
    MLP = "mlp"
    MOE = "moe"
    SHARED_EXPERTS = "shared_experts"


class MasterWeights(StrEnum):
    NONE = "none"
    FP32 = "fp32"


class GradDtype(StrEnum):
    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"


class Optimizer(StrEnum):
    ADAMW = "adamw"
    ADAMW_8BIT = "adamw_8bit"
    PAGED_ADAMW = "paged_adamw"
    PAGED_ADAMW_8BIT = "paged_adamw_8bit"
    SGD = "sgd"
    ADAFACTOR = "adafactor"


class StatesDtype(StrEnum):
    FP32 = "fp32"
    BF16 = "bf16"
    SAME_AS_WEIGHTS = "same_as_weights"


class Strategy(StrEnum):
    SINGLE = "single"
    DDP = "ddp"
    ZERO1 = "zero1"
    ZERO2 = "zero2"
    ZERO3 = "zero3"
    FSDP = "fsdp"
    FSDP_GRAD_OP = "fsdp_grad_op"
    HSDP = "hsdp"


FSDP_STRATEGIES = frozenset({Strategy.FSDP, Strategy.FSDP_GRAD_OP, Strategy.HSDP})
"""The strategies torch FSDP runs (FSDP1 / FSDP2: full shard, gradient-and-optimizer shard, hybrid shard)."""

ZERO_STAGES: dict[Strategy, int] = {Strategy.ZERO1: 1, Strategy.ZERO2: 2, Strategy.ZERO3: 3}
"""The DeepSpeed ZeRO stage each ZeRO strategy runs: stage 1 shards the optimizer states, stage 2 the
gradients too, stage 3 the parameters too (Rajbhandari et al. 2020, "ZeRO", §5: P_os, P_os+g, P_os+g+p);
what each divides: ``trainfit.memory.sharding``."""


class FsdpVersion(StrEnum):
    """Which torch FSDP API shards a ``FSDP_STRATEGIES`` run (``parallel.fsdp_version``); the time that differs is
    FSDP2's copies on the compute stream (``compute.training.fsdp2_copy_seconds``).

    * ``fsdp1``: ``FullyShardedDataParallel`` with flat parameters: each unit all-gathers into its flat parameter,
      whose views are the parameters, and reduce-scatters the flat gradient in place (fms-fsdp, Composer /
      llm-foundry, verl ``strategy: fsdp``, accelerate ``fsdp_version: 1``). Megatron-FSDP, whose parameters and
      gradients are views of its gather / reduce buckets, is timed the same way.
    * ``fsdp2``: ``fully_shard`` (DTensor per-parameter sharding): every all-gather's output is copied out into the
      parameters and every reduce-scatter's input copied in from the gradients on the compute stream (torchtitan,
      torchtune since 2024-08, NeMo Automodel / NeMo RL DTensor, verl ``strategy: fsdp2``, accelerate
      ``fsdp_version: 2``). The default: trainfit's trace shards with ``fully_shard`` (``trace.step``) and its
      torchtitan, verl and NeMo RL exports write FSDP2.
    """

    FSDP1 = "fsdp1"
    FSDP2 = "fsdp2"


class Zero1ParamSync(StrEnum):
    """How a ZeRO-1 step hands each rank's updated parameter shard back to the other ranks of its group
    (``parallel.zero1_param_sync``; ``compute.collectives.zero1_param_sync_seconds``).

    * ``all_gather``: one all-gather of the shards over the group (Megatron-Core's distributed optimizer, DeepSpeed
      ZeRO-1, nanotron).
    * ``broadcast_per_rank``: one NCCL broadcast per rank of the group, each of that rank's shard from it to the
      others, issued one after the other and waited for after the step: InternEvo's ``HybridZeroOptimizer``
      (``broadcast_params``: ``for rank in range(self._zero_world_size): dist.broadcast(fp16_param, src=g_rank,
      group=gpc.get_group(ParallelMode.ZERO1), async_op=True)``, then every handle waited, ``overlap=False`` from
      ``step``; InternLM/InternEvo internlm/solver/optimizer/hybrid_zero_optim.py l.622 and l.629-647
      @c18bec9361684189aadf6ffb724f9dfe48288eb0).
    """

    ALL_GATHER = "all_gather"
    BROADCAST_PER_RANK = "broadcast_per_rank"


class Offload(StrEnum):
    NONE = "none"
    OPTIMIZER = "optimizer"
    PARAMS_AND_OPTIMIZER = "params_and_optimizer"


class Attention(StrEnum):
    SDPA = "sdpa"
    FLASH = "flash"
    EAGER = "eager"


class Padding(StrEnum):
    """How a row shorter than ``batch.seq_len`` reaches the model (``batch.padding``).

    * ``none``: every row is ``seq_len`` tokens and no attention mask with zeros is passed (or none at all):
      transformers drops an all-ones mask and SDPA runs ``is_causal``, the causal half of the key blocks.
    * ``mask``: every sample is padded to ``seq_len`` and the batch carries an ``attention_mask`` with zeros after
      each sample's tokens. transformers keeps that mask (``AttentionMaskConverter._ignore_causal_mask_sdpa`` lets
      only an all-ones mask go: v4.49.0 modeling_attn_mask_utils.py l.288-291), builds the 4-D causal-and-padding
      mask and hands it to SDPA with ``is_causal`` False (integrations/sdpa_attention.py l.45-46); PyTorch's flash
      backend takes no ``attn_mask``, so the memory-efficient kernel runs every key block (no causal skip). The padded
      tokens still run every GEMM: the row costs its full ``seq_len``. Memory: the bool mask built once per forward,
      the float copy every SDPA layer saves and grouped-query k/v repeated to every head
      (``memory.attention.sdpa_padding_masked``).
    """

    NONE = "none"
    MASK = "mask"


class Nf4ComputeDtype(StrEnum):
    """The dtype a QLoRA base's dequantised GEMMs run in (``precision.nf4_compute_dtype``).

    bitsandbytes' ``Linear4bit`` casts its input to ``compute_dtype`` and runs ``torch.nn.functional.linear`` over the
    weight dequantised to that dtype (bitsandbytes 0.46.1 bitsandbytes/nn/modules.py l.486-490; MatMul4Bit forward
    and backward, bitsandbytes/autograd/_functions.py l.322 and l.353). Two things set it: transformers'
    ``BitsAndBytesConfig`` takes ``bnb_4bit_compute_dtype`` float32 when it is not given (v4.49.0
    src/transformers/utils/quantization_config.py l.408-409), and on its first call ``Linear4bit.set_compute_type``
    replaces it by the input's dtype whenever that is float32 or bfloat16 (bitsandbytes/nn/modules.py l.442-446): a
    model loaded with ``torch_dtype`` float32 and no autocast feeds fp32 activations, and its 4-bit GEMMs then run
    in fp32 whatever the config says.

    * ``bf16`` / ``fp16``: tensor-core GEMMs at the 16-bit rate (the default; the same time).
    * ``fp32``: fp32 GEMMs, no tensor cores (``torch.backends.cuda.matmul.allow_tf32`` is False by default since
      torch 1.12): ``DeviceRates.fp32_matmul_flops_per_s``. The rest of the model is then fp32 too (the float32
      load): SDPA on fp32 q / k / v (``compute.attention_time.fp32_attention_ratio``), the unquantised head's GEMMs,
      the residual stream's elementwise bytes (``compute.inventory.fp32_stream_extra_forward_bytes``), and in memory
      the unquantised weights and the activations (``plan.resolve.model_dtype``).
    """

    BF16 = "bf16"
    FP16 = "fp16"
    FP32 = "fp32"


class AttentionKernel(StrEnum):
    """Which fused attention kernel runs ``attention: flash`` / ``sdpa`` (its rates: ``compute.attention_time``).

    * ``auto``: not stated; the per-architecture default rates (FlashAttention-2's on Ampere and Hopper).
    * ``fa2``: FlashAttention-2 (the ``flash-attn`` 2.x package; transformers ``flash_attention_2``; PyTorch SDPA's
      flash backend is its code). Ampere (sm80) and later, no Volta or Turing build. On Blackwell it runs its Ampere
      ``mma.sync`` kernels (no tcgen05 path).
    * ``fa3``: FlashAttention-3 (``flash_attn_interface`` from the repository's ``hopper/`` build; transformers
      ``flash_attention_3``): Hopper (sm90) only.
    * ``fa4``: FlashAttention-4 (the CuTe-DSL ``flash_attn.cute`` kernels): Blackwell (sm100).
    * ``cudnn``: cuDNN's fused attention (Transformer Engine's ``FusedAttention``, PyTorch SDPA's cuDNN backend).
    * ``triton_fa``: the Triton FlashAttention of flash-attention's ``flash_attn/flash_attn_triton.py`` (the
      FlashAttention-1 algorithm; llm-foundry ``attn_impl: triton``), built on a December 2022 pre-MLIR Triton:
      Ampere and Hopper only, not a PyTorch SDPA backend.
    * ``fa1``: FlashAttention (version 1) in CUDA, the ``flash_attn_cuda`` extension of the ``flash-attn`` 0.x / 1.x
      packages (``flash_attn_unpadded_*_func``), before FlashAttention-2 (2.0, July 2023): Turing (sm75), Ampere,
      Ada and Hopper; head dim up to 128, and its backward above head dim 64 only on sm80 / sm90 (A100 / H100).
    """

    AUTO = "auto"
    FA2 = "fa2"
    FA3 = "fa3"
    FA4 = "fa4"
    CUDNN = "cudnn"
    TRITON_FA = "triton_fa"
    FA1 = "fa1"


class TaskKind(StrEnum):
    SINGLE_TURN_CODE = "single_turn_code"
    MULTI_TURN_AGENT = "multi_turn_agent"


class LayerKind(StrEnum):
    FULL_ATTENTION = "full_attention"
    LINEAR_ATTENTION = "linear_attention"


class MlpKind(StrEnum):
    GATED = "gated"
    """SwiGLU / GeGLU: gate, up and down projections."""


class Phase(StrEnum):
    """Phases of one training step, in order. RL methods name what runs."""

    LOAD = "load"
    FORWARD = "forward"
    BACKWARD = "backward"
    OPTIMIZER_STEP = "optimizer_step"
    ROLLOUT = "rollout"
    REF_LOGPROB = "ref_logprob"
    OLD_LOGPROB = "old_logprob"
    REWARD = "reward"
    CRITIC_VALUE = "critic_value"
    ACTOR_FORWARD = "actor_forward"
    ACTOR_BACKWARD = "actor_backward"
    ACTOR_OPTIMIZER_STEP = "actor_optimizer_step"
    CRITIC_FORWARD = "critic_forward"
    CRITIC_BACKWARD = "critic_backward"
    CRITIC_OPTIMIZER_STEP = "critic_optimizer_step"
    WEIGHT_SYNC = "weight_sync"


class OptimizerImpl(StrEnum):
    """How torch's AdamW runs its step (decides the step's temporaries).

    ``apex_distributed``: Apex's ``DistributedFusedAdam`` (NeMo 1.0's ``optim.name: distributed_fused_adam``), read
    with ``parallel.tensor_parallel_impl: megatron``. Its step is one fused multi-tensor kernel over the rank's shard
    (priced as ``fused``); it allocates its moments in the optimizer ``dtype`` (``precision.optimizer_states``) and an
    fp32 parameter shard only with ``store_params``, which NeMo switches off when that dtype is the model's (NVIDIA/apex
    apex/contrib/optimizers/distributed_fused_adam.py l.310-311, l.450-478 @f3f049246e5bdf6fdddf251ebe6b65dd4ca1ee29;
    NVIDIA/NeMo nemo/collections/nlp/models/language_modeling/megatron_base_model.py l.790-812
    @8e3d65dcfe3504689bfc5b6e67d502780aacad41): ``plan.terms.zero_master_states``."""

    FUSED = "fused"
    FOREACH = "foreach"
    FOR_LOOP = "for_loop"
    APEX_DISTRIBUTED = "apex_distributed"


class LoraDropoutPosition(StrEnum):
    """Where LoRA dropout acts: on the adapter's input (PEFT: ``lora_B(lora_A(dropout(x)))``) or on its output
    (NeMo Automodel's default ``dropout_position="post"``: ``dropout(lora_B(lora_A(x) * scale))``)."""

    PRE = "pre"
    POST = "post"


class ExpertAdapters(StrEnum):
    """How the routed experts' LoRA adapters run (``lora.expert_adapters``; step time only)."""

    MERGED = "merged"
    """PEFT's fused-experts wrapper: ``B·A`` added into every expert's weight in each forward."""
    GROUPED = "grouped"
    """Unmerged, as ``torch._grouped_mm`` of their own on the routed rows (x·Aᵀ·Bᵀ added to the base output): prime-rl's
    ``MultiLoRAGroupedExperts`` (``compute.inventory.GROUPED_EXPERT_LORA_BYTES``)."""


class ResumeKind(StrEnum):
    """What a run resumes from (``checkpoint.resume``): sizes the kept checkpoints (``preflight.checkpoint``)."""

    FULL = "full"
    """Weights, optimizer state, scheduler, RNG and data position: what an exact resume needs."""
    ADAPTER_ONLY = "adapter_only"
    """The adapter alone (LoRA/QLoRA/DoRA...): for deployment; training cannot resume exactly from it."""


class AdapterDtype(StrEnum):
    """Dtype of LoRA A/B matrices."""

    FP32 = "fp32"
    BF16 = "bf16"


class RoleWeightsDtype(StrEnum):
    """Dtype a frozen role model's weights are loaded in (``roles.reward_model_dtype``).

    A role model loaded with ``from_pretrained`` and no ``torch_dtype`` is float32 under transformers 4.x (TRL
    0.14's GRPOTrainer loads a reward model given by id with ``args.model_init_kwargs``, whose ``torch_dtype`` it
    forwards as given: huggingface/trl trl/trainer/grpo_trainer.py l.170-178, l.218-222
    @49711efab9e0cc3762d3228c9fd5a8064d489503; the same at f2cd57710ae345ea6428ae95363267fcf38a3dc8 l.513-520).
    Its GEMMs then run in fp32 unless the trainer autocasts its forward (``precision.autocast``).
    """

    BF16 = "bf16"
    FP16 = "fp16"
    FP32 = "fp32"

    @property
    def bytes(self) -> int:
        return 4 if self is RoleWeightsDtype.FP32 else 2


class KbitPrepare(StrEnum):
    """What cast a QLoRA run's non-4-bit parameters after loading (``lora.prepare_kbit``; ``compute.kbit_upcast``,
    ``memory.kbit_upcast``). ``none``: nothing, they stay in the compute dtype. ``peft``: PEFT's
    ``prepare_model_for_kbit_training`` alone: every non-4-bit parameter fp32 (peft 0.21.2 wheel peft/utils/other.py
    l.204-209). ``trl``: that, then TRL's ``peft_module_casting_to_bf16`` after ``get_peft_model`` under bf16 on a
    non-sharded 4-bit model (trl 0.12.1 wheel trl/trainer/sft_trainer.py l.286-292, trl/trainer/utils.py l.842-849;
    trl 0.13.0 sft_trainer.py l.227-233, utils.py l.872-879): modules named ``*norm*`` stay fp32, the fp32 modules
    named lm_head / embed_tokens / wte / wpe (PEFT's modules_to_save copies too) go back to bf16."""

    NONE = "none"
    PEFT = "peft"
    TRL = "trl"


class QloraDequant(StrEnum):
    """How a QLoRA base's 4-bit weights reach the GEMMs (``lora.dequant``). ``bitsandbytes``: NF4, one dequantise
    kernel per use (forward, recompute, backward's dX). ``autogptq_torch``: a GPTQ int4 checkpoint through AutoGPTQ's
    ``qlinear_cuda_old`` / ``qlinear_cuda`` QuantLinear with exllama disabled, which for 128 or more input rows unpacks
    the weight with PyTorch ops and multiplies with ``torch.matmul``, autograd keeping the 16-bit weight for the
    backward (``compute.inventory.GPTQ_TORCH_DEQUANT_*``). ``torchao``: torchao's ``NF4Tensor`` (torchtune's QLoRA),
    NF4 dequantised per use as bitsandbytes does, but by PyTorch ops a compiler traces and fuses
    (``compute.inventory.Adapter.nf4_torch_ops``)."""

    BITSANDBYTES = "bitsandbytes"
    AUTOGPTQ_TORCH = "autogptq_torch"
    TORCHAO = "torchao"


class RolloutEngine(StrEnum):
    VLLM = "vllm"
    HF = "hf"
    """transformers ``generate`` on the training model (TRL without vLLM)."""
    DEEPSPEED_HYBRID = "deepspeed_hybrid"
    """DeepSpeed's Hybrid Engine (DeepSpeed-Chat): ``generate`` on the ZeRO-trained actor swapped to
    DeepSpeed-Inference kernels, a static batch of ``max_num_seqs`` sequences per engine (per-device generation
    batch x ``tensor_parallel``, the ``inference_tp_size``); colocated only (``compute.hybrid_engine``)."""
    SGLANG = "sglang"
    """SGLang (slime, miles, AReaL, verl ``rollout.name: sglang``): a serving engine with its own weights and KV pool
    like vLLM, planned with vLLM's memory and generation mechanisms. What differs is modelled where it differs: its
    memory fraction (``mem_fraction_static``) holds the weights and the KV pool only
    (``rollout.vllm.EngineConfig.static_fraction``), the weight load takes one CUDA-IPC handle per tensor
    (``compute.sync``), and ``release_memory_occupation`` frees what it releases instead of vLLM's level-1 copy to
    host memory (``compute.sleep_wake``)."""


SERVING_ENGINES = frozenset({RolloutEngine.VLLM, RolloutEngine.SGLANG})
"""Engines that hold their own copy of the weights and a KV pool (``rollout.gpu_memory_utilization``), loaded by a
weight sync; hf and deepspeed_hybrid generate on the trainer's weights."""


class RolloutQuantization(StrEnum):
    """The rollout engine's weight format (``rollout.quantization``)."""

    NONE = "none"
    """The model dtype (bf16), as the trainer sends it."""
    FP8 = "fp8"
    """vLLM ``quantization: fp8`` with DeepSeek-style 128x128 weight blocks and dynamic 1x128 activation scales, as
    NeMo RL's ``policy.generation.vllm_cfg.precision: fp8`` runs it (``trainfit.rollout.quantization``)."""


class Placement(StrEnum):
    COLOCATE = "colocate"
    """All roles time-share every GPU."""
    SPLIT = "split"
    """Named GPU groups: ``rollout.gpus`` for the engine, the rest train."""


class RefPlacement(StrEnum):
    GPU = "gpu"
    CPU = "cpu"
    NONE = "none"
    LORA_DISABLED = "lora_disabled"
    """The policy with its adapter disabled (PEFT): no extra weights."""
    PRECOMPUTED = "precomputed"
    """DPO: reference log-probs computed once before training."""
    HOST_SWAP = "host_swap"
    """NeMo RL: the reference's weights wait in pinned host memory and are copied into the policy's own parameters
    for the reference pass, the policy's saved to the host and copied back after it (``compute.reference_swap``):
    no GPU memory, three PCIe copies of the rank's weights per pass. ``cpu`` is a separate reference model whose
    parameters are offloaded (verl ``ref.fsdp_config.param_offload``, OpenRLHF ``--ref.offload``)."""


class WeightSync(StrEnum):
    BUCKETED = "bucketed"
    PER_PARAMETER = "per_parameter"
    FULL_GATHER = "full_gather"
    """Whole model gathered (PEFT under ZeRO-3/FSDP merges the adapter into a full copy)."""


class WeightTransport(StrEnum):
    """How the weights travel at a refit (``rollout.weight_transport``), where a framework offers more than its default
    path (``compute.sync``).

    * ``framework``: the card's framework's own path (``compute.sync.framework_sync_mechanism``).
    * ``nccl_reshard``: NeMo RL's shard-to-shard refit (``policy.generation.refit_transport: nccl_reshard``): each
      training rank sends only its local shard of the FFN weights and each vLLM rank receives exactly its own; the
      rest rides the packed broadcast (``compute.sync.nccl_reshard_seconds``). Split placement, Megatron trainer,
      vLLM engine.
    * ``checkpoint_engine``: MoonshotAI checkpoint-engine's Broadcast update: the checkpoint is held in host memory
      across the engine GPUs, copied to the GPU in buckets, broadcast to every engine rank and loaded from a CUDA-IPC
      buffer (``compute.sync.checkpoint_engine_seconds``). vLLM engine.
    """

    FRAMEWORK = "framework"
    NCCL_RESHARD = "nccl_reshard"
    CHECKPOINT_ENGINE = "checkpoint_engine"


class ResponseShape(StrEnum):
    """Distribution of RL response lengths between 1 and the maximum (``rollout.response_len``)
    (``compute.response_lengths``): ``shifted_exponential`` is the truncated exponential above a floor read from
    published per-step shortest responses, an option (its null result as a default is in that module)."""

    EXPONENTIAL = "exponential"
    SHIFTED_EXPONENTIAL = "shifted_exponential"
    UNIFORM = "uniform"
    FIXED = "fixed"


class LengthProfileName(StrEnum):
    """The task's response-length profile, read when a card gives no ``rollout.response_len_mean``
    (``compute.response_lengths``): ``auto`` picks by the model name alone (``profile_for``)."""

    AUTO = "auto"
    SHORT_ANSWER = "short_answer"
    COT = "cot"
    LONG_COT = "long_cot"
    TOOL_INTEGRATED = "tool_integrated"


class VllmEngineGeneration(StrEnum):
    """vLLM's engine: ``v0`` (``LLMEngine`` up to vLLM 0.7, or a 0.8-0.10 engine that falls back to it) or ``v1``
    (the ``EngineCore`` / frontend split, the default from vLLM 0.8). ``compute.decode_step``: host work per step."""

    V0 = "v0"
    V1 = "v1"


class EngineOutputs(StrEnum):
    """What a vLLM V1 frontend hands the caller every decode step: ``final_only`` (``LLM.generate``: nothing until a
    request finishes) or ``cumulative`` (``AsyncLLM.generate``'s default: every step, a ``RequestOutput`` holding all
    tokens generated so far, the fast detokenizer's own list rather than a copy). ``compute.decode_step``."""

    FINAL_ONLY = "final_only"
    CUMULATIVE = "cumulative"


class AsyncMode(StrEnum):
    """``one_step_off``: generation of step n+1 beside the training of step n; ``fully_async``: a
    separate rollout pool streams samples to the trainer (bounded staleness). Either way the step is the
    slower of the two sides."""

    NONE = "none"
    ONE_STEP_OFF = "one_step_off"
    FULLY_ASYNC = "fully_async"


class ContextParallelKind(StrEnum):
    """Ring attention (Megatron CP, torch context_parallel: KV blocks passed around the ring) or
    DeepSpeed-Ulysses (all-to-all from sequence shards to head shards and back; verl, OpenRLHF)."""

    RING = "ring"
    ULYSSES = "ulysses"


class ThdRopeLoop(StrEnum):
    """Which per-sample loop Megatron-Core's unfused thd RoPE runs (``_apply_rotary_pos_emb_thd``, legacy max-length
    ``freqs``), by release (``spec.card.thd_rope_loop_of``; counts in ``compute.inventory.THD_ROPE_LOOP_COUNTS``).

    * ``cat``: core_v0.10.0 to core_v0.14.x: one ``.tolist()``, each sample's rotated slice, one ``torch.cat`` at the
      end (NVIDIA/Megatron-LM megatron/core/models/common/embeddings/rope_utils.py l.139-179 @core_v0.13.0
      c550cf6c41c31cd3ec72e05c25ea0c979f2b6631).
    * ``copy``: core_v0.19.0 and Megatron-LM main: ``.tolist()`` and ``int(cu_seqlens[-1].item())``, each sample's
      slice ``copy_``-ed into a preallocated output (l.189-268 @61f31145dfb4cfaa7d285df12aa9abffb22ff485).
    """

    CAT = "cat"
    COPY = "copy"


class TensorParallelImpl(StrEnum):
    """Whose tensor/sequence-parallel layers and loss a model-parallel run uses (``parallel.tensor_parallel_impl``).

    * ``dtensor``: torch's DTensor plan (torchtitan: ``ColwiseParallel``/``RowwiseParallel``, ``SequenceParallel``,
      ``loss_parallel``), traced exactly by ``trainfit.trace.tensor_parallel``.
    * ``megatron``: Megatron-Core (Megatron-LM, NeMo, Megatron-Bridge): ``ColumnParallelLinear``/
      ``RowParallelLinear`` save the sequence shard of their input under sequence parallel, the
      ``VocabParallelEmbedding`` keeps the gradient of its own rows only, and the loss is
      ``vocab_parallel_cross_entropy`` (in place on one fp32 copy of the local logits).
    * ``nanotron``: nanotron's ``TensorParallelColumnLinear`` / ``TensorParallelRowLinear``: in memory as Megatron-Core's
      linears (under ``tp_mode`` REDUCE_SCATTER with ``tp_recompute_allgather``, its default, the column-parallel
      linear saves its input's sequence shard and gathers it again in backward: huggingface/nanotron
      src/nanotron/parallel/tensor_parallel/functional.py l.213-216, src/nanotron/config/parallelism_config.py l.37),
      a ``TensorParallelEmbedding`` that masks the other ranks' ids (its gradient is its own rows: tensor_parallel/nn.py
      l.277-299) and ``_ShardedCrossEntropy`` (functional.py l.31-107: Megatron's loss, on the fp32 copy of the local
      logits with the max subtracted out of place: ``memory.logits.nanotron_sharded_ce_bytes``), all
      @c252843039cc167ff8d6894b87172af4637eb14b; its gated MLP is per-op (``GLUActivation``, not Megatron's fused
      SwiGLU) and it has no Transformer Engine, so its time terms are the per-op model's (as ``dtensor``).
    """

    DTENSOR = "dtensor"
    MEGATRON = "megatron"
    NANOTRON = "nanotron"


class ModelParallelKernels(StrEnum):
    """The kernels a tensor / pipeline-parallel run without torch.compile times on (``parallel.model_parallel_kernels``,
    ``plan.time.fused_kernels``)."""

    FUSED = "fused"
    """Transformer Engine's fused norm + linear, RoPE, SwiGLU and cross-entropy (Megatron-Core and stacks built on Transformer
    Engine or other fused kernels): the plan's compile factors. The default."""
    EAGER = "eager"
    """The model's own modules launched op by op under torch's DTensor plan: torchtitan without torch.compile
    (parallelize_module over the model's nn.Linear layers; nn.RMSNorm / F.silu / the RoPE ops run as eager PyTorch)."""


class PipelineSchedule(StrEnum):
    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved"


class Launcher(StrEnum):
    """The process launcher of the training ranks (``loop.launcher``), which sets each rank's ``OMP_NUM_THREADS``:
    the threads of its host-side torch ops (``plan.time.host_one_thread_per_rank``)."""

    TORCHRUN = "torchrun"
    """torchrun / ``torch.distributed.run`` (and the launchers built on it): 1 with more than one process a node."""
    RAY = "ray"
    """Ray actors: the actor's CPU allotment, 1 when none is given, however many share the node."""
    SPAWN = "spawn"
    """``torch.multiprocessing.spawn`` from the script itself: none set, torch's default pool (the host's cores)."""


class KeptOutputDtype(StrEnum):
    """The dtype of the logits a loop keeps through backward (``loop.keeps_output_through_backward``)."""

    COMPUTE = "compute"
    """The logits as lm_head returns them (the compute dtype): ``out = model(...); out.loss.backward()``."""
    FP32 = "fp32"
    """An fp32 copy made before the loss and kept in place of them (prime-rl's ``forward`` returns
    ``cast_float_and_contiguous(out)``, models/layers/lm_head.py l.21-32 @d8f290ef0358a804f1912bd29ea1b37cc56894b4)."""


class LogprobEntropy(StrEnum):
    """Which no-grad log-prob passes also take the entropy of every token's logits (verl's FSDP actor,
    torch.compile'd ``entropy_from_logits`` on the remove-padding path, volcengine/verl verl/workers/actor/dp_actor.py
    l.57-60; ``compute.inventory.VERL_ENTROPY_COMPILED_BYTES``)."""

    NONE = "none"
    OLD_POLICY = "old_policy"
    """The old policy's pass only: ``compute_log_prob(calculate_entropy=True)`` for the actor, False for the reference
    (verl/workers/fsdp_workers.py l.606 and l.640 @e0d035cd4a6a5c29835516a58d78710a28e73b18; from
    25b0f2262, 2025-04-17, #1100)."""
    EVERY_PASS = "every_pass"
    """The old policy's and the reference's: before #1100 ``_forward_micro_batch`` took the entropy in every call and
    ``compute_log_prob`` dropped it (dp_actor.py l.120 and l.157, ``compute_log_prob`` l.171-227 (l.217); both roles
    a ``DataParallelPPOActor``, fsdp_workers.py l.405, l.425 @8e7780f5ee2021cc06c248b7cf87cf31200a38fd, v0.3.0.post0)."""


class LossKernel(StrEnum):
    """Which fused/chunked log-prob kernel ``loss.chunked`` means; ``flash_attn`` is the one kernel read with
    ``loss.chunked: false`` (full logits, fused cross-entropy)."""

    LIGER = "liger"
    """Liger's fused linear cross-entropy: token chunks of ceil(b·s / ceil(V/h)) rows."""
    TRL = "trl"
    """TRL's fused lm_head (``add_fused_lm_head``; kernels/chunked_logprob.py): [4096 x 32768] tiles."""
    TORCHTUNE = "torchtune"
    """torchtune's ``CEWithChunkedOutputLoss``: the decoder returns every output chunk's logits at once, the loss
    runs per chunk (``trainfit.memory.logits.torchtune_chunked_ce_bytes``)."""
    PRIME_RL = "prime_rl"
    """prime-rl's fused LM head (``FusedOutputLinear`` / ``_ChunkedLogProbEntropyFn``, PrimeIntellect-ai/prime-rl
    src/prime_rl/trainer/models/layers/lm_head.py @d8f290ef0358a804f1912bd29ea1b37cc56894b4): log-probs and entropy
    over vocabulary chunks of 2048 columns, all tokens at once, eager fp32 maths, the logits recomputed in backward
    (``trainfit.compute.inventory.prime_rl_head``; memory ``trainfit.memory.logits.prime_rl_head_bytes``)."""
    UNSLOTH = "unsloth"
    """Unsloth's efficient GRPO loss (``preset: unsloth``, method grpo): the model returns the hidden states of the
    completion (``UNSLOTH_RETURN_HIDDEN_STATES``), and ``UnslothEfficientGRPO`` computes the policy's and the
    reference's logits one chunk of sequences at a time (``n_chunks`` -1: one sequence a chunk), the chunk's gradient
    inside its forward, under torch.compile (unslothai/unsloth-zoo unsloth_zoo/rl_replacements.py l.100-236
    @a5c5bcee93f9a094d6ebe99568ffd91532c331e8; wired by unslothai/unsloth unsloth/models/rl_replacements.py l.205-285
    @0a646e40f521c6951893c1936ee19e218430dcd9, release 2025.3.8; absent at 2025.2.4, 027b5100). Memory:
    ``trainfit.memory.logits.unsloth_efficient_grpo_bytes``."""
    FLASH_ATTN = "flash_attn"
    """flash-attn's ``CrossEntropyLoss`` (llm-foundry's default ``loss_fn: fused_crossentropy``) over the full
    compute-dtype logits: no fp32 copy, an fp32 log-sum-exp per row; the gradient goes to a new buffer, or into
    the logits with ``loss.inplace_backward`` (``trainfit.memory.logits.flash_attn_ce_bytes``). Not chunked."""
    TE = "te"
    """Transformer Engine's ``parallel_cross_entropy``, which Megatron-Core calls for ``cross_entropy_loss_fusion``
    with ``cross_entropy_fusion_impl 'te'`` (Megatron-Bridge's performance recipes), over the rank's compute-dtype
    vocabulary shard: per-row fp32 statistics only, the gradient written into the logits in place
    (``trainfit.memory.logits.te_parallel_ce_bytes``). Not chunked; tensor_parallel_impl megatron only. Memory only:
    the step time keeps Megatron-Core's vocab-parallel loss."""


class MoeExperts(StrEnum):
    """How the routed experts of a MoE layer run (``compute.expert_loop``)."""

    GROUPED = "grouped"
    """One grouped GEMM per projection over all local experts: transformers v5 ``grouped_mm``, Megatron-Core
    ``TEGroupedMLP``."""
    GROUPED_STREAMS = "grouped_streams"
    """One grouped call per projection that launches one cuBLAS GEMM per local expert over four streams, outside
    Megatron-Core: ``grouped_gemm.ops.gmm`` (fanshiqing/grouped_gemm v1.1.4 / nv-grouped-gemm 1.1.4.post8, NeMo
    Automodel's ``experts: gmm``), which on any GPU but an SM80 build runs ``CublasGroupedGemm`` /
    ``CublasGroupedGemmVariableK`` (``csrc/grouped_gemm.cu`` l.191-312, l.399-401
    @172fada89fa7364fe5d026b3a0dfab58b591ffdd and @15721c6f478092f58ba0767fb0f3642c4f493748), forward, input and
    weight gradient alike: priced as TE's multi-stream loop (``compute.gemm.multi_stream_grouped_gemm_seconds``)."""
    GROUPED_PADDED = "grouped_padded"
    """One ``torch._grouped_mm`` per projection behind torchtitan's ``expert_parallel`` wrapper, which even on one
    device appends a zero row, gathers the routed rows into a buffer padded to a multiple of 8 rows per expert and
    scatters the output back into a new one (pytorch/torchtitan torchtitan/distributed/expert_parallel.py l.297-363
    @a1fdd7e43694bbfeff5d6ad8ac738c067bb90d41): torchtitan's ``GroupedExperts`` and prime-rl's full-parameter MoE
    (``compute.moe_time.expert_padding_work``)."""
    LOOP = "loop"
    """transformers < 5's sparse MoE block (4.53 on): a Python loop over the experts that receive tokens, each an
    ``nn.Module`` of three linears run on its own rows (a host sync per expert)."""
    LOOP_ALL = "loop_all"
    """transformers 4.51-4.52's sparse MoE block: the same loop over every expert by its Python index, without the
    hit test (one host sync per expert, none per layer; ``compute.expert_loop``)."""
    LOOP_V5 = "loop_v5"
    """transformers v5's eager experts (``set_experts_implementation("eager")``): the same loop over the hit experts,
    each a slice of the two stacked expert weights (five host syncs per expert; where the stacks get a gradient, a
    zero gradient of the whole stack per expert, ``compute.expert_loop``)."""

    @property
    def is_loop(self) -> bool:
        """Either transformers < 5 loop (one module of linears per expert)."""
        return self in (MoeExperts.LOOP, MoeExperts.LOOP_ALL)

    @property
    def per_expert(self) -> bool:
        """Any per-expert Python loop: transformers < 5's or v5's eager experts."""
        return self.is_loop or self is MoeExperts.LOOP_V5


class MoeExpertMlp(StrEnum):
    """How Megatron-Core's ``TEGroupedMLP`` runs its routed experts' MLP (``compute.inventory``
    ``QUICK_GEGLU_FORWARD_SYNCS``, ``compute.moe_time.megatron_expert_elementwise``)."""

    UNFUSED = "unfused"
    """Its own forward: the fc1 grouped linear, ``bias_act_func`` (gpt-oss: the eager clamp and the quick-GEGLU) and
    the fc2 grouped linear, then ``_apply_bias``'s per-expert loop for expert biases (NVIDIA/Megatron-LM
    megatron/core/transformer/moe/experts.py @9539a12e1b04a68423f57b3eb41d6125161dca24, core_v0.17.0)."""
    TE_OPS = "te_ops"
    """``use_transformer_engine_op_fuser``: the forward returns early through ``_fused_forward``, one Transformer
    Engine ``te.pytorch.ops.Sequential`` of ``GroupedLinear``, the scaled GLU (``ScaledSwiGLU`` /
    ``ScaledClampedQGeGLU``) and ``GroupedLinear`` (its bias inside), so neither ``bias_act_func`` nor ``_apply_bias``
    runs (experts.py l.268-273, l.380-506 and l.648-654 @ba7b5ebce12af60627a80985792a1449ce45f46c, core_v0.18.0)."""


class MoeDispatcher(StrEnum):
    """How the expert-parallel group moves routed tokens (``compute.moe_dispatch``)."""

    ALLTOALL = "alltoall"
    """Megatron-Core ``moe_token_dispatcher_type: alltoall``: one row per routed expert through NCCL all-to-all."""
    DEEPEP = "deepep"
    """DeepEP / HybridEP (Megatron-Core ``flex`` with ``moe_flex_dispatcher_backend`` deepep or hybridep): one row per
    destination node over the network, forwarded over NVLink once per destination GPU."""
    ALLGATHER = "allgather"
    """Megatron-Core ``moe_token_dispatcher_type: allgather`` (its default): every rank's tokens all-gathered over
    the expert tensor x expert parallel group, each rank keeps its experts' rows, the output reduce-scattered back."""


class MoeLaunch(StrEnum):
    """How Megatron-Core's router and token dispatcher reach the GPU, for their host launch cost
    (``compute.moe_time`` "Eager router and dispatcher launches")."""

    FUSED = "fused"
    """Priced like the model's other fused elementwise work (the plan's compile kernel factor): a recipe that captures
    the router and the dispatcher's preprocessing in CUDA graphs (Megatron-Core ``cuda_graph_scope`` ``moe_router``,
    ``moe_preprocess``) or fuses the router (``moe_router_fusion``), as Megatron-Bridge's performance recipes do."""
    EAGER = "eager"
    """Every router and dispatcher op launched one by one from Python: ``cuda_graph_impl`` "none" with
    ``moe_router_fusion`` False (Megatron-Bridge's gpt-oss H100 library recipes)."""


class MoeLoadBalancing(StrEnum):
    """Megatron-Core's ``moe_router_load_balancing_type`` with a non-zero ``moe_aux_loss_coeff``: which load-balancing
    loss the router computes in every training forward (``compute.moe_time`` "Router aux-loss ops")."""

    NONE = "none"
    """No load-balancing loss (or a zero coefficient): the router runs its top-k routing only."""
    AUX_LOSS = "aux_loss"
    """The switch-transformer loss over the micro-batch (``switch_load_balancing_loss_func``), Megatron-Bridge's
    Qwen3-MoE providers."""
    SEQ_AUX_LOSS = "seq_aux_loss"
    """The per-sequence loss (DeepSeek-V3's), Megatron-Bridge's DeepSeek providers."""


class MoeRouting(StrEnum):
    """Which experts a token's router picks, for the dispatch volume (``compute.moe_dispatch``)."""

    UNIFORM = "uniform"
    """The ``k`` experts spread as if drawn uniformly (within the chosen groups under group-limited routing), for
    the nodes and GPUs a dispatch reaches: a trained router's pick, or Megatron-Core
    ``moe_router_force_load_balancing`` (random logits, router.py). How unevenly a trained router loads the ranks is
    ``MoeRouterLoad``."""
    CONSECUTIVE = "consecutive"
    """Token ``i`` takes experts ``i·k .. i·k + k − 1`` (mod ``E``): NeMo Automodel's ``FakeBalancedGate``
    (nemo_automodel/components/moe/layers.py @01926a5c443b7979463c73341bf64adf79de638e), used by its benchmarks."""


class MoeRouterLoad(StrEnum):
    """How evenly a trained router's tokens land on the expert-parallel ranks, for the time of the routed experts and
    their all-to-all (``compute.moe_time.busiest_rank_load_factor``)."""

    TRAINED = "trained"
    """The model's own router on real tokens (dropless): every EP rank waits at each layer's all-to-all for the rank
    whose local experts drew the most tokens."""
    BALANCED = "balanced"
    """Routing balanced by construction: Megatron-Core ``moe_router_force_load_balancing``, NeMo Automodel's
    ``FakeBalancedGate``, or token dropping at capacity factor 1 padded to capacity: every rank routes the mean."""


class Stack(StrEnum):
    """The software stack a plan's step time stands for (``plan.time.stack_of``), shown on every ``fit`` row so
    that rows timed on different kernels are not ranked as if they ran the same code."""

    EAGER = "eager"
    """transformers / PEFT modules launched op by op (no torch.compile, no Transformer Engine)."""
    COMPILE = "compile"
    """torch.compile (``parallel.compile``): fused elementwise kernels, fewer launches."""
    UNSLOTH = "unsloth"
    """Unsloth's patched decoder layers (``parallel.unsloth_layers``): Triton kernels and fused LoRA functions, launched
    eagerly (``compute.unsloth_layers``)."""
    MEGATRON = "megatron"
    """Megatron-Core's layers on Transformer Engine's fused kernels (``parallel.tensor_parallel_impl: megatron``), or
    a tensor / pipeline-parallel run, which the time model times on those kernels (``plan.time.fused_kernels``)."""


class Interconnect(StrEnum):
    """The link between the GPUs of one node (``hardware.interconnect``): it sets NCCL's intra-node bus bandwidth
    and transport (``compute.rates.link_rates``). Unset: the GPU catalog's link (``compute.rates.catalog_link``).
    The network between nodes is ``hardware.nic_gbps_per_gpu`` / ``nic_gbps_per_node``, not this field."""

    NVLINK = "nvlink"
    """NVLink: an NVSwitch, the NVL72 NVLink Switch fabric, a full mesh, or bridges (pairs on the bridged PCIe cards);
    also AMD Instinct's xGMI (Infinity Fabric) mesh, which the catalog keeps in its NVLink fields. The catalog's NVLink
    rate. ``nvswitch`` / ``nvlink-switch`` / ``xgmi`` / ``infinity-fabric`` are refused saying to state nvlink."""
    PCIE = "pcie"
    """PCIe with GPU peer-to-peer: NCCL's P2P transport over the slots."""
    PCIE_NO_P2P = "pcie_no_p2p"
    """PCIe without peer-to-peer (GeForce RTX 4090 / 5090, a VM or host that disables it, ``NCCL_P2P_DISABLE=1``):
    NCCL's SHM transport, every byte staged through pinned host memory."""
