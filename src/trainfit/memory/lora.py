"""LoRA: which linear maps an adapter targets, and how many parameters it trains.

Dense: trainable = Σ over targeted modules of r·(in + out) (PEFT's A: in→r, B: r→out).
Fused MoE experts (transformers v5 3-D parameters): where PEFT converts the targets (``_PEFT_CONVERTS``:
Qwen3-MoE, DeepSeek-V3) it puts one LoRA pair per expert and gives the fused ``gate_up_proj`` rank 2r when
gate_proj/up_proj are targeted (GROUND_TRUTH.md §1: Qwen3-30B-A3B at r=16 trains 994,836,480 parameters);
on gpt-oss, Llama-4 and Qwen2-MoE it wraps no expert, whatever the targets name.
transformers < 5 (``LoraSpec.transformers_v4``): the same families' experts are ``nn.Linear`` modules, each wrapped
by its own name, rank r (``_V4_EXPERT_MODULES``).
"""

from __future__ import annotations

from functools import lru_cache

from trainfit.errors import CardError
from trainfit.memory.params import LinearGroup, linear_groups
from trainfit.spec.model import DEEPSEEK_FAMILIES, ModelSpec
from trainfit.spec.training import ALL_LINEAR, LoraSpec
from trainfit.units import BYTES_PER_DTYPE


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


_PEFT_CONVERTS = frozenset({"qwen3_moe", "mixtral", "olmoe", "glm4_moe"}) | DEEPSEEK_FAMILIES
"""MoE families whose adapter targets PEFT 0.21.2 rewrites for transformers v5 before it matches modules
(``peft/utils/transformers_weight_conversion.py`` ``_convert_peft_config_moe`` l.402-482, entered for the
model types ``_MODEL_TO_CONVERSION_PATTERN`` maps to ``qwen2_moe``; called from ``tuners/tuners_utils.py``
``inject_adapter`` l.833-849): the v4 expert names ``gate_proj``/``up_proj``/``down_proj`` and the router
``gate`` (``_MOE_TARGET_MODULE_MAPPING`` l.339-344) become ``target_parameters`` on the fused 3-D experts
and the router's weight, and leave ``target_modules`` (l.444-459), so a dense or shared MLP named the same
is not wrapped; ``gate_proj`` without ``up_proj`` (or the reverse) raises (l.461-469). A target spelled
``gate_up_proj`` is no v4 name: it stays a module target and, the experts being a Parameter, matches
nothing. Mixtral converts the same way under its own v4 names (``_V4_EXPERT_NAMES``; l.45 adds ``mixtral`` to the map;
measured on a meta Mixtral, 2 layers, r=16: all-linear 426,240, w1+w3+w2 360,448, w2 98,304, q/v+gate 37,120, w1
without w3 raises). OLMoE is mapped like Qwen3-MoE (transformers 5.24.0 ``conversion_mapping.py`` ``"olmoe": "qwen2_moe"``), and so are
DeepSeek-V2 and -V3 (l.55-56) and GLM-4.5 (``"glm4_moe": "qwen2_moe"``, l.60).
``qwen2_moe`` itself, ``gpt_oss`` and ``llama4`` are not in that map (l.43-45; transformers 5.24.0
``conversion_mapping.py``): their 3-D experts are only ever plain Parameters to ``target_modules``, which
matches modules, so PEFT never wraps them."""

_ROUTER_MODULE = {"qwen3_moe": "gate", "deepseek_v3": "gate", "deepseek_v2": "gate", "mixtral": "gate", "olmoe": "gate",
                  "glm4_moe": "gate", "llama4_text": "router"}
"""The name a target uses for the router's adapter, where PEFT 0.21.2 can wrap it: the converting families'
``gate`` (Qwen3MoeTopKRouter / DeepseekV3TopkRouter, no ``nn.Linear``, become ``target_parameters``
``gate.weight``), Llama-4's ``router`` (transformers 5.24.0 ``models/llama4/modeling_llama4.py`` l.141
``class Llama4Router(nn.Linear)``, l.163 ``self.router``). gpt-oss's ``mlp.router`` (``GptOssTopKRouter``,
``models/gpt_oss/modeling_gpt_oss.py`` l.117-124: an ``nn.Module`` holding ``weight``/``bias``
Parameters) and Qwen2-MoE's ``mlp.gate`` (``Qwen2MoeTopKRouter``, ``models/qwen2_moe/modeling_qwen2_moe.py``
l.311, l.335) are refused by ``tuners/lora/model.py`` ``_create_new_module`` (l.559 "Target module ... is
not supported") when named, and ``all-linear`` (``nn.Linear`` only) skips them."""

