"""Build a ModelSpec from a Hugging Face ``config.json`` dict (pure; no transformers import).

One parser serves the embedded catalog (whose files embed the HF config) and a user's
local ``config.json``. Configs that nest the decoder under ``text_config`` (Qwen3.5/3.6)
are unwrapped.
"""

from __future__ import annotations

import dataclasses
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
    "deepseek_v2",
    "gpt_oss",
    "opt",
    "llama4_text",
    "olmo2",
    "mixtral",
    "phi3",
    "olmoe",
    "gemma3_text",
    "glm4_moe",
    "gemma",
    "granite",
    "smollm3",
    "glm4",
)
"""Decoder model_types whose parameter layout and activations trainfit models exactly."""

COUNTED_FAMILIES = ("mpt", "gpt2", "gpt_bigcode", "gpt_neox", "falcon")
"""Non-gated (GELU fc) decoders with exact parameter layouts. MPT and GPT-NeoX layers have an activation model
(``trainfit.memory.arch_activations``, full training); GPT-2, GPTBigCode and Falcon have none yet (their
attention dropout / masked SDPA paths differ between CUDA and the CPU trace), so their specs carry
``ModelSpec.unplanned`` and a plan refuses them; parameter counts, sizes and FLOP counts are exact."""

REFUSED_FAMILIES = {
    "phi": "its lm_head carries a bias (vocab_size values) that ModelSpec has no field for",
    "bloom": "its word_embeddings_layernorm after the token embedding has no ModelSpec field",
}
"""Non-gated families whose parameters ModelSpec cannot count exactly: refused with the reason."""

DEEPSEEK_V2_MAPPING = "deepseek_v2 is planned as DeepSeek-V3's layout with its own router"
"""How a ``deepseek_v2`` model is planned (transformers v5.24.0 models/deepseek_v2/modeling_deepseek_v2.py, compared op
by op with models/deepseek_v3/modeling_deepseek_v3.py). The same: the parameters (MLA projections and norms, an fp32
``gate.weight`` l.92, fused experts l.47-60, one shared MLP of moe_intermediate_size x n_shared_experts l.126-128,
dense MLPs below first_k_dense_replace l.428) and what attention saves: ``apply_rotary_emb`` l.259-272 multiplies
fp32 complex views of q_pe / k_pe (one fp32 copy saved per operand) where DeepSeek-V3's ``apply_rotary_pos_emb``
saves two bf16 tensors (x and rotate_half(x)) per operand, the same bytes (measured with saved_tensors_hooks,
``tests/unit/test_arch_activations.py``). Different: the router (``MoeSpec.softmax_router``, l.98-117). The yarn
``mscale_all_dim`` softmax scale (``yarn_apply_mscale``, l.346) changes no size or FLOP."""

_TOP_LEVEL_WRAPPERS = {"qwen3_5": "qwen3_5_text", "qwen3_6": "qwen3_5_text", "llama4": "llama4_text"}

QWEN1_MODEL_TYPE = "qwen"
"""Qwen (1.0)'s remote-code ``model_type``, planned on the Qwen2 layout (``qwen1_as_qwen2``) with its fused ``c_attn``
(``ModelSpec.fused_qkv``) and flash-attn's rotary kernel where its flash attention runs (``ModelSpec.fused_rotary``, which
the plan keeps only for a bf16 / fp16 card with ``attention: flash``: ``plan.resolve.flash_rotary_runs``)."""


def qwen1_as_qwen2(dec: dict[str, Any], name: str) -> dict[str, Any]:
    """A Qwen (1.0) ``config.json`` read as the Qwen2 layout it shares parameters with: ``QWenMLP`` builds ``w1`` and
    ``w2`` of ``intermediate_size // 2`` each and ``c_proj`` back (so the SwiGLU width is half the config's
    ``intermediate_size``), ``QWenAttention`` one ``c_attn`` of ``3 * kv_channels * num_attention_heads`` outputs with a
    bias and a bias-free ``c_proj`` (``no_bias`` true), no grouped-query heads, RMSNorm before each block (modeling_qwen.py
    shipped with the checkpoints, read in a copy of the Qwen-72B repository: mapengAdam/qianwen-72B modeling_qwen.py
    @3334bfe3d6d9d445cbe54185cd6aaef7e1e3c068 ``QWenMLP.__init__``, ``QWenAttention.__init__``, ``QWenBlock``)."""
    out = dict(dec, model_type="qwen2")
    out["intermediate_size"] = _int(dec, "intermediate_size", name, least=2, most=20_000_000) // 2
    if "kv_channels" in dec and "head_dim" not in dec:
        out["head_dim"] = _int(dec, "kv_channels", name, most=65_536)
    out.setdefault("num_key_value_heads", _int(dec, "num_attention_heads", name, most=100_000))  # c_attn: no GQA
    return out

# Families whose q/k/v carry a bias regardless of config.json (Qwen2 hard-codes bias=True).
_QKV_BIAS_ALWAYS = {"qwen2", "qwen2_moe"}
_EVERY_LAYER_WINDOW_FAMILIES = frozenset({"phi3", "mistral", "mixtral"})
"""Families whose every layer attends within ``sliding_window`` when the config sets one."""
_QK_NORM_ALWAYS = {"qwen3", "qwen3_moe", "qwen3_5_text", "olmo2", "olmoe", "gemma3_text"}
_O_PROJ_NO_BIAS = {"glm4_moe", "glm4"}
"""Families whose ``attention_bias`` covers q/k/v only: GLM-4.5's o_proj is built with ``bias=False``
(transformers v5.24.0 models/glm4_moe/modeling_glm4_moe.py l.188-197)."""
_QK_NORM_FLAG = {"glm4_moe": "use_qk_norm"}
"""Families whose per-head q/k RMSNorms are a config switch (Glm4MoeConfig ``use_qk_norm``, default false; l.198-201)."""


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


