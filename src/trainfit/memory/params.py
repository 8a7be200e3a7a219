"""Exact parameter counts, in closed form, for the architectures transformers builds.

Every count here equals ``sum(p.numel() for p in model.parameters())`` of
``AutoModelForCausalLM.from_config`` on the meta device (tests/unit/test_param_counts.py).
"""

from __future__ import annotations

from functools import lru_cache

from dataclasses import dataclass

from trainfit.spec.enums import LayerKind
from trainfit.spec.model import ModelSpec


@dataclass(frozen=True, slots=True)
class LinearGroup:
    """Identical linear maps across the model, as PEFT sees them.

    ``count`` is the number of modules (decoder layers that have it). For fused MoE
    experts (a 3-D ``nn.Parameter``), ``experts`` > 1 and PEFT puts one LoRA pair per
    expert, with ``lora_rank_multiplier`` 2 on the fused gate_up projection.
    """

    name: str
    in_features: int
    out_features: int
    count: int
    bias: bool = False
    experts: int = 1
    lora_rank_multiplier: int = 1
    routed: bool = False
    """A routed-expert projection (``_moe_linears``), also when a shard holds one expert (``experts`` 1: an
    expert-parallel rank with ``E / ep == 1``): its GEMM sees the routed rows, not every token."""

    @property
    def weight_params(self) -> int:
        return self.count * self.experts * self.in_features * self.out_features

    @property
    def bias_params(self) -> int:
        return self.count * self.experts * self.out_features if self.bias else 0

    @property
    def is_fused_experts(self) -> bool:
        return self.experts > 1


@dataclass(frozen=True, slots=True)
class ParamBreakdown:
    """Parameters by component (counts, not bytes)."""

    embedding: int
    lm_head: int
    """0 when tied to the embedding."""
    linear_weights: int
    """Decoder linear weights (attention, MLP, experts, linear-attention projections)."""
    other: int
    """Norms, biases, router weights, convolutions, DeltaNet scalars."""
    largest_layer: int
    """Parameters of the largest decoder layer (the FSDP/ZeRO-3 gather unit)."""
    per_layer: tuple[int, ...]
    positions: int = 0
    """Learned absolute position embedding (OPT): a lookup like the token embedding."""

    @property
    def total(self) -> int:
        return self.embedding + self.lm_head + self.linear_weights + self.other + self.positions

    @property
    def without_embeddings(self) -> int:
        """Total minus the input embedding and the output head: the 'non-embedding' count
        model cards quote (Qwen3-8B: 6.95B of 8.19B)."""
        return self.total - self.embedding - self.lm_head - self.positions


def _attention_linears(spec: ModelSpec, count: int) -> list[LinearGroup]:
    if spec.mla is not None:
        return _mla_linears(spec, count)
    h, q, kv = spec.hidden_size, spec.q_dim, spec.kv_dim
    q_out = 2 * q if spec.attn_output_gate else q
    if spec.fused_projections or spec.fused_qkv:
        # Phi-3: one qkv_proj (no bias), then o_proj; Qwen (1.0): one biased c_attn, then c_proj
        # (``ModelSpec.fused_qkv``; its MLP stays three linears, ``_dense_mlp``)
        return [LinearGroup("qkv_proj", h, q_out + 2 * kv, count, spec.attention_bias),
                LinearGroup("o_proj", q, h, count, spec.o_proj_bias)]
    return [
        LinearGroup("q_proj", h, q_out, count, spec.attention_bias),
        LinearGroup("k_proj", h, kv, count, spec.attention_bias),
        LinearGroup("v_proj", h, kv, count, spec.attention_bias),
        LinearGroup("out_proj" if spec.family == "opt" else "o_proj", q, h, count, spec.o_proj_bias),
    ]


def _mla_linears(spec: ModelSpec, count: int) -> list[LinearGroup]:
    """DeepSeek-V3 multi-head latent attention (transformers ``DeepseekV3Attention``): q_a/kv_a and o_proj
    carry ``attention_bias``; q_b and kv_b never do."""
    ml = spec.mla
    assert ml is not None
    h, H, bias = spec.hidden_size, spec.num_attention_heads, spec.attention_bias
    groups = ([LinearGroup("q_a_proj", h, ml.q_lora_rank, count, bias),
               LinearGroup("q_b_proj", ml.q_lora_rank, H * ml.qk_head_dim, count)] if ml.q_lora_rank
              else [LinearGroup("q_proj", h, H * ml.qk_head_dim, count)])
    return groups + [
        LinearGroup("kv_a_proj_with_mqa", h, ml.latent_dim, count, bias),
        LinearGroup("kv_b_proj", ml.kv_lora_rank, H * (ml.qk_nope_head_dim + ml.v_head_dim), count),
        LinearGroup("o_proj", H * ml.v_head_dim, h, count, bias),
    ]


