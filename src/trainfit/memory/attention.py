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
  score, against the MLP's activation gradients, whichever is larger.

SDPA (flash / memory-efficient kernels) never materialises the scores: all three are 0.
Found by the GPU calibration (gemma-2-9b full fine-tuning, eager attention with checkpointing,
read 3% low in backward) and measured on the trace.
"""

from __future__ import annotations

from trainfit.memory.logits import SOFTCAP_FAMILIES
from trainfit.spec.enums import Attention

FORWARD_CKPT_BYTES_PER_SCORE = 10
FORWARD_BYTES_PER_SCORE = 4
BACKWARD_BYTES_PER_SCORE = 6


def runs_eager(family: str, attention: Attention) -> bool:
    """Eager attention runs: asked for, or SDPA asked for a softcapping family (transformers refuses
    SDPA for attention-logit softcapping and falls back to eager)."""
    return attention is Attention.EAGER or (family in SOFTCAP_FAMILIES and attention is Attention.SDPA)


def score_elements(*, micro_batch_size: int, seq_len: int, heads: int, eager: bool) -> float:
    """Score elements of one full-attention layer (0 when the kernel does not materialise them)."""
    return float(micro_batch_size * heads * seq_len * seq_len) if eager else 0.0


def forward_transient_bytes(*, scores: float, gradient_checkpointing: bool, dtype_bytes: int = 2) -> float:
    per = FORWARD_CKPT_BYTES_PER_SCORE if gradient_checkpointing else FORWARD_BYTES_PER_SCORE
    return scores * per * dtype_bytes / 2


def backward_transient_bytes(*, scores: float, dtype_bytes: int = 2) -> float:
    return scores * BACKWARD_BYTES_PER_SCORE * dtype_bytes / 2
