"""Saved-for-backward bytes of the decoder layers that do not follow the Llama layout: DeepSeek-V3
(multi-head latent attention, sigmoid group-limited routing with fp32 scores, shared experts), gpt-oss
(fp32 norm weights, eager attention with sinks, biased router and experts with a clamped GLU) and OPT
(LayerNorm with bias, learned positions, ReLU fc1/fc2, dropout after attention and MLP).

Derived op by op like ``trainfit.memory.activations`` (same notation and rules) and read off
``saved_tensors_hooks`` on tiny real models of each family (transformers 5.24, torch 2.13, bf16,
``labels=input_ids``; ``tests/unit/test_arch_activations.py`` holds the measured byte counts). Per token
and layer, full fine-tuning, the totals are:

* OPT (pre-LN, SDPA): two LayerNorms (input 2h, mean and rstd 4 + 4 fp32 on CUDA), the shared q/k/v
  input 2h, SDPA's q, k, v, output and logsumexp (4qd + 4kvd + 4H, out_proj's input a view of the
  output), fc1's input 2h, ReLU's output 2I (fc2's input, the same tensor) and one dropout mask per
  ``dropout > 0`` site (after out_proj and after fc2): a bool mask, 1 B per element on CUDA
  (``native_dropout``); torch's CPU fallback keeps a bf16 noise tensor instead (2 B), which is what a
  CPU trace of the same step records.
* DeepSeek-V3 (SDPA): the input RMSNorm (6h + 4), the shared q_a / kv_a input 2h, the q_a and kv_a
  RMSNorms over q_lora_rank and kv_lora_rank (6r + 4 each) and their outputs as q_b / kv_b inputs (2r),
  SDPA's q and expanded k (2·H·qk each), the kv_b output that holds v (2·H·(nope + v)), the output
  (2·H·v), the logsumexp (4H) and o_proj's input, a contiguous copy of the output (2·H·v: q is a
  contiguous ``cat`` of its nope and rope parts, so the kernel's output is head-major). MoE layers: the router's fp32 input copy (4h, the weight is an fp32
  parameter), the fp32 sigmoid scores (4E), the group top-2 and group top-k indices, the bool group
  mask (E), the top-k indices and the fp32 normalisation (4 + 4k), the routed experts exactly as
  Qwen3-MoE's grouped_mm path with fp32 routing weights, and the shared experts as a dense SwiGLU.
* gpt-oss (eager: transformers has no SDPA path with sinks): fp32-weight RMSNorms (8h + 4: the fp32
  copy, rsqrt and the fp32 normalised input the fp32 weight's mul saves), the q/k/v input 2h; eager
  attention with the sink column keeps q, repeat_kv(k), repeat_kv(v) and o_proj's contiguous input
  (8qd), the bf16 softmax over s + 1 columns (2·H·(s + 1)) and the int64 row-max indices (8H); the
  biased router's input 2h, top-k indices and softmax output, three int64 permutations (the bias
  gather adds one to Qwen3's two), and a clamped GLU that saves the whole gate_up output (4w), the
  clamped gate, its sigmoid, ``up + 1``, the GLU and the product (5 x 2w) per routed token. Flash
  attention with sinks (vLLM's FA3 kernel) saves SDPA's set instead. Under checkpointing the layers keep
  eager's two materialised bf16 masks (sliding and full, b x s x s each) as inputs
  (``checkpoint_input_bytes``).

LoRA and frozen-layer cases follow the same requires-grad rules as the Llama layout; the adapters'
own tensors come from ``activations._linear``.
"""

from __future__ import annotations

from dataclasses import replace

from trainfit.memory import activations as _act
from trainfit.memory.activations import DROPOUT_MASK_BYTES, FP32, INT64
from trainfit.memory.attention import runs_eager
from trainfit.spec.model import DEEPSEEK_FAMILIES, ModelSpec

FAMILIES = _act.ARCH_FAMILIES
"""The layouts this module models (one set, ``memory.activations.ARCH_FAMILIES``)."""

FULL_ONLY_FAMILIES = frozenset({"gpt2", "gpt_neox", "mpt"})
"""Families whose layer model covers full training only: ``memory.params`` names their linears q/k/v/o_proj
and fc1/fc2, not the fused Wqkv / up_proj / down_proj that a PEFT target would name, so a LoRA plan is refused."""

SDPA_ONLY_FAMILIES = frozenset({"gpt2"})
"""Families whose layer model covers fused attention kernels only (SDPA / flash): a plan with eager is refused."""

LAYERNORM_STATS_BYTES = 8
"""Mean and rstd per row, fp32 on CUDA (``native_layer_norm`` keeps the accumulation type)."""


def rope_dim(spec: ModelSpec) -> int:
    """Width of the rotary cos/sin the model saves once: DeepSeek rotates qk_rope_head_dim, gpt-oss
    builds half-width tables (it rotates the two halves with one frequency each); OPT has none."""
    if spec.family in DEEPSEEK_FAMILIES and spec.mla is not None:
        return spec.mla.qk_rope_head_dim
    if spec.family == "gpt_oss":
        return spec.head_dim // 2
    if spec.family == "gpt_neox":  # GPTNeoXRotaryEmbedding: int(head_dim * partial_rotary_factor)
        return int(spec.head_dim * spec.partial_rotary_factor)
    return 0


def _layernorm(ctx, width: int, x_rg: bool, residual: bool = True) -> tuple[int, bool]:
    """torch LayerNorm with affine weight and bias: saves its input and the row statistics whenever the
    input or the weight needs a gradient."""
    T = (ctx.T_seq or ctx.T) if residual else ctx.T
    rg = x_rg or ctx.full
    return (T * (ctx.a * width + LAYERNORM_STATS_BYTES) if rg else 0), rg


def _fp32_weight_rmsnorm(ctx, width: int, x_rg: bool) -> tuple[int, bool]:
    """gpt-oss RMSNorm with an fp32 weight: ``(w * x_fp32_normalised).to(bf16)``, the residual stream's norm with
    ``activations._norm``'s ``weight_on_fp32`` rule (fp32 copy and rsqrt; a trained weight's mul saves the fp32
    normalised input)."""
    return _act._norm(ctx, width=width, rows=1, zero_centred=False, x_rg=x_rg, const_width=width, residual=True,
                      weight_on_fp32=True)