def _mla_layer_params(spec: ModelSpec) -> tuple[int, int]:
    """(linear weights, other) of one MLA block: the projections, the q_a / kv_a RMSNorms and biases."""
    weights = other = 0
    for g in _mla_linears(spec, 1):
        weights += g.weight_params
        other += g.bias_params
    ml = spec.mla
    assert ml is not None
    other += ml.q_lora_rank + ml.kv_lora_rank  # q_a_layernorm (when q is compressed), kv_a_layernorm
    return weights, other


def _linear_attention_linears(spec: ModelSpec, count: int) -> list[LinearGroup]:
    la = spec.linear_attention
    assert la is not None
    h = spec.hidden_size
    return [
        LinearGroup("in_proj_qkv", h, la.conv_dim, count),
        LinearGroup("in_proj_z", h, la.value_dim, count),
        LinearGroup("in_proj_b", h, la.num_value_heads, count),
        LinearGroup("in_proj_a", h, la.num_value_heads, count),
        LinearGroup("out_proj", la.value_dim, h, count),
    ]


def _dense_mlp(spec: ModelSpec, width: int, count: int, prefix: str = "") -> list[LinearGroup]:
    h = spec.hidden_size
    if not spec.mlp_gated:  # OPT: fc1 -> ReLU -> fc2
        return [
            LinearGroup(prefix + "fc1", h, width, count, spec.mlp_bias),
            LinearGroup(prefix + "fc2", width, h, count, spec.mlp_bias),
        ]
    if spec.fused_mlp and not prefix:  # Phi-3, GLM-4: one gate_up_proj (gate, then up), then down_proj
        return [LinearGroup("gate_up_proj", h, 2 * width, count, spec.mlp_bias),
                LinearGroup("down_proj", width, h, count, spec.mlp_bias)]
    return [
        LinearGroup(prefix + "gate_proj", h, width, count, spec.mlp_bias),
        LinearGroup(prefix + "up_proj", h, width, count, spec.mlp_bias),
        LinearGroup(prefix + "down_proj", width, h, count, spec.mlp_bias),
    ]


def _moe_linears(spec: ModelSpec, count: int) -> list[LinearGroup]:
    moe = spec.moe
    assert moe is not None
    h, w, e = spec.hidden_size, moe.expert_intermediate_size, moe.num_experts
    groups = [
        LinearGroup("gate_up_proj", h, 2 * w, count, moe.expert_bias, experts=e, lora_rank_multiplier=2,
                    routed=True),
        LinearGroup("down_proj", w, h, count, moe.expert_bias, experts=e, routed=True),
    ]
    if moe.shared_expert_intermediate_size:
        prefix = "shared_expert." if moe.shared_expert_gate else "shared_experts."
        groups += _dense_mlp(spec, moe.shared_expert_intermediate_size, count, prefix=prefix)
        if moe.shared_expert_gate:
            groups.append(LinearGroup("shared_expert_gate", h, 1, count))
    return groups


@lru_cache(maxsize=4096)
def linear_groups(spec: ModelSpec) -> list[LinearGroup]:
    """All decoder linear maps, grouped by identical shape (lm_head excluded). Enabled MTP modules add one
    attention block, one MoE (or dense) MLP and their eh_proj each."""
    mtp = spec.mtp_layers
    full = spec.num_full_attention_layers + mtp
    linear = spec.num_linear_attention_layers
    groups = _attention_linears(spec, full) if full else []
    if linear:
        groups += _linear_attention_linears(spec, linear)
    if spec.moe is None:
        groups += _dense_mlp(spec, spec.intermediate_size, spec.num_layers + mtp)
    else:
        n_moe = spec.num_moe_layers
        dense = spec.num_layers - n_moe
        if n_moe:
            n_moe += mtp
        else:
            dense += mtp
        if n_moe:
            groups += _moe_linears(spec, n_moe)
        if dense:
            groups += _dense_mlp(spec, spec.intermediate_size, dense)
    if mtp:
        groups.append(LinearGroup("eh_proj", 2 * spec.hidden_size, spec.hidden_size, mtp))
    if spec.embed_proj_dim is not None:  # OPT-350m: project_in (embed -> hidden), project_out (hidden -> embed)
        groups += [LinearGroup("project_in", spec.embed_proj_dim, spec.hidden_size, 1),
                   LinearGroup("project_out", spec.hidden_size, spec.embed_proj_dim, 1)]
    return [g for g in groups if g.count]


