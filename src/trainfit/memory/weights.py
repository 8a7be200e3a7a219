"""Model weights on the device, by storage dtype.

Quantized storage (nf4, int8, fp8) applies, as bitsandbytes/transformers do, to the decoder's
``nn.Linear`` layers only; embeddings, the output head (``lm_head`` is in
``modules_to_not_convert``), norms, routers and fused 3-D expert parameters stay in the
compute dtype.
"""

from __future__ import annotations

from functools import lru_cache

from dataclasses import dataclass

from trainfit.memory.lora import lora_trainable_params
from trainfit.memory.params import param_breakdown, linear_groups
from trainfit.memory.quant import QUANTIZED, linear_weight_bytes
from trainfit.spec.enums import ComputeDtype, Dtype
from trainfit.spec.model import ModelSpec
from trainfit.spec.training import TrainableSpec
from trainfit.units import BYTES_PER_DTYPE


@lru_cache(maxsize=4096)
def count_scale(spec: ModelSpec) -> float:
    """Factor from the architecture's closed-form count to a user's bare count (1.0 otherwise)."""
    if spec.params_override is None:
        return 1.0
    return spec.params_override / param_breakdown(spec).total


def total_params(spec: ModelSpec) -> int:
    return spec.params_override if spec.params_override is not None else param_breakdown(spec).total


@dataclass(frozen=True, slots=True)
class WeightBytes:
    base: float
    """The model's own weights (trained or frozen) in storage dtype, with quantization constants."""
    adapter: float
    """LoRA A/B matrices (fp32 under PEFT's default)."""

    @property
    def total(self) -> float:
        return self.base + self.adapter


def quantized_linear_params(spec: ModelSpec) -> int:
    """Weights that a quantizing loader converts: decoder nn.Linear layers (not fused experts)."""
    return sum(g.weight_params for g in linear_groups(spec) if not g.is_fused_experts)


@lru_cache(maxsize=4096)
def base_weight_bytes(spec: ModelSpec, *, weights: Dtype, compute: ComputeDtype, double_quant: bool = True) -> float:
    """Bytes of the model's own weights stored as ``weights``."""
    scale = count_scale(spec)
    total = param_breakdown(spec).total
    if weights not in QUANTIZED:
        return total * scale * BYTES_PER_DTYPE[weights.value]
    quant_bytes = 0.0
    for g in linear_groups(spec):
        if g.is_fused_experts:
            continue
        quant_bytes += g.count * linear_weight_bytes(
            dtype=weights, in_features=g.in_features, out_features=g.out_features, double_quant=double_quant
        )
    rest = total - quantized_linear_params(spec)
    return (quant_bytes + rest * BYTES_PER_DTYPE[compute.value]) * scale


def weight_bytes(
    spec: ModelSpec, *, weights: Dtype, compute: ComputeDtype, trainable: TrainableSpec
) -> WeightBytes:
    """Base weights plus adapter weights."""
    dq = trainable.lora.double_quant if trainable.lora is not None else True
    base = base_weight_bytes(spec, weights=weights, compute=compute, double_quant=dq)
    adapter = 0.0
    if trainable.lora is not None:
        adapter = lora_trainable_params(spec, trainable.lora) * count_scale(spec) * trainable.lora.adapter_dtype_bytes
    return WeightBytes(base=base, adapter=adapter)