_UNWRAPPABLE_ROUTER = {"gpt_oss": "router", "qwen2_moe": "gate"}


_V4_EXPERT_MODULES = frozenset({"qwen2_moe", "qwen3_moe", "mixtral", "olmoe", "glm4_moe"}) | DEEPSEEK_FAMILIES
"""MoE families whose transformers 4.x experts are an ``nn.ModuleList`` of MLPs, each three ``nn.Linear``
(transformers 4.57.6 wheel: ``Qwen2MoeSparseMoeBlock`` models/qwen2_moe/modeling_qwen2_moe.py l.597-603,
``Qwen3MoeSparseMoeBlock`` models/qwen3_moe/modeling_qwen3_moe.py l.221-222, ``MixtralSparseMoeBlock``
models/mixtral/modeling_mixtral.py l.95-97 (``w1`` / ``w3`` / ``w2``), ``OlmoeSparseMoeBlock``
models/olmoe/modeling_olmoe.py l.582-583, ``DeepseekV2MoE`` l.103-109, ``DeepseekV3MoE`` l.164-170,
``Glm4MoeMoE`` l.303-309). PEFT converts targets into ``target_parameters`` only on transformers 5 (peft 0.21.2
peft/tuners/tuners_utils.py ``inject_adapter`` l.833: ``if is_transformers_ge_v5 and is_transformers_like_model``),
so on 4.x every expert linear is an ordinary module target, matched by its own name and given its own rank-r pair:
``all-linear`` wraps every ``nn.Linear`` but the output head, the experts, the routers that are ``nn.Linear``
(``_V4_LINEAR_ROUTER``), Qwen2-MoE's ``shared_expert_gate`` and the shared and dense MLPs included; ``gate_proj``
without ``up_proj`` is allowed; ``gate_up_proj`` names no expert. Measured with ``get_peft_model`` on meta models
(transformers 4.57.6, peft 0.21.2, r 16, 2 layers, tests/unit/test_moe_lora_targets.py ``CFGS``): Qwen2-MoE
all-linear 418,080 (114,720 on transformers 5), gate/up/down_proj 344,064 (49,152), q/v + gate 37,120 (refused on
5); Qwen3-MoE all-linear 360,704 (426,240), gate_proj + down_proj 196,608 (refused on 5); DeepSeek-V3 all-linear
268,544 (250,240); Mixtral w1/w3/w2 294,912 (360,448): ``V4_PEFT`` there."""

_V4_LINEAR_ROUTER = frozenset({"qwen2_moe", "qwen3_moe", "mixtral", "olmoe"})
"""The families whose transformers 4.x router ``gate`` is an ``nn.Linear(hidden, experts)`` (the 4.57.6 lines of
``_V4_EXPERT_MODULES``), which PEFT wraps; DeepSeek-V2's ``DeepseekV2MoEGate``, DeepSeek-V3's
``DeepseekV3TopkRouter`` and GLM-4.5's ``Glm4MoeTopkRouter`` are ``nn.Module``s holding a weight Parameter, which
``all-linear`` skips and a named ``gate`` makes PEFT refuse (measured: DeepSeek-V3 q/v + gate raises)."""


def v4_expert_module_list(spec: ModelSpec) -> bool:
    """Whether transformers 4.x builds ``spec``'s routed experts as an ``nn.ModuleList`` of per-expert MLPs that its
    MoE block loops over (``_V4_EXPERT_MODULES``): such a model has no grouped experts before transformers 5."""
    return spec.moe is not None and spec.family in _V4_EXPERT_MODULES


def _v4_layout(spec: ModelSpec, lora: LoraSpec) -> bool:
    return lora.transformers_v4 and v4_expert_module_list(spec)


