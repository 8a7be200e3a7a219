"""Bytes that autograd saves for backward (activations), in closed form, per decoder layer.

Derived op by op from what each op saves (``derivatives.yaml`` / autograd Function
``save_for_backward``), and checked to the byte against ``saved_tensors_hooks`` on tiny real
models (``tools/measure_activations.py``, ``tests/trace/test_activation_hooks.py``; GROUND_TRUTH §3):
storages deduplicated by ``data_ptr``, parameters excluded, torch 2.13 / transformers 5.24 /
peft 0.21, bf16 parameters, no attention mask, ``labels=input_ids``.

Notation (per token unless said): h hidden, qd = heads·head_dim, kvd = kv_heads·head_dim, H heads,
KV kv heads, I intermediate, s sequence length, T = b·s tokens. The rules that generate every term:

* An op saves a tensor only for an input that needs a gradient: ``mul(a, b)`` saves ``b`` iff ``a``
  requires grad and vice versa; a frozen ``nn.Linear`` saves nothing (its input gradient needs only
  the weight, a parameter); a trainable one saves its input (2·in B).
* HF's Python RMSNorm saves an fp32 copy of its input (4w) and the fp32 ``rsqrt`` (4 per row);
  Llama-style norms (``weight * x.to(bf16)``) also save the bf16 normalised input (2w) when the
  weight trains. Zero-centred norms (Gemma-2, Qwen3.5: ``x * (1 + w.float())``) save the fp32
  normalised output (4w) when the weight trains, plus the fp32 ``1 + w`` vector (4·width, a
  per-layer constant) whenever the input needs a gradient.
* SiLU / gelu_tanh save their input, the gated product saves both factors: 8I for a dense MLP.
* SDPA (CPU flash kernel; CUDA flash / mem-efficient and flash-attn save the same set) saves
  q, k, v, the output and the fp32 logsumexp: 4qd + 4kvd + 4H. Its output is laid out like q, and
  when q is a transposed view of a projection (every family but Qwen3.5, whose partial-rotary
  ``cat`` makes q contiguous) ``o_proj``'s input is a view of it and costs nothing more.
* Eager attention saves q and repeat_kv(k) for ``q@kᵀ``, the fp32 softmax output (4·H·s), its bf16
  copy and repeat_kv(v) for ``p@v`` and the transposed output for o_proj: 6qd + 6·H·s (+2·H·s for
  Gemma-2's tanh softcap, which saves its bf16 output).
* PEFT LoRA (fp32 adapters on a bf16 base) casts the input to fp32 in every wrapped module
  (4·in, not shared between q/k/v) and saves the rank-r fp32 ``lora_A`` output (4r).
* LoRA dropout (``lora_dropout > 0``; peft 0.21.2 ``tuners/lora/layer.py`` l.255-258 builds an
  ``nn.Dropout`` per wrapped module, ``nn.Identity`` at 0; ``Linear.forward`` l.1100-1102 runs
  ``lora_B(lora_A(dropout(x.to(adapter dtype)))) * scaling``): each wrapped module's dropout output
  is a new tensor (adapter dtype, in·T, one per module even where q/k/v or gate/up share x) that
  ``lora_A`` saves in place of x or its cast, plus, when x needs a gradient, the dropout mask
  (CUDA ``native_dropout``: bool, 1 B per element). torch's CPU dropout (what a CPU trace runs)
  keeps a noise tensor in the input's dtype instead (``DROPOUT_CPU_NOISE``). With the dropout on the adapter's
  output (``lora.dropout_position: post``, NeMo Automodel's default) the adapter saves what it saves without
  dropout and the dropout its mask over the module's output (out·T; ``_adapter_saved``).
* Gradient checkpointing (transformers 5 default ``use_reentrant=False``) saves only the layer's
  positional input, hidden_states: 2h per token per layer (plus a 5,056 B CPU RNG state per layer
  that is not a saved tensor). Under it, adapters get ``enable_input_require_grads``.
* Without checkpointing an adapter run's layer 0 has an input that needs no gradient (frozen
  embedding), so its first norm and frozen projections save nothing.

* Selective checkpointing, per op (torchtitan ``selective_ac_option: op``, pytorch/torchtitan
  torchtitan/parallelisms/parallelize_llama.py@9dec370ad26b5f8e9a7333a0e36165018262644b l.214-258,
  the version of its published H100 table; today torchtitan/distributed/activation_checkpoint.py
  @b5bcd76c66d0acb1a08b176d9639425bc55e0b2a): each layer runs under non-reentrant ``checkpoint`` with
  ``create_selective_checkpoint_contexts``; the policy MUST_SAVEs the outputs of ``aten.mm`` (odd
  calls only: "recompute every second mm", counted per layer), of the flash / efficient SDPA
  kernels and of ``reduce_scatter_tensor``; everything else is recomputed. A layer keeps its input
  (2h, as under full checkpointing) plus those outputs: the odd matmuls' outputs (LoRA's A and B
  products count as matmuls, in the adapter dtype; a linear with a bias is ``addmm``: neither saved
  nor counted; grouped expert GEMMs neither), SDPA's output and fp32 logsumexp (2qd + 4H), and under
  sequence parallel the two reduce-scattered row-parallel outputs (2h on T/tp tokens each).
  Eager attention's ``bmm``s are not on the list: its scores are recomputed.
* Selective checkpointing of the attention core (Megatron-LM ``--recompute-granularity selective``,
  ``--recompute-modules core_attn``; Korthikanti et al. 2022, "Reducing Activation Recomputation in
  Large Transformer Models", eq. 1-2 and §5: per layer ``sbh(34 + 5as/h)`` becomes ``34sbh``): a
  layer keeps all it saves without checkpointing except the attention core's internals, the
  ``5as²b`` terms: with eager attention the fp32 softmax output, the bf16 probabilities and
  Gemma-2's tanh output; with SDPA/flash only the fp32 logsumexp (4H; q, k, v and the output are
  the core's checkpointed inputs and o_proj's input, kept either way).

* ``torch.compile`` of each decoder layer (``compiled=True``; torchtune ``compile_model`` compiles every
  ``TransformerSelfAttentionLayer``, torchtune/training/_compile.py @1814feb17a9038e1a8053ce93111bd26774a8db6):
  AOTAutograd's min-cut partitioner saves the cheapest inputs of each pointwise chain and recomputes the
  rest in backward. Measured with ``saved_tensors_hooks`` on an inductor-compiled (CPU) transformers 5
  ``LlamaDecoderLayer`` in bf16 (``tests/unit/test_compiled_layer.py``): each RMSNorm keeps its bf16 input
  (2w) and the fp32 ``rsqrt`` instead of the fp32 copy (4w), the bf16 normalised input of the weight's
  gradient is recomputed, and SwiGLU's ``act(gate)`` is recomputed from the saved gate: per dense layer of a
  full fine-tune 8h + 2I bytes per token less than eager (q/k/v, SDPA's saved set and the projections'
  inputs are unchanged); of a LoRA layer whose input needs a gradient 4h + 2I less. PEFT's fp32 adapters:
  the identical fp32 casts of one input (q/k/v's, gate/up's) become one saved tensor (4·in once). Applied
  to what was measured (peft 0.19 LoRA on q,v and on gate,up,down, bf16 and fp32 adapters, no dropout;
  full training): Llama-style dense SDPA layers (``compiled_rules_apply``); QLoRA, DoRA, LoRA dropout,
  zero-centred norms, MoE, hybrid and the arch families keep the eager figure.
  Qwen3-style per-head qk-norm (measured the same way on an inductor-compiled transformers 5.24
  ``Qwen3DecoderLayer``, torch 2.13, peft 0.21, ``tests/unit/test_compiled_qk_norm_layer.py``): the q and k
  RMSNorms follow the same rule, keeping the bf16 projection output (2qd, 2kvd) and the fp32 per-head
  ``rsqrt`` (4H, 4KV) instead of eager's fp32 copy (4qd, 4kvd) and, when the weights train, the bf16
  normalised input (2qd, 2kvd): per layer 4qd + 4kvd less under full training, 2qd + 2kvd less where the
  input needs a gradient under LoRA. Exact to the byte on ten layers (GQA and MHA, head_dim 32-128,
  qd from h/2 to 2h, b·s 256-512; full, and LoRA on q,v / q,k,v,o / gate,up,down, bf16 and fp32 adapters)
  and on LoRA's layer 0; qk-norm layers therefore join ``compiled_rules_apply``. OLMo 2 (family ``olmo2``)
  normalises q and k over all heads at once (transformers 5.24 ``models/olmo2/modeling_olmo2.py`` l.213-214,
  one ``rsqrt`` per token) and its norms follow the attention and the MLP outputs (l.299-316). Its compiled
  layer (inductor, CPU, bf16, SDPA, full training; ``tests/trace/test_olmo2_activations.py``) saves exactly what
  these rules give with one ``rsqrt`` row per q/k norm: each norm keeps its bf16 input and the fp32 rsqrt (eager's
  fp32 copy and fp32 normalised input, which OLMo 2's ``weight * x`` in fp32 saves, are recomputed). OLMo 2 LoRA
  under compile was not measured and keeps the eager figure.

* Transformer Engine fp8 linears (``linear_input_bytes``, ``trainfit.memory.fp8.saved_input_bytes``): every trained
  projection saves the fp8 copy of its input it quantised for the forward GEMM instead of the compute-dtype input
  (q/k/v's one fused input, gate/up's one, down's, the experts' grouped inputs), at the recipe's bytes per element;
  the attention projection saves its fp8 copy even where its input is a view of the attention's saved output (the
  attention keeps its bf16 output for its own backward). Norms, attention, activations, router and lm_head keep
  their dtype (module docstring of ``trainfit.memory.fp8``).

Everything here is exact for compute_dtype_bytes=2 (bf16/fp16). Attention.FLASH is treated as SDPA:
flash-attn saves the same q, k, v, output and logsumexp as SDPA's flash path (its output is bshd,
like SDPA's for the non-gated families).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from math import ceil

from trainfit.memory.attention import (
    ARCH_FAMILIES,
    runs_eager,
    sdpa_window_mask_saved_bytes,
    V5_SDPA,
    HfSdpaCopies,
    legacy_sdpa_repeats_kv,
    legacy_shared_mask,
    sdpa_masked,
    sdpa_window_repeats_kv,
)
from trainfit.memory.logits import SOFTCAP_FAMILIES
from trainfit.memory.lora import targeted_groups
from trainfit.memory.params import _layer_params
from trainfit.spec.enums import Attention, LayerKind, Scope, SelectiveCheckpointing
from trainfit.spec.model import DEEPSEEK_FAMILIES, DEEPSEEK_MOE_BLOCK, ModelSpec
from trainfit.spec.training import TrainableSpec

FP32 = 4
INT64 = 8
INT32 = 4
DROPOUT_MASK_BYTES = 1
"""``native_dropout``'s bool mask, per element (CUDA; what the plan models)."""
DROPOUT_CPU_NOISE = "adapter dtype"
"""torch's CPU ``dropout`` (no fused kernel: ``at::dropout`` falls back to ``input * bernoulli_noise``) saves the
noise tensor in the input's dtype: for LoRA dropout the adapter dtype (4 B per element with fp32 adapters)."""
DELTANET_CHUNK = 64
"""Chunk size of flash-linear-attention's ``chunk_gated_delta_rule`` (its default: ``chunk_size: int = 64`` of
``ChunkGatedDeltaRuleFunction.forward`` and ``chunk_gated_delta_rule_fwd``, which the public function does not pass;
fla-org/flash-linear-attention ``fla/ops/gated_delta_rule/chunk.py`` l.49, l.279
@bc3b101dcb713ddc5bd8924b66754eb68b5ccf89)."""
DELTANET_DQKWG_TILE = 64
"""K tile of fla's ``chunk_bwd_dqkwg`` on Ampere/Ada (partial fp32 dg per tile): ``CONST_TILING`` 64 where
``check_shared_mem('ada')`` holds and not ``'hopper'`` (128 there, 32 below), ``BK = min(max(next_power_of_2(K), 16),
CONST_TILING)`` (fla-org/flash-linear-attention ``fla/ops/common/chunk_o.py`` l.730-736
@bc3b101dcb713ddc5bd8924b66754eb68b5ccf89)."""
DELTANET_KERNELS = ("Gated DeltaNet layers: flash-linear-attention's chunk_gated_delta_rule and causal-conv1d's"
                    " causal_conv1d_fn, the CUDA kernels transformers runs when both are installed (not its torch"
                    " fallback, which saves fp32 chunk matrices and is what a CPU run without them uses)")