def _num_experts(cfg: dict[str, Any], where: str, own: str) -> int:
    """The routed experts, under either name a config may spell them: transformers 5 maps ``num_experts`` to
    ``num_local_experts`` in Qwen3-MoE's config (``Qwen3MoeConfig.attribute_map``, transformers 5.24.0
    models/qwen3_moe/configuration_qwen3_moe.py), so a config it saves writes ``num_local_experts``; Mixtral, gpt-oss
    and Llama-4 name it so, OLMoE maps the other way. ``own``: the family's own name, the one a missing field is reported
    under. Both present and different is refused."""
    a, b = cfg.get("num_experts"), cfg.get("num_local_experts")
    if a is not None and b is not None and a != b:
        raise ConfigError(f"{where}: config.json fields 'num_experts' = {a!r} and 'num_local_experts' = {b!r} differ;"
                          " allowed: one of them, or both equal")
    key = "num_experts" if a is not None else "num_local_experts" if b is not None else own
    return _int(cfg, key, where, most=100_000)


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
    qwen1 = family == QWEN1_MODEL_TYPE
    if qwen1:
        dec, family = qwen1_as_qwen2(dec, name), "qwen2"
    if family in REFUSED_FAMILIES:
        raise ConfigError(f"{name}: model_type '{family}' is not supported: {REFUSED_FAMILIES[family]};"
                          f" supported: {', '.join(SUPPORTED_FAMILIES + COUNTED_FAMILIES)}")
    if family in COUNTED_FAMILIES:
        return ModelSpec(name=name, source=source, family=family, verified=verified, note=note, aliases=aliases,
                         **_GPT_STYLE[family](dec, name))
    if family not in SUPPORTED_FAMILIES:
        raise ConfigError(
            f"{name}: model_type '{family}' is not supported; supported: {', '.join(SUPPORTED_FAMILIES + COUNTED_FAMILIES)}"
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
    mla = _mla(dec, name, family) if family in ("deepseek_v3", "deepseek_v2") else None
    if mla is not None:
        # the expanded keys: every head has its own qk_nope + qk_rope key and a v_head_dim value
        head_dim, kv_heads = mla.qk_head_dim, heads
    tie_default = family in ("gemma", "gemma2", "gemma3_text", "opt", "smollm3")
    tie = _truth(dec, "tie_word_embeddings", name, default=tie_default)  # "false" as text is not a tied head
    sliding = _int(dec, "sliding_window", name, most=1_000_000_000, default=None, zero_is_none=True)
    max_pos = _int(dec, "max_position_embeddings", name, most=1_000_000_000, default=None)

    moe = None
    if family == "deepseek_v3":
        moe = _deepseek_moe(dec, name, layers)
    elif family == "deepseek_v2":
        moe = _deepseek_v2_moe(dec, name, layers)
    elif family == "gpt_oss":
        moe = _gpt_oss_moe(dec, name, intermediate)
    elif family == "llama4_text":
        moe = _llama4_moe(dec, name, layers)
    elif family == "mixtral":
        moe = _mixtral_moe(dec, name)
    elif family == "olmoe":
        moe = _olmoe_moe(dec, name, hidden=hidden, heads=heads, head_dim=head_dim)
    elif family == "glm4_moe":
        moe = _glm4_moe_moe(dec, name, layers)
    if family in ("qwen3_moe", "qwen2_moe"):
        experts = _num_experts(dec, name, "num_experts")
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
            # Qwen2MoeConfig's default is False (configuration_qwen2_moe.py l.100, transformers v5.24.0); Qwen3-MoE
            # keeps the renormalisation its released configs set
            norm_topk_prob=_flag(dec, "norm_topk_prob", name, default=False) if family == "qwen2_moe" else True,
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
        bias = _truth(dec, "enable_bias", name, default=True)
        affine = _truth(dec, "layer_norm_elementwise_affine", name, default=True)
        pre = _truth(dec, "do_layer_norm_before", name, default=True)
        proj = _int(dec, "word_embed_proj_dim", name, most=1_000_000, default=hidden)
        if max_pos is None:
            raise ConfigError(f"{name}: config.json is missing required field 'max_position_embeddings' (OPT learns"
                              " its positions)")
        extra = dict(attention_bias=bias, o_proj_bias=bias, mlp_bias=bias, mlp_gated=False, norm_bias=affine,
                     norms_per_layer=2 if affine else 0, pre_norm=pre,
                     final_norm=affine and pre and not _truth(dec, "_remove_final_layer_norm", name, default=False),
                     learned_positions=max_pos + 2, layer_norm=True, rotary=False,
                     dropout=_dropout(dec, name), embed_proj_dim=proj if proj != hidden else None,
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
    elif family == "olmoe":
        # q_norm over hidden_size and k_norm over kv_heads x head_dim, on the projections' outputs before the
        # per-head view (transformers v5.24.0 models/olmoe/modeling_olmoe.py l.222-225, l.239-240), pre-norm blocks
        extra = dict(qk_norm_full_width=True)
    elif family == "phi3":
        # fused qkv_proj and gate_up_proj, no biases (transformers v5.24.0 models/phi3/modeling_phi3.py l.54-61,
        # l.205-223); every layer windowed when the config has a sliding_window (l.247, l.386)
        extra = dict(fused_projections=True)
    elif family == "gemma3_text":
        extra = _gemma3_text(dec, name, layers, sliding)
    elif family == "gemma":
        _gemma(dec, name)
    elif family == "glm4":
        # GLM-4-0414 (transformers v5.24.0 models/glm4/modeling_glm4.py): q/k/v bias (Glm4Config attention_bias default
        # true, l.73 of configuration_glm4.py) and no o_proj bias (l.212-220), one gate_up_proj (l.54), four norms per
        # layer (input, post_self_attn on the attention output, post_attention before the MLP, post_mlp on its output,
        # l.238-241, l.263-278: Gemma-2's places, plain RMSNorm), interleaved partial rotary ending in a cat (l.176-196)
        extra = dict(partial_rotary_factor=_partial_rotary(dec, name, default=0.5), rotary_cat=True,
                     interleaved_rotary=True, fused_gate_up=True)
    elif family == "smollm3":
        extra = _smollm3(dec, name, layers)
    elif family == "granite":
        extra = dict(scalar_multipliers=True)  # ModelSpec.scalar_multipliers: Llama's parameters and saved tensors
    elif family == "olmo2":
        # q_norm / k_norm over the full projected widths and norms after each block, none before it
        # (transformers v5.24.0 src/transformers/models/olmo2/modeling_olmo2.py l.213-214, 285-286, 299-316)
        extra = dict(qk_norm_full_width=True, post_block_norms=True)
    elif family == "deepseek_v2":
        extra = dict(mla=mla)  # DEEPSEEK_V2_MAPPING
    elif family == "glm4_moe":
        extra = dict(partial_rotary_factor=_partial_rotary(dec, name, default=0.5), rotary_cat=True)
    elif family == "deepseek_v3":
        extra = dict(mla=mla, mtp_layers_declared=_int(dec, "num_nextn_predict_layers", name, least=0, most=16,
                                                       default=0))
    if family in _EVERY_LAYER_WINDOW_FAMILIES and sliding:
        # Phi-3, Mistral and Mixtral build the sliding-window mask for the whole stack whenever the config has one and
        # pass ``sliding_window`` to every layer's attention (transformers v5.24.0 models/phi3/modeling_phi3.py l.247,
        # l.386; models/mistral/modeling_mistral.py l.173, l.355; models/mixtral/modeling_mixtral.py l.322, l.444)
        extra = dict(extra, sliding_layers=tuple(range(layers)))
    if qwen1:
        extra = dict(extra, fused_qkv=True, fused_rotary=True)
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
            attention_bias=family in _QKV_BIAS_ALWAYS or _truth(dec, "attention_bias", name, default=family == "glm4"),
            o_proj_bias=(family not in _QKV_BIAS_ALWAYS and family not in _O_PROJ_NO_BIAS
                         and _truth(dec, "attention_bias", name, default=False)),
            mlp_bias=_truth(dec, "mlp_bias", name, default=False),
            norms_per_layer=4 if family in ("gemma2", "gemma3_text", "glm4") else 2,
            hidden_act=_gemma_act(dec) if family == "gemma" else
            str(dec.get("hidden_act") or dec.get("hidden_activation") or "silu"),
        )),
        qk_norm=family in _QK_NORM_ALWAYS or (family in _QK_NORM_FLAG
                                               and _flag(dec, _QK_NORM_FLAG[family], name, default=False)),
        attn_output_gate=family == "qwen3_5_text",
        layer_types=layer_types,
        sliding_window=sliding,
        rotary_concentration=yarn_concentration(_rope_scaling(dec)),
        max_position_embeddings=max_pos,
        linear_attention=linear,
        moe=moe,
        verified=verified,
        note=note,
        aliases=aliases,
        **extra,
    )