def _dropout(ctx, spec: ModelSpec, width: int, x_rg: bool) -> int:
    return ctx.T * DROPOUT_MASK_BYTES * width if (spec.dropout > 0 and x_rg) else 0


def _sdpa(ctx, *, q: int, k: int, v_storage: int, out: int, heads: int, rg: bool) -> int:
    return ctx.T * (ctx.a * (q + k + v_storage + out) + FP32 * heads) if rg else 0


def _eager_attention(ctx, *, q: int, k: int, v: int, heads: int) -> int:
    """Eager attention's saved tensors: q and k for ``q @ k^T``, the fp32 softmax output, its 16-bit cast and v for
    ``p @ v`` (widths per token; the output projection's input is counted by the caller)."""
    return ctx.T * (ctx.a * (q + k + v) + FP32 * heads * ctx.s + ctx.a * heads * ctx.s)


# --------------------------------------------------------------------------------------------- OPT


def _opt_layer(ctx, spec: ModelSpec, x_rg: bool) -> tuple[int, bool]:
    h, qd, kvd, H, w = spec.hidden_size, spec.q_dim, spec.kv_dim, spec.num_attention_heads, spec.intermediate_size
    total = 0
    n_rg = x_rg
    if spec.pre_norm:
        b, n_rg = _layernorm(ctx, h, x_rg)
        total += b
    b, q_rg = _act._linear(ctx, "q_proj", h, n_rg)
    total += b
    b, k_rg = _act._linear(ctx, "k_proj", h, n_rg, input_saved=True)
    total += b
    b, v_rg = _act._linear(ctx, "v_proj", h, n_rg, input_saved=True)
    total += b
    a_rg = q_rg or k_rg or v_rg
    if runs_eager(spec.family, ctx.attention):
        if a_rg:
            total += _eager_attention(ctx, q=qd, k=qd, v=qd, heads=H)
            total += _act.linear_input(ctx, qd) if ctx.full else 0  # out_proj's contiguous input (TE fp8: its copy)
    else:
        total += _sdpa(ctx, q=qd, k=kvd, v_storage=kvd, out=qd, heads=H, rg=a_rg)
        if ctx.full and ctx.linear_input_bytes:  # TE fp8: out_proj's fp8 copy beside the saved attention output
            total += _act.linear_input(ctx, qd)
    r = ctx.targets.get("out_proj")
    if r is not None:
        total += _act._adapter_saved(ctx, "out_proj", qd, r, input_saved=True, x_rg=a_rg)
    o_rg = a_rg or ctx.full or r is not None
    total += _dropout(ctx, spec, h, o_rg)
    res_rg = x_rg or o_rg
    if not spec.pre_norm:  # OPT-350m: post-LN on the residual sum
        b, res_rg = _layernorm(ctx, h, res_rg)
        total += b
    m_in = res_rg
    if spec.pre_norm:
        b, m_in = _layernorm(ctx, h, res_rg)
        total += b
    b, f1_rg = _act._linear(ctx, "fc1", h, m_in)
    total += b
    if f1_rg:
        total += ctx.T * ctx.a * w  # ReLU saves its output (fc2's input, the same tensor)
        if ctx.full and ctx.linear_input_bytes:  # TE fp8: fc2 saves its fp8 copy of it too
            total += _act.linear_input(ctx, w)
    r2 = ctx.targets.get("fc2")
    if ctx.full or r2 is not None:
        total += _act._adapter_saved(ctx, "fc2", w, r2, input_saved=True, x_rg=f1_rg) if r2 is not None else 0
    f2_rg = f1_rg or ctx.full or r2 is not None
    total += _dropout(ctx, spec, h, f2_rg)
    out_rg = res_rg or f2_rg
    if not spec.pre_norm:
        b, out_rg = _layernorm(ctx, h, out_rg)
        total += b
    return total, out_rg


# --------------------------------------------------------------------------------------------- MPT


def _gelu(ctx, width: int, x_rg: bool, saved: int = 1) -> int:
    """An elementwise GELU (exact, tanh or GPT-2's ``gelu_new``, whose torch ops save the input and a chain of
    intermediates on CPU; the CUDA ``gelu`` kernel of either approximation saves only its input): saves its
    input (``saved`` tensors of its width: ``GELU_NEW_SAVED`` for the torch-ops ``gelu_new``) when that needs a
    gradient. Its output, the next linear's input, is counted there."""
    return ctx.T * ctx.a * width * saved if x_rg else 0


def _gelu_mlp(ctx, spec: ModelSpec, up: str, down: str, x_rg: bool, saved: int = 1) -> tuple[int, bool]:
    """A non-gated MLP after its norm: ``up`` -> GELU (``_gelu``) -> ``down`` -> dropout; (bytes, output needs
    a gradient)."""
    h, w = spec.hidden_size, spec.intermediate_size
    total, u_rg = _act._linear(ctx, up, h, x_rg)
    total += _gelu(ctx, w, u_rg, saved)
    b, d_rg = _act._linear(ctx, down, w, u_rg)
    return total + b + _dropout(ctx, spec, h, d_rg), d_rg


