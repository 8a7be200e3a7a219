"""Build a ModelSpec from a Hugging Face ``config.json`` dict (pure; no transformers import).

One parser serves the embedded catalog (whose files embed the HF config) and a user's
local ``config.json``. Configs that nest the decoder under ``text_config`` (Qwen3.5/3.6)
are unwrapped.
"""

from __future__ import annotations

import math
from typing import Any

from trainfit.errors import ConfigError
from trainfit.spec.enums import LayerKind
from trainfit.spec.model import LinearAttentionSpec, MlaSpec, ModelSpec, MoeSpec

SUPPORTED_FAMILIES = (
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "qwen2_moe",
    "qwen3_moe",
    "gemma2",
    "qwen3_5_text",
    "deepseek_v3",
    "gpt_oss",
    "opt",
    "llama4_text",
)
"""Decoder model_types whose parameter layout and activations trainfit models exactly."""

_TOP_LEVEL_WRAPPERS = {"qwen3_5": "qwen3_5_text", "qwen3_6": "qwen3_5_text", "llama4": "llama4_text"}

# Families whose q/k/v carry a bias regardless of config.json (Qwen2 hard-codes bias=True).
_QKV_BIAS_ALWAYS = {"qwen2", "qwen2_moe"}
_QK_NORM_ALWAYS = {"qwen3", "qwen3_moe", "qwen3_5_text"}


def _require(cfg: dict[str, Any], key: str, where: str) -> Any:
    if key not in cfg or cfg[key] is None:
        raise ConfigError(f"{where}: config.json is missing required field '{key}'")
    return cfg[key]