def _rope_scaling(dec: dict[str, Any]) -> Any:
    """The config's RoPE scaling: ``rope_scaling`` (config.json as released, transformers 4.x), else ``rope_parameters``
    (as transformers 5 writes it), as transformers 5 reads them: ``self.rope_parameters = rope_scaling or
    self.rope_parameters`` (v5.24.0 src/transformers/modeling_rope_utils.py ``convert_rope_params_to_dict``
    l.776-777). A ``rope_parameters`` nested per layer type has no top-level ``rope_type`` (YaRN not read there)."""
    return dec.get("rope_scaling") or dec.get("rope_parameters")


def yarn_concentration(rope_scaling: Any) -> float:
    """YaRN's concentration factor on cos and sin for a config's ``rope_scaling`` (``ModelSpec.rotary_concentration``),
    Megatron-Core's ``_yarn_get_concentration_factor`` (yarn_rotary_pos_embedding.py l.252-271 @core_v0.16.0
    3bec9aa97dda898d16ff5a89bac0ed2b6682b172): ``m(s, a) = 0.1·a·ln(s) + 1`` (1 at ``s <= 1``), ``m(factor, 1)``
    when ``mscale`` or ``mscale_all_dim`` is absent, else ``m(factor, mscale) / m(factor, mscale_all_dim)``. 1 for
    anything but a YaRN ``rope_scaling`` (``rope_type`` or ``type`` "yarn") with a numeric ``factor``."""
    if not isinstance(rope_scaling, dict) or (rope_scaling.get("rope_type") or rope_scaling.get("type")) != "yarn":
        return 1.0
    factor = rope_scaling.get("factor")
    if isinstance(factor, bool) or not isinstance(factor, (int, float)):
        return 1.0

    def m(a: float) -> float:
        return 1.0 if factor <= 1 else 0.1 * a * math.log(factor) + 1.0

    ms, ms_all = rope_scaling.get("mscale"), rope_scaling.get("mscale_all_dim")
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (ms, ms_all)):
        return m(1.0)
    return m(float(ms)) / m(float(ms_all))


def _gemma3_text(dec: dict[str, Any], name: str, layers: int, sliding: int | None) -> dict[str, Any]:
    """Gemma-3 text decoder (``Gemma3ForCausalLM``): ``layer_types`` or every ``sliding_window_pattern``-th layer global
    (Gemma3TextConfig l.105-110, default 6), the rest windowed; softcapping and bidirectional attention refused
    (Gemma-3 releases have none). Its layers are Gemma-2's four zero-centred RMSNorms and scaled embedding plus per-head
    zero-centred q_norm / k_norm (transformers v5.24.0 models/gemma3/modeling_gemma3.py l.310-311, l.329-330,
    l.367-370), attention through SDPA (no softcapping, so no eager fallback); from the window on the local layers take
    the sliding-window mask (``memory.attention.sdpa_window_masked``)."""
    for key in ("final_logit_softcapping", "attn_logit_softcapping"):
        if dec.get(key) is not None:
            raise ConfigError(f"{name}: config.json field '{key}' = {dec[key]!r} is not modelled for gemma3_text;"
                              " allowed: null")
    if _flag(dec, "use_bidirectional_attention", name, default=False):
        raise ConfigError(f"{name}: config.json field 'use_bidirectional_attention' true is not modelled; allowed:"
                          " false")
    raw = dec.get("layer_types")
    if raw is None:
        every = _int(dec, "sliding_window_pattern", name, most=layers + 1, default=6)
        raw = ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(layers)]
    if not isinstance(raw, (list, tuple)) or len(raw) != layers or any(
            t not in ("sliding_attention", "full_attention") for t in raw):
        raise ConfigError(f"{name}: config.json field 'layer_types' must list one of sliding_attention,"
                          f" full_attention per layer ({layers} = num_hidden_layers)")
    return dict(sliding_layers=tuple(i for i, t in enumerate(raw) if t == "sliding_attention") if sliding else ())


def _smollm3(dec: dict[str, Any], name: str, layers: int) -> dict[str, Any]:
    """SmolLM3 (``SmolLM3ForCausalLM``, transformers v5.24.0 models/smollm3): Llama's layer, with rotary skipped in the
    layers whose ``no_rope_layers`` entry is 0 (l.192, l.215), by default every ``no_rope_layer_interval``-th layer
    (SmolLM3Config.__post_init__: ``int((i + 1) % interval != 0)``, default 4); tied head by default. Refused:
    ``use_sliding_window`` true (windowed layers are not modelled for this family)."""
    if _flag(dec, "use_sliding_window", name, default=False):
        raise ConfigError(f"{name}: config.json field 'use_sliding_window' true is not modelled for smollm3; allowed:"
                          " false")
    raw = dec.get("no_rope_layers")
    if raw is None:
        every = _int(dec, "no_rope_layer_interval", name, most=layers + 1, default=4)
        raw = [int((i + 1) % every != 0) for i in range(layers)]
    if (not isinstance(raw, (list, tuple)) or len(raw) != layers
            or any(isinstance(v, bool) or v not in (0, 1) for v in raw)):
        raise ConfigError(f"{name}: config.json field 'no_rope_layers' must list 1 (rotary) or 0 (NoPE) per layer"
                          f" ({layers} = num_hidden_layers)")
    return dict(nope_layers=tuple(i for i, v in enumerate(raw) if v == 0))