"""The assumption the plan states for hybrid models."""
QWEN3_5_PARTIAL_ROTARY = 0.25
"""Qwen3.5 rotates a quarter of head_dim (config partial_rotary_factor; ModelSpec has no field)."""

ZERO_CENTRED_NORM_FAMILIES = frozenset({"gemma2", "qwen3_5_text", "gemma3_text", "gemma"})
_WEIGHT_ON_FP32_NORM = {"olmo2"}
"""RMSNorms whose weight multiplies the fp32 normalised input before the cast (``_norm``'s ``weight_on_fp32``)."""
_FP32_ROTARY = {"olmo2"}
"""Families whose rotary cos/sin stay fp32 (saved by every layer's rotary muls: 4 B per element, not 2)."""
DEEPSEEK_MOE_FAMILIES = DEEPSEEK_MOE_BLOCK - DEEPSEEK_FAMILIES
"""Llama-layout families whose MoE block is DeepSeek-V3's (``arch_activations._deepseek_moe``): GLM-4.5's
``Glm4MoeMoE`` (``catalog.hf_config._glm4_moe_moe``)."""


@dataclass(frozen=True, slots=True)
class ActivationBytes:
    per_layer: tuple[int, ...]
    """Saved bytes of each decoder layer without checkpointing."""
    checkpointed_per_layer: tuple[int, ...]
    """Bytes each layer keeps when gradient checkpointing is on (its hidden_states input; under selective
    checkpointing also what the policy saves, see ``selective_layer_bytes``)."""
    embedding: int
    """Saved by the embedding / before layer 0 without checkpointing: input ids (int64, when the
    embedding trains), Gemma-2's bf16 scale scalar, and the rotary cos/sin (bf16, shape (1, s, rot))
    shared by all layers."""
    head: int
    """Final norm and lm_head input; excludes logits and loss (see ``loss_region_bytes``)."""
    checkpointed_embedding: int = 0
    """``embedding`` under checkpointing: cos/sin are then only saved inside a recompute."""
    embedding_backward: int | None = None
    """Of ``embedding`` / ``checkpointed_embedding``: what is still alive when the embedding's own backward runs,
    after layer 0's: the token ids, Gemma-2's scale scalar, the learned-position/OPT/GPT-2/MPT tensors of
    ``arch_activations.embedding_bytes``. The inputs every layer shares are gone by then: the rotary cos/sin
    (saved by each layer's rotary mul, or held by each checkpointed layer's recompute closure) and the eager
    masks a checkpointed layer holds (``plan.terms``, gpt-oss's ``checkpoint_input_bytes``) go with layer 0's
    backward (the fake-tensor trace of Gemma-2-9B, 2 layers, b1 x 257, eager: at ``embedding_dense_backward``
    only the ids (2,056 B) and a 4-byte scalar are live, with and without checkpointing). None: the whole
    ``embedding`` figure (the ranks of a parallel layout, ``plan.ranks``)."""
    kernel_backward: tuple[int, ...] = ()
    """Per layer (Gated DeltaNet layers; 0 for others): bytes live inside the layer's backward at the
    chunked kernel's fullest beyond the layer's saved tensors (those saved after the kernel are freed by
    then), without checkpointing."""
    kernel_backward_checkpointed: tuple[int, ...] = ()
    """The same under full checkpointing: the larger of the recompute's kernel forward and its backward."""
    kernel_forward_checkpointed: int = 0
    """Under checkpointing, the largest bytes live inside a Gated DeltaNet layer's forward (nothing saved
    there) plus the inputs saved up to that layer, beyond ``total(gradient_checkpointing=True)``."""
    after_attention_per_layer: tuple[int, ...] = ()
    """Per layer: the part of ``per_layer`` saved after the attention block (the post-attention norm(s), the
    MLP or MoE block, Gemma-2's feed-forward norms). Their backward runs first and frees them, so they are gone
    when the attention's backward runs (``trainfit.plan.terms``: the eager softmax backward's moment). Empty
    for the families with their own layer model (``arch_activations``) unless that model says it (MPT,
    GPT-NeoX, GPT-2, gpt-oss): nothing is assumed freed there."""

    def kernel_extra(self, *, gradient_checkpointing: bool) -> tuple[int, ...]:
        return self.kernel_backward_checkpointed if gradient_checkpointing else self.kernel_backward

    def total(self, *, gradient_checkpointing: bool) -> int:
        """All saved bytes alive at the end of forward (logits/loss excluded)."""
        if gradient_checkpointing:
            return self.checkpointed_embedding + sum(self.checkpointed_per_layer) + self.head
        return self.embedding + sum(self.per_layer) + self.head

    def checkpointing_only(self, layers: tuple[bool, ...]) -> "ActivationBytes":
        """The figures when only the ``layers`` marked True run under checkpoint (torchtitan's every-n-th layer,
        ``RunCard.parallel.checkpointed_layers``), to be walked as a checkpointed step: a layer left out keeps its
        ``per_layer`` bytes (and its kernel's backward buffers without recompute), so the ``checkpointed_*`` tuples
        hold each layer's own figure. The embedding keeps the larger of the two figures while any layer is left
        out: those layers' rotary muls save the shared cos/sin (the fake-tensor trace of a 4-layer llama, every 2nd
        layer checkpointed, ``tests/trace/test_layer_subset_checkpointing.py``)."""
        if len(layers) != len(self.per_layer):
            raise ValueError(f"checkpointing_only: {len(layers)} flags for {len(self.per_layer)} layers")
        ckpt = tuple(c if on else n for on, c, n in zip(layers, self.checkpointed_per_layer, self.per_layer))
        kernel = (tuple(c if on else n for on, c, n in zip(layers, self.kernel_backward_checkpointed,
                                                           self.kernel_backward))
                  if self.kernel_backward_checkpointed else self.kernel_backward_checkpointed)
        emb = self.checkpointed_embedding if all(layers) else max(self.embedding, self.checkpointed_embedding)
        return replace(self, checkpointed_per_layer=ckpt, kernel_backward_checkpointed=kernel,
                       checkpointed_embedding=emb,
                       kernel_forward_checkpointed=self.kernel_forward_checkpointed if any(layers) else 0)

    @property
    def max_layer(self) -> int:
        """Largest per_layer: what is live while one checkpointed layer is recomputed."""
        return max(self.per_layer, default=0)


@dataclass(frozen=True, slots=True)
class _Ctx:
    T: int  # tokens b*s
    b: int
    s: int
    a: int  # bytes of the compute dtype
    full: bool
    targets: dict[str, int]  # short module name -> LoRA rank (rank multiplier applied)
    attention: Attention
    adapter_bytes: int = FP32
    """LoRA A/B dtype: fp32 (PEFT's default autocast_adapter_dtype) or bf16 (torchtune, PEFT without autocast)."""
    lora_dropout: bool = False
    """``lora.dropout > 0``: every wrapped module runs lora_A on its own dropout output (``_adapter_saved``)."""
    lora_dropout_out: dict = field(default_factory=dict)
    """``lora.dropout_position: post``: short module name -> out_features; the dropout acts on each wrapped module's
    adapter output instead (``_adapter_saved``). Empty: on the input (PEFT)."""
    saved_inputs: set = field(default_factory=set)
    """bf16 adapters: module inputs already saved in the current layer (q/k/v share one, gate/up one)."""
    T_seq: int = 0
    """Tokens of the residual stream on this rank: T, or T / tp under sequence parallel."""
    compiled: bool = False
    """The layer runs under ``torch.compile`` and the compiled rules are measured for it (``_compiled_rules``)."""
    parts: dict = field(default_factory=dict)
    """Gated DeltaNet: bytes of the current layer saved after the kernel (``"post"``) and the buffers
    live beside the saved tensors at the kernel's fullest (``"kernel"``)."""
    fp32_stream_autocast: bool = False
    """fp32 weights under 16-bit autocast: an adapted module's input is fp32 (``_adapter_saved``)."""
    linear_input_bytes: float = 0.0
    """Transformer Engine fp8: bytes per element a trained projection saves of its input (its fp8 copy,
    ``trainfit.memory.fp8.saved_input_bytes``); 0: the compute dtype's (the input itself)."""
    hf_sdpa: HfSdpaCopies = V5_SDPA
    """What the pinned transformers release's SDPA path copies besides v5's (``attention.legacy_sdpa``)."""
    padding_mask: bool = False
    """The batch carries an attention mask with zeros (``batch.padding`` mask): SDPA layers take transformers' 4-D
    mask (``attention.sdpa_padding_masked``)."""
    frozen_saves_input: bool = False
    """Each frozen linear keeps its input for the backward whenever that input needs a gradient (bitsandbytes'
    MatMul4Bit before 0.43.2, ``memory.bnb_saved_input``): one storage per distinct input, shared with what an
    adapter in the compute dtype saves of it (``_linear``, ``_SHARED_INPUT``)."""
    glu_input_bytes: float = 0.0
    """Megatron-Core ``activation_func_fp8_input_store``: bytes per element a dense SwiGLU keeps of its input (the
    gate and up halves of fc1's output) for its backward (``glu_saved_input_bytes``); 0: the compute dtype's."""


def _norm(ctx: _Ctx, *, width: int, rows: int, zero_centred: bool, x_rg: bool, const_width: int,
          residual: bool = False, weight_on_fp32: bool = False) -> tuple[int, bool]:
    """RMSNorm over ``width`` elements per token (``rows`` normalised vectors per token); ``residual``:
    a norm of the residual stream (sequence-sharded under sequence parallel); ``weight_on_fp32``: the weight
    multiplies the fp32 normalised input before the cast (OLMo 2's ``(self.weight * hidden_states).to(input_dtype)``,
    transformers v5.24.0 models/olmo2/modeling_olmo2.py l.65), so a trained weight's mul saves it in fp32 (4w).
    Returns (bytes, output requires grad)."""
    T, a = (ctx.T_seq or ctx.T) if residual else ctx.T, ctx.a
    out = 0
    if ctx.compiled and not zero_centred:
        # compiled: the bf16 input and the fp32 rsqrt; the normalised input is recomputed from them
        return (T * (a * width + FP32 * rows) if (x_rg or ctx.full) else 0), x_rg or ctx.full
    if x_rg:
        out += T * (FP32 * width + FP32 * rows)  # fp32 copy (pow & mul) + rsqrt
        if zero_centred:
            out += FP32 * const_width  # the fp32 (1 + w) vector, saved because the output needs grad
    if ctx.full:
        # Llama-style: weight * x.to(bf16) saves x_bf16; zero-centred: x_norm_fp32 * (1+w) saves x_norm_fp32
        out += T * width * (FP32 if zero_centred or weight_on_fp32 else a)
    return out, x_rg or ctx.full


def fused_qkv_extra_bytes(spec: ModelSpec, *, tokens: int, dtype_bytes: int, value_saved: bool) -> int:
    """Bytes of the fused ``qkv_proj`` output that attention keeps beyond v's own width: v is a slice of that
    output (transformers v5.24.0 models/phi3/modeling_phi3.py l.218-223: ``value_states = qkv[..., query_pos +
    ...:]``, ``view`` and ``transpose``), so the kernel that saves v keeps the whole q + 2·kv wide storage alive
    (q + kv more per token than a separate v_proj's output). Measured on one Phi-3 layer (8 heads, 4 KV heads,
    SDPA, CPU): 1,280 B/token over Llama's layer = this plus the head-major output copy. 0 when nothing saves v."""
    return tokens * dtype_bytes * (spec.q_dim + spec.kv_dim) if value_saved else 0


def linear_input(ctx: _Ctx, width: int, *, tokens: int | None = None) -> int:
    """Bytes a trained projection saves of its ``width``-wide input over ``tokens`` (default ``ctx.T``): the
    input in the compute dtype, or under Transformer Engine fp8 its fp8 copy (``ctx.linear_input_bytes``)."""
    t = ctx.T if tokens is None else tokens
    return ceil(t * width * ctx.linear_input_bytes) if ctx.linear_input_bytes else t * ctx.a * width