def _mpt_layer(ctx, spec: ModelSpec, x_rg: bool) -> tuple[int, bool]:
    """An MPT block (pre-LN, fused Wqkv, out_proj, up_proj -> GELU -> down_proj).

    Attention, by the card's kernel:

    * flash: llm-foundry's ``flash_attn_fn`` (llmfoundry/models/layers/attention.py @c90b9b31, the
      ``attn_impl: flash`` of its pretraining yamls): q, k and v are gathered out of the Wqkv output by
      ``bert_padding.index_first_axis`` (new tensors; the gather saves only the token indices, one int64 tensor
      of q, k and v, three int64 tensors shared by every layer, counted in ``embedding_bytes``), ``flash_attn_varlen_func`` saves q, k, v, its
      output and the fp32 logsumexp (4H), and ``pad_input`` scatters the output into a new (b, s, h) tensor that
      out_proj saves.
    * eager (transformers' ``MptAttention``, which has no SDPA path, and llm-foundry's ``torch`` impl):
      ``q @ k^T`` saves q and k, the scaled ALiBi-biased scores are masked by one bool causal mask shared by all
      layers (``embedding_bytes``), the fp32 softmax output (4Hs), its bf16 cast for ``p @ v`` (2Hs) and v,
      and out_proj's contiguous input.

    Residual dropout (llm-foundry's ``resid_pdrop``, ``ModelSpec.dropout``) after out_proj and after
    down_proj keeps a mask each. LayerNorm (with or without bias) saves its input and the fp32 row stats."""
    h, qd, kvd, H = spec.hidden_size, spec.q_dim, spec.kv_dim, spec.num_attention_heads
    total, n_rg = _layernorm(ctx, h, x_rg)
    b, a_rg = _act._linear(ctx, "Wqkv", h, n_rg)
    total += b
    if a_rg and runs_eager(spec.family, ctx.attention):
        total += _eager_attention(ctx, q=qd, k=kvd, v=kvd, heads=H)
    elif a_rg:
        total += _sdpa(ctx, q=qd, k=kvd, v_storage=kvd, out=qd, heads=H, rg=True)
    b, o_rg = _act._linear(ctx, "out_proj", qd, a_rg)  # eager: the contiguous copy; flash: pad_input's output
    total += b
    total += _dropout(ctx, spec, h, o_rg)
    attention_end = total
    res_rg = x_rg or o_rg
    b, m_in = _layernorm(ctx, h, res_rg)
    total += b
    b, d_rg = _gelu_mlp(ctx, spec, "up_proj", "down_proj", m_in)
    total += b
    ctx.parts["after_attention"] = total - attention_end  # freed by the MLP's backward, before attention's
    return total, res_rg or d_rg


# ------------------------------------------------------------------------------------------- GPT-2


GELU_NEW_SAVED = 4
"""Tensors of the intermediate width that transformers' ``NewGELUActivation`` (``gelu_new``, GPT-2's default;
``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`` in torch ops) saves: ``pow``'s input x, the
``0.5 * x`` and ``1 + tanh`` factors of the product, and ``tanh``'s output. The expression:
``0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))``,
huggingface/transformers ``src/transformers/activations.py`` ``NewGELUActivation.forward``
@00e12e7c54598e50e7bef1540db3408f81916de1:
https://github.com/huggingface/transformers/blob/00e12e7c54598e50e7bef1540db3408f81916de1/src/transformers/activations.py"""


def _gpt2_layer(ctx, spec: ModelSpec, x_rg: bool) -> tuple[int, bool]:
    """A GPT-2 block (transformers 5.24 ``GPT2Block``, SDPA): ln_1, c_attn (Conv1D: ``addmm`` saving its input),
    q / k / v as views of c_attn's (b, s, 3h) output that SDPA saves (one storage), its output and fp32
    logsumexp, c_proj on that output (no copy: see below), resid_dropout, ln_2 on the residual sum, c_fc,
    the activation (``gelu`` / ``gelu_pytorch_tanh``: one fused kernel saving its input; ``gelu_new``:
    ``GELU_NEW_SAVED`` tensors), c_proj on the activation's output, resid_dropout. Attention dropout is not
    modelled (``hf_config`` leaves such configs unplanned)."""
    h, qd, kvd, H = spec.hidden_size, spec.q_dim, spec.kv_dim, spec.num_attention_heads
    total, n_rg = _layernorm(ctx, h, x_rg)
    b, a_rg = _act._linear(ctx, "c_attn", h, n_rg)
    total += b
    if a_rg:
        total += ctx.T * (ctx.a * (qd + 2 * kvd) + ctx.a * qd + FP32 * H)
    # q is a (b, s, H, d)-strided view, so the kernel's output is (b, s, H, d) in memory (its layout follows q's)
    # and c_proj's input, ``transpose(1, 2).contiguous()`` of it, is that same saved output
    b, o_rg = _act._linear(ctx, "c_proj", qd, a_rg, input_saved=True)
    total += b
    total += _dropout(ctx, spec, h, o_rg)
    attention_end = total
    res_rg = x_rg or o_rg
    b, m_in = _layernorm(ctx, h, res_rg)
    total += b
    b, d_rg = _gelu_mlp(ctx, spec, "c_fc", "mlp.c_proj", m_in,
                        saved=GELU_NEW_SAVED if spec.hidden_act == "gelu_new" else 1)
    total += b
    ctx.parts["after_attention"] = total - attention_end
    return total, res_rg or d_rg


# ---------------------------------------------------------------------------------------- GPT-NeoX


def _gpt_neox_layer(ctx, spec: ModelSpec, x_rg: bool) -> tuple[int, bool]:
    """A GPT-NeoX / Pythia layer (transformers 5.24 ``GPTNeoXLayer``): input_layernorm, fused query_key_value,
    partial rotary on q and k (``cat`` of the rotated and passed parts: new q and k; the muls save only the
    shared cos/sin, counted once in the embedding), attention, ``dense`` on the output's contiguous
    (b, s, h) copy, hidden_dropout after it and after the MLP, post_attention_layernorm, dense_h_to_4h -> GELU
    (saves its input) -> dense_4h_to_h.

    ``ModelSpec.parallel_residual`` (``use_parallel_residual``, its default): both LayerNorms read the layer
    input, one tensor, saved once (the second norm adds only its row stats); otherwise the second reads the
    attention's residual sum, a new tensor.

    SDPA / flash: the rotated q and k, v, the output and the fp32 logsumexp; v is a strided view of the
    query_key_value output (``view -> transpose -> chunk``), so its storage is that whole (b, s, 3h) output, as
    the fake-tensor trace and a bare ``scaled_dot_product_attention`` on such a view save it (a real CPU run of
    the transformers model was seen to save a (b, H, s, d) v instead: 4h bytes a token less). Eager (``eager_attention_forward``): q and k for ``q @ k^T``, the fp32 softmax output, its
    bf16 cast and v for ``p @ v``; the additive bf16 mask is no saved tensor."""
    h, qd, kvd, H = spec.hidden_size, spec.q_dim, spec.kv_dim, spec.num_attention_heads
    total, n_rg = _layernorm(ctx, h, x_rg)
    b, a_rg = _act._linear(ctx, "query_key_value", h, n_rg)
    total += b
    if a_rg and runs_eager(spec.family, ctx.attention):
        total += _eager_attention(ctx, q=qd, k=kvd, v=kvd, heads=H)
    elif a_rg:  # v is a view of the fused output: SDPA's saved v keeps all of query_key_value's output alive
        total += _sdpa(ctx, q=qd, k=kvd, v_storage=qd + 2 * kvd, out=qd, heads=H, rg=True)
    b, o_rg = _act._linear(ctx, "dense", qd, a_rg)  # the output's contiguous (b, s, h) copy
    total += b
    total += _dropout(ctx, spec, h, o_rg)
    attention_end = total
    if spec.parallel_residual:
        m_in = x_rg or ctx.full
        total += ctx.T * LAYERNORM_STATS_BYTES if m_in else 0  # its input is input_layernorm's, saved there
        res_rg = x_rg or o_rg
    else:
        res_rg = x_rg or o_rg
        b, m_in = _layernorm(ctx, h, res_rg)
        total += b
    b, d_rg = _gelu_mlp(ctx, spec, "dense_h_to_4h", "dense_4h_to_h", m_in)
    total += b
    ctx.parts["after_attention"] = total - attention_end  # the MLP branch's backward runs first (created last)
    return total, res_rg or d_rg