def _as_int(value: Any, key: str, where: str, *, least: int = 1, most: int) -> int:
    """An integer config value in ``least..most``: refuses text, booleans, fractions, NaN and infinities."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: config.json field '{key}' must be an integer, got {str(value)[:40]!r}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ConfigError(f"{where}: config.json field '{key}' must be an integer, got {value!r}")
    v = int(value)
    if not least <= v <= most:
        shown = f"{v}" if abs(v) < 10**15 else f"{float(v):.3g}"
        raise ConfigError(f"{where}: config.json field '{key}' = {shown} is outside {least:,}..{most:,}")
    return v


_MISSING = object()


def _int(cfg: dict[str, Any], key: str, where: str, *, least: int = 1, most: int, default: Any = _MISSING,
         zero_is_none: bool = False) -> Any:
    """``cfg[key]`` checked by ``_as_int``; ``default`` when absent or null (required when no default)."""
    value = cfg.get(key)
    if value is None or (zero_is_none and value == 0 and not isinstance(value, bool)):
        if default is _MISSING:
            raise ConfigError(f"{where}: config.json is missing required field '{key}'")
        return default
    return _as_int(value, key, where, least=least, most=most)


def decoder_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """Return the decoder part of a config: ``text_config`` when the model nests it."""
    text = cfg.get("text_config")
    if isinstance(text, dict) and "hidden_size" in text:
        merged = dict(text)
        top = cfg.get("model_type")
        merged.setdefault("model_type", _TOP_LEVEL_WRAPPERS.get(top, text.get("model_type")) if isinstance(top, str)
                          else text.get("model_type"))
        if "tie_word_embeddings" not in merged and "tie_word_embeddings" in cfg:
            merged["tie_word_embeddings"] = cfg["tie_word_embeddings"]
        return merged
    return cfg


def spec_from_hf_config(
    cfg: dict[str, Any],
    *,
    name: str,
    source: str,
    verified: bool = True,
    note: str = "",
    aliases: tuple[str, ...] = (),
) -> ModelSpec:
    """Parse an HF config dict into a ModelSpec.

    Raises:
        ConfigError: naming the missing field or the unsupported model_type.
    """
    if not isinstance(cfg, dict):
        raise ConfigError(f"{name}: config.json must hold a mapping of fields, got {type(cfg).__name__}")
    dec = decoder_config(cfg)
    family = dec.get("model_type")
    if family is None:
        raise ConfigError(f"{name}: config.json is missing required field 'model_type'")
    if not isinstance(family, str):
        raise ConfigError(f"{name}: config.json field 'model_type' must be text; supported: {', '.join(SUPPORTED_FAMILIES)}")
    family = _TOP_LEVEL_WRAPPERS.get(family, family)
    if family not in SUPPORTED_FAMILIES:
        raise ConfigError(
            f"{name}: model_type '{family}' is not supported; supported: {', '.join(SUPPORTED_FAMILIES)}"
        )
    hidden = _int(dec, "hidden_size", name, most=1_000_000)
    heads = _int(dec, "num_attention_heads", name, most=100_000)
    layers = _int(dec, "num_hidden_layers", name, most=1024)  # the deepest released decoders have ~128
    vocab = _int(dec, "vocab_size", name, most=100_000_000)
    # Llama-4: intermediate_size is the expert (and shared expert) width, intermediate_size_mlp the dense MLP's
    intermediate = _int(dec, {"opt": "ffn_dim", "llama4_text": "intermediate_size_mlp"}.get(family, "intermediate_size"),
                        name, most=10_000_000)
    kv_heads = _int(dec, "num_key_value_heads", name, most=heads, default=heads)
    if heads % kv_heads:
        raise ConfigError(f"{name}: config.json field 'num_key_value_heads' = {kv_heads} does not divide"
                          f" num_attention_heads = {heads}")
    if family == "opt":
        head_dim = hidden // heads
        if head_dim * heads != hidden:
            raise ConfigError(f"{name}: config.json field 'num_attention_heads' = {heads} does not divide"
                              f" hidden_size = {hidden} (OPT)")
    else:
        head_dim = _int(dec, "head_dim", name, most=65_536, default=hidden // heads if hidden >= heads else None)
    mla = _mla(dec, name) if family == "deepseek_v3" else None
    if mla is not None:
        # the expanded keys: every head has its own qk_nope + qk_rope key and a v_head_dim value
        head_dim, kv_heads = mla.qk_head_dim, heads
    tie_default = family in ("gemma2", "opt")
    tie = bool(dec.get("tie_word_embeddings", tie_default))
    sliding = _int(dec, "sliding_window", name, most=1_000_000_000, default=None, zero_is_none=True)
    max_pos = _int(dec, "max_position_embeddings", name, most=1_000_000_000, default=None)

    moe = None
    if family == "deepseek_v3":
        moe = _deepseek_moe(dec, name, layers)
    elif family == "gpt_oss":
        moe = _gpt_oss_moe(dec, name, intermediate)
    elif family == "llama4_text":
        moe = _llama4_moe(dec, name, layers)
    if family in ("qwen3_moe", "qwen2_moe"):
        experts = _int(dec, "num_experts", name, most=100_000)
        sparse_step = _int(dec, "decoder_sparse_step", name, most=layers, default=1, zero_is_none=True) or 1
        only = dec.get("mlp_only_layers") or ()
        if not isinstance(only, (list, tuple)) or len(only) > layers:
            raise ConfigError(f"{name}: config.json field 'mlp_only_layers' must be a list of at most"
                              f" {layers} layer indices")
        mlp_only = tuple(_as_int(v, "mlp_only_layers", name, least=0, most=layers - 1) for v in only)
        moe = MoeSpec(
            num_experts=experts,
            experts_per_token=_int(dec, "num_experts_per_tok", name, most=experts),
            expert_intermediate_size=_int(dec, "moe_intermediate_size", name, most=10_000_000),
            shared_expert_intermediate_size=_int(dec, "shared_expert_intermediate_size", name, least=0,
                                                 most=10_000_000, default=0),
            sparse_step=sparse_step,
            mlp_only_layers=mlp_only,
        )

    linear = None
    layer_types: tuple[LayerKind, ...] = ()
    if family == "qwen3_5_text":
        raw_types = dec.get("layer_types")
        if raw_types is None:
            interval = _int(dec, "full_attention_interval", name, most=layers, default=4)
            raw_types = [
                "linear_attention" if (i + 1) % interval else "full_attention" for i in range(layers)
            ]
        if not isinstance(raw_types, (list, tuple)) or len(raw_types) != layers:
            raise ConfigError(f"{name}: config.json field 'layer_types' must list one kind per layer"
                              f" ({layers} = num_hidden_layers)")
        allowed = ", ".join(k.value for k in LayerKind)
        try:
            layer_types = tuple(LayerKind(t) for t in raw_types)
        except (ValueError, TypeError):
            bad = next(t for t in raw_types if t not in {k.value for k in LayerKind})
            raise ConfigError(f"{name}: config.json field 'layer_types' has {bad!r}; allowed: {allowed}") from None
        linear = LinearAttentionSpec(
            num_key_heads=_int(dec, "linear_num_key_heads", name, most=100_000, default=16),
            num_value_heads=_int(dec, "linear_num_value_heads", name, most=100_000, default=32),
            key_head_dim=_int(dec, "linear_key_head_dim", name, most=65_536, default=128),
            value_head_dim=_int(dec, "linear_value_head_dim", name, most=65_536, default=128),
            conv_kernel_dim=_int(dec, "linear_conv_kernel_dim", name, most=1024, default=4),
        )

    opt = family == "opt"
    extra: dict[str, Any] = {}
    if opt:
        bias = bool(dec.get("enable_bias", True))
        affine = bool(dec.get("layer_norm_elementwise_affine", True))
        pre = bool(dec.get("do_layer_norm_before", True))
        proj = _int(dec, "word_embed_proj_dim", name, most=1_000_000, default=hidden)
        if max_pos is None:
            raise ConfigError(f"{name}: config.json is missing required field 'max_position_embeddings' (OPT learns"
                              " its positions)")
        extra = dict(attention_bias=bias, o_proj_bias=bias, mlp_bias=bias, mlp_gated=False, norm_bias=affine,
                     norms_per_layer=2 if affine else 0, pre_norm=pre,
                     final_norm=affine and pre and not bool(dec.get("_remove_final_layer_norm", False)),
                     learned_positions=max_pos + 2, dropout=_dropout(dec, name), embed_proj_dim=proj if proj != hidden else None,
                     hidden_act=str(dec.get("activation_function") or "relu"))
    elif family == "gpt_oss":
        raw = dec.get("layer_types")
        if raw is None:
            raw = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)]
        if not isinstance(raw, (list, tuple)) or len(raw) != layers or any(
                t not in ("sliding_attention", "full_attention") for t in raw):
            raise ConfigError(f"{name}: config.json field 'layer_types' must list one of sliding_attention,"
                              f" full_attention per layer ({layers} = num_hidden_layers)")
        extra = dict(attention_sinks=True, norms_fp32=True,
                     sliding_layers=tuple(i for i, t in enumerate(raw) if t == "sliding_attention") if sliding else ())
    elif family == "llama4_text":
        assert moe is not None
        extra = {"unplanned": (
            f"transformers' Llama4TextMoe runs every token through all {moe.num_experts} experts (hidden_states"
            f" repeated {moe.num_experts}x, one batched bmm over them), whose activations and FLOPs trainfit does"
            " not model yet (parameter counts are exact)")}
    elif family == "deepseek_v3":
        extra = dict(mla=mla, mtp_layers_declared=_int(dec, "num_nextn_predict_layers", name, least=0, most=16,
                                                       default=0))
    return ModelSpec(
        name=name,
        source=source,
        family=family,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_layers=layers,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        vocab_size=vocab,
        tie_word_embeddings=tie,
        **({} if opt else dict(
            attention_bias=family in _QKV_BIAS_ALWAYS or bool(dec.get("attention_bias", False)),
            o_proj_bias=family not in _QKV_BIAS_ALWAYS and bool(dec.get("attention_bias", False)),
            mlp_bias=bool(dec.get("mlp_bias", False)),
            norms_per_layer=4 if family == "gemma2" else 2,
            hidden_act=str(dec.get("hidden_act") or dec.get("hidden_activation") or "silu"),
        )),
        qk_norm=family in _QK_NORM_ALWAYS,
        attn_output_gate=family == "qwen3_5_text",
        layer_types=layer_types,
        sliding_window=sliding,
        max_position_embeddings=max_pos,
        linear_attention=linear,
        moe=moe,
        verified=verified,
        note=note,
        aliases=aliases,
        **extra,
    )


def _dropout(dec: dict[str, Any], name: str) -> float:
    """OPT's residual dropout (OPTConfig default 0.1), a probability in [0, 1)."""
    p = dec.get("dropout", 0.1)
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p < 1:
        raise ConfigError(f"{name}: config.json field 'dropout' must be a probability in [0, 1), got {p!r}")
    return float(p)