def _linear(ctx: _Ctx, name: str, in_features: int, x_rg: bool, *, input_saved: bool = False) -> tuple[int, bool]:
    """A projection. Full: saves its bf16 input (once per distinct input; TE fp8: its fp8 copy). LoRA: fp32
    input cast (4·in) and the fp32 rank-r A output (4r); the frozen base saves nothing (AutoGPTQ's unpacked
    weight: ``saved_frozen_weights``, added per layer), except its input when ``ctx.frozen_saves_input`` and that input
    needs a gradient (``x_rg``)."""
    out = 0
    if ctx.full and not input_saved:
        out += linear_input(ctx, in_features)
    elif ctx.frozen_saves_input and not ctx.full and x_rg:
        # the frozen base runs first (PEFT: ``result = self.base_layer(x)``) and keeps x itself: counted once per
        # distinct input; a compute-dtype adapter's lora_A then finds it saved
        key = _SHARED_INPUT.get(name, name)
        if not input_saved and key not in ctx.saved_inputs:
            out += ctx.T * ctx.a * in_features
        ctx.saved_inputs.add(key)
    r = ctx.targets.get(name)
    if r is not None:
        out += _adapter_saved(ctx, name, in_features, r, input_saved=ctx.full, x_rg=x_rg)
    return out, x_rg or ctx.full or r is not None


_SHARED_INPUT = {
    "q_proj": "attn_in", "k_proj": "attn_in", "v_proj": "attn_in", "gate_proj": "mlp_in", "up_proj": "mlp_in",
    "shared_expert_gate": "mlp_in",
    "in_proj_qkv": "la_in", "in_proj_z": "la_in", "in_proj_b": "la_in", "in_proj_a": "la_in",
}


def _adapter_saved(ctx: _Ctx, name: str, in_features: int, r: int, *, input_saved: bool, x_rg: bool = True) -> int:
    """What one LoRA-wrapped module saves on top of its base.

    fp32 adapters on a bf16 base: PEFT casts the input to fp32 (4·in, a new tensor per module)
    and ``lora_B`` saves the fp32 ``lora_A`` output (4r). Adapters in the compute dtype (fp32 adapters on a model
    run in fp32 too: ``BaseTunerLayer._cast_input_dtype`` returns the input itself when the dtypes match,
    peft 0.21.2 ``peft/tuners/tuners_utils.py`` l.2233): no cast,
    so ``lora_A`` saves the module's own input (shared by q/k/v and by gate/up: one storage, counted
    once per layer, and nothing when something else already saves it) and ``lora_B`` the rank-r output.

    fp32 adapters on an fp32 base under 16-bit autocast (``fp32_stream_autocast``): the norm outputs x are fp32, so
    PEFT's cast to the adapter dtype returns x itself (peft 0.21.2 ``peft/tuners/lora/layer.py`` l.1100,
    ``tuners_utils.py`` l.2233), and autocast casts x to 16 bits for ``lora_A`` (a new tensor per module: autocast
    caches only casts of leaves that need a gradient) and saves that cast, then ``lora_B`` saves ``lora_A``'s 16-bit
    output: ``a``·(in + r) per module, not 4·(in + r) (tests/trace/test_lora_fp32_autocast.py, within 2 %).

    With LoRA dropout ``lora_A`` saves this module's own dropout output instead (adapter dtype, in·T: a new
    tensor per module, shared with nobody, whatever ``input_saved`` says) and the dropout saves its mask
    (1 B per element, CUDA) when the module input ``x_rg`` needs a gradient; x and its fp32 cast are then
    saved by nothing in the adapter.

    Dropout on the adapter's output (``lora.dropout_position: post``, NeMo Automodel's default: ``lora_res =
    lora_B(lora_A(x) * scale)``, then ``F.dropout(lora_res)``, NVIDIA-NeMo/Automodel
    nemo_automodel/components/_peft/lora.py l.53, l.305-312 @2861c4143cd335539213b1b6d0c890cb17682444): the
    adapter saves what it saves without dropout (``lora_A`` the module's input, ``lora_B`` its rank-r input; the
    scalar ``* scale`` saves nothing), and the dropout its mask over the output (out·T, 1 B per element on CUDA;
    the sum with the base output saves nothing).
    """
    if ctx.lora_dropout and ctx.lora_dropout_out:
        out_features = ctx.lora_dropout_out[name]
        return (_adapter_saved(replace(ctx, lora_dropout=False), name, in_features, r, input_saved=input_saved,
                               x_rg=x_rg) + ctx.T * DROPOUT_MASK_BYTES * out_features)
    if ctx.lora_dropout:
        mask = ctx.T * DROPOUT_MASK_BYTES * in_features if x_rg else 0
        return ctx.T * ctx.adapter_bytes * (in_features + r) + mask
    if ctx.adapter_bytes == FP32 and ctx.a < FP32:  # fp32 adapters on a 16-bit computed model
        # a 16-bit input: PEFT's fp32 cast (saved, and the fp32 A output); an fp32 input under autocast: PEFT's cast
        # returns x itself and autocast's 16-bit casts of x and of A's output are saved
        saved = ctx.a if ctx.fp32_stream_autocast else FP32
        if ctx.compiled:  # one cast per distinct input: Inductor merges q/k/v's (gate/up's) identical casts
            key = "cast:" + _SHARED_INPUT.get(name, name)
            first = key not in ctx.saved_inputs
            ctx.saved_inputs.add(key)
            return ctx.T * saved * (r + (in_features if first else 0))
        return ctx.T * saved * (in_features + r)
    out = ctx.T * ctx.a * r
    key = _SHARED_INPUT.get(name, name)
    if not input_saved and key not in ctx.saved_inputs:
        out += ctx.T * ctx.a * in_features
    ctx.saved_inputs.add(key)
    return out


def _rope_dim(spec: ModelSpec) -> int:
    if spec.family in ARCH_FAMILIES:
        from trainfit.memory.arch_activations import rope_dim

        return rope_dim(spec)
    if spec.family == "qwen3_5_text":
        half = int(spec.head_dim * QWEN3_5_PARTIAL_ROTARY) // 2
        return 2 * half
    if spec.interleaved_rotary:  # GLM-4: every layer saves its own re-laid-out cos/sin (_attention), none shared
        return 0
    if spec.rotary_cat:  # the rotary embedding's dim = int(head_dim * partial_rotary_factor)
        return int(spec.head_dim * spec.partial_rotary_factor)
    return spec.head_dim


def _attention(ctx: _Ctx, spec: ModelSpec, x_rg: bool, *, masked: bool = False) -> tuple[int, bool]:
    """Full attention block after the input norm (x = normalised input). Returns (bytes, out rg).
    ``masked``: the layer runs SDPA with a materialised mask (``attention.sdpa_masked``: past the sliding window or
    under a padding mask): the call saves its float mask and, for grouped-query layers, k and v repeated to every
    head (``attention.sdpa_window_repeats_kv``; then v is a copy, no longer a slice keeping Phi-3's whole qkv_proj
    output)."""
    T, a, s = ctx.T, ctx.a, ctx.s
    h, qd, kvd, H, KV, d = spec.hidden_size, spec.q_dim, spec.kv_dim, spec.num_attention_heads, spec.num_kv_heads, spec.head_dim
    zc = spec.family in ZERO_CENTRED_NORM_FAMILIES
    gated = spec.attn_output_gate
    total = 0
    fused = spec.fused_projections
    sliced_v = fused or spec.fused_qkv  # v is a slice of one qkv output (Phi-3's qkv_proj, Qwen (1.0)'s c_attn)
    if sliced_v:  # one qkv_proj: q, k and v are slices of its output
        total, q_rg = _linear(ctx, "qkv_proj", h, x_rg)
        k_rg = v_rg = q_rg
    else:
        b, q_rg = _linear(ctx, "q_proj", h, x_rg)
        total += b
        b, k_rg = _linear(ctx, "k_proj", h, x_rg, input_saved=True)
        total += b
        b, v_rg = _linear(ctx, "v_proj", h, x_rg, input_saved=True)
        total += b
    if spec.qk_norm:
        # per-head RMSNorm over head_dim (rows = heads); compiled: the bf16 q/k projection output and the fp32
        # rsqrt (2qd + 4H, 2kvd + 4KV), measured in tests/unit/test_compiled_qk_norm_layer.py. OLMo 2: one norm
        # over the whole projection (one rsqrt per token)
        wide = spec.qk_norm_full_width
        b, q_rg = _norm(ctx, width=qd, rows=1 if wide else H, zero_centred=zc, x_rg=q_rg, const_width=qd if wide else d,
                        weight_on_fp32=spec.family in _WEIGHT_ON_FP32_NORM)
        total += b
        b, k_rg = _norm(ctx, width=kvd, rows=1 if wide else KV, zero_centred=zc, x_rg=k_rg,
                        const_width=kvd if wide else d, weight_on_fp32=spec.family in _WEIGHT_ON_FP32_NORM)
        total += b
    if not (q_rg or k_rg or v_rg):
        return total, False
    if spec.interleaved_rotary and (q_rg or k_rg):  # this layer's (1, s, rot) cos and sin (ModelSpec.interleaved_rotary)
        total += 2 * a * s * int(d * spec.partial_rotary_factor)
    eager = runs_eager(spec.family, ctx.attention)
    if not eager:
        legacy = ctx.hf_sdpa if ctx.attention is Attention.SDPA else V5_SDPA
        repeated = (masked and sdpa_window_repeats_kv(spec)) or legacy_sdpa_repeats_kv(spec, legacy)
        total += T * (2 * a * qd + 2 * a * (qd if repeated else kvd) + FP32 * H)
        if masked and not legacy_shared_mask(spec, legacy, padding_mask=ctx.padding_mask):
            # (before 4.53: one shared mask, activation_bytes)
            total += sdpa_window_mask_saved_bytes(micro_batch_size=ctx.b, seq_len=s, dtype_bytes=a)
        o_in_copy = gated  # Qwen3.5: q is contiguous after the partial-rotary cat, so is the output
        if spec.rotary_cat:  # the same rotary cat (GLM-4.5, ModelSpec.rotary_cat); its muls save only cos/sin
            o_in_copy = True
        if fused and (repeated or legacy.contiguous):
            # v is a copy (repeated, or made contiguous), no longer a slice keeping qkv_proj's output
            o_in_copy = not ctx.compiled
        elif legacy.contiguous:
            # transformers 4.48-4.55 makes q contiguous (head-major): the output's transpose is a copy
            # (attention.HF_SDPA_CONTIGUOUS); compiled layers keep the measured rules
            o_in_copy = o_in_copy or not ctx.compiled
        elif spec.fused_qkv and not fused:
            # Qwen (1.0): the attention kernel saves v, a split view of c_attn's output (modeling_qwen.py
            # ``mixed_x_layer.split``; FlashSelfAttention's ``rearrange`` of it is a view), so that output stays
            # alive; q and k are the rotary's new tensors, and the kernel's output is token-major (no copy)
            total += fused_qkv_extra_bytes(spec, tokens=T, dtype_bytes=a, value_saved=True)
        elif fused:
            total += fused_qkv_extra_bytes(spec, tokens=T, dtype_bytes=a, value_saved=True)
            # Phi-3's rotary ends in a cat: q is head-major, so is the kernel's output, and o_proj reads a copy;
            # compiled, Inductor writes q in the layout the kernel's output reshapes as a view (one Phi-3 layer,
            # CPU, full training: eager 12,456 B/token, compiled 8,520 = eager - (8h + 2I) - 2q)
            o_in_copy = not ctx.compiled
    else:
        s_rg = q_rg or k_rg
        # repeat_kv (transformers v5.24.0 models/llama/modeling_llama.py l.81-89) reshapes k expanded to
        # (b, KV, n_rep, s, d); with one KV head (MQA: Gemma-2B) the merged head dim has stride 0 and the reshape is
        # a view of k. torch.matmul then folds (b, H) into bmm's batch: a view again only for b = 1 (b > 1 meets the
        # stride-0 heads and copies), so with one sequence q@k^T and p@v save the kv-wide k and v (traced: a 4-layer
        # MQA llama/gemma, eager, b = 1: 2(qd - kvd) bytes per token and layer less); GQA, or b > 1, keep qd-wide copies
        rep = kvd if KV == 1 and ctx.b == 1 and not fused else qd
        if k_rg:
            total += T * a * qd  # q for q@k^T
        if q_rg:
            total += T * a * rep  # repeat_kv(k) (== k when kv_heads == heads, a view of k under MQA)
        if s_rg:
            if spec.family in SOFTCAP_FAMILIES:
                total += T * a * H * s  # tanh output
            total += T * FP32 * H * s  # softmax output (fp32)
        if v_rg:
            total += T * a * H * s  # bf16 probabilities for p@v
        if s_rg:
            total += T * a * rep  # repeat_kv(v)
            if sliced_v and KV == H:  # repeat_kv returns v itself: a slice of qkv_proj's output
                total += fused_qkv_extra_bytes(spec, tokens=T, dtype_bytes=a, value_saved=True)
        o_in_copy = True
    o_rg = True
    if gated:
        # attn * sigmoid(gate): sigmoid saves its output, mul saves both factors
        total += T * a * qd * 2 if q_rg else T * a * qd
    # o_proj input: a view of SDPA's saved output unless it was copied (eager / gated); TE fp8: o_proj saves its
    # own fp8 copy either way (the copy it was made from is then not saved)
    if ctx.full and ctx.linear_input_bytes:
        total += linear_input(ctx, qd)
    elif ctx.full and (o_in_copy or gated):
        total += T * a * qd
    elif ctx.frozen_saves_input and not ctx.full and (o_in_copy or gated):
        total += T * a * qd  # the frozen o_proj keeps its input, a copy here (a view of SDPA's saved output else)
    r = ctx.targets.get("o_proj")
    if r is not None:
        # o_proj's input is already saved when it is a view of SDPA's saved output, in full mode, or by the frozen base
        o_in_saved = ctx.full or ctx.frozen_saves_input or not (o_in_copy or gated)
        total += _adapter_saved(ctx, "o_proj", qd, r, input_saved=o_in_saved)
    return total, o_rg


