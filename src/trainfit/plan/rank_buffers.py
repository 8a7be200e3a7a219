"""The buffers of one model-parallel rank: its loss region, in-layer backward buffers, the
context/expert-parallel exchange buffers and a loss-less pipeline stage's forward transients.

Each is a mechanism named in ``trainfit.plan.ranks``; the torch ones are measured on the fake-tensor
traces (``trainfit.trace.tensor_parallel``, ``trainfit.trace.pipeline``, ``trainfit.trace.context_parallel``:
the ring and Ulysses buffers are replayed in ``trainfit.memory.parallel``); the expert-parallel buffers
follow the cited formula. Pure: no torch.
"""

from __future__ import annotations

from trainfit.memory import attention as attn
from trainfit.memory.logits import (
    SOFTCAP_FAMILIES,
    LogitsBytes,
    logits_bytes,
    megatron_vocab_parallel_ce_bytes,
    nanotron_sharded_ce_bytes,
    te_parallel_ce_bytes,
)
from trainfit.memory.parallel import (
    ParallelLayout,
    context_parallel_attention_backward_bytes,
    context_parallel_attention_forward_bytes,
    expert_parallel_forward_bytes,
)
from trainfit.memory.pipeline import Stage
from trainfit.plan.terms import _layer_transients, hf_loss_of, logits_grad_bytes
from trainfit.spec.card import RunCard
from trainfit.spec.enums import ContextParallelKind, LayerKind, LossKernel, Scope, TensorParallelImpl
from trainfit.spec.model import ModelSpec

LOSS_PARALLEL_FORWARD_BYTES_PER_LOGIT = 14
"""torch ``loss_parallel``: bf16 logits 2 + fp32 copy 4 + shifted logits 4 + their exp 4 (measured)."""
LOSS_PARALLEL_RETAINED_BYTES_PER_LOGIT = 4
LOSS_PARALLEL_BACKWARD_BYTES_PER_LOGIT = 16


def loss_region(card: RunCard, spec: ModelSpec, ss: ModelSpec, layout: ParallelLayout, stage: Stage, *,
            tokens: int, act_dtype: int) -> tuple[LogitsBytes, float]:
    """The loss region on the last stage: vocabulary-parallel under TP (``loss_parallel``)."""
    if not stage.last:
        return LogitsBytes(forward_peak=0.0, retained=0.0, backward_peak=0.0), 0.0
    width = ss.head_outputs or ss.vocab_size
    grad = logits_grad_bytes(card, tokens=tokens, width=width, dtype_bytes=act_dtype)
    if (card.parallel.tensor_parallel_impl is TensorParallelImpl.MEGATRON and ss.head_outputs is None
            and not card.loss.chunked and spec.family not in SOFTCAP_FAMILIES):
        # Megatron-Core's vocab_parallel_cross_entropy on the rank's vocabulary shard (memory/logits.py), or
        # Transformer Engine's parallel_cross_entropy (loss.kernel te)
        if card.loss.kernel is LossKernel.TE:
            return te_parallel_ce_bytes(tokens=tokens, local_vocab=ss.vocab_size, compute_dtype_bytes=act_dtype), grad
        return megatron_vocab_parallel_ce_bytes(tokens=tokens, local_vocab=ss.vocab_size,
                                                compute_dtype_bytes=act_dtype), grad
    if (card.parallel.tensor_parallel_impl is TensorParallelImpl.NANOTRON and ss.head_outputs is None
            and not card.loss.chunked and spec.family not in SOFTCAP_FAMILIES):
        # nanotron's _ShardedCrossEntropy on the rank's vocabulary shard (memory/logits.py)
        return nanotron_sharded_ce_bytes(tokens=tokens, local_vocab=ss.vocab_size, compute_dtype_bytes=act_dtype), grad
    if layout.tp > 1 and ss.head_outputs is None and not card.loss.chunked:
        # DTensor's loss_parallel cross-entropy on the vocabulary-sharded logits: the caller's loss, not transformers'
        # causal-LM loss, so no pinned-release copies (plan.terms.hf_loss_of) are added here
        e = tokens * ss.vocab_size
        softcap = act_dtype * e if spec.family in SOFTCAP_FAMILIES else 0.0
        # under SP the final norm's sequence shard (the model output's last_hidden_state) lives to the loss
        held = act_dtype * tokens * ss.hidden_size // layout.tp if layout.sp else 0
        return LogitsBytes(forward_peak=LOSS_PARALLEL_FORWARD_BYTES_PER_LOGIT * e + softcap + held,
                           retained=LOSS_PARALLEL_RETAINED_BYTES_PER_LOGIT * e + softcap,
                           backward_peak=LOSS_PARALLEL_BACKWARD_BYTES_PER_LOGIT * e + softcap), grad
    lg = logits_bytes(micro_batch_size=card.batch.micro_batch_size, seq_len=card.batch.seq_len // layout.cp,
                      vocab_size=ss.vocab_size, hidden_size=ss.hidden_size, chunked=card.loss.chunked,
                      kernel=card.loss.kernel.value, compute_dtype_bytes=act_dtype, head_outputs=ss.head_outputs,
                      softcap_bytes_per_logit=act_dtype if spec.family in SOFTCAP_FAMILIES else 0,
                      compiled=card.parallel.compile, inplace_backward=card.loss.inplace_backward,
                      head_trainable=card.scope is Scope.FULL, loss_compiled=card.loss.compiled,
                      compute_dtype_loss=not card.loss.upcast,
                      hf_loss=hf_loss_of(card, spec))
    return lg, grad


