"""The run card: one YAML/JSON file that is both the planner's input and the experiment record.

Every section has defaults, so a card gives only what differs. Unknown keys and bad values
are refused with one line naming the key and the allowed values (``CardError``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from trainfit.errors import CardError
from trainfit.spec.enums import (
    FSDP_STRATEGIES,
    KbitPrepare,
    AdapterDtype,
    AsyncMode,
    Attention,
    AttentionKernel,
    ComputeDtype,
    ContextParallelKind,
    Dtype,
    EngineOutputs,
    ExpertAdapters,
    Fp4Recipe,
    Fp8Recipe,
    FsdpVersion,
    Interconnect,
    GradDtype,
    KeptOutputDtype,
    Launcher,
    LengthProfileName,
    LogprobEntropy,
    LoraDropoutPosition,
    LossKernel,
    MasterWeights,
    Method,
    MoeDispatcher,
    MoeExperts,
    MoeExpertMlp,
    ModelParallelKernels,
    MoeLaunch,
    MoeLoadBalancing,
    MoeRouterLoad,
    MoeRouting,
    Nf4ComputeDtype,
    Offload,
    Optimizer,
    OptimizerImpl,
    Padding,
    PipelineSchedule,
    Placement,
    QloraDequant,
    RecomputeModule,
    RefPlacement,
    RoleWeightsDtype,
    ResponseShape,
    ResumeKind,
    RolloutEngine,
    RolloutQuantization,
    Scope,
    SelectiveCheckpointing,
    StatesDtype,
    Strategy,
    TaskKind,
    TensorParallelImpl,
    ThdRopeLoop,
    VllmEngineGeneration,
    WeightSync,
    WeightTransport,
    Zero1ParamSync,
)


# Field defaults are made by plain functions: for each default_factory pydantic reads the factory's signature (does
# it take the validated data?). For the builtin ``list`` that parses its text signature with ``tokenize``, compiling
# tokenize's regular expressions; for a section class it builds the model's own signature from all its fields. The
# 19 factories cost a cold ``trainfit plan`` 1.4% of its CPU (valgrind instruction count); the values are the same.


def _empty_list() -> list:
    """``list()``: a new empty list."""
    return []


def _fresh(section: type[BaseModel]) -> Callable[[], BaseModel]:
    """A factory of ``section()``, the section with all its defaults."""

    def make() -> BaseModel:
        return section()

    return make


# Cold-start null results (valgrind instruction counts of a cold ``trainfit plan --json``, bytecode cached, 1,669M at
# the time): ``defer_build=True`` on the sections makes it 1,679M (+0.6%: their schemas are built inside RunCard's at
# the first validation anyway, which every plan runs); pydantic's plugin discovery (an entry-point scan of every
# installed distribution, 82 in the test environment) is 19M (1.2%), left on since ``PYDANTIC_DISABLE_PLUGINS``
# would switch off a user's plugins too.
def _is_number(annotation: Any) -> bool:
    """Whether a field's type is a number (``int``, ``float``, optional, or a tuple / list of them) that takes no
    boolean: pydantic's lax mode reads ``true`` as 1 and ``false`` as 0 in such fields."""
    args = get_args(annotation)
    if get_origin(annotation) in (tuple, list):
        return any(_is_number(a) for a in args if a is not Ellipsis)
    if args and get_origin(annotation) in (Union, type(int | None)):
        return bool not in args and any(_is_number(a) for a in args)
    return annotation in (int, float)