# ------------------------------------------------------------------------------------- DeepSeek-V3


def _mla(ctx, spec: ModelSpec, x_rg: bool) -> tuple[int, bool]:
    ml = spec.mla
    assert ml is not None
    h, H = spec.hidden_size, spec.num_attention_heads
    total = 0
    if ml.q_lora_rank:
        b, qa_rg = _act._linear(ctx, "q_a_proj", h, x_rg)
        total += b
        b, qn_rg = _act._norm(ctx, width=ml.q_lora_rank, rows=1, zero_centred=False, x_rg=qa_rg, const_width=0)
        total += b
        b, q_rg = _act._linear(ctx, "q_b_proj", ml.q_lora_rank, qn_rg)
        total += b
        kv_in_saved = True
    else:
        b, q_rg = _act._linear(ctx, "q_proj", h, x_rg)
        total += b
        kv_in_saved = True
    b, kva_rg = _act._linear(ctx, "kv_a_proj_with_mqa", h, x_rg, input_saved=kv_in_saved)
    total += b
    b, kvn_rg = _act._norm(ctx, width=ml.kv_lora_rank, rows=1, zero_centred=False, x_rg=kva_rg, const_width=0)
    total += b
    b, kv_rg = _act._linear(ctx, "kv_b_proj", ml.kv_lora_rank, kvn_rg)
    total += b
    a_rg = q_rg or kv_rg or kva_rg
    qk, v = H * ml.qk_head_dim, H * ml.v_head_dim
    if runs_eager(spec.family, ctx.attention):
        if a_rg:  # q, k for q@k^T, fp32 softmax, bf16 probabilities, v for p@v, o_proj's contiguous input
            total += _eager_attention(ctx, q=qk, k=qk, v=H * (ml.qk_nope_head_dim + ml.v_head_dim), heads=H)
            total += ctx.T * ctx.a * v if ctx.full else 0
    else:
        total += _sdpa(ctx, q=qk, k=qk, v_storage=H * (ml.qk_nope_head_dim + ml.v_head_dim), out=v, heads=H, rg=a_rg)
        # q is a contiguous cat of its nope and rope parts, so the output is (b, H, s, v) in memory and
        # o_proj's (b, s, H*v) input a copy (as Qwen3.5's); full fine-tuning saves it
        total += ctx.T * ctx.a * v if ctx.full else 0
    r = ctx.targets.get("o_proj")
    if r is not None:
        total += _act._adapter_saved(ctx, "o_proj", v, r, input_saved=ctx.full)
    return total, a_rg or ctx.full or r is not None


def _deepseek_moe(ctx, spec: ModelSpec, x_rg: bool, *, rows: int | None = None, fused_glu: bool = False,
                  probs_in_glu: bool = False, shared: bool = True, act_recomputed: bool = False) -> tuple[int, bool]:
    """The routed block (router, experts, combine) and, with ``shared``, the shared experts. ``rows``: the expert rows
    this rank computes when they are not its own T·k; ``fused_glu``: the SwiGLU saves only its input;
    ``probs_in_glu``: the routing weights multiply inside the SwiGLU, so the combine keeps no expert output
    (Megatron-Core, ``megatron_deepseek_moe_bytes``); ``act_recomputed``: the routed experts' fc2 input is freed and
    recomputed (Megatron-Core ``moe_act``)."""
    moe = spec.moe
    assert moe is not None
    T, h = ctx.T, spec.hidden_size
    E, k = moe.num_experts, moe.experts_per_token
    total = 0
    router_t = "gate" in ctx.targets
    w_rg = ctx.full or router_t
    if w_rg:
        total += T * FP32 * h  # F.linear(x.float(), W_fp32) saves the fp32 copy of x
    if router_t:
        total += FP32 * E * h  # PEFT's merged fp32 router weight (W + BA), saved by the F.linear
    logits_rg = x_rg or w_rg
    if logits_rg and moe.softmax_router:  # DeepSeek-V2 (MoeSpec.softmax_router)
        total += T * FP32 * E  # softmax output
        if moe.n_group > 1:  # group_limited_greedy
            total += T * INT64 * moe.n_group  # max per group (indices)
            total += T * INT64 * moe.topk_group  # group top-k indices
            total += T * E  # bool mask of masked_fill
        total += T * INT64 * k  # top-k indices; the scaling by routed_scaling_factor saves nothing
    elif logits_rg:
        total += T * FP32 * E  # sigmoid output
        total += T * INT64 * moe.n_group * 2  # top-2 per group (indices)
        total += T * INT64 * moe.topk_group  # group top-k indices
        total += T * E  # bool group mask of masked_fill
        total += T * INT64 * k  # top-k indices
        total += T * (FP32 + FP32 * k)  # top-k renormalisation: sum and values
    # the experts and the combine as Qwen3-MoE's, the fp32 routing weights saved by the mul
    b, m_rg = _act._routed_experts(ctx, spec, x_rg, logits_rg, rows=rows, fused_glu=fused_glu,
                                   probs_in_glu=probs_in_glu, routing_weight_bytes=FP32, fp8_inputs=False,
                                   act_recomputed=act_recomputed)
    total += b
    if shared and moe.shared_expert_intermediate_size:
        b, s_rg = _act._dense_mlp(_without_expert_names(ctx), spec, moe.shared_expert_intermediate_size, x_rg)
        total += b
        m_rg = m_rg or s_rg
    return total, m_rg