def _gemma(dec: dict[str, Any], name: str) -> None:
    """Gemma (``GemmaForCausalLM``, transformers v5.24.0 models/gemma/modeling_gemma.py): Gemma-2's zero-centred
    RMSNorm (``x_fp32 * rsqrt(...) * (1 + w)``, l.64-78) and embedding scaled by sqrt(hidden_size) (l.55-61, l.363),
    two norms per layer (input and post-attention, Llama's places), q/k/v/o with ``attention_bias`` (default false),
    a GeGLU MLP, a tied head by default (GemmaConfig l.81); no soft-capping, so SDPA runs. Refused:
    ``use_bidirectional_attention`` true (not a causal decoder)."""
    if _flag(dec, "use_bidirectional_attention", name, default=False):
        raise ConfigError(f"{name}: config.json field 'use_bidirectional_attention' true is not modelled; allowed:"
                          " false")


def _gemma_act(dec: dict[str, Any]) -> str:
    """Gemma's MLP activation: ``hidden_act`` (GemmaConfig default gelu_pytorch_tanh), the released configs' legacy
    ``gelu`` read as the tanh approximation as GemmaConfig rewrites it (configuration_gemma.py l.89-94)."""
    act = str(dec.get("hidden_act") or dec.get("hidden_activation") or "gelu_pytorch_tanh")
    return "gelu_pytorch_tanh" if act == "gelu" else act


def _dropout(dec: dict[str, Any], name: str, key: str = "dropout", default: float = 0.1) -> float:
    """A residual dropout probability in [0, 1) (OPT's ``dropout``, OPTConfig default 0.1)."""
    p = dec.get(key, default)
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p < 1:
        raise ConfigError(f"{name}: config.json field '{key}' must be a probability in [0, 1), got {p!r}")
    return float(p)


DEEPSEEK_Q_LORA_RANK_DEFAULT = 1536
"""DeepseekV2Config's and DeepseekV3Config's ``q_lora_rank`` default (``_mla``)."""


def _mla(dec: dict[str, Any], name: str, family: str = "deepseek_v3") -> MlaSpec:
    """DeepSeek-V3's multi-head latent attention sizes (q_lora_rank null: no query compression).

    q_lora_rank null is a plain q_proj (DeepSeek-V2-Lite), but an absent key is the config class's default 1536 in
    both families (transformers v5.24.0 models/deepseek_v2/configuration_deepseek_v2.py l.106,
    models/deepseek_v3/configuration_deepseek_v3.py l.93), so only an explicit null (or 0) drops the query
    compression."""
    q_rank = _int(dec, "q_lora_rank", name, least=0, most=1_000_000, default=0)
    if "q_lora_rank" not in dec:
        q_rank = DEEPSEEK_Q_LORA_RANK_DEFAULT
    return MlaSpec(
        q_lora_rank=q_rank,
        kv_lora_rank=_int(dec, "kv_lora_rank", name, most=1_000_000),
        qk_nope_head_dim=_int(dec, "qk_nope_head_dim", name, least=0, most=65_536),
        qk_rope_head_dim=_int(dec, "qk_rope_head_dim", name, most=65_536),
        v_head_dim=_int(dec, "v_head_dim", name, most=65_536),
    )


def _deepseek_moe(dec: dict[str, Any], name: str, layers: int) -> MoeSpec:
    """DeepSeek-V3 MoE: n_routed_experts routed (top-k within topk_group of n_group groups), n_shared_experts
    always-on experts fused into one MLP of moe_intermediate_size x n_shared_experts, dense MLPs in the first
    first_k_dense_replace layers (transformers builds MoE from that index on). The top-k weights stay fp32 into the
    combine (``MoeSpec.routing_weights_fp32``): ``DeepseekV3TopkRouter.forward`` gathers them from the fp32 sigmoid
    scores and scales them without a cast back (transformers v5.24.0 models/deepseek_v3/modeling_deepseek_v3.py
    l.133-158), DeepSeek-V2's takes them from the fp32 softmax the same way (models/deepseek_v2/modeling_deepseek_v2.py
    l.98-117), and the grouped_mm experts multiply the bf16 expert outputs by them uncast (the traced combine's mul
    writes fp32, then an fp32 index and sum), as GLM-4.5's. The memory model's DeepSeek-V3 block saves them as fp32
    whatever this flag says (``arch_activations._deepseek_moe``)."""
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
        routing_weights_fp32=True,
    )


def _partial_rotary(dec: dict[str, Any], name: str, *, default: float) -> float:
    """The rotated share of head_dim: ``partial_rotary_factor`` at the top level (config.json as released) or in
    ``rope_parameters`` (as transformers 5 writes it), else the config class's ``default``."""
    rope = dec.get("rope_parameters") if isinstance(dec.get("rope_parameters"), dict) else {}
    key, p = next(((k, v) for k, v in (("partial_rotary_factor", dec.get("partial_rotary_factor")),
                                       ("rope_parameters.partial_rotary_factor", rope.get("partial_rotary_factor")))
                   if v is not None), ("partial_rotary_factor", default))
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
        raise ConfigError(f"{name}: config.json field '{key}' must be a number in (0, 1], got {str(p)[:40]!r}")
    return float(p)


def _glm4_moe_moe(dec: dict[str, Any], name: str, layers: int) -> MoeSpec:
    """GLM-4.5 / GLM-4.6 MoE (transformers v5.24.0 models/glm4_moe/modeling_glm4_moe.py): the DeepSeek-V3 block op for
    op (``Glm4MoeTopkRouter`` / ``Glm4MoeNaiveMoe`` / ``Glm4MoeMoE`` l.269-392 are DeepSeek-V3's l.120-243 with the
    class names changed: fp32 ``gate.weight`` and ``e_score_correction_bias`` kept in fp32, l.460, sigmoid scores,
    group-limited top-k over ``n_group`` / ``topk_group``, renormalised under ``norm_topk_prob``, scaled by
    ``routed_scaling_factor``, fused routed experts, ``n_shared_experts`` always-on experts as one MLP of
    moe_intermediate_size x n_shared_experts), dense MLPs of intermediate_size below ``first_k_dense_replace``
    (l.402-405). Glm4MoeConfig's defaults differ from DeepSeek-V3's (configuration_glm4_moe.py): first_k_dense_replace
    1, n_shared_experts 1, n_group 1, topk_group 1. The top-k weights stay fp32 into the combine
    (``MoeSpec.routing_weights_fp32``). Refused: ``norm_topk_prob`` false (the sigmoid router's saved
    set is modelled with the renormalisation, ``arch_activations._deepseek_moe``). The multi-token-prediction layer
    (``num_nextn_predict_layers``) is not built by transformers and not counted."""
    if not _flag(dec, "norm_topk_prob", name, default=True):
        raise ConfigError(f"{name}: config.json field 'norm_topk_prob' false is not modelled for glm4_moe; allowed: true")
    filled = {"first_k_dense_replace": 1, "n_shared_experts": 1, "n_group": 1, "topk_group": 1}
    filled.update({k: v for k, v in dec.items() if v is not None})
    # the router returns fp32 top-k weights (gather of the fp32 sigmoid scores, l.299-306) and the experts multiply
    # the bf16 expert outputs by them uncast (l.348): Mixtral's fp32 combine
    return dataclasses.replace(_deepseek_moe(filled, name, layers), routing_weights_fp32=True)


