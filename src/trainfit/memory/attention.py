"""Eager attention's score-sized intermediates (``eager_attention_forward`` in transformers).

Eager attention materialises ``b x heads x s x s`` scores: the ``q @ k^T`` product and its scaled
copy, the masked scores, an fp32 softmax and the bf16 probabilities (plus Gemma-2's ``tanh``
softcap). What a layer *saves* for backward is counted with the activations
(``trainfit.memory.activations``); this module gives what is live *besides* that at the layer's
worst moment, in bytes per score element, measured with the fake-tensor trace on models whose
hidden size is small next to the sequence (so the ``s^2`` terms dominate), llama and gemma2,
s = 2048 and 4096, micro-batch 1 and 2 (tests/trace/test_grid.py holds the cases):

* forward with checkpointing: nothing is saved, so every intermediate is transient:
  about 10 B per score (bf16 product 2 + masked 2 + fp32 softmax 4 + bf16 probabilities 2);
* forward without checkpointing: the softmax output and probabilities are saved already; the
  product and the masked copy (4 B per score) come on top;
* backward (either way): the probabilities' gradient and the fp32 softmax backward, about 6 B per
  score, plus CUDA's ``tmp = grad * output`` inside the softmax backward (4 B per score, fp32 whatever
  the model's dtype: ``softmax_backward_cuda_out`` in aten/src/ATen/native/cuda/SoftMax.cu at
  pytorch/pytorch@e9865f53f2566a471b5130d31034807e14755851, made after the input gradient and freed when
  the call returns; the trace emulates it, ``trainfit.trace.tracker``), 10 B per score in all, against
  the MLP's activation gradients, whichever is larger; by then the layer's post-attention norms and MLP
  block have freed their saved tensors (``trainfit.plan.terms.attention_backward_released``).

SDPA (flash / memory-efficient kernels) never materialises the scores: all three are 0.
Found by the GPU calibration (gemma-2-9b full fine-tuning, eager attention with checkpointing,
read 3% low in backward) and measured on the trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Iterable
from typing import Any

from trainfit.memory.logits import SOFTCAP_FAMILIES
from trainfit.spec.card import pin_at_least, pin_before
from trainfit.spec.enums import Attention, LayerKind
from trainfit.spec.model import DEEPSEEK_FAMILIES, ModelSpec

ARCH_FAMILIES = frozenset({"gpt2", "gpt_neox", "gpt_oss", "mpt", "opt"}) | DEEPSEEK_FAMILIES
"""Layouts with their own layer model (``trainfit.memory.arch_activations``), which keeps its own attention model:
no per-layer mask copies, and so no padding-mask term (``sdpa_padding_masked``)."""

FORWARD_CKPT_BYTES_PER_SCORE = 10
FORWARD_BYTES_PER_SCORE = 4
BACKWARD_BYTES_PER_SCORE = 6
SOFTMAX_BACKWARD_TMP_BYTES_PER_SCORE = 4
"""CUDA's softmax backward product ``grad * output`` in the gradient's dtype: fp32, as transformers' eager
attention takes ``softmax(..., dtype=torch.float32)``; not scaled with the model's dtype. The traced
backward peak rises by exactly 4.0 B per score with it (llama and gemma2, hidden 64, 8 heads, s = 1024 and
2048, with and without checkpointing); H200 llama-h2048-L8 eager with checkpointing, b1 x 2048: backward
allocated 8.83 GiB planned without it against 9.185 measured, 9.33 with it (the trace: 9.18 with the cuBLAS
workspaces). When the softmax backward runs, the layer has already freed what it saved after its attention
(the post-attention norms' and the MLP block's tensors: 160 MiB there, 753 MiB for Mistral-7B LoRA b2 x 2048):
the planner takes those off the layer's saved set at this moment (``trainfit.plan.terms.
attention_backward_released``), and counts the eager masks checkpointed layers hold
(:func:`eager_mask_bytes`): 9.183 GiB planned there, Mistral-7B LoRA eager b2 x 2048 100.30 against 100.27
measured (101.03 before)."""


NO_SDPA_FAMILIES = frozenset({"gpt_oss", "mpt"})
"""Families transformers builds without an SDPA path (gpt-oss: ``_supports_sdpa = False``, its attention
sinks need eager or a flash kernel with sinks; MPT: ``MptAttention`` is eager only)."""


def runs_eager(family: str, attention: Attention) -> bool:
    """Eager attention runs: asked for, or SDPA asked for a softcapping family (transformers refuses
    SDPA for attention-logit softcapping and falls back to eager) or for a family without SDPA."""
    return attention is Attention.EAGER or (
        attention is Attention.SDPA and (family in SOFTCAP_FAMILIES or family in NO_SDPA_FAMILIES))


def score_elements(*, micro_batch_size: int, seq_len: int, heads: int, eager: bool) -> float:
    """Score elements of one full-attention layer (0 when the kernel does not materialise them)."""
    return float(micro_batch_size * heads * seq_len * seq_len) if eager else 0.0


EAGER_BYTES_PER_SCORE_BY_FAMILY: dict[str, tuple[float, float, float]] = {"gpt_oss": (6.0, 4.2, 6.0), "mpt": (12.2, 3.6, 9.8)}
"""(forward with checkpointing, forward without, backward) bytes per score of families whose eager path
differs: gpt-oss concatenates a sink column and takes a bf16 softmax (no fp32 copy), so its forward keeps
the masked scores, the sink-extended logits and their max-shifted copy and probabilities. The forward figures
are fitted on the fake-tensor trace like the defaults (hidden 64, 8 heads, s = 1024 and 2048, both checkpointing
modes: the slope of the traced peak in s^2). The backward is counted: ``eager_attention_forward``
(transformers 5.24.0 src/transformers/models/gpt_oss/modeling_gpt_oss.py l.244-253) drops the sink column
by slicing, ``scores = probs[..., :-1]``, so the backward's ``p @ v`` gradient of the probabilities is
widened back to (b, H, s, s + 1) by ``slice_backward`` (the s-wide gradient is freed after it), then the
softmax backward makes its input gradient and CUDA's ``tmp = grad * output`` (bf16, as the softmax is,
``softmax_backward_tmp_bytes``): three score-sized bf16 tensors, 6 B per score, all of it in the model's dtype
(the sink column adds 3 x 2 B per query row, b x H x s, left out). The fake-tensor trace holds exactly these
three at the layer's backward peak (hidden 256 and 512, 8 heads, b 2, s 512 and 2048, full training, with and without
checkpointing). It replaces a fitted 3.9 (5.9 with the product), 0.1 B per score short of those three.