def _v4_groups(spec: ModelSpec) -> list[LinearGroup]:
    """The ``nn.Linear`` groups of a ``_V4_EXPERT_MODULES`` model on transformers 4.x: the decoder's other linears as
    ``linear_groups`` has them, each routed expert's linears as modules of their own (``experts.<name>``, one per
    expert and MoE layer: Mixtral's ``w1`` / ``w3`` / ``w2``, else ``gate_proj`` / ``up_proj`` / ``down_proj``), and
    the router ``gate`` where it is an ``nn.Linear`` (``_V4_LINEAR_ROUTER``)."""
    (gate, up), down = _v4_names(spec)
    out: list[LinearGroup] = []
    for g in linear_groups(spec):
        if not g.routed:
            out.append(g)
            continue
        n = g.count * g.experts
        if _short(g.name) == "gate_up_proj":
            w = g.out_features // 2
            out += [LinearGroup("experts." + gate, g.in_features, w, n, g.bias, routed=True),
                    LinearGroup("experts." + up, g.in_features, w, n, g.bias, routed=True)]
        else:
            out.append(LinearGroup("experts." + down, g.in_features, g.out_features, n, g.bias, routed=True))
    if spec.family in _V4_LINEAR_ROUTER:
        n_moe = sum(1 for i in range(spec.num_layers) if spec.moe.is_moe_layer(i))
        if n_moe:
            out.append(LinearGroup("gate", spec.hidden_size, spec.moe.num_experts, n_moe))
    return out


def _v4_targeted(spec: ModelSpec, lora: LoraSpec) -> list[LinearGroup]:
    """``targeted_groups`` on transformers 4.x (``_V4_EXPERT_MODULES``): every ``nn.Linear`` for ``all-linear``,
    else the linears whose own name a target is."""
    groups = _v4_groups(spec)
    if ALL_LINEAR in lora.targets:
        return groups
    wanted = set(lora.targets)
    names = list(dict.fromkeys(_short(g.name) for g in groups))
    if "gate" in wanted and spec.family not in _V4_LINEAR_ROUTER:
        raise CardError(f"lora.targets: 'gate' is {spec.name}'s router on transformers 4.x, a module PEFT cannot"
                        f" wrap (not an nn.Linear); its linear layers: {', '.join(names)} (or all-linear)")
    out = [g for g in groups if _short(g.name) in wanted]
    if not out:
        raise CardError(f"lora.targets: {', '.join(lora.targets)} match no linear layer of {spec.name} on"
                        f" transformers 4.x; its linear layers: {', '.join(names)} (or all-linear)")
    return out


def _router_group(spec: ModelSpec) -> list[LinearGroup]:
    if spec.moe is None or spec.family not in _ROUTER_MODULE:
        return []
    n_moe = sum(1 for i in range(spec.num_layers) if spec.moe.is_moe_layer(i))
    name = _ROUTER_MODULE[spec.family]
    return [LinearGroup(name, spec.hidden_size, spec.moe.num_experts, n_moe)] if n_moe else []


def _wrappable_groups(spec: ModelSpec) -> list[LinearGroup]:
    """The linear groups PEFT can wrap from ``target_modules`` (fused experts only where it converts)."""
    groups = linear_groups(spec)
    if spec.moe is not None and spec.family not in _PEFT_CONVERTS:
        groups = [g for g in groups if not g.is_fused_experts]
    return groups


_V4_EXPERT_NAMES = {"mixtral": (("w1", "w3"), "w2")}
"""A converting family's v4 expert names where they are not Qwen's (``gate_proj`` + ``up_proj``, ``down_proj``):
PEFT 0.21.2 ``utils/transformers_weight_conversion.py`` ``_MOE_TARGET_MODULE_MAPPING`` l.332-338 (``gate`` to
``gate.weight``, ``w1``/``w3`` to ``gate_up_proj``, ``w2`` to ``down_proj``) and ``_MOE_FUSED_TARGETS`` l.350."""


def _v4_names(spec: ModelSpec) -> tuple[tuple[str, str], str]:
    pair, down = _V4_EXPERT_NAMES.get(spec.family, (("gate_proj", "up_proj"), "down_proj"))
    return (pair[0], pair[1]), down


QWEN1_MODULE_NAMES = {"qkv_proj": "c_attn", "o_proj": "c_proj", "gate_proj": "w2", "up_proj": "w1",
                      "down_proj": "c_proj"}