DEEPSEEK_V2_TOPK_METHODS = ("greedy", "group_limited_greedy")


def _deepseek_v2_moe(dec: dict[str, Any], name: str, layers: int) -> MoeSpec:
    """DeepSeek-V2 MoE as transformers v5.24.0 builds it (models/deepseek_v2/modeling_deepseek_v2.py): the
    DeepSeek-V3 layout (``_deepseek_moe``: fused routed experts, an fp32 router weight, one shared MLP of
    moe_intermediate_size x n_shared_experts, dense MLPs below first_k_dense_replace), with what differs:

    - ``topk_method`` ``greedy`` (DeepseekV2Config's default, l.115) is a plain top-k over all experts, so
      n_group / topk_group do not route (``n_group`` 1 here); ``group_limited_greedy`` keeps the groups
      (l.104-115). Other methods (``noaux_tc`` is DeepSeek-V3's) are refused.
    - ``norm_topk_prob`` is never applied (the router has no renormalisation, l.98-117): False.
    - ``n_shared_experts`` is required to be at least 1: ``DeepseekV2Moe`` always builds and adds the shared MLP
      (l.126-128, l.137), so a null or 0 count cannot be built.
    - ``moe_layer_freq`` is not read by transformers (every layer from first_k_dense_replace on is MoE, l.428); a
      value other than 1 is refused rather than counted as transformers builds it but the checkpoint does not."""
    method = dec.get("topk_method", "greedy")
    if method not in DEEPSEEK_V2_TOPK_METHODS:
        raise ConfigError(f"{name}: config.json field 'topk_method' = {str(method)[:40]!r} is not modelled for"
                          f" deepseek_v2; allowed: {', '.join(DEEPSEEK_V2_TOPK_METHODS)}")
    freq = _int(dec, "moe_layer_freq", name, most=layers, default=1)
    if freq != 1:
        raise ConfigError(f"{name}: config.json field 'moe_layer_freq' = {freq} is not modelled (transformers'"
                          " DeepseekV2 builds MoE in every layer from first_k_dense_replace on); allowed: 1")
    shared = _int(dec, "n_shared_experts", name, least=0, most=1024, default=2)
    if shared < 1:
        raise ConfigError(f"{name}: config.json field 'n_shared_experts' = {shared} is not modelled (transformers'"
                          " DeepseekV2Moe always adds its shared experts); allowed: 1 or more")
    grouped = method == "group_limited_greedy"
    moe = _deepseek_moe({**dec, "n_shared_experts": shared, "n_group": dec.get("n_group") if grouped else 1,
                         "topk_group": dec.get("topk_group") if grouped else 1}, name, layers)
    return dataclasses.replace(moe, norm_topk_prob=False, softmax_router=True)


def _mixtral_moe(dec: dict[str, Any], name: str) -> MoeSpec:
    """Mixtral (transformers v5.24.0 models/mixtral/modeling_mixtral.py l.56-130): every layer a sparse MoE of
    num_local_experts SwiGLU experts of intermediate_size (``MixtralExperts``: gate_up_proj E x 2w x h, down_proj
    E x h x w, no biases), a bias-free router ``weight`` E x h (``MixtralTopKRouter``), softmax over the fp32 logits,
    top-k, always renormalised; no shared expert. The routing weights stay fp32 (no cast back, unlike Qwen3-MoE's
    models/qwen3_moe/modeling_qwen3_moe.py l.266 ``.to(router_logits.dtype)``; Mixtral l.105-110), so the combine multiplies a bf16 expert output by fp32 weights.

    Refused: ``router_jitter_noise`` > 0 (an in-place uniform multiply of the block input in training, l.124-125,
    not modelled) and ``output_router_logits`` true (the load-balancing auxiliary loss over every layer's router
    logits, ``load_balancing_loss_func``, not modelled)."""
    experts = _num_experts(dec, name, "num_local_experts")
    jitter = dec.get("router_jitter_noise", 0.0)
    if isinstance(jitter, bool) or not isinstance(jitter, (int, float)) or jitter != 0:
        raise ConfigError(f"{name}: config.json field 'router_jitter_noise' = {jitter!r} is not modelled (Mixtral's"
                          " training-time jitter on the MoE input); allowed: 0")
    if _flag(dec, "output_router_logits", name, default=False):
        raise ConfigError(f"{name}: config.json field 'output_router_logits' true is not modelled (Mixtral's"
                          " load-balancing auxiliary loss); allowed: false")
    return MoeSpec(
        num_experts=experts,
        experts_per_token=_int(dec, "num_experts_per_tok", name, most=experts),
        expert_intermediate_size=_int(dec, "intermediate_size", name, most=10_000_000),
        norm_topk_prob=True,
        routing_weights_fp32=True,
    )


def _olmoe_moe(dec: dict[str, Any], name: str, *, hidden: int, heads: int, head_dim: int) -> MoeSpec:
    """OLMoE (transformers v5.24.0 models/olmoe): every layer a sparse MoE of ``num_experts`` SwiGLU experts of
    intermediate_size (``OlmoeExperts``, the fused layout of Qwen3-MoE's), the Qwen3-MoE router (softmax, top-k,
    renormalised only under ``norm_topk_prob``, OlmoeConfig default False, l.323-335, cast back to the model dtype),
    no shared expert. Refused: ``clip_qkv`` (in-place clamps of q, k and v, l.243-246), ``output_router_logits``
    true (the load-balancing auxiliary loss), and a ``head_dim`` whose heads do not span hidden_size (q_norm is
    hidden_size wide, l.222)."""
    if dec.get("clip_qkv") is not None:
        raise ConfigError(f"{name}: config.json field 'clip_qkv' = {dec['clip_qkv']!r} is not modelled (OLMoE's"
                          " in-place clamp of q, k and v); allowed: null")
    if _flag(dec, "output_router_logits", name, default=False):
        raise ConfigError(f"{name}: config.json field 'output_router_logits' true is not modelled (OLMoE's"
                          " load-balancing auxiliary loss); allowed: false")
    if heads * head_dim != hidden:
        raise ConfigError(f"{name}: config.json field 'head_dim' = {head_dim} times num_attention_heads = {heads} is not"
                          f" hidden_size = {hidden} (OLMoE's q_norm is hidden_size wide)")
    experts = _num_experts(dec, name, "num_experts")
    return MoeSpec(
        num_experts=experts,
        experts_per_token=_int(dec, "num_experts_per_tok", name, most=experts),
        expert_intermediate_size=_int(dec, "intermediate_size", name, most=10_000_000),
        norm_topk_prob=_flag(dec, "norm_topk_prob", name, default=False),
    )