def _dense_mlp(ctx: _Ctx, spec: ModelSpec, width: int, x_rg: bool, *, fused_glu: bool = False,
               input_saved: bool = False) -> tuple[int, bool]:
    """Gated MLP (act(gate) * up). ``fused_glu``: the gated activation saves only its input (gate and up, Megatron-Core's
    fused SwiGLU, ``megatron_dense_mlp_bytes``), not ``act(gate)`` too. ``input_saved``: another op already saves
    this input's storage (Qwen2-MoE's router reads the shared expert's input)."""
    T, a, h = ctx.T, ctx.a, spec.hidden_size
    total = 0
    if spec.fused_mlp and spec.moe is None:
        # Phi-3's gate_up_proj: gate and up are the two halves of one output (``chunk``); act(gate) saves gate and
        # the mul saves up, two views of the one 2w-wide storage: the same bytes as separate gate and up
        total, g_rg = _linear(ctx, "gate_up_proj", h, x_rg, input_saved=input_saved)
        u_rg = g_rg
    else:
        b, g_rg = _linear(ctx, "gate_proj", h, x_rg, input_saved=input_saved)
        total += b
        b, u_rg = _linear(ctx, "up_proj", h, x_rg, input_saved=True)
        total += b
    gi = ctx.glu_input_bytes or a  # the gate / up halves as the SwiGLU keeps them (fp8 input store: 1 B)
    if g_rg:
        total += T * gi * width  # act(gate) saves gate
    if u_rg and not ctx.compiled and not fused_glu:
        total += T * a * width  # mul saves act(gate) (compiled / fused: recomputed from the saved gate)
    if g_rg:
        total += T * gi * width  # mul saves up
    b, d_rg = _linear(ctx, "down_proj", width, g_rg or u_rg)
    total += b
    return total, g_rg or u_rg or d_rg


def _moe(ctx: _Ctx, spec: ModelSpec, x_rg: bool, *, rows: int | None = None,
         fused_glu: bool = False, probs_in_glu: bool = False, act_recomputed: bool = False,
         routing_weights_fp32: bool | None = None) -> tuple[int, bool]:
    """Qwen3-MoE sparse block, transformers' default ``grouped_mm`` experts (CPU with torch>=2.10 and
    CUDA sm80+). Every saved tensor has a routing-independent size (S = T·k rows, sorted by expert),
    so this is exact. The ``eager`` experts loop would instead save per-expert index tensors whose
    sizes depend on routing (not the default; not modelled).

    ``rows``: the expert rows this rank computes when they are not its own T·k (Megatron-Core, see
    ``megatron_moe_bytes``); the router, top-k, index and combine tensors stay on the rank's T tokens.
    ``fused_glu``: the SwiGLU saves only its input (the gate/up output), not ``act(gate)`` too.
    ``probs_in_glu``: the routing weights multiply inside the experts' SwiGLU, so the combine keeps no expert output
    (Megatron-Core >= 0.12.1, ``megatron_moe_bytes``). ``act_recomputed``: the down projection's input is freed and
    recomputed (Megatron-Core ``moe_act``). ``routing_weights_fp32``: the combine's mul saves fp32 routing weights
    (None: as transformers runs the family, ``MoeSpec.routing_weights_fp32``; another runtime says its own)."""
    moe = spec.moe
    assert moe is not None
    T, a, h = ctx.T, ctx.a, spec.hidden_size
    E, k = moe.num_experts, moe.experts_per_token
    fp32_weights = moe.routing_weights_fp32 if routing_weights_fp32 is None else routing_weights_fp32
    total = 0
    router_t = "gate" in ctx.targets
    # router F.linear(x, W): saves x when W (or PEFT's merged W) needs grad; PEFT saves the merged bf16 W
    w_rg = ctx.full or router_t
    if w_rg:
        total += T * a * h
    if router_t:
        total += a * E * h
    logits_rg = x_rg or w_rg
    if logits_rg:
        total += T * FP32 * E  # softmax output
        total += T * INT64 * k  # topk indices
        if moe.norm_topk_prob:
            total += T * (FP32 + FP32 * k)  # top-k renormalisation: sum and values (norm_topk_prob)
    gated_shared = bool(moe.shared_expert_intermediate_size) and moe.shared_expert_gate
    if gated_shared:  # PEFT never wraps Qwen2-MoE's 3-D experts: a gate/up/down_proj target is the shared expert's
        routed_ctx = _without_expert_targets(ctx)
    else:
        routed_ctx = ctx
    b, o_rg = _routed_experts(routed_ctx, spec, x_rg, logits_rg, rows=rows, fused_glu=fused_glu,
                              probs_in_glu=probs_in_glu,
                              routing_weight_bytes=FP32 if fp32_weights else a,
                              act_recomputed=act_recomputed)
    total += b
    if gated_shared:
        b, s_rg = _gated_shared_expert(ctx, spec, x_rg, input_saved=w_rg)
        total += b
        o_rg = o_rg or s_rg
    return total, o_rg


def _without_expert_targets(ctx: _Ctx) -> _Ctx:
    """``ctx`` without the short names the routed experts would read as their adapters (``_routed_experts``)."""
    targets = {n: r for n, r in ctx.targets.items() if n not in ("gate_up_proj", "gate_proj", "up_proj", "down_proj")}
    return replace(ctx, targets=targets)


def _gated_shared_expert(ctx: _Ctx, spec: ModelSpec, x_rg: bool, *, input_saved: bool) -> tuple[int, bool]:
    """Qwen2-MoE's shared expert and its sigmoid gate (transformers v5.24.0 models/qwen2_moe/modeling_qwen2_moe.py
    l.332-338, l.343-347: ``shared_expert`` a ``Qwen2MoeMLP`` of ``shared_expert_intermediate_size``,
    ``shared_expert_gate = nn.Linear(hidden, 1, bias=False)``, ``sigmoid(shared_expert_gate(x)) * shared_expert(x)``):
    the gated MLP (4 saved widths in full training), the gate linear's input (the block input, one storage with the
    router's and the MLP's), the sigmoid's output (one value per token, saved by the sigmoid and by the mul) and the
    shared expert's output (saved by the mul when the gate needs a gradient). PEFT wraps these ``nn.Linear`` by
    their short names (``trainfit.memory.lora``). ``input_saved``: the router already saves the block input."""
    moe = spec.moe
    assert moe is not None
    T, a, h = ctx.T, ctx.a, spec.hidden_size
    total, s_rg = _dense_mlp(ctx, spec, moe.shared_expert_intermediate_size, x_rg, input_saved=input_saved)
    b, g_rg = _linear(ctx, "shared_expert_gate", h, x_rg, input_saved=input_saved or ctx.full)
    total += b
    if g_rg or s_rg:
        total += T * a  # sigmoid output (saved by the sigmoid when its input needs grad, and by the mul)
    if g_rg:
        total += T * a * h  # mul saves the shared expert's output
    return total, g_rg or s_rg


def _routed_experts(ctx: _Ctx, spec: ModelSpec, x_rg: bool, logits_rg: bool, *, rows: int | None, fused_glu: bool,
                    probs_in_glu: bool, routing_weight_bytes: int, fp8_inputs: bool = True, expert_bias: bool = False,
                    unfused_act_widths: int = 1, act_recomputed: bool = False,
                    adapter_weights: bool = True) -> tuple[int, bool]:
    """A grouped_mm MoE block from the dispatch to the combine (after the router and top-k; ``logits_rg``: the
    routing weights need a gradient), shared by ``_moe``, DeepSeek-V3's and gpt-oss's blocks (``arch_activations``):
    the permutation indices, the experts' grouped GEMM inputs and GLU on ``rows`` (default T·k), the combine.
    ``routing_weight_bytes``: the dtype the combine's mul saves the routing weights in; ``fp8_inputs`` false: the
    grouped GEMMs save the compute-dtype input even under Transformer Engine fp8. gpt-oss's experts:
    ``expert_bias``, the gathered ``gate_up_proj_bias[expert_ids]`` index; ``unfused_act_widths``, the ``w``-wide
    tensors an unfused GLU saves besides the gate_up output (SwiGLU 1: act(gate); gpt-oss's clamped GLU 4: the clamped
    gate, the sigmoid, up + 1, the GLU); ``act_recomputed``, the down projection's input is freed and recomputed
    (Megatron-Core ``moe_act``); ``adapter_weights`` false, PEFT's merged expert weights are not counted (gpt-oss's
    figure never counted them). Returns (bytes, output requires grad)."""
    moe = spec.moe
    assert moe is not None
    T, a, h = ctx.T, ctx.a, spec.hidden_size
    E, k, w = moe.num_experts, moe.experts_per_token, moe.expert_intermediate_size
    Tk = T * k if rows is None else rows  # expert-side rows (grouped GEMM inputs, SwiGLU)
    total = 0
    experts_t = "gate_up_proj" in ctx.targets or "gate_proj" in ctx.targets or "up_proj" in ctx.targets
    down_t = "down_proj" in ctx.targets
    sel_rg = x_rg
    if sel_rg:
        total += T * INT64 * k  # hidden_states[perm // k]
    if logits_rg:
        total += T * INT64 * k  # sample_weights[perm]
    gu_rg = ctx.full or experts_t
    dn_rg = ctx.full or down_t
    p_rg = sel_rg or gu_rg
    if gu_rg and expert_bias:
        total += T * INT64 * k  # gate_up_proj_bias[expert_ids]
    if p_rg or dn_rg:
        total += INT32 * E  # offsets, saved by grouped_mm
    fp8_in = ctx.full and fp8_inputs
    if gu_rg:
        total += linear_input(ctx, h, tokens=Tk) if fp8_in else Tk * a * h  # grouped_mm input
    if experts_t and adapter_weights:
        r = ctx.targets.get("gate_up_proj") or ctx.targets.get("gate_proj") or ctx.targets.get("up_proj")
        total += a * E * (2 * w * h + r * (2 * w + h))  # merged weight + bf16 lhs/rhs of baddbmm
    if p_rg:
        total += Tk * a * 2 * w  # act(gate) saves the whole gate_up output (gate is a view)
        if not fused_glu:
            total += Tk * a * w * unfused_act_widths  # SwiGLU: mul saves act(gate)
    if dn_rg and not act_recomputed:
        total += linear_input(ctx, w, tokens=Tk) if fp8_in else Tk * a * w  # grouped_mm input
    if down_t and adapter_weights:
        r = ctx.targets["down_proj"]
        total += a * E * (h * w + r * (h + w))
    o_rg = p_rg or dn_rg
    if o_rg:
        total += T * k * routing_weight_bytes  # mul saves the routing weights
    if logits_rg and not probs_in_glu:
        total += T * k * a * h  # mul saves the expert output
    if o_rg or logits_rg:
        total += T * INT64 * k  # weighted_out[inv_perm]
    return total, o_rg or logits_rg


