"""Build a ModelSpec from a Hugging Face ``config.json`` dict (pure; no transformers import).

One parser serves the embedded catalog (whose files embed the HF config) and a user's
local ``config.json``. Configs that nest the decoder under ``text_config`` (Qwen3.5/3.6)
are unwrapped.
"""

from __future__ import annotations

from typing import Any

from trainfit.errors import ConfigError
from trainfit.spec.enums import LayerKind
from trainfit.spec.model import LinearAttentionSpec, ModelSpec, MoeSpec

SUPPORTED_FAMILIES = (
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "qwen2_moe",
    "qwen3_moe",
    "gemma2",
    "qwen3_5_text",
)
"""Decoder model_types whose parameter layout and activations trainfit models exactly."""

_TOP_LEVEL_WRAPPERS = {"qwen3_5": "qwen3_5_text", "qwen3_6": "qwen3_5_text"}

# Families whose q/k/v carry a bias regardless of config.json (Qwen2 hard-codes bias=True).
_QKV_BIAS_ALWAYS = {"qwen2", "qwen2_moe"}
_QK_NORM_ALWAYS = {"qwen3", "qwen3_moe", "qwen3_5_text"}


def _require(cfg: dict[str, Any], key: str, where: str) -> Any:
    if key not in cfg or cfg[key] is None:
        raise ConfigError(f"{where}: config.json is missing required field '{key}'")
    return cfg[key]


def decoder_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """Return the decoder part of a config: ``text_config`` when the model nests it."""
    text = cfg.get("text_config")
    if isinstance(text, dict) and "hidden_size" in text:
        merged = dict(text)
        merged.setdefault("model_type", _TOP_LEVEL_WRAPPERS.get(cfg.get("model_type", ""), text.get("model_type")))
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
    dec = decoder_config(cfg)
    family = dec.get("model_type")
    if family is None:
        raise ConfigError(f"{name}: config.json is missing required field 'model_type'")
    family = _TOP_LEVEL_WRAPPERS.get(family, family)
    if family not in SUPPORTED_FAMILIES:
        raise ConfigError(
            f"{name}: model_type '{family}' is not supported; supported: {', '.join(SUPPORTED_FAMILIES)}"
        )
    hidden = int(_require(dec, "hidden_size", name))
    heads = int(_require(dec, "num_attention_heads", name))
    layers = int(_require(dec, "num_hidden_layers", name))
    vocab = int(_require(dec, "vocab_size", name))
    intermediate = int(_require(dec, "intermediate_size", name))
    for key, value, most in (("num_hidden_layers", layers, 10_000), ("hidden_size", hidden, 1_000_000),
                             ("vocab_size", vocab, 100_000_000), ("intermediate_size", intermediate, 10_000_000),
                             ("num_attention_heads", heads, 100_000)):
        if not 1 <= value <= most:
            raise ConfigError(f"{name}: config.json field '{key}' = {value} is outside 1..{most:,}")
    kv_heads = int(dec.get("num_key_value_heads") or heads)
    head_dim = int(dec.get("head_dim") or hidden // heads)
    tie_default = family == "gemma2"
    tie = bool(dec.get("tie_word_embeddings", tie_default))

    moe = None
    if family in ("qwen3_moe", "qwen2_moe"):
        moe = MoeSpec(
            num_experts=int(_require(dec, "num_experts", name)),
            experts_per_token=int(_require(dec, "num_experts_per_tok", name)),
            expert_intermediate_size=int(_require(dec, "moe_intermediate_size", name)),
            shared_expert_intermediate_size=int(dec.get("shared_expert_intermediate_size") or 0),
            sparse_step=int(dec.get("decoder_sparse_step") or 1),
            mlp_only_layers=tuple(int(i) for i in (dec.get("mlp_only_layers") or ())),
        )

    linear = None
    layer_types: tuple[LayerKind, ...] = ()
    if family == "qwen3_5_text":
        raw_types = dec.get("layer_types")
        if raw_types is None:
            interval = int(dec.get("full_attention_interval", 4))
            raw_types = [
                "linear_attention" if (i + 1) % interval else "full_attention" for i in range(layers)
            ]
        layer_types = tuple(LayerKind(t) for t in raw_types)
        linear = LinearAttentionSpec(
            num_key_heads=int(dec.get("linear_num_key_heads", 16)),
            num_value_heads=int(dec.get("linear_num_value_heads", 32)),
            key_head_dim=int(dec.get("linear_key_head_dim", 128)),
            value_head_dim=int(dec.get("linear_value_head_dim", 128)),
            conv_kernel_dim=int(dec.get("linear_conv_kernel_dim", 4)),
        )

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
        attention_bias=family in _QKV_BIAS_ALWAYS or bool(dec.get("attention_bias", False)),
        o_proj_bias=family not in _QKV_BIAS_ALWAYS and bool(dec.get("attention_bias", False)),
        mlp_bias=bool(dec.get("mlp_bias", False)),
        qk_norm=family in _QK_NORM_ALWAYS,
        attn_output_gate=family == "qwen3_5_text",
        norms_per_layer=4 if family == "gemma2" else 2,
        hidden_act=str(dec.get("hidden_act") or dec.get("hidden_activation") or "silu"),
        layer_types=layer_types,
        sliding_window=dec.get("sliding_window"),
        max_position_embeddings=dec.get("max_position_embeddings"),
        linear_attention=linear,
        moe=moe,
        verified=verified,
        note=note,
        aliases=aliases,
    )