def _llama4_moe(dec: dict[str, Any], name: str, layers: int) -> MoeSpec:
    """Llama-4 text MoE (transformers Llama4TextMoe): num_local_experts routed experts of intermediate_size
    (top-k, sigmoid router without bias) plus one always-on shared expert of intermediate_size without a gate;
    layers interleave_moe_layer_step-1, 2*step-1, ... are MoE (moe_layers), the others a dense MLP of
    intermediate_size_mlp."""
    experts = _num_experts(dec, name, "num_local_experts")
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
    experts = _num_experts(dec, name, "num_local_experts")
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


# ------------------------------------------------------------------ non-gated GELU decoders (counted only)


_ZERO_ONE = " (0 and 1 read as false and true)"


def _bool_or_zero_one(value: Any) -> bool | None:
    """``value`` as a switch: a JSON boolean, or the integer 0 or 1 (transformers tests it by its truth, and some
    exported configs write the switch so); None for anything else (text: "false" is a true string; 2, 0.5)."""
    if isinstance(value, bool):
        return value
    if type(value) is int and value in (0, 1):
        return bool(value)
    return None


def _truth(cfg: dict[str, Any], key: str, where: str, *, default: bool) -> bool:
    """A true/false switch the modelling code tests by its truth (``if config.tie_word_embeddings:``, ``bias=config.
    attention_bias``): ``default`` when absent, False when null (None is falsy there too), 0 or 1 as false or true,
    refused when text or another number, which transformers would take by its truth ("false" is a true string)."""
    value = cfg.get(key, default)
    if value is None:
        return False
    switch = _bool_or_zero_one(value)
    if switch is None:
        raise ConfigError(f"{where}: config.json field '{key}' must be true, false or null{_ZERO_ONE}, got"
                          f" {str(value)[:40]!r}")
    return switch


def _flag(cfg: dict[str, Any], key: str, where: str, *, default: Any = _MISSING, shown: str = "") -> bool:
    """A true/false config value (0 or 1 as false or true); ``default`` when absent or null (required when no
    default)."""
    value = cfg.get(key)
    if value is None:
        if default is _MISSING:
            raise ConfigError(f"{where}: config.json is missing required field '{shown or key}'")
        return bool(default)
    switch = _bool_or_zero_one(value)
    if switch is None:
        allowed = "true or false" if default is _MISSING else "true, false or null"
        raise ConfigError(f"{where}: config.json field '{shown or key}' must be {allowed}{_ZERO_ONE}, got"
                          f" {str(value)[:40]!r}")
    return switch


def _head_dim(hidden: int, heads: int, heads_key: str, hidden_key: str, where: str) -> int:
    if hidden % heads:
        raise ConfigError(f"{where}: config.json field '{heads_key}' = {heads} does not divide {hidden_key} = {hidden}")
    return hidden // heads


def _unplanned(family: str, layer: str) -> str:
    return (f"{family}'s decoder layer ({layer}) has no activation model in trainfit.memory yet (the only non-gated"
            " layer it models is OPT's ReLU fc1/fc2, whose fc2 input is ReLU's saved output; a GELU saves its input"
            " as well); parameter counts are exact")


def _common(*, hidden: int, heads: int, kv_heads: int, layers: int, vocab: int, width: int, tie: bool,
            bias: bool, norm_bias: bool, norms: int, positions: int, max_pos: int | None, act: str,
            dropout: float, unplanned: str, layer_norm: bool = True, rotary: bool | None = None) -> dict[str, Any]:
    """``layer_norm``: the norms are LayerNorm (one fused kernel); ``rotary``: None for rotary exactly when no
    position rows are learned."""
    return dict(hidden_size=hidden, intermediate_size=width, num_layers=layers, num_attention_heads=heads,
                num_kv_heads=kv_heads, head_dim=hidden // heads, vocab_size=vocab, tie_word_embeddings=tie,
                attention_bias=bias, o_proj_bias=bias, mlp_bias=bias, mlp_gated=False, norm_bias=norm_bias,
                norms_per_layer=norms, learned_positions=positions, max_position_embeddings=max_pos,
                hidden_act=act, dropout=dropout, unplanned=unplanned, layer_norm=layer_norm,
                rotary=positions == 0 if rotary is None else rotary)