_NUMBER_FIELDS: dict[type, frozenset[str]] = {}
"""Each section class's number fields (``_is_number``), found at its first validation."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_boolean_numbers(cls, data: Any) -> Any:
        """Refuse a boolean given for a number field (``hardware.nic_gbps_per_node: true`` would read as 1 Gb/s),
        or inside a list of numbers; ``format_validation_error`` names the field."""
        if not isinstance(data, dict):
            return data
        numbers = _NUMBER_FIELDS.get(cls)
        if numbers is None:
            numbers = _NUMBER_FIELDS[cls] = frozenset(n for n, f in cls.model_fields.items() if _is_number(f.annotation))
        for name, value in data.items():
            if name in numbers and (_is_boolean(value) or isinstance(value, (list, tuple))
                                    and any(_is_boolean(x) for x in value)):
                raise PydanticCustomError("boolean_number", "a boolean given for a number",
                                          {"field": name, "value": value})
        return data


def _is_boolean(value: Any) -> bool:
    """A Python or NumPy boolean (``numpy.bool``, which is no ``bool`` subclass and which pydantic reads as 1 or 0 for a
    number field: ``{"hardware.gpus_per_node": np.bool_(True)}`` planned one GPU)."""
    return isinstance(value, bool) or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"))


class LoraSection(_Section):
    rank: int = Field(16, gt=0, le=65536, description="LoRA rank r.")
    alpha: float = Field(32, gt=0, le=1e6, description="LoRA alpha (scaling = alpha / r).")
    targets: str | list[str] = Field("all-linear", description="'all-linear' or module names, e.g. [q_proj, v_proj].")
    dropout: float = Field(0.0, ge=0, lt=1)
    dropout_position: LoraDropoutPosition = Field(
        LoraDropoutPosition.PRE, description="pre | post: where LoRA dropout acts. pre: on the adapter's input, as"
        " PEFT does (lora_B(lora_A(dropout(x)))). post: on the adapter's output, NeMo Automodel's default"
        " (PeftConfig dropout_position 'post'; dropout(lora_B(lora_A(x) * scale)), NVIDIA-NeMo/Automodel"
        " nemo_automodel/components/_peft/lora.py l.53, l.311-312 @2861c4143cd335539213b1b6d0c890cb17682444)."
        " Changes the dropout's saved mask (memory) and its traffic (step time); no effect without dropout.")
    expert_adapters: ExpertAdapters = Field(
        ExpertAdapters.MERGED, description="merged | grouped: how adapters on routed experts run. merged: PEFT adds"
        " B·A into each expert's weight every forward. grouped: unmerged grouped GEMMs of their own on the routed rows"
        " (prime-rl's MultiLoRAGroupedExperts). Step time only (the memory plan keeps the merged weights); scope lora.")
    call_syncs: float = Field(
        0.0, description="Host-synchronising reads of a device value in every forward call of an"
        " adapted (non-expert) linear, the recompute's included: the host waits for the GPU to drain its queue each"
        " time. prime-rl's MultiLoRALinear under its per-layer torch.compile: 2 with grouped GEMMs (the assert on"
        " offsets[-1] and repeat_interleave without an output size, each a graph break run eagerly), 2 + (2n - 1)"
        " with the per-adapter loop over n adapters (each slice bound read back). 0: none (PEFT). Step time only.")
    double_quant: bool = Field(True, description="QLoRA: bitsandbytes double quantization.")
    prepare_kbit: KbitPrepare = Field(
        KbitPrepare.NONE, description="QLoRA: none | peft | trl: what cast the non-4-bit parameters after loading."
        " peft: PEFT's prepare_model_for_kbit_training alone: every non-4-bit parameter (embeddings, norms, head) fp32"
        " (peft 0.21.2 utils/other.py l.204-209). trl: TRL's SFTTrainer on a non-sharded 4-bit model under bf16"
        " (before v0.27): prepare_model_for_kbit_training (trl 0.13.0 trainer/sft_trainer.py l.190-201), then"
        " peft_module_casting_to_bf16 after get_peft_model (trl 0.13.0 sft_trainer.py l.227-233, utils.py l.872-879;"
        " trl 0.12.1 sft_trainer.py l.286-292, utils.py l.842-849): norms fp32, embeddings and head back to bf16."
        " Either way under bf16 autocast the residual stream and the norms run in fp32 and every 4-bit linear on that"
        " stream casts its input, its dequantised weight and its output (the GEMMs stay bf16). axolotl calls the PEFT"
        " recipe but casts norms and embeddings back (not this); LLaMA-Factory does not call it (compute.kbit_upcast)."
        " Step time (compute.kbit_upcast) and memory (4-byte non-quantised weights, fp32 checkpointed layer inputs;"
        " memory.kbit_upcast). Refused under fsdp, fsdp_grad_op, hsdp and zero3 (TRL skips it for sharded QLoRA, trl"
        " 0.13.0 sft_trainer.py l.183-185) and with precision.nf4_compute_dtype fp32 (a no-op). Default none.")
    dequant: QloraDequant = Field(
        QloraDequant.BITSANDBYTES, description="QLoRA: how the 4-bit base reaches the GEMMs. bitsandbytes (NF4, one"
        " dequantise kernel per use, which no compiler fuses), torchao (torchtune's NF4Tensor: the same dequantisation"
        " as PyTorch ops that torch.compile fuses) or autogptq_torch (a GPTQ int4 checkpoint through AutoGPTQ's cuda-old QuantLinear"
        " with exllama disabled, GPTQConfig(disable_exllama=True): at 128 or more input rows it unpacks each weight"
        " with nine PyTorch ops and keeps the fp16 copy for the backward). Step time, and memory: each frozen linear"
        " whose input needs a gradient saves its fp16 weight (2 B per weight) until its backward, every layer's"
        " without checkpointing, one layer's inside the recompute with it (memory.activations"
        ".saved_frozen_weight_bytes).")
    adapter_dtype: AdapterDtype = Field(
        AdapterDtype.FP32, description="fp32 (PEFT's default autocast_adapter_dtype) or bf16 (torchtune)."
    )
    quantize_moe_experts: bool = Field(
        False, description="QLoRA on a MoE model whose routed experts are 3-D stacks (transformers 5): the stacks"
        " are quantized to the base's NF4 while loading, as axolotl's quantize_moe_experts does (bitsandbytes"
        " replace_parameter_4bit on every 3-D parameter named *expert*: axolotl-ai-cloud/axolotl"
        " src/axolotl/monkeypatch/moe_quant.py l.121-131 @753906cfc7a669e9b1788193174304bbd9059a8e); bitsandbytes'"
        " own loader skips them (it swaps nn.Linear modules only). Memory: the experts' stored bytes. Default false:"
        " the stacks stay in the compute dtype. Scope qlora only.")
    modules_to_save: list[str] = Field(
        default_factory=_empty_list, max_length=16,
        description="Modules trained in full beside the adapter (PEFT modules_to_save): embed_tokens, lm_head.",
    )

    @field_validator("call_syncs")
    @classmethod
    def _call_syncs_range(cls, v: float) -> float:
        if not 0.0 <= v <= 64.0:
            raise ValueError(f"lora.call_syncs: {v:g} is out of range; allowed: 0 to 64")
        return v


class Ia3Section(_Section):
    """PEFT (IA)^3 (``IA3Config``): a learned vector scales each target's output, or its input for the
    feedforward ones."""

    targets: list[str] | None = Field(None, max_length=64, description="Module names scaled (PEFT target_modules);"
                                      " default: PEFT's for the model type (llama: k_proj, v_proj, down_proj).")
    feedforward: list[str] | None = Field(None, max_length=64, description="Targets whose input is scaled (PEFT"
                                          " feedforward_modules, a subset of targets); default: PEFT's for the model"
                                          " type (llama: down_proj).")


class PromptTuningSection(_Section):
    """PEFT prompt tuning (``PromptTuningConfig``): trained virtual-token embeddings before every sequence."""

    num_virtual_tokens: int | None = Field(None, ge=1, le=1_000_000, description="Virtual tokens prepended to every"
                                           " sequence (required with scope prompt_tuning; PEFT has no default).")


class PrefixTuningSection(_Section):
    """PEFT prefix tuning (``PrefixTuningConfig``, ``prefix_projection`` False, PEFT's default): trained keys and
    values of virtual tokens that every layer's attention reads before the sequence's own."""

    num_virtual_tokens: int | None = Field(None, ge=1, le=1_000_000, description="Virtual tokens whose keys and values"
                                           " every layer's attention reads (required with scope prefix_tuning; PEFT"
                                           " has no default).")


class PrecisionSection(_Section):
    weights: Dtype | None = Field(None, description="Storage dtype of the model weights; default bf16 (nf4 for qlora).")
    compute: ComputeDtype = ComputeDtype.BF16
    master_weights: MasterWeights = MasterWeights.NONE
    grads: GradDtype | None = Field(None, description="Gradient dtype; default: the trainable parameters' dtype."
                                    " fp32 = Megatron-Core's grad_reduce_in_fp32 main_grad buffer (Megatron-LM forces it"
                                    " with --bf16: megatron/training/arguments.py l.299-305 @baf94af3): the buffer holds"
                                    " and the data-parallel reduce-scatter / all-reduce moves 4 B per gradient.")
    optimizer: Optimizer = Optimizer.ADAMW
    optimizer_states: StatesDtype = StatesDtype.SAME_AS_WEIGHTS
    optimizer_impl: OptimizerImpl = Field(
        OptimizerImpl.FUSED, description="torch AdamW: fused (HF Trainer default), foreach (torch default), for_loop;"
        " apex_distributed: Apex's DistributedFusedAdam (NeMo 1.0 distributed_fused_adam; tensor_parallel_impl"
        " megatron, optimizer adamw): an fp32 master shard only when optimizer_states differs from the weights' dtype."
    )
    optimizer_in_backward: bool = Field(
        False, description="Step each parameter in its grad hook and free the gradient (torchtune optimizer_in_bwd)."
    )
    autocast: bool = Field(
        True, description="Whether the trainer runs its models' forwards under torch autocast in precision.compute"
        " (accelerate's mixed_precision, the HF Trainer's bf16 / fp16 flags: Accelerator.prepare_model wraps forward in"
        " autocast only under native AMP, huggingface/accelerate src/accelerate/accelerator.py l.1402-1413 @v1.3.0"
        " bdd70d5d93c3a66e859d966b6482871971ae7510, the reward and reference models prepared with evaluation_mode too)."
        " false: each model's GEMMs run in its weights' dtype; an fp32 reward model (roles.reward_model_dtype fp32)"
        " then runs fp32 GEMMs. Default true.")
    tf32: bool = Field(
        False, description="Whether fp32 matmuls may run on the TF32 tensor cores (torch.backends.cuda.matmul."
        "allow_tf32, the HF Trainer's tf32 flag). PyTorch's default is false since 1.12 (\"This flag defaults to False"
        " in PyTorch 1.12 and later\", https://pytorch.org/docs/stable/notes/cuda.html, read 2026-12-05): fp32 GEMMs"
        " (an fp32 reward model without autocast, a QLoRA base dequantised to fp32) then take the CUDA cores' fp32"
        " rate; true: the catalog's dense TF32 rate (refused on a GPU without one). Default false.")
    fp8_recipe: Fp8Recipe | None = Field(
        None, description="With compute fp8 (required): delayed (TE DelayedScaling, amax history) | current"
        " (per-tensor dynamic: TE Float8CurrentScaling, torchao/torchtitan float8 tensorwise) | blockwise"
        " (TE Float8BlockScaling, DeepSeek-V3's 1x128 / 128x128 scales) | mxfp8 (MX: one e8m0 scale per 32"
        " elements, row- and column-wise copies; TE MXFP8BlockScaling, torchao MXLinear; Blackwell).")
    fp4_params: bool = Field(
        False, description="NVFP4 primary weights (Megatron-Core fp4_param, Megatron-Bridge fp4_param_gather, set by its"
        " bf16_with_nvfp4_mixed): the linears' weights are kept only as NVFP4 (row-wise and column-wise copies, 0.5 B"
        " each plus an e4m3 scale per 16), the optimizer keeps fp32 main params, the data-parallel all-gather moves"
        " the packed 0.5 B data. Needs compute fp4 on Megatron-Core; strategies single, ddp, zero1.")
    nf4_compute_dtype: Nf4ComputeDtype = Field(
        Nf4ComputeDtype.BF16, description="Scope qlora: the dtype the 4-bit base's dequantised GEMMs run in."
        " bitsandbytes' Linear4bit takes the input's dtype when it is float32 or bfloat16, else bnb_4bit_compute_dtype"
        " (transformers' default float32): fp32 where the model is loaded in float32 without autocast, or where"
        " bnb_4bit_compute_dtype is left unset on a float16 model; those GEMMs then run at the fp32 (non-tensor-core)"
        " rate. fp32 means the whole unquantised model is fp32 (a float32 load): SDPA's memory-efficient kernel in"
        " 3xTF32, the head as an fp32 GEMM, the residual stream's elementwise ops, weights and saved activations at"
        " 4 bytes. Default bf16.")
    bf16_first_layers: int = Field(
        0, ge=0, le=10_000, description="With compute fp8 / fp4: this many first decoder layers keep bf16 linears"
        " (Megatron-Core first_last_layers_bf16 with num_layers_at_start_in_bf16; Megatron-Bridge's FP8-CS and"
        " NVFP4 recipes). Their GEMMs run at the bf16 rate without casts or quantized copies.")
    bf16_last_layers: int = Field(
        0, ge=0, le=10_000, description="With compute fp8 / fp4: this many last decoder layers keep bf16 linears"
        " (Megatron-Core num_layers_at_end_in_bf16; torchtitan's 'first 85 % of layers' NVFP4 recipes).")
    fp4_recipe: Fp4Recipe | None = Field(
        None, description="With compute fp4 (required): nvfp4 (e2m1 elements, an e4m3 scale per 16 elements and an"
        " fp32 scale per tensor; TE NVFP4BlockScaling, torchao / torchtitan NVFP4; Blackwell).")
    fp8_params: bool = Field(
        False, description="fp8 primary weights (Transformer Engine fp8_model_init / quantized_model_init, Megatron"
        " --fp8-param-gather, NeMo fp8_params): the linears' weights are kept only as fp8 (1 B + the transpose where"
        " the GPU's GEMMs need one), the optimizer keeps fp32 main params, the data-parallel all-gather moves fp8."
        " Needs compute fp8 with a Transformer Engine recipe; strategies single, ddp, zero1, or fsdp with"
        " tensor_parallel_impl megatron (Megatron-FSDP: fp8 weight shards, fp8 gathered units).")
    fp8_all_gather: bool = Field(
        False, description="torchao's float8 FSDP2 all-gather (torchtitan --float8.enable_fsdp_float8_all_gather"
        " --float8.precompute_float8_dynamic_scale_for_fsdp; torchao Float8LinearConfig enable_fsdp_float8_all_gather):"
        " each float8 linear's weight shard is cast to fp8 before the all-gather, so the gathered units hold 1 B per"
        " float8 linear weight (embeddings, norms, the output head stay bf16), the all-gather moves half the bytes,"
        " and the scales come from one fused amax pass and one all-reduce after the optimizer step. Needs compute fp8"
        " with fp8_recipe current on torchao linears (tensor_parallel_impl not megatron) under strategy fsdp / hsdp"
        " with fsdp_version fsdp2.")
    fp8_attention: bool = Field(
        False, description="fp8 attention (Megatron-Core fp8_dot_product_attention, Transformer Engine fp8_dpa): the"
        " fused attention kernel runs on quantised Q, K, V (MXFP8 under fp8_recipe mxfp8, per-tensor fp8 otherwise)"
        " at cuDNN's measured fp8 / bf16 rate ratio (compute.attention_time.fp8_attention_ratio; 1 where none is"
        " measured). Needs compute fp8 and Transformer Engine attention (parallel.tensor_parallel_impl megatron).")
    fp8_activation_input_store: bool = Field(
        False, description="Megatron-Core activation_func_fp8_input_store (NeMo / MLPerf FP8_ACT): the fused SwiGLU keeps"
        " its input, fc1's gate and up halves, as float8_e4m3fn for its backward (1 B per element instead of the compute"
        " dtype's) and casts it back there (memory.activations.MEGATRON_FP8_GLU_INPUT_SOURCES). Dense SwiGLU MLPs only;"
        " needs parallel.tensor_parallel_impl megatron.")
    fp8_param_transpose_cache: bool = Field(
        True, description="Whether an fp8 primary weight (precision.fp8_params, per-tensor delayed / current scaling)"
        " keeps its transpose for the dgrad GEMM through the step on a GPU without non-TN fp8 GEMMs (Hopper, Ada):"
        " true, Transformer Engine 2.x (always) and 1.x with Megatron-Core's parameter transpose cache on; false,"
        " Transformer Engine 1.x under Megatron-Core disable_parameter_transpose_cache: True, where each linear's"
        " backward makes the transpose and frees it after its dgrad GEMM (memory.fp8, the comment above"
        " fp8_param_bytes_per_weight). Needs fp8_params with fp8_recipe delayed or current and"
        " parallel.tensor_parallel_impl megatron.")

    @property
    def quantized_params(self) -> bool:
        """Quantised primary weights: ``fp8_params`` under fp8, ``fp4_params`` under fp4."""
        return self.fp8_params or self.fp4_params

    def quantized_layer_share(self, num_layers: int, layers: Sequence[int] | None = None) -> float:
        """The share of ``num_layers`` decoder layers whose linears run quantised (``bf16_first_layers`` /
        ``bf16_last_layers`` aside); 1 without them, 0 without quantised compute. ``layers``: the share among these
        global layer indices only (a pipeline stage's, ``layer_quantized``)."""
        if not self.compute.quantized_gemms:
            return 0.0
        if num_layers <= 0:
            return 1.0
        if layers is not None:
            return sum(self.layer_quantized(i, num_layers) for i in layers) / len(layers) if layers else 1.0
        return max(0, num_layers - self.bf16_first_layers - self.bf16_last_layers) / num_layers

    def layer_quantized(self, i: int, num_layers: int) -> bool:
        """Whether decoder layer ``i`` (a global index: a pipeline stage's layers keep the model's numbering) of
        ``num_layers`` runs its linears quantised: not among the first ``bf16_first_layers`` or the last
        ``bf16_last_layers`` (Megatron-Core ``get_fp8_context`` / ``get_fp4_context`` take the *global* layer index
        and compare it with ``config.num_layers``: NVIDIA/Megatron-LM megatron/core/fp8_utils.py l.706-730,
        megatron/core/fp4_utils.py l.247-265 @d98e8a64ddf34856e74b24714e3bedb2f5a39553; torchtitan's converters
        filter the model's ``layers.{i}`` names). False without quantised compute."""
        return (self.compute.quantized_gemms and i >= self.bf16_first_layers
                and i < num_layers - self.bf16_last_layers)

    @property
    def gemm_recipe(self) -> Fp8Recipe | Fp4Recipe | None:
        """The quantized GEMMs' recipe: ``fp8_recipe`` under compute fp8, ``fp4_recipe`` under fp4; else None."""
        if self.compute is ComputeDtype.FP8:
            return self.fp8_recipe
        if self.compute is ComputeDtype.FP4:
            return self.fp4_recipe
        return None


class AllocatorKind(StrEnum):
    """PyTorch's CUDA caching allocator mode (``PYTORCH_CUDA_ALLOC_CONF``)."""

    DEFAULT = "default"
    EXPANDABLE_SEGMENTS = "expandable_segments"


NODE_NIC_FLOOR_GBPS = 1.0
"""Least inter-node network of a node, Gb/s: 1000BASE-T, gigabit Ethernet over copper (IEEE Std 802.3ab-1999), the
slowest port a server's network still runs; a slower link is not a multi-node GPU cluster's, and a value below it
(``hardware.nic_gbps_per_node: 1e-30``) is a typo that would make every cross-node collective take hours."""

_NIC_FLOOR_WHY = "gigabit Ethernet (1000BASE-T, IEEE 802.3ab), the slowest network a GPU node runs"


_NETWORK_NAMES = frozenset({"infiniband", "ib", "roce", "rocev2", "ethernet", "eth", "efa", "rdma", "tcp", "slingshot",
                            "omnipath", "opa", "spectrumx"})
"""Inter-node network names a card might give ``hardware.interconnect`` (spelled without separators): refused there
with a pointer to ``nic_gbps_per_gpu`` / ``nic_gbps_per_node``."""
_NVLINK_FABRIC_NAMES = frozenset({"nvswitch", "nvlinkswitch", "nvl72", "xgmi", "infinityfabric"})
"""Names of intra-node GPU fabrics a card might give ``hardware.interconnect`` (spelled without separators): an
NVSwitch or the NVL72 NVLink Switch fabric, and AMD's xGMI (Infinity Fabric), whose rate the catalog keeps in its
NVLink fields. Refused in one line saying to state ``nvlink`` (not taken as aliases, so a record or export always
spells the enum's value)."""


MAX_GPUS_PER_NODE = 1024
"""Input bound, not a model constant: the most GPUs a card's ``hardware.gpus_per_node`` and a price's rentable unit
(``price_gpus_per_instance``; a price preset's or a ``--price`` file's ``gpus_per_instance``, checked in
``compute.cost``) may state."""


def is_gpu_count(value: Any) -> bool:
    """Whether ``value`` is a whole number of GPUs in 1..``MAX_GPUS_PER_NODE`` (a bool is not): the check of a
    price's rentable unit wherever one is read (the card, a price table, ``compute.cost.Price``)."""
    return not isinstance(value, bool) and isinstance(value, int) and 1 <= value <= MAX_GPUS_PER_NODE


def empty_price_preset_refusal(v: Any) -> str | None:
    """The one line refusing an empty or blank ``hardware.price_preset`` (read by its truthiness, '' priced nothing,
    silently); None for any other value. Also read by ``trainfit fit``, which takes the card's price before it
    validates the card (``fit_search.card_price``)."""
    if not isinstance(v, str) or v.strip():
        return None
    from trainfit.compute.cost import price_preset_ids  # the catalog's price table: read on this error only

    return (f"hardware.price_preset: an empty name is not allowed; allowed: {', '.join(price_preset_ids())} or null"
            " (no price preset)")


def price_unit_refusal(unit: Any, *, price_per_gpu_hour: Any, price_preset: Any) -> str | None:
    """The one line refusing ``hardware.price_gpus_per_instance``: not a whole number of GPUs in 1..1024
    (``MAX_GPUS_PER_NODE``), or given without ``price_per_gpu_hour`` (the price it is the unit of; a ``price_preset``
    states its own unit); None when it is null or allowed. Also read by ``trainfit fit``, which takes the card's
    price before it validates the card (``fit_search.card_price``)."""
    if unit is None:
        return None
    if not is_gpu_count(unit):
        shown = repr(unit[:40]) if isinstance(unit, str) else str(unit)[:40]
        return (f"hardware.price_gpus_per_instance: {shown} is not allowed; allowed: a whole number of GPUs 1 to "
                f"{MAX_GPUS_PER_NODE}"
                " (the price's rentable unit, e.g. 8 for a whole 8-GPU instance) or null (1: single GPUs rented)")
    if price_per_gpu_hour is None:
        return (f"hardware.price_gpus_per_instance: {unit} is the rentable unit of hardware.price_per_gpu_hour, and the"
                " card gives none" + (f" (price_preset {price_preset} states its own unit)" if price_preset else "")
                + "; allowed: null, or give price_per_gpu_hour")
    return None


def price_pair_refusal(*, price_per_gpu_hour: Any, price_preset: Any) -> str | None:
    """The one line refusing ``hardware.price_per_gpu_hour`` given beside ``hardware.price_preset``: the preset's
    price was planned and the stated one dropped, silently (no framework ``preset`` fills either field, so both come
    from the user). None when at most one is given. Also read by ``trainfit fit`` (``fit_search.card_price``)."""
    if price_per_gpu_hour is None or not price_preset:
        return None
    shown = f"{price_per_gpu_hour:g}" if isinstance(price_per_gpu_hour, (int, float)) else repr(price_per_gpu_hour)
    return (f"hardware.price_per_gpu_hour: {shown} given together with hardware.price_preset"
            f" {price_preset} (a named price with its own amount, currency and unit); give one of the two")


class HardwareSection(_Section):
    gpu: str = Field("a100-40gb", description="GPU catalog id or alias, or 'custom' with gpu_memory_gib.")
    gpu_memory_gib: float | None = Field(None, gt=0, le=16384, description="Memory per card for a card not in the catalog.")
    gpus_per_node: int = Field(8, ge=1, le=MAX_GPUS_PER_NODE)
    nodes: int = Field(1, ge=1, le=100_000)
    interconnect: Interconnect | None = Field(None, description="The link between a node's GPUs: nvlink, pcie (PCIe with GPU peer-to-peer) or pcie_no_p2p (PCIe without it: NCCL through host memory, as GeForce RTX 4090s); sets the collectives' bus bandwidth in a node. Default (null): the GPU catalog's link. The network between nodes is nic_gbps_per_gpu / nic_gbps_per_node.")
    host_ram_gib: float | None = Field(None, gt=0, le=1e6, description="Host RAM per node, to check offload against.")
    price_per_gpu_hour: float | None = Field(None, ge=0, le=1e6)
    currency: str | None = Field(None, description="ISO code (CNY, USD...); required with a price.")
    price_preset: str | None = Field(None, description="A named price, e.g. rtx4090-pro (1.98 CNY) or rtx4090-youth (1.24 CNY).")
    price_gpus_per_instance: int | None = Field(None, ge=1, le=MAX_GPUS_PER_NODE, description="The rentable unit of price_per_gpu_hour, in GPUs: 8 where the provider rents whole 8-GPU instances only (a run of N cards on a node pays for ceil(N / 8) x 8 GPUs, each node billed apart, the idle ones included). Default (null): 1, single GPUs rented; a price_preset states its own unit.")
    nic_gbps_per_gpu: float | None = Field(None, gt=0, le=1e6, description="Inter-node network per GPU, Gb/s (10^9 bits); default by GPU: 400 (H100/H200/H800/H20/B200/GB200 HGX), 200 (A100/A800 HGX), 100 (PCIe cards).")
    nic_gbps_per_node: float | None = Field(None, gt=0, le=1e7, description="Inter-node network of a whole node, Gb/s (10^9 bits): the NICs its GPUs share, for nodes with fewer NICs than GPUs (e.g. 4 HDR cards for 8 A100s) or one Ethernet port; caps every collective's cross-node traffic from the node. Default: no cap beyond nic_gbps_per_gpu per GPU.")
    host_memory_gbps: float | None = Field(None, gt=0, le=1e6, description="Host DRAM bandwidth per node, GB/s; times the CPU optimizer step (default 200: half the peak of a two-socket DDR4-3200 server, compute/rates.py).")
    host_numa_nodes: int | None = Field(None, ge=1, le=64, description="NUMA nodes of a node's host, all sockets (numactl --hardware; e.g. 8 on a DGX A100, two EPYC 7742 at NPS4): a rank's pinned buffers lie on one, so its CPU optimizer streams at most host_memory_gbps / host_numa_nodes when the node has fewer ranks than NUMA nodes (compute/offload.py). Default: one memory domain.")
    allocator: AllocatorKind = Field(AllocatorKind.DEFAULT, description="default | expandable_segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True): the caching allocator's mode; changes reserved bytes.")

    @field_validator("price_preset", mode="before")
    @classmethod
    def _price_preset_named(cls, v: Any) -> Any:
        """An empty name is refused (``plan.resolve.price_of`` and ``fit_search.card_price`` read it by its
        truthiness, so '' planned no price, silently); null or an omitted field means no price preset."""
        if (why := empty_price_preset_refusal(v)) is not None:
            raise ValueError(why)
        return v

    @field_validator("price_gpus_per_instance", mode="before")
    @classmethod
    def _billing_unit(cls, v: Any) -> Any:
        """A whole number of GPUs in 1..MAX_GPUS_PER_NODE (1024), or null (1: single GPUs)."""
        if isinstance(v, bool):
            return v  # the card's boolean check names it (got a boolean, not a number)
        if (why := price_unit_refusal(v, price_per_gpu_hour=0.0, price_preset=None)) is not None:
            raise ValueError(why)
        return v

    @field_validator("interconnect", mode="before")
    @classmethod
    def _link_name(cls, v: Any) -> Any:
        """A link name, any case (a preflight record writes ``nvlink`` / ``pcie``); an intra-node fabric's name
        (``nvswitch``, ``nvlink-switch``, ``xgmi``, ``infinity-fabric``) is refused saying to state nvlink, an
        inter-node network's name (``infiniband``, ``roce``...) pointing to the NIC fields, any other value naming the
        allowed ones."""
        if v is None or isinstance(v, Interconnect):
            return v
        allowed = f"allowed: {', '.join(x.value for x in Interconnect)} or null (the GPU catalog's link)"
        if not isinstance(v, str):  # a list or a section would reach the set lookup below unhashable
            shown = ("a list" if isinstance(v, (list, tuple)) else "a section" if isinstance(v, dict)
                     else repr(str(v)[:40]))
            raise ValueError(f"hardware.interconnect: {shown} is not allowed; {allowed}")
        name = v.strip().lower().replace("-", "_")
        if name in {x.value for x in Interconnect}:
            return name
        if name.replace("_", "").replace(" ", "") in _NVLINK_FABRIC_NAMES:
            raise ValueError(f"hardware.interconnect: '{v}' is a fabric between a node's GPUs that this field states as"
                             f" nvlink (NVSwitch, NVLink Switch, AMD xGMI / Infinity Fabric); {allowed}")
        if name.replace("_", "") in _NETWORK_NAMES:
            raise ValueError(f"hardware.interconnect: '{v}' is a network between nodes, and this field the link between"
                             f" a node's GPUs, {allowed}; state the network as hardware.nic_gbps_per_gpu or"
                             " nic_gbps_per_node")
        raise ValueError(f"hardware.interconnect: {str(v)[:40]!r} is not allowed; {allowed}")

    @model_validator(mode="after")
    def _nic_floor(self) -> HardwareSection:
        """A node's inter-node network of at least ``NODE_NIC_FLOOR_GBPS``: per node, and per GPU times the GPUs of
        a node (a smaller per-GPU share stands for NICs the node's GPUs share)."""
        node = self.nic_gbps_per_node
        if node is not None and node < NODE_NIC_FLOOR_GBPS:
            raise ValueError(f"hardware.nic_gbps_per_node: {node:g} Gb/s is below {NODE_NIC_FLOOR_GBPS:g} Gb/s,"
                             f" {_NIC_FLOOR_WHY}; allowed: {NODE_NIC_FLOOR_GBPS:g} to 1e7")
        per_gpu, n = self.nic_gbps_per_gpu, self.gpus_per_node
        if per_gpu is not None and per_gpu * n < NODE_NIC_FLOOR_GBPS:
            low = NODE_NIC_FLOOR_GBPS / n
            raise ValueError(f"hardware.nic_gbps_per_gpu: {per_gpu:g} Gb/s x {n} GPUs a node is below"
                             f" {NODE_NIC_FLOOR_GBPS:g} Gb/s a node, {_NIC_FLOOR_WHY}; allowed with"
                             f" gpus_per_node {n}: {low:g} to 1e6")
        return self


def divisors(n: int) -> list[int]:
    """Every positive divisor of ``n``, ascending: the sizes a parallel dimension over ``n`` ranks, layers or
    heads may take."""
    return [d for d in range(1, n + 1) if n % d == 0]


def rl_group_sizes(*, gpus_per_node: int, nodes: int, split: bool, rollout_nodes: int | None,
                   rollout_gpus: int | None) -> tuple[int, int]:
    """(training GPUs, rollout GPUs) of a run: every GPU for both unless an RL run splits them (``split``), where the
    engine holds ``rollout_nodes`` whole nodes (NeMo RL's multi-node split) or else ``rollout_gpus`` on every node.
    One count for the card's validator, ``methods.roles.group_sizes`` and fit's candidate dicts."""
    world = gpus_per_node * nodes
    if not split:
        return world, world
    rollout = rollout_nodes * gpus_per_node if rollout_nodes is not None else (rollout_gpus or 0) * nodes
    return world - rollout, rollout


def _check_reference_placement(card: "RunCard") -> None:
    """``roles.reference`` values the plan cannot honour, refused in one line each.

    ``lora_disabled`` is the policy with its adapter disabled (PEFT's ``disable_adapter``): a full-weight policy has
    no adapter, and planning it would hold no reference at all. ``cpu`` for DPO: OpenRLHF's DPO with ``--ref.offload``
    builds its reference under a ZeRO-3 config with ``offload_param`` to pinned host memory
    (``ds_config=strategy.get_ds_eval_config(offload=args.ref.offload)``, openrlhf/cli/train_dpo.py l.42-52;
    ``get_eval_ds_config``'s ``"offload_param": {"device": "cpu" if offload else "none", "pin_memory": True}``,
    openrlhf/utils/deepspeed/deepspeed_utils.py l.78-99; OpenRLHF/OpenRLHF @3c3be6234e0cb353e76bb8019947db9dfe99fca7),
    its parameters fetched to the GPU in every step's reference forward; the DPO walk and step time do not plan that
    (no host weights, no fetch), so the card is refused rather than planned as a GPU reference."""
    ref = card.roles.reference
    if ref is None:
        return
    dpo = card.method is Method.DPO
    allowed = [p.value for p in RefPlacement
               if p is not RefPlacement.LORA_DISABLED and not (dpo and p is RefPlacement.CPU)]
    if ref is RefPlacement.LORA_DISABLED and card.scope is Scope.FULL:
        raise ValueError("roles.reference: lora_disabled needs a PEFT scope (lora, qlora, dora, ia3, prompt_tuning,"
                         " prefix_tuning);"
                         f" allowed with scope full: {', '.join(allowed)}")
    if ref is RefPlacement.PRECOMPUTED and card.method in (Method.PPO, Method.GRPO):
        # DPO's reference scores a fixed preference set, once before training; PPO and GRPO score the responses each
        # step generates, which exist only after that step's rollout (methods.rl plans no reference pass for it)
        rl = [p for p in allowed if p != RefPlacement.PRECOMPUTED.value]
        peft = "" if card.scope is Scope.FULL else ", lora_disabled"
        raise ValueError(f"roles.reference: precomputed is DPO's (reference log-probs of a fixed dataset, computed once);"
                         f" method {card.method.value} scores the responses each step generates; allowed:"
                         f" {', '.join(rl)}{peft}")
    if dpo and ref is RefPlacement.CPU:
        peft = "" if card.scope is Scope.FULL else ", lora_disabled"
        raise ValueError("roles.reference: cpu (a host-offloaded reference streamed every step) is not planned for"
                         f" method dpo; allowed: {', '.join(allowed)}{peft}")


def _check_hsdp_shard_size(par: "ParallelSection", *, train_gpus: int) -> None:
    """``parallel.hsdp_shard_size``: read with strategy hsdp only, and a divisor of the data x context ranks (torch's
    ``init_device_mesh`` needs ``replicate x shard`` = the data-parallel ranks; verl's ``create_device_mesh`` builds
    ``(world_size // fsdp_size, fsdp_size)``)."""
    n = par.hsdp_shard_size
    if par.strategy is not Strategy.HSDP:
        raise ValueError(f"parallel.hsdp_shard_size: {n} is only read with parallel.strategy: hsdp (strategy is"
                         f" '{par.strategy.value}'); allowed with it: null")
    _check_divides_data_ranks("parallel.hsdp_shard_size", n, par, train_gpus=train_gpus)


def _check_divides_data_ranks(field: str, n: int, par: ParallelSection, *, train_gpus: int) -> None:
    """A shard group of ``n`` data ranks (``field``) divides the data x context ranks; ValueError naming the divisors."""
    data = max(1, train_gpus // (par.tensor_parallel * par.pipeline_parallel))
    if data % n:
        allowed = divisors(data)
        shown = ", ".join(map(str, allowed)) if len(allowed) <= 16 else f"divisors of {data}"
        raise ValueError(f"{field}: {n} does not divide the {data} data x context ranks; allowed: {shown} or null")


def _check_zero1_group(par: ParallelSection, *, train_gpus: int) -> None:
    """``parallel.zero1_shard_size`` / ``zero1_param_sync``: read with strategy zero1 only; the shard size divides the
    data x context ranks (InternEvo's ZERO1 process groups are consecutive blocks of ``zero1`` data ranks)."""
    if par.strategy is not Strategy.ZERO1:
        raise ValueError(f"parallel.zero1_shard_size / zero1_param_sync: only read with parallel.strategy: zero1"
                         f" (strategy is '{par.strategy.value}'); allowed with it: null / all_gather")
    if par.zero1_shard_size is not None:
        _check_divides_data_ranks("parallel.zero1_shard_size", par.zero1_shard_size, par, train_gpus=train_gpus)


def every_nth_layer(*, num_layers: int, every_n_layers: int) -> tuple[bool, ...]:
    """Which of ``num_layers`` decoder layers run under checkpoint when every n-th does
    (``parallel.checkpoint_every_n_layers``; the trace applies the same rule): the layer of 1-based index k
    when ``k % n == 0``, torchtitan's rule (pytorch/torchtitan
    torchtitan/parallelisms/parallelize_llama.py@041336434916bdc0f88c1f89fda176fd3c2092e4
    ``checkpoint_wrapper._count += 1; if not every_x_layer or _count % every_x_layer == 0``; the same in
    torchtitan/distributed/activation_checkpoint.py@1f029641b5caeb4df18ac094263e8bcc674b3686
    ``_layer_sac_count % ac_freq == 0``, as in v0.2.2 @73a0e6979dd10b6b1904098eb3c8f62c18ab87ce, the version
    the exporter writes) and fms-fsdp's (foundation-model-stack/fms-fsdp
    fms_fsdp/policies/ac_handler.py@5e522b4c4f8a5f080717e714fee7622414dd6b63 ``_count % every_xth_item == 0``)."""
    return tuple((i + 1) % every_n_layers == 0 for i in range(num_layers))


OFFLOAD_STRATEGIES = (Strategy.ZERO1, Strategy.ZERO2, Strategy.ZERO3, Strategy.FSDP, Strategy.FSDP_GRAD_OP, Strategy.HSDP)
"""The strategies whose framework offloads (``parallel.offload`` optimizer or params_and_optimizer): DeepSpeed
ZeRO-1/2/3 (``offload_optimizer`` "Valid with stage 1, 2, and 3", ``offload_param`` "Valid only with stage 3":
deepspeedai/DeepSpeed deepspeed/runtime/zero/offload_config.py @1978617c691b2c992a17902975187ef8d61176fa l.52-53,
l.21-22; ZeRO-1/2 parameter offload is refused by ``plan.terms.zero_param_offload_refusal``) and torch FSDP's
``CPUOffload`` (parameters and optimizer together: ``plan.plan_refusals``). Under ``single`` (one process, no
wrapper) and ``ddp`` (torch DistributedDataParallel, DeepSpeed stage 0) nothing offloads: accelerate has no offload
outside DeepSpeed and FSDP, and DeepSpeed's stage 0 none (``export.accelerate``, ``export.deepspeed`` drop it). One
GPU offloads under zero2 / zero3, DeepSpeed's ZeRO-Offload (https://www.deepspeed.ai/tutorials/zero-offload/, read
2026-12-05: "ZeRO-Offload enables large models with up to 13 billion parameters to be efficiently trained on a single
GPU"), or fsdp under the torch-FSDP presets (verl, nemo-rl, skyrl: ``methods.presets.one_gpu_offload_strategy``);
Unsloth's offload is activations only (``parallel.activation_offload``)."""


def offload_strategy_refusal(*, strategy: Strategy, offload: Offload) -> str | None:
    """The card's one line refusing ``parallel.offload`` under a strategy no framework offloads with (``single``,
    ``ddp``: ``OFFLOAD_STRATEGIES``); None where it is allowed. Also what ``fit`` leaves out of its knob search
    (``fit_search.sft_combos``, ``rl_combos``)."""
    if offload is Offload.NONE or strategy in OFFLOAD_STRATEGIES:
        return None
    return (f"parallel.offload: '{offload.value}' with parallel.strategy '{strategy.value}': no framework offloads"
            f" under {strategy.value} (DeepSpeed offloads from ZeRO stage 1, torch FSDP with CPUOffload); allowed"
            f" strategies with offload: {', '.join(s.value for s in OFFLOAD_STRATEGIES)} (one GPU: zero2 or zero3,"
            f" DeepSpeed ZeRO-Offload; fsdp under presets verl, nemo-rl, skyrl); allowed with {strategy.value}: none")


class ParallelSection(_Section):
    strategy: Strategy = Strategy.FSDP
    offload: Offload = Offload.NONE
    gradient_checkpointing: bool = Field(True, description="true | false | selective (short for false with"
                                         " selective_checkpointing: op).")
    selective_checkpointing: SelectiveCheckpointing = Field(
        SelectiveCheckpointing.NONE, description="none | op (torchtitan per-op SAC: every other matmul and the"
        " attention kernel saved, the rest recomputed) | core_attention (Megatron --recompute-granularity selective)"
        " | mla_up_proj (Megatron-Core --recompute-modules mla_up_proj: multi-latent attention's up projections,"
        " Megatron tensor parallel only) | layernorm_moe_act (Megatron-Core --recompute-modules layernorm moe_act:"
        " the norms not fused into a linear and the experts' activation, Megatron tensor parallel) | modules"
        " (Megatron-Core --recompute-modules with the list in recompute_modules).")
    sac_saves_attention: bool = Field(
        True, description="With selective_checkpointing op: the per-op policy's save list holds the fused attention"
        " op the run dispatches to, so attention is not recomputed. false: it does not (torchtitan before"
        " b39377f9, 2025-12-01, saves SDPA's flash and efficient ops but not _scaled_dot_product_cudnn_attention,"
        " which its SDPA prefers on compute capability >= 10.0): the attention forward re-runs in backward and its"
        " output is not kept.")
    recompute_modules: tuple[RecomputeModule, ...] | None = Field(
        None, max_length=7, description="Megatron-Core --recompute-granularity selective --recompute-modules: any of"
        " core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts (tensor_parallel_impl megatron; each"
        " where the model has what it recomputes). Given, selective_checkpointing is 'modules'. null: the list"
        " selective_checkpointing names (core_attention: [core_attn], mla_up_proj, layernorm_moe_act: [layernorm,"
        " moe_act]).")
    checkpoint_every_n_layers: int | None = Field(
        None, ge=1, le=100_000, description="With gradient_checkpointing true: only every n-th decoder layer is"
        " checkpointed (layers n, 2n, ... counting from 1), the others keep their activations: torchtitan"
        " activation_checkpoint mode 'selective' with selective_ac_option 'n' (its default '2'), fms-fsdp"
        " selective_checkpointing n. null: every layer.")
    fsdp_version: FsdpVersion = Field(FsdpVersion.FSDP2, description="With strategy fsdp, fsdp_grad_op or hsdp:"
                                      " fsdp1 (FullyShardedDataParallel, flat parameters: fms-fsdp, llm-foundry, verl"
                                      " strategy fsdp) | fsdp2 (fully_shard, per-parameter DTensor shards: torchtitan,"
                                      " torchtune, NeMo Automodel, verl strategy fsdp2; its all-gather copy-out and"
                                      " reduce-scatter copy-in run on the compute stream). Default fsdp2, as trainfit's"
                                      " trace and its torchtitan export shard. Not read with other strategies (a"
                                      " search over parallel.strategy keeps it).")
    fsdp_one_rank: bool = Field(False, description="One training GPU under strategy fsdp with"
                                " fsdp_version fsdp2 (fsdp_grad_op and hsdp are refused with it): true when the run really calls fully_shard on a one-rank mesh"
                                " (prime-rl's setup_fsdp), so each unit's param_dtype parameters, the root unit and the"
                                " fp32 reduce buffers are allocated as torch's one-rank path does; false (default): a"
                                " one-GPU card under an FSDP strategy plans memory without FSDP's buffers. Memory only:"
                                " step time charges fully_shard's per-unit hooks on any one-GPU fsdp card whatever"
                                " this flag says (published one-GPU FSDP trainers wrap with fully_shard).")
    fsdp_no_sync: bool | None = Field(
        None, description="With strategy fsdp and fsdp_version fsdp1 and batch.grad_accum > 1: the accumulating"
        " micro-batches run inside FullyShardedDataParallel.no_sync() (accelerate's and the HF Trainer's default,"
        " verl's FSDP engine from 0.9, Lightning Fabric's no_backward_sync as Lit-GPT's finetune scripts call it), so"
        " every unit with a trainable parameter keeps its whole unsharded gradient, frozen parameters of the unit"
        " included under use_orig_params, until the synced micro-batch (memory.fsdp_no_sync). false: each backward"
        " reduce-scatters (sharded gradients; accelerate's sync_each_batch). null: the preset's framework default"
        " (plan.fsdp_no_sync: true for trl, llamafactory-*, ms-swift-* and verl from 0.9; false without a preset).")
    fsdp_adapter_units: bool | None = Field(
        None, description="With scope lora / qlora, strategy fsdp or hsdp and fsdp_version fsdp1: each adapter"
        " linear (PEFT's lora_A and lora_B) is an FSDP unit of its own beside the decoder layers, as PEFT's"
        " fsdp_auto_wrap_policy wraps them (fms-hf-tuning, the HF Trainer for a PEFT model, verl's FSDP engine with"
        " LoRA, Answer.AI's fsdp_qlora train types lora / qlora, VectorLM with LoRA): two more units' hooks per"
        " adapted projection, and FSDP1's limit_all_gathers rate limiter keeps the host about one adapted"
        " projection ahead of the GPU there (compute.collectives.rate_limited_adapter_units_seconds). false: the"
        " adapters live in their decoder layer's unit. null: the preset's framework (RunCard.resolved_fsdp_adapter_units:"
        " true for trl and verl on FSDP1 LoRA / QLoRA; false without a preset). Time only; the memory plan does not"
        " read it.")
    hsdp_shard_size: int | None = Field(
        None, ge=1, le=100_000, description="With strategy hsdp: the GPUs one shard group spans (parameters, gradients"
        " and optimizer states split over them, replicated over the other data x context ranks; the shard group is the"
        " inner, consecutive-rank dimension of torch's 2-D (replicate, shard) device mesh). null: the training GPUs of"
        " one node, torch FSDP1 HYBRID_SHARD's default groups. Must divide the data x context ranks. verl"
        " actor.fsdp_config.fsdp_size, torchtitan parallelism.data_parallel_shard_degree, accelerate"
        " parallelism_config dp_shard_size.")
    zero1_shard_size: int | None = Field(
        None, ge=1, le=100_000, description="With strategy zero1: the data ranks one ZeRO-1 group spans (optimizer"
        " states split over them, the updated parameters handed back inside the group), replicated over the other data"
        " x context ranks, whose gradients are still reduced across all of them. null: every data x context rank (one"
        " group). Must divide the data x context ranks. InternEvo parallel.zero1 (8: 'optimizer states are distributed"
        " within 8 GPUs in a single node').")
    zero1_param_sync: Zero1ParamSync = Field(
        Zero1ParamSync.ALL_GATHER, description="With strategy zero1: all_gather (one all-gather of the updated shards over"
        " the ZeRO-1 group: Megatron-Core, DeepSpeed, nanotron) | broadcast_per_rank (one NCCL broadcast per group rank,"
        " after the step: InternEvo's HybridZeroOptimizer.broadcast_params).")
    activation_offload: bool = Field(False, description="Saved activations stream to host RAM (torchtune OffloadActivations).")
    activation_offload_layers: int | None = Field(
        None, ge=1, le=100_000, description="With activation_offload: only the first N decoder layers of each"
        " stage offload their saved activations, on Transformer Engine's default schedule (Megatron-Core"
        " cpu_offloading with cpu_offloading_num_layers N, cpu_offloading_weights false: layer i's copy to the host"
        " starts after its forward and must finish before layer L - N + i's; its copy back starts at layer"
        " L - 1 - N + i's backward), so L - N layers' saved activations are on the GPU at the peak"
        " (memory.phases, compute.offload.layer_offload_stall_seconds). Must be below the layers of a stage;"
        " null: every layer (torchtune's OffloadActivations).")
    fsdp_shard_embeddings: bool = Field(False, description="FSDP: the embedding and lm_head are units of their own, gathered only around their use (torchtune custom_sharded_layers: [tok_embeddings, output]); default: they sit in the root unit.")
    compile: bool = Field(False, description="torch.compile: fused elementwise kernels and fewer launches in the time model; per-layer compiled decoder layers save fewer activations where the compiled rules were measured (memory.activations.compiled_rules_apply), and torchtune's chunked loss keeps its compiled per-chunk tensors.")
    unsloth_layers: bool = Field(False, description="The decoder layers are Unsloth's (FastLanguageModel's patched"
                                 " fast forward: Triton RMSNorm and RoPE, fused LoRA autograd functions, xFormers / SDPA"
                                 " attention), launched eagerly, not torch.compile'd: the time model scales the card's"
                                 " kernels by Unsloth's counted layer inventory (compute.unsloth_layers) instead of the"
                                 " compile factor. Step time only; needs compile false, scope lora or qlora, lora.dropout 0"
                                 " and one GPU (the counted case).")
    tensor_parallel: int = Field(1, ge=1, le=1024, description="Megatron-style tensor parallel size (heads, MLP width and vocabulary split).")
    sequence_parallel: bool = Field(False, description="Megatron sequence parallel: norms and dropout on sequence shards (needs tensor_parallel > 1).")
    tensor_parallel_impl: TensorParallelImpl = Field(TensorParallelImpl.DTENSOR, description="dtensor (torch's DTensor plan, torchtitan) | megatron (Megatron-Core: Megatron-LM, NeMo, Megatron-Bridge: sequence-parallel linears save their input's shard, the embedding keeps its rows' gradient, vocab_parallel_cross_entropy, at every tensor-parallel size) | nanotron (nanotron's linears: in memory the sequence-shard inputs, rows' embedding gradient and Megatron's vocab-parallel loss (its max subtracted out of place), its MLP per-op; in time the per-op model, no Transformer Engine).")
    model_parallel_kernels: ModelParallelKernels = Field(
        ModelParallelKernels.FUSED, description="fused (a tensor / pipeline-parallel run without torch.compile is timed"
        " on Transformer Engine's fused kernels, the default) | eager (the model's own modules op by op under torch's"
        " DTensor plan: torchtitan with tensor or pipeline parallelism and compile off). Only with"
        " tensor_parallel_impl dtensor; no effect at tensor_parallel = pipeline_parallel = 1 or with compile.")
    moe_probs_in_experts: bool = Field(True, description="Megatron-Core MoE (tensor_parallel_impl megatron): the"
                                       " routing probabilities multiply inside the experts' fused SwiGLU, so the"
                                       " combine keeps no expert output (Megatron-Core >= 0.12.1, the default);"
                                       " false: older Megatron-Core (0.11, 0.12.0) multiplies them at the unpermute,"
                                       " which saves the expert output (memory.activations.megatron_moe_bytes)."
                                       " Read only for Megatron-Core MoE blocks.")
    tp_comm_overlap: bool = Field(False, description="Transformer Engine userbuffers overlap the tensor-parallel all-gathers / reduce-scatters with the GEMMs (Megatron-Core --tp-comm-overlap; needs sequence_parallel).")
    pipeline_outputs_deallocated: bool = Field(False, description="Megatron-Core's deallocate_pipeline_outputs: a"
                                                " pipeline stage's output is reduced to a one-element tensor once it is"
                                                " sent (only its grad_fn is kept for backward), so an in-flight"
                                                " micro-batch holds no copy of it (megatron/core/pipeline_parallel/"
                                                "schedules.py deallocate_output_tensor). Megatron-LM and"
                                                " Megatron-Bridge set it; Megatron-Core's own default is false."
                                                " Read only with pipeline_parallel > 1.")
    pipeline_scatter_gather: bool = Field(False, description="Megatron-LM's scatter/gather pipeline sends (--scatter-gather-tensors-in-pipeline, on by default in Megatron-LM 2021-2022, gone from Megatron-Core): without sequence_parallel each tensor-parallel rank sends 1/tensor_parallel of the stage's activation and the receiver all-gathers it over the tensor-parallel group.")
    overlap_param_gather: bool = Field(False, description="Megatron-Core distributed optimizer (strategy zero1)"
                                       " overlap_param_gather (--overlap-param-gather; Megatron-Core's default false):"
                                       " the parameter all-gather after the step waits for the next forward and hides"
                                       " behind it bucket by bucket, the first bucket exposed; false: it runs right"
                                       " after the step, exposed. Needs strategy zero1.")
    grad_reduce_after_backward: bool = Field(False, description="ddp / zero1 / zero2: the data-parallel gradient"
                                             " reduction runs once after the step's last backward, one all-reduce of"
                                             " the whole gradient buffer, exposed (nanotron with"
                                             " accumulate_grad_in_fp32 and ZeRO-1 wraps no DDP); false: bucketed and"
                                             " overlapped with the backward.")
    grad_accumulation_pass: bool = Field(False, description="precision.grads fp32: every micro-batch's 16-bit"
                                         " gradients are added into the fp32 gradient buffer by one add_ per parameter"
                                         " tensor, a memory-bound pass over the rank's parameters (nanotron's"
                                         " accumulate_grad_in_fp32, FP32GradientAccumulator); false: the accumulation"
                                         " runs inside the weight-gradient GEMM (Megatron-Core's"
                                         " gradient_accumulation_fusion) or none is timed. In memory the same"
                                         " accumulator: its fp32 buffer of every parameter the rank holds is kept from"
                                         " init (ZeRO-1 too), the bf16 .grad tensors live until each backward returns,"
                                         " and torch DDP (ZeRO-0, data parallel > 1 only) buckets the bf16 gradients.")
    context_parallel: int = Field(1, ge=1, le=1024, description="Sequence split over this many ranks (context parallel / Ulysses).")
    context_parallel_kind: ContextParallelKind = Field(ContextParallelKind.RING, description="ring (Megatron CP) | ulysses (verl, OpenRLHF).")
    pipeline_parallel: int = Field(1, ge=1, le=1024, description="Pipeline stages; batch.grad_accum is the micro-batches per step.")
    pipeline_schedule: PipelineSchedule = Field(PipelineSchedule.ONE_F_ONE_B, description="1f1b | interleaved.")
    virtual_stages: int = Field(1, ge=1, le=1024, description="Model chunks per pipeline rank (interleaved schedule).")
    expert_parallel: int = Field(1, ge=1, le=1024, description="MoE experts split over this many ranks (inside the tensor x context x data ranks of a stage: Megatron-Core parallel folding).")
    expert_tensor_parallel: int = Field(1, ge=1, le=1024, description="Tensor parallel size inside each expert.")
    moe_dispatcher: MoeDispatcher = Field(MoeDispatcher.ALLTOALL, description="alltoall (Megatron-Core"
                                          " moe_token_dispatcher_type alltoall: one copy per routed expert) | deepep"
                                          " (DeepEP / HybridEP, Megatron-Core flex: one copy per destination node over"
                                          " the network, fanned out over NVLink) | allgather (Megatron-Core's"
                                          " default allgather: every rank's tokens all-gathered over the expert"
                                          " tensor x expert parallel ranks, the output reduce-scattered back).")
    moe_comm_overlap: bool = Field(False, description="Megatron-Core overlap_moe_expert_parallel_comm (Megatron-Bridge"
                                   " moe_a2a_overlap): the combined 1F1B schedule hides a micro-batch's expert-parallel"
                                   " all-to-alls behind another's compute; needs expert_parallel > 1, no full"
                                   " recompute and, with pipeline_parallel > 1, virtual_stages > 1.")
    moe_routing: MoeRouting = Field(MoeRouting.UNIFORM, description="uniform (each token's experts spread as if drawn"
                                    " at random: a trained router's or Megatron-Core moe_router_force_load_balancing's"
                                    " pick; how unevenly a trained router loads the ranks is moe_router_load) |"
                                    " consecutive (NeMo Automodel's FakeBalancedGate: token i takes experts i*k .."
                                    " i*k+k-1, balanced by construction whatever moe_router_load says); sets how many"
                                    " nodes and GPUs a DeepEP dispatch reaches per token.")
    moe_router_load: MoeRouterLoad = Field(MoeRouterLoad.TRAINED, description="trained (the model's router on real"
                                           " tokens, dropless: each expert-parallel rank waits at every MoE layer for"
                                           " the busiest one, its expert GEMMs and all-to-all rows scaled by"
                                           " compute.moe_time.busiest_rank_load_factor) | balanced (Megatron-Core"
                                           " moe_router_force_load_balancing, NeMo Automodel's FakeBalancedGate, or"
                                           " token drop at capacity factor 1: every rank routes the mean). Priced for"
                                           " qwen3_moe only (the one published spread; other families time balanced);"
                                           " its checks cover EP 4 and 8, larger EP extrapolates. No effect with"
                                           " expert_parallel 1 or moe_routing consecutive; balanced is refused on a"
                                           " dense model; memory is unchanged.")
    moe_launch: MoeLaunch | None = Field(None, description="fused (Megatron-Core's router and dispatcher captured"
                                         " in CUDA graphs or fused: their launches priced like the other fused"
                                         " work) | eager (cuda_graph_impl none and moe_router_fusion false: each"
                                         " router and dispatcher op pays a host launch); null: Megatron-Core's"
                                         " defaults, eager (resolved_moe_launch). Megatron-Core MoE cards only.")
    moe_expert_mlp: MoeExpertMlp | None = Field(None, description="unfused (Megatron-Core TEGroupedMLP's own forward:"
                                                " its eager activation and, with expert biases, the per-expert bias"
                                                " loop) | te_ops (use_transformer_engine_op_fuser: one fused Transformer"
                                                " Engine op sequence, neither runs; Megatron-Core >= 0.18, needs"
                                                " expert_tensor_parallel 1, moe_experts grouped and SwiGLU, gpt-oss or"
                                                " squared-ReLU experts); null: unfused. Megatron-Core MoE cards only.")
    moe_load_balancing: MoeLoadBalancing | None = Field(None, description="none | aux_loss | seq_aux_loss: the load-"
                                                        "balancing loss Megatron-Core's router computes each training"
                                                        " forward (moe_router_load_balancing_type with a non-zero"
                                                        " moe_aux_loss_coeff); its ops are counted with the router's."
                                                        " null: not stated, none counted. Megatron-Core MoE cards"
                                                        " only.")
    moe_experts: MoeExperts = Field(MoeExperts.GROUPED, description="grouped (the routed experts as one grouped GEMM"
                                    " per projection: transformers v5 grouped_mm, Megatron-Core TEGroupedMLP) |"
                                    " grouped_streams (one grouped call per projection looping one cuBLAS GEMM per"
                                    " local expert over 4 streams: grouped_gemm.ops.gmm, NeMo Automodel experts gmm)"
                                    " | grouped_padded (torch._grouped_mm behind torchtitan's expert_parallel wrapper:"
                                    " the routed rows gathered into a buffer padded to 8 rows per expert and scattered"
                                    " back; torchtitan, prime-rl full-parameter MoE)"
                                    " | loop"
                                    " (transformers < 5's sparse MoE block: a Python loop over the experts that get"
                                    " tokens, three small GEMMs and a host sync each; LLaMA-Factory, ms-swift swift sft,"
                                    " TRL and verl FSDP on transformers 4.53-4.x) | loop_all (transformers 4.51-4.52:"
                                    " the loop over every expert by index, one host sync per expert and none per"
                                    " layer) | loop_v5 (transformers v5's eager experts, set_experts_implementation"
                                    " eager: the loop over the hit experts on slices of the two stacked expert"
                                    " weights, two GEMMs and five host syncs each; transformers >= 5, MoE models but"
                                    " gpt-oss, without tensor, pipeline or expert parallel, not under zero3; under"
                                    " QLoRA the stacks stay bf16, bitsandbytes quantising nn.Linear modules only).")
    moe_zero3_leaf: bool = Field(False, description="With moe_experts loop under strategy zero3: the MoE block is a"
                                 " DeepSpeed ZeRO-3 leaf module (deepspeed.utils.set_z3_leaf_modules), so its experts'"
                                 " weights are gathered together when the block starts; false: each expert linear is a"
                                 " module of its own, gathered (one all-gather each) as the loop reaches it.")
    moe_experts_hit: float | None = Field(None, gt=0.0, le=1.0, description="With moe_experts loop or loop_v5: the"
                                          " share of a layer's routed experts that at least one of its tokens picks,"
                                          " averaged over the MoE layers (above 0, at most 1); the per-expert loop"
                                          " runs, launches and syncs only those, the routed rows spread over them."
                                          " null: every expert gets its share, as under a trained, load-balanced"
                                          " router. A randomly initialised router concentrates deeper layers' picks"
                                          " (benchmarks/random_init_routing.py).")
    pipeline_first_stage_layers: int | None = Field(None, ge=1, le=100_000, description="Decoder layers on the first"
                                                    " pipeline stage (Megatron-Core num_layers_in_first_pipeline_stage);"
                                                    " default: even split.")
    pipeline_last_stage_layers: int | None = Field(None, ge=1, le=100_000, description="Decoder layers on the last"
                                                   " pipeline stage (Megatron-Core num_layers_in_last_pipeline_stage);"
                                                   " default: even split.")
    pipeline_layout: tuple[int, ...] | None = Field(
        None, max_length=1_048_576, description="Decoder layers of every virtual pipeline stage in model"
        " order, pipeline_parallel x virtual_stages entries (0 allowed) summing to the model's layers; stage i runs on"
        " pipeline rank i % pipeline_parallel (Megatron-Core pipeline_model_parallel_layout, decoder layers only: the"
        " embedding is on stage 0, the head and loss on the last). Default: even split.")

    @model_validator(mode="before")
    @classmethod
    def _selective(cls, v: Any) -> Any:
        """``gradient_checkpointing: selective`` is per-op selective checkpointing (layers not fully recomputed);
        a ``recompute_modules`` list makes it Megatron-Core's module recompute (``selective_checkpointing:
        modules``)."""
        if isinstance(v, dict) and v.get("recompute_modules") is not None:
            v = dict(v)
            v.setdefault("selective_checkpointing", SelectiveCheckpointing.MODULES.value)
            v.setdefault("gradient_checkpointing", False)  # Megatron's selective granularity: no full recompute
        if isinstance(v, dict) and isinstance(v.get("gradient_checkpointing"), str) and \
                v["gradient_checkpointing"].strip().lower() == "selective":
            v = dict(v, gradient_checkpointing=False)
            v.setdefault("selective_checkpointing", SelectiveCheckpointing.OP.value)
            if str(getattr(v["selective_checkpointing"], "value", v["selective_checkpointing"])) == "none":
                raise ValueError("parallel.selective_checkpointing: 'none' contradicts gradient_checkpointing: selective;"
                                 " allowed: op, core_attention, mla_up_proj, layernorm_moe_act, modules")
        return v

    @model_validator(mode="after")
    def _one_checkpointing(self) -> "ParallelSection":
        if (why := offload_strategy_refusal(strategy=self.strategy, offload=self.offload)) is not None:
            raise ValueError(why)
        if self.fsdp_no_sync and not (self.strategy is Strategy.FSDP and self.fsdp_version is FsdpVersion.FSDP1):
            raise ValueError(f"parallel.fsdp_no_sync: FSDP1's no_sync (strategy fsdp, fsdp_version fsdp1); got strategy"
                             f" '{self.strategy.value}', fsdp_version '{self.fsdp_version.value}'; allowed with them: false")
        if self.unsloth_layers and self.compile:
            raise ValueError("parallel.unsloth_layers: Unsloth's decoder layers run eagerly, not under torch.compile;"
                             " allowed with compile true: false (or compile false with unsloth_layers true)")
        if self.gradient_checkpointing and self.selective_checkpointing is not SelectiveCheckpointing.NONE:
            raise ValueError(f"parallel.selective_checkpointing: '{self.selective_checkpointing.value}' with"
                             " gradient_checkpointing: true (full recompute already); allowed with it: none")
        if not self.sac_saves_attention and self.selective_checkpointing is not SelectiveCheckpointing.OP:
            raise ValueError("parallel.sac_saves_attention: false describes torchtitan's per-op policy; it needs"
                             f" selective_checkpointing: op, got '{self.selective_checkpointing.value}'; allowed"
                             " otherwise: true")
        mods = self.recompute_modules
        allowed_mods = ", ".join(m.value for m in RecomputeModule)
        if self.selective_checkpointing is SelectiveCheckpointing.MODULES and not mods:
            raise ValueError("parallel.recompute_modules: selective_checkpointing 'modules' needs a non-empty list;"
                             f" allowed entries: {allowed_mods}")
        if mods is not None and self.selective_checkpointing is not SelectiveCheckpointing.MODULES:
            raise ValueError(f"parallel.recompute_modules: given with selective_checkpointing"
                             f" '{self.selective_checkpointing.value}'; allowed with it: null (or"
                             " selective_checkpointing: modules)")
        if mods is not None and len(set(mods)) != len(mods):
            raise ValueError(f"parallel.recompute_modules: an entry repeats ({', '.join(m.value for m in mods)});"
                             f" allowed: each of {allowed_mods} at most once")
        k = self.activation_offload_layers
        if k is not None and not self.activation_offload:
            raise ValueError(f"parallel.activation_offload_layers: {k} needs activation_offload: true; allowed"
                             " without it: null")
        if k is not None and (self.gradient_checkpointing or self.selective_checkpointing is not SelectiveCheckpointing.NONE
                              or self.pipeline_parallel > 1):
            # Megatron-Core refuses cpu_offloading with recompute or pipeline parallelism
            # (megatron/core/transformer/transformer_config.py l.1771-1779, NVIDIA/Megatron-LM
            # @2a75ac12c54ba6a42b34024756820bf819a2e25f)
            raise ValueError(f"parallel.activation_offload_layers: {k} is Megatron-Core's cpu_offloading, which runs"
                             " without activation recompute and without pipeline parallelism; allowed with them: null")
        megatron = self.tensor_parallel_impl is TensorParallelImpl.MEGATRON
        if self.pipeline_outputs_deallocated and not (megatron and self.pipeline_parallel > 1):
            # Megatron-Core's deallocate_pipeline_outputs frees a sent stage output: only a Megatron-Core pipeline
            raise ValueError("parallel.pipeline_outputs_deallocated: true is Megatron-Core's deallocate_pipeline_outputs,"
                             " read with tensor_parallel_impl: megatron and pipeline_parallel > 1 (got"
                             f" {self.tensor_parallel_impl.value}, pipeline_parallel {self.pipeline_parallel});"
                             " allowed otherwise: false")
        if self.model_parallel_kernels is ModelParallelKernels.EAGER and self.tensor_parallel_impl is not TensorParallelImpl.DTENSOR:
            raise ValueError("parallel.model_parallel_kernels: 'eager' is the model's own modules under torch's DTensor"
                             " plan, read with tensor_parallel_impl: dtensor (got"
                             f" {self.tensor_parallel_impl.value}); allowed otherwise: fused")
        if self.moe_launch is not None and not megatron:
            raise ValueError(f"parallel.moe_launch: '{self.moe_launch.value}' describes Megatron-Core's router and"
                             " dispatcher, read with tensor_parallel_impl: megatron (got"
                             f" {self.tensor_parallel_impl.value}); allowed otherwise: null")
        if self.moe_expert_mlp is not None and not megatron:
            raise ValueError(f"parallel.moe_expert_mlp: '{self.moe_expert_mlp.value}' describes Megatron-Core's"
                             " TEGroupedMLP, read with tensor_parallel_impl: megatron (got"
                             f" {self.tensor_parallel_impl.value}); allowed otherwise: null")
        if self.moe_expert_mlp is MoeExpertMlp.TE_OPS:
            # Megatron-Core's TEGroupedMLP asserts _is_fused_impl_supported() under use_transformer_engine_op_fuser
            # (NVIDIA/Megatron-LM megatron/core/transformer/moe/experts.py l.269-272, l.315-372
            # @ba7b5ebce12af60627a80985792a1449ce45f46c, core_v0.18.0, the first release with the field): no expert
            # tensor parallelism (l.330, the expt_tp group), te GroupedLinear fc1 / fc2 (l.335-338: TEGroupedMLP, not
            # SequentialMLP's per-expert loop)
            if self.expert_tensor_parallel > 1:
                raise ValueError("parallel.moe_expert_mlp: 'te_ops' needs expert tensor parallelism 1 (got"
                                 f" expert_tensor_parallel {self.expert_tensor_parallel}); allowed here: unfused")
            if self.moe_experts is not MoeExperts.GROUPED:
                raise ValueError("parallel.moe_expert_mlp: 'te_ops' fuses TEGroupedMLP's grouped linears (moe_experts"
                                 f" grouped; got {self.moe_experts.value}); allowed here: unfused")
            if not self.moe_probs_in_experts:
                raise ValueError("parallel.moe_expert_mlp: 'te_ops' needs Megatron-Core >= 0.18, which multiplies"
                                 " the routing probabilities in the experts (moe_probs_in_experts: false is 0.11 /"
                                 " 0.12.0); allowed here: unfused")
        if self.moe_load_balancing is not None and not megatron:
            raise ValueError(f"parallel.moe_load_balancing: '{self.moe_load_balancing.value}' describes Megatron-Core's"
                             " router, read with tensor_parallel_impl: megatron (got"
                             f" {self.tensor_parallel_impl.value}); allowed otherwise: null")
        n = self.checkpoint_every_n_layers
        if n is not None and self.gradient_checkpointing is not True:
            raise ValueError(f"parallel.checkpoint_every_n_layers: {n} needs gradient_checkpointing: true (the chosen"
                             " layers are fully recomputed); allowed without it: null")
        if n is not None and self.model_parallel * self.expert_parallel > 1:
            raise ValueError(f"parallel.checkpoint_every_n_layers: {n} is modelled without tensor, context, pipeline"
                             " or expert parallel; allowed with them: null")
        return self

    def checkpointed_layers(self, num_layers: int) -> tuple[bool, ...] | None:
        """Which decoder layers run under checkpoint; None: all of them when ``checkpoints_layers`` (else none).
        ``checkpoint_every_n_layers`` n: ``every_nth_layer``."""
        n = self.checkpoint_every_n_layers
        if n is None or not self.gradient_checkpointing:
            return None
        return every_nth_layer(num_layers=num_layers, every_n_layers=n)

    @property
    def checkpoints_layers(self) -> bool:
        """Each decoder layer runs under torch's checkpoint (full or selective): memory keeps the layer input
        plus what the selective policy saves, and backward re-runs the layer. Not under Megatron-Core's module
        recomputes other than ``core_attn``, which free and re-run a few ops only (the layers keep their other
        activations)."""
        return self.gradient_checkpointing or self.layer_selective_checkpointing is not SelectiveCheckpointing.NONE

    @property
    def megatron_recompute_modules(self) -> frozenset[RecomputeModule]:
        """Megatron-Core's ``recompute_modules`` the card states: ``recompute_modules`` under
        ``selective_checkpointing: modules``, [core_attn] for ``core_attention`` (Megatron-Core's default list),
        [mla_up_proj], [layernorm, moe_act] for ``layernorm_moe_act``; empty for none, op and full recompute."""
        s = self.selective_checkpointing
        if s is SelectiveCheckpointing.MODULES:
            return frozenset(self.recompute_modules or ())
        return {SelectiveCheckpointing.CORE_ATTENTION: frozenset({RecomputeModule.CORE_ATTN}),
                SelectiveCheckpointing.MLA_UP_PROJ: frozenset({RecomputeModule.MLA_UP_PROJ}),
                SelectiveCheckpointing.LAYERNORM_MOE_ACT: frozenset({RecomputeModule.LAYERNORM,
                                                                     RecomputeModule.MOE_ACT})}.get(s, frozenset())

    @property
    def fsdp2(self) -> bool:
        """An FSDP strategy (fsdp, fsdp_grad_op, hsdp) run with FSDP2 (``fully_shard``; ``fsdp_version``)."""
        return self.strategy in FSDP_STRATEGIES and self.fsdp_version is FsdpVersion.FSDP2

    @property
    def layer_selective_checkpointing(self) -> SelectiveCheckpointing:
        """The per-op selective policy of a checkpointed layer: ``core_attention`` where Megatron-Core's list holds
        core_attn, none under its other module recomputes, which free a few ops only (memory:
        ``plan.ranks.megatron_recompute_freed``; time: ``compute.inventory.StepInventory.recompute_modules``)."""
        s = self.selective_checkpointing
        if s in (SelectiveCheckpointing.NONE, SelectiveCheckpointing.OP):
            return s
        core = RecomputeModule.CORE_ATTN in self.megatron_recompute_modules
        return SelectiveCheckpointing.CORE_ATTENTION if core else SelectiveCheckpointing.NONE

    @property
    def resolved_moe_launch(self) -> MoeLaunch | None:
        """How Megatron-Core's router and dispatcher launch (``compute.moe_time`` "Eager router and dispatcher
        launches"): the card's ``moe_launch``, else Megatron-Core's defaults under ``tensor_parallel_impl: megatron``
        -- ``moe_router_fusion`` False and ``cuda_graph_impl`` "none" (NVIDIA/Megatron-LM
        megatron/core/transformer/transformer_config.py l.792 and l.857 @d30c3ae5469fe3f6a64d4fd2e63b6e7f7844ea81),
        so ``MoeLaunch.EAGER``; None on other implementations (no Megatron-Core router)."""
        if self.moe_launch is not None:
            return self.moe_launch
        return MoeLaunch.EAGER if self.tensor_parallel_impl is TensorParallelImpl.MEGATRON else None

    @property
    def model_parallel(self) -> int:
        """tensor x context x pipeline: the ranks one data-parallel replica spans."""
        return self.tensor_parallel * self.context_parallel * self.pipeline_parallel


class BatchSection(_Section):
    micro_batch_size: int = Field(1, ge=1, le=65536)
    seq_len: int = Field(2048, ge=1, le=10_000_000)
    grad_accum: int = Field(1, ge=1, le=1_000_000)
    packed_sample_tokens: int | None = Field(
        None, ge=1, le=10_000_000,
        description="Rows are packs of several samples with attention per sample (varlen FlashAttention / cu_seqlens,"
                    " FlexAttention block mask, Transformer Engine thd): the mean tokens per sample; null: each row is"
                    " one causal sequence of seq_len.")
    packed_sample_length_cv: float | None = Field(
        None, ge=0, le=100,
        description="With packed_sample_tokens: the samples' length spread, std / mean (attention work ~ mean^2"
                    " (1 + cv^2) per sample); null: every sample the mean length (stated in the plan).")
    packed_rope_loop: bool = Field(
        False,
        description="With packed_sample_tokens: rotary embeddings are applied one packed sample at a time in a Python"
                    " loop (Megatron-Core's unfused thd RoPE, apply_rope_fusion False): per-sample kernels in every"
                    " attention layer and host syncs per call, one (.tolist(), core_v0.10 to 0.14) or two (.tolist()"
                    " and .item(), core_v0.19 and Megatron-LM main), by software.megatron-core (null: the preset's"
                    " pinned release, spec.card.thd_rope_loop_of; 0.15 to 0.18 run no per-sample loop and are"
                    " refused) (compute.inventory.thd_rope_loop). Under method"
                    " ppo or grpo with packed log-prob and update passes (rollout.packed_sequences) each rollout"
                    " sequence is one sample (verl's Megatron actor packs every micro-batch into one thd row), so"
                    " packed_sample_tokens is not needed there.")
    padding: Padding = Field(
        Padding.NONE,
        description="none: rows are full (or the mask is all ones), attention is causal. mask: every sample is padded"
                    " to seq_len and an attention_mask with zeros is passed to a transformers model: under sdpa"
                    " transformers hands SDPA the 4-D mask without is_causal, so its memory-efficient kernel runs"
                    " every key block (no causal skip; plan.time.padding_mask_attention). Read for sft, rm and dpo.")

    @model_validator(mode="after")
    def _packed(self) -> BatchSection:
        mean, cv = self.packed_sample_tokens, self.packed_sample_length_cv
        if mean is not None and self.padding is Padding.MASK:
            raise ValueError("batch.padding: mask pads each sample to a row of its own; batch.packed_sample_tokens packs"
                             " several samples into a row; allowed with packed_sample_tokens: padding none")
        if mean is None:
            if cv is not None:
                raise ValueError("batch.packed_sample_length_cv: only read with batch.packed_sample_tokens (the mean"
                                 " tokens per packed sample); allowed without it: null")
            return self
        if mean > self.seq_len:
            raise ValueError(f"batch.packed_sample_tokens: {mean} is more than a row (batch.seq_len {self.seq_len});"
                             f" allowed: 1 to {self.seq_len}, or null (one sequence per row)")
        # a sample is at most a row, so E[len^2] <= seq_len * E[len]: mean (1 + cv^2) <= seq_len
        if cv is not None and mean * (1 + cv * cv) > self.seq_len:
            top = (self.seq_len / mean - 1) ** 0.5
            raise ValueError(f"batch.packed_sample_length_cv: {cv:g} with a mean of {mean} tokens implies samples"
                             f" longer than the {self.seq_len}-token row; allowed: 0 to {top:.3g}")
        return self


class LossSection(_Section):
    chunked: bool = Field(False, description="Fused/chunked linear cross-entropy (no full logits).")
    kernel: LossKernel = Field(
        LossKernel.LIGER, description="With chunked: liger (fused linear cross-entropy), trl (TRL's fused lm_head log-probs),"
        " prime_rl (prime-rl's chunked log-prob/entropy head), torchtune (CEWithChunkedOutputLoss) or unsloth (Unsloth's"
        " efficient GRPO loss, one sequence's logits at a time; method grpo with preset unsloth). Without chunked: flash_attn (flash-attn's CrossEntropyLoss, llm-foundry's"
        " fused_crossentropy: bf16 logits, no fp32 copy; for ppo/grpo verl's actor log-probs, which call the same"
        " kernel whenever flash-attn is installed), te (Transformer Engine's parallel_cross_entropy, Megatron-Core's"
        " cross_entropy_fusion_impl 'te': bf16 logits, gradient in place; tensor_parallel_impl megatron); any other"
        " value is the eager fp32 loss."
    )
    inplace_backward: bool = Field(
        False, description="With kernel flash_attn: its inplace_backward=True, the gradient written into the logits"
                           " (flash-attn's default and llm-foundry's: false, a new gradient buffer; verl's actor: true"
                           " unless the update computes the entropy).")
    temperature_copy: bool = Field(
        False, description="With kernel flash_attn for ppo/grpo: verl divides the logits by the temperature into a copy"
                           " (its engine workers from 51504d84, 2026-07-06) instead of in place on the squeezed view.")
    compiled: bool = Field(
        False, description="The eager cross-entropy over the full logits runs under torch.compile (torchtitan's"
        " build_cross_entropy_loss with training.compile, from pytorch/torchtitan bbb1b616 of 2025-04-02): it saves the"
        " compute-dtype logits and two fp32 values per row instead of the fp32 log-softmax, and its backward writes the"
        " compute-dtype gradient directly (memory.logits.compiled_ce_bytes). Not with loss.chunked or kernel flash_attn"
        " (their own kernels), method sft only, not under tensor parallelism (loss_parallel) or Megatron-Core.")
    upcast: bool = Field(
        True, description="The eager loss over the full logits makes an fp32 copy (transformers' ForCausalLMLoss"
        " logits.float(), or autocast's fp32 cross_entropy). false: the model's own CrossEntropyLoss scores the"
        " compute-dtype logits as they are, outside autocast (Qwen (1.0)'s remote QWenLMHeadModel under DeepSpeed,"
        " where accelerate turns native AMP off): memory.logits.compute_dtype_ce_bytes. Memory only; method sft,"
        " not with loss.chunked, kernel flash_attn, loss.compiled, tensor parallelism or Megatron-Core.")
    logprob_entropy: LogprobEntropy = Field(
        LogprobEntropy.NONE, description="ppo/grpo: none | old_policy | every_pass: the no-grad log-prob passes that"
        " also take the entropy of every token's logits, compiled (verl's FSDP actor with use_remove_padding:"
        " torch.compile'd entropy_from_logits; old_policy: compute_log_prob(calculate_entropy=True) from verl #1100,"
        " 2025-04-17; every_pass: the reference pass too, as verl v0.3 did). Time: compute.inventory."
        "VERL_ENTROPY_COMPILED_BYTES; memory: per-row buffers only on a GPU (memory.logits.VERL_ENTROPY_ROW_BYTES).")

    triton: bool = Field(
        True, description="With loss.kernel trl: TRL's fused lm_head runs its Triton path (TRL 1.16 add_fused_lm_head,"
        " trl/trainer/utils.py l.1640-1645: compact = _use_triton(device), Triton importable and a cuda/xpu device), which"
        " scores only the labelled rows (GRPO: the completion's tokens). false: no Triton (a CPU run such as trainfit"
        " accept's, or Triton not installed): every position is scored (methods.roles.logit_positions).")

    @model_validator(mode="after")
    def _kernel_fits_chunked(self) -> LossSection:
        if self.chunked and self.kernel in (LossKernel.FLASH_ATTN, LossKernel.TE):
            raise ValueError(f"loss.kernel: '{self.kernel.value}' scores the full logits (loss.chunked false); allowed"
                             " with loss.chunked true: liger, trl, prime_rl, torchtune, unsloth")
        if self.kernel is LossKernel.UNSLOTH and not self.chunked:
            raise ValueError("loss.kernel: 'unsloth' is Unsloth's chunked GRPO loss (no full logits), read with"
                             " loss.chunked true; allowed with loss.chunked false: liger, flash_attn, te")
        if not self.triton and not (self.chunked and self.kernel is LossKernel.TRL):
            raise ValueError(f"loss.triton: only read with loss.chunked true and loss.kernel trl (TRL's fused lm_head;"
                             f" kernel is '{self.kernel.value}', chunked {str(self.chunked).lower()}); allowed otherwise:"
                             " true")
        if self.temperature_copy and self.kernel is not LossKernel.FLASH_ATTN:
            raise ValueError(f"loss.temperature_copy: only read with loss.kernel flash_attn (kernel is"
                             f" '{self.kernel.value}'); allowed with it: false")
        if self.compiled and (self.chunked or self.kernel is LossKernel.FLASH_ATTN):
            raise ValueError("loss.compiled: the compiled eager cross-entropy over the full logits; with loss.chunked"
                             " or loss.kernel flash_attn the kernel decides (torchtune's compiled chunks: parallel.compile);"
                             " allowed with them: false")
        if self.inplace_backward and self.kernel is not LossKernel.FLASH_ATTN:
            raise ValueError(f"loss.inplace_backward: only read with loss.kernel flash_attn (kernel is"
                             f" '{self.kernel.value}'); allowed with it: false")
        return self



class DeepSpeedSection(_Section):
    """DeepSpeed ZeRO settings that size its buffers (strategies zero1, zero2, zero3). Defaults are
    DeepSpeed 0.19.8's (runtime/zero/config.py); "auto" is what the HF Trainer fills in (hidden^2,
    0.9 hidden^2, 10 hidden). Element counts, not bytes."""

    reduce_bucket_size: int | str = Field(500_000_000, description="Elements per IPG reduce bucket, or auto (hidden^2).")
    allgather_bucket_size: int | str = Field(500_000_000, description="Elements per all-gather chunk (stage 1-2; no allocation).")
    stage3_prefetch_bucket_size: int | str = Field(50_000_000, description="Elements prefetched ahead, or auto (0.9 hidden^2).")
    stage3_max_live_parameters: int | str = Field(1_000_000_000, description="Gathered elements the prefetcher may hold.")
    stage3_max_reuse_distance: int | str = Field(1_000_000_000, description="Elements of trace within which a gathered parameter is kept.")
    stage3_param_persistence_threshold: int | str = Field(100_000, description="Parameters this small stay gathered, or auto (10 hidden).")
    sub_group_size: int | str = Field(1_000_000_000, description="Elements of fp32 partition the stage-3 optimizer steps at once.")
    contiguous_gradients: bool = Field(True, description="Gradients copied into the IPG bucket / a flat partition.")
    overlap_comm: bool | None = Field(None, description="Double IPG buckets (stage 1-2); default: true for stage 3 only.")

    @field_validator("reduce_bucket_size", "allgather_bucket_size", "stage3_prefetch_bucket_size",
                     "stage3_max_live_parameters", "stage3_max_reuse_distance", "stage3_param_persistence_threshold",
                     "sub_group_size", mode="before")
    @classmethod
    def _count_or_auto(cls, v: Any, info: Any) -> Any:
        if isinstance(v, str) and v.strip().lower() == "auto":
            return "auto"
        if isinstance(v, str):  # YAML 1.1 reads 5e8 (no dot, no exponent sign) as text: the count the hint gives
            try:
                v = float(v.strip())
            except ValueError:
                pass
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or not 0 <= v <= 1e13:
            raise ValueError(f"deepspeed.{info.field_name}: '{v}' is not allowed; allowed: auto or an element count"
                             " from 0 to 1e13 (e.g. 5e8)")
        return int(v)


class LoopSection(_Section):
    """How the training loop holds tensors (custom loops differ from the HF Trainer's)."""

    keeps_output_through_backward: bool = Field(
        False, description="The loop keeps the model output (its logits, and the loss with its autograd graph) bound"
        " from the loss until the next micro-batch's forward returns: out = model(...); out.loss.backward();"
        " optimizer.step() in one loop body, rebound only by the next out = model(...) (Lit-GPT's finetune scripts,"
        " torchtune's recipes before 2024-06, PEFT's MetaMathQA run.py). The logits are held through backward and the"
        " optimizer step and beside the next forward's output; with a software.bitsandbytes pin before 0.43.2 the"
        " previous micro-batch's MatMul4Bit inputs to the next loss.")
    kept_output_dtype: KeptOutputDtype = Field(
        KeptOutputDtype.COMPUTE, description="With keeps_output_through_backward: compute (the logits as lm_head returns"
        " them) or fp32 (the loop casts them with .float() before the loss and keeps the copy; the compute-dtype logits"
        " are dropped: prime-rl's SFT trainer).")
    returns_kv_cache: bool = Field(
        False, description="The model's forward returns every layer's keys and values (transformers'"
        " past_key_values, config.use_cache true) while its decoder layers are checkpointed by a wrapper outside the"
        " model, so the model's own gradient_checkpointing flag never turns use_cache off (torch's"
        " apply_activation_checkpointing: llama-recipes' FSDP runs, transformers 4.31 modeling_llama.py l.658-663)."
        " The cache lives to the end of the forward, and with keeps_output_through_backward through backward and the"
        " optimizer step (memory.returned_cache). Read with parallel.gradient_checkpointing true.")
    loss_input_copy: bool = Field(
        False, description="With keeps_output_through_backward and loss.compiled: the loop passes the loss a contiguous"
        " copy of the logits without their last position and keeps the logits themselves, so the compiled loss saves"
        " the copy beside the kept logits (OLMo-core Trainer.get_losses: logits[..., :-1, :].contiguous(),"
        " allenai/OLMo-core src/olmo_core/train/trainer.py l.924 @4f2c8ef59f9268b7f3aae0c127b52a45d4c1c706). A copy"
        " only with more than one sequence per micro-batch (one sequence: the slice is contiguous, .contiguous() returns"
        " it); at any micro-batch the slice stays in autograd, so backward's slice_backward fills a zeroed gradient of"
        " the logits' shape beside the slice's and copies it in (two kernels; memory at the start of backward).")
    token_scan_syncs: float = Field(
        0.0, ge=0.0, le=16.0, description="Host-synchronising reads of a device scalar per token of every micro-batch,"
        " each behind an elementwise kernel: a Python loop that walks a GPU tensor element by element (prime-rl's RL"
        " trainer before 2026-06-15: get_response_lengths compares position_ids[i] == 0 on the GPU for every token, 1)."
        " 0: none.")
    attention_call_syncs: float = Field(
        0.0, ge=0.0, le=16.0, description="Host-synchronising reads of a device value the model's own code makes in"
        " every attention layer's forward, the recompute's included: the host waits for the GPU to drain its queue"
        " each time. Unsloth (2026.1) on packed rows: 2 (its attention reads the packed lengths' max with .item() and"
        " copies them to the host for xFormers' block mask in every layer: trainfit.methods.unsloth"
        " UNSLOTH_PACKED_ATTENTION_SYNCS). 0: none. Step time only.")
    launcher: Launcher | None = Field(
        None, description="torchrun | ray | spawn: the process launcher, which sets each rank's OMP_NUM_THREADS, the"
        " threads of its host-side torch ops (torch's AdamW step and FSDP2's gradient add under FSDP CPU offload):"
        " torchrun 1 with more than one process a node, ray the actor's CPU allotment (1 by default) on any node,"
        " spawn (torch.multiprocessing.spawn, e.g. Answer.AI's fsdp_qlora) none, torch's default pool of the host's"
        " cores. null: ray under the verl, openrlhf, nemo-rl, skyrl, miles and slime presets, else torchrun (PPO / GRPO"
        " without a preset included: TRL's trainer is planned, under accelerate / torchrun; plan.time.launcher_of).")
    launch_blocking: bool = Field(
        False, description="The run sets CUDA_LAUNCH_BLOCKING=1: every kernel launch returns only when the kernel has"
        " finished, so the host's dispatch of each kernel and the kernel itself run one after the other"
        " (compute.training.pass_seconds). BigScience's BLOOM-176B scripts set it to avoid a hang.")
    checkpoint_reentrant: bool | None = Field(
        None, description="Full activation recompute by a re-entrant checkpoint (torch.utils.checkpoint"
        " use_reentrant=True, Megatron's and DeepSpeed's CheckpointFunction): the whole layer re-runs in the"
        " backward, its last linear and residual add included; false: torch's non-re-entrant checkpoint, which stops"
        " at the last saved tensor. None: the default of the card's own settings (plan.checkpointing: Megatron-Core"
        " layers and the llamafactory presets re-entrant; transformers' layers by the HF Trainer re-entrant on a"
        " software.transformers pin before 5, unless a TRL run from 0.27 on; TRL with an adapter under ZeRO-3"
        " re-entrant; else non-re-entrant). Time, and the memory of a software.bitsandbytes pin before 0.43.2 (its"
        " MatMul4Bit inputs stay alive under a non-re-entrant checkpoint: memory.bnb_saved_input).")

    @model_validator(mode="after")
    def _dtype_needs_kept(self) -> LoopSection:
        if self.kept_output_dtype is not KeptOutputDtype.COMPUTE and not self.keeps_output_through_backward:
            raise ValueError(f"loop.kept_output_dtype: only read with loop.keeps_output_through_backward true (got"
                             f" '{self.kept_output_dtype.value}'); allowed without it: compute")
        return self


class ModelRef(_Section):
    id: str | None = None
    path: str | None = None
    revision: str | None = None
    config: dict[str, Any] | None = Field(None, description="An inline Hugging Face config.json object.")
    params: float | None = Field(None, gt=0, le=1e14)
    reference: str | None = Field(None, description="Reference shape for a bare parameter count.")
    mtp: bool = Field(False, description="Train the model's multi-token-prediction modules too (DeepSeek-V3:"
                                         " num_nextn_predict_layers); off by default, as transformers builds none.")

    @model_validator(mode="after")
    def _reference_is_read(self) -> ModelRef:
        """``reference`` is the shape a bare ``params`` count assumes (``catalog.bare``): beside an id, a path or a
        config there is a real shape and it would be ignored, so it is refused there, and an empty one too. ``params``
        beside ``config`` is refused too: the config's own count would be planned (``plan.resolve.model_spec_of``)."""
        if self.params is not None and self.config is not None:
            raise ValueError("model.params: give a parameter count or an inline config, not both (the config's own count"
                             " would be planned); an id or a path beside either names what the framework loads")
        if self.reference is None:
            return self
        if not self.reference.strip():
            raise ValueError("model.reference: empty; allowed: a catalog id (e.g. Qwen/Qwen3-32B, see `trainfit models`),"
                             " or omit it for the nearest reference shape")
        if self.params is None:
            raise ValueError("model.reference: only read with model.params (the shape a bare parameter count assumes);"
                             " beside an id, a path or a config the model's own shape is planned: omit it")
        return self


def pin_before(pin: Any, since: tuple[int, int]) -> bool:
    """True for a ``software`` version pin whose every release is before ``since``: a release pin
    (``_RELEASE_PIN``: ``0.4.0``, ``==0.3``, ``v0.1``) whose major.minor is before it, a major series (``_SERIES_PIN``:
    ``4.x``, ``4.*``) whose major is before ``since``'s, or an upper bound (``<0.9``, ``<=0.8.2``) that admits no
    release from ``since`` on. None, empty, or anything that names no release (a branch, a commit hash such as
    ``0a3f9c1``, a lower bound ``>=`` read by ``pin_at_least``): False, so the pin then changes nothing."""
    text = str(pin).strip() if pin else ""
    if not text:
        return False
    if (bound := _UPPER_BOUND_PIN.fullmatch(text)) is not None:
        major, minor = int(bound.group(2)), int(bound.group(3) or 0)
        patch = bound.group(4)
        if bound.group(1) == "<" and int(patch or 0) == 0:
            return (major, minor) <= since
        return (major, minor) < since
    if (series := _SERIES_PIN.fullmatch(text)) is not None:
        return int(series.group(1)) < since[0]
    m = _RELEASE_PIN.fullmatch(text)
    if m is None or text.startswith((">=", "~=")):
        return False
    return (int(m.group(1)), int(m.group(2) or 0)) < since


_UPPER_BOUND_PIN = re.compile(r"(<=|<)\s*v?(\d+)(?:\.(\d+)(?:\.(\d+))?)?")
"""An upper-bound pin: ``<0.9`` (every release before 0.9.0), ``<=0.8.2``, ``<0.9.1`` (0.9.0 is admitted)."""


_RELEASE_PIN = re.compile(r"(?:==|>=|~=)?\s*v?(\d+)(?:\.(\d+)(?:[.+\-]?[0-9A-Za-z.+\-]*)?)?")
"""A release pin: ``0.9.0``, ``==0.9``, ``>=0.9``, ``v0.9.0``, ``0.9.0.dev``, ``0.9rc1``, ``1``. Not a release: a
branch (``main``), a commit hash (``8de5fb44...``, ``b9873ee...``), an upper bound (``<0.9``)."""


_SERIES_PIN = re.compile(r"(?:==|~=)?\s*v?(\d+)\.[xX*]")
"""A major series: ``4.x``, ``4.*``, ``==4.*`` (every release of major 4; its minor is not known)."""


def pin_at_least(pin: Any, since: tuple[int, int]) -> bool:
    """True for a ``software`` release pin (``_RELEASE_PIN``) whose major.minor is ``since`` or later, or a major
    series (``_SERIES_PIN``, ``4.x``) whose every release is (its major.0 is ``since`` or later); None, empty, or
    anything that does not name a release (a branch, a commit hash, an upper bound): False, so a behaviour that
    arrived in ``since`` is switched on only by a pin that names it (``pin_before``'s ``not`` would switch it on for
    every pin it cannot read)."""
    text = str(pin).strip() if pin else ""
    if (series := _SERIES_PIN.fullmatch(text)) is not None:
        return (int(series.group(1)), 0) >= since
    m = _RELEASE_PIN.fullmatch(text) if text else None
    if m is None:
        return False
    return (int(m.group(1)), int(m.group(2) or 0)) >= since


def pin_names_release(pin: Any) -> bool:
    """Whether a ``software`` pin names a release or a range of them: a release pin (``_RELEASE_PIN``, lower bounds
    included), a major series (``_SERIES_PIN``) or an upper bound (``<0.9``). None, empty, a branch (``main``) or a
    commit hash: False; a rule that reads a missing pin as the newest release reads such a pin the same way."""
    text = str(pin).strip() if pin else ""
    return bool(text) and any(p.fullmatch(text) is not None for p in (_RELEASE_PIN, _SERIES_PIN, _UPPER_BOUND_PIN))


VERL_MULTI_SENDER_DEFAULT_SINCE = (0, 10)
"""The verl line whose every commit holds the checkpoint engine's node-local relays on by default:
``NCCLCheckpointEngine.__init__(..., multi_sender: bool = True)`` (verl-project/verl
verl/checkpoint_engine/nccl_checkpoint_engine.py l.142 @8de5fb4463faa0a06ce1d260cadf3d7cd2a2c338, #7291, 2026-08-14;
its docstring, l.130-132, says "Defaults to False", the signature wins), and the trainer's
``checkpoint_engine.engine_kwargs`` is ``{}`` (verl/trainer/config/_generated_ppo_trainer.yaml l.373-378
@1dda039b9c6311889a9c9a26040677e1254814f9), so a run that says nothing relays. The bump to 0.10.0.dev (175018195,
#7410) descends from 8de5fb44; the v0.9.0 tag (483b8a009, #7411) does not (it was cut from 5bccaf0ba of 2026-08-12),
nor does any earlier release: no released verl holds it yet. 0.9.0.dev names main from 8f5e16179 (2026-06-01) to
175018195, before and after 8de5fb44."""


def verl_multi_sender_default(pin: Any) -> bool | None:
    """Whether the ``software.verl`` pin's checkpoint engine relays by default (``VERL_MULTI_SENDER_DEFAULT_SINCE``):
    True for a 0.10 pin or later; False for a release before it (0.9.x without ``dev``, 0.8 and earlier: they have
    no ``multi_sender`` at all); None where the pin cannot tell (none, a 0.9 dev pin, a branch, a commit hash)."""
    if pin_at_least(pin, VERL_MULTI_SENDER_DEFAULT_SINCE):
        return True
    if pin_before(pin, (0, 9)) or (pin_at_least(pin, (0, 9)) and "dev" not in str(pin).lower()):
        return False
    return None


class SoftwareSection(_Section):
    model_config = ConfigDict(extra="allow", frozen=True)
    python: str | None = None
    torch: str | None = None
    transformers: str | None = None
    trl: str | None = None
    peft: str | None = None
    vllm: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _pins_only(cls, v: Any) -> Any:
        """Any package name is allowed, but only a version pin: a section or list here is a misplaced key, and a
        boolean (``bitsandbytes: true``) names no release. A YAML number is refused too, as the named fields
        (``torch``, ``vllm``) refuse it: YAML reads ``0.20`` as the float 0.2, so its text would name another release
        (core_v0.2, not core_v0.20), and NaN, inf or -1 name none and would leave the preset's pin planned."""
        if isinstance(v, dict):
            for k, x in v.items():
                if isinstance(x, (dict, list, bool)):
                    what = "section" if isinstance(x, dict) else "list" if isinstance(x, list) else f"boolean ({x})"
                    raise ValueError(f"software.{k}: a package version like '2.5.1' or '>=4.45', got a"
                                     f" {what}; software holds version pins only")
                if isinstance(x, (int, float)):
                    raise ValueError(f"software.{k}: a package version written as text, got the number {x!r} (YAML"
                                     f" reads 0.20 as 0.2); quote it as written, e.g. '0.20' or '2.5.1'")
        return v


class RecipeSection(_Section):
    path: str | None = None
    commit: str | None = None
    changes: list[str] = Field(default_factory=_empty_list)


class TaskSection(_Section):
    kind: TaskKind = TaskKind.SINGLE_TURN_CODE


MOVED_KEYS: dict[str, str] = {
    # One field per fact: generation lengths and counts live in rollout.* only. Spellings of the
    # same facts elsewhere (an old `generation:` section, framework names) are refused with a pointer.
    "generation.max_completion_len": "rollout.response_len",
    "generation.max_completion_length": "rollout.response_len",
    "generation.max_new_tokens": "rollout.response_len",
    "generation.max_prompt_len": "rollout.prompt_len",
    "generation.max_prompt_length": "rollout.prompt_len",
    "generation.num_generations": "rollout.num_generations",
    "generation.concurrency": "rollout.max_num_seqs",
    "rollout.max_completion_len": "rollout.response_len",
    "rollout.max_completion_length": "rollout.response_len",
    "rollout.max_response_len": "rollout.response_len",
    "rollout.max_response_length": "rollout.response_len",
    "rollout.response_length": "rollout.response_len",
    "rollout.max_new_tokens": "rollout.response_len",
    "rollout.max_tokens": "rollout.response_len",
    "rollout.max_prompt_len": "rollout.prompt_len",
    "rollout.max_prompt_length": "rollout.prompt_len",
    "rollout.prompt_length": "rollout.prompt_len",
}
"""Refused card keys -> the one rollout field that holds that fact."""


def moved_key_message(data: Any) -> str | None:
    """The one-line refusal for the first moved spelling in a card dict, or None."""
    if not isinstance(data, dict):
        return None
    for old, new in MOVED_KEYS.items():
        section, key = old.split(".")
        if isinstance(data.get(section), dict) and key in data[section]:
            return f"{old}: not a card field; generation lengths live in rollout.*: use {new}"
    if "generation" in data:
        return ("generation: not a card section; generation settings live in rollout.*"
                " (rollout.response_len, rollout.prompt_len, rollout.num_generations, rollout.max_num_seqs)")
    return None


class RolloutSection(_Section):
    """Generation for PPO/GRPO (vLLM semantics unless engine is hf; engine sglang reads gpu_memory_utilization,
    max_num_seqs and cuda_graphs as verl passes them to SGLang: mem_fraction_static, max_running_requests and not
    disable_cuda_graph, verl-project/verl verl/workers/rollout/sglang_rollout/async_sglang_server.py lines 298-310
    @b9873ee98f5ee513a460a7a41623262ac4a831e9)."""

    engine: RolloutEngine = RolloutEngine.VLLM
    placement: Placement = Placement.COLOCATE
    gpus: int | None = Field(None, ge=1, le=1024, description="split: GPUs per node given to the rollout engine.")
    nodes: int | None = Field(None, ge=1, le=100_000, description="split: whole nodes given to the rollout engine, the other nodes train (NeMo RL policy.generation.colocated.resources.num_nodes); instead of gpus.")
    tensor_parallel: int = Field(1, ge=1, le=1024)
    gpu_memory_utilization: float | None = Field(
        None, gt=0, le=1, description="vLLM budget fraction. Engine sglang: mem_fraction_static, the weights and the"
        " KV pool only (activations and CUDA graphs on top). null: the framework's default for the placement"
        " (methods.presets.default_gpu_memory_utilization: TRL colocate 0.3, TRL's vllm-serve 0.9, unsloth 0.5,"
        " openrlhf 0.5 hybrid / 0.95 split; the verl / nemo-rl / skyrl presets fill their own); RunCard resolves it"
        " once, a stated value stays.")
    prompt_len: int = Field(512, ge=1, le=10_000_000, description="Longest prompt tokens (verl data.max_prompt_length):"
                            " memory, KV capacity and padded passes use it.")
    prompt_len_mean: int | None = Field(
        None, ge=1, le=10_000_000, description="Mean prompt tokens the engine and the trainer actually process (the"
        " prompt text with its instruction and chat template): time uses it for prefill, decode context and the"
        " log-prob and update passes of frameworks that remove padding; memory keeps prompt_len. Default: prompt_len"
        " (every prompt at the maximum, an upper bound for time).")
    response_len: int = Field(1024, ge=1, le=10_000_000)
    num_generations: int = Field(8, ge=1, le=4096, description="Completions per prompt (GRPO group size).")
    prompts_per_step: int = Field(16, ge=1, le=1_000_000, description="Prompts per rollout step, whole run.")
    generated_prompts_per_step: int | None = Field(
        None, ge=1, le=1_000_000, description="Prompts the engine generates per step when the trainer keeps only"
        " prompts_per_step of them: DAPO dynamic sampling generates whole batches and keeps the groups whose rewards"
        " differ (NeMo RL: grpo.batch_multiplier x num_prompts_per_step per generation batch, nemo_rl/algorithms/"
        "grpo.py). Times the generation (engine deepspeed_hybrid too), the reward and the reward model's forward (every"
        " generated group is scored), and sizes the engine's batch in memory (sequences in flight, the hf engine's KV"
        " cache); the log-prob and update passes keep prompts_per_step."
        " Default: prompts_per_step.")
    generation_calls: int = Field(
        1, ge=1, le=100_000, description="Sequential generate calls the step's generated prompts are split into, each"
        " waiting for its own longest completion before the next starts (one engine batch each). TRL before 0.17"
        " generates inside every gradient-accumulation micro-batch: gradient_accumulation_steps calls per optimizer"
        " step (huggingface/trl trl/trainer/grpo_trainer.py compute_loss l.370-400 @29de6eec, v0.14.0;"
        " _prepare_inputs @09eefa73; once per effective batch from #3283, 294f35bf, v0.17.0); TRL >= 0.18:"
        " gradient_accumulation_steps / steps_per_generation. The calls are equal: a divisor of the prompts generated per"
        " step; engine deepspeed_hybrid: 1 (its own static batches). Default 1: the step's prompts in one call.")
    max_num_seqs: int = Field(
        256, ge=1, le=1_000_000, description="Sequences one engine runs at once (vLLM max_num_seqs; engine sglang:"
        " max_running_requests). Default 256: vLLM's own default for the LLM class and the OpenAI server on GPUs under"
        " 70 GiB and on A100s (vllm-project/vllm vllm/engine/arg_utils.py get_batch_defaults lines 3010-3043 @v0.34.0;"
        " the 70 GiB split since v0.8.5, the A100 exception since v0.9.0) and the V0 engine's (lines 211-213 @v0.7.0)."
        " Not vLLM V1's default on larger GPUs (H100, H200, H20, MI300X, B200: 1024, the same file), nor for an engine"
        " built with no usage context (vllm/config/scheduler.py SchedulerConfig.DEFAULT_MAX_NUM_SEQS 128, line 42"
        " @v0.34.0): state the engine's value.")
    max_num_batched_tokens: int = Field(8192, ge=1, le=100_000_000)
    tp_gather_partition_size: int = Field(
        8, ge=1, le=4096, description="engine deepspeed_hybrid with tensor_parallel > 1: decoder layers gathered"
        " whole at a time while the engine slices them (DeepSpeed HybridEngineConfig tp_gather_partition_size;"
        " DeepSpeed-Chat --tp_gather_partition_size, default 8).")
    sleep_level: int = Field(0, ge=0, le=2, description="vLLM sleep mode between rollouts: 0 off, 1, 2. Engine"
                             " sglang: release_memory_occupation as verl calls it, 1 the KV cache only, 2 also the"
                             " weights (freed, not copied to host memory).")
    trainer_offload: Offload | None = Field(
        None, description="colocate: the trainer's state leaves the GPU while the engine starts, generates and"
        " receives weights, and comes back for the log-prob and update passes (verl actor param_offload /"
        " optimizer_offload; NeMo RL offload_before_refit / offload_after_refit): none | optimizer (fp32 main"
        " weights and optimizer states) | params_and_optimizer (also the weights and gradients; the weights are"
        " back on the GPU while they are sent). Under the verl, nemo-rl and skyrl presets the optimizer state"
        " comes back for the update only, so the log-prob passes leave it out too"
        " (methods.rl.frozen_pass_offloaded); other frameworks count it there. Timed as PCIe copies (the"
        " state_offload phase). Default: params_and_optimizer under the nemo-rl and skyrl presets, else none."
        " Unlike parallel.offload, the optimizer step stays on the GPU.")
    weight_sync: WeightSync = WeightSync.PER_PARAMETER
    weight_transport: WeightTransport = Field(
        WeightTransport.FRAMEWORK, description="framework | nccl_reshard | checkpoint_engine: how the weights travel at"
        " a refit. framework: the preset's own path. nccl_reshard: NeMo RL's refit_transport nccl_reshard (split"
        " placement, Megatron trainer, vLLM): each training rank sends its FFN shard straight to the vLLM ranks that"
        " hold it, the rest by the packed broadcast. checkpoint_engine: MoonshotAI checkpoint-engine's Broadcast"
        " update (vLLM): the checkpoint in host memory across the engine GPUs, bucketed copies to the GPU, a"
        " broadcast to every engine rank, vLLM loads from a CUDA-IPC buffer. Time only; memory is unchanged.")
    weight_sync_relays: bool | None = Field(
        None, description="verl's checkpoint engine, nccl backend, split placement: actor rank 0's node-local actor"
        " workers join the broadcast group as relays (engine_kwargs.nccl.multi_sender, verl-project/verl 8de5fb44"
        " #7291, on by default from it), so the broadcast leaves the sending node through all their NICs; false:"
        " actor rank 0 alone, as every verl before it. null: what the software.verl pin's default is (relays from"
        " a 0.10 pin on, the first line that holds 8de5fb44; no release holds it yet, so one sender for every"
        " release pin, a 0.9 dev pin and no pin). true is refused with a verl release that has no relays (0.9.x and"
        " earlier). Time only; memory is unchanged.")
    weight_sync_bucket_mib: int | None = Field(
        None, ge=1, le=65536, description="weight_sync bucketed on the preset's own path (weight_transport framework):"
        " the bucket the run set, MiB (miles / slime --update-weight-buffer-size, default 512). null: the preset's"
        " (compute.sync.framework_sync_mechanism). Each bucket is one broadcast and one engine load; the count of"
        " buckets sets the per-bucket cost. Memory: the bucket the trainer's source rank fills before each broadcast and"
        " each engine rank receives (methods.rl.sync_bucket_bytes; null: the plan's 1 GiB, SYNC_BUCKET_BYTES).")
    layered_summon: bool = Field(
        False, description="verl with a LoRA actor and vLLM (actor_rollout_ref.rollout.layered_summon): the adapter"
        " is collected for the engine one decoder layer at a time (each layer's FSDP unit gathered, its LoRA tensors"
        " copied to host memory, the unit freed); false, verl's default: the whole actor gathered at once"
        " (FSDP.summon_full_params on the root), in the trainer's dtype. Memory and time of the weight sync"
        " (memory.engine_lora.adapter_summon_peak_bytes, compute.adapter_sync): an FSDP1 actor unshards those units,"
        " base weights included; FSDP2 gathers the adapter's shards alone and an unsharded actor nothing, layered or"
        " not. Only with scope lora and engine vllm, and planned under preset verl (an imported verl file carries it;"
        " with no preset the key is kept). Exported with actor_rollout_ref.rollout.load_format=safetensors,"
        " which verl needs with it.")
    quantization: RolloutQuantization = Field(
        RolloutQuantization.NONE, description="none | fp8: the vLLM engine's weights (NeMo RL vllm_cfg.precision:"
        " fp8: 128x128-block fp8 linears and experts, re-quantized from the bf16 weights at every refit; the KV"
        " cache stays bf16). Needs fp8 tensor cores and engine vllm.")
    quantization_bf16_modules: list[str] = Field(
        default_factory=_empty_list, max_length=64, description="With quantization fp8: module-name keywords kept in bf16"
        " (NeMo RL vllm_cfg.quantization_ignored_layer_kws; a linear whose name contains one stays bf16), e.g."
        " [a_proj, b_proj] for DeepSeek-V3's latent-attention projections.")
    logprob_micro_batch_size: int | None = Field(None, ge=1, le=65536, description="Sequences per log-prob pass; default micro_batch_size.")
    packed_sequences: bool | None = Field(
        None, description="The log-prob and update passes drop padding (pack sequences). null: under the verl, openrlhf"
        " and nemo-rl presets (spec.card.PACKING_PRESETS); false: every sequence is padded to the batch's longest"
        " (prompt_len + response_len), as NeMo RL's Megatron worker runs with policy.sequence_packing.enabled false.")
    packed_row_tokens: int | None = Field(
        None, ge=1, le=10_000_000, description="Read with parallel.pipeline_parallel > 1 (NeMo RL's Megatron worker,"
        " policy.sequence_packing on): the update's packed micro-batch capacity in tokens (sequence_packing.train_mb_tokens"
        " = max_total_sequence_length x train_micro_batch_size). Whole sequences fill rows of at most this many tokens,"
        " the row count a multiple of the data-parallel size, and pipeline parallel pads every row to the batch's"
        " longest, planned as this capacity (plan.rl_batches.pipeline_packed_rows). null: micro_batch_size sequences of"
        " the mean length. Read as well by NeMo RL's DTensor policy (the nemo-rl preset on an FSDP strategy), whose update"
        " pads every packed row to this capacity (plan.rl_batches.nemo_rl_dtensor_padded_rows). Memory reads it at any"
        " pipeline depth: the update's micro-batch is one packed row of at most this many tokens (plan.walk.rl_packed_row).")
    packed_logprob_row_tokens: int | None = Field(
        None, ge=1, le=10_000_000, description="As packed_row_tokens, for the log-prob passes"
        " (sequence_packing.logprob_mb_tokens = max_total_sequence_length x logprob_batch_size); memory reads it at any"
        " pipeline depth (methods.rl.rl_groups: one packed row of at most this many tokens per log-prob micro-batch).")
    max_tokens_per_micro_batch: int | None = Field(
        None, ge=1, le=100_000_000, description="Dynamic batching (verl actor.use_dynamic_bsz with"
        " ppo_max_token_len_per_gpu): the update's micro-batches are formed by a token budget per GPU, not a sequence"
        " count. The passes are then packed (no padding) whatever the preset. Each mini-batch's sequences are split into ceil(tokens / (budget x context_parallel)) balanced packed"
        " micro-batches, the count the largest of the data-parallel ranks' (plan.rl_batches.dynamic_micro_batches);"
        " memory plans one micro-batch of the budget's tokens. Every sequence (prompt_len + response_len) must fit the"
        " budget x context_parallel, as verl asserts. null: batch.micro_batch_size sequences (no dynamic batching).")
    logprob_max_tokens_per_micro_batch: int | None = Field(
        None, ge=1, le=100_000_000, description="As max_tokens_per_micro_batch, for the log-prob passes (verl"
        " rollout.log_prob_max_token_len_per_gpu / ref.log_prob_max_token_len_per_gpu). Default: max_tokens_per_micro_batch"
        " (verl's config interpolates the actor's budget) unless logprob_micro_batch_size is given (fixed log-prob"
        " micro-batches, verl log_prob_use_dynamic_bsz false).")
    critic_max_tokens_per_micro_batch: int | None = Field(
        None, ge=1, le=100_000_000, description="PPO with a token budget: the critic's own budget per GPU, for its"
        " update and its values pass (verl critic.ppo_max_token_len_per_gpu; critic.forward_max_token_len_per_gpu,"
        " the values pass's, defaults to it). null: the actor's max_tokens_per_micro_batch for the update and the"
        " log-prob passes' budget for the values pass, as planned before this field. verl's own default is 32768,"
        " twice the actor's 16384 (verl/trainer/config/ppo_trainer.yaml l.160 @e0d035cd4a6a5c29835516a58d78710a28e73b18,"
        " _generated_ppo_trainer.yaml l.447-448 @b178a3cd56f58b2d502255daba591e92833930a7), so a verl run that does"
        " not state it plans with 32768 here. verl's critic.use_dynamic_bsz follows the actor's switch by default"
        " (l.159 / l.446 there); the card has one switch, the actor's budget: a critic budget needs"
        " max_tokens_per_micro_batch.")
    num_iterations: int = Field(1, ge=1, le=1000, description="Updates per generated batch (GRPO mu); > 1 adds an old-policy log-prob pass.")
    recompute_old_logprobs: bool | None = Field(
        None, description="The trainer recomputes the old policy's log-probs in a forward pass every step (SkyRL,"
        " slime, ROLL: whenever off-policy correction or the loss reads them). null (methods.roles.old_logprob_pass):"
        " with PPO, num_iterations > 1 or mini_batches > 1 under every preset; under the verl / openrlhf / nemo-rl /"
        " miles / slime / skyrl presets always; and where TRL is planned (the trl preset or no preset) also with a"
        " vLLM / SGLang engine (TRL >= 0.23's importance-sampling correction); true / false: always / never (the loss"
        " uses the engine's log-probs).")
    mini_batches: int = Field(1, ge=1, le=100_000, description="Optimizer steps per rollout batch and iteration (verl: train_batch_size / ppo_mini_batch_size; TRL GRPO: 1).")
    response_len_mean: int | None = Field(None, ge=1, le=10_000_000, description="Mean response tokens; default: the length profile's mean below response_len (a truncated exponential, compute.response_lengths; see length_profile).")
    length_profile: LengthProfileName = Field(
        LengthProfileName.AUTO, description="auto | short_answer | cot | long_cot | tool_integrated: the task's"
        " response-length profile,"
        " read only when response_len_mean is not given, and refused next to it unless auto"
        " (compute.response_lengths). auto: by the model name"
        " (long_cot for checkpoints published as thinking models, else cot). short_answer: grade-school word problems"
        " with a short worked answer (GSM8K) by non-thinking models, natural mean 169 tokens; cot: chain-of-thought"
        " competition math (MATH-style), 1,341; long_cot: thinking models, 8,522; tool_integrated: multi-turn"
        " code-interpreter reasoning (ReTool-style), the response holding the model's turns and the interpreter's"
        " outputs, 6,530 (never picked by auto). The mean is the profile's truncated exponential clipped at"
        " response_len.")
    response_clip_ratio: float | None = Field(None, ge=0.0, lt=1.0, description="Share of responses cut at"
        " response_len, as a run logs or publishes it (verl's response_length/clip_ratio; 'x % of samples hit the"
        " cap'). Without response_len_mean it sets the mean of the default exponential shape, 1 + θ(1 − share) with"
        " θ = (response_len − 1) / −ln(share) (compute.response_lengths.clip_ratio_response_mean; likely low: at a"
        " logged run's mean the exponential puts 1.8-3.1x the logged share at the cap). Beside response_len_mean it"
        " sets the shape: above 0, the exponential above the floor that puts that share at the cap with that mean"
        " (likely too narrow: that floor is above logged runs' shortest response);"
        " 0, none cut (needs response_len_batch_max below response_len: where the lengths end)"
        " (compute.response_lengths.fit_published_lengths). Allowed: 0 (with response_len_mean and"
        " response_len_batch_max) to below 1, with response_len >= 2, length_profile auto and response_len_shape"
        " exponential; beside a mean, at most the share the truncated exponential of that mean puts at the cap, and"
        " none beside a mean equal to response_len (every response cut).")
    response_len_batch_max: int | None = Field(None, ge=1, le=10_000_000, description="The longest response of the"
        " step's batch, as a run logs it (verl's response_length/max): the response lengths end there instead of at"
        " response_len, so the phase's slowest engine waits for it, not for the cap"
        " (compute.response_lengths.fit_published_lengths). Allowed: from response_len_mean to response_len, with"
        " response_len_mean and response_len_shape exponential; below response_len only with response_clip_ratio"
        " null or 0.")
    response_len_shape: ResponseShape = Field(ResponseShape.EXPONENTIAL, description="Distribution of response lengths up to response_len: exponential (truncated, right-skewed) | shifted_exponential (the same above a floor of compute.response_lengths.SHORTEST_SHARE_OF_MEAN x the mean, read from a published run's length log) | uniform | fixed.")
    cuda_graphs: bool = Field(True, description="vLLM decodes with CUDA graphs (False: enforce_eager).")
    engine_multiprocess: bool = Field(True, description="vLLM's engine core runs in its own process, its frontend's per-step host work overlapped with the GPU (vLLM's default); False: VLLM_ENABLE_V1_MULTIPROCESSING=0 (NeMo RL), that work adds to every decode step.")
    vllm_engine: VllmEngineGeneration = Field(
        VllmEngineGeneration.V1, description="v0 | v1: vLLM's engine generation, from the vLLM version the framework"
        " pins (V1 is the default from vLLM 0.8; up to 0.7, or with a V0 fallback such as VLLM_ATTENTION_BACKEND=XFORMERS"
        " on 0.8.x, it is v0). Selects the host work per decode step (compute.decode_step).")
    engine_outputs: EngineOutputs | None = Field(
        None, description="final_only | cumulative: what the V1 frontend returns each decode step (LLM.generate:"
        " final_only, nothing until a request finishes; AsyncLLM.generate, e.g. NeMo RL async_engine or verl's server:"
        " cumulative, every step a RequestOutput per request holding the tokens generated so far, the fast"
        " detokenizer's own list rather than a copy, compute.decode_step). cumulative needs engine_multiprocess:"
        " AsyncLLM always runs the engine core in its own process (vllm/v1/engine/async_llm.py l.118-123 of the"
        " vLLM 0.9.0 wheel). null: cumulative with engine_multiprocess, else final_only.")
    sglang_overlap_schedule: bool | None = Field(
        None, description="Engine sglang: SGLang's overlap scheduler, which schedules step n+1 and processes step"
        " n-1's outputs while the GPU runs step n (on by default since SGLang 0.3.6, Scheduler.event_loop_overlap;"
        " false: --disable-overlap-schedule, or a mode SGLang turns it off for: pipeline parallel, speculative decoding"
        " without spec v2, DP attention in 0.4, a Mamba-hybrid model with its radix cache in 0.5.6)."
        " null: on, off for a software.sglang release pinned before 0.3.6 (plan.rl_generation"
        ".SGLANG_OVERLAP_DEFAULT_SINCE). Refused for any other engine.")
    controller_padded_batches: bool = Field(
        False, description="verl: the log-prob, values and update calls ship the batch padded to prompt_len +"
        " response_len (the legacy fsdp/megatron workers, trainer.use_legacy_worker_impl auto: every verl before"
        " verl-project/verl 63e8a0d1617b209284011e0fcf1796574f372ffd, 2026-03-26, #5604). false: the engine workers"
        " (use_legacy_worker_impl disable, the default from that commit and the only workers of verl 0.9) ship them"
        " without padding (left_right_2_no_padding, verl/trainer/ppo/ray_trainer.py l.1143-1224"
        " @3f2fd075da015579639cd2f99aa1c2811c6f48d4); the generation call's output is padded either way."
        " Priced as the driver's serialisation (compute.controller_transfer); read for the verl preset only.")
    async_mode: AsyncMode = Field(AsyncMode.NONE, description="none | one_step_off | fully_async: generation overlaps training; the step is the slower side.")
    reward_seconds_per_sample: float = Field(0.0, ge=0, le=86400, description="Reward time per completion (sandboxed tests); 0 for a rule.")
    reward_workers: int = Field(1, ge=1, le=1_000_000, description="Completions graded in parallel.")

    def _published_lengths_agree(self) -> None:
        """rollout.response_clip_ratio and rollout.response_len_batch_max against the mean, shape and cap
        (compute.response_lengths.fit_published_lengths)."""
        ratio, longest, mean = self.response_clip_ratio, self.response_len_batch_max, self.response_len_mean
        if ratio is not None and (self.length_profile is not LengthProfileName.AUTO
                                  or self.response_len_shape is not ResponseShape.EXPONENTIAL):
            raise ValueError(f"rollout.response_clip_ratio: {ratio} is read with the exponential shape; length_profile"
                             f" '{self.length_profile.value}', response_len_shape '{self.response_len_shape.value}';"
                             " allowed with it: length_profile auto, response_len_shape exponential")
        if ratio == 0 and mean is None:
            raise ValueError("rollout.response_clip_ratio: 0 (none cut) without response_len_mean sets no mean;"
                             " allowed without a mean: above 0 and below 1")
        if ratio == 0 and longest is None:
            raise ValueError(f"rollout.response_clip_ratio: 0 (none cut) beside response_len_mean {mean} needs"
                             " rollout.response_len_batch_max (where the lengths end); allowed with it:"
                             f" response_len_batch_max from response_len_mean to below response_len"
                             f" ({self.response_len}), or response_clip_ratio above 0 or null")
        if ratio is not None and self.response_len < 2:
            # one token a response leaves no room below the cap: no exponential has a share there
            raise ValueError(f"rollout.response_len: {self.response_len} with rollout.response_clip_ratio {ratio};"
                             " allowed: >= 2")
        if longest is not None and (mean is None or self.response_len_shape is not ResponseShape.EXPONENTIAL
                                    or not mean <= longest <= self.response_len):
            raise ValueError(f"rollout.response_len_batch_max: {longest} with response_len_mean {mean}, response_len"
                             f" {self.response_len}, response_len_shape '{self.response_len_shape.value}'; allowed:"
                             " from response_len_mean to response_len, with a mean and response_len_shape exponential")
        if longest is not None and longest < self.response_len and ratio:
            raise ValueError(f"rollout.response_len_batch_max: {longest} is below response_len {self.response_len}"
                             f" while response_clip_ratio {ratio} of the responses reach it; allowed with it:"
                             f" response_len_batch_max {self.response_len}, or response_clip_ratio 0 or null")
        if longest is not None and longest == self.response_len and ratio == 0:
            raise ValueError(f"rollout.response_len_batch_max: {longest} is response_len, yet response_clip_ratio is 0"
                             f" (none cut); allowed with it: below {self.response_len}")
        if ratio and mean is not None:
            from trainfit.compute.response_lengths import fit_published_lengths

            try:
                fit_published_lengths(shape=self.response_len_shape, response_len_max=self.response_len,
                                      response_len_mean=mean, clip_ratio=ratio, longest_tokens=longest)
            except CardError as e:
                raise ValueError(str(e)) from None
            except ArithmeticError as e:  # a share the floating-point solve cannot hold: refused like one it can
                raise ValueError(f"rollout.response_clip_ratio: {ratio} beside response_len_mean {mean} and"
                                 f" response_len {self.response_len} gives no length distribution ({e}); allowed"
                                 " with that mean: 0 to the share the truncated exponential of that mean puts at"
                                 " the cap") from None

    @property
    def optimizer_steps_per_rl_step(self) -> int:
        """Optimizer steps one RL step (one rollout batch) runs: ``mini_batches`` x ``num_iterations`` (verl
        train_batch_size / ppo_mini_batch_size x ppo_epochs)."""
        return self.mini_batches * self.num_iterations

    @model_validator(mode="after")
    def _prompt_mean_within_max(self) -> RolloutSection:
        if self.vllm_engine is not VllmEngineGeneration.V1 and self.engine is not RolloutEngine.VLLM:
            raise ValueError(f"rollout.vllm_engine: '{self.vllm_engine.value}' is vLLM's engine generation; engine is"
                             f" '{self.engine.value}'; allowed with it: v1 (the default)")
        if self.engine_outputs is not None and (self.engine is not RolloutEngine.VLLM
                                                or self.vllm_engine is not VllmEngineGeneration.V1):
            raise ValueError(f"rollout.engine_outputs: '{self.engine_outputs.value}' is vLLM V1's frontend output mode;"
                             f" engine is '{self.engine.value}', vllm_engine '{self.vllm_engine.value}'; allowed with"
                             " them: null (engine vllm with vllm_engine v1: final_only, cumulative, null)")
        if self.sglang_overlap_schedule is not None and self.engine is not RolloutEngine.SGLANG:
            raise ValueError(f"rollout.sglang_overlap_schedule: {str(self.sglang_overlap_schedule).lower()} is SGLang's"
                             f" overlap-scheduler switch; engine is '{self.engine.value}'; allowed with it: null")
        if self.response_len_mean is not None and self.length_profile is not LengthProfileName.AUTO:
            raise ValueError(f"rollout.length_profile: '{self.length_profile.value}' is only read without a mean;"
                             f" response_len_mean is {self.response_len_mean}; allowed with it: auto (or drop"
                             " response_len_mean)")
        self._published_lengths_agree()
        if self.async_mode is not AsyncMode.NONE and self.placement is Placement.COLOCATE:
            # generation overlapping training needs its own GPUs: NeMo RL's async_grpo_train asserts "Colocated
            # inference is not supported for async GRPO" (NVIDIA-NeMo/RL c112cfe15a69729d27bcd5dc967ffabaf6418f34
            # nemo_rl/algorithms/grpo.py l.4187-4189; from 8863ebeff172fc3e1d14ab6cdbd0af626f477c01 only its Megatron
            # generation backend, no engine here, l.4177-4179); verl's one-step-off and fully-async trainers assert
            # "not self.hybrid_engine" (volcengine/verl b178a3cd56f58b2d502255daba591e92833930a7
            # verl/experimental/one_step_off_policy/ray_trainer.py l.105, fully_async_policy/fully_async_trainer.py
            # l.72, fully_async_rollouter.py l.76)
            raise ValueError(f"rollout.async_mode: '{self.async_mode.value}' overlaps generation with training, which"
                             f" needs rollout.placement split (placement is 'colocate'); allowed with placement"
                             f" colocate: async_mode none; with async_mode one_step_off or fully_async: placement split")
        if self.engine_outputs is EngineOutputs.CUMULATIVE and not self.engine_multiprocess:
            raise ValueError("rollout.engine_outputs: 'cumulative' is AsyncLLM's, whose engine core always runs in its"
                             " own process; engine_multiprocess is false; allowed with it: final_only, null")
        generated = self.generated_prompts_per_step or self.prompts_per_step
        if generated % self.generation_calls:
            # the calls are equal: TRL before 0.17 generates one gradient-accumulation micro-batch's prompts per call
            divisors = ", ".join(str(d) for d in range(1, generated + 1) if generated % d == 0)
            raise ValueError(f"rollout.generation_calls: {self.generation_calls} does not divide the {generated} prompts"
                             f" generated per step; allowed: divisors of {generated} ({divisors})")
        if self.generation_calls > 1 and self.engine is RolloutEngine.DEEPSPEED_HYBRID:
            # the Hybrid Engine splits the step into its own static batches (per_device_generation_batch_size), timed
            # by compute.hybrid_engine; sequential calls above it are not modelled
            raise ValueError(f"rollout.generation_calls: {self.generation_calls} with engine deepspeed_hybrid, whose"
                             " static generation batches are its own; allowed with it: 1")
        if self.generated_prompts_per_step is not None and self.generated_prompts_per_step < self.prompts_per_step:
            raise ValueError(f"rollout.generated_prompts_per_step: {self.generated_prompts_per_step} is fewer than the"
                             f" prompts trained (rollout.prompts_per_step {self.prompts_per_step}); allowed:"
                             f" {self.prompts_per_step} or more, or null")
        if self.prompt_len_mean is not None and self.prompt_len_mean > self.prompt_len:
            raise ValueError(f"rollout.prompt_len_mean: {self.prompt_len_mean} is more than the longest prompt"
                             f" (rollout.prompt_len {self.prompt_len}); allowed: 1 to {self.prompt_len}, or null")
        return self


class RolesSection(_Section):
    reference: RefPlacement | None = Field(None, description="gpu | cpu | none | lora_disabled | precomputed | host_swap; default by method (host_swap under the nemo-rl preset).")
    reward_model: str = Field("rule", description="none | rule | a model id (a frozen scalar-head model).")
    reward_model_dtype: RoleWeightsDtype | None = Field(
        None, description="With a reward model id: the dtype its weights are loaded in, bf16 | fp16 | fp32 (null: the"
        " trained model's 16-bit dtype). fp32 = a from_pretrained without torch_dtype under transformers 4.x (TRL's"
        " GRPOTrainer forwards model_init_kwargs' torch_dtype as given, spec.enums.RoleWeightsDtype): 4 B a weight,"
        " and fp32 GEMMs at the card's fp32 (non-tensor-core) rate unless precision.autocast casts its forward.")
    critic: str | None = Field(None, description="PPO: same_as_actor (default) or a model id; 'none' is refused.")
    kl_coef: float | None = Field(None, ge=0, le=1e6, description="KL coefficient (null: PPO 0.05, DPO 0.1, GRPO 0, or under the openrlhf / skyrl / nemo-rl presets their frameworks' GRPO default 0.01 / 0.001 / 0.01: methods.roles.GRPO_DEFAULT_KL_PRESETS). At 0 whether a reference is loaded and run depends on the framework and method (methods.roles.reference_loaded): none for GRPO under every preset and for PPO under verl / openrlhf / skyrl / slime / miles; PPO with no preset, under trl or under nemo-rl keeps it.")


def _check_role_dtypes(card: Any) -> None:
    """``roles.reward_model_dtype`` only beside a reward model id; ``precision.autocast`` false only where the trained
    model's weights are its compute dtype (without autocast nothing casts fp32 weights down to a 16-bit compute)."""
    ro = card.roles
    if ro.reward_model_dtype is not None and ro.reward_model in ("rule", "none"):
        raise ValueError(f"roles.reward_model_dtype: '{ro.reward_model_dtype.value}' is read with a reward model id;"
                         f" roles.reward_model is '{ro.reward_model}'; allowed with it: null")
    prec = card.precision
    if not prec.autocast and prec.weights is Dtype.FP32 and prec.compute is not ComputeDtype.FP32:
        raise ValueError(f"precision.autocast: false runs the model's GEMMs in its weights' dtype, fp32, while"
                         f" precision.compute is '{prec.compute.value}'; allowed with weights fp32: autocast true, or"
                         " compute fp32")
    if prec.tf32:
        _check_tf32_gpu(card.hardware.gpu)
    if not prec.autocast and prec.compute.quantized_gemms:
        raise ValueError(f"precision.autocast: false with precision.compute '{prec.compute.value}', whose quantised"
                         " GEMMs run inside the framework's own autocast; allowed with it: true")


def verl_actor_loss(card: Any) -> bool:
    """A PPO/GRPO card whose actor is verl's (preset verl or none): the trainer that calls flash-attn's
    cross-entropy for its log-probs (``loss.kernel flash_attn``, ``loss.temperature_copy``); other RL presets run
    their own loss and are refused the kernel."""
    return card.method in (Method.PPO, Method.GRPO) and card.preset in (None, "verl")


class CheckpointSection(_Section):
    path: str | None = None
    every_steps: int = Field(500, ge=1, le=1_000_000_000)
    keep: int = Field(2, ge=1, le=100_000)
    resume: ResumeKind = Field(ResumeKind.FULL, description="full (weights+optimizer+scheduler+RNG+data position) or"
                               " adapter_only.")


ADAPTER_UNIT_PRESETS = ("trl", "verl")
"""Presets whose framework wraps each PEFT adapter linear (lora_A, lora_B) as an FSDP1 unit of its own
(``RunCard.resolved_fsdp_adapter_units``), the wrapping code read at:

* trl: TRL's trainers are the HF Trainer, which for a PEFT model on FSDP replaces accelerate's wrap policy with
  PEFT's ``fsdp_auto_wrap_policy`` (transformers 5.24.0 wheel trainer.py l.1761-1762 calling
  ``update_fsdp_plugin_peft``, transformers/distributed/fsdp.py l.267-279; transformers 4.x:
  ``Trainer._fsdp_qlora_plugin_updates``, LoRA configs only); that policy ORs the decoder-layer policy with a
  lambda policy on every leaf module with a trainable weight (peft 0.21.2 wheel peft/utils/other.py l.1271-1308).
* verl: the FSDP engine builds its FSDP1 wrap with ``get_fsdp_wrap_policy(module, config.wrap_policy,
  is_lora=model_config.lora_rank > 0)``, which adds the same leaf-module lambda policy when
  ``wrap_policy.min_num_params`` is 0, its default (verl-project/verl @1dda039b9c6311889a9c9a26040677e1254814f9
  verl/utils/fsdp_utils.py l.80-125, verl/workers/engine/fsdp/transformer_impl.py l.394-398, l.418-430).

Not here: llamafactory-* and ms-swift-* (DeepSpeed strategies; their FSDP paths were not read), nemo-rl (its
DTensor policy shards with FSDP2), and the frameworks a card names without a preset (fsdp_qlora, VectorLM,
fms-hf-tuning: such a card sets ``parallel.fsdp_adapter_units: true`` itself)."""


class RunCard(_Section):
    """The whole card. Field names are the YAML keys."""

    model: str | ModelRef = "Qwen/Qwen3-8B"
    method: Method = Method.SFT
    scope: Scope = Scope.FULL
    lora: LoraSection = Field(default_factory=_fresh(LoraSection))
    ia3: Ia3Section = Field(default_factory=_fresh(Ia3Section))
    prompt_tuning: PromptTuningSection = Field(default_factory=_fresh(PromptTuningSection))
    prefix_tuning: PrefixTuningSection = Field(default_factory=_fresh(PrefixTuningSection))
    precision: PrecisionSection = Field(default_factory=_fresh(PrecisionSection))
    hardware: HardwareSection = Field(default_factory=_fresh(HardwareSection))
    parallel: ParallelSection = Field(default_factory=_fresh(ParallelSection))
    batch: BatchSection = Field(default_factory=_fresh(BatchSection))
    attention: Attention = Attention.SDPA
    attention_kernel: AttentionKernel = Field(
        AttentionKernel.AUTO, description="auto | fa2 | fa3 | fa4 | cudnn | triton_fa | fa1: the fused kernel that"
        " runs attention flash or sdpa (FlashAttention-2/3/4, cuDNN, FlashAttention in Triton, FlashAttention-1 in"
        " CUDA); auto: the architecture's"
        " default rates (FlashAttention-2's)")
    loss: LossSection = Field(default_factory=_fresh(LossSection))
    deepspeed: DeepSpeedSection = Field(default_factory=_fresh(DeepSpeedSection))
    loop: LoopSection = Field(default_factory=_fresh(LoopSection))
    software: SoftwareSection = Field(default_factory=_fresh(SoftwareSection))
    recipe: RecipeSection = Field(default_factory=_fresh(RecipeSection))
    task: TaskSection = Field(default_factory=_fresh(TaskSection))
    checkpoint: CheckpointSection = Field(default_factory=_fresh(CheckpointSection))
    rollout: RolloutSection = Field(default_factory=_fresh(RolloutSection))
    roles: RolesSection = Field(default_factory=_fresh(RolesSection))
    preset: str | None = Field(None, description="trl | verl | openrlhf | nemo-rl | miles | slime | skyrl | unsloth | llamafactory-z2 | llamafactory-z3 | ms-swift-zero2 | ms-swift-zero3: framework defaults (applied by the CLI). unsloth plans one GPU only (trainfit.methods.unsloth).")
    name: str | None = None
    notes: str | None = None

    @field_validator("preset", mode="before")
    @classmethod
    def _preset_named(cls, v: Any) -> Any:
        """An empty name is refused: the loaders apply a preset by the field's truthiness (``cli.common.load_card``,
        ``api.load_card``), so '' applied none while the card said a preset was set; null or an omitted field means
        no preset."""
        if isinstance(v, str) and not v.strip():
            from trainfit.methods.presets import PRESETS

            raise ValueError(f"preset: an empty name is not allowed; allowed: {', '.join(PRESETS)} or null (no preset)")
        from trainfit.methods.unsloth import REFUSED_PRESETS

        if isinstance(v, str) and v in REFUSED_PRESETS:
            # a card built without the loaders (which apply the preset first and refuse it there) is refused alike
            from trainfit.methods.presets import refused_preset_line

            raise ValueError(refused_preset_line(v))
        return v

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return ModelRef(**v)
        return v

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        msg = moved_key_message(data)
        if msg:
            raise ValueError(msg)
        return data

    @model_validator(mode="after")
    def _coherent(self) -> RunCard:
        _resolve_gpu_memory_utilization(self)
        if self.scope is Scope.FULL and "lora" in self.model_fields_set:
            raise ValueError("lora: LoRA settings were given but scope is 'full'; set scope: lora or qlora, or drop lora")
        _check_peft_variant(self)
        _check_attention_kernel(self)
        _check_unsloth_one_gpu(self)
        _check_unsloth_layers(self)
        _check_trl_ppo(self)
        _check_weight_transport(self)
        _check_token_budget(self)
        _check_packed_rope_loop(self)
        hw = self.hardware
        if hw.gpu_memory_gib is not None and hw.gpu.strip().lower() not in ("", "custom"):
            raise ValueError(
                f"hardware.gpu_memory_gib: only read with hardware.gpu: custom; '{hw.gpu}' is a catalog card with its"
                " own memory (drop gpu_memory_gib, or set gpu: custom)"
            )
        w = self.precision.weights
        if self.scope is Scope.FULL and w in (Dtype.NF4, Dtype.INT8, Dtype.FP8):
            raise ValueError(
                f"precision.weights: '{w.value}' cannot be trained in full; allowed for scope full: fp32, bf16, fp16"
            )
        if (why := price_pair_refusal(price_per_gpu_hour=hw.price_per_gpu_hour,
                                      price_preset=hw.price_preset)) is not None:
            raise ValueError(why)
        # a preset states its own unit (catalog/data/prices/prices.json); without a price nothing is billed by it
        if (why := price_unit_refusal(hw.price_gpus_per_instance, price_per_gpu_hour=hw.price_per_gpu_hour,
                                      price_preset=hw.price_preset)) is not None:
            raise ValueError(why)
        if self.hardware.price_per_gpu_hour is not None and not self.hardware.currency:
            raise ValueError(
                f"hardware.currency: a price of {self.hardware.price_per_gpu_hour:g} per GPU-hour needs a currency, e.g. CNY or USD"
            )
        if self.method is Method.PPO and (self.roles.critic or "").lower() == "none":
            raise ValueError("roles.critic: ppo needs a critic; use same_as_actor or a model id (or method: grpo)")
        if self.method is not Method.PPO and self.roles.critic is not None:
            # methods.roles.critic_model reads it for ppo only: any other method would plan without it, silently
            raise ValueError(f"roles.critic: read by method ppo only (a critic model); method {self.method.value} has"
                             f" none, drop roles.critic (got {self.roles.critic!r})")
        if self.method not in (Method.PPO, Method.GRPO) and self.roles.reward_model not in ("rule", "none"):
            # methods.roles.reward_model: a frozen reward model is loaded by ppo and grpo only
            raise ValueError(f"roles.reward_model: a reward model is read by methods ppo and grpo only; method"
                             f" {self.method.value} has none, allowed: rule or none (got {self.roles.reward_model!r})")
        _check_role_dtypes(self)
        _check_reference_placement(self)
        ro = self.rollout
        if ro.engine is RolloutEngine.DEEPSPEED_HYBRID and ro.placement is Placement.SPLIT:
            raise ValueError("rollout.placement: engine deepspeed_hybrid generates on the training GPUs; allowed: colocate")
        if ro.placement is Placement.SPLIT and self.method in (Method.PPO, Method.GRPO):
            if ro.nodes is not None:
                if ro.gpus is not None:
                    raise ValueError("rollout.nodes: give the engine whole nodes (rollout.nodes) or GPUs in every node"
                                     " (rollout.gpus), not both")
                if ro.nodes >= self.hardware.nodes:
                    raise ValueError(f"rollout.nodes: {ro.nodes} whole nodes for rollout leave none of the"
                                     f" {self.hardware.nodes} nodes to train; allowed: 1 to {self.hardware.nodes - 1}")
            elif ro.gpus is None:
                raise ValueError("rollout.gpus: a split placement needs the number of GPUs per node for the rollout engine"
                                 " (or rollout.nodes: whole nodes)")
            elif ro.gpus >= self.hardware.gpus_per_node:
                raise ValueError(
                    f"rollout.gpus: split placement gives {ro.gpus} GPUs to rollout but a node has"
                    f" {self.hardware.gpus_per_node}; leave at least one for training"
                )
        if self.method in (Method.PPO, Method.GRPO) and self.batch.packed_sample_tokens is not None:
            raise ValueError(f"batch.packed_sample_tokens: read for sft, rm and dpo; {self.method.value} packs its"
                             " rollouts from their planned lengths (rollout settings); allowed with it: null")
        if self.precision.nf4_compute_dtype is not Nf4ComputeDtype.BF16 and self.scope is not Scope.QLORA:
            raise ValueError(f"precision.nf4_compute_dtype: read for scope qlora (the 4-bit base's GEMMs); scope"
                             f" {self.scope.value} has none; allowed with it: bf16")
        if self.lora.quantize_moe_experts and self.scope is not Scope.QLORA:
            raise ValueError(f"lora.quantize_moe_experts: read for scope qlora (the experts take the 4-bit base's NF4);"
                             f" scope {self.scope.value} has no 4-bit base; allowed with it: false")
        if self.lora.prepare_kbit is not KbitPrepare.NONE and (self.scope is not Scope.QLORA or self.lora.dequant is not QloraDequant.BITSANDBYTES
                                       or self.precision.compute is not ComputeDtype.BF16):
            raise ValueError("lora.prepare_kbit: read for scope qlora on bitsandbytes' 4-bit base under bf16 compute;"
                             f" scope {self.scope.value}, lora.dequant {self.lora.dequant.value}, precision.compute"
                             f" {self.precision.compute.value}; allowed with it: none")
        if self.lora.prepare_kbit is not KbitPrepare.NONE and (self.parallel.strategy in FSDP_STRATEGIES
                                                               or self.parallel.strategy is Strategy.ZERO3):
            # TRL skips the recipe under sharded QLoRA ("one should never call peft_module_casting_to_bf16 or
            # prepare_model_for_kbit_training when doing QLoRA + FSDP / DS-Zero3", trl 0.13.0 wheel
            # trl/trainer/sft_trainer.py l.183-185), and FSDP1's flat parameters need one dtype per unit
            raise ValueError(f"lora.prepare_kbit: {self.lora.prepare_kbit.value} is not run under parallel.strategy"
                             f" {self.parallel.strategy.value} (sharded QLoRA: TRL skips it, trl 0.13.0"
                             " sft_trainer.py l.183-185); allowed with it: none")
        if self.lora.prepare_kbit is not KbitPrepare.NONE and self.precision.nf4_compute_dtype is Nf4ComputeDtype.FP32:
            raise ValueError(f"lora.prepare_kbit: {self.lora.prepare_kbit.value} upcasts a 16-bit model to fp32; with"
                             " precision.nf4_compute_dtype fp32 the model is already fp32 (a no-op); allowed with it:"
                             " none")
        if (self.precision.nf4_compute_dtype is not Nf4ComputeDtype.BF16
                and self.lora.dequant is not QloraDequant.BITSANDBYTES):
            raise ValueError(f"precision.nf4_compute_dtype: {self.precision.nf4_compute_dtype.value} is bitsandbytes'"
                             f" Linear4bit following its input's dtype; lora.dequant {self.lora.dequant.value} has no"
                             " such rule; allowed with it: bf16")
        if (self.batch.padding is Padding.MASK
                and self.parallel.tensor_parallel_impl in (TensorParallelImpl.MEGATRON, TensorParallelImpl.NANOTRON)):
            raise ValueError(f"batch.padding: mask is transformers' 4-D padding mask handed to SDPA;"
                             f" tensor_parallel_impl {self.parallel.tensor_parallel_impl.value} runs its own attention"
                             " and takes no such mask; allowed with it: none")
        prec = self.precision
        if (self.parallel.tensor_parallel_impl is TensorParallelImpl.MEGATRON and prec.optimizer is not Optimizer.ADAMW
                and prec.optimizer_states is StatesDtype.BF16):
            raise ValueError(f"precision.optimizer_states: bf16 moments are Megatron-Core's precision-aware Adam"
                             f" (exp_avg_dtype / exp_avg_sq_dtype); optimizer {prec.optimizer.value} keeps fp32 states;"
                             " allowed with it: same_as_weights, fp32 (or optimizer adamw)")
        if self.method in (Method.PPO, Method.GRPO) and self.batch.padding is not Padding.NONE:
            raise ValueError(f"batch.padding: read for sft, rm and dpo; {self.method.value} plans its passes from the"
                             " rollout settings; allowed with it: none")
        if self.method in (Method.PPO, Method.GRPO):
            whole = ro.placement is Placement.SPLIT and ro.nodes is not None
            engine_gpus = (self.hardware.gpus_per_node if whole else (ro.gpus or 0)) if ro.placement is Placement.SPLIT \
                else self.hardware.gpus_per_node
            # one engine may span nodes (vLLM multi-node tensor parallel over Ray): then it takes whole
            # nodes' rollout GPUs, and its per-layer all-reduces cross the NIC (compute.decode_step)
            roll_gpus = engine_gpus * (ro.nodes if whole else self.hardware.nodes)
            if ro.tensor_parallel > engine_gpus and (ro.tensor_parallel % max(1, engine_gpus)
                                                     or roll_gpus % ro.tensor_parallel):
                raise ValueError(
                    f"rollout.tensor_parallel: {ro.tensor_parallel} is more than the {engine_gpus} rollout GPUs per"
                    f" node; an engine spanning nodes must take whole nodes and divide the {roll_gpus} rollout GPUs"
                    f" (allowed: up to {engine_gpus}, or a multiple of {engine_gpus} dividing {roll_gpus})"
                )
            if roll_gpus and roll_gpus % ro.tensor_parallel:
                # every engine takes tensor_parallel GPUs and no GPU is left out: TRL colocate raises
                # "tensor_parallel_size (...) must divide world size (...) evenly" (huggingface/trl
                # f2cd57710ae345ea6428ae95363267fcf38a3dc8 trl/generation/vllm_generation.py l.318-322); verl asserts
                # "rollout world_size ... is not divisible by infer_world_size" (volcengine/verl
                # b178a3cd56f58b2d502255daba591e92833930a7 verl/workers/fsdp_workers.py l.622-627)
                divisors = ", ".join(str(d) for d in range(1, min(roll_gpus, engine_gpus) + 1) if roll_gpus % d == 0)
                where = "rollout GPUs (rollout.placement split)" if ro.placement is Placement.SPLIT else \
                    "GPUs (rollout.placement colocate)"
                raise ValueError(
                    f"rollout.tensor_parallel: {ro.tensor_parallel} does not divide the {roll_gpus} {where}; allowed:"
                    f" a divisor of {roll_gpus} ({divisors})"
                    + (f", or a multiple of {engine_gpus} dividing {roll_gpus}" if roll_gpus > engine_gpus else "")
                )
        par = self.parallel
        if par.sequence_parallel and par.tensor_parallel == 1:
            raise ValueError("parallel.sequence_parallel: needs parallel.tensor_parallel > 1 (it shards along the TP group)")
        if par.tp_comm_overlap and not par.sequence_parallel:
            # Megatron-LM megatron/training/arguments.py: "Tensor parallel communication/GEMM overlap can happen only
            # when sequence parallelism is enabled"
            raise ValueError("parallel.tp_comm_overlap: needs parallel.sequence_parallel: true (and tensor_parallel > 1);"
                             " allowed without it: false")
        if par.grad_accumulation_pass and (self.precision.grads is None or self.precision.grads.value != "fp32"):
            raise ValueError("parallel.grad_accumulation_pass: adds 16-bit gradients into an fp32 buffer, so it needs"
                             " precision.grads: fp32; allowed otherwise: false")
        if par.grad_accumulation_pass and self.scope is not Scope.FULL:
            # nanotron's FP32GradientAccumulator (the pass's one source) trains every parameter; an adapter card's
            # frozen base has no 16-bit gradient to add
            raise ValueError(f"parallel.grad_accumulation_pass: nanotron's fp32 accumulation of full-model gradients,"
                             f" not read with scope {self.scope.value}; allowed with scope {self.scope.value}: false")
        if par.overlap_param_gather and par.strategy is not Strategy.ZERO1:
            raise ValueError(f"parallel.overlap_param_gather: needs strategy zero1 (Megatron-Core's distributed"
                             f" optimizer), not {par.strategy.value}; allowed otherwise: false")
        if par.moe_comm_overlap:
            # Megatron-Core megatron/core/transformer/transformer_config.py @d98e8a64 __post_init__: "only supported with
            # expert model parallelism", "disable full recomputation", "virtual_pipeline_model_parallel_size must be
            # specified when pipeline_model_parallel_size > 1"
            if par.expert_parallel <= 1:
                raise ValueError("parallel.moe_comm_overlap: needs parallel.expert_parallel > 1; allowed without it: false")
            if par.moe_dispatcher is MoeDispatcher.ALLGATHER:
                # transformer_config.py @d98e8a64 l.3019: "supported with alltoall/flex token dispatcher"
                raise ValueError("parallel.moe_comm_overlap: needs moe_dispatcher alltoall or deepep, not allgather;"
                                 " allowed with allgather: false")
            if par.gradient_checkpointing is True:
                raise ValueError("parallel.moe_comm_overlap: refused with full recompute (gradient_checkpointing: true);"
                                 " allowed: gradient_checkpointing false or selective, or moe_comm_overlap false")
            if par.pipeline_parallel > 1 and par.virtual_stages <= 1:
                raise ValueError("parallel.moe_comm_overlap: with pipeline_parallel > 1 needs virtual_stages > 1"
                                 " (interleaved schedule); allowed otherwise: false")
        if par.moe_experts.per_expert and par.tensor_parallel * par.pipeline_parallel * par.expert_parallel > 1:
            # transformers < 5's sparse MoE block runs every expert on each rank (no tensor, pipeline or expert split)
            raise ValueError(f"parallel.moe_experts: {par.moe_experts.value} (transformers' per-expert loop) runs"
                             " without tensor, pipeline or expert parallel; allowed with them: grouped, grouped_streams,"
                             " grouped_padded")
        if par.moe_experts is MoeExperts.GROUPED_PADDED and par.tensor_parallel_impl is TensorParallelImpl.MEGATRON:
            # torchtitan's expert_parallel wrapper; Megatron-Core's routed experts are TEGroupedMLP
            raise ValueError("parallel.moe_experts: grouped_padded is torchtitan's padded torch._grouped_mm wrapper,"
                             " not Megatron-Core's (tensor_parallel_impl megatron); allowed there: grouped")
        if par.moe_experts is MoeExperts.LOOP_V5 and par.strategy is Strategy.ZERO3:
            # the stacked experts are one module of two parameters under ZeRO-3; not modelled for this loop
            raise ValueError("parallel.moe_experts: loop_v5 (transformers v5's eager experts) is not modelled under"
                             " strategy zero3; allowed there: grouped, loop, loop_all")
        if par.moe_zero3_leaf and (par.strategy is not Strategy.ZERO3 or not par.moe_experts.is_loop):
            raise ValueError(f"parallel.moe_zero3_leaf: needs strategy zero3 and moe_experts loop or loop_all (got"
                             f" strategy {par.strategy.value}, moe_experts {par.moe_experts.value}; a grouped experts"
                             " module is gathered whole already); allowed otherwise: false")
        if par.moe_experts_hit is not None and (par.moe_experts not in (MoeExperts.LOOP, MoeExperts.LOOP_V5)
                                                or par.strategy is Strategy.ZERO3):
            # the loops over the hit experts only (compute.expert_loop.hit_experts); loop_all calls every expert and
            # the grouped GEMMs run every local expert's group whatever its rows; ZeRO-3's per-expert hooks not modelled
            raise ValueError(f"parallel.moe_experts_hit: read by the loops over the hit experts only (got moe_experts"
                             f" {par.moe_experts.value}, strategy {par.strategy.value}); allowed: moe_experts loop or"
                             " loop_v5 without strategy zero3, else null")
        if par.virtual_stages > 1 and par.pipeline_schedule is not PipelineSchedule.INTERLEAVED:
            raise ValueError("parallel.virtual_stages: > 1 needs parallel.pipeline_schedule: interleaved")
        for key in ("pipeline_first_stage_layers", "pipeline_last_stage_layers"):
            n = getattr(par, key)
            if n is not None and par.pipeline_parallel == 1:
                raise ValueError(f"parallel.{key}: only read with parallel.pipeline_parallel > 1; allowed with 1 stage:"
                                 " unset")
            if n is not None and n % par.virtual_stages:
                raise ValueError(f"parallel.{key}: {n} layers do not split into virtual_stages = {par.virtual_stages}"
                                 f" chunks; allowed: multiples of {par.virtual_stages} (Megatron-Core)")
        if par.pipeline_layout is not None:
            _check_pipeline_layout(par)
        train_gpus, _ = rl_group_sizes(
            gpus_per_node=self.hardware.gpus_per_node, nodes=self.hardware.nodes,
            split=self.method in (Method.PPO, Method.GRPO) and ro.placement is Placement.SPLIT,
            rollout_nodes=ro.nodes, rollout_gpus=ro.gpus)
        if par.fsdp_one_rank and par.strategy in (Strategy.FSDP_GRAD_OP, Strategy.HSDP):
            # fsdp_grad_op (reshard_after_forward=False) keeps every unit's param_dtype copy from forward into
            # backward on a one-rank mesh too, which the one-rank plan does not hold; hsdp has nothing to replicate
            raise ValueError(f"parallel.fsdp_one_rank: strategy '{par.strategy.value}' on a one-rank mesh is not"
                             " modelled; allowed with it: strategy fsdp")
        if par.fsdp_one_rank and not (par.fsdp2 and train_gpus == 1):
            raise ValueError(f"parallel.fsdp_one_rank: FSDP2 (fully_shard) on one training GPU; got strategy"
                             f" '{par.strategy.value}', fsdp_version '{par.fsdp_version.value}', {train_gpus} training"
                             f" GPU{'' if train_gpus == 1 else 's'}; allowed with them: false")
        if par.hsdp_shard_size is not None:
            _check_hsdp_shard_size(par, train_gpus=train_gpus)
        if par.zero1_shard_size is not None or par.zero1_param_sync is not Zero1ParamSync.ALL_GATHER:
            _check_zero1_group(par, train_gpus=train_gpus)
        if train_gpus % par.model_parallel:
            raise ValueError(
                f"parallel: tensor_parallel x context_parallel x pipeline_parallel = {par.model_parallel} does not divide"
                f" the {train_gpus} training GPUs; allowed: divisors of {train_gpus}"
            )
        # MoE parallel folding (Megatron-Core parallel_state.initialize_model_parallel: the expert grid is
        # expert_tensor x expert x pipeline parallel, and only needs to divide the world, NVIDIA/Megatron-LM
        # megatron/core/parallel_state.py @d98e8a64ddf34856e74b24714e3bedb2f5a39553 lines 874-884): the expert
        # group may fold the tensor and context ranks in, so EP x ETP must divide TP x CP x DP, not DP x CP alone
        per_stage = train_gpus // par.pipeline_parallel
        expert_grid = par.expert_parallel * par.expert_tensor_parallel
        if per_stage % expert_grid:
            raise ValueError(
                f"parallel.expert_parallel: expert_parallel x expert_tensor_parallel = {expert_grid} must divide"
                f" tensor x context x data parallel = {per_stage} (Megatron-Core's expert grid)"
            )
        if par.tensor_parallel * par.pipeline_parallel > 1 and par.strategy in (
                Strategy.ZERO2, Strategy.ZERO3, Strategy.HSDP, Strategy.FSDP_GRAD_OP):
            raise ValueError(
                f"parallel.strategy: '{par.strategy.value}' with tensor or pipeline parallel is not modelled;"
                " allowed with them: single, ddp, zero1 (Megatron's distributed optimizer), fsdp"
            )
        if self.precision.optimizer_in_backward and self.batch.grad_accum > 1:
            raise ValueError("precision.optimizer_in_backward: cannot be combined with batch.grad_accum > 1")
        if self.hardware.interconnect is not None:
            _check_interconnect_gpu(self.hardware.gpu, self.hardware.interconnect)
        prec = self.precision
        if prec.compute is ComputeDtype.FP8:
            if prec.fp8_recipe is None:
                raise ValueError("precision.fp8_recipe: required with precision.compute: fp8; allowed: delayed, current,"
                                 " blockwise or mxfp8")
            _check_fp8_gpu(self.hardware.gpu)
            if prec.fp8_recipe is Fp8Recipe.MXFP8:
                _check_block_scaled_gpu(self.hardware.gpu, key="precision.fp8_recipe", what="mxfp8",
                                        te_mxfp8=par.tensor_parallel_impl is TensorParallelImpl.MEGATRON)
            if prec.fp8_params:
                _check_fp8_params(self)
        elif prec.fp8_recipe is not None:
            raise ValueError(f"precision.fp8_recipe: only read with precision.compute: fp8 (compute is"
                             f" '{prec.compute.value}')")
        if prec.compute is ComputeDtype.FP4:
            if prec.fp4_recipe is None:
                raise ValueError("precision.fp4_recipe: required with precision.compute: fp4; allowed: nvfp4")
            _check_fp4_gpu(self.hardware.gpu)
            if prec.fp4_params:
                _check_fp8_params(self, key="precision.fp4_params")
        elif prec.fp4_recipe is not None:
            raise ValueError(f"precision.fp4_recipe: only read with precision.compute: fp4 (compute is"
                             f" '{prec.compute.value}')")
        for key in ("bf16_first_layers", "bf16_last_layers"):
            if getattr(prec, key) and not prec.compute.quantized_gemms:
                raise ValueError(f"precision.{key}: only read with precision.compute: fp8 or fp4 (compute is"
                                 f" '{prec.compute.value}')")
        if prec.fp8_params and prec.compute is not ComputeDtype.FP8:
            raise ValueError(f"precision.fp8_params: only read with precision.compute: fp8 (compute is"
                             f" '{prec.compute.value}')")
        if prec.fp8_all_gather:
            _check_fp8_all_gather(self)
        if prec.fp8_attention and (prec.compute is not ComputeDtype.FP8
                                   or self.parallel.tensor_parallel_impl is not TensorParallelImpl.MEGATRON):
            raise ValueError(f"precision.fp8_attention: Transformer Engine's fp8 attention (Megatron-Core"
                             f" fp8_dot_product_attention) needs precision.compute fp8 (is '{prec.compute.value}') and"
                             f" parallel.tensor_parallel_impl megatron (is '{self.parallel.tensor_parallel_impl.value}')")
        if prec.fp8_activation_input_store and self.parallel.tensor_parallel_impl is not TensorParallelImpl.MEGATRON:
            raise ValueError(f"precision.fp8_activation_input_store: true is Megatron-Core's"
                             f" activation_func_fp8_input_store, read with tensor_parallel_impl: megatron (got"
                             f" {self.parallel.tensor_parallel_impl.value}); allowed otherwise: false")
        if not prec.fp8_param_transpose_cache and not (
                prec.compute is ComputeDtype.FP8 and prec.fp8_params
                and prec.fp8_recipe in (Fp8Recipe.DELAYED, Fp8Recipe.CURRENT)
                and self.parallel.tensor_parallel_impl is TensorParallelImpl.MEGATRON):
            raise ValueError(f"precision.fp8_param_transpose_cache: false is Transformer Engine 1.x's uncached fp8"
                             f" primary weight transpose, read with compute fp8, fp8_params true, fp8_recipe delayed"
                             f" or current and tensor_parallel_impl megatron (got compute '{prec.compute.value}',"
                             f" fp8_params {str(prec.fp8_params).lower()}, fp8_recipe '{getattr(prec.fp8_recipe, 'value', None)}',"
                             f" tensor_parallel_impl '{self.parallel.tensor_parallel_impl.value}'); allowed"
                             f" otherwise: true")
        if prec.optimizer_impl is OptimizerImpl.APEX_DISTRIBUTED and (
                prec.optimizer is not Optimizer.ADAMW
                or self.parallel.tensor_parallel_impl is not TensorParallelImpl.MEGATRON):
            raise ValueError(f"precision.optimizer_impl: apex_distributed is Apex's DistributedFusedAdam (NeMo"
                             f" distributed_fused_adam), read with precision.optimizer adamw (is"
                             f" '{prec.optimizer.value}') and parallel.tensor_parallel_impl megatron (is"
                             f" '{self.parallel.tensor_parallel_impl.value}'); allowed otherwise: fused, foreach,"
                             " for_loop")
        if prec.fp4_params and prec.compute is not ComputeDtype.FP4:
            raise ValueError(f"precision.fp4_params: only read with precision.compute: fp4 (compute is"
                             f" '{prec.compute.value}')")
        if ro.quantization is RolloutQuantization.FP8:
            if ro.engine is not RolloutEngine.VLLM:
                why = ("its fp8 rollout is not modelled" if ro.engine is RolloutEngine.SGLANG else
                       "generates on the trainer's weights")
                raise ValueError(f"rollout.quantization: fp8 is vLLM's (quantization: fp8); engine"
                                 f" '{ro.engine.value}' {why}; allowed with it: none")
            _check_fp8_gpu(self.hardware.gpu, key="rollout.quantization")
        elif ro.quantization_bf16_modules:
            raise ValueError("rollout.quantization_bf16_modules: only read with rollout.quantization: fp8"
                             f" (quantization is '{ro.quantization.value}')")
        if any(not k.strip() for k in ro.quantization_bf16_modules):
            raise ValueError("rollout.quantization_bf16_modules: an empty keyword matches every module; give module"
                             " name parts such as a_proj")
        if self.loss.compiled and (self.method is not Method.SFT or self.loop.kept_output_dtype is KeptOutputDtype.FP32
                                   or self.parallel.tensor_parallel > 1
                                   or self.parallel.tensor_parallel_impl is not TensorParallelImpl.DTENSOR):
            raise ValueError(f"loss.compiled: the compiled cross-entropy over the labels of an sft step (torchtitan's"
                             f" loss), not planned with method {self.method.value}, loop.kept_output_dtype fp32, tensor"
                             f" parallelism (loss_parallel) or Megatron-Core's / nanotron's vocab-parallel loss; allowed"
                             f" here: false")
        if self.loop.returns_kv_cache and not (
                self.parallel.gradient_checkpointing and self.method is Method.SFT
                and self.parallel.tensor_parallel == 1 and self.parallel.context_parallel == 1
                and self.parallel.pipeline_parallel == 1):
            raise ValueError("loop.returns_kv_cache: the cache a checkpointed sft model returns (transformers"
                             " use_cache), read with parallel.gradient_checkpointing true, method sft and no tensor,"
                             " context or pipeline parallelism; allowed here: false")
        if self.loop.loss_input_copy and not (self.loss.compiled and self.loop.keeps_output_through_backward):
            raise ValueError("loop.loss_input_copy: the compiled loss's saved copy beside the kept logits, read with"
                             " loss.compiled true and loop.keeps_output_through_backward true; allowed here: false")
        if not self.loss.upcast and (
                self.method is not Method.SFT or self.loss.chunked or self.loss.kernel is LossKernel.FLASH_ATTN
                or self.loss.compiled or self.loop.kept_output_dtype is KeptOutputDtype.FP32
                or self.parallel.tensor_parallel > 1
                or self.parallel.tensor_parallel_impl is not TensorParallelImpl.DTENSOR):
            raise ValueError("loss.upcast: false is the model's own eager cross-entropy on the compute-dtype logits of an"
                             " sft step; not planned with another method, loss.chunked, loss.kernel flash_attn,"
                             " loss.compiled, loop.kept_output_dtype fp32, tensor parallelism or Megatron-Core's /"
                             " nanotron's vocab-parallel loss; allowed here: true")
        if self.loop.kept_output_dtype is KeptOutputDtype.FP32 and (
                self.loss.chunked or self.loss.kernel is LossKernel.FLASH_ATTN):
            raise ValueError("loop.kept_output_dtype: fp32 is the eager loss's fp32 copy of the full logits; allowed with"
                             " loss.chunked true or loss.kernel flash_attn: compute")
        if self.loss.kernel is LossKernel.UNSLOTH and (self.method is not Method.GRPO or self.preset != "unsloth"):
            raise ValueError(f"loss.kernel: 'unsloth' is Unsloth's GRPO loss, read with method grpo and preset unsloth"
                             f" (method is '{self.method.value}', preset '{self.preset}'); allowed here: liger, trl,"
                             " prime_rl, torchtune")
        if self.loss.kernel is LossKernel.TE and par.tensor_parallel_impl is not TensorParallelImpl.MEGATRON:
            raise ValueError(f"loss.kernel: te is Megatron-Core's Transformer Engine cross-entropy"
                             f" (cross_entropy_fusion_impl 'te'), read with tensor_parallel_impl megatron; allowed with"
                             f" {par.tensor_parallel_impl.value}: liger, trl, prime_rl, torchtune, flash_attn")
        if self.loss.kernel is LossKernel.FLASH_ATTN:
            # flash-attn's CrossEntropyLoss scores labels (SFT / pretraining); Megatron-Core runs its own loss
            if self.method not in (Method.SFT, Method.PPO, Method.GRPO):
                raise ValueError(f"loss.kernel: flash_attn is a cross-entropy over the labels, read for method sft"
                                 f" (and ppo/grpo: verl's actor log-probs); allowed for {self.method.value}: liger, trl,"
                                 f" prime_rl, torchtune")
            if self.method in (Method.PPO, Method.GRPO) and not verl_actor_loss(self):
                raise ValueError(f"loss.kernel: 'flash_attn' for {self.method.value} is verl's actor log-prob kernel (and"
                                 f" loss.temperature_copy its division); preset is '{self.preset}'; allowed with it:"
                                 " liger, trl, prime_rl, torchtune (or preset verl)")
            if self.loss.temperature_copy and self.method is Method.SFT:
                raise ValueError("loss.temperature_copy: verl's actor division, read for method ppo/grpo; allowed for"
                                 " sft: false")
            if par.tensor_parallel_impl is not TensorParallelImpl.DTENSOR:
                raise ValueError(f"loss.kernel: flash_attn is not {par.tensor_parallel_impl.value}'s loss"
                                 f" (tensor_parallel_impl {par.tensor_parallel_impl.value} runs its vocab-parallel"
                                 f" cross-entropy); allowed with it: liger, trl, prime_rl, torchtune")
            if par.tensor_parallel > 1:
                raise ValueError("loss.kernel: flash_attn over a vocabulary split by tensor parallel (its process_group"
                                 " path) is not modelled; allowed with it: parallel.tensor_parallel 1")
        if self.scope is Scope.QLORA and w not in (None, Dtype.NF4):
            raise ValueError(f"precision.weights: qlora stores the base in nf4, got '{w.value}'; use scope lora")
        if self.parallel.moe_experts is MoeExperts.LOOP_V5 and pin_before(self.software.transformers, (5, 0)):
            # set_experts_implementation and the stacked experts arrive in transformers 5.0 (a 4.x model's experts are
            # an nn.ModuleList of per-expert MLPs: transformers 4.57.6 models/mixtral/modeling_mixtral.py
            # MixtralSparseMoeBlock, models/qwen3_moe/modeling_qwen3_moe.py Qwen3MoeSparseMoeBlock)
            raise ValueError(f"parallel.moe_experts: loop_v5 needs transformers >= 5 (software.transformers"
                             f" {self.software.transformers}); allowed with a 4.x pin: loop, loop_all (transformers' 4.x"
                             " experts; grouped_streams or grouped_padded for a trainer's own)")
        if self.parallel.moe_experts in (MoeExperts.LOOP, MoeExperts.LOOP_ALL) and pin_at_least(
                self.software.transformers, (5, 0)):
            # transformers 5.0 builds the routed experts as fused 3-D parameters (set_experts_implementation): the 4.x
            # per-expert nn.Linear modules the loop and loop_all describe are not there
            raise ValueError(f"parallel.moe_experts: {self.parallel.moe_experts.value} is transformers < 5's per-expert"
                             f" nn.Linear loop; software.transformers {self.software.transformers} has fused expert"
                             " parameters; allowed with a >= 5 pin: loop_v5 (v5's eager loop), grouped (or a trainer's"
                             " own: grouped_streams, grouped_padded)")
        if self.lora.expert_adapters is not ExpertAdapters.MERGED and self.scope is not Scope.LORA:
            raise ValueError(f"lora.expert_adapters: grouped is prime-rl's unmerged expert LoRA on a bf16 base; allowed"
                             f" with scope {self.scope.value}: merged")
        if self.lora.expert_adapters is not ExpertAdapters.MERGED and self.parallel.moe_experts not in (
                MoeExperts.GROUPED, MoeExperts.GROUPED_PADDED):
            # prime-rl's MultiLoRAGroupedExperts runs beside grouped experts; a loop's experts are separate PEFT linears
            raise ValueError(f"lora.expert_adapters: grouped runs the adapters as grouped GEMMs beside grouped experts;"
                             f" allowed with parallel.moe_experts {self.parallel.moe_experts.value}: merged")
        if self.lora.dequant is not QloraDequant.BITSANDBYTES and self.scope is not Scope.QLORA:
            raise ValueError(f"lora.dequant: {self.lora.dequant.value} is a QLoRA base's kernel; allowed with scope"
                             f" {self.scope.value}: bitsandbytes (the default)")
        if self.parallel.fsdp_adapter_units is True and (
                self.scope not in (Scope.LORA, Scope.QLORA)
                or self.parallel.strategy not in (Strategy.FSDP, Strategy.HSDP)
                or self.parallel.fsdp_version is not FsdpVersion.FSDP1):
            raise ValueError(f"parallel.fsdp_adapter_units: PEFT's adapter units under FSDP1 (scope lora or qlora,"
                             f" strategy fsdp or hsdp, fsdp_version fsdp1); got scope {self.scope.value}, strategy"
                             f" {self.parallel.strategy.value}, fsdp_version {self.parallel.fsdp_version.value};"
                             " allowed with them: false")
        _check_bf16_gpu(self.hardware.gpu, compute=prec.compute, compute_set="compute" in prec.model_fields_set,
                        weights=self.weights_dtype, weights_set=w is not None)
        return self

    @property
    def resolved_fsdp_adapter_units(self) -> bool:
        """Whether PEFT's adapter linears are FSDP1 units of their own (``parallel.fsdp_adapter_units``): as the card
        sets it, else as its preset's framework wraps a LoRA model (``ADAPTER_UNIT_PRESETS`` cites the wrapping
        code); false outside scope lora / qlora on FSDP1 (strategy fsdp or hsdp, fsdp_version fsdp1)."""
        p = self.parallel
        if not (self.scope in (Scope.LORA, Scope.QLORA) and p.strategy in (Strategy.FSDP, Strategy.HSDP)
                and p.fsdp_version is FsdpVersion.FSDP1):
            return False
        if p.fsdp_adapter_units is not None:
            return p.fsdp_adapter_units
        return self.preset in ADAPTER_UNIT_PRESETS

    @property
    def weights_dtype(self) -> Dtype:
        if self.precision.weights is not None:
            return self.precision.weights
        return Dtype.NF4 if self.scope is Scope.QLORA else Dtype.BF16

    @property
    def lora_targets(self) -> tuple[str, ...]:
        t = self.lora.targets
        return (t,) if isinstance(t, str) else tuple(t)

    @property
    def world_size(self) -> int:
        return self.hardware.gpus_per_node * self.hardware.nodes


PEFT_VARIANT_SCOPES = (Scope.DORA, Scope.IA3, Scope.PROMPT_TUNING, Scope.PREFIX_TUNING)
"""Scopes modelled by ``trainfit.memory.peft_variants`` (SFT on one data-parallel replica per rank)."""


def _check_token_budget(card: RunCard) -> None:
    """rollout.max_tokens_per_micro_batch / logprob_max_tokens_per_micro_batch (verl's dynamic batching): RL only,
    every sequence within the budget x context_parallel (verl ``rearrange_micro_batches`` asserts ``max_token_len >=
    max_seq_len``, the batch's padded width, verl/utils/seqlen_balancing.py l.222
    @e0d035cd4a6a5c29835516a58d78710a28e73b18, l.382 @b178a3cd56f58b2d502255daba591e92833930a7; the budget is
    multiplied by the Ulysses size, verl/workers/actor/dp_actor.py l.211 and l.274
    @e0d035cd4a6a5c29835516a58d78710a28e73b18), packed passes only, and
    not with another framework's packed rows."""
    ro = card.rollout
    keys = [k for k in ("max_tokens_per_micro_batch", "logprob_max_tokens_per_micro_batch",
                        "critic_max_tokens_per_micro_batch") if getattr(ro, k) is not None]
    if not keys:
        return
    if ro.critic_max_tokens_per_micro_batch is not None:
        if card.method is not Method.PPO:
            raise ValueError("rollout.critic_max_tokens_per_micro_batch: the PPO critic's token budget; method is"
                             f" '{card.method.value}'; allowed with it: null")
        if ro.max_tokens_per_micro_batch is None:
            raise ValueError("rollout.critic_max_tokens_per_micro_batch: the critic's budget under verl's dynamic"
                             " batching, whose switch the card reads from the actor's budget; with"
                             " rollout.max_tokens_per_micro_batch null; allowed: that budget set as well, or this one null")
    if card.method not in (Method.PPO, Method.GRPO):
        raise ValueError(f"rollout.{keys[0]}: a token budget for the RL log-prob and update passes; method is"
                         f" '{card.method.value}'; allowed with it: null")
    cp = card.parallel.context_parallel
    seq = ro.prompt_len + ro.response_len
    for k in keys:
        budget = getattr(ro, k)
        if budget * cp < seq:
            span = f" x context_parallel {cp} = {budget * cp}" if cp > 1 else ""
            raise ValueError(f"rollout.{k}: {budget} tokens{span} is less than one sequence (rollout.prompt_len +"
                             f" response_len = {seq}); verl refuses a budget below the longest sequence; allowed:"
                             f" {-(-seq // cp)} or more, or null")
    if ro.packed_sequences is False:
        raise ValueError(f"rollout.{keys[0]}: planned for packed passes (verl use_remove_padding); with"
                         " rollout.packed_sequences false each micro-batch would be padded to the longest sequence, not"
                         " modelled; allowed: packed_sequences null or true, or the budget null")
    if ro.logprob_max_tokens_per_micro_batch is not None and ro.logprob_micro_batch_size is not None:
        raise ValueError("rollout.logprob_max_tokens_per_micro_batch: the log-prob passes' token budget; with"
                         f" rollout.logprob_micro_batch_size {ro.logprob_micro_batch_size} (a fixed count) as well;"
                         " give one of them")
    rows = [k for k in ("packed_row_tokens", "packed_logprob_row_tokens") if getattr(ro, k) is not None]
    if rows:
        raise ValueError(f"rollout.{keys[0]}: verl's dynamic batching; rollout.{rows[0]} is NeMo RL's packed row"
                         " capacity, another framework's micro-batching; give one of them")


PACKING_PRESETS = ("verl", "openrlhf", "nemo-rl", "skyrl")
"""Frameworks that remove padding (pack sequences) in their log-prob and update passes. SkyRL:
``trainer.remove_microbatch_padding`` True by default, "Pack samples into the THD layout and strip
intra-microbatch padding" (NovaSky-AI/SkyRL skyrl/train/config/config.py l.962-963
@2e9c89afceb3ef7963748224373ad88882322c99); a recipe that turns it off says ``rollout.packed_sequences: false``.
Here (not in ``plan.rl_batches``, which reads it) so the card's checks use the planner's own predicate."""


def rl_passes_pack(card: RunCard) -> bool:
    """The RL log-prob and update passes pack sequences: the card's ``rollout.packed_sequences`` where it says, else
    the preset's habit (``PACKING_PRESETS``), or a token budget (verl's dynamic batching packs whatever the preset) when
    the card does not say. The predicate ``plan.rl_batches.rl_batch`` plans by."""
    ro = card.rollout
    if ro.packed_sequences is not None:
        return ro.packed_sequences
    budgeted = ro.max_tokens_per_micro_batch is not None or ro.logprob_max_tokens_per_micro_batch is not None
    return card.preset in PACKING_PRESETS or budgeted


MEGATRON_CORE_CAT_LOOP_BEFORE = (0, 15)
"""Megatron-Core releases before 0.15 run the ``cat`` per-sample thd RoPE loop (``ThdRopeLoop.CAT``; read at core_v0.10.0,
core_v0.11.0, core_v0.12.0 d580efc68a9f0dbf1945f834f6f6200cd01d3343 l.139-175, core_v0.13.0
c550cf6c41c31cd3ec72e05c25ea0c979f2b6631 l.139-179 and core_v0.14.0, NVIDIA/Megatron-LM
megatron/core/models/common/embeddings/rope_utils.py). core_v0.15.0 to core_v0.18.x gather the samples' frequencies
and apply RoPE once over the whole row (l.178-247 @core_v0.16.0 3bec9aa97dda898d16ff5a89bac0ed2b6682b172: "Build
packed freqs for all sequences using the standard mapping, then apply once"): no per-sample loop."""
MEGATRON_CORE_COPY_LOOP_SINCE = (0, 19)
"""From core_v0.19.0 (5be9626709af2722333bf54797c954c09edeada3, rope_utils.py l.189-268, "Apply RoPE one sequence
at a time so the second and later packed sequences do not look like continuations of the first sequence") the
``copy`` loop (``ThdRopeLoop.COPY``), as Megatron-LM main at 61f31145dfb4cfaa7d285df12aa9abffb22ff485 (the
submodule of NVIDIA-NeMo/Megatron-Bridge @f3ae2767b5e18aeb67b726cd8d5f1db58216dcc9)."""
VERL_MEGATRON_CORE_RELEASE = "0.13.1"
"""The Megatron-Core release verl's install pins when a verl card states none: ``pip3 install --no-deps
git+https://github.com/NVIDIA/Megatron-LM.git@core_v0.13.1`` (verl-project/verl scripts/install_vllm_sglang_mcore.sh
l.35 @1dda039b9c6311889a9c9a26040677e1254814f9; docs/start/install.rst l.20 there: "Currently, we support Megatron-LM
v0.13.1"; the verl rows' own commits pin core_v0.12.0, docs/start/install.rst l.83
@04acd09d65900521e8019adefd10308220cb7ee2, and core_v0.12.1, l.22 @503ea75f533f715cf1667551bd375ec9b1e0d5fc: the same
loop). Its uv lock (pyproject.toml l.397-399 there) pins core_v0.18.0, which has no per-sample loop: a uv-synced run
states software.megatron-core 0.18 and packed_rope_loop false."""


def megatron_core_pin(card: RunCard) -> Any:
    """The card's ``software.megatron-core`` pin (None when it states none)."""
    return (card.software.model_extra or {}).get("megatron-core")


def thd_rope_loop_of(card: RunCard) -> ThdRopeLoop:
    """Which per-sample thd RoPE loop ``batch.packed_rope_loop`` plans (``compute.inventory.thd_rope_loop``): by the
    ``software.megatron-core`` pin, ``cat`` before 0.15 (``MEGATRON_CORE_CAT_LOOP_BEFORE``), ``copy`` from 0.19
    (``MEGATRON_CORE_COPY_LOOP_SINCE``); a card without a readable pin takes its preset's pinned release: verl's
    core_v0.13.1 (``VERL_MEGATRON_CORE_RELEASE``, ``cat``), any other preset or none Megatron-LM main's ``copy``
    (Megatron-Bridge's submodule, which NeMo RL builds on). Pins from 0.15 to 0.18 are refused by the card."""
    pin = megatron_core_pin(card)
    if pin_before(pin, MEGATRON_CORE_CAT_LOOP_BEFORE):
        return ThdRopeLoop.CAT
    if pin_at_least(pin, MEGATRON_CORE_COPY_LOOP_SINCE):
        return ThdRopeLoop.COPY
    return ThdRopeLoop.CAT if card.preset == "verl" else ThdRopeLoop.COPY


def _check_packed_rope_loop(card: RunCard) -> None:
    """``batch.packed_rope_loop`` needs the samples it loops over: ``batch.packed_sample_tokens``, or an RL method
    whose log-prob and update passes pack each rollout sequence as one sample (``rl_passes_pack``: a packing preset,
    ``rollout.packed_sequences`` true, or a token budget); one line naming the field. A card whose passes pad (preset
    null or trl, no budget) has no thd row to loop over and is refused rather than planned unchanged."""
    b = card.batch
    pin = megatron_core_pin(card)
    if (b.packed_rope_loop and pin_at_least(pin, MEGATRON_CORE_CAT_LOOP_BEFORE)
            and not pin_at_least(pin, MEGATRON_CORE_COPY_LOOP_SINCE)):
        raise ValueError(f"software.megatron-core: '{pin}' applies thd RoPE once over the packed row (core_v0.15 to"
                         " 0.18 gather the samples' frequencies), no per-sample loop; allowed with"
                         " batch.packed_rope_loop true: a release before 0.15 or from 0.19, or set packed_rope_loop"
                         " false")
    if not b.packed_rope_loop or b.packed_sample_tokens is not None:
        return
    if card.method in (Method.PPO, Method.GRPO) and rl_passes_pack(card):
        return
    raise ValueError("batch.packed_rope_loop: the loop runs over the packed samples; set batch.packed_sample_tokens"
                     " (their mean tokens), or use method ppo / grpo with packed passes (a packing preset: "
                     + ", ".join(PACKING_PRESETS) + "; rollout.packed_sequences true; or a token budget), or"
                     " packed_rope_loop false")


def _check_weight_transport(card: "RunCard") -> None:
    """``rollout.weight_transport`` other than framework: what the card alone can tell, one line naming the field.

    nccl_reshard is NeMo RL's and refuses, in ``check_nccl_reshard_refit_support`` (NVIDIA-NeMo/RL
    nemo_rl/weight_sync/nccl_reshard_utils.py l.562-749 @7ea279abfbeb698b092856d0dab61e7cf39bc909): a colocated
    engine ("only for disaggregated train/gen"), a generation backend other than vLLM, a training backend other than
    Megatron ("this initial version supports the Megatron train backend only": not the DTensor/FSDP2 one, and NeMo RL
    has no DeepSpeed, so the preset is nemo-rl or none and the strategy Megatron-Core's single / ddp / zero1, not
    trainfit's DeepSpeed ZeRO or torch FSDP), Megatron expert_tensor_parallel_size > 1, a
    pipeline_model_parallel_layout, virtual pipeline stages, and any precision pairing but bf16 -> bf16 or
    blockwise-fp8 primary weights (``fp8_param`` + ``fp8_recipe: blockwise``) -> fp8 vLLM (fp8_param without fp8
    generation too: "FP8 storage on train side has no BF16 gen consumer"; receiver-side MXFP8 is not trainfit's
    rollout.quantization fp8).

    checkpoint_engine is modelled on its vLLM worker extension (``VllmColocateWorkerExtension``, MoonshotAI/checkpoint-
    engine checkpoint_engine/worker.py @59a3c4ffa2e14c0c26e81f62642e2d3ed68253ab; its SGLang integration is not
    modelled), and its buckets live in the device memory vLLM leaves free (``_detect_bucket_size``, ps.py l.604-654):
    rollout.gpu_memory_utilization below 1."""
    ro, par, prec = card.rollout, card.parallel, card.precision
    t = ro.weight_transport
    if ro.weight_sync_relays and (card.preset != "verl" or ro.placement is not Placement.SPLIT
                                  or t is not WeightTransport.FRAMEWORK):
        raise ValueError("rollout.weight_sync_relays: verl's checkpoint-engine broadcast (preset verl, placement split,"
                         " weight_transport framework) only; allowed otherwise: false")
    if ro.weight_sync_bucket_mib is not None and (t is not WeightTransport.FRAMEWORK
                                                  or ro.weight_sync is not WeightSync.BUCKETED):
        raise ValueError("rollout.weight_sync_bucket_mib: the bucket of the preset's own bucketed path (weight_sync"
                         " bucketed, weight_transport framework) only; allowed otherwise: null")
    verl_lora_rollout = (card.preset == "verl" and ro.engine is RolloutEngine.VLLM
                         and card.method in (Method.PPO, Method.GRPO))
    if verl_lora_rollout and card.scope is Scope.QLORA:
        raise ValueError("scope: qlora has no verl actor (its FSDP workers load no 4-bit base: no load_in_4bit or"
                         " BitsAndBytesConfig in verl/workers through 1dda039b) to serve vLLM; allowed with preset"
                         " verl and engine vllm: full, lora")
    # no preset: a verl file read back by ``trainfit import`` (which writes no preset) keeps the key
    if ro.layered_summon and (card.preset not in (None, "verl") or ro.engine is not RolloutEngine.VLLM
                              or card.scope is not Scope.LORA):
        raise ValueError("rollout.layered_summon: verl's LoRA actor into vLLM only (preset verl or none, scope lora,"
                         " engine vllm); allowed otherwise: false")
    if verl_lora_rollout and card.scope is Scope.LORA and t is not WeightTransport.FRAMEWORK:
        raise ValueError(f"rollout.weight_transport: {t.value} refits the full weights, but verl's LoRA actor hands"
                         " vLLM its adapter alone (add_lora; verl's checkpoint engines carry no adapter); allowed with"
                         " preset verl, scope lora and engine vllm: framework")
    verl = (card.software.model_extra or {}).get("verl")
    if ro.weight_sync_relays and verl_multi_sender_default(verl) is False:
        raise ValueError(f"rollout.weight_sync_relays: true needs verl's multi_sender (8de5fb44, first in the 0.10"
                         f" line); software.verl '{verl}' has no relays; allowed with that pin: false or null")
    if t is WeightTransport.FRAMEWORK:
        return
    if ro.engine is not RolloutEngine.VLLM:
        raise ValueError(f"rollout.weight_transport: {t.value} loads into vLLM; engine '{ro.engine.value}' is not"
                         " modelled with it; allowed with it: framework")
    if t is WeightTransport.CHECKPOINT_ENGINE:
        if ro.gpu_memory_utilization >= 1:
            raise ValueError("rollout.gpu_memory_utilization: 1 leaves checkpoint_engine no device memory for its"
                             " buckets; allowed with weight_transport checkpoint_engine: above 0 and below 1")
        return
    if ro.placement is not Placement.SPLIT:
        raise ValueError(f"rollout.weight_transport: nccl_reshard is non-colocated only (NeMo RL); placement is"
                         f" '{ro.placement.value}'; allowed with colocate: framework, checkpoint_engine")
    if card.preset not in (None, "nemo-rl"):
        raise ValueError(f"rollout.weight_transport: nccl_reshard is NeMo RL's; preset is '{card.preset}'; allowed"
                         " with it: framework, checkpoint_engine (or preset nemo-rl)")
    ulysses_zero1 = (par.strategy is Strategy.ZERO1 and par.context_parallel > 1
                     and par.context_parallel_kind is ContextParallelKind.ULYSSES
                     and par.tensor_parallel == par.pipeline_parallel == par.expert_parallel == 1)
    if par.strategy not in (Strategy.SINGLE, Strategy.DDP, Strategy.ZERO1) or ulysses_zero1:
        raise ValueError(f"rollout.weight_transport: nccl_reshard needs NeMo RL's Megatron training backend;"
                         f" strategy '{par.strategy.value}'{' with Ulysses context parallel' if ulysses_zero1 else ''}"
                         " is not it; allowed: parallel.strategy single, ddp or zero1 (Megatron-Core)")
    if par.expert_tensor_parallel != 1:
        raise ValueError(f"rollout.weight_transport: nccl_reshard refuses expert tensor parallel (NeMo RL); "
                         f"parallel.expert_tensor_parallel is {par.expert_tensor_parallel}; allowed with it: 1")
    if par.pipeline_layout is not None or par.virtual_stages > 1:
        raise ValueError("rollout.weight_transport: nccl_reshard refuses a pipeline layout and virtual stages (NeMo"
                         " RL); allowed with it: parallel.pipeline_layout unset, parallel.virtual_stages 1")
    blockwise = prec.compute is ComputeDtype.FP8 and prec.fp8_recipe is not None and prec.fp8_recipe.value == "blockwise"
    if ro.quantization is RolloutQuantization.FP8 and not (blockwise and prec.fp8_params):
        raise ValueError("rollout.quantization: fp8 with weight_transport nccl_reshard needs blockwise-fp8 primary"
                         " weights (precision must match end to end); allowed: precision.compute fp8, fp8_recipe"
                         " blockwise, fp8_params true, or quantization none")
    if prec.fp4_params:
        raise ValueError("precision.fp4_params: NVFP4 primary weights have no bf16 vLLM to receive them under"
                         " weight_transport nccl_reshard; allowed with it: false")
    if ro.quantization is not RolloutQuantization.FP8 and prec.fp8_params:
        raise ValueError("precision.fp8_params: fp8 primary weights have no bf16 vLLM to receive them under"
                         " weight_transport nccl_reshard; allowed with it: false, or rollout.quantization fp8")


def default_gpu_memory_utilization_of(card: "RunCard") -> tuple[float, str]:
    """``(fraction, source)`` a null ``rollout.gpu_memory_utilization`` resolves to
    (``methods.presets.default_gpu_memory_utilization``); an SGLang engine's from the card's GPU memory (nvidia-smi
    total), engine TP size, model (MLA or not) and scope (an adapter: the engine serves LoRA)."""
    from trainfit.methods.presets import default_gpu_memory_utilization

    ro = card.rollout
    if ro.engine is not RolloutEngine.SGLANG:
        return default_gpu_memory_utilization(preset=card.preset, placement=ro.placement)
    spec = _catalog_model_spec(card)
    return default_gpu_memory_utilization(
        preset=card.preset, placement=ro.placement, engine=ro.engine, gpu_memory_mib=_nvidia_smi_mib(card),
        engine_tp=ro.tensor_parallel, mla=spec is not None and spec.mla is not None,
        lora=card.scope in (Scope.LORA, Scope.QLORA))


def _nvidia_smi_mib(card: "RunCard") -> float | None:
    """The card's GPU memory as nvidia-smi reports it, MiB (the catalog's ``memory_bytes``; a custom card's
    ``gpu_memory_gib``); None when neither is known."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.errors import TrainfitError

    hw = card.hardware
    if hw.gpu_memory_gib is not None:
        return float(hw.gpu_memory_gib) * 1024
    try:
        return resolve_gpu(hw.gpu).memory_bytes / 2**20
    except (TrainfitError, KeyError, ValueError):
        return None


def _catalog_model_spec(card: "RunCard"):
    """The card's model spec from the catalog or an inline config, without a hub look-up; None otherwise."""
    from trainfit.catalog.hf_config import spec_from_hf_config
    from trainfit.catalog.models import from_catalog
    from trainfit.errors import TrainfitError

    m = card.model
    try:
        if isinstance(m, str):
            return from_catalog(m)
        if m.config is not None:
            return spec_from_hf_config(m.config, name=m.id or "inline config", source="inline")
        return from_catalog(m.id) if m.id and m.params is None else None
    except (TrainfitError, KeyError, TypeError, ValueError):
        return None


def _resolve_gpu_memory_utilization(card: "RunCard") -> None:
    """Fill a null ``rollout.gpu_memory_utilization`` with the framework's default for the card's preset and placement
    (``methods.presets.default_gpu_memory_utilization``). A stated value (card, ``--set`` or preset fill) is never
    replaced; the filled one stays out of ``model_fields_set`` (an explicit null is taken out of it), so a card re-validated from
    ``model_dump(exclude_unset=True)`` with another placement or preset resolves it afresh. The section is copied
    first: a ``RolloutSection`` shared by several cards is not changed."""
    if card.rollout.gpu_memory_utilization is not None:
        return
    value, _source = default_gpu_memory_utilization_of(card)
    rollout = card.rollout.model_copy()
    object.__setattr__(rollout, "gpu_memory_utilization", value)  # frozen section: the one resolution of a null
    # an explicit null (YAML ``null``, ``--set ...=null``) reads as unstated: drop it from the copy's fields set, so a
    # dump with exclude_unset leaves it out and the plan's assumption line keeps the default's source
    rollout.__pydantic_fields_set__ = set(rollout.__pydantic_fields_set__) - {"gpu_memory_utilization"}
    object.__setattr__(card, "rollout", rollout)


TRL_PPO_REFUSAL = (
    "preset: 'trl' with method ppo: TRL has no PPOTrainer in its trainers (PPO lives in trl.experimental.ppo, which"
    " generates with HF generate and trains policy and value as one wrapper; not planned); allowed with method ppo:"
    " preset verl or openrlhf, or no preset; with preset trl: method sft, rm, dpo or grpo"
)
"""The one line refusing ``preset: trl`` with ``method: ppo``. At the commit the preset cites (huggingface/trl
@f2cd57710ae345ea6428ae95363267fcf38a3dc8) trl/__init__.py and trl/trainer/ export no PPOTrainer; PPO is
trl/experimental/ppo/ppo_trainer.py (``batch_generation``, HF generate, l.115 and l.690; ``PolicyAndValueWrapper``,
l.275), under trl/experimental/__init__.py's "unstable or incubating features" notice. The preset's rollout block (a
colocated vLLM engine) describes GRPOTrainer, which PPO there does not have."""


def _check_trl_ppo(card: "RunCard") -> None:
    """``preset: trl`` plans TRL's own trainers; PPO is not one (``TRL_PPO_REFUSAL``)."""
    if card.preset == "trl" and card.method is Method.PPO:
        raise ValueError(TRL_PPO_REFUSAL)


def _check_unsloth_layers(card: "RunCard") -> None:
    """``parallel.unsloth_layers`` scales the card's kernels by Unsloth's counted layer (``compute.unsloth_layers``:
    LoRA on the seven linears, lora_dropout 0, one GPU); a card outside that count is refused with one line, never
    planned with it silently."""
    if not card.parallel.unsloth_layers:
        return
    gpus = card.hardware.gpus_per_node * card.hardware.nodes
    if card.scope not in (Scope.LORA, Scope.QLORA) or card.lora.dropout != 0 or gpus != 1:
        raise ValueError(
            f"parallel.unsloth_layers: Unsloth's layers were counted for a one-GPU LoRA without dropout; got scope"
            f" '{card.scope.value}', lora.dropout {card.lora.dropout:g}, {gpus} gpus; allowed with true: scope lora or"
            " qlora, lora.dropout 0 and one GPU (hardware.gpus_per_node 1, nodes 1), else false")


def _check_unsloth_one_gpu(card: "RunCard") -> None:
    """``preset: unsloth`` plans one GPU: its loader runs vLLM and the trainer in one process on one device
    (``methods.unsloth``); more GPUs are refused with one line, and so are a DeepSpeed ZeRO strategy, an RL card
    without an adapter, and a QLoRA card with an fp8 engine (``UNSLOTH_FP8_QLORA_REFUSAL``: Unsloth refuses
    load_in_fp8 beside load_in_4bit)."""
    if card.preset == "unsloth" and card.hardware.gpus_per_node * card.hardware.nodes != 1:
        from trainfit.methods.unsloth import UNSLOTH_MULTI_GPU_REFUSAL

        raise ValueError(UNSLOTH_MULTI_GPU_REFUSAL)
    if card.preset == "unsloth" and card.parallel.strategy in (Strategy.ZERO1, Strategy.ZERO2, Strategy.ZERO3):
        # one process, no DeepSpeed engine: the loader builds the trainer on the in-process vLLM engine's tensors
        # (methods.unsloth UNSLOTH_PRESET_SOURCE); its offload is activations only. FSDP is not refused: the embedded
        # default card states strategy fsdp, which the preset's single does not override, so `trainfit plan --preset
        # unsloth` without a card plans one GPU under it (an FSDP wrapper over one rank shards nothing)
        raise ValueError(f"parallel.strategy: '{card.parallel.strategy.value}' with preset unsloth cannot run:"
                         " Unsloth trains in one process with no DeepSpeed engine (its offload is activations only,"
                         " parallel.activation_offload); allowed: single, ddp, fsdp")
    if card.preset == "unsloth" and card.method in (Method.GRPO, Method.PPO) and card.scope not in (Scope.LORA, Scope.QLORA):
        # each generate call hands vLLM the trainer's LoRA adapter (load_lora) over the shared, frozen base weights:
        # the preset's weight path has no full-parameter sync (methods.unsloth 3.)
        raise ValueError(f"scope: '{card.scope.value}' with preset unsloth has no weight path to the engine (Unsloth"
                         " hands vLLM the LoRA adapter over the shared base weights); allowed: lora, qlora")
    if (card.preset == "unsloth" and card.scope is Scope.QLORA
            and card.rollout.quantization is RolloutQuantization.FP8):
        from trainfit.methods.unsloth import UNSLOTH_FP8_QLORA_REFUSAL

        raise ValueError(UNSLOTH_FP8_QLORA_REFUSAL)


def _check_attention_kernel(card: "RunCard") -> None:
    """``attention_kernel`` names a fused kernel: none runs under eager attention, and PyTorch SDPA dispatches only to
    its own FlashAttention-2 or to cuDNN (torch/nn/attention ``SDPBackend``: FLASH_ATTENTION, EFFICIENT_ATTENTION,
    CUDNN_ATTENTION, MATH)."""
    k = card.attention_kernel
    if k is AttentionKernel.AUTO:
        return
    if card.attention is Attention.EAGER:
        raise ValueError(f"attention_kernel: '{k.value}' names a fused kernel but attention is eager; allowed with"
                         " eager: auto (or set attention: flash)")
    if card.attention is Attention.SDPA and k in (AttentionKernel.FA3, AttentionKernel.FA4, AttentionKernel.TRITON_FA):
        raise ValueError(f"attention_kernel: '{k.value}' is not a PyTorch SDPA backend; allowed with attention sdpa:"
                         " auto, fa2, cudnn (or set attention: flash)")
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.attention_time import (
        KERNEL_ARCH_TEXT, KERNEL_NAMES, kernel_head_dim_runs, kernel_head_dim_text, kernel_runs_on, kernels_allowed,
    )
    from trainfit.errors import CatalogError

    try:
        spec = resolve_gpu(card.hardware.gpu)
    except CatalogError:
        return  # a custom card (memory only): not checked
    cc = spec.compute_capability
    if not kernel_runs_on(kernel=k.value, compute_capability=cc):
        raise ValueError(f"attention_kernel: '{k.value}' runs on {KERNEL_ARCH_TEXT[k.value]} only; {spec.id} is {cc};"
                         f" allowed there: {', '.join(kernels_allowed(compute_capability=cc))}")
    head_dim = _catalog_head_dim(card) if k is AttentionKernel.FA1 else None  # the one kernel with head-dim limits
    if head_dim and not kernel_head_dim_runs(kernel=k.value, compute_capability=cc, head_dim=head_dim):
        why = kernel_head_dim_text(kernel=k.value, compute_capability=cc, head_dim=head_dim)
        raise ValueError(f"attention_kernel: '{k.value}' ({KERNEL_NAMES[k.value]}) {why} ({spec.id}); allowed there:"
                         f" {', '.join(kernels_allowed(compute_capability=cc, head_dim=head_dim))}")


def _catalog_head_dim(card: "RunCard") -> int | None:
    """The widest attention head of a catalog model or an inline config (``attention_time.kernel_head_dim_of``), read
    without a hub look-up; None for anything else (the plan checks those: ``plan.time.attention_kernel_of``)."""
    from trainfit.catalog.hf_config import spec_from_hf_config
    from trainfit.catalog.models import from_catalog
    from trainfit.compute.attention_time import kernel_head_dim_of
    from trainfit.errors import TrainfitError

    m = card.model
    try:
        if isinstance(m, str):
            return kernel_head_dim_of(from_catalog(m))
        if m.config is not None:
            return kernel_head_dim_of(spec_from_hf_config(m.config, name=m.id or "inline config", source="inline"))
        return kernel_head_dim_of(from_catalog(m.id)) if m.id and m.params is None else None
    except (TrainfitError, KeyError, TypeError, ValueError):
        return None


def _check_peft_variant(card: "RunCard") -> None:
    """Each adapter section is read by its scope only (a section equal to its defaults, as a dumped record holds
    it, is not a setting); the PEFT variants are modelled for SFT on a bf16/fp16/fp32 base, without model
    parallelism or selective checkpointing (one line, exit 2)."""
    sc = card.scope
    for section, scopes in (("lora", (Scope.LORA, Scope.QLORA, Scope.DORA)), ("ia3", (Scope.IA3,)),
                            ("prompt_tuning", (Scope.PROMPT_TUNING,)), ("prefix_tuning", (Scope.PREFIX_TUNING,))):
        given = section in card.model_fields_set and getattr(card, section) != type(getattr(card, section))()
        if given and sc not in scopes and not (section == "lora" and sc is Scope.FULL):
            raise ValueError(f"{section}: only read with scope {' | '.join(s.value for s in scopes)}"
                             f" (scope is '{sc.value}'); drop {section} or change scope")
    if sc not in PEFT_VARIANT_SCOPES:
        return
    if sc is Scope.PROMPT_TUNING and card.prompt_tuning.num_virtual_tokens is None:
        raise ValueError("prompt_tuning.num_virtual_tokens: required with scope prompt_tuning (PEFT has no default);"
                         " allowed: 1 to 1000000, e.g. 20")
    if sc is Scope.PREFIX_TUNING:
        _check_prefix_tuning(card)
    ia3 = card.ia3
    if sc is Scope.IA3 and ia3.feedforward is not None:
        if ia3.targets is None:
            raise ValueError("ia3.feedforward: give ia3.targets too (PEFT requires feedforward_modules to be a subset"
                             " of target_modules)")
        extra = [m for m in ia3.feedforward if m not in ia3.targets]
        if extra:
            raise ValueError(f"ia3.feedforward: '{extra[0]}' is not in ia3.targets; allowed: {', '.join(ia3.targets)}")
    if sc is Scope.IA3 and ia3.targets is not None and not ia3.targets:
        raise ValueError("ia3.targets: an empty list trains nothing; give module names or drop the key (PEFT's default)")
    if card.method is not Method.SFT:
        raise ValueError(f"method: scope {sc.value} is modelled for sft only; allowed with it: sft")
    w = card.precision.weights
    if w in (Dtype.NF4, Dtype.INT8, Dtype.FP8):
        raise ValueError(f"precision.weights: '{w.value}' with scope {sc.value} is not modelled; allowed: fp32, bf16, fp16")
    par = card.parallel
    if par.model_parallel * par.expert_parallel > 1:
        raise ValueError(f"parallel: scope {sc.value} is modelled without tensor, context, pipeline or expert parallel;"
                         " allowed: tensor_parallel = context_parallel = pipeline_parallel = expert_parallel = 1")
    if par.selective_checkpointing is not SelectiveCheckpointing.NONE:
        raise ValueError(f"parallel.selective_checkpointing: scope {sc.value} is not modelled under selective"
                         " checkpointing; allowed: none")
    if (sc is not Scope.DORA and par.strategy not in (Strategy.SINGLE, Strategy.DDP, Strategy.FSDP)
            and card.world_size > 1):
        raise ValueError(f"parallel.strategy: '{par.strategy.value}' with scope {sc.value} is not modelled (DeepSpeed's"
                         " buckets and the other sharded layouts are sized from LoRA's tensors); allowed: single, ddp,"
                         " fsdp")


def _check_prefix_tuning(card: "RunCard") -> None:
    """Prefix tuning is modelled as PEFT runs it on transformers' SDPA layers without checkpointing (one line each)."""
    if card.prefix_tuning.num_virtual_tokens is None:
        raise ValueError("prefix_tuning.num_virtual_tokens: required with scope prefix_tuning (PEFT has no default);"
                         " allowed: 1 to 1000000, e.g. 20")
    if card.attention is not Attention.SDPA:
        raise ValueError(f"attention: '{card.attention.value}' with scope prefix_tuning is not modelled; allowed: sdpa")
    if card.parallel.gradient_checkpointing:
        raise ValueError("parallel.gradient_checkpointing: scope prefix_tuning is modelled without checkpointing;"
                         " allowed: false")


def _check_bf16_gpu(gpu: str, *, compute: ComputeDtype, compute_set: bool, weights: Dtype, weights_set: bool) -> None:
    """bf16 compute or weights need bf16 tensor cores (compute capability 8.0+, Ampere on): a catalog card without
    them (V100, 7.0) is refused, naming fp16 | fp32 (the card's tensor cores run fp16 only). A custom card (memory
    only) is not checked."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.errors import CatalogError

    try:
        spec = resolve_gpu(gpu)
    except CatalogError:
        return
    if spec.supports_bf16:
        return
    cc = f" ({spec.compute_capability})" if spec.compute_capability else ""
    for key, value, given in (("compute", compute.value, compute_set), ("weights", weights.value, weights_set)):
        if value == "bf16":
            default = "" if given else " (the default)"
            also = ("; set precision.weights too" if key == "compute" and weights.value == "bf16" and not weights_set
                    else "")
            raise ValueError(f"precision.{key}: bf16{default} needs compute capability 8.0+; {spec.id}{cc} supports"
                             f" fp16 | fp32{also}")


def _check_pipeline_layout(par: ParallelSection) -> None:
    """One line naming ``parallel.pipeline_layout`` and what it allows (the sum is checked against the model's
    layers where the model is known, ``memory.parallel.check_layout``). Megatron-Core's
    ``PipelineParallelLayerLayout`` (NVIDIA/Megatron-LM @d98e8a64ddf34856e74b24714e3bedb2f5a39553,
    ``megatron/core/transformer/pipeline_parallel_layer_layout.py``) takes ``pp x vpp`` stages, stage i on rank
    ``i % pp``, any of them empty (its ``pretty_repr`` prints "(empty stage)"), and ``transformer_config.py``
    ``__post_init__`` refuses it together with num_layers_in_first/last_pipeline_stage."""
    layout, pp, v = par.pipeline_layout, par.pipeline_parallel, par.virtual_stages
    assert layout is not None
    allowed = (f"allowed: {pp * v} non-negative decoder-layer counts (pipeline_parallel {pp} x virtual_stages {v}),"
               " one per virtual stage in model order, summing to the model's layers")
    if pp == 1:
        raise ValueError("parallel.pipeline_layout: only read with parallel.pipeline_parallel > 1; allowed with 1"
                         " stage: unset")
    if par.pipeline_first_stage_layers is not None or par.pipeline_last_stage_layers is not None:
        raise ValueError("parallel.pipeline_layout: states every stage, so pipeline_first_stage_layers /"
                         " pipeline_last_stage_layers must be unset with it (Megatron-Core refuses both); allowed:"
                         " one of the two")
    if len(layout) != pp * v:
        raise ValueError(f"parallel.pipeline_layout: {len(layout)} entries; {allowed}")
    if any(n < 0 for n in layout):
        raise ValueError(f"parallel.pipeline_layout: a negative count ({min(layout)}); {allowed}")
    if not sum(layout):
        raise ValueError(f"parallel.pipeline_layout: no decoder layers at all; {allowed}")


def _check_fp8_all_gather(card: RunCard) -> None:
    """``precision.fp8_all_gather`` is torchao's: ``WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather`` /
    ``fsdp_post_all_gather`` are FSDP2 (``fully_shard``) extension hooks on a tensorwise dynamically scaled
    ``Float8Linear`` weight (pytorch/ao @8c81863ba85cce742244c0151c6683c5696bbe04 ``torchao/float8/fsdp_utils.py``
    l.129-268; ``float8_linear.py`` l.406-420 wraps the weight only for dynamic scaling with the flag set). So it
    needs compute fp8, fp8_recipe current, torchao linears (not Transformer Engine's: tensor_parallel_impl not
    megatron), a strategy that gathers with FSDP2 and no fp8 primary weights; one line otherwise."""
    prec, par = card.precision, card.parallel
    if prec.compute is not ComputeDtype.FP8 or prec.fp8_recipe is not Fp8Recipe.CURRENT:
        recipe = prec.fp8_recipe.value if prec.fp8_recipe is not None else "null"
        raise ValueError(f"precision.fp8_all_gather: torchao's float8 all-gather casts tensorwise (current) scaled"
                         f" weights; needs precision.compute fp8 (is '{prec.compute.value}') and fp8_recipe current"
                         f" (is '{recipe}')")
    if par.tensor_parallel_impl is TensorParallelImpl.MEGATRON or prec.fp8_params:
        raise ValueError("precision.fp8_all_gather: torchao's, not Transformer Engine's (Megatron-FSDP gathers fp8"
                         " primary weights: precision.fp8_params); allowed: tensor_parallel_impl not megatron and"
                         " fp8_params false")
    if not par.fsdp2:
        raise ValueError(f"precision.fp8_all_gather: an FSDP2 (fully_shard) all-gather hook; strategy is"
                         f" '{par.strategy.value}' (fsdp_version '{par.fsdp_version.value}'); allowed: strategy fsdp,"
                         " fsdp_grad_op or hsdp with fsdp_version fsdp2")


def _check_fp8_params(card: RunCard, key: str = "precision.fp8_params") -> None:
    """``precision.fp8_params`` is Transformer Engine's (``quantized_model_init``) over 16-bit weights, under a
    strategy whose ranks hold whole (tensor/pipeline-parallel) weights: single, ddp or zero1 (Megatron's distributed
    optimizer, ``--fp8-param-gather``), or under Megatron-FSDP (strategy fsdp with tensor_parallel_impl megatron:
    uint8 weight shards gathered as fp8, ``memory.fp8.megatron_fsdp_fp8_units``); one line otherwise. torch FSDP2
    stays refused here: torchao's float8 all-gather keeps the bf16 (fp32) weights and is its own setting,
    ``precision.fp8_all_gather`` (``_check_fp8_all_gather``)."""
    from trainfit.memory.fp8 import transformer_engine_linears

    prec, par = card.precision, card.parallel
    what = "fp8" if key == "precision.fp8_params" else "NVFP4"
    if not transformer_engine_linears(recipe=prec.gemm_recipe, tensor_parallel_impl=par.tensor_parallel_impl):
        if what == "NVFP4":
            raise ValueError(f"{key}: NVFP4 primary weights are Megatron-Core's (Transformer Engine); torchao's NVFP4"
                             " keeps bf16 weights; allowed with it: parallel.tensor_parallel_impl megatron")
        raise ValueError(f"{key}: fp8 primary weights are Transformer Engine's; current or mxfp8 scaling"
                         " without parallel.tensor_parallel_impl: megatron is torchao's; allowed: fp8_recipe delayed or"
                         " blockwise, or current / mxfp8 with tensor_parallel_impl megatron")
    megatron_fsdp = (what == "fp8" and par.strategy is Strategy.FSDP
                     and par.tensor_parallel_impl is TensorParallelImpl.MEGATRON)
    if megatron_fsdp and prec.fp8_recipe not in (Fp8Recipe.DELAYED, Fp8Recipe.CURRENT):
        raise ValueError(f"{key}: under Megatron-FSDP (strategy fsdp) only per-tensor fp8 primary weights are"
                         " modelled (its MXFP8 transpose buffer and blockwise copies are not); allowed: fp8_recipe"
                         " delayed or current")
    if par.strategy not in (Strategy.SINGLE, Strategy.DDP, Strategy.ZERO1) and not megatron_fsdp:
        raise ValueError(f"{key}: strategy '{par.strategy.value}' is not modelled with {what} primary"
                         " weights; allowed: single, ddp, zero1"
                         + (", or fsdp with tensor_parallel_impl megatron (Megatron-FSDP)" if what == "fp8" else ""))
    if prec.weights not in (None, Dtype.BF16):
        raise ValueError(f"{key}: replaces bf16 weights (weights is '{prec.weights.value}');"
                         " allowed: weights bf16 or unset")


BLOCK_SCALED_MIN_CC = (10, 0)
"""Block-scaled (MX / NVFP4) tensor cores: NVIDIA Blackwell, compute capability 10.0 on (``tcgen05.mma`` with
``.block_scale``). Transformer Engine's NVFP4 check requires >= 10.0 (``_compute_nvfp4_support``,
NVIDIA/TransformerEngine transformer_engine/pytorch/quantization.py l.171-175
@d0067d0da6cb01811b8072a7d304f0e00344ce2b); its MXFP8 check requires 10.x (``TE_MXFP8_MAX_CC``). torchao's MX
linears (torchtitan's ``MXFP8LinearConverter``) ask only for >= 10.0: torchtitan
torchtitan/components/quantization/mx.py l.70-71 ``has_cuda_capability(10, 0)`` (tools/utils.py l.27-33, a ``>=``
on the device capability) @b5bcd76c66d0acb1a08b176d9639425bc55e0b2a, and pytorch/ao torchao/utils.py l.1157-1162
``is_sm_at_least_100`` (``>= (10, 0)``), which gates its MXFP8 CUDA and Triton cast kernels
(torchao/prototype/mx_formats/kernels.py l.454-459, l.1016-1020 @36027d82d1ad9949597ea16002ff4940374b1b94)."""
TE_MXFP8_MAX_CC = (12, 0)
"""Transformer Engine refuses MXFP8 from compute capability 12.0 on: ``_compute_mxfp8_support`` returns False with
"MXFP8 (for all gemm layouts) is not supported on 12.0+ architectures yet" (NVIDIA/TransformerEngine
transformer_engine/pytorch/quantization.py l.162-168 @d0067d0da6cb01811b8072a7d304f0e00344ce2b; its
``check_recipe_support`` raises it for ``MXFP8BlockScaling``, l.224-239), so a Megatron-Core card (TE's linears)
with ``fp8_recipe: mxfp8`` needs a 10.x GPU (B200, B300, GB200, GB300), not an RTX PRO 6000 or RTX 5090 (12.0)."""


def _cc_tuple(cc: str) -> tuple[int, ...]:
    return tuple(int(x) for x in cc.split("."))


def _block_scaled_ok(cc: str | None, *, te_mxfp8: bool) -> bool:
    """Whether compute capability ``cc`` runs block-scaled GEMMs (``BLOCK_SCALED_MIN_CC``), below
    ``TE_MXFP8_MAX_CC`` for Transformer Engine's MXFP8 (``te_mxfp8``)."""
    if not cc:
        return False
    t = _cc_tuple(cc)
    return t >= BLOCK_SCALED_MIN_CC and not (te_mxfp8 and t >= TE_MXFP8_MAX_CC)


def _block_scaled_gpus(*, te_mxfp8: bool = False) -> list[str]:
    from trainfit.catalog.gpus import gpu_ids, resolve_gpu

    return [g for g in gpu_ids() if _block_scaled_ok(resolve_gpu(g).compute_capability, te_mxfp8=te_mxfp8)]


def _check_tf32_gpu(gpu: str) -> None:
    """``precision.tf32`` true needs the catalog card's dense TF32 rate (``GpuSpec.tf32_dense_flops_per_s``); a custom
    card (memory only) or a name the catalog does not know is left to the GPU lookup."""
    from trainfit.catalog.gpus import gpu_ids, resolve_gpu
    from trainfit.errors import CatalogError

    try:
        spec = resolve_gpu(gpu)
    except CatalogError:
        return
    if not spec.tf32_dense_flops_per_s:
        allowed = ", ".join(i for i in gpu_ids() if resolve_gpu(i).tf32_dense_flops_per_s)
        raise ValueError(f"precision.tf32: true needs the GPU's TF32 tensor-core rate; {spec.id} has none in the"
                         f" catalog; allowed: false, or GPUs {allowed}")


def _check_block_scaled_gpu(gpu: str, *, key: str, what: str, te_mxfp8: bool = False) -> None:
    """MXFP8 / NVFP4 need block-scaled tensor cores (``BLOCK_SCALED_MIN_CC``): a catalog card of lower (or unknown,
    e.g. AMD) compute capability is refused in one line naming the cards that have them; ``te_mxfp8`` (MXFP8 through
    Transformer Engine, a Megatron-Core card): 12.x too (``TE_MXFP8_MAX_CC``). A custom card (memory only) is not
    checked."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.errors import CatalogError

    try:
        spec = resolve_gpu(gpu)
    except CatalogError:
        return
    cc = spec.compute_capability
    if _block_scaled_ok(cc, te_mxfp8=te_mxfp8):
        return
    allowed = ", ".join(_block_scaled_gpus(te_mxfp8=te_mxfp8))
    if cc and _block_scaled_ok(cc, te_mxfp8=False):  # 12.x under Transformer Engine's MXFP8
        raise ValueError(f"{key}: {what} through Transformer Engine (tensor_parallel_impl megatron) needs compute"
                         f" capability 10.x (TE: MXFP8 is not supported on 12.0+ architectures yet); {spec.id} is"
                         f" {cc}; allowed GPUs: {allowed}; torchao's MX linears (another tensor_parallel_impl)"
                         " accept it")
    raise ValueError(f"{key}: {what} needs NVIDIA Blackwell block-scaled tensor cores (compute capability 10.0+);"
                     f" {spec.id} ({cc or 'no NVIDIA compute capability'}) has none; allowed GPUs: {allowed}")


def _check_fp4_gpu(gpu: str) -> None:
    """fp4 compute needs Blackwell's fp4 tensor cores: a catalog card without an fp4 rate (Hopper, Ada, Ampere,
    AMD) is refused in one line; a custom card (memory only) is not checked."""
    from trainfit.catalog.gpus import gpu_ids, resolve_gpu
    from trainfit.errors import CatalogError

    try:
        spec = resolve_gpu(gpu)
    except CatalogError:
        return
    if spec.fp4_dense_flops_per_s:
        _check_block_scaled_gpu(gpu, key="precision.compute", what="fp4")
        return
    have = ", ".join(g for g in gpu_ids() if resolve_gpu(g).fp4_dense_flops_per_s)
    raise ValueError(f"precision.compute: fp4 needs fp4 tensor cores; {spec.id} has no fp4 rate in the catalog;"
                     f" allowed GPUs: {have}")


def _check_interconnect_gpu(gpu: str, link: Interconnect) -> None:
    """``hardware.interconnect`` names a link the catalog gives this GPU a rate for (``compute.rates.allowed_links``:
    no ``nvlink`` on a card without NVLink, no ``pcie`` between Grace superchips). A custom card (memory only) is not
    checked."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.rates import link_refusal
    from trainfit.errors import CatalogError

    try:
        spec = resolve_gpu(gpu)
    except CatalogError:
        return
    if (refused := link_refusal(spec, link=link)) is not None:
        raise ValueError(refused)


def _check_fp8_gpu(gpu: str, *, key: str = "precision.compute") -> None:
    """fp8 compute needs fp8 tensor cores (Hopper, Ada, Blackwell, MI300): a catalog card without an fp8 rate is
    refused, naming the ones that have it (``key``: the card field that asked for fp8). A custom card (memory only)
    is not checked."""
    from trainfit.catalog.gpus import gpu_ids, resolve_gpu
    from trainfit.errors import CatalogError

    try:
        spec = resolve_gpu(gpu)
    except CatalogError:
        return
    if not spec.fp8_dense_flops_per_s:
        have = [g for g in gpu_ids() if resolve_gpu(g).fp8_dense_flops_per_s]
        raise ValueError(f"{key}: fp8 needs fp8 tensor cores, which {spec.id} does not have; GPUs with"
                         f" them: {', '.join(have)}")


def _allowed(err: dict[str, Any]) -> str:
    ctx = err.get("ctx") or {}
    expected = ctx.get("expected")
    return f"; allowed: {expected.replace(chr(39), '')}" if expected else ""


def _section_keys(loc: tuple[Any, ...]) -> str:
    model: Any = RunCard
    for part in loc[:-1]:
        field = model.model_fields.get(part) if hasattr(model, "model_fields") else None
        if field is None:
            return ""
        ann = field.annotation
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
        if model is None:
            return ""
    return ", ".join(model.model_fields) if model is not None else ""


def format_validation_error(exc: ValidationError) -> str:
    """One line: the key, what is wrong, and the allowed values."""
    err = exc.errors()[0]
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p in ("str", "ModelRef", "function-after")))
    key = ".".join(str(p) for p in loc) or "card"
    kind = err["type"]
    given = err.get("input")
    if loc == ("model",) and kind in ("string_type", "model_type", "model_attributes_type", "dict_type"):
        return (f"model: a catalog id (e.g. Qwen/Qwen3-8B), a local path, or a mapping such as {{params: 27e9}} or"
                f" {{id: ..., revision: ...}}; got {str(given)[:60]!r}")
    if kind == "extra_forbidden":
        keys = _section_keys(loc)
        return f"{key}: unknown key" + (f"; allowed keys here: {keys}" if keys else "")
    if kind == "enum":
        return f"{key}: '{given}' is not allowed{_allowed(err)}"
    if kind == "boolean_number":  # raised by a section for one of its fields (``_Section._no_boolean_numbers``)
        field, value = err["ctx"]["field"], err["ctx"]["value"]
        name = f"{key}.{field}" if loc else field
        if _is_boolean(value):
            return f"{name}: got a boolean ({str(value).lower()}), not a number; allowed: a number"
        shown = ", ".join(str(x).lower() if _is_boolean(x) else str(x) for x in value)
        return f"{name}: [{shown}] holds a boolean; allowed: a list of numbers"
    if kind == "value_error":
        return str(err["msg"]).removeprefix("Value error, ")
    return f"{key}: {err['msg'].lower()} (got {given!r})"


def check_sections(data: Any) -> None:
    """Refuse, before presets or merges read it, a card whose sections are not mappings (``rollout: 5``)."""
    if not isinstance(data, dict):
        raise CardError("card: the file must hold a mapping of keys to values")
    for name, f in RunCard.model_fields.items():
        value = data.get(name)
        ann = f.annotation
        if value is not None and isinstance(ann, type) and issubclass(ann, BaseModel) and not isinstance(value, dict):
            raise CardError(f"{name}: must be a section of keys (e.g. {name}: {{...}}), got {str(value)[:40]!r};"
                            f" allowed keys here: {', '.join(ann.model_fields)}")


_ALLOWED_CONTROLS = frozenset("\t\n\r\x85")
"""Tab and the line breaks (newline, carriage return, NEL): text that moves to a new line, no escape sequence."""


def _terminal_control(text: str) -> str | None:
    """The first C0 / DEL / C1 control character in ``text`` other than tab and the line breaks: printed raw, ESC
    (U+001B), CSI (U+009B) and OSC (U+009D) start escape sequences a terminal runs (rich drops BEL and a few others
    only)."""
    for ch in text:
        code = ord(ch)
        if (code < 0x20 or 0x7F <= code <= 0x9F) and ch not in _ALLOWED_CONTROLS:
            return ch
    return None


def refuse_control_characters(data: Any, key: str = "") -> None:
    """Refuse, naming the key, a control character in any text of a card (keys and values, nested sections and
    lists, an inline config.json too): the plan, the exports and the errors print the card's text."""
    if isinstance(data, str):
        ch = _terminal_control(data)
        if ch is not None:
            raise CardError(f"{key or 'card'}: control character U+{ord(ch):04X} in {data[:60]!r}; allowed: printable"
                            " text (a terminal runs ESC and CSI as escape sequences)")
    elif isinstance(data, dict):
        for k, v in data.items():
            if isinstance(k, str):
                refuse_control_characters(k, key or "card")
            refuse_control_characters(v, f"{key}.{k}" if key else str(k))
    elif isinstance(data, (list, tuple)):
        for i, v in enumerate(data):
            refuse_control_characters(v, f"{key}[{i}]")


def load_card_dict(data: dict[str, Any]) -> RunCard:
    if not isinstance(data, dict):
        raise CardError("card: the file must hold a mapping of keys to values")
    refuse_control_characters(data)
    try:
        return RunCard.model_validate(data)
    except ValidationError as exc:
        raise CardError(format_validation_error(exc)) from exc


def resolve_card(data: Any) -> RunCard:
    """The card every command plans from card data a user wrote (a card file, a record's card, an API mapping),
    after the caller has set its overrides: the sections checked to be mappings (``check_sections``), then the
    framework ``preset`` filled under what the card states (``methods.presets.apply_preset``, once), then validated
    (``load_card_dict``). One path for ``plan``, ``check``, ``trace``, ``diagnose --card``, ``record``, ``export``,
    ``calibrate``'s records, ``watch``, ``compare`` and the Python and web APIs, so a constant ``calibrate`` fits is
    fitted against the card ``plan`` plans. ``fit`` sets its pins first and applies the preset the same way
    (``fit_search.fit_start``)."""
    check_sections(data)  # a preset merges sections: each must be a mapping first
    if data.get("preset"):
        from trainfit.methods.presets import apply_preset

        data = apply_preset(data, str(data["preset"]))
    return load_card_dict(data)


def read_card_file(path: Path) -> dict[str, Any]:
    """The card file as a dict: ``.json`` as JSON, any other suffix as YAML (never the default card).

    Bounded (``trainfit.spec.safe_yaml``): size, aliases, expanded values and depth; a file that
    does not hold a mapping is refused with one line."""
    from trainfit.spec.safe_yaml import load_mapping_file

    return load_mapping_file(path, what="card")
