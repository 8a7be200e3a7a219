"""LoRA: which linear maps an adapter targets, and how many parameters it trains.

Dense: trainable = Σ over targeted modules of r·(in + out) (PEFT's A: in→r, B: r→out).
Fused MoE experts (transformers v5 3-D parameters): PEFT puts one LoRA pair per expert and
gives the fused ``gate_up_proj`` rank 2r when gate_proj/up_proj are targeted
(GROUND_TRUTH.md §1: Qwen3-30B-A3B at r=16 trains 994,836,480 parameters).
"""

from __future__ import annotations

from functools import lru_cache

from trainfit.errors import CardError
from trainfit.memory.params import LinearGroup, linear_groups
from trainfit.spec.model import ModelSpec
from trainfit.spec.training import ALL_LINEAR, LoraSpec

_FUSED_ALIASES = {"gate_up_proj": ("gate_proj", "up_proj", "gate_up_proj")}


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _router_group(spec: ModelSpec) -> list[LinearGroup]:
    if spec.moe is None:
        return []
    n_moe = sum(1 for i in range(spec.num_layers) if spec.moe.is_moe_layer(i))
    return [LinearGroup("gate", spec.hidden_size, spec.moe.num_experts, n_moe)] if n_moe else []


def linear_names(spec: ModelSpec) -> list[str]:
    """The module names a LoRA target can match in this model (PEFT matches the last name component)."""
    names: list[str] = []
    for g in linear_groups(spec) + _router_group(spec):
        for n in (_FUSED_ALIASES.get(_short(g.name), (_short(g.name),)) if g.is_fused_experts else (_short(g.name),)):
            if n not in names:
                names.append(n)
    return names


@lru_cache(maxsize=4096)
def targeted_groups(spec: ModelSpec, lora: LoraSpec) -> list[LinearGroup]:
    """Linear groups the adapter wraps. ``all-linear`` excludes the output head, as PEFT
    does; on MoE models PEFT 0.21 also wraps the fused experts and the router weight
    (measured: Qwen3-30B-A3B, 4 layers, r=16 -> 83,042,304).

    Targets that match no module are refused (``CardError``, exit 2), naming the model's linear
    layers: PEFT raises "Target modules ... not found in the base model" for that case, and a
    typo or another family's name (Qwen-1's ``c_attn``) must never plan 0 trainable parameters."""
    groups = linear_groups(spec)
    if spec.family == "llama4_text":
        # Llama4TextExperts holds its experts as 3-D Parameters that PEFT 0.21 never wraps (measured on meta,
        # 4 layers, r=16, all-linear: Scout 4,981,760 = attention + shared expert + router; Maverick 5,607,424)
        groups = [g for g in groups if not g.is_fused_experts]
    if ALL_LINEAR in lora.targets:
        return _all_linear(spec, groups)
    wanted = set(lora.targets)
    out = []
    for g in groups + _router_group(spec):
        names = _FUSED_ALIASES.get(_short(g.name), (_short(g.name),)) if g.is_fused_experts else (_short(g.name),)
        if wanted.intersection(names) and (g.name != "gate" or "gate" in wanted):
            out.append(g)
    if not out:
        raise CardError(f"lora.targets: {', '.join(lora.targets)} match no linear layer of {spec.name}; its linear"
                        f" layers: {', '.join(linear_names(spec))} (or all-linear)")
    return out


def _all_linear(spec: ModelSpec, groups: list[LinearGroup]) -> list[LinearGroup]:
    """What PEFT 0.21's ``all-linear`` wraps, measured on meta models (4 layers, r=16): gpt-oss only its
    attention projections (its experts are 3-D parameters with biases and its router is no nn.Linear);
    DeepSeek-V3 the fused experts and the router but not the dense or shared MLPs, whose gate/up/down
    projections share the experts' names (136,503,296 trainable on 3 dense + 1 MoE layer)."""
    if spec.family == "gpt_oss":
        return [g for g in groups if not g.is_fused_experts]
    if spec.family == "deepseek_v3":
        named_like_experts = {"gate_proj", "up_proj", "down_proj"}
        return [g for g in groups if g.is_fused_experts or _short(g.name) not in named_like_experts] + _router_group(spec)
    return groups + _router_group(spec)


SAVABLE = ("embed_tokens", "lm_head")
"""Modules ``lora.modules_to_save`` can name: PEFT wraps each in a ModulesToSaveWrapper that keeps the
frozen original and trains a full copy (``peft.utils.other.ModulesToSaveWrapper``)."""


def saved_module_params(spec: ModelSpec, modules: tuple[str, ...]) -> tuple[int, int]:
    """(embedding, head) elements trained in full by ``modules_to_save``; a tied model's head is the
    embedding matrix, copied as its own module by PEFT. Unknown names are refused."""
    bad = [m for m in modules if m not in SAVABLE]
    if bad:
        raise CardError(f"lora.modules_to_save: '{bad[0]}' is not allowed; allowed: {', '.join(SAVABLE)}")
    matrix = spec.vocab_size * spec.hidden_size
    head = (spec.head_outputs * spec.hidden_size) if spec.head_outputs else matrix
    return (matrix if "embed_tokens" in modules else 0, head if "lm_head" in modules else 0)


@lru_cache(maxsize=4096)
def lora_trainable_params(spec: ModelSpec, lora: LoraSpec) -> int:
    """Exact trainable parameter count of a PEFT LoRA adapter (no bias, no DoRA)."""
    total = 0
    for g in targeted_groups(spec, lora):
        r = lora.rank * g.lora_rank_multiplier
        total += g.count * g.experts * r * (g.in_features + g.out_features)
    return total


@lru_cache(maxsize=4096)
def lora_largest_tensor_params(spec: ModelSpec, lora: LoraSpec) -> int:
    """Elements of the largest single adapter tensor (sizes the for-loop optimizer's temporaries)."""
    best = 0
    for g in targeted_groups(spec, lora):
        r = lora.rank * g.lora_rank_multiplier
        best = max(best, g.experts * r * max(g.in_features, g.out_features))
    return best