MEGATRON_MOE_SOURCES = (
    "NVIDIA/Megatron-LM core_v0.12.0 (d580efc68a9f0dbf1945f834f6f6200cd01d3343): megatron/core/transformer/moe/"
    "moe_layer.py l.127-137 (training refuses MoE with tensor parallel but no sequence parallel), token_dispatcher.py"
    " l.147 / l.158 (the dispatcher's input is the [S/TP, B, H] shard), l.279-280 and l.531-544 (permute -> EP"
    " all-to-all -> all-gather over the expert-tensor-parallel group, tp_group = expert TP, l.62-64), experts.py"
    " TEGroupedMLP.forward (bias_swiglu_impl, l.745), fusions/fused_bias_swiglu.py SwiGLUFunction.forward l.63"
    " (save_for_backward(input) only); the same at d98e8a64ddf34856e74b24714e3bedb2f5a39553 (token_dispatcher.py"
    " l.51-59 notation num_local_tokens = S/TP*B, fused_bias_swiglu.py l.235, WeightedSwiGLUFunction l.270)")
"""Where ``megatron_moe_bytes`` reads Megatron-Core's MoE block."""
MEGATRON_FUSED_SWIGLU_SOURCES = (
    "bias_activation_fusion on: Megatron-LM --swiglu with bias_swiglu_fusion unless --no-bias-swiglu-fusion"
    " (megatron/training/arguments.py l.2895-2898 @d98e8a64), NVIDIA/NeMo nemo/collections/llm/gpt/model/mixtral.py l.76"
    " MixtralConfig @7192a2c944c48ab253f3f711ee52fe2dc986a3bb, NVIDIA-NeMo/Megatron-Bridge"
    " src/megatron/bridge/perf_recipes/qwen/*/qwen3_moe.py (cfg.model.bias_activation_fusion = True)"
    " @067f987df03b8355b03192d88d70f1709fedf51a, NVIDIA-NeMo/RL nemo_rl/models/megatron/setup.py l.2293"
    " (setdefault True) @7ea279abfbeb")
"""Why ``megatron_moe_bytes`` takes the fused SwiGLU (Megatron-Core's own TransformerConfig default is False)."""


def full_ctx(tokens: int, compute_dtype_bytes: int, *, linear_input_bytes: float = 0.0, compiled: bool = False) -> _Ctx:
    """The context of one block's full-training figure over ``tokens`` tokens in one sequence (SDPA, no adapters)."""
    return _Ctx(T=tokens, b=1, s=tokens, a=compute_dtype_bytes, full=True, targets={}, attention=Attention.SDPA,
                linear_input_bytes=linear_input_bytes, compiled=compiled)


def moe_block_bytes(spec: ModelSpec, *, tokens: int, compute_dtype_bytes: int = 2, linear_input_bytes: float = 0.0,
                    rows: int | None = None, fused_glu: bool = False, probs_in_glu: bool = False,
                    act_recomputed: bool = False, routing_weights_fp32: bool | None = None) -> int:
    """Saved bytes of one full-training MoE block (``_moe``, its input needing a gradient) over ``tokens`` tokens:
    the per-op figure ``activation_bytes`` counts for each MoE layer of a Qwen3-MoE-layout model, or with ``rows``
    / ``fused_glu`` / ``probs_in_glu`` / ``act_recomputed`` another runtime's (``megatron_moe_bytes``). Families with
    their own layer model (``arch_activations``: gpt-oss, DeepSeek-V3) are not handled here."""
    ctx = full_ctx(tokens, compute_dtype_bytes, linear_input_bytes=linear_input_bytes)
    return _moe(ctx, spec, True, rows=rows, fused_glu=fused_glu, probs_in_glu=probs_in_glu,
                act_recomputed=act_recomputed, routing_weights_fp32=routing_weights_fp32)[0]


def residual_norm_bytes(spec: ModelSpec, *, tokens: int, compute_dtype_bytes: int = 2) -> int:
    """Saved bytes of one full-training residual-stream RMSNorm (its input needing a gradient) over ``tokens`` tokens:
    the per-op figure a layer's input or pre-MLP norm adds (``_norm``; gpt-oss's fp32-weight norm:
    ``arch_activations.gpt_oss_norm_bytes``)."""
    if spec.family == "gpt_oss":
        from trainfit.memory.arch_activations import gpt_oss_norm_bytes

        return gpt_oss_norm_bytes(spec, tokens=tokens, compute_dtype_bytes=compute_dtype_bytes)
    h = spec.hidden_size
    return _norm(full_ctx(tokens, compute_dtype_bytes), width=h, rows=1, zero_centred=spec.family in ZERO_CENTRED_NORM_FAMILIES,
                 x_rg=True, const_width=h)[0]


def megatron_moe_bytes(spec: ModelSpec, *, tokens: int, sequence_shards: int = 1, expert_tensor_parallel: int = 1,
                       compute_dtype_bytes: int = 2, linear_input_bytes: float = 0.0,
                       probs_in_experts: bool = True, recompute_moe_act: bool = False) -> int:
    """Saved bytes of one Megatron-Core MoE block (full training, TE grouped experts) on one rank of a
    tensor-parallel shard spec (``shard_spec``: expert width already divided by the expert TP size).

    * The block runs on the sequence-parallel shard: router, top-k, permutation and combine hold
      ``tokens / sequence_shards`` tokens (Megatron refuses tensor parallel without sequence parallel for MoE).
    * The experts compute that shard's ``k`` rows per token, all-gathered over the expert-tensor-parallel group:
      ``tokens / sequence_shards · expert_tensor_parallel · k`` rows on average (routing-balanced), each
      ``expert_intermediate_size / etp`` wide.
    * The fused SwiGLU (``bias_swiglu_impl``) saves only its input, the fc1 output; ``act(gate)`` is not kept a
      second time (``MEGATRON_FUSED_SWIGLU_SOURCES``).

    * ``probs_in_experts`` (Megatron-Core >= 0.12.1): the routing probabilities multiply inside the experts' fused
      SwiGLU (``weighted_bias_swiglu_impl``) and the combine's unpermute takes no probabilities, so no expert output
      is kept for their gradient; before (0.11, 0.12.0) the unpermute multiplied the expert output by them and saved
      it, ``t · k`` rows of ``h`` (``MEGATRON_PROBS_IN_EXPERTS_SOURCES``).

    * ``recompute_moe_act`` (``--recompute-modules moe_act``): the activation runs under ``CheckpointWithoutOutput``
      and its output, fc2's input, is freed after fc2 and recomputed in backward (NVIDIA/Megatron-LM
      megatron/core/transformer/moe/experts.py TEGroupedMLP l.802-805, l.958-970
      @92c8482e6dcd11c3666c61bb8d1f7e8d0730ed13); the activation's own input, the fc1 output, stays saved (by the
      checkpoint instead of the fused SwiGLU).

    Everything else is the per-op figure of ``_moe`` on those tokens and rows (``MEGATRON_MOE_SOURCES``). Not
    modelled: the weighted SwiGLU saves the permuted probabilities on the expert rows (fp32) where the per-op figure
    keeps the routing weights on ``t · k`` rows."""
    moe = spec.moe
    assert moe is not None
    t = tokens // sequence_shards
    rows = t * expert_tensor_parallel * moe.experts_per_token
    return moe_block_bytes(spec, tokens=t, compute_dtype_bytes=compute_dtype_bytes,
                           linear_input_bytes=linear_input_bytes, rows=rows, fused_glu=True,
                           probs_in_glu=probs_in_experts, act_recomputed=recompute_moe_act,
                           routing_weights_fp32=False)  # the figure as written before Mixtral: not transformers' rule


MEGATRON_PROBS_IN_EXPERTS_SOURCES = (
    "NVIDIA/Megatron-LM: core_v0.12.0 (d580efc68a9f0dbf1945f834f6f6200cd01d3343) and 3cdfd613e68e (0.12.0rc4)"
    " token_dispatcher.py l.641 (alltoall combine: unpermute(..., probs=self.probs)), moe_utils.py l.354"
    " (permuted_tokens * permuted_probs.unsqueeze(-1): the product saves the expert output); core_v0.12.1"
    " (a845aa7e12b3a117e24c2352b9e3e60bad2e3a17), the core_r0.12.0 branch at 7094270c6fa1dbc6b2e99072171e3a559ca36d0f"
    " (package_info 0.12.2; experts.py l.24, l.257-263), 0.16.0rc0"
    " (92c8482e6dcd11c3666c61bb8d1f7e8d0730ed13: experts.py TEGroupedMLP bias_act_func l.897-909"
    " weighted_bias_swiglu_impl(intermediate, bias, permuted_probs), token_dispatcher.py l.834 unpermute without"
    " probs), 0.20.0 (2a75ac12c54ba6a42b34024756820bf819a2e25f): the probabilities multiply inside the experts")
"""Where ``megatron_moe_bytes(probs_in_experts=...)`` reads the two Megatron-Core combines."""


MEGATRON_DENSE_SWIGLU_SOURCES = (
    "NVIDIA/Megatron-LM megatron/core/transformer/mlp.py MLP.forward: bias_swiglu_impl when bias_activation_fusion and"
    " activation_func is F.silu with gated_linear_unit (l.105-113 @d580efc68a9f0dbf1945f834f6f6200cd01d3343, l.308-309"
    " @d98e8a64ddf34856e74b24714e3bedb2f5a39553; other activations stay unfused). bias_activation_fusion on for Llama:"
    " NVIDIA/NeMo nemo/collections/llm/gpt/model/llama.py LlamaConfig l.77, Llama3Config l.149"
    " @8cfedd7203462cb251a914e700e5605444277561, NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/models/llama/"
    "llama_bridge.py l.56 @067f987df03b8355b03192d88d70f1709fedf51a, Megatron-LM --swiglu (arguments.py l.2895-2898"
    " @d98e8a64), NeMo RL setup.py l.2293 (setdefault True, every model) @7ea279abfbeb. Not modelled: NeMo 2's"
    " Qwen2Config / MistralConfig leave Megatron-Core's default (False) and run the unfused SwiGLU")
"""Why ``megatron_dense_mlp_bytes`` takes the fused SwiGLU for a dense SiLU-gated MLP."""


def dense_mlp_bytes(spec: ModelSpec, *, tokens: int, compute_dtype_bytes: int = 2, linear_input_bytes: float = 0.0,
                    compiled: bool = False, fused_glu: bool = False) -> int:
    """Saved bytes of one full-training dense gated MLP (``_dense_mlp``, its input needing a gradient) over ``tokens``
    tokens, ``spec.intermediate_size`` wide: the per-op figure ``activation_bytes`` counts for each dense layer of a
    Llama-style model (``compiled``: under the compiled rules), or with ``fused_glu`` Megatron-Core's
    (``megatron_dense_mlp_bytes``). Families with their own layer model (``arch_activations``) are not handled here."""
    ctx = full_ctx(tokens, compute_dtype_bytes, linear_input_bytes=linear_input_bytes, compiled=compiled)
    return _dense_mlp(ctx, spec, spec.intermediate_size, True, fused_glu=fused_glu)[0]


def megatron_dense_mlp_bytes(spec: ModelSpec, *, tokens: int, compute_dtype_bytes: int = 2,
                             linear_input_bytes: float = 0.0, compiled: bool = False) -> int:
    """Saved bytes of one Megatron-Core dense MLP (full training) on one rank of a tensor-parallel shard spec
    (``shard_spec``: intermediate width already divided by tp) over the ``tokens`` its fc1 outputs (all of them: the
    sequence-parallel all-gather comes before fc1). A SiLU-gated MLP runs the fused SwiGLU (``bias_swiglu_impl``), which
    saves only its input, the fc1 output: ``act(gate)`` is not kept a second time (``MEGATRON_DENSE_SWIGLU_SOURCES``).
    Any other activation keeps the per-op figure."""
    return dense_mlp_bytes(spec, tokens=tokens, compute_dtype_bytes=compute_dtype_bytes,
                           linear_input_bytes=linear_input_bytes, compiled=compiled,
                           fused_glu=spec.hidden_act == "silu")


FP8_GLU_INPUT_BYTES = 1.0
"""Bytes per element of the SwiGLU input Megatron-Core keeps under ``activation_func_fp8_input_store``
(``torch.float8_e4m3fn``)."""