def _mla(dec: dict[str, Any], name: str) -> MlaSpec:
    """DeepSeek-V3's multi-head latent attention sizes (q_lora_rank null: no query compression)."""
    return MlaSpec(
        q_lora_rank=_int(dec, "q_lora_rank", name, least=0, most=1_000_000, default=0),
        kv_lora_rank=_int(dec, "kv_lora_rank", name, most=1_000_000),
        qk_nope_head_dim=_int(dec, "qk_nope_head_dim", name, least=0, most=65_536),
        qk_rope_head_dim=_int(dec, "qk_rope_head_dim", name, most=65_536),
        v_head_dim=_int(dec, "v_head_dim", name, most=65_536),
    )


def _deepseek_moe(dec: dict[str, Any], name: str, layers: int) -> MoeSpec:
    """DeepSeek-V3 MoE: n_routed_experts routed (top-k within topk_group of n_group groups), n_shared_experts
    always-on experts fused into one MLP of moe_intermediate_size x n_shared_experts, dense MLPs in the first
    first_k_dense_replace layers (transformers builds MoE from that index on)."""
    experts = _int(dec, "n_routed_experts", name, most=100_000)
    width = _int(dec, "moe_intermediate_size", name, most=10_000_000)
    first_dense = _int(dec, "first_k_dense_replace", name, least=0, most=layers, default=0)
    n_group = _int(dec, "n_group", name, most=experts, default=1)
    if experts % n_group:
        raise ConfigError(f"{name}: config.json field 'n_group' = {n_group} does not divide n_routed_experts = {experts}")
    return MoeSpec(
        num_experts=experts,
        experts_per_token=_int(dec, "num_experts_per_tok", name, most=experts),
        expert_intermediate_size=width,
        shared_expert_intermediate_size=width * _int(dec, "n_shared_experts", name, least=0, most=1024, default=0),
        mlp_only_layers=tuple(range(first_dense)),
        shared_expert_gate=False,
        router_fp32=True,
        n_group=n_group,
        topk_group=_int(dec, "topk_group", name, most=n_group, default=1),
    )