MEGATRON_DEEPSEEK_MOE_SOURCES = (
    "NVIDIA/Megatron-LM @7094270c6fa1dbc6b2e99072171e3a559ca36d0f (core_r0.12.0, the MEGATRON_COMMIT of"
    " NVIDIA/dgxc-benchmarking deepseek_v3 @c5c765f2684f983e787eaada4073b63c8287caf6): megatron/core/transformer/moe/"
    "token_dispatcher.py l.36-37 and l.150 (the alltoall dispatcher takes the [S/TP, B, H] sequence shard,"
    " num_local_tokens = S/TP*B), l.640-647 (the combine's unpermute gets no probabilities), experts.py"
    " TEGroupedMLP.forward l.764-773 (weighted_bias_swiglu_impl: the routing weights multiply inside the fused SwiGLU,"
    " which saves its input and the probabilities); shared experts: moe/shared_experts.py SharedExpertMLP(MLP), the"
    " column-parallel fc1 saving its sequence shard (tensor_parallel/layers.py"
    " LinearWithGradAccumulationAndAsyncCommunication) and the fused SwiGLU (NVIDIA/NeMo"
    " nemo/collections/llm/gpt/model/deepseek.py DeepSeekConfig bias_activation_fusion True, l.115"
    " @7a8f1cc7bc40a84447c0681a9e4e956a135ae8a2)")
"""Where ``megatron_deepseek_moe_bytes`` reads Megatron-Core's DeepSeek-V3 MoE block."""


def _full_ctx(tokens: int, compute_dtype_bytes: int):
    return _act.full_ctx(tokens, compute_dtype_bytes)


MEGATRON_MLA_SOURCES = (
    "NVIDIA/Megatron-LM @7094270c6fa1dbc6b2e99072171e3a559ca36d0f: megatron/core/models/gpt/gpt_layer_specs.py l.108-133"
    " (MLA: linear_q_down_proj / linear_kv_down_proj TEColumnParallelLinear, the up projections"
    " TELayerNormColumnParallelLinear with the q / kv norms fused in, TEDotProductAttention, TERowParallelLinear);"
    " megatron/core/transformer/multi_latent_attention.py l.384-411 (the compressed q and kv scattered back to the"
    " sequence shard before their norms), l.414-491 (query and key built by torch.cat, value.contiguous(): the"
    " up-projection outputs themselves are not saved), l.194-222 (linear_proj takes the attention output as it is),"
    " l.77-80, l.215-217 and l.502-508 (recompute_modules 'mla_up_proj': CheckpointWithoutOutput over the up"
    " projections and RoPE, its query / key / value storage freed once the attention forward is done and"
    " recomputed in backward, keeping only the checkpoint's inputs)")
"""Where ``megatron_mla_bytes`` reads Megatron-Core's multi-latent attention."""


def mla_bytes(spec: ModelSpec, *, tokens: int, compute_dtype_bytes: int = 2) -> int:
    """Saved bytes of one full-training DeepSeek-V3 attention block (input norm excluded, its input needing a
    gradient) over ``tokens`` tokens: the per-op figure ``activation_bytes`` counts (``_mla``)."""
    return _mla(_full_ctx(tokens, compute_dtype_bytes), spec, True)[0]


def megatron_mla_bytes(spec: ModelSpec, *, tokens: int, sequence_shards: int = 1, compute_dtype_bytes: int = 2,
                       recompute_up_proj: bool = False) -> int:
    """Saved bytes of one Megatron-Core multi-latent attention block (full training, input norm excluded) on one
    rank of a tensor-parallel shard spec (``MEGATRON_MLA_SOURCES``), ``tokens`` = b·s, ``t = tokens /
    sequence_shards``:

    * the down projections' shared input, the ``t``-token shard (gathered again in backward);
    * the q and kv norms and the up projections' inputs on ``t`` tokens (the per-op norm figure);
    * the fused attention's query, key (``qk_head_dim`` wide), a contiguous value (``v_head_dim``: not the whole
      kv up-projection output), its output, which is also linear_proj's input (no copy), and the fp32 softmax
      statistics, on all ``tokens``.

    ``recompute_up_proj`` (``--recompute-modules mla_up_proj``): query, key and value are freed after the attention
    forward; the block keeps the checkpoint's inputs (the compressed q and kv on ``t`` tokens, the rotary key part on
    all ``tokens``), the attention output and its statistics."""
    ml = spec.mla
    assert ml is not None
    a, h, H = compute_dtype_bytes, spec.hidden_size, spec.num_attention_heads
    t = tokens // sequence_shards
    ranks = tuple(r for r in (ml.q_lora_rank, ml.kv_lora_rank) if r)
    total = t * a * h
    out = tokens * (a * H * ml.v_head_dim + FP32 * H)
    if recompute_up_proj:
        return total + t * a * sum(ranks) + tokens * a * ml.qk_rope_head_dim + out
    ct = _full_ctx(t, a)
    for r in ranks:
        total += _act._norm(ct, width=r, rows=1, zero_centred=False, x_rg=True, const_width=0)[0] + t * a * r
    return total + tokens * a * 2 * H * ml.qk_head_dim + tokens * a * H * ml.v_head_dim + out


def deepseek_moe_block_bytes(spec: ModelSpec, *, tokens: int, compute_dtype_bytes: int = 2) -> int:
    """Saved bytes of one full-training DeepSeek-V3 MoE block (router, routed and shared experts, its input needing
    a gradient) over ``tokens`` tokens: the per-op figure ``activation_bytes`` counts for each MoE layer."""
    return _deepseek_moe(_full_ctx(tokens, compute_dtype_bytes), spec, True)[0]


