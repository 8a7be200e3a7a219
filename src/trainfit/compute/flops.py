"""FLOPs of one training or generation token, derived term by term.

A matmul of an ``(s, k)`` input with a ``(k, m)`` weight costs ``2·s·k·m`` FLOPs (one multiply and one
add per MAC). Per token, a weight of ``k·m`` parameters therefore costs ``2·k·m``: forward = ``2·N``.

Training (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", §2.1; Narayanan et al. 2021,
"Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", §5.1 and appendix;
Chowdhery et al. 2022, PaLM, appendix B):

=====================  =================================  ============================================
pass                   weights (per token)                 why
=====================  =================================  ============================================
forward                ``2·N``                            one matmul per weight
backward, input grads  ``2·N``                            ``dX = dY·Wᵀ`` (needed to reach earlier layers)
backward, weight grads ``2·N``                            ``dW = Xᵀ·dY`` (only for trained weights)
recompute (full AC)    ``+2·N``                           the forward runs again inside backward
=====================  =================================  ============================================

So full fine-tuning is ``6·N`` per token, ``8·N`` with full activation recomputation. LoRA freezes the
base: its backward still needs the input grads through every frozen weight (``2·N``) but no weight
grads, while the adapters (``N_lora`` = Σ r·(in+out)) pay all three: ``4·N + 6·N_lora``.

``N`` here is the matmul parameters, as torchtitan's flop counter counts them
(``torchtitan/models/utils.py`` ``get_dense_model_nparams_and_flops``: ``6·(nparams − nparams_embedding)``
plus attention): the input embedding is a lookup, not a matmul, so it is left out unless it is tied to
the output head (then the same weight *is* the head's matmul). Norms and biases stay in (they are
< 0.01 % of an 8B model). MoE models count the routed experts a token actually visits
(``active_params``: top-k of num_experts).

Attention (the part with no weights), per token and full-attention layer, forward, with context
``s`` and ``q_dim = heads·head_dim``: ``Q·Kᵀ`` is ``2·s·head_dim`` per head, ``P·V`` the same, so
``4·s·q_dim``; causal masking halves it on average (a token sees s/2 keys) when the kernel skips the
masked half (FlashAttention does): ``2·s·q_dim``. Backward is twice forward (grads for both operands
of each matmul). PaLM appendix B writes the non-causal total as ``6·N + 12·L·H·Q·T``; torchtitan
uses the same 12·l·h·q·t (non-causal) term. Linear-attention (DeltaNet) layers are linear in ``s``
and counted with their projections only. Sliding-window layers count the keys inside their window
(``windowed_keys_per_token``).

Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from trainfit.memory.params import active_params, param_breakdown
from trainfit.memory.weights import count_scale
from trainfit.spec.enums import LayerKind
from trainfit.spec.model import ModelSpec


@lru_cache(maxsize=4096)
def matmul_params(spec: ModelSpec) -> float:
    """Parameters that take part in a matmul for one token (active experts only).

    = active parameters − input embedding (+ it back when tied, as the head's matmul), scaled to a
    user's bare count when the spec stands in for one (``count_scale``).
    """
    pb = param_breakdown(spec)
    lookup_only = (0 if spec.tie_word_embeddings else pb.embedding) + pb.positions  # OPT's learned positions
    return (active_params(spec) - lookup_only) * count_scale(spec)


def attention_forward_flops_per_token(spec: ModelSpec, *, context_len: float, causal: bool = True) -> float:
    """Forward FLOPs of ``Q·Kᵀ`` and ``P·V`` for one token, summed over the full-attention layers.

    ``4·context_len·q_dim`` per layer (``2·context_len·(q_dim + heads·v_head_dim)`` under MLA, whose values
    are narrower than its queries and keys), halved when ``causal`` (``context_len`` is the sequence
    length the token attends within; for a packed/unpadded batch pass the document length).

    A layer in ``sliding_layers`` (gpt-oss's every other layer, Gemma-3's local layers) attends to the last
    ``sliding_window`` keys only (``windowed_keys_per_token``). Megatron-Bridge's FLOP count does the same for
    gpt-oss (``window_attn_skip_freq``: full causal attention on every second layer, the average windowed causal
    context on the others; NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/training/utils/flop_utils.py
    l.1078-1124 @6799f099712c961f15cf92d6bd88998f029d672d).
    """
    per_key = 2.0 * (spec.q_dim + spec.attn_out_dim)  # Q·Kᵀ over qk dims, P·V over v dims (MLA), per key
    full_keys = context_len / 2 if causal else context_len
    windowed = _windowed_layers(spec)
    keys = (spec.num_full_attention_layers - windowed) * full_keys
    if windowed:
        keys += windowed * windowed_keys_per_token(window=spec.sliding_window, context_len=context_len, causal=causal)
    return per_key * keys


def _windowed_layers(spec: ModelSpec) -> int:
    """Full-attention layers of ``spec`` that attend within ``sliding_window`` (``ModelSpec.sliding_layers``)."""
    if not spec.sliding_window:
        return 0
    return sum(1 for i in set(spec.sliding_layers) if i < spec.num_layers and spec.layer_kind(i) is LayerKind.FULL_ATTENTION)


def windowed_keys_per_token(*, window: int, context_len: float, causal: bool = True) -> float:
    """Mean keys a token attends to in a sliding-window layer of ``window`` keys over a row of ``context_len``.

    Causal, on the same footing as a full layer's ``context_len / 2`` (no ``+ 1/2``): token ``t`` sees
    ``min(t, window)`` keys, whose mean over the row is ``window − window² / (2·context_len)`` while the window is
    shorter than the row (Megatron-Bridge's exact form, ``W − W·(W − 1) / (2·T)``, flop_utils.py l.1089-1094
    @6799f099712c961f15cf92d6bd88998f029d672d, differs by ``W / (2·T)``), and ``context_len / 2`` once the window
    covers it. Not causal (one decode token over its context): ``min(window, context_len)``.
    """
    if window < 1:
        raise ValueError("windowed_keys_per_token: window >= 1")
    if not causal:
        return float(min(window, context_len))
    if window >= context_len:
        return context_len / 2
    return window - window * window / (2.0 * context_len)


@dataclass(frozen=True, slots=True)
class TrainingFlops:
    """FLOPs per trained token, by pass. ``model`` is what MFU counts (PaLM appendix B: no recompute);
    ``total`` is what the GPU executes."""

    forward: float
    backward: float
    recompute: float
    """Second forward under full activation checkpointing; 0 otherwise."""

    @property
    def model(self) -> float:
        return self.forward + self.backward

    @property
    def total(self) -> float:
        return self.forward + self.backward + self.recompute


def training_flops_per_token(
    spec: ModelSpec,
    *,
    seq_len: float | None,
    lora_params: float = 0.0,
    adapter: bool = False,
    recompute: bool = False,
    causal: bool = True,
) -> TrainingFlops:
    """FLOPs per token of one training step.

    Full (``adapter=False``): forward ``2N + A``, backward ``4N + 2A`` (A = attention forward).
    LoRA (``adapter=True``): forward ``2N + 2N_lora + A``, backward ``2N + 4N_lora + 2A``.
    ``recompute`` adds one more forward. ``seq_len=None`` leaves attention out.
    ``lora_params`` counts adapter parameters as ``lora_trainable_params`` does; on fused MoE
    experts that counts every expert's adapter, so it overstates the (already tiny) adapter term.
    """
    n = matmul_params(spec)
    attn = 0.0 if seq_len is None else attention_forward_flops_per_token(spec, context_len=seq_len, causal=causal)
    if adapter:
        lora = float(lora_params) * count_scale(spec)
        forward = 2 * n + 2 * lora + attn
        backward = 2 * n + 4 * lora + 2 * attn
    else:
        forward = 2 * n + attn
        backward = 4 * n + 2 * attn
    return TrainingFlops(forward=forward, backward=backward, recompute=forward if recompute else 0.0)


def forward_flops_per_token(spec: ModelSpec, *, context_len: float | None = None, causal: bool = True) -> float:
    """Inference FLOPs per token: ``2N`` plus attention over ``context_len`` (prefill: causal;
    one decode token attends to its whole context: ``causal=False``)."""
    attn = 0.0 if context_len is None else attention_forward_flops_per_token(spec, context_len=context_len, causal=causal)
    return 2 * matmul_params(spec) + attn


def model_flops_utilization(*, tokens_per_s: float, model_flops_per_token: float, peak_flops_per_s: float) -> float:
    """MFU as PaLM appendix B defines it: achieved model FLOP/s (recompute excluded) over the peak.

    ``tokens_per_s`` and ``peak_flops_per_s`` must be for the same set of GPUs (one GPU, or all).
    """
    return tokens_per_s * model_flops_per_token / peak_flops_per_s