def _llama4_moe(dec: dict[str, Any], name: str, layers: int) -> MoeSpec:
    """Llama-4 text MoE (transformers Llama4TextMoe): num_local_experts routed experts of intermediate_size
    (top-k, sigmoid router without bias) plus one always-on shared expert of intermediate_size without a gate;
    layers interleave_moe_layer_step-1, 2*step-1, ... are MoE (moe_layers), the others a dense MLP of
    intermediate_size_mlp."""
    experts = _int(dec, "num_local_experts", name, most=100_000)
    width = _int(dec, "intermediate_size", name, most=10_000_000)
    step = _int(dec, "interleave_moe_layer_step", name, most=layers, default=1)
    derived = list(range(step - 1, layers, step))
    given = dec.get("moe_layers")
    if given is not None and (not isinstance(given, (list, tuple)) or list(given) != derived):
        raise ConfigError(f"{name}: config.json field 'moe_layers' must be every interleave_moe_layer_step-th layer"
                          f" ({derived[:4]}...); other layouts are not modelled")
    return MoeSpec(
        num_experts=experts,
        experts_per_token=_int(dec, "num_experts_per_tok", name, most=experts),
        expert_intermediate_size=width,
        shared_expert_intermediate_size=width,
        sparse_step=step,
        shared_expert_gate=False,
    )


def _gpt_oss_moe(dec: dict[str, Any], name: str, width: int) -> MoeSpec:
    """gpt-oss MoE: every layer routes to num_local_experts experts of intermediate_size (biased router and
    experts, clamped GLU); the release stores the experts in MXFP4 (4-bit values, one 8-bit scale per 32)."""
    experts = _int(dec, "num_local_experts", name, most=100_000)
    top_k = dec.get("num_experts_per_tok", dec.get("experts_per_token"))
    quant = dec.get("quantization_config")
    mxfp4 = isinstance(quant, dict) and quant.get("quant_method") == "mxfp4"
    return MoeSpec(
        num_experts=experts,
        experts_per_token=_as_int(top_k, "num_experts_per_tok", name, most=experts) if top_k is not None else
        _int(dec, "num_experts_per_tok", name, most=experts),
        expert_intermediate_size=width,
        router_bias=True,
        expert_bias=True,
        clamped_glu=True,
        inference_expert_bits=4.25 if mxfp4 else None,
    )