def megatron_deepseek_moe_bytes(spec: ModelSpec, *, tokens: int, sequence_shards: int = 1,
                                expert_tensor_parallel: int = 1, compute_dtype_bytes: int = 2,
                                probs_in_experts: bool = True, recompute_moe_act: bool = False,
                                shared: bool = True) -> int:
    """Saved bytes of one Megatron-Core DeepSeek-V3 MoE block (full training, alltoall dispatcher, TE grouped experts)
    on one rank of a tensor-parallel shard spec (``MEGATRON_DEEPSEEK_MOE_SOURCES``), ``tokens`` = b·s. A DeepSeek-V2
    card (``DEEPSEEK_FAMILIES``) takes the same block; its softmax router is counted as transformers runs it, not
    compared op by op with Megatron-Core's router:

    * router, top-k and combine on the sequence shard, ``t = tokens / sequence_shards`` tokens;
    * the experts on ``t · expert_tensor_parallel · k`` rows (routing-balanced: the token-drop capacity 1.0 pads each
      expert to exactly that), the fused weighted SwiGLU keeping its input (no ``act(gate)``) and the combine no
      expert output;
    * the shared experts as a Megatron MLP on all ``tokens`` (after the sequence-parallel all-gather) with the fused
      SwiGLU, their fc1 saving the ``t``-token shard of its input.

    The routing tensors keep the per-op figure of ``_deepseek_moe`` on ``t`` tokens. ``probs_in_experts`` false:
    Megatron-Core before 0.12.1, whose combine multiplies the probabilities and keeps the expert output
    (``memory.activations.MEGATRON_PROBS_IN_EXPERTS_SOURCES``). ``recompute_moe_act``: the routed experts' fc2 input
    freed (``--recompute-modules moe_act``, as ``memory.activations.megatron_moe_bytes``); ``shared`` false: the
    routed block only (``plan.ranks.megatron_recompute_freed`` takes the shared experts' part as the difference)."""
    moe = spec.moe
    assert moe is not None
    a, h = compute_dtype_bytes, spec.hidden_size
    t = tokens // sequence_shards
    routed = _deepseek_moe(_full_ctx(t, a), spec, True, rows=t * expert_tensor_parallel * moe.experts_per_token,
                           fused_glu=True, probs_in_glu=probs_in_experts, shared=False,
                           act_recomputed=recompute_moe_act)[0]
    shared_bytes = 0
    if shared and moe.shared_expert_intermediate_size:
        shared_bytes = _act._dense_mlp(_full_ctx(tokens, a), spec, moe.shared_expert_intermediate_size, True,
                                       fused_glu=True)[0] - (tokens - t) * a * h
    return routed + shared_bytes


# ------------------------------------------------------------------------------------------ gpt-oss


def _gpt_oss_attention(ctx, spec: ModelSpec, x_rg: bool) -> tuple[int, bool]:
    h, qd, kvd, H = spec.hidden_size, spec.q_dim, spec.kv_dim, spec.num_attention_heads
    total = 0
    b, q_rg = _act._linear(ctx, "q_proj", h, x_rg)
    total += b
    b, k_rg = _act._linear(ctx, "k_proj", h, x_rg, input_saved=True)
    total += b
    b, v_rg = _act._linear(ctx, "v_proj", h, x_rg, input_saved=True)
    total += b
    a_rg = q_rg or k_rg or v_rg or ctx.full  # the sinks train in full fine-tuning
    eager = runs_eager(spec.family, ctx.attention)
    if eager and a_rg:
        total += ctx.T * (ctx.a * 3 * qd + INT64 * H + ctx.a * H * (ctx.s + 1))
        total += ctx.T * ctx.a * qd if ctx.full else 0  # o_proj's contiguous input
    elif a_rg:
        total += _sdpa(ctx, q=qd, k=kvd, v_storage=kvd, out=qd, heads=H, rg=True)
    r = ctx.targets.get("o_proj")
    if r is not None:
        total += _act._adapter_saved(ctx, "o_proj", qd, r, input_saved=ctx.full or not eager)
    return total, a_rg or r is not None


def _gpt_oss_moe(ctx, spec: ModelSpec, x_rg: bool, *, rows: int | None = None, fused_act: bool = False,
                 probs_in_act: bool = False, act_recomputed: bool = False,
                 router_input_kept: bool = True) -> tuple[int, bool]:
    """The gpt-oss MoE block (transformers' experts) or, with the keywords, Megatron-Core's
    (``megatron_gpt_oss_moe_bytes``): ``rows``, the expert rows this rank computes when they are not its own T·k;
    ``fused_act``: the clamped GLU saves only its input, the gate_up output; ``probs_in_act``: the routing weights
    multiply inside it, so the combine keeps no expert output; ``act_recomputed``: the down projection's input is
    freed and recomputed; ``router_input_kept`` false: the router's input (the pre-MLP norm's output) is freed."""
    moe = spec.moe
    assert moe is not None
    T, a, h, k = ctx.T, ctx.a, spec.hidden_size, moe.experts_per_token
    total = 0
    router_t = "router" in ctx.targets or "gate" in ctx.targets
    w_rg = ctx.full or router_t
    if w_rg and router_input_kept:
        total += T * a * h  # F.linear(x, W, b) saves x
    logits_rg = x_rg or w_rg
    if logits_rg:
        total += T * INT64 * k  # top-k indices
        total += T * a * k  # softmax over the top-k values
    # the experts and the combine as Qwen3-MoE's, with the experts' biases and the clamped GLU's saved tensors
    b, m_rg = _act._routed_experts(ctx, spec, x_rg, logits_rg, rows=rows, fused_glu=fused_act,
                                   probs_in_glu=probs_in_act, routing_weight_bytes=a, fp8_inputs=False,
                                   expert_bias=True, unfused_act_widths=4, act_recomputed=act_recomputed,
                                   adapter_weights=False)
    return total + b, m_rg


MEGATRON_GPT_OSS_MOE_SOURCES = (
    "NVIDIA/Megatron-LM @92c8482e6dcd11c3666c61bb8d1f7e8d0730ed13 (0.16.0rc0, NVIDIA-NeMo/Megatron-Bridge 25.11"
    " @97ad8cc6fb27a58bb79ff51ce73897c3887aa2c6 3rdparty/Megatron-LM): megatron/core/transformer/moe/experts.py"
    " TEGroupedMLP l.802-805 (activation_recompute = selective and 'moe_act' in recompute_modules), l.897-924"
    " (bias_activation_fusion with quick_gelu and gated_linear_unit: weighted_bias_quick_geglu_impl with the permuted"
    " probabilities, l.916), l.958-970 (moe_act: CheckpointWithoutOutput around the activation, its output discarded"
    " after linear_fc2), l.980 (_apply_bias: bias times probabilities, no expert output saved);"
    " fusions/fused_bias_geglu.py WeightedBiasQuickGeGLUFunction l.379 (save_for_backward(input, bias, weights,"
    " linear_offset)); transformer_layer.py l.381-402 ('layernorm' recomputes the norms that are not IdentityOp),"
    " l.616-621 and l.680-684 (the pre-MLP norm under CheckpointWithoutOutput, its output discarded after the MLP);"
    " models/gpt/gpt_layer_specs.py l.252-261 and l.347-368, moe_module_specs.py l.74 (the input norm fused into"
    " linear_qkv with Transformer Engine: IdentityOp; a MoE layer's pre-MLP norm separate). gpt-oss settings:"
    " Megatron-Bridge"
    " src/megatron/bridge/models/gpt_oss/gpt_oss_provider.py l.51, 69-84 @97ad8cc6 (add_bias_linear, top-4, alltoall,"
    " moe_permute_fusion, quick_gelu, glu_linear_offset 1.0, bias_activation_fusion True, clamp 7.0)")
