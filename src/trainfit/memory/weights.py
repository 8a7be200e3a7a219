"""Model weights on the device, by storage dtype.

Quantized storage (nf4, int8, fp8) applies, as bitsandbytes/transformers do, to the decoder's ``nn.Linear`` layers
only; embeddings, the output head (``lm_head`` is in ``modules_to_not_convert``), norms, routers and fused 3-D
expert parameters stay in the compute dtype (transformers 5.24.0's bitsandbytes loader replaces ``nn.Linear``
modules only; benchmarks/qlora_moe_experts_cpu.py loads Qwen3-MoE, Mixtral and gpt-oss in NF4 on CPU: their NF4 and
bf16 element counts equal these; a gpt-oss checkpoint as released carries its MXFP4 quantization_config, which
refuses a BitsAndBytesConfig, so its QLoRA starts from a bf16 copy). Under transformers < 5's per-expert loop
(``parallel.moe_experts`` loop / loop_all) each expert's w1 / w3 / w2 is its own ``nn.Linear`` (transformers 4.48.1
wheel models/mixtral/modeling_mixtral.py l.73-75), which bitsandbytes' replace loop turns into a ``Linear4bit`` like
any other linear (integrations/bitsandbytes.py l.168, l.202): ``quantized_experts`` counts them in the quantized
dtype (the time twin is ``compute.expert_loop.bnb_nf4_experts``). The Mixtral router, ``self.gate =
nn.Linear(hidden, num_experts)`` (modeling_mixtral.py l.105), is quantized too (only ``get_keys_to_not_convert``'s
``lm_head`` is skipped when ``llm_int8_skip_modules`` is unset, quantizers/quantizer_bnb_4bit.py l.296-299); it
stays counted with the norms in ``compute`` bytes: 32 x 8 x 4096 weights on Mixtral-8x7B, about 3.6 MB too many
under an fp32 ``compute``.
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
def base_weight_bytes(spec: ModelSpec, *, weights: Dtype, compute: ComputeDtype, double_quant: bool = True,
                      quantized_experts: bool = False) -> float:
    """Bytes of the model's own weights stored as ``weights``; the parameters the loader leaves unquantized are
    ``compute`` bytes each. ``quantized_experts``: the routed experts are per-expert ``nn.Linear`` modules that the
    loader quantizes too (module docstring); otherwise their fused 3-D parameters stay in ``compute``."""
    scale = count_scale(spec)
    total = param_breakdown(spec).total
    if weights not in QUANTIZED:
        return total * scale * BYTES_PER_DTYPE[weights.value]
    quant_bytes, quant_params = 0.0, 0
    for g in linear_groups(spec):
        if g.is_fused_experts and not quantized_experts:
            continue
        quant_params += g.weight_params
        # the loop's experts hold w1 and w3 as two linears where the fused layout has one gate_up_proj
        split = 2 if g.is_fused_experts and g.name == "gate_up_proj" else 1
        quant_bytes += g.count * g.experts * split * linear_weight_bytes(
            dtype=weights, in_features=g.in_features, out_features=g.out_features // split, double_quant=double_quant
        )
    rest = total - quant_params
    return (quant_bytes + rest * BYTES_PER_DTYPE[compute.value]) * scale


def weight_bytes(
    spec: ModelSpec, *, weights: Dtype, compute: ComputeDtype, trainable: TrainableSpec,
    quantized_experts: bool = False,
) -> WeightBytes:
    """Base weights plus adapter weights (``quantized_experts``: ``base_weight_bytes``)."""
    dq = trainable.lora.double_quant if trainable.lora is not None else True
    base = base_weight_bytes(spec, weights=weights, compute=compute, double_quant=dq,
                             quantized_experts=quantized_experts)
    adapter = 0.0
    if trainable.lora is not None:
        adapter = lora_trainable_params(spec, trainable.lora) * count_scale(spec) * trainable.lora.adapter_dtype_bytes
    return WeightBytes(base=base, adapter=adapter)