def _mpt(dec: dict[str, Any], name: str) -> dict[str, Any]:
    """MPT as llm-foundry's MPTConfig / MPTForCausalLM build it (llmfoundry/models/mpt, the code MosaicML's hub
    checkpoints run): fused Wqkv (d x (d + 2 kv_n_heads x head_dim)) and out_proj, up_proj/down_proj of
    expansion_ratio x d_model with GELU, biases everywhere unless no_bias (which drops the norms' biases too),
    LayerNorm (or RMSNorm under norm_type rmsnorm), learned positions of max_seq_len rows unless ALiBi or rope
    is on, tied head by default. transformers' MptForCausalLM builds the same parameters for no_bias true,
    alibi on, expansion_ratio 4 and multi-head attention (it ignores those fields).

    ``no_bias`` and ``attn_config.alibi`` are required: the two implementations default them differently
    (transformers true/true, llm-foundry false/false)."""
    hidden = _int(dec, "d_model", name, most=1_000_000)
    heads = _int(dec, "n_heads", name, most=100_000)
    layers = _int(dec, "n_layers", name, most=1024)
    vocab = _int(dec, "vocab_size", name, most=100_000_000)
    max_seq = _int(dec, "max_seq_len", name, most=1_000_000_000)
    head_dim = _head_dim(hidden, heads, "n_heads", "d_model", name)
    attn = dec.get("attn_config") or {}
    if not isinstance(attn, dict):
        raise ConfigError(f"{name}: config.json field 'attn_config' must be a mapping of attention settings")
    ffn = dec.get("ffn_config") or {}
    if not isinstance(ffn, dict):
        raise ConfigError(f"{name}: config.json field 'ffn_config' must be a mapping of MLP settings")
    ffn_type = ffn.get("ffn_type", "mptmlp")
    if ffn_type != "mptmlp":
        raise ConfigError(f"{name}: config.json field 'ffn_config.ffn_type' = {ffn_type!r} is not modelled; allowed:"
                          " mptmlp")
    if _flag(attn, "qk_ln", name, default=False, shown="attn_config.qk_ln") or attn.get("qk_gn"):
        raise ConfigError(f"{name}: config.json field 'attn_config.qk_ln' (or qk_gn) is not modelled; allowed: false")
    attn_type = attn.get("attn_type", "multihead_attention")
    kinds = ("multihead_attention", "multiquery_attention", "grouped_query_attention")
    if attn_type not in kinds:
        raise ConfigError(f"{name}: config.json field 'attn_config.attn_type' = {str(attn_type)[:40]!r}; allowed:"
                          f" {', '.join(kinds)}")
    if attn_type == "multihead_attention":
        kv = heads
    elif attn_type == "multiquery_attention":
        kv = 1
    else:
        kv = _int(attn, "kv_n_heads", name, most=heads)
        if heads % kv:
            raise ConfigError(f"{name}: config.json field 'attn_config.kv_n_heads' = {kv} does not divide"
                              f" n_heads = {heads}")
    no_bias = _flag(dec, "no_bias", name)
    learned = _flag(dec, "learned_pos_emb", name, default=True)
    rope = _flag(attn, "rope", name, default=False, shown="attn_config.rope")
    alibi = (_flag(attn, "alibi", name, shown="attn_config.alibi") if learned and not rope
             else _flag(attn, "alibi", name, default=False, shown="attn_config.alibi"))
    norm_type = dec.get("norm_type", "low_precision_layernorm")
    norms = ("low_precision_layernorm", "layernorm", "low_precision_rmsnorm", "rmsnorm")
    if norm_type not in norms:
        raise ConfigError(f"{name}: config.json field 'norm_type' = {str(norm_type)[:40]!r}; allowed: {', '.join(norms)}")
    ratio = dec.get("expansion_ratio", 4)
    if ffn.get("ffn_hidden_size") is not None:
        width = _as_int(ffn["ffn_hidden_size"], "ffn_config.ffn_hidden_size", name, most=10_000_000)
    else:
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1024:
            raise ConfigError(f"{name}: config.json field 'expansion_ratio' must be a number in (0, 1024], got {ratio!r}")
        if not float(ratio * hidden).is_integer():
            raise ConfigError(f"{name}: config.json field 'expansion_ratio' = {ratio} times d_model = {hidden} is not"
                              " a whole MLP width")
        width = int(ratio * hidden)
    positions = max_seq if learned and not alibi and not rope else 0
    out = _common(hidden=hidden, heads=heads, kv_heads=kv, layers=layers, vocab=vocab, width=width,
                  tie=_flag(dec, "tie_word_embeddings", name, default=True), bias=not no_bias,
                  norm_bias="layernorm" in norm_type and not no_bias, norms=2, positions=positions, max_pos=max_seq,
                  act="gelu", dropout=_dropout(dec, name, "resid_pdrop", 0.0), unplanned="",
                  layer_norm="layernorm" in norm_type, rotary=rope)
    out["head_dim"] = head_dim
    # llm-foundry's attn_impl (MPTConfig default 'torch'): 'flash' runs flash_attn_fn's unpad / pad copies
    out["unpadded_attention"] = attn.get("attn_impl") == "flash"
    return out


def _gpt2(dec: dict[str, Any], name: str, *, family: str = "gpt2") -> dict[str, Any]:
    """GPT-2 (transformers GPT2LMHeadModel) and GPTBigCode (StarCoder): wte, wpe of n_positions rows, per layer
    ln_1, c_attn, c_proj, ln_2, c_fc (n_inner, default 4 x n_embd), c_proj, all with biases, LayerNorms with
    bias, ln_f, head tied by default. GPTBigCode's c_attn is n_embd x (n_embd + 2 head_dim) under multi_query
    (its default)."""
    def key(own: str, alias: str) -> str:  # config.json spells n_embd etc.; transformers also accepts the alias
        return alias if dec.get(own) is None and dec.get(alias) is not None else own

    hidden = _int(dec, key("n_embd", "hidden_size"), name, most=1_000_000)
    heads = _int(dec, key("n_head", "num_attention_heads"), name, most=100_000)
    layers = _int(dec, key("n_layer", "num_hidden_layers"), name, most=1024)
    pos = _int(dec, key("n_positions", "max_position_embeddings"), name, most=1_000_000_000)
    vocab = _int(dec, "vocab_size", name, most=100_000_000)
    _head_dim(hidden, heads, "n_head", "n_embd", name)
    if _flag(dec, "add_cross_attention", name, default=False):
        raise ConfigError(f"{name}: config.json field 'add_cross_attention' is not modelled (decoder-only);"
                          " allowed: false")
    bigcode = family == "gpt_bigcode"
    kv = 1 if bigcode and _flag(dec, "multi_query", name, default=True) else heads
    width = _int(dec, "n_inner", name, most=10_000_000, default=4 * hidden)
    act = str(dec.get("activation_function") or ("gelu_pytorch_tanh" if bigcode else "gelu_new"))
    label = "GPTBigCode" if bigcode else "GPT-2"
    resid = _dropout(dec, name, "resid_pdrop", 0.1)
    unplanned = _unplanned(label, "fused c_attn" + (" with one shared k/v head" if kv == 1 else "")
                           + ", learned positions, GELU c_fc/c_proj, dropout") if bigcode else _gpt2_unplanned(dec, name, act, resid)
    return _common(hidden=hidden, heads=heads, kv_heads=kv, layers=layers, vocab=vocab, width=width,
                   tie=_flag(dec, "tie_word_embeddings", name, default=True), bias=True, norm_bias=True, norms=2,
                   positions=pos, max_pos=pos, act=act, dropout=resid, unplanned=unplanned)


GPT2_PLANNED_ACTS = ("gelu", "gelu_pytorch_tanh", "gelu_new")