"""Where ``megatron_gpt_oss_moe_bytes`` reads Megatron-Core's gpt-oss MoE block and its selective recompute."""


def gpt_oss_moe_block_bytes(spec: ModelSpec, *, tokens: int, compute_dtype_bytes: int = 2) -> int:
    """Saved bytes of one full-training gpt-oss MoE block (its input needing a gradient) over ``tokens`` tokens: the
    per-op figure ``activation_bytes`` counts for each layer's MoE block."""
    return _gpt_oss_moe(_full_ctx(tokens, compute_dtype_bytes), spec, True)[0]


def gpt_oss_norm_bytes(spec: ModelSpec, *, tokens: int, compute_dtype_bytes: int = 2) -> int:
    """Saved bytes of one full-training gpt-oss RMSNorm over ``tokens`` tokens (the per-op figure)."""
    return _fp32_weight_rmsnorm(_full_ctx(tokens, compute_dtype_bytes), spec.hidden_size, True)[0]


def megatron_gpt_oss_moe_bytes(spec: ModelSpec, *, tokens: int, sequence_shards: int = 1,
                               expert_tensor_parallel: int = 1, compute_dtype_bytes: int = 2,
                               probs_in_experts: bool = True, recompute_moe_act: bool = False,
                               recompute_pre_mlp_norm: bool = False) -> int:
    """Saved bytes of one Megatron-Core gpt-oss MoE block (full training, alltoall dispatcher, TE grouped experts with
    biases) on one rank (``MEGATRON_GPT_OSS_MOE_SOURCES``), ``tokens`` = b·s:

    * router, top-k and combine on the sequence shard, ``t = tokens / sequence_shards`` tokens; the experts on
      ``t · expert_tensor_parallel · k`` rows (routing-balanced);
    * the fused weighted clamped GLU (``weighted_bias_quick_geglu_impl``) keeps only its input, the fc1 output, and
      the probabilities; with ``probs_in_experts`` (Megatron-Core >= 0.12.1) the combine keeps no expert output;
    * ``recompute_moe_act`` (``--recompute-modules moe_act``): the activation runs under ``CheckpointWithoutOutput``
      and its output, fc2's input, is freed after fc2 and recomputed in backward;
    * ``recompute_pre_mlp_norm`` (``--recompute-modules layernorm``): the pre-MLP norm's output, the router's saved
      input, is freed (the norm itself: ``plan.ranks.megatron_moe_savings``).

    The routing and index tensors keep the per-op figure of ``_gpt_oss_moe`` on ``t`` tokens."""
    moe = spec.moe
    assert moe is not None
    t = tokens // sequence_shards
    return _gpt_oss_moe(_full_ctx(t, compute_dtype_bytes), spec, True,
                        rows=t * expert_tensor_parallel * moe.experts_per_token, fused_act=True,
                        probs_in_act=probs_in_experts, act_recomputed=recompute_moe_act,
                        router_input_kept=not recompute_pre_mlp_norm)[0]


# ------------------------------------------------------------------------------------------ layers


def layer_bytes(ctx, spec: ModelSpec, i: int, x_rg: bool) -> tuple[int, bool]:
    """Bytes of decoder layer ``i`` of an OPT, DeepSeek-V3 or gpt-oss model and whether its output
    needs a gradient (the same contract as ``activations._layer``).

    gpt-oss also says what it saved after its attention block (``ctx.parts["after_attention"]``, read into
    ``ActivationBytes.after_attention_per_layer``): the post-attention RMSNorm and the whole MoE block (router,
    routed experts, combine). ``GptOssDecoderLayer.forward`` (transformers 5.24.0
    src/transformers/models/gpt_oss/modeling_gpt_oss.py l.351-370) runs them after ``self_attn``, so autograd runs
    their backward first and frees their saved tensors as each node finishes; under non-reentrant checkpointing the
    recomputed tensors go the same way: ``_checkpoint_hook.unpack_hook`` (torch 2.13.0 torch/utils/checkpoint.py
    l.1165-1207) hands each recomputed tensor out once and drops its handle (``holder.handles[gid] = None``), and
    ``frame.recomputed`` is a ``WeakKeyDictionary`` of those handles (l.821-826), so the node that unpacked it holds
    the only reference. The eager softmax backward's moment (``plan.terms.attention_backward_released``) therefore
    stands on the layer's saved set less these. The fake-tensor trace at that moment (hidden 256, 4 layers, b 2,
    s 512 and 2048, full, checkpointed and not) holds of the layer only what its attention block saved (the input
    norm's tensors, the attention's inputs, the row-max indices, the sink-extended probabilities) beside the
    gradients; the plan counted the MoE block there too (+5.9% at s 512 with checkpointing, up to +10.6%)."""
    ctx.saved_inputs.clear()
    h = spec.hidden_size
    if spec.family == "opt":
        return _opt_layer(ctx, spec, x_rg)
    if spec.family == "mpt":
        return _mpt_layer(ctx, spec, x_rg)
    if spec.family == "gpt_neox":
        return _gpt_neox_layer(ctx, spec, x_rg)
    if spec.family == "gpt2":
        return _gpt2_layer(ctx, spec, x_rg)
    if spec.family == "gpt_oss":
        total, n_rg = _fp32_weight_rmsnorm(ctx, h, x_rg)
        b, o_rg = _gpt_oss_attention(ctx, spec, n_rg)
        total += b
        attention_end = total
        res_rg = x_rg or o_rg
        b, n2_rg = _fp32_weight_rmsnorm(ctx, h, res_rg)
        total += b
        b, m_rg = _gpt_oss_moe(ctx, spec, n2_rg)
        total += b
        # the post-attention norm's and the MoE block's saved tensors, freed before the attention's backward runs
        # (``layer_bytes``' docstring)
        ctx.parts["after_attention"] = total - attention_end
        return total, res_rg or m_rg
    total, n_rg = _act._norm(ctx, width=h, rows=1, zero_centred=False, x_rg=x_rg, const_width=h, residual=True)
    b, o_rg = _mla(ctx, spec, n_rg)
    total += b
    res_rg = x_rg or o_rg
    b, n2_rg = _act._norm(ctx, width=h, rows=1, zero_centred=False, x_rg=res_rg, const_width=h, residual=True)
    total += b
    if spec.moe is not None and spec.moe.is_moe_layer(i):
        b, m_rg = _deepseek_moe(ctx, spec, n2_rg)
    else:
        b, m_rg = _act._dense_mlp(_without_expert_names(ctx), spec, spec.intermediate_size, n2_rg)
    return total + b, res_rg or m_rg


