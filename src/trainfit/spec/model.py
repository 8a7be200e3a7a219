"""ModelSpec: the architecture facts every memory term needs, and nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from trainfit.errors import ConfigError
from trainfit.spec.enums import LayerKind


@dataclass(frozen=True, kw_only=True, slots=True)
class MoeSpec:
    """Mixture-of-experts MLP (Qwen3-MoE / Qwen2-MoE layout, fused experts in transformers v5)."""

    num_experts: int
    """Routed experts per MoE layer."""
    experts_per_token: int
    """top-k routing."""
    expert_intermediate_size: int
    """Width of one expert's SwiGLU (moe_intermediate_size)."""
    shared_expert_intermediate_size: int = 0
    """Width of the always-on shared expert; 0 when there is none (Qwen3-MoE)."""
    sparse_step: int = 1
    """Every ``sparse_step``-th layer is MoE (decoder_sparse_step)."""
    mlp_only_layers: tuple[int, ...] = ()
    """Layers that keep a dense MLP of ``intermediate_size``."""

    def is_moe_layer(self, layer_idx: int) -> bool:
        return layer_idx not in self.mlp_only_layers and (layer_idx + 1) % self.sparse_step == 0


@dataclass(frozen=True, kw_only=True, slots=True)
class LinearAttentionSpec:
    """Gated DeltaNet (Qwen3-Next / Qwen3.5 linear-attention layers)."""

    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel_dim: int
    state_dtype_bytes: int = 4
    """Recurrent state dtype (mamba_ssm_dtype float32)."""

    @property
    def key_dim(self) -> int:
        return self.num_key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.num_value_heads * self.value_head_dim

    @property
    def conv_dim(self) -> int:
        return 2 * self.key_dim + self.value_dim


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSpec:
    """A decoder-only transformer, as transformers builds it.

    Field names follow Hugging Face ``config.json``. ``family`` is the
    ``model_type`` that transformers dispatches on.
    """

    name: str
    """Catalog id, path or a label for a bare count."""
    source: str
    """Where the numbers come from (URL, file, or 'assumed')."""
    family: str
    """transformers model_type of the decoder: llama, mistral, qwen2, qwen3, qwen3_moe, gemma2, qwen3_5_text."""
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    attention_bias: bool = False
    """Bias on q, k and v (Qwen2/2.5)."""
    o_proj_bias: bool = False
    """Bias on the attention output projection (Llama's attention_bias covers o_proj too)."""
    mlp_bias: bool = False
    qk_norm: bool = False
    """RMSNorm over head_dim on q and k (Qwen3)."""
    attn_output_gate: bool = False
    """Full-attention q_proj also emits a sigmoid gate (Qwen3.5): q_proj is 2x wide."""
    norms_per_layer: int = 2
    """RMSNorms of width hidden per layer: 2 (pre-norm) or 4 (Gemma-2 sandwich norms)."""
    hidden_act: str = "silu"
    layer_types: tuple[LayerKind, ...] = ()
    """Per-layer attention kind; empty means all full attention."""
    sliding_window: int | None = None
    linear_attention: LinearAttentionSpec | None = None
    moe: MoeSpec | None = None
    verified: bool = True
    """False for configs that could not be confirmed from a primary source."""
    note: str = ""
    assumed_shape: bool = False
    """True when the architecture is a named reference shape standing in for a bare count."""
    params_override: int | None = None
    """Bare parameter count given by the user; overrides the closed-form total."""
    aliases: tuple[str, ...] = field(default=())
    max_position_embeddings: int | None = None
    """Context length the config declares (None when absent)."""
    head_outputs: int | None = None
    """None: a vocabulary LM head. N: a scalar/value head of N outputs (reward model, critic):
    ``score``/``value_head`` of hidden x N instead of the lm_head, never tied."""

    def __post_init__(self) -> None:
        if self.layer_types and len(self.layer_types) != self.num_layers:
            raise ValueError(
                f"layer_types has {len(self.layer_types)} entries, num_hidden_layers is {self.num_layers}"
            )
        _check_sizes(self)

    def layer_kind(self, layer_idx: int) -> LayerKind:
        return self.layer_types[layer_idx] if self.layer_types else LayerKind.FULL_ATTENTION

    @property
    def num_full_attention_layers(self) -> int:
        return _count_full(self.layer_types, self.num_layers)

    @property
    def num_linear_attention_layers(self) -> int:
        return self.num_layers - self.num_full_attention_layers

    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim


def _at_least(where: str, least: int, **sizes: object) -> None:
    for key, v in sizes.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < least:
            raise ConfigError(f"{where}: {key} must be a whole number of at least {least}, got {v!r}")


def _check_sizes(spec: ModelSpec) -> None:
    """No plan starts from a negative or zero size, whatever built the spec (ConfigError).

    Derived specs (a tensor-parallel shard, a pipeline stage) may have zero layers or zero heads of a
    kind on a rank, so only the sizes that stay whole are required to be at least 1; the consistency of a
    config (kv heads dividing heads, top-k within the experts) is checked where it is parsed (hf_config)."""
    where = spec.name
    _at_least(where, 1, hidden_size=spec.hidden_size, num_attention_heads=spec.num_attention_heads,
              num_kv_heads=spec.num_kv_heads, head_dim=spec.head_dim, vocab_size=spec.vocab_size)
    _at_least(where, 0, intermediate_size=spec.intermediate_size, num_layers=spec.num_layers,
              norms_per_layer=spec.norms_per_layer)
    if spec.params_override is not None:
        _at_least(where, 1, params=spec.params_override)
    if spec.head_outputs is not None:
        _at_least(where, 1, head_outputs=spec.head_outputs)
    if spec.sliding_window is not None:
        _at_least(where, 1, sliding_window=spec.sliding_window)
    m = spec.moe
    if m is not None:
        _at_least(where, 1, num_experts=m.num_experts, num_experts_per_tok=m.experts_per_token,
                  decoder_sparse_step=m.sparse_step)
        _at_least(where, 0, moe_intermediate_size=m.expert_intermediate_size,
                  shared_expert_intermediate_size=m.shared_expert_intermediate_size)
    la = spec.linear_attention
    if la is not None:
        _at_least(where, 0, linear_num_key_heads=la.num_key_heads, linear_num_value_heads=la.num_value_heads)
        _at_least(where, 1, linear_key_head_dim=la.key_head_dim, linear_value_head_dim=la.value_head_dim,
                  linear_conv_kernel_dim=la.conv_kernel_dim, state_dtype_bytes=la.state_dtype_bytes)


@lru_cache(maxsize=1024)
def _count_full(layer_types: tuple[LayerKind, ...], num_layers: int) -> int:
    if not layer_types:
        return num_layers
    return sum(1 for t in layer_types if t is LayerKind.FULL_ATTENTION)
