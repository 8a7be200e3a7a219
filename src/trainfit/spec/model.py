"""ModelSpec: the architecture facts every memory term needs, and nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache

from trainfit.errors import ConfigError
from trainfit.spec.enums import LayerKind


DEEPSEEK_FAMILIES = frozenset({"deepseek_v3", "deepseek_v2"})
"""The model_types built as DeepSeek-V3's layout (MLA, fp32 router, fused routed experts, a shared MLP, dense first
layers): DeepSeek-V2 differs in its router only (``MoeSpec.softmax_router``) as far as memory and FLOPs go."""
DEEPSEEK_MOE_BLOCK = DEEPSEEK_FAMILIES | {"glm4_moe"}
"""The model_types whose MoE block is DeepSeek-V3's (fp32 sigmoid group-limited router, fused routed experts, an
ungated shared MLP): DeepSeek-V2/-V3 and GLM-4.5 (Llama-layout attention; ``catalog.hf_config._glm4_moe_moe``). Their
per-op and Megatron-Core MoE figures are ``memory.arch_activations``' DeepSeek ones."""


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
    """Layers that keep a dense MLP of ``intermediate_size`` (DeepSeek-V3: the first_k_dense_replace layers)."""
    shared_expert_gate: bool = True
    """Qwen2-MoE scales its shared expert by a sigmoid gate (hidden x 1); DeepSeek-V3's shared experts
    have none."""
    norm_topk_prob: bool = True
    """The top-k routing weights are renormalised to sum to 1 (``norm_topk_prob``; Qwen2-MoE's config default is
    False, transformers v5.24.0 models/qwen2_moe/configuration_qwen2_moe.py l.100, modeling_qwen2_moe.py l.325-326)."""
    router_bias: bool = False
    """The router linear has a bias (gpt-oss)."""
    routing_weights_fp32: bool = False
    """The top-k routing weights reach the experts' combine in fp32 (Mixtral: no cast back to the model dtype,
    transformers v5.24.0 models/mixtral/modeling_mixtral.py l.105-110), so the combine's mul saves fp32 weights."""
    router_fp32: bool = False
    """The router weight is an fp32 parameter whatever the model dtype (DeepSeek-V3 in transformers)."""
    expert_bias: bool = False
    """Every expert's gate_up and down projections carry a bias (gpt-oss)."""
    clamped_glu: bool = False
    """gpt-oss's clamped GLU ``(clamp(up)+1) * g * sigmoid(alpha g)`` instead of SiLU(gate) * up."""
    softmax_router: bool = False
    """DeepSeek-V2's router (transformers v5.24.0 models/deepseek_v2/modeling_deepseek_v2.py l.98-117
    ``DeepseekV2TopkRouter.forward``): a softmax over the fp32 logits and a top-k over it (``greedy``; under
    ``group_limited_greedy`` within the ``topk_group`` groups ranked by their max, the others masked), scaled, never
    renormalised. False: DeepSeek-V3's sigmoid, score-correction bias, groups ranked by their top-2 sum, gather and
    renormalisation (models/deepseek_v3/modeling_deepseek_v3.py l.133-158)."""
    n_group: int = 1
    """Expert groups of DeepSeek-V3's group-limited routing (n_group); 1 = plain top-k."""
    topk_group: int = 1
    """Groups a token may route into (topk_group)."""
    inference_expert_bits: float | None = None
    """Bits per routed-expert weight as released for inference (gpt-oss MXFP4: 4 bits + one 8-bit scale
    per 32 = 4.25); None: the model dtype. Training dequantizes to bf16."""

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
class MlaSpec:
    """Multi-head latent attention (DeepSeek-V2/V3): low-rank q and a compressed, shared KV latent.

    q = q_b(norm(q_a(x))) (or q_proj(x) when ``q_lora_rank`` is 0), per head qk_nope + qk_rope wide;
    [c_kv, k_rope] = kv_a_proj_with_mqa(x); k_nope, v = kv_b(norm(c_kv)) per head. A decode cache keeps
    only ``c_kv`` and ``k_rope``: ``kv_lora_rank + qk_rope_head_dim`` values per token and layer."""

    q_lora_rank: int
    """0: no query compression (q_proj of hidden x heads*qk_head_dim)."""
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def latent_dim(self) -> int:
        """Values per token and layer in an absorbed-MLA KV cache (vLLM, SGLang, FlashMLA)."""
        return self.kv_lora_rank + self.qk_rope_head_dim


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
    """transformers model_type of the decoder: llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, gemma2, qwen3_5_text,
    olmo2."""
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
    qk_norm_full_width: bool = False
    """With ``qk_norm``: q_norm over all heads at once (heads x head_dim weights, one ``rsqrt`` per token) and k_norm
    over kv_heads x head_dim, on the projections' outputs before the per-head view (OLMo 2: huggingface/transformers
    v5.24.0 src/transformers/models/olmo2/modeling_olmo2.py l.213-214, 228-229)."""
    attn_output_gate: bool = False
    """Full-attention q_proj also emits a sigmoid gate (Qwen3.5): q_proj is 2x wide."""
    norms_per_layer: int = 2
    """RMSNorms of width hidden per layer: 2 (pre-norm) or 4 (Gemma-2 sandwich norms)."""
    hidden_act: str = "silu"
    layer_types: tuple[LayerKind, ...] = ()
    """Per-layer attention kind; empty means all full attention."""
    sliding_window: int | None = None
    sliding_layers: tuple[int, ...] = ()
    """Full-attention layers that attend within ``sliding_window`` only (gpt-oss's even layers, Gemma-3's local ones,
    every layer of Phi-3 / Mistral / Mixtral with a window). Flash and eager training save the same q, k, v either way;
    SDPA past the window saves a mask and repeated k/v (``memory.attention.sdpa_window_masked``); a decode cache needs
    at most the window for them (not modelled: ``rollout.vllm``)."""
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
    mla: MlaSpec | None = None
    """Multi-head latent attention (DeepSeek-V3); head_dim is then qk_nope + qk_rope and num_kv_heads the
    heads (the expanded keys), v_head_dim lives here."""
    attention_sinks: bool = False
    """One learned sink logit per head (gpt-oss ``sinks``)."""
    mlp_gated: bool = True
    """Gated MLP (gate, up, down); False: OPT's fc1 -> act -> fc2."""
    norm_bias: bool = False
    """LayerNorm with a bias (OPT) instead of RMSNorm: every norm holds 2 x width."""
    final_norm: bool = True
    """A norm after the last layer (OPT-350m's post-LN decoder has none)."""
    learned_positions: int = 0
    """Rows of a learned absolute position embedding (OPT: max_position_embeddings + 2); 0: rotary."""
    unpadded_attention: bool = False
    """The fused attention runs on unpadded (varlen) rows: llm-foundry's MPT ``attn_impl: flash``
    (``flash_attn_fn``) gathers q, k and v out of the Wqkv output with flash-attn's ``bert_padding.index_first_axis``
    and scatters the output back with ``pad_input`` (``inventory.UNPAD_*``); MPT's config
    ``attn_config.attn_impl``."""
    embed_proj_dim: int | None = None
    """OPT ``word_embed_proj_dim`` when it differs from hidden: embeddings and the (tied) head are this
    wide, with project_in / project_out linears (no bias) around the decoder."""
    dropout: float = 0.0
    """Residual dropout probability in training (OPT's config ``dropout`` 0.1): each site saves a mask."""
    pre_norm: bool = True
    """Norm before each block (False: OPT-350m normalises after the residual add)."""
    post_block_norms: bool = False
    """The attention output and the MLP output are each normalised before their residual add, and nothing
    normalises a block's input (OLMo 2's ``post_attention_layernorm`` / ``post_feedforward_layernorm``:
    transformers v5.24.0 models/olmo2/modeling_olmo2.py l.285-286, 299-316); ``norms_per_layer`` stays 2."""
    norms_fp32: bool = False
    """Norm weights kept in fp32 in a bf16 model (gpt-oss ``_keep_in_fp32_modules``)."""
    mtp_layers: int = 0
    """Multi-token-prediction modules trained with the model (DeepSeek-V3 MTP: enorm, hnorm, eh_proj and
    one decoder layer each, sharing the embedding and head). 0 unless asked for (``with_mtp``)."""
    mtp_layers_declared: int = 0
    """num_nextn_predict_layers in config.json: what ``with_mtp`` switches on. transformers builds none."""
    unplanned: str = ""
    """Non-empty: a mechanism of this model that the activation/time models lack; parameter counts are
    exact, but ``make_plan`` refuses with this text rather than plan it wrongly (Llama-4's MoE)."""
    parallel_residual: bool = False
    """Attention and MLP both read the layer input and add into one residual sum (GPT-NeoX
    ``use_parallel_residual``, Falcon ``parallel_attn``); False: the MLP's norm reads the attention's sum."""
    partial_rotary_factor: float = 1.0
    """Share of head_dim that rotary rotates (GPT-NeoX ``rotary_pct``, default 0.25)."""
    rotary_concentration: float = 1.0
    """YaRN's concentration (attention) factor on cos and sin, as Megatron-Core computes it from the config's
    ``rope_scaling`` (``_yarn_get_concentration_factor``: ``0.1·ln(factor) + 1`` without ``mscale`` /
    ``mscale_all_dim``, their ratio of that form with both; NVIDIA/Megatron-LM
    megatron/core/models/common/embeddings/yarn_rotary_pos_embedding.py l.252-271 @core_v0.16.0
    3bec9aa97dda898d16ff5a89bac0ed2b6682b172): gpt-oss (factor 32, neither set) 1.347; DeepSeek-V3 (mscale =
    mscale_all_dim) 1; 1 without YaRN. Not 1: Megatron-Core runs its unfused RoPE (``inventory.MEGATRON_ROPE_*``)."""
    fused_gate_up: bool = False
    """gate and up are one ``gate_up_proj`` linear while q, k and v stay separate (GLM-4-0414: transformers v5.24.0
    models/glm4/modeling_glm4.py l.54-62, ``up_states.chunk(2)``); ``fused_mlp`` covers it and Phi-3's
    ``fused_projections``."""
    interleaved_rotary: bool = False
    """Rotary on interleaved pairs with the cos/sin re-laid out inside every layer (GLM-4-0414: ``cos[..., :d//2]
    .repeat_interleave(2)`` in ``apply_rotary_pos_emb``, transformers v5.24.0 models/glm4/modeling_glm4.py l.176-181):
    each layer's rotary muls save that layer's own (1, s, rot) cos and sin, and the shared ones are saved by none
    (``memory.activations``)."""
    nope_layers: tuple[int, ...] = ()
    """Layers that apply no rotary embedding (SmolLM3's NoPE layers, ``no_rope_layers`` 0: transformers v5.24.0
    models/smollm3/modeling_smollm3.py l.192, l.215-216 ``if self.use_rope``): their q and k go to attention as the
    projections' transposed views, so their saved set is a rotary layer's (the rotary muls save only the shared cos/sin)
    and their time has no rotary kernels (``compute.inventory``)."""
    scalar_multipliers: bool = False
    """Granite's four scalar multipliers (transformers v5.24.0 models/granite/modeling_granite.py): the embedding output
    times ``embedding_multiplier`` (l.388), each block output times ``residual_multiplier`` before its residual add
    (l.275, l.280), ``attention_multiplier`` as the softmax scale (l.124) and ``logits / logits_scaling`` (l.489), all
    run whatever their values. A multiply by a Python scalar saves nothing for backward, so memory is Llama's; each is
    one more elementwise kernel forward and one in backward (``compute.inventory.SCALAR_MULTIPLIER_*``)."""
    rotary_cat: bool = False
    """Rotary rotates the first ``int(head_dim * partial_rotary_factor)`` dims of q and k and ends in
    ``torch.cat([q_embed, q_pass])`` (GLM-4.5: transformers v5.24.0 models/glm4_moe/modeling_glm4_moe.py l.156-171):
    q and k are new head-major tensors, so the attention output is head-major and o_proj reads the contiguous copy
    ``attn_output.reshape(...).contiguous()`` makes (l.248); the rotary elementwise work covers the rotated dims only
    (``compute.inventory``, ``memory.activations``)."""
    layer_norm: bool = False
    """The norms are LayerNorm run as one ``torch.nn.functional.layer_norm`` kernel (OPT, GPT-NeoX, Falcon, GPT-2,
    MPT), not Hugging Face's RMSNorm written out in eager ops (``compute.inventory``)."""
    rotary: bool = True
    """Rotary position embedding on q and k; False for learned absolute positions or ALiBi (``compute.inventory``)."""
    fused_projections: bool = False
    """q, k and v are one ``qkv_proj`` linear and gate / up one ``gate_up_proj`` (Phi-3: transformers v5.24.0
    models/phi3/modeling_phi3.py l.54-61, l.205, l.219-223): the same parameters as the separate projections, one
    GEMM each, adapters named after the fused modules, and q, k, v / gate, up are slices of the fused outputs."""

    fused_qkv: bool = False
    """q, k and v are one biased linear while the MLP's stay separate (Qwen (1.0)'s ``c_attn``: ``nn.Linear(hidden,
    3 * projection_size)`` then ``mixed_x_layer.split(self.split_size, dim=2)``; its MLP is ``w1``, ``w2``,
    ``c_proj``; modeling_qwen.py shipped with the checkpoints, read in a copy of the Qwen-72B repository:
    mapengAdam/qianwen-72B modeling_qwen.py @3334bfe3d6d9d445cbe54185cd6aaef7e1e3c068 ``QWenAttention``,
    ``QWenMLP``): one ``qkv_proj`` linear group with its bias (``memory.params.linear_groups``), so one GEMM, one
    adapter (named ``c_attn``, ``memory.lora.QWEN1_MODULE_NAMES``) and v a slice of its output, in memory, time and
    weight sync alike."""
    fused_rotary: bool = False
    """The model's code runs rotary as flash-attn's ``apply_rotary_emb_func`` (one Triton kernel per tensor, between an
    fp32 upcast and the cast back) instead of eager ops when its flash attention is on: Qwen (1.0)'s
    ``apply_rotary_pos_emb`` (same file, ``_import_flash_attn`` and ``apply_rotary_pos_emb``;
    ``compute.inventory.FLASH_ROTARY_*``). The plan keeps it only for a card with ``attention: flash`` and bf16 / fp16
    compute (``plan.resolve.flash_rotary_runs``: ``use_flash_attn`` "auto" is off in fp32). Its
    ``RMSNorm`` would likewise call flash-attn's fused ``rms_norm``, but that needs the ``csrc/layer_norm`` extension,
    which Qwen's README lists as optional ("Below are optional. Installing them might be slow.", QwenLM/Qwen README.md
    @85cb093f20e1faa1d772d6abe8458661f3b09202): the eager norm is kept. Counted as one kernel per norm instead
    (2 x 6 fewer forward kernels per layer, bytes unchanged), that README's 256-token LoRA cells would plan
    1.8B +23 -> -4 %, 7B +37 -> +7 %, 14B +28 -> +4 % (tree of 2026-12-03; 1,024 tokens: 7B -1 % either way): the
    rows cannot tell whether it was installed."""

    def __post_init__(self) -> None:
        if self.layer_types and len(self.layer_types) != self.num_layers:
            raise ValueError(
                f"layer_types has {len(self.layer_types)} entries, num_hidden_layers is {self.num_layers}"
            )
        _check_sizes(self)

    def layer_kind(self, layer_idx: int) -> LayerKind:
        return self.layer_types[layer_idx] if self.layer_types else LayerKind.FULL_ATTENTION

    @property
    def fused_mlp(self) -> bool:
        """gate and up are one ``gate_up_proj`` (Phi-3's ``fused_projections``, GLM-4's ``fused_gate_up``)."""
        return self.fused_projections or self.fused_gate_up

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
    def attn_out_dim(self) -> int:
        """Width of the attention output (o_proj's input): heads x v_head_dim under MLA, else q_dim."""
        return self.num_attention_heads * self.mla.v_head_dim if self.mla is not None else self.q_dim

    @property
    def embed_dim(self) -> int:
        """Width of the token embedding and the LM head's input (OPT's word_embed_proj_dim)."""
        return self.embed_proj_dim or self.hidden_size

    @property
    def num_moe_layers(self) -> int:
        return 0 if self.moe is None else sum(1 for i in range(self.num_layers) if self.moe.is_moe_layer(i))

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
    if spec.mla is not None:
        ml = spec.mla
        _at_least(where, 0, q_lora_rank=ml.q_lora_rank, qk_nope_head_dim=ml.qk_nope_head_dim)
        _at_least(where, 1, kv_lora_rank=ml.kv_lora_rank, qk_rope_head_dim=ml.qk_rope_head_dim,
                  v_head_dim=ml.v_head_dim)
    _at_least(where, 0, learned_positions=spec.learned_positions, mtp_layers=spec.mtp_layers)
    if spec.embed_proj_dim is not None:
        _at_least(where, 1, word_embed_proj_dim=spec.embed_proj_dim)
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


def with_mtp(spec: ModelSpec, layers: int | None = None) -> ModelSpec:
    """The spec with its multi-token-prediction modules trained too (DeepSeek-V3: num_nextn_predict_layers).

    Raises ConfigError when the model declares none and none are asked for."""

    n = spec.mtp_layers_declared if layers is None else layers
    if n < 1:
        raise ConfigError(f"{spec.name}: no multi-token-prediction module to enable (num_nextn_predict_layers is"
                          f" {spec.mtp_layers_declared}); allowed: a DeepSeek-V3-style model")
    return replace(spec, mtp_layers=n)


@lru_cache(maxsize=1024)
def _count_full(layer_types: tuple[LayerKind, ...], num_layers: int) -> int:
    if not layer_types:
        return num_layers
    return sum(1 for t in layer_types if t is LayerKind.FULL_ATTENTION)
