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

    @property
    def total(self) -> int:
        return self.embedding + self.lm_head + self.linear_weights + self.other

    @property
    def without_embeddings(self) -> int:
        """Total minus the input embedding and the output head: the 'non-embedding' count
        model cards quote (Qwen3-8B: 6.95B of 8.19B)."""
        return self.total - self.embedding - self.lm_head


def _attention_linears(spec: ModelSpec, count: int) -> list[LinearGroup]:
    h, q, kv = spec.hidden_size, spec.q_dim, spec.kv_dim
    q_out = 2 * q if spec.attn_output_gate else q
    return [
        LinearGroup("q_proj", h, q_out, count, spec.attention_bias),
        LinearGroup("k_proj", h, kv, count, spec.attention_bias),
        LinearGroup("v_proj", h, kv, count, spec.attention_bias),
        LinearGroup("o_proj", q, h, count, spec.o_proj_bias),
    ]


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
        LinearGroup("gate_up_proj", h, 2 * w, count, experts=e, lora_rank_multiplier=2),
        LinearGroup("down_proj", w, h, count, experts=e),
    ]
    if moe.shared_expert_intermediate_size:
        groups += _dense_mlp(spec, moe.shared_expert_intermediate_size, count, prefix="shared_expert.")
        groups.append(LinearGroup("shared_expert_gate", h, 1, count))
    return groups


@lru_cache(maxsize=4096)
def linear_groups(spec: ModelSpec) -> list[LinearGroup]:
    """All decoder linear maps, grouped by identical shape (lm_head excluded)."""
    full = spec.num_full_attention_layers
    linear = spec.num_linear_attention_layers
    groups = _attention_linears(spec, full) if full else []
    if linear:
        groups += _linear_attention_linears(spec, linear)
    if spec.moe is None:
        groups += _dense_mlp(spec, spec.intermediate_size, spec.num_layers)
    else:
        n_moe = sum(1 for i in range(spec.num_layers) if spec.moe.is_moe_layer(i))
        if n_moe:
            groups += _moe_linears(spec, n_moe)
        if spec.num_layers - n_moe:
            groups += _dense_mlp(spec, spec.intermediate_size, spec.num_layers - n_moe)
    return [g for g in groups if g.count]


def _layer_params(spec: ModelSpec, layer_idx: int) -> tuple[int, int]:
    """(linear weight params, other params) of one decoder layer."""
    h = spec.hidden_size
    weights = 0
    other = spec.norms_per_layer * h
    kind = spec.layer_kind(layer_idx)
    if kind is LayerKind.FULL_ATTENTION:
        q_out = 2 * spec.q_dim if spec.attn_output_gate else spec.q_dim
        weights += h * q_out + 2 * h * spec.kv_dim + spec.q_dim * h
        if spec.attention_bias:
            other += q_out + 2 * spec.kv_dim
        if spec.o_proj_bias:
            other += h
        if spec.qk_norm:
            other += 2 * spec.head_dim
    else:
        la = spec.linear_attention
        assert la is not None
        weights += h * (la.conv_dim + la.value_dim + 2 * la.num_value_heads) + la.value_dim * h
        # depthwise conv1d (no bias), dt_bias, A_log, gated RMSNorm over value_head_dim
        other += la.conv_dim * la.conv_kernel_dim + 2 * la.num_value_heads + la.value_head_dim
    if spec.moe is not None and spec.moe.is_moe_layer(layer_idx):
        moe = spec.moe
        weights += moe.num_experts * 3 * h * moe.expert_intermediate_size
        other += moe.num_experts * h  # router weight (a Parameter, not an nn.Linear)
        if moe.shared_expert_intermediate_size:
            weights += 3 * h * moe.shared_expert_intermediate_size + h
    else:
        weights += 3 * h * spec.intermediate_size
        if spec.mlp_bias:
            other += 2 * spec.intermediate_size + h
    return weights, other


@lru_cache(maxsize=4096)
def param_breakdown(spec: ModelSpec) -> ParamBreakdown:
    """Exact parameter counts by component."""
    per_layer = [_layer_params(spec, i) for i in range(spec.num_layers)]
    embedding = spec.vocab_size * spec.hidden_size
    if spec.head_outputs is not None:
        lm_head = spec.head_outputs * spec.hidden_size  # score / value head (no bias)
    else:
        lm_head = 0 if spec.tie_word_embeddings else embedding
    linear_weights = sum(w for w, _ in per_layer)
    other = sum(o for _, o in per_layer) + spec.hidden_size  # + final norm
    layer_totals = tuple(w + o for w, o in per_layer)
    return ParamBreakdown(
        embedding=embedding,
        lm_head=lm_head,
        linear_weights=linear_weights,
        other=other,
        largest_layer=max(layer_totals) if layer_totals else 0,
        per_layer=layer_totals,
    )


@lru_cache(maxsize=4096)
def active_params(spec: ModelSpec) -> int:
    """Parameters touched per token: routed experts count top-k of num_experts."""
    total = param_breakdown(spec).total
    if spec.moe is None:
        return total
    moe = spec.moe
    n_moe = sum(1 for i in range(spec.num_layers) if moe.is_moe_layer(i))
    inactive = n_moe * (moe.num_experts - moe.experts_per_token) * 3 * spec.hidden_size * moe.expert_intermediate_size
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
    h, L = spec.hidden_size, spec.num_layers
    out = [TensorGroup((spec.vocab_size, h), 1 if spec.tie_word_embeddings or spec.head_outputs else 2),
           TensorGroup((h,), 1 + spec.norms_per_layer * L)]
    if spec.head_outputs is not None:
        out.append(TensorGroup((spec.head_outputs, h), 1))
    for g in linear_groups(spec):
        if g.is_fused_experts:
            out.append(TensorGroup((g.experts, g.out_features, g.in_features), g.count))
        else:
            out.append(TensorGroup((g.out_features, g.in_features), g.count))
        if g.bias:
            out.append(TensorGroup((g.out_features,), g.count * g.experts))
    full = spec.num_full_attention_layers
    if spec.qk_norm and full:
        out.append(TensorGroup((spec.head_dim,), 2 * full))
    if spec.linear_attention is not None and spec.num_linear_attention_layers:
        la, n = spec.linear_attention, spec.num_linear_attention_layers
        out += [
            TensorGroup((la.conv_dim, 1, la.conv_kernel_dim), n),
            TensorGroup((la.num_value_heads,), 2 * n),
            TensorGroup((la.value_head_dim,), n),
        ]
    if spec.moe is not None:
        n_moe = sum(1 for i in range(L) if spec.moe.is_moe_layer(i))
        if n_moe:
            out.append(TensorGroup((spec.moe.num_experts, h), n_moe))
    return [t for t in out if t.count]