def _gpt2_unplanned(dec: dict[str, Any], name: str, act: str, resid: float) -> str:
    """Why a GPT-2 config cannot be planned ("" when it can, ``memory.arch_activations._gpt2_layer``): attention
    dropout (``attn_pdrop``, GPT2Config default 0.1) runs inside the SDPA kernel, which on CUDA keeps a random seed
    and on the CPU trace falls back to the math path, and is not modelled; an embedding dropout other than the
    residual one has no ModelSpec field; other activations have no measured saved set."""
    attn = _dropout(dec, name, "attn_pdrop", 0.1)
    embd = _dropout(dec, name, "embd_pdrop", 0.1)
    if attn:
        return (f"GPT-2 with attention dropout (attn_pdrop {attn}) is not modelled: set attn_pdrop to 0 in the"
                " config to plan it (parameter counts are exact)")
    if embd != resid:
        return f"GPT-2 with embd_pdrop {embd} != resid_pdrop {resid} is not modelled (parameter counts are exact)"
    if act not in GPT2_PLANNED_ACTS:
        return (f"GPT-2 activation_function {act!r} is not modelled; planned: {', '.join(GPT2_PLANNED_ACTS)}"
                " (parameter counts are exact)")
    return ""


def _gpt_neox(dec: dict[str, Any], name: str) -> dict[str, Any]:
    """GPT-NeoX / Pythia (transformers GPTNeoXForCausalLM): embed_in, per layer input_layernorm and
    post_attention_layernorm (LayerNorm with bias), query_key_value (h x 3h) and dense with attention_bias
    (default true), dense_h_to_4h / dense_4h_to_h of intermediate_size with biases, final_layer_norm, an
    untied embed_out by default; partial rotary, parallel residual by default."""
    hidden = _int(dec, "hidden_size", name, most=1_000_000)
    heads = _int(dec, "num_attention_heads", name, most=100_000)
    _head_dim(hidden, heads, "num_attention_heads", "hidden_size", name)
    parallel = _flag(dec, "use_parallel_residual", name, default=True)
    out = _common(hidden=hidden, heads=heads, kv_heads=heads, layers=_int(dec, "num_hidden_layers", name, most=1024),
                  vocab=_int(dec, "vocab_size", name, most=100_000_000),
                  width=_int(dec, "intermediate_size", name, most=10_000_000),
                  tie=_flag(dec, "tie_word_embeddings", name, default=False),
                  bias=_flag(dec, "attention_bias", name, default=True), norm_bias=True, norms=2, positions=0,
                  max_pos=_int(dec, "max_position_embeddings", name, most=1_000_000_000, default=None),
                  act=str(dec.get("hidden_act") or "gelu"), dropout=_dropout(dec, name, "hidden_dropout", 0.0),
                  unplanned="")
    if _dropout(dec, name, "attention_dropout", 0.0):
        raise ConfigError(f"{name}: config.json field 'attention_dropout' > 0 is not modelled (dropout on the attention"
                          " probabilities); allowed: 0")
    out["mlp_bias"] = True  # the MLP linears always carry a bias; attention_bias covers q/k/v and dense only
    out["parallel_residual"] = parallel
    out["partial_rotary_factor"] = _rotary_pct(dec, name)
    return out


def _rotary_pct(dec: dict[str, Any], name: str) -> float:
    """GPT-NeoX's rotated share of head_dim: ``rotary_pct`` (config.json), or ``rope_parameters`` /
    ``partial_rotary_factor`` as transformers 5 writes it; GPTNeoXConfig's default 0.25."""
    rope = dec.get("rope_parameters") if isinstance(dec.get("rope_parameters"), dict) else {}
    key, p = next(((k, v) for k, v in (("rotary_pct", dec.get("rotary_pct")),
                                       ("partial_rotary_factor", dec.get("partial_rotary_factor")),
                                       ("rope_parameters.partial_rotary_factor", rope.get("partial_rotary_factor")))
                   if v is not None), ("rotary_pct", 0.25))
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
        raise ConfigError(f"{name}: config.json field '{key}' must be a number in (0, 1], got {str(p)[:40]!r}")
    return float(p)


def _falcon(dec: dict[str, Any], name: str) -> dict[str, Any]:
    """Falcon (transformers FalconForCausalLM): word_embeddings, per layer query_key_value of
    (heads + 2 kv heads) x head_dim (new_decoder_architecture: num_kv_heads; multi_query: one; else heads),
    dense, dense_h_to_4h / dense_4h_to_h of ffn_hidden_size (default 4h), all with ``bias`` (default false);
    LayerNorms with bias: one per layer under parallel_attn (two with new_decoder_architecture or
    num_ln_in_parallel_attn 2), two otherwise; ln_f; tied head by default."""
    hidden = _int(dec, "hidden_size", name, most=1_000_000)
    heads = _int(dec, "num_attention_heads", name, most=100_000)
    _head_dim(hidden, heads, "num_attention_heads", "hidden_size", name)
    new_arch = _flag(dec, "new_decoder_architecture", name, default=False)
    if new_arch:
        kv = _int(dec, "num_kv_heads", name, most=heads, default=heads)
        if heads % kv:
            raise ConfigError(f"{name}: config.json field 'num_kv_heads' = {kv} does not divide"
                              f" num_attention_heads = {heads}")
    else:
        kv = 1 if _flag(dec, "multi_query", name, default=True) else heads
    parallel = _flag(dec, "parallel_attn", name, default=True)
    if not parallel:
        norms = 2
    else:
        ln = _int(dec, "num_ln_in_parallel_attn", name, most=2, default=2 if new_arch else 1)
        norms = ln
    return _common(hidden=hidden, heads=heads, kv_heads=kv, layers=_int(dec, "num_hidden_layers", name, most=1024),
                   vocab=_int(dec, "vocab_size", name, most=100_000_000),
                   width=_int(dec, "ffn_hidden_size", name, most=10_000_000, default=4 * hidden),
                   tie=_flag(dec, "tie_word_embeddings", name, default=True), bias=_flag(dec, "bias", name, default=False),
                   norm_bias=True, norms=norms, positions=0,
                   max_pos=_int(dec, "max_position_embeddings", name, most=1_000_000_000, default=None),
                   act=str(dec.get("activation") or "gelu"), dropout=_dropout(dec, name, "hidden_dropout", 0.0),
                   rotary=not _flag(dec, "alibi", name, default=False),
                   unplanned=_unplanned("Falcon", "fused query_key_value"
                                        + (", attention and MLP in parallel from the same input" if parallel else "")
                                        + (", ALiBi" if _flag(dec, "alibi", name, default=False) else ", rotary")
                                        + ", GELU dense_h_to_4h/dense_4h_to_h"))


_GPT_STYLE = {
    "mpt": _mpt,
    "gpt2": _gpt2,
    "gpt_bigcode": lambda dec, name: _gpt2(dec, name, family="gpt_bigcode"),
    "gpt_neox": _gpt_neox,
    "falcon": _falcon,
}