MPT (transformers' ``MptAttention``, eager only) scales the bf16 scores, adds the ALiBi bias, masks them with a
bool mask (``arch_activations`` counts it, once) and takes an fp32 softmax of an fp32 copy: fitted on the trace
(hidden 256, 4 layers, 8 heads, b 2, s = 512, 2048 and 4096, checkpointed and not; the backward with the MLP's
saved bytes released, ``ActivationBytes.after_attention_per_layer``): every phase within 1.4% of the trace."""


def forward_transient_bytes(*, scores: float, gradient_checkpointing: bool, dtype_bytes: int = 2,
                            family: str = "") -> float:
    fam = EAGER_BYTES_PER_SCORE_BY_FAMILY.get(family)
    if fam is not None:
        per = fam[0] if gradient_checkpointing else fam[1]
    else:
        per = FORWARD_CKPT_BYTES_PER_SCORE if gradient_checkpointing else FORWARD_BYTES_PER_SCORE
    return scores * per * dtype_bytes / 2


def backward_transient_bytes(*, scores: float, dtype_bytes: int = 2, family: str = "") -> float:
    """Live at the eager attention backward's worst moment besides the saved activations: the buffers in the
    model's dtype (6 B per score in bf16) and CUDA's fp32 softmax-backward product (4 B per score,
    :func:`softmax_backward_tmp_bytes`)."""
    fam = EAGER_BYTES_PER_SCORE_BY_FAMILY.get(family)
    if fam is not None:
        return scores * fam[2] * dtype_bytes / 2
    return (scores * BACKWARD_BYTES_PER_SCORE * dtype_bytes / 2
            + softmax_backward_tmp_bytes(scores=scores, dtype_bytes=dtype_bytes, family=family))


def softmax_backward_tmp_bytes(*, scores: float, dtype_bytes: int = 2, family: str = "") -> float:
    """CUDA's ``tmp = grad * output`` of the softmax backward, part of :func:`backward_transient_bytes`: fp32
    (4 B per score) under transformers' fp32 softmax, the model's dtype for a family that takes its softmax
    in it (gpt-oss)."""
    if family in EAGER_BYTES_PER_SCORE_BY_FAMILY:
        return scores * dtype_bytes
    return scores * SOFTMAX_BACKWARD_TMP_BYTES_PER_SCORE


def eager_mask_bytes(spec: ModelSpec, *, micro_batch_size: int, seq_len: int, eager: bool,
                     dtype_bytes: int = 2) -> int:
    """The additive attention masks eager attention materialises before the first layer: one (b, 1, s, s)
    tensor in the compute dtype per attention kind. Gemma-2 always builds two (``Gemma2Model.forward``'s
    ``causal_mask_mapping``, full and sliding-window: transformers 5.24.0,
    src/transformers/models/gemma2/modeling_gemma2.py), a model with both sliding and full layers two, Llama,
    Mistral and Qwen3 one. They are no saved tensor (the mask's ``add`` saves nothing), so
    ``memory.activations`` leaves them out; checkpointed layers take them as inputs and hold them until the
    first layer's backward (the fake-tensor trace: 8 MiB per mask at b1 x 2048, alive at the backward's
    peak; the grid's eager checkpointed cases read 2-16 MiB low without them), while without checkpointing
    they die with the forward. SDPA/flash take no materialised mask. gpt-oss counts its own
    (``arch_activations.checkpoint_input_bytes``)."""
    if not eager or not spec.num_full_attention_layers or spec.family in EAGER_BYTES_PER_SCORE_BY_FAMILY:
        return 0
    kinds = 2 if spec.family == "gemma2" else mask_kinds(spec, layers=range(spec.num_layers))
    return kinds * micro_batch_size * seq_len * seq_len * dtype_bytes


WINDOW_MASK_FAMILIES = frozenset({"phi3", "gemma3_text", "mistral", "mixtral"})
"""Families whose windowed layers (``ModelSpec.sliding_layers``) take transformers' sliding-window mask
(``masking_utils.create_sliding_window_causal_mask``): Phi-3, Mistral and Mixtral on every layer whenever the config
has a ``sliding_window`` (transformers v5.24.0 models/phi3/modeling_phi3.py l.386, models/mistral/modeling_mistral.py
l.355, models/mixtral/modeling_mixtral.py l.444), Gemma-3 on its ``sliding_attention`` layers
(models/gemma3/modeling_gemma3.py l.525-527). gpt-oss and Gemma-2 run eager (``runs_eager``)."""


def sdpa_window_masked(spec: ModelSpec, *, layer: int, kv_tokens: int, attention: Attention) -> bool:
    """Whether layer ``layer`` runs SDPA with a materialised sliding-window mask: from ``kv_tokens >= sliding_window``
    on, ``_ignore_causal_mask_sdpa`` no longer lets the mask go (transformers v5.24.0 masking_utils.py l.286-287:
    ``local_attention_size is not None and kv_length >= local_attention_size`` returns False) and ``sdpa_mask``
    builds a bool (b, 1, q, k) tensor (l.517-548), handed to every windowed layer's SDPA call. Below the window the
    mask is skipped and SDPA runs ``is_causal`` (no change). Eager attention builds its float masks at every length
    (``eager_mask_bytes``); the flash path takes no 4-D mask (``flash_attention_mask``, l.621-661) and passes
    ``window_size`` to the kernel, which saves what a causal call saves."""
    return (attention is Attention.SDPA and spec.family in WINDOW_MASK_FAMILIES and spec.sliding_window is not None
            and kv_tokens >= spec.sliding_window and layer in spec.sliding_layers
            and not runs_eager(spec.family, attention))


def sdpa_padding_masked(spec: ModelSpec, *, layer: int, attention: Attention, padding_mask: bool) -> bool:
    """Whether layer ``layer`` runs SDPA with transformers' materialised 4-D padding mask (``batch.padding`` mask: the
    batch carries an ``attention_mask`` with zeros). ``create_causal_mask`` (and ``create_sliding_window_causal_mask``
    for windowed layers) builds the mask once per model forward, before the first layer (transformers 5.24.0
    src/transformers/masking_utils.py l.893-1020; models/llama/modeling_llama.py l.382-396 hands the one tensor to every
    decoder layer): ``_ignore_causal_mask_sdpa`` lets it go only when every padding entry is one (l.292-300), else
    ``sdpa_mask`` ands the causal function with ``padding_mask_function`` (l.166-177, 524-526) and expands it to a bool
    (b, 1, q, k) tensor (l.528-548). Each SDPA call then converts it to the query's dtype and saves the copy, and,
    with a mask, grouped-query k and v are repeated to every head: what a layer past the sliding window does
    (``sdpa_window_masked``, ``sdpa_window_mask_saved_bytes``, ``sdpa_window_repeats_kv``). Softmax-attention layers
    only (linear-attention layers take no 4-D mask); eager builds its float masks whatever the padding
    (``eager_mask_bytes``); the flash path takes the 2-D mask and unpads (``flash_attention_mask``, l.621-661), not
    counted here.

    Not counted (measured, left as they are): the collator's int64 2-D mask, 8·b·s bytes, alive in the traced forward
    (32 KiB at b 2 x 2048); under checkpointing, the running layer's float copy and repeated k/v in the forward, which
    the forward's peak model (the loss point, ``memory.phases.forward_peak``) has no in-layer moment for: a 16-head
    llama (hidden 256, 4 KV heads, head_dim 64, vocabulary 512) b 2 x 2048 checkpointed reads its forward 14.0% low
    unpadded and 26.9% low padded (trace +25.5 MB, plan +8.4 MB), its peak (backward) +2.55% / +1.92%. The layouts of
    ``memory.arch_activations`` (``ARCH_FAMILIES``: GPT-2, GPT-NeoX, OPT, MPT, gpt-oss, DeepSeek) keep their own
    attention model, which has no per-layer mask copy: False for them, so they take no padding term at all (neither
    the per-layer copies nor the shared bool mask of ``sdpa_bool_mask_bytes``), in memory and in time."""
    return (padding_mask and attention is Attention.SDPA and spec.family not in ARCH_FAMILIES
            and not runs_eager(spec.family, attention) and spec.layer_kind(layer) is LayerKind.FULL_ATTENTION)


def sdpa_masked(spec: ModelSpec, *, layer: int, kv_tokens: int, attention: Attention, padding_mask: bool) -> bool:
    """Whether layer ``layer``'s SDPA call takes a materialised mask: past its sliding window
    (``sdpa_window_masked``) or under a padding mask (``sdpa_padding_masked``)."""
    return (sdpa_window_masked(spec, layer=layer, kv_tokens=kv_tokens, attention=attention)
            or sdpa_padding_masked(spec, layer=layer, attention=attention, padding_mask=padding_mask))


def sdpa_bool_masks(spec: ModelSpec, *, seq_len: int, attention: Attention, padding_mask: bool) -> int:
    """How many bool (b, 1, s, s) masks one forward builds for masked SDPA layers (``sdpa_masked``): one per mask kind
    in use, the sliding-window mask for windowed layers and the causal one for the others (Qwen3's and Gemma-3's
    ``causal_mask_mapping`` holds both when both kinds of layer take one: transformers 5.24.0
    models/qwen3/modeling_qwen3.py l.386-409)."""
    return mask_kinds(spec, layers=[i for i in range(spec.num_layers)
                                    if sdpa_masked(spec, layer=i, kv_tokens=seq_len, attention=attention,
                                                   padding_mask=padding_mask)])


def mask_kinds(spec: ModelSpec, *, layers: Iterable[int]) -> int:
    """How many mask kinds transformers builds once per forward for ``layers`` (the one rule of ``eager_mask_bytes``
    and ``sdpa_bool_masks``): the sliding-window mask if any of them is windowed, the causal one if any is not
    (``causal_mask_mapping``: transformers 5.24.0 models/qwen3/modeling_qwen3.py l.386-409); 0 for no layer."""
    return len({i in spec.sliding_layers for i in layers})


def sdpa_window_repeats_kv(spec: ModelSpec) -> bool:
    """Whether a masked SDPA call (``sdpa_window_masked``) saves k and v repeated to every query head as new tensors.
    transformers' ``use_gqa_in_sdpa`` takes SDPA's ``enable_gqa`` on CUDA only when ``attention_mask is None``
    (v5.24.0 integrations/sdpa_attention.py l.42-51), so with the mask ``repeat_kv`` runs (l.119-127): an
    ``expand`` + ``reshape`` of (b, kv, s, d) to (b, heads, s, d), a copy for 1 < kv < heads, a view of the same
    storage for one KV head (the fake-tensor trace: Gemma-3's MQA layer saves a (b, 4, s, 64) view of its
    (b, 1, s, 64) key) and the tensor itself for kv == heads."""
    return 1 < spec.num_kv_heads < spec.num_attention_heads


HF_SDPA_GQA_SINCE = (4, 54)
"""The transformers line whose SDPA path hands grouped-query k and v to ``scaled_dot_product_attention(...,
enable_gqa=True)`` when no mask is built: ``use_gqa_in_sdpa`` (torch >= 2.5, ``attention_mask is None``) guards
``repeat_kv`` (transformers 4.54.1 src/transformers/integrations/sdpa_attention.py l.27-32, 52-57, wheel
transformers-4.54.1-py3-none-any.whl from PyPI, files.pythonhosted.org, read 2026-12-03). Every release before it calls
``repeat_kv(key/value, num_key_value_groups)`` unconditionally: 4.48.0-4.53.3 in ``sdpa_attention_forward``
(4.48.0 integrations/sdpa_attention.py l.29-31, 4.52.4 l.29-31, 4.53.3 l.40-42; 4.54.1-4.55.4 only without
the mask, as v5), 4.4x in ``LlamaSdpaAttention.forward``
(4.45.2 models/llama/modeling_llama.py l.637-638, 4.47.1 l.548-549; 4.45.2 models/mistral/modeling_mistral.py
l.461)."""

HF_SDPA_CONTIGUOUS = ((4, 48), (4, 56))
"""The transformers lines (from, before) whose ``sdpa_attention_forward`` makes q, k and v contiguous on every call
("SDPA with memory-efficient backend is bugged with non-contiguous inputs", pytorch/pytorch#112577): 4.48.0
integrations/sdpa_attention.py l.39-41 (the function's first release; 4.47.1's ``LlamaSdpaAttention`` does it only
``if query_states.device.type == "cuda" and causal_mask is not None``, models/llama/modeling_llama.py l.557-560),
4.52.4 l.39-41, 4.55.4 l.72-74; 4.56.0 drops the three calls (its l.59-93 hold none). q arrives as ``q_proj(x).view(b, s, H, d).transpose(1, 2)``
through the rotary: token-major. Made contiguous it is head-major, and the flash kernel writes its output in q's
layout (``empty_like``), so ``attn_output.transpose(1, 2).contiguous()`` (4.48.0 l.57, 4.52.4 l.63, 4.55.4 l.99) is a copy where, in v5, it is
a view of the kernel's saved output: o_proj, where it saves its input, then holds a tensor of its own."""


HF_SHARED_MASK_UNTIL = (4, 53)
"""Before 4.53 Mistral, Mixtral and Phi-3 build their SDPA mask in ``_update_causal_mask``: skipped below the window
(``AttentionMaskConverter._ignore_causal_mask_sdpa(..., sliding_window=...)``, the v5 threshold), past it one float
(b, 1, q, k) tensor in the model's dtype (``torch.full(..., min_dtype, dtype=dtype)``, ``causal_mask.clone()`` when
the batch carries an ``attention_mask``, then ``_unmask_unattended`` on CUDA) handed to every layer: transformers 4.52.4
models/mistral/modeling_mistral.py l.453-537 and l.540-605, models/mixtral/modeling_mixtral.py l.594-676,
models/phi3/modeling_phi3.py l.508-590. ``at::scaled_dot_product_attention`` takes a float mask as it is (no per-call
``convert_boolean_attn_mask`` copy), so every layer saves the same storage: one mask in all, no bool mask. 4.53.3
builds the bool mask of ``masking_utils`` (modeling_mistral.py l.16, l.395), as v5. Fake-tensor trace, Mistral GQA,
window 256, b 4 x 512, 4 layers, no checkpointing: 4.52.4 holds 0.50 MiB more than without the window, one
(1, 1, 512, 512) bf16 mask (the trace passes no ``attention_mask``, so the mask is expanded, not cloned)."""
SHARED_MASK_FAMILIES = frozenset({"mistral", "mixtral", "phi3"})


@dataclass(frozen=True)
class HfSdpaCopies:
    """What transformers' SDPA path of a pinned release copies that v5's does not (``legacy_sdpa``)."""
    repeats_kv: bool = False
    """k and v repeated to every query head with or without a mask (``HF_SDPA_GQA_SINCE``)."""
    contiguous: bool = False
    """q, k and v made contiguous, so o_proj's input is a copy of the output (``HF_SDPA_CONTIGUOUS``)."""
    shared_float_mask: bool = False
    """Past the sliding window, one float mask in the model's dtype shared by every layer (``HF_SHARED_MASK_UNTIL``)."""


V5_SDPA = HfSdpaCopies()


def legacy_sdpa(transformers_pin: Any) -> HfSdpaCopies:
    """The SDPA copies of the ``software.transformers`` pin: none for no pin or one from 4.56 on (the newest
    behaviour, what the fake-tensor trace runs), ``repeats_kv`` for a pin before 4.54, ``contiguous`` for 4.48-4.55,
    ``shared_float_mask`` before 4.53.
    A pin that names no release (a branch, a commit) keeps v5's path."""
    repeats = pin_before(transformers_pin, HF_SDPA_GQA_SINCE)
    since, until = HF_SDPA_CONTIGUOUS
    contiguous = pin_at_least(transformers_pin, since) and pin_before(transformers_pin, until)
    return HfSdpaCopies(repeats_kv=repeats, contiguous=contiguous,
                        shared_float_mask=pin_before(transformers_pin, HF_SHARED_MASK_UNTIL))


def legacy_sdpa_repeats_kv(spec: ModelSpec, copies: HfSdpaCopies) -> bool:
    """Whether an unmasked SDPA call of a pinned release saves k and v repeated to every head as new tensors
    (b, heads, s, d) in place of the (b, kv, s, d) ones v5 saves: grouped-query layers (1 < kv < heads) under
    ``repeats_kv``; multi-query (kv == 1) only when they are also made contiguous (``repeat_kv`` of one KV head is an
    ``expand`` view, ``.contiguous()`` copies it). Measured: a one-layer Llama (hidden 256, 8 heads, 2 KV heads, bf16,
    b 2 x 128) run on the CPU under ``saved_tensors_hooks``, full training: 4.52.4 saves 327,680 B more than
    5.24.0 (two (2, 8, 128, 32) repeated k/v at 3/4 new = 196,608 B, o_proj's copied input 131,072 B); with 8 KV
    heads 131,072 B more (the copy alone)."""
    kv, heads = spec.num_kv_heads, spec.num_attention_heads
    if not copies.repeats_kv or kv >= heads:
        return False
    return kv > 1 or copies.contiguous


def sdpa_window_mask_saved_bytes(*, micro_batch_size: int, seq_len: int, dtype_bytes: int) -> int:
    """The float mask each masked SDPA call saves for backward: ``at::scaled_dot_product_attention`` converts the bool
    mask with ``convert_boolean_attn_mask`` (a ``where`` in the query's dtype, a new (b, 1, q, k) tensor per call:
    pytorch/pytorch aten/src/ATen/native/transformers/attention.cpp; torch 2.13 runs ``aten.where.self(mask, 0,
    -inf)``) and the chosen kernel saves its ``attn_mask``/``attn_bias`` for backward (tools/autograd/derivatives.yaml:
    ``_scaled_dot_product_efficient_attention`` and ``_scaled_dot_product_flash_attention_for_cpu`` pass it to their
    backward). One per windowed layer, b x s x s in the compute dtype (one Gemma-3 sliding layer run on the CPU under
    ``saved_tensors_hooks``, b 2, s 96: a (2, 1, 96, 96) bf16 tensor saved at window 32, none at window 128; the
    fake-tensor grid ``tests/trace/test_sliding_window_grid.py``)."""
    return micro_batch_size * seq_len * seq_len * dtype_bytes


def legacy_shared_mask(spec: ModelSpec, copies: HfSdpaCopies, *, padding_mask: bool = False) -> bool:
    """Whether the masked layers share one float mask (``HF_SHARED_MASK_UNTIL``) instead of each saving its own: the
    windowed families' ``_update_causal_mask`` past the window, and, under a padding mask, every family's (before 4.53
    each model builds its SDPA mask there: transformers 4.52.4 src/transformers/models/llama/modeling_llama.py
    ``LlamaModel._update_causal_mask`` l.483-549 keeps the mask unless ``_ignore_causal_mask_sdpa`` lets it go
    (l.508), ``_prepare_4d_causal_attention_mask_with_cache_position`` l.552-601 builds a float (b, 1, q, k) tensor of
    the dtype's minimum, cloned and ``masked_fill``-ed where the 2-D ``attention_mask`` is 0, and l.436-455 hand the
    one tensor to every layer; wheel transformers-4.52.4-py3-none-any.whl from PyPI, read 2026-12-04)."""
    return copies.shared_float_mask and (padding_mask or spec.family in SHARED_MASK_FAMILIES)


def sdpa_bool_mask_bytes(spec: ModelSpec, *, micro_batch_size: int, seq_len: int, attention: Attention,
                         padding_mask: bool = False, copies: HfSdpaCopies = V5_SDPA, dtype_bytes: int = 2) -> int:
    """The masks built once per forward for masked SDPA layers (``sdpa_masked``): inputs of every checkpointed layer,
    held from before the first layer to its backward, as eager's masks are (``eager_mask_bytes``). One bool (b, 1, s, s)
    tensor, 1 B per element, per kind (``sdpa_bool_masks``), when the batch carries an ``attention_mask`` (the padding
    mask joins the mask function: ``padding_mask_function``, masking_utils.py l.166-177, 524-526), as the Trainer's
    collators pass it; a forward on ``input_ids`` alone (the fake-tensor trace without ``padding_mask``) builds
    (1, 1, s, s) past the window and expands it. Fake-tensor trace under a padding mask (llama, hidden 256, 8 heads, 4
    KV heads, 4 layers, b 2 x 512, checkpointed): the forward and backward peaks rise by 1.0 B per b x s x s over the
    unmasked step. Before transformers 4.53 (``legacy_shared_mask``): the one float mask in the model's dtype."""
    kinds = sdpa_bool_masks(spec, seq_len=seq_len, attention=attention, padding_mask=padding_mask)
    if not kinds:
        return 0
    if legacy_shared_mask(spec, copies, padding_mask=padding_mask):  # the one float mask of a release before 4.53
        return micro_batch_size * seq_len * seq_len * dtype_bytes
    return kinds * micro_batch_size * seq_len * seq_len


def mla_kv_bytes_per_token(spec: ModelSpec, *, dtype_bytes: float) -> float:
    """Decode-cache bytes per token of a multi-head-latent-attention model: ``kv_lora_rank +
    qk_rope_head_dim`` values per full-attention layer (DeepSeek-V3: (512 + 64) x 61 x 2 B = 70,272 B in
    bf16), the compressed ``c_kv`` and the shared rotary key that vLLM's ``MLAAttentionSpec`` pages (one
    "head", ``head_size = kv_lora_rank + qk_rope_head_dim``). Tensor parallelism does not split it: every
    rank keeps the whole latent and up-projects its own heads (vLLM, SGLang)."""
    ml = spec.mla
    if ml is None:
        raise ValueError(f"{spec.name} has no multi-head latent attention")
    return float(spec.num_full_attention_layers * ml.latent_dim * dtype_bytes)


def mla_replicated_params(spec: ModelSpec) -> int:
    """Attention parameters every tensor-parallel rank of an inference engine keeps whole under MLA: the
    down-projections q_a_proj and kv_a_proj_with_mqa (vLLM's ``ReplicatedLinear`` / fused_qkv_a_proj),
    their RMSNorms and o_proj's bias; q_b, kv_b and o_proj split by heads."""
    ml = spec.mla
    if ml is None:
        return 0
    h = spec.hidden_size
    per_layer = h * (ml.q_lora_rank + ml.latent_dim) + ml.q_lora_rank + ml.kv_lora_rank
    if spec.attention_bias:
        per_layer += ml.q_lora_rank + ml.latent_dim + h
    return spec.num_full_attention_layers * per_layer
