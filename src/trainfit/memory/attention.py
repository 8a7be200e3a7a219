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

from trainfit.memory.logits import SOFTCAP_FAMILIES
from trainfit.spec.enums import Attention
from trainfit.spec.model import ModelSpec

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
    mixed = bool(spec.sliding_layers) and len(spec.sliding_layers) < spec.num_layers
    kinds = 2 if spec.family == "gemma2" or mixed else 1
    return kinds * micro_batch_size * seq_len * seq_len * dtype_bytes


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
