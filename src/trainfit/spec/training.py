"""What is trained: full fine-tuning, LoRA or QLoRA, and which modules LoRA targets."""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.spec.enums import Scope

ALL_LINEAR = "all-linear"


@dataclass(frozen=True, kw_only=True, slots=True)
class LoraSpec:
    """A PEFT LoRA adapter.

    ``targets`` are module names as PEFT matches them (``q_proj``, ``gate_proj``...), or
    ``("all-linear",)`` for every linear layer except the output head, as PEFT does.
    """

    rank: int = 16
    alpha: float = 32.0
    targets: tuple[str, ...] = (ALL_LINEAR,)
    dropout: float = 0.0
    dropout_post: bool = False
    """Dropout on the adapter's output (NeMo Automodel's ``dropout_position="post"``), not on its input (PEFT)."""
    adapter_dtype_bytes: int = 4
    """PEFT keeps LoRA A/B in fp32 even on a bf16 base (autocast_adapter_dtype=True)."""
    double_quant: bool = True
    """QLoRA: bitsandbytes double quantization of the absmax constants."""
    transformers_v4: bool = False
    """The model is built by transformers < 5 (a ``software.transformers`` pin before 5, or ``parallel.moe_experts``
    loop / loop_all): a MoE family's routed experts are an ``nn.ModuleList`` of MLPs of ``nn.Linear``, which PEFT
    matches and wraps as ordinary modules, with no conversion into ``target_parameters``
    (``trainfit.memory.lora._V4_EXPERT_MODULES``). False: transformers 5's fused 3-D experts."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainableSpec:
    """The training scope and its adapter, if any."""

    scope: Scope = Scope.FULL
    lora: LoraSpec | None = None

    def __post_init__(self) -> None:
        if self.scope is Scope.FULL and self.lora is not None:
            raise ValueError("lora: an adapter was given for a full-scope run")
        if self.scope is not Scope.FULL and self.lora is None:
            raise ValueError(f"lora: scope {self.scope} needs a LoRA spec")

    @property
    def is_adapter(self) -> bool:
        return self.scope is not Scope.FULL