MEGATRON_FP8_GLU_INPUT_SOURCES = (
    "NVIDIA/Megatron-LM as bundled by mlcommons/training_results_v5.0 @0fdc28f013256aea84fa36fdaf1e0fa46094b18c"
    " (GigaComputing/benchmarks/llama2_70b_lora/implementations/pytorch/Megatron-LM/): megatron/core/transformer/"
    "transformer_config.py l.112-114 ('activation_func_fp8_input_store: Store the input of MLP activation function in"
    " FP8 for backprop to save memory. The stored input is casted back to the original precision before backprop"
    " compuatation.'), l.835-837 (SwiGLU only); megatron/core/transformer/mlp.py l.113-117 (MLP.forward hands it to"
    " bias_swiglu_impl on the fused path); megatron/core/fusions/fused_bias_swiglu.py l.61-63 (SwiGLUFunction.forward:"
    " input_for_backward = input.to(torch.float8_e4m3fn) if fp8_input_store else input; ctx.save_for_backward("
    "input_for_backward)) and l.69-71 (cast back in backward). NeMo's MLPerf llama2_70b_lora recipe sets it from"
    " FP8_ACT (NVIDIA/benchmarks/llama2_70b_lora/implementations/nyx_n1_ngc25.04_nemo/conf/"
    "megatron_gpt_peft_tuning_config.yaml l.46, train.py l.218; config_DGXB200_1x8x1xtp1pp1cp1.sh l.13 FP8_ACT=1)")
"""Where ``precision.fp8_activation_input_store`` comes from."""


def glu_saved_input_bytes(*, compute_dtype_bytes: int, fp8_input_store: bool) -> float:
    """Bytes per element a dense SwiGLU keeps of its input (fc1's gate and up halves) for its backward: the compute
    dtype's, or 1 B under Megatron-Core's ``activation_func_fp8_input_store`` (``MEGATRON_FP8_GLU_INPUT_SOURCES``),
    which casts the saved input to float8_e4m3fn and back in the backward. Only the fused SwiGLU takes the option; the
    MoE experts' SwiGLU (``megatron_moe_bytes``) is not changed here."""
    return FP8_GLU_INPUT_BYTES if fp8_input_store else float(compute_dtype_bytes)


def _deltanet(ctx: _Ctx, spec: ModelSpec, x_rg: bool) -> tuple[int, bool]:
    """Gated DeltaNet with the CUDA kernels transformers runs when they are installed (``DELTANET_KERNELS``):
    causal-conv1d's ``causal_conv1d_fn`` (SiLU fused: saves only its input) and flash-linear-attention's
    ``chunk_gated_delta_rule`` (q/k L2-normalised in the kernel; saves the normalised bf16 q and k on the
    key heads with their fp32 rstd, a contiguous copy of v, the fp32 chunk-cumulated gate, beta and the
    bf16 (T, Hv, 64) UT-transform matrix A). Sources in ``trainfit.trace.kernels``, which emulates both
    kernels in the trace.

    Not modelled: transformers 5.3.0 (wheel ``transformers/models/qwen3_5/modeling_qwen3_5.py``
    l.588-590) and axolotl's packed forward (axolotl-ai-cloud/axolotl
    ``src/axolotl/monkeypatch/models/qwen3_5/modeling.py`` l.198-200
    @c119382337645796dbc8e82e2b212f14a58e69bd) repeat q and k from the key heads to the value heads
    *before* the kernel, so there the kernel saves Hv-head q and k (Qwen3.5-27B, 2048 tokens: 2 x 33.6 MB
    more per layer, inside one layer's recompute under checkpointing); the transformers this file and the
    trace follow (5.24.0: ``modeling_qwen3_5.py`` l.325-326, l.632) repeat inside the torch fallback only,
    and the kernel gets Hk heads."""
    la = spec.linear_attention
    assert la is not None
    T, a, h = ctx.T, ctx.a, spec.hidden_size
    Hk, Hv, dk, dv = la.num_key_heads, la.num_value_heads, la.key_head_dim, la.value_head_dim
    vd, cd = la.value_dim, la.conv_dim
    total = 0
    qkv_b, qkv_rg = _linear(ctx, "in_proj_qkv", h, x_rg)
    z_b, z_rg = _linear(ctx, "in_proj_z", h, x_rg, input_saved=True)
    b_b, b_rg = _linear(ctx, "in_proj_b", h, x_rg, input_saved=True)
    a_b, a_rg = _linear(ctx, "in_proj_a", h, x_rg, input_saved=True)
    total += qkv_b + z_b + b_b + a_b
    conv_rg = qkv_rg or ctx.full
    if conv_rg:
        total += T * a * cd  # CausalConv1dFn saves its input (in_proj_qkv's output) and the weight
    # g = -exp(A_log) * softplus(a + dt_bias)
    if ctx.full:
        total += FP32 * Hv  # exp(A_log) output
    g_rg = a_rg or ctx.full
    if g_rg:
        total += T * FP32 * Hv  # softplus input
        total += FP32 * Hv  # -exp(A_log), saved by the mul
    if ctx.full:
        total += T * FP32 * Hv  # softplus output, saved by the mul
    core_rg = conv_rg or b_rg or g_rg
    if core_rg:
        # ChunkGatedDeltaRuleFunction.save_for_backward: q, q_rstd, k, k_rstd, v, g, beta, A; beta is
        # sigmoid(b), the storage sigmoid saves too
        total += T * (2 * a * Hk * dk + 2 * FP32 * Hk + a * Hv * dv + FP32 * Hv + a * Hv + a * Hv * DELTANET_CHUNK)
    after_kernel = total
    # gated RMSNorm over value_head_dim: norm(core) * silu(z.float())
    if core_rg:
        total += T * (FP32 * vd + FP32 * Hv)  # fp32 copy + rsqrt
    if ctx.full:
        total += T * a * vd  # weight * x saves x_bf16
    n_rg = core_rg or ctx.full
    if z_rg:
        total += T * FP32 * vd  # silu input (fp32 z)
        total += T * a * vd  # mul saves the normed bf16 input
    if n_rg:
        total += T * FP32 * vd  # mul saves silu(z)
    after_norm = total
    b_o, o_rg = _linear(ctx, "out_proj", vd, n_rg or z_rg)
    total += b_o
    # what the layer saves after the kernel / the gated norm / out_proj (``_layer`` adds the MLP's)
    ctx.parts["post"] = {"kernel": total - after_kernel, "norm": total - after_norm, "out_proj": 0}
    ctx.parts["live"] = _deltanet_live(ctx, spec, normed_saved=ctx.full)
    return total, o_rg