"""The module names Qwen (1.0)'s remote code gives the linears (``ModelSpec.fused_qkv``), the names a PEFT target
matches there: ``QWenAttention.c_attn`` (q, k and v in one biased linear) and ``.c_proj``; ``QWenMLP.w1`` and ``.w2``
(``a1 * F.silu(a2)``: w2 is the gated branch) and ``.c_proj``, so ``c_proj`` names both the attention output and the
MLP's down projection (modeling_qwen.py shipped with the checkpoints, read in a copy of the Qwen-72B repository:
mapengAdam/qianwen-72B modeling_qwen.py @3334bfe3d6d9d445cbe54185cd6aaef7e1e3c068 ``QWenAttention.__init__``,
``QWenMLP``). Qwen's own finetune.py targets ``["c_attn", "c_proj", "w1", "w2"]`` (QwenLM/Qwen finetune.py
@00dceebbaaec2bf642ad327f7022ac9b6f8da187 ``LoraArguments.lora_target_modules``); ``q_proj`` / ``k_proj`` /
``v_proj`` match no module of it and are refused, as PEFT refuses them."""


def _qwen1_layout(spec: ModelSpec) -> bool:
    return spec.fused_qkv and not spec.fused_projections


def _target_names(spec: ModelSpec, g: LinearGroup) -> tuple[str, ...]:
    """Target names that make PEFT wrap group ``g``: the fused experts answer to their v4 names (the
    fused ``gate_up_proj`` to ``gate_proj``+``up_proj``, Mixtral's to ``w1``+``w3``), a converting family's
    same-named dense MLP to none, Qwen (1.0)'s linears to their own names (``QWEN1_MODULE_NAMES``)."""
    short = _short(g.name)
    if _qwen1_layout(spec) and short in QWEN1_MODULE_NAMES:
        return (QWEN1_MODULE_NAMES[short],)
    if g.is_fused_experts:
        pair, down = _v4_names(spec)
        return pair if short == "gate_up_proj" else ((down,) if short == "down_proj" else (short,))
    if spec.family in _PEFT_CONVERTS and short in _CONVERTED_NAMES:
        return ()
    return (short,)


_CONVERTED_NAMES = frozenset({"gate_proj", "up_proj", "down_proj"})


def linear_names(spec: ModelSpec) -> list[str]:
    """The module names a LoRA target can match in this model (PEFT matches the last name component)."""
    names: list[str] = []
    for g in _wrappable_groups(spec) + _router_group(spec):
        for n in _target_names(spec, g):
            if n not in names:
                names.append(n)
    return names


@lru_cache(maxsize=4096)
def targeted_groups(spec: ModelSpec, lora: LoraSpec) -> list[LinearGroup]:
    """Linear groups the adapter wraps. ``all-linear`` excludes the output head, as PEFT
    does; on Qwen3-MoE and DeepSeek-V3 PEFT 0.21 also wraps the fused experts and the router weight
    (measured: Qwen3-30B-A3B, 4 layers, r=16 -> 83,042,304). On transformers 4.x (``LoraSpec.transformers_v4``) a
    ``_V4_EXPERT_MODULES`` model's expert and router linears are ordinary modules (``_v4_targeted``). Measured
    against ``get_peft_model`` on meta for every MoE family and target spelling in tests/unit/test_moe_lora_targets.py
    (transformers 5 and 4.57.6).

    Targets that match no module are refused (``CardError``, exit 2), naming the model's linear
    layers: PEFT raises "Target modules ... not found in the base model" for that case, and a
    typo or another family's name (Qwen-1's ``c_attn``) must never plan 0 trainable parameters."""
    if _v4_layout(spec, lora):  # transformers 4.x: the experts and routers as nn.Linear modules
        return _v4_targeted(spec, lora)
    # Llama4TextExperts, GptOssExperts and Qwen2-MoE's experts hold their experts as 3-D Parameters that PEFT
    # 0.21 never wraps (see _PEFT_CONVERTS; measured on meta, 4 layers, r=16, all-linear: Scout 4,981,760 =
    # attention + shared expert + router; Maverick 5,607,424; gpt-oss with its experts named: attention only)
    groups = _wrappable_groups(spec)
    if ALL_LINEAR in lora.targets:
        return _all_linear(spec, groups)
    wanted = set(lora.targets)
    pair, _ = _v4_names(spec)
    if spec.family in _PEFT_CONVERTS and len(wanted & set(pair)) == 1:
        raise CardError(f"lora.targets: on {spec.name} PEFT fuses {pair[0]} and {pair[1]} into the experts'"
                        " gate_up_proj and refuses one without the other; name both")
    router = _UNWRAPPABLE_ROUTER.get(spec.family) if spec.moe is not None else None
    if router in wanted:
        raise CardError(f"lora.targets: '{router}' is {spec.name}'s router, a module PEFT cannot wrap (not an"
                        f" nn.Linear); its linear layers: {', '.join(linear_names(spec))} (or all-linear)")
    out = []
    for g in groups + _router_group(spec):
        names = _target_names(spec, g)
        if g.is_fused_experts and _short(g.name) == "gate_up_proj":
            hit = set(names) <= wanted
        else:
            hit = bool(wanted.intersection(names))
        if hit:
            out.append(g)
    if not out:
        raise CardError(f"lora.targets: {', '.join(lora.targets)} match no linear layer of {spec.name}; its linear"
                        f" layers: {', '.join(linear_names(spec))} (or all-linear)")
    return out