_EXPERT_NAMES = ("gate_up_proj", "gate_proj", "up_proj", "down_proj")


def _without_expert_names(ctx):
    """DeepSeek-V3's dense and shared MLPs under an adapter that targets the fused experts: their
    gate/up/down projections share the experts' names but PEFT's all-linear leaves them unwrapped
    (``trainfit.memory.lora._all_linear``), so they are frozen linears here."""
    if not any(n in ctx.targets for n in _EXPERT_NAMES):
        return ctx
    return replace(ctx, targets={k: v for k, v in ctx.targets.items() if k not in _EXPERT_NAMES})


def embedding_bytes(ctx, spec: ModelSpec) -> int:
    """Beyond the token ids: OPT's learned positions keep their (offset) int64 indices; OPT-350m's
    project_in keeps its input."""
    out = 0
    if spec.family == "opt" and ctx.full:
        out += INT64 * ctx.T
    if spec.family == "opt" and spec.embed_proj_dim is not None:
        out += _act._linear(ctx, "project_in", spec.embed_proj_dim, False)[0]  # its input (or its adapter's)
    if spec.family in ("gpt_neox", "gpt2") and ctx.full:
        # NeoX's emb_dropout (hidden_dropout), GPT-2's drop (embd_pdrop, planned only when equal to resid_pdrop)
        out += _dropout(ctx, spec, spec.hidden_size, True)
    if spec.family == "gpt2" and ctx.full:
        out += INT64 * ctx.s  # wpe's (1, s) position ids
    if spec.family == "mpt":
        if spec.learned_positions and ctx.full:
            out += INT64 * ctx.s  # wpe's (1, s) position ids
        if runs_eager(spec.family, ctx.attention):
            out += ctx.b * ctx.s * ctx.s  # the bool causal mask every layer's masked_fill keeps (one tensor)
        else:
            out += 3 * INT64 * ctx.T  # gen_flash_attn_padding_info's indices_q/_k/_v that every layer's gathers keep
    return out


def head_bytes(ctx, spec: ModelSpec, x_rg: bool) -> int:
    """Final norm and the output head's input (logits and loss excluded)."""
    h = spec.hidden_size
    if spec.family in ("mpt", "gpt_neox", "gpt2"):  # norm_f / final_layer_norm / ln_f and the head's input
        return _layernorm(ctx, h, x_rg)[0] + (ctx.a * ctx.T * h if ctx.full else 0)
    if spec.family == "opt":
        out = _layernorm(ctx, h, x_rg)[0] if spec.final_norm else 0
        if spec.embed_proj_dim is not None:
            out += _act._linear(ctx, "project_out", h, x_rg)[0]  # its input (or its adapter's)
        if ctx.full:
            out += ctx.a * ctx.T * spec.embed_dim  # lm_head's input
        return out
    if spec.family == "gpt_oss":
        out = _fp32_weight_rmsnorm(ctx, h, x_rg)[0]
    else:
        out = _act._norm(ctx, width=h, rows=1, zero_centred=False, x_rg=x_rg, const_width=h, residual=True)[0]
    out += ctx.a * ctx.T * h if ctx.full else 0
    return out + spec.mtp_layers * _mtp_module_bytes(ctx, spec, x_rg)


def _mtp_module_bytes(ctx, spec: ModelSpec, x_rg: bool) -> int:
    """One DeepSeek-V3 multi-token-prediction module trained beside the model (``ModelSpec.mtp_layers``):
    enorm over the next tokens' embeddings and hnorm over the last hidden state, eh_proj's 2h-wide input,
    one MoE decoder layer (not checkpointed), the shared head's RMSNorm and the head's input, and its own
    cross-entropy's fp32 log-softmax and targets (4V + 8 per token), all saved through backward. Sizes as
    the main model's on T tokens (the module sees T - b)."""
    h, T, a = spec.hidden_size, ctx.T, ctx.a
    norm = lambda rg: _act._norm(ctx, width=h, rows=1, zero_centred=False, x_rg=rg, const_width=h)[0]  # noqa: E731
    out = norm(ctx.full) + norm(x_rg)  # enorm (the embedding trains only in full fine-tuning), hnorm
    out += _act._linear(ctx, "eh_proj", 2 * h, True)[0]
    moe_layer = next((i for i in range(spec.num_layers) if spec.moe is not None and spec.moe.is_moe_layer(i)),
                     spec.num_layers - 1)
    out += layer_bytes(ctx, spec, moe_layer, True)[0]
    out += norm(True) + (a * T * h if ctx.full else 0)
    return out + T * (FP32 * spec.vocab_size + INT64)


def checkpoint_input_bytes(ctx, spec: ModelSpec) -> int:
    """What non-reentrant checkpointing keeps beside each layer's hidden_states: the layers' other inputs,
    stored once. Eager gpt-oss materialises one additive bf16 mask (b, 1, s, s) per attention kind
    (sliding and full), and every checkpointed layer holds its kind's mask until its backward; SDPA and
    flash take no materialised mask."""
    if spec.family != "gpt_oss" or not runs_eager(spec.family, ctx.attention):
        return 0
    kinds = (1 if spec.sliding_layers else 0) + (1 if len(spec.sliding_layers) < spec.num_layers else 0)
    return kinds * ctx.b * ctx.s * ctx.s * ctx.a