def _deltanet_live(ctx: _Ctx, spec: ModelSpec, *, normed_saved: bool) -> dict[str, tuple[int, str]]:
    """Bytes live beside a Gated DeltaNet layer's saved tensors at the moments that can peak, each with the
    point of the layer up to which its saved tensors exist (``"kernel"``: saved up to and including the
    kernel's; ``"norm"``: up to the gated norm's). What each kernel allocates: ``trainfit.trace.kernels``.

    * ``forward``: inside ``chunk_fwd_o`` in a checkpointed forward (nothing is saved; the whole live set):
      the normed input, the conv output (q/k/v are views of it), z, a, b, beta, the fp32 gate, the kernel's
      contiguous q/k/v copies, normalised q/k and rstd, the fp32 cumulated gate, A, w, u, the chunk states
      h, v_new and the output;
    * ``recompute``: the same moment when backward recomputes the layer (saved tensors are kept, so only
      the unsaved ones count), plus the incoming gradient of the layer output;
    * ``norm``: the end of the gated RMSNorm in the recompute: the conv output, z, a, b, the fp32 gate,
      the kernel output, the norm's fp32 product and its bf16 cast, the layer-output gradient;
    * ``out_proj``: out_proj's forward in the recompute: the inputs above, its (unsaved) input, its base
      output and, with an adapter, lora_B's output and its scaled copy, the layer-output gradient;
    * ``backward``: inside the kernel's backward at its fullest (``chunk_bwd_dqkwg`` or
      ``prepare_wy_repr_bwd``): w, u, v_new, h, dh, dv, the output gradient, dq, dk, dw, partial fp32
      dg (or the next step's dk2, dv, dg2, db), the gradient of z and the residual gradient.
    """
    la = spec.linear_attention
    assert la is not None
    T, a, b, h = ctx.T, ctx.a, ctx.b, spec.hidden_size
    Hk, Hv, dk, dv = la.num_key_heads, la.num_value_heads, la.key_head_dim, la.value_head_dim
    vd, cd = la.value_dim, la.conv_dim
    states = b * -(-ctx.s // DELTANET_CHUNK) * Hv * dk * dv * a  # h (and dh) in the compute dtype
    nk = -(-dk // DELTANET_DQKWG_TILE)
    gva = a * Hk * dk if Hk != Hv else 0  # dq / dk summed from value heads to key heads
    normed = 0 if normed_saved else a * h
    inputs = a * cd + a * vd + 2 * a * Hv + FP32 * Hv  # conv output, z, a, b, fp32 gate
    not_saved = inputs + 2 * a * Hk * dk + a * Hv * dk + 3 * a * Hv * dv  # q/k copies; w; u, v_new, output
    saved_in_kernel = 2 * a * Hk * dk + 2 * FP32 * Hk + a * Hv * dv + FP32 * Hv + a * Hv + a * Hv * DELTANET_CHUNK
    at_dqkwg = a * Hv * (4 * dk + 4 * dv) + FP32 * Hv * nk + gva
    at_wy = a * Hv * (3 * dk + 5 * dv) + 2 * a * Hk * dk + 2 * FP32 * Hv + a * Hv + gva
    r = ctx.targets.get("out_proj")
    lora_out = 0 if r is None else 2 * ctx.adapter_bytes * h  # lora_B's output and its scaled copy
    return {
        "out_proj": (T * (inputs + normed + a * h + (0 if ctx.full else a * vd) + a * h + lora_out), "out_proj"),
        "forward": (T * (a * h + not_saved + saved_in_kernel) + states, ""),
        "recompute": (T * (not_saved + normed + a * h) + states, "kernel"),
        "norm": (T * (inputs + a * vd + FP32 * vd + a * vd + normed + a * h), "norm"),
        "backward": (T * (max(at_dqkwg, at_wy) + a * vd + a * h) + 2 * states, "kernel"),
    }


def _layer(ctx: _Ctx, spec: ModelSpec, i: int, x_rg: bool) -> tuple[int, bool]:
    """Bytes of decoder layer ``i`` and whether its output needs a gradient."""
    if spec.family in ARCH_FAMILIES:
        from trainfit.memory.arch_activations import layer_bytes

        return layer_bytes(ctx, spec, i, x_rg)
    h = spec.hidden_size
    zc = spec.family in ZERO_CENTRED_NORM_FAMILIES
    four = spec.norms_per_layer == 4
    ctx.saved_inputs.clear()
    ctx.parts.clear()
    if spec.post_block_norms:
        return _post_norm_layer(ctx, spec, i, x_rg)
    total, n_rg = _norm(ctx, width=h, rows=1, zero_centred=zc, x_rg=x_rg, const_width=h, residual=True)
    if spec.layer_kind(i) is LayerKind.FULL_ATTENTION:
        b, o_rg = _attention(ctx, spec, n_rg, masked=sdpa_masked(spec, layer=i, kv_tokens=ctx.s,
                                                                 attention=ctx.attention,
                                                                 padding_mask=ctx.padding_mask))
    else:
        b, o_rg = _deltanet(ctx, spec, n_rg)
    total += b
    attention_end = total
    if four:  # Gemma-2 post_attention_layernorm (its output goes to the residual add)
        b, o_rg = _norm(ctx, width=h, rows=1, zero_centred=zc, x_rg=o_rg, const_width=h, residual=True)
        total += b
    res_rg = x_rg or o_rg
    b, n2_rg = _norm(ctx, width=h, rows=1, zero_centred=zc, x_rg=res_rg, const_width=h, residual=True)
    total += b
    if spec.family in DEEPSEEK_MOE_FAMILIES:
        from trainfit.memory.arch_activations import _deepseek_moe, _without_expert_names

        if spec.moe is not None and spec.moe.is_moe_layer(i):
            b, m_rg = _deepseek_moe(ctx, spec, n2_rg)
        else:  # the dense first layers: PEFT's converted expert names leave their gate/up/down unwrapped
            b, m_rg = _dense_mlp(_without_expert_names(ctx), spec, spec.intermediate_size, n2_rg)
    elif spec.moe is not None and spec.moe.is_moe_layer(i):
        b, m_rg = _moe(ctx, spec, n2_rg)
    else:
        b, m_rg = _dense_mlp(ctx, spec, spec.intermediate_size, n2_rg)
    total += b
    if four:
        b, m_rg = _norm(ctx, width=h, rows=1, zero_centred=zc, x_rg=m_rg, const_width=h, residual=True)
        total += b
    if "post" in ctx.parts:  # what the MLP block saves comes after the DeltaNet kernel and norm too
        ctx.parts["post"] = {k: v + total - attention_end for k, v in ctx.parts["post"].items()}
    ctx.parts["after_attention"] = total - attention_end
    return total, res_rg or m_rg


def _post_norm_layer(ctx: _Ctx, spec: ModelSpec, i: int, x_rg: bool) -> tuple[int, bool]:
    """OLMo 2's layer (transformers v5.24.0 models/olmo2/modeling_olmo2.py l.299-316): x + norm(attn(x)), then
    y + norm(mlp(y)). q/k/v read the layer input itself (q_proj saves it, 2h, as it saves the input norm's output
    elsewhere) and gate/up the residual sum; each post-norm normalises a block output, which needs a gradient
    whenever the block holds a trained op."""
    h = spec.hidden_size
    total, o_rg = _attention(ctx, spec, x_rg)
    attention_end = total
    b, o_rg = _norm(ctx, width=h, rows=1, zero_centred=False, x_rg=o_rg, const_width=h, residual=True,
                    weight_on_fp32=spec.family in _WEIGHT_ON_FP32_NORM)
    total += b
    res_rg = x_rg or o_rg
    b, m_rg = _dense_mlp(ctx, spec, spec.intermediate_size, res_rg)
    total += b
    b, m_rg = _norm(ctx, width=h, rows=1, zero_centred=False, x_rg=m_rg, const_width=h, residual=True,
                    weight_on_fp32=spec.family in _WEIGHT_ON_FP32_NORM)
    total += b
    ctx.parts["after_attention"] = total - attention_end
    return total, res_rg or m_rg


def compiled_rules_apply(spec: ModelSpec, *, trainable: TrainableSpec, attention: Attention) -> bool:
    """Whether ``activation_bytes(compiled=True)`` has measured rules for this layer stack (module docstring):
    full training or PEFT LoRA without dropout (bf16 or fp32 adapters) of dense, full-attention, Llama-style
    layers, with or without Qwen3's per-head qk-norm (no output gate), under SDPA/flash; OLMo 2 in full training."""
    lora = trainable.scope is Scope.LORA and trainable.lora is not None and trainable.lora.dropout == 0
    return ((trainable.scope is Scope.FULL or lora) and spec.family not in ZERO_CENTRED_NORM_FAMILIES and spec.family not in ARCH_FAMILIES
            and (trainable.scope is Scope.FULL or not spec.post_block_norms)  # OLMo 2: measured for full training only
            and spec.moe is None and spec.linear_attention is None and not spec.attn_output_gate
            and (trainable.scope is Scope.FULL or not spec.fused_projections)  # Phi-3: measured for full training
            and not spec.rotary_cat and spec.norms_per_layer == 2  # GLM-4.5 / GLM-4: not measured compiled
            and spec.num_full_attention_layers == spec.num_layers and not runs_eager(spec.family, attention))


def _targets(spec: ModelSpec, trainable: TrainableSpec) -> dict[str, int]:
    if trainable.scope is Scope.FULL or trainable.lora is None:
        return {}
    out: dict[str, int] = {}
    for g in targeted_groups(spec, trainable.lora):
        name, r = g.name.rsplit(".", 1)[-1], trainable.lora.rank * g.lora_rank_multiplier
        if g.routed and g.name.startswith("experts."):
            # transformers 4.x's per-expert linears (memory.lora._v4_groups) read as the stacks they are in 5.x: the
            # MoE block here is transformers 5's grouped_mm block (_routed_experts), on 4.x an approximation
            name, r = ("down_proj", r) if name in ("down_proj", "w2") else ("gate_up_proj", 2 * r)
        out[name] = r
    return out


GPTQ_KERNEL_SWITCH_ROWS = 128
"""AutoGPTQ's ``kernel_switch_threshold``: a ``qlinear_cuda_old`` QuantLinear multiplies an input of fewer rows
(tokens of the call, ``x.reshape(-1, x.shape[-1])``) with the fused ``vecquant4matmul`` kernel, and from this many
rows on unpacks the weight with PyTorch ops and ``torch.matmul`` (AutoGPTQ/AutoGPTQ
auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py l.32, l.196-200 @ef442d9f70c50a9c1d9f2d4aa8622d1b89c83ea2)."""

GPTQ_TORCH_SAVED_WEIGHT_BYTES = 2.0
"""Bytes per weight element AutoGPTQ's PyTorch path keeps for the backward: ``weight = scales * (weight - zeros)``
is fp16 (the fp16 ``scales``), and ``out = torch.matmul(x.half(), weight)`` (qlinear_cuda_old.py l.268-269
@ef442d9f) records the matmul with ``weight`` as its saved ``mat2`` for the input gradient whenever ``x`` needs one;
``weight`` itself is made from buffers and needs none, so ``x`` is not saved. The copy is one per call, freed when
that linear's backward runs."""


def saved_frozen_weight_bytes(*, gptq_torch_dequant: bool, rows: int) -> float:
    """Bytes per weight element a frozen GPTQ linear saves for the backward of one call over ``rows`` tokens:
    ``GPTQ_TORCH_SAVED_WEIGHT_BYTES`` on AutoGPTQ's PyTorch path (``rows`` >= ``GPTQ_KERNEL_SWITCH_ROWS``); 0 below
    it (the fused kernel writes a fresh output, nothing recorded) and for every other base."""
    return GPTQ_TORCH_SAVED_WEIGHT_BYTES if gptq_torch_dequant and rows >= GPTQ_KERNEL_SWITCH_ROWS else 0.0


def saved_frozen_weights(spec: ModelSpec, layer: int, *, input_needs_grad: bool, bytes_per_weight: float) -> int:
    """Bytes of the 16-bit weight copies one decoder layer's frozen linears keep for the backward, at
    ``bytes_per_weight`` per weight element: a frozen linear whose weight reaches the matmul as a fresh tensor (AutoGPTQ's
    PyTorch unpacking, ``saved_frozen_weight_bytes``; autocast's cast of a frozen fp32 weight,
    ``plan.terms._autocast_frozen_copies``) saves that tensor for its input's gradient. Every linear of the layer
    (``memory.params``' per-layer linear weights: q/k/v with ``attn_output_gate``'s doubled q, MLA's projections, the
    experts; no norm weights or biases, which no matmul saves; the rank's shard under tensor parallelism) whose input
    needs a gradient. A layer entered by an
    input that needs none (an adapter run's first layer: the frozen embedding's output) records no matmul for the
    projections that read it, the attention's q/k/v (the rest are fed by the adapters' outputs); other layer kinds are
    counted whole there (an upper bound)."""
    weights = _layer_params(spec, layer)[0]
    if not input_needs_grad and spec.layer_kind(layer) is LayerKind.FULL_ATTENTION and spec.mla is None:
        q_out = 2 * spec.q_dim if spec.attn_output_gate else spec.q_dim
        weights -= spec.hidden_size * (q_out + 2 * spec.kv_dim)
    return ceil(bytes_per_weight * weights)


@lru_cache(maxsize=4096)
def activation_bytes(
    spec: ModelSpec,
    *,
    micro_batch_size: int,
    seq_len: int,
    attention: Attention,
    trainable: TrainableSpec,
    compute_dtype_bytes: int = 2,
    sequence_shards: int = 1,
    selective: SelectiveCheckpointing = SelectiveCheckpointing.NONE,
    compiled: bool = False,
    linear_input_bytes: float = 0.0,
    sac_saves_linear_outputs: bool = True,
    sac_saves_attention: bool = True,
    bf16_layers: tuple[int, int] = (0, 0),
    hf_sdpa: HfSdpaCopies = V5_SDPA,
    gptq_torch_dequant: bool = False,
    padding_mask: bool = False,
    frozen_saves_input: bool = False,
    fp32_stream_autocast: bool = False,
    glu_input_bytes: float = 0.0,
) -> ActivationBytes:
    """Saved-for-backward bytes per decoder layer, embedding and head (see the module docstring).

    ``sequence_shards``: the tensor-parallel size under sequence parallel. The residual stream, its
    norms (each layer's and the final one) and the checkpointed layer inputs then hold ``T / tp`` tokens;
    everything after a column-parallel projection's all-gather holds all T (torch's ``SequenceParallel``
    + ``ColwiseParallel`` save the gathered input; Megatron-LM saves its shard and gathers again in
    backward, Korthikanti et al. 2022 §4.2.2). With a tensor-parallel shard spec (``trainfit.memory.
    parallel.shard_spec``) this gives one TP rank's bytes.

    ``Attention.FLASH`` is treated as SDPA (same saved set). Gemma-2 with SDPA is eager: transformers
    5 refuses SDPA for it (softcapping) and its default falls back to eager. QLoRA saves what LoRA
    saves: bitsandbytes' 4-bit matmul keeps only the (packed) weight from 0.43.2 on, and its input is already bf16
    (before 0.43.2 it keeps its input too: ``frozen_saves_input``).

    ``selective``: ``checkpointed_per_layer`` (and ``checkpointed_embedding``) hold what a layer keeps under
    that selective policy (module docstring); the planner then walks the step as a checkpointed one.

    ``compiled``: each decoder layer runs under ``torch.compile`` (module docstring); changes the layers'
    figures only where ``compiled_rules_apply`` says the compiled rules were measured, else eager's.

    ``linear_input_bytes``: Transformer Engine fp8 linears (``trainfit.memory.fp8.saved_input_bytes``): each trained
    projection saves its input's fp8 copy at these bytes per element (module docstring); 0: the compute dtype.

    ``sac_saves_linear_outputs``: False where the dense linears' GEMMs are not ops torchtitan's per-op policy saves
    (torchao NVFP4's ``scaled_mm``, ``compute.float8_casts.CastTraffic.sac_counted_gemm``): under ``selective: op``
    a layer then keeps none of their outputs, only its input and the attention's saved set. ``bf16_layers``: (first,
    last) decoder layers (of ``spec``'s ``num_layers``: pass the model's spec, not a pipeline stage's) whose linears
    stay bf16 (``precision.bf16_first_layers`` / ``bf16_last_layers``): those keep the policy's matmul outputs whatever
    ``sac_saves_linear_outputs`` says, and save their linears' inputs in the compute dtype, not at
    ``linear_input_bytes`` (Megatron-Core runs them outside the fp8 / fp4 autocast, ``PrecisionSpec.layer_quantized``).
    ``hf_sdpa``: the pinned transformers release's SDPA copies (``attention.legacy_sdpa`` of ``software.transformers``):
    k and v repeated to every head, o_proj's input a copy of the output; v5's path (nothing more) by default.

    ``fp32_stream_autocast``: fp32 weights under 16-bit autocast, so the residual stream and the norm outputs an
    adapted module reads are fp32 (``_adapter_saved``: its fp32 adapters save autocast's 16-bit casts).

    ``gptq_torch_dequant``: an adapter on a GPTQ int4 base through AutoGPTQ's cuda-old QuantLinear
    (``lora.dequant: autogptq_torch``): each frozen linear whose input needs a gradient saves its unpacked fp16 weight
    (``saved_frozen_weight_bytes``) in its layer's ``per_layer``: without checkpointing every layer's until its
    backward, under checkpointing only inside the recompute of one layer (the walk's largest ``per_layer``).

    ``padding_mask``: the batch carries an attention mask with zeros (``batch.padding`` mask): every SDPA layer saves
    the mask's float copy and repeated k/v (``attention.sdpa_padding_masked``); before transformers 4.53 the layers
    share one float mask, counted once in ``embedding``. Without checkpointing the bool mask dies with the forward
    (it is no saved tensor); under checkpointing ``plan.terms`` holds it (``attention.sdpa_bool_mask_bytes``).

    ``frozen_saves_input``: every frozen linear whose input needs a gradient keeps that input (bitsandbytes'
    MatMul4Bit before 0.43.2: ``memory.bnb_saved_input``), once per distinct input (``_Ctx.frozen_saves_input``).
    """
    b, s = micro_batch_size, seq_len
    T = b * s
    a = compute_dtype_bytes
    full = trainable.scope is Scope.FULL
    adapter = trainable.lora.adapter_dtype_bytes if trainable.lora is not None else FP32
    T_seq = T // sequence_shards
    dropout = not full and trainable.lora is not None and trainable.lora.dropout > 0
    post = ({g.name.rsplit(".", 1)[-1]: g.out_features for g in targeted_groups(spec, trainable.lora)}
            if dropout and trainable.lora.dropout_post else {})
    ctx = _Ctx(T=T, b=b, s=s, a=a, full=full, targets=_targets(spec, trainable), attention=attention,
               adapter_bytes=adapter, lora_dropout=dropout, lora_dropout_out=post, T_seq=T_seq,
               linear_input_bytes=linear_input_bytes, hf_sdpa=hf_sdpa, padding_mask=padding_mask,
               frozen_saves_input=frozen_saves_input and not full,
               fp32_stream_autocast=fp32_stream_autocast, glu_input_bytes=glu_input_bytes)
    frozen_w = saved_frozen_weight_bytes(gptq_torch_dequant=gptq_torch_dequant and not full, rows=T)
    per_layer = []
    kernel_bwd: list[int] = []
    kernel_bwd_ckpt: list[int] = []
    kernel_fwd: list[int] = []
    # adapters without checkpointing: the frozen embedding's output needs no gradient, and the
    # residual stream only starts to need one after the first adapter (or trainable op)
    x_rg = full
    layer_ctx = (replace(ctx, compiled=True)
                 if compiled and compiled_rules_apply(spec, trainable=trainable, attention=attention) else ctx)
    after_attention: list[int] = []
    first, last = bf16_layers
    # the recipe's bf16 layers save their linears' inputs in the compute dtype (no quantised copy)
    bf16_ctx = replace(layer_ctx, linear_input_bytes=0.0) if linear_input_bytes and (first or last) else layer_ctx
    for i in range(spec.num_layers):
        ctx.parts.clear()
        bf16 = i < first or i >= spec.num_layers - last
        x_in = x_rg
        nbytes, x_rg = _layer(bf16_ctx if bf16 else layer_ctx, spec, i, x_rg)
        if frozen_w:
            nbytes += saved_frozen_weights(spec, i, input_needs_grad=x_in, bytes_per_weight=frozen_w)
        per_layer.append(nbytes)
        after_attention.append(layer_ctx.parts.get("after_attention", 0))
        live, post = ctx.parts.get("live"), ctx.parts.get("post")
        if live:  # a Gated DeltaNet layer: its moments beyond the layer's saved tensors (_deltanet_live)
            extra = {k: v - (post[at] if at else 0) for k, (v, at) in live.items()}
            kernel_bwd.append(max(0, extra["backward"]))
            # under checkpointing the layer's own saved input (bf16 hidden states, not in per_layer) is live too
            kernel_bwd_ckpt.append(max(0, max(extra["backward"], extra["recompute"], extra["norm"], extra["out_proj"])
                                       + a * T_seq * spec.hidden_size))
            kernel_fwd.append(live["forward"][0])
        else:
            kernel_bwd.append(0)
            kernel_bwd_ckpt.append(0)
            kernel_fwd.append(0)
    ckpt = tuple(a * T_seq * spec.hidden_size for _ in range(spec.num_layers))

    emb_ckpt = 0
    if full:
        emb_ckpt += INT64 * T  # embedding backward keeps the indices
        if spec.family in ("gemma", "gemma2", "gemma3_text"):
            emb_ckpt += a  # bf16 embed_scale scalar of the scaling mul
    emb = own = emb_ckpt
    if spec.num_full_attention_layers and _rope_dim(spec) and len(spec.nope_layers) < spec.num_layers:
        # cos and sin, bf16, shared by all layers: (1, s, rot); Qwen3.5's mrope position ids are
        # expanded to the batch, so (b, s, rot) there
        rows = b if spec.family == "qwen3_5_text" else 1
        # OLMo 2's rotary returns fp32 cos/sin (no cast to x's dtype: transformers v5.24.0
        # models/olmo2/modeling_olmo2.py l.109-113) and its q * cos runs in fp32 (l.172-176)
        rope_bytes = FP32 if spec.family in _FP32_ROTARY else a
        emb += 2 * rope_bytes * rows * s * _rope_dim(spec)
    zc = spec.family in ZERO_CENTRED_NORM_FAMILIES
    if spec.family in ARCH_FAMILIES:
        from trainfit.memory import arch_activations

        emb += arch_activations.embedding_bytes(ctx, spec)
        emb_ckpt += arch_activations.embedding_bytes(ctx, spec) + arch_activations.checkpoint_input_bytes(ctx, spec)
        head = arch_activations.head_bytes(ctx, spec, x_rg)
        own += arch_activations.embedding_bytes(ctx, spec)
    else:
        head, _ = _norm(ctx, width=spec.hidden_size, rows=1, zero_centred=zc, x_rg=x_rg,
                        const_width=spec.hidden_size, residual=True, weight_on_fp32=spec.family in _WEIGHT_ON_FP32_NORM)
        if full:
            head += a * T * spec.hidden_size  # lm_head input
    if selective is SelectiveCheckpointing.OP:
        ckpt = tuple(c + selective_layer_bytes(ctx, spec, i, sequence_shards=sequence_shards,
                                               linear_outputs=sac_saves_linear_outputs or i < first
                                               or i >= spec.num_layers - last, attention=sac_saves_attention)
                     for i, c in enumerate(ckpt))
    elif selective is SelectiveCheckpointing.CORE_ATTENTION:
        ckpt = tuple(max(0, n - _core_attention_bytes(ctx, spec, i)) for i, n in enumerate(per_layer))
        emb_ckpt = emb  # nothing outside the attention core is recomputed: the rotary cos/sin stay saved
    if (attention is Attention.SDPA and legacy_shared_mask(spec, hf_sdpa, padding_mask=padding_mask)
            and any(sdpa_masked(spec, layer=i, kv_tokens=s, attention=attention, padding_mask=padding_mask)
                    for i in range(spec.num_layers))):
        # transformers < 4.53: the one float mask every masked layer saves (attention.HF_SHARED_MASK_UNTIL), alive
        # from before layer 0 to its backward; under checkpointing plan.terms holds it (sdpa_bool_mask_bytes)
        emb += b * s * s * a
    hybrid = any(kernel_fwd)
    # a checkpointed forward inside DeltaNet layer j holds the inputs saved so far (embedding, layers <= j),
    # not the whole model's: the transient is given beyond the end-of-forward total
    ckpt_total = emb_ckpt + sum(ckpt) + head
    fwd_over_total = max((f + emb_ckpt + sum(ckpt[:j + 1]) - ckpt_total for j, f in enumerate(kernel_fwd) if f),
                         default=0)
    return ActivationBytes(
        per_layer=tuple(per_layer),
        checkpointed_per_layer=ckpt,
        embedding=emb,
        head=head,
        checkpointed_embedding=emb_ckpt,
        embedding_backward=own,
        kernel_backward=tuple(kernel_bwd) if hybrid else (),
        kernel_backward_checkpointed=tuple(kernel_bwd_ckpt) if hybrid else (),
        kernel_forward_checkpointed=max(0, fwd_over_total),
        after_attention_per_layer=(tuple(after_attention) if spec.family not in ARCH_FAMILIES or any(after_attention)
                                   else ()),
    )


def _mm_outputs(ctx: _Ctx, spec: ModelSpec, i: int) -> list[int]:
    """Bytes per token of each ``aten.mm`` output of decoder layer ``i``, in execution order (biased linears
    run as ``addmm`` and fused experts as ``grouped_mm``: not listed). PEFT runs the base layer, then
    ``lora_B(lora_A(x))`` in the adapter dtype."""
    a = ctx.a
    moe = spec.moe is not None and spec.moe.is_moe_layer(i)
    if spec.layer_kind(i) is LayerKind.FULL_ATTENTION:
        qo = spec.q_dim * (2 if spec.attn_output_gate else 1)
        attn = ([("qkv_proj", qo + 2 * spec.kv_dim, spec.attention_bias)] if spec.fused_projections or spec.fused_qkv else
                [("q_proj", qo, spec.attention_bias), ("k_proj", spec.kv_dim, spec.attention_bias),
                 ("v_proj", spec.kv_dim, spec.attention_bias)]) + [("o_proj", spec.hidden_size, spec.o_proj_bias)]
    else:
        la = spec.linear_attention
        assert la is not None
        attn = [("in_proj_qkv", la.conv_dim, False), ("in_proj_z", la.value_dim, False),
                ("in_proj_b", la.num_value_heads, False), ("in_proj_a", la.num_value_heads, False),
                ("out_proj", spec.hidden_size, False)]
    if moe:
        mlp = [("gate", spec.moe.num_experts, False)]
        sw = spec.moe.shared_expert_intermediate_size
        if sw:
            mlp += [("gate_proj", sw, False), ("up_proj", sw, False), ("down_proj", spec.hidden_size, False)]
    else:
        w = spec.intermediate_size
        mlp = ([("gate_up_proj", 2 * w, spec.mlp_bias)] if spec.fused_mlp else
               [("gate_proj", w, spec.mlp_bias), ("up_proj", w, spec.mlp_bias)]) + [
                   ("down_proj", spec.hidden_size, spec.mlp_bias)]
    out: list[int] = []
    for name, width, bias in attn + mlp:
        if not bias:
            out.append(a * width)
        r = ctx.targets.get(name)
        if r is not None:
            out += [ctx.adapter_bytes * r, ctx.adapter_bytes * width]
    return out


def selective_layer_bytes(ctx: _Ctx, spec: ModelSpec, i: int, *, sequence_shards: int = 1,
                          linear_outputs: bool = True, attention: bool = True) -> int:
    """What torchtitan's per-op policy saves in layer ``i`` beside the layer input (module docstring): the
    odd-numbered matmuls' outputs, SDPA's output and logsumexp, the reduce-scatter outputs. ``linear_outputs``
    False: the linears' GEMMs are outside the policy's matmul pair and save list (torchao NVFP4's ``scaled_mm``:
    PREFER_RECOMPUTE, pytorch/torchtitan torchtitan/distributed/activation_checkpoint.py l.31-75, 260-275
    @bcc09297a1d892e0ccf6a41fc367e76aab02475b), so none of their outputs is kept. ``attention`` False: the fused
    attention op the run dispatches to is not in the save list (``RunCard.parallel.sac_saves_attention``: cuDNN SDPA
    under torchtitan before b39377f9), so its output and logsumexp are recomputed, not kept."""
    T = ctx.T
    saved = (sum(n for k, n in enumerate(_mm_outputs(ctx, spec, i), start=1) if k % 2 == 1) * T
             if linear_outputs else 0)
    if attention and spec.layer_kind(i) is LayerKind.FULL_ATTENTION and not runs_eager(spec.family, ctx.attention):
        saved += T * (ctx.a * spec.q_dim + FP32 * spec.num_attention_heads)
    if sequence_shards > 1:
        saved += 2 * ctx.a * (ctx.T_seq or T) * spec.hidden_size
    return saved


def _core_attention_bytes(ctx: _Ctx, spec: ModelSpec, i: int) -> int:
    """The attention core's internals that Megatron's selective recompute drops (Korthikanti's 5as²b)."""
    if spec.layer_kind(i) is not LayerKind.FULL_ATTENTION:
        return 0
    T, H = ctx.T, spec.num_attention_heads
    if not runs_eager(spec.family, ctx.attention):
        return T * FP32 * H  # the logsumexp
    s = ctx.s
    out = T * FP32 * H * s + T * ctx.a * H * s  # fp32 softmax output, bf16 probabilities
    if spec.family in SOFTCAP_FAMILIES:
        out += T * ctx.a * H * s
    return out


def loss_region_bytes(spec: ModelSpec, *, micro_batch_size: int, seq_len: int, compute_dtype_bytes: int = 2) -> int:
    """What the loss saves after lm_head (measured; for the logits module): cross_entropy's fp32
    log_softmax output (4V per token), its int64 targets (labels padded by one per sequence) and
    the fp32 total_weight; Gemma-2's final softcap adds the bf16 tanh output (2V per token).
    The bf16 logits (2V per token) are alive as the model output but not saved; the transient
    fp32 upcast (4V per token) is freed after log_softmax."""
    b, s, V = micro_batch_size, seq_len, spec.vocab_size
    # labels are padded by one and shifted: a view of the (1, s+1) pad for b == 1, a (b, s) copy otherwise
    targets = INT64 * (s + 1) if b == 1 else INT64 * b * s
    out = b * s * FP32 * V + targets + FP32
    if spec.family in SOFTCAP_FAMILIES:
        out += b * s * compute_dtype_bytes * V
    return out
