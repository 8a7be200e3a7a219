"""Closed sets of choices. Cards, CLI flags and the core all speak these enums."""

from enum import StrEnum


class Method(StrEnum):
    SFT = "sft"
    RM = "rm"
    DPO = "dpo"
    PPO = "ppo"
    GRPO = "grpo"


class Scope(StrEnum):
    FULL = "full"
    LORA = "lora"
    QLORA = "qlora"


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


class Offload(StrEnum):
    NONE = "none"
    OPTIMIZER = "optimizer"
    PARAMS_AND_OPTIMIZER = "params_and_optimizer"


class Attention(StrEnum):
    SDPA = "sdpa"
    FLASH = "flash"
    EAGER = "eager"


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
    """Phases of one training step, in order."""

    LOAD = "load"
    FORWARD = "forward"
    BACKWARD = "backward"
    OPTIMIZER_STEP = "optimizer_step"


class OptimizerImpl(StrEnum):
    """How torch's AdamW runs its step (decides the step's temporaries)."""

    FUSED = "fused"
    FOREACH = "foreach"
    FOR_LOOP = "for_loop"


class AdapterDtype(StrEnum):
    """Dtype of LoRA A/B matrices."""

    FP32 = "fp32"
    BF16 = "bf16"