def _layer_params(spec: ModelSpec, layer_idx: int) -> tuple[int, int]:
    """(linear weight params, other params) of one decoder layer."""
    h = spec.hidden_size
    weights = 0
    other = spec.norms_per_layer * h * (2 if spec.norm_bias else 1)
    kind = spec.layer_kind(layer_idx)
    if kind is LayerKind.FULL_ATTENTION and spec.mla is not None:
        w, o = _mla_layer_params(spec)
        weights += w
        other += o
    elif kind is LayerKind.FULL_ATTENTION:
        q_out = 2 * spec.q_dim if spec.attn_output_gate else spec.q_dim
        weights += h * q_out + 2 * h * spec.kv_dim + spec.q_dim * h
        if spec.attention_bias:
            other += q_out + 2 * spec.kv_dim
        if spec.o_proj_bias:
            other += h
        if spec.qk_norm:  # per head: head_dim each; OLMo 2's full-width norms: q_dim and kv_dim
            other += spec.q_dim + spec.kv_dim if spec.qk_norm_full_width else 2 * spec.head_dim
        if spec.attention_sinks:
            other += spec.num_attention_heads
    else:
        la = spec.linear_attention
        assert la is not None
        weights += h * (la.conv_dim + la.value_dim + 2 * la.num_value_heads) + la.value_dim * h
        # depthwise conv1d (no bias), dt_bias, A_log, gated RMSNorm over value_head_dim
        other += la.conv_dim * la.conv_kernel_dim + 2 * la.num_value_heads + la.value_head_dim
    if spec.moe is not None and spec.moe.is_moe_layer(layer_idx):
        moe = spec.moe
        w, e = moe.expert_intermediate_size, moe.num_experts
        weights += e * 3 * h * w
        other += e * h  # router weight (a Parameter, not an nn.Linear)
        if moe.router_bias:
            other += e
        if moe.expert_bias:
            other += e * (2 * w + h)
        if moe.shared_expert_intermediate_size:
            weights += 3 * h * moe.shared_expert_intermediate_size + (h if moe.shared_expert_gate else 0)
    else:
        mats = 3 if spec.mlp_gated else 2
        weights += mats * h * spec.intermediate_size
        if spec.mlp_bias:
            other += (mats - 1) * spec.intermediate_size + h
    return weights, other


def _mtp_module_params(spec: ModelSpec) -> tuple[int, int]:
    """(linear weights, other) of one DeepSeek-V3 multi-token-prediction module: enorm and hnorm, eh_proj
    (2h -> h, no bias), one decoder layer (an MoE layer when the model has experts) and the shared head's
    RMSNorm; the embedding and the output head are the main model's."""
    h = spec.hidden_size
    moe_idx = next((i for i in range(spec.num_layers) if spec.moe is not None and spec.moe.is_moe_layer(i)),
                   spec.num_layers - 1)
    w, o = _layer_params(spec, moe_idx)
    return w + 2 * h * h, o + 3 * h


@lru_cache(maxsize=4096)
def param_breakdown(spec: ModelSpec) -> ParamBreakdown:
    """Exact parameter counts by component. MTP modules (``spec.mtp_layers``) count as extra layers."""
    per_layer = [_layer_params(spec, i) for i in range(spec.num_layers)]
    per_layer += [_mtp_module_params(spec) for _ in range(spec.mtp_layers)]
    embedding = spec.vocab_size * spec.embed_dim
    if spec.head_outputs is not None:
        lm_head = spec.head_outputs * spec.hidden_size  # score / value head (no bias)
    else:
        lm_head = 0 if spec.tie_word_embeddings else embedding
    linear_weights = sum(w for w, _ in per_layer)
    other = sum(o for _, o in per_layer)
    if spec.final_norm:
        other += spec.hidden_size * (2 if spec.norm_bias else 1)
    if spec.embed_proj_dim is not None:
        linear_weights += 2 * spec.embed_proj_dim * spec.hidden_size  # project_in, project_out
    layer_totals = tuple(w + o for w, o in per_layer)
    return ParamBreakdown(
        embedding=embedding,
        lm_head=lm_head,
        linear_weights=linear_weights,
        other=other,
        largest_layer=max(layer_totals) if layer_totals else 0,
        per_layer=layer_totals,
        positions=spec.learned_positions * spec.hidden_size,
    )