def backward_buffers(card: RunCard, ss: ModelSpec, layout: ParallelLayout, stage: Stage, *, tokens: int,
                dtype_bytes: int) -> dict[int, float]:
    """In-layer backward buffers per stage position (the MLP's activation gradients, eager scores)."""
    eager = attn.runs_eager(ss.family, card.attention) and ss.num_full_attention_layers > 0
    scores = attn.score_elements(micro_batch_size=card.batch.micro_batch_size, seq_len=card.batch.seq_len // layout.cp,
                                 heads=ss.num_attention_heads, eager=eager)
    per = _layer_transients(ss, tokens=tokens, dtype_bytes=dtype_bytes,
                            attention_bytes=attn.backward_transient_bytes(scores=scores, dtype_bytes=dtype_bytes,
                                                                             family=ss.family))
    return {k: per[i] for k, i in enumerate(stage.layers)}


def comm_buffers(card: RunCard, ss: ModelSpec, layout: ParallelLayout, stage: Stage, *, tokens: int,
                  dtype_bytes: int, forward: bool = False, head_saved: float = 0.0) -> dict[int, float]:
    """Context/expert-parallel buffers a layer holds while it communicates, per stage position: in its
    backward (above the layer's saved activations), or with ``forward`` in its forward (above the step's;
    ``head_saved``: what the head saves, which does not exist yet while the layers run)."""
    a = dtype_bytes
    attn_buf = dense_buf = 0.0
    if layout.cp > 1:
        # torch's ring attention / verl's Ulysses backward, replayed (trainfit.memory.parallel); what the
        # layer saved after attention is freed by then: o_proj's input copy, the second norm, a dense MLP
        kw = {"kind": layout.cp_kind, "cp": layout.cp, "tokens": tokens, "q_dim": ss.q_dim, "kv_dim": ss.kv_dim,
              "heads": ss.num_attention_heads, "kv_heads": ss.num_kv_heads, "batch": card.batch.micro_batch_size,
              "dtype_bytes": a}
        full = card.scope is Scope.FULL
        o_in = tokens * ss.q_dim * a if full else 0.0
        norm2 = tokens * (4 * ss.hidden_size + 4 + (a * ss.hidden_size if full else 0))
        mlp = tokens * a * (ss.hidden_size + 4 * ss.intermediate_size) if full else 0.0
        if forward:
            later = norm2 + (o_in if layout.cp_kind is ContextParallelKind.RING else 0.0) + head_saved
            ckpt = {"checkpointed": card.parallel.checkpoints_layers, "hidden": ss.hidden_size,
                    "head_saved": head_saved}
            attn_buf = context_parallel_attention_forward_bytes(**kw, saved_later=later, **ckpt)
            dense_buf = context_parallel_attention_forward_bytes(**kw, saved_later=later + mlp, **ckpt)
        else:
            attn_buf = context_parallel_attention_backward_bytes(**kw, freed_before=o_in + norm2)
            dense_buf = context_parallel_attention_backward_bytes(**kw, freed_before=o_in + norm2 + mlp)
    moe_buf = 0.0
    if layout.ep > 1 and ss.moe is not None:
        moe_buf = 2 * tokens * ss.moe.experts_per_token * ss.hidden_size * a  # dispatch in + out
        if forward and not card.parallel.checkpoints_layers:
            moe_buf = expert_parallel_forward_bytes(tokens=tokens, top_k=ss.moe.experts_per_token,
                                                    hidden=ss.hidden_size, dtype_bytes=a)
    out = {}
    for k, i in enumerate(stage.layers):
        v = 0.0
        if ss.layer_kind(i) is LayerKind.FULL_ATTENTION:
            v = attn_buf if ss.moe is not None and ss.moe.is_moe_layer(i) else dense_buf
        if ss.moe is not None and ss.moe.is_moe_layer(i):
            v = max(v, moe_buf)
        out[k] = v
    return out


def stage_forward_transient(ss: ModelSpec, stage: Stage, *, ckpt: bool, unit: float, tokens: int, a: int) -> float:
    """Bytes a stage without the loss holds in its last layer's forward besides the saved activations
    and the stage buffers (measured on the pipeline-stage trace, HF decoder layers).

    Without checkpointing the peak is the last residual add: the layer's input (the loop variable),
    the attention residual and the MLP output, plus on the first stage the embedding output, which the
    model's forward keeps referenced (``inputs_embeds``) while the layers run. With checkpointing it is
    the MLP's product: its input and the residual with the activated gate, the up projection and their
    product (3 x tokens x width), none of them saved; the stage output does not exist yet.
    """
    if not ckpt:
        several = len(stage.chunk_layers) > 1
        # a one-layer stage's input is the received tensor, a stage buffer already
        return 2 * unit + (unit if several or stage.first else 0.0) + (unit if stage.first and several else 0.0)
    last = stage.chunk_layers[-1]
    moe = ss.moe
    if moe is not None and moe.is_moe_layer(last):
        width = tokens * moe.experts_per_token * moe.expert_intermediate_size
    else:
        width = tokens * ss.intermediate_size
    return unit + 3 * a * width