def _all_linear(spec: ModelSpec, groups: list[LinearGroup]) -> list[LinearGroup]:
    """What PEFT 0.21's ``all-linear`` wraps: every ``nn.Linear`` but the head; on the converting MoE families
    (``_PEFT_CONVERTS``) it is first resolved to leaf names plus the v4 expert and router names
    (``_resolve_string_target_modules`` l.355-399) and converted as a list, so the dense and shared MLPs whose
    gate/up/down projections share the experts' names are not wrapped. Measured on meta models (4 layers,
    r=16): gpt-oss its attention projections only (1,327,104; 3-D experts, router no nn.Linear); DeepSeek-V3
    the fused experts and the router but not the dense or shared MLPs (136,503,296 on 3 dense + 1 MoE layer)."""
    return [g for g in groups if _target_names(spec, g)] + _router_group(spec)


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


def fp32_adapter_recompute_extra_bytes(*, tokens: int, hidden_size: int, compute_dtype_bytes: int,
                                       last_layer: bool) -> int:
    """Bytes by which a checkpointed decoder layer's recompute moment under PEFT LoRA with fp32 adapters on a 16-bit
    base exceeds its backward's MLP moment (``plan.terms._layer_backward_transient``), with gate_proj, up_proj and
    down_proj adapted (the attention projections may or may not be: they are not live at this moment).

    The recompute re-runs the layer's forward inside its backward. At ``up_proj`` (huggingface/transformers
    src/transformers/models/qwen3/modeling_qwen3.py l.82 @v5.24.0: ``down_proj(act_fn(gate_proj(x)) * up_proj(x))``,
    gate first) PEFT's ``Linear.forward`` (huggingface/peft src/peft/tuners/lora/layer.py l.1100-1113 @v0.21.2:
    ``x`` cast to ``lora_A.weight.dtype``, ``result = result + lora_B(lora_A(dropout(x))) * scaling``, then
    ``result.to(torch_result_dtype)``) holds ``lora_B``'s fp32 output and its scaled copy (then the fp32 sum), 8 B per
    intermediate channel, beside the bf16 base output; ``up_proj``'s bf16 output and ``down_proj``'s fp32 input cast
    (saved later) do not exist yet. In the backward's MLP moment ``down_proj``'s fp32 input gradient through
    ``lora_A`` (4 B per intermediate channel) is live beside the saved set: the intermediate-wide terms cancel
    (8I + aI - aI - 4I = 4I). What the recompute holds beyond that is the decoder layer's own locals, saved by
    nothing (a frozen base linear saves no input and PEFT's fp32 adapters save their casts): the post-attention
    norm's output and the attention residual (modeling_qwen3.py l.313-316 @v5.24.0), a·h each. On the last layer
    the final norm's fp32 input gradient (Qwen3RMSNorm upcasts, l.61) is still held while its recompute runs (freed
    at that layer's first backward op): fp32 bytes x h more.

    Traced (Qwen3-0.6B, 28 layers, SDPA, bf16, one sequence, all-linear r 16, ``benchmarks/trace_prime_rl_rl_step.py``):
    each layer's backward peaks in its recompute at ``up_proj``'s fp32 adapter output, 8,064 B per token above the
    backward's own moment on layer 27 (2·2·1024 + 4·1024 = 8,192, less two rank-16 fp32 ``lora_A`` outputs)."""
    locals_bytes = 2 * compute_dtype_bytes * hidden_size
    norm_grad = int(BYTES_PER_DTYPE["fp32"]) * hidden_size if last_layer else 0
    return tokens * (locals_bytes + norm_grad)