def routed_expert_layer_params(spec: ModelSpec, layer: int) -> int:
    """Weights of the routed experts of decoder layer ``layer`` (three ``hidden x expert_intermediate``
    projections each; 0 for a dense layer). On a shard spec: that rank's local experts."""
    moe = spec.moe
    if moe is None or not moe.is_moe_layer(layer):
        return 0
    return moe.num_experts * 3 * spec.hidden_size * moe.expert_intermediate_size


def routed_expert_params(spec: ModelSpec) -> int:
    """Weights of the routed experts of every decoder layer (``routed_expert_layer_params`` summed)."""
    return sum(routed_expert_layer_params(spec, i) for i in range(spec.num_layers)) if spec.moe is not None else 0


@lru_cache(maxsize=4096)
def active_params(spec: ModelSpec) -> int:
    """Parameters touched per token: routed experts count top-k of num_experts."""
    total = param_breakdown(spec).total
    if spec.moe is None:
        return total
    moe = spec.moe
    n_moe = sum(1 for i in range(spec.num_layers) if moe.is_moe_layer(i)) + spec.mtp_layers
    per_expert = 3 * spec.hidden_size * moe.expert_intermediate_size
    if moe.expert_bias:
        per_expert += 2 * moe.expert_intermediate_size + spec.hidden_size
    inactive = n_moe * (moe.num_experts - moe.experts_per_token) * per_expert
    return total - inactive


@dataclass(frozen=True, slots=True)
class TensorGroup:
    """``count`` parameter tensors of one shape (what optimizers see, tensor by tensor)."""

    shape: tuple[int, ...]
    count: int

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@lru_cache(maxsize=4096)
def param_tensors(spec: ModelSpec) -> list[TensorGroup]:
    """Every parameter tensor of the full model, grouped by shape.

    Sums to ``param_breakdown(spec).total`` (tests check it).
    """
    h, L, mtp = spec.hidden_size, spec.num_layers, spec.mtp_layers
    norms = (1 if spec.final_norm else 0) + spec.norms_per_layer * (L + mtp) + 3 * mtp
    out = [TensorGroup((spec.vocab_size, spec.embed_dim), 1 if spec.tie_word_embeddings or spec.head_outputs else 2),
           TensorGroup((h,), norms * (2 if spec.norm_bias else 1))]
    if spec.learned_positions:
        out.append(TensorGroup((spec.learned_positions, h), 1))
    if spec.head_outputs is not None:
        out.append(TensorGroup((spec.head_outputs, h), 1))
    for g in linear_groups(spec):
        if g.is_fused_experts:
            out.append(TensorGroup((g.experts, g.out_features, g.in_features), g.count))
            if g.bias:
                out.append(TensorGroup((g.experts, g.out_features), g.count))
        else:
            out.append(TensorGroup((g.out_features, g.in_features), g.count))
            if g.bias:
                out.append(TensorGroup((g.out_features,), g.count))
    full = spec.num_full_attention_layers + mtp
    if spec.qk_norm and full and spec.qk_norm_full_width:
        out += [TensorGroup((spec.q_dim,), full), TensorGroup((spec.kv_dim,), full)]
    elif spec.qk_norm and full:
        out.append(TensorGroup((spec.head_dim,), 2 * full))
    if spec.attention_sinks and full:
        out.append(TensorGroup((spec.num_attention_heads,), full))
    if spec.mla is not None and full:
        if spec.mla.q_lora_rank:
            out.append(TensorGroup((spec.mla.q_lora_rank,), full))
        out.append(TensorGroup((spec.mla.kv_lora_rank,), full))
    if spec.linear_attention is not None and spec.num_linear_attention_layers:
        la, n = spec.linear_attention, spec.num_linear_attention_layers
        out += [
            TensorGroup((la.conv_dim, 1, la.conv_kernel_dim), n),
            TensorGroup((la.num_value_heads,), 2 * n),
            TensorGroup((la.value_head_dim,), n),
        ]
    if spec.moe is not None:
        n_moe = spec.num_moe_layers
        n_moe += mtp if n_moe else 0
        if n_moe:
            out.append(TensorGroup((spec.moe.num_experts, h), n_moe))
            if spec.moe.router_bias:
                out.append(TensorGroup((spec.moe.num_experts,), n_moe))
    return [t for t in out if t.count]
