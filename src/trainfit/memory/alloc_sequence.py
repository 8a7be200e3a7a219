"""The step's allocation sequence from the planner's own terms, replayed through the caching allocator.

Pure: no torch. ``step_sequence`` turns a ``StepTerms`` (the per-GPU byte terms the phase walk
sums) into the order in which a training step allocates and frees its tensors, as the fake-tensor
trace sees it (``trainfit.trace.tracker``):

load
    the weights tensor by tensor (embedding, then each decoder layer's parameters, then the final
    norm and head), the adapters, fp32 master weights, DDP buckets, the input ids.
forward
    the embedding's saved tensors; per decoder layer its ops (see below) or, where the layer is not
    generated op by op, an fp32 normalisation temporary, the layer's saved activations (under
    checkpointing the layer's intermediates are made and freed, only the checkpointed input stays),
    eager attention's score-sized temporaries; the head's saved input;
    the loss (``trainfit.memory.logits``): bf16 logits 2E, fp32 copy 4E, saved log-softmax 4E, the
    copy and the bf16 logits freed (kept to the end of backward with
    ``loop.keeps_output_through_backward``; with ``loop.kept_output_dtype: fp32`` the bf16 logits are freed
    before the log-softmax and the fp32 copy is the one kept); flash-attn's (``SequenceShape.fused_ce_rows``): the bf16 logits and
    fp32 per-row outputs, the lse and the logits saved; the compiled loss's (``fused_ce_compiled``): the bf16 logits and
    two fp32 per-row tensors, all saved. The first step makes the Python thread's 32 MiB cuBLAS
    workspace after the first layer's first projection output (its first matmul).
backward
    the loss's fp32 gradients (4E, 4E), the saved log-softmax and the first gradient freed, the
    bf16 logits gradient (2E; flash-attn's: a new 2E beside the saved logits, or the logits themselves in place)
    into lm_head, whose gradient appears (the first step makes the autograd
    thread's cuBLAS workspace here, lm_head's being the first matmul of backward); then the layers last to first:
    the recomputed intermediates under checkpointing, the layer's backward ops (or its gradient buffers
    and parameter gradients allocated while its saved tensors are freed); the embedding's gradient last.
optimizer step
    the first step creates the optimizer states (two per trained tensor); the step's temporaries;
    ``zero_grad(set_to_none=True)`` frees every gradient.

Tensor sizes come from the model's parameter shapes (``param_tensors``) scaled to the terms (so
sharding, dtypes and adapters carry over). A dense decoder layer trained in full is generated op by op
as the trace records it (``_layer_ops``: forward with grad, ``_layer_ops_no_grad``: a checkpointed
forward, ``_layer_backward_ops``: its backward; the tensors are the residual stream's (bf16, fp32), q's,
k/v's, the MLP's width and, under eager attention, the scores'), its saved bytes equal to the activation
term; the residual stream and its gradient are carried from layer to layer. Other layers (LoRA, MoE,
other layouts whose saved bytes differ) split the activation terms into tensors of the residual stream's
and the MLP's size. The replay is compared with the trace's replay and with the H200 measurements
(``benchmarks/gpu_calibration.md``).

``replayed_overhead`` replays two steps of a fresh process through ``trainfit.memory.caching_allocator``
and returns reserved - allocated at the high-water mark (the allocator's rounding and the cached blocks
the step cannot reuse). The workspaces are made where the first step makes them, not up front: made in
the middle of the first backward, the autograd thread's one takes the front of a cached logits-sized
block, and the second step's logits need a new segment (the first case of each H200 calibration
process: qwen3-h1024-L8 -13.5% -> -0.2%; Qwen3-0.6B at 16k tokens reads -0.2% only with the warm-up's
kept logits below, -12.7% without them, as the trace's own order does, -12.5%). ``after_case``
replays a step as the calibration process ran it instead: after an earlier model whose workspaces stay
(segments and all), after a warm-up step that kept its output through backward. ``None`` where the
sequence cannot be generated (FSDP, ZeRO, pipeline and context parallelism, offload,
optimizer-in-backward, paged optimizer states): the planner then keeps its fitted share. Only the large pool (requests over 1 MiB) is replayed; the small pool's own 2 MiB
segments are left out. Results are cached per step terms and shape.

Measured against the H200 sets (``benchmarks/gpu_calibration.md``, replayed with ``after_case`` as the
cases ran there): reserved median |error| 0.2% fit, 0.5% / 1.0% / 0.4% held-out, 0.3% expandable; worst
+2.5%, -5.8%, -2.6%, -1.1%, -1.1%. Expandable segments replay through
``trainfit.memory.expandable_segments`` (unmapped holes after ``empty_cache``, torch's best-fit rule for a
block beside unmapped space): the expandable set read 0.6% median, -5.2% worst before.
The layer generated op by op (full training; LoRA with fp32 adapters
on all seven projections and SDPA; Qwen3's q/k norms) reads what the trace's own order reads replayed the
same way within 1.8 points on the 18 cases compared (Qwen2.5-1.5B full at 8k tokens: +9.6% -> -0.3%, the
optimizer states now land in the norms' cached fp32 blocks, not in a logits-sized one; llama LoRA with
checkpointing -4.2% -> -1.3%; Llama-3.1-8B LoRA -4.1% -> -0.4%). Eager attention's softmax backward makes,
on CUDA, an fp32 ``grad * output`` product of the scores' size that no fake-tensor trace sees (it runs no
kernel; ``softmax_backward_cuda_out`` in aten/src/ATen/native/cuda/SoftMax.cu at
pytorch/pytorch@e9865f53f2566a471b5130d31034807e14755851): llama-h2048-L8, eager with checkpointing, b1 x
2048, read -11.2% without it, as the trace's order does (-11.1%); its backward's allocated peak was 9.19
GiB measured, 8.75 replayed, one 512 MiB product short. With it every phase of the step is within 0.02
GiB of the GPU's (reserved, measured / replayed: warm-up 9.51 / 9.51, forward 12.47 / 12.46, backward
13.45 / 13.44; backward allocated 9.19 / 9.17): -0.1%. Known gaps: layers the templates
do not cover (Gemma-2's sandwich norms and softcap, LoRA under eager attention or on fewer projections,
bf16 adapters, MoE) carry their extra saved bytes as residual-sized pieces or use the generic pieces
(gemma-2-9b LoRA eager, checkpointing: -5.8%, the trace's order -3.6%). Under eager attention the generic
pieces carry the scores' sizes: the saved fp32 softmax output and bf16 probabilities, the backward's
score-sized buffers and CUDA's product (gemma-2-9b full eager with checkpointing +1.4% -> 0.0%, every
phase within 0.03 GiB, its forward was 2.8 GiB high; Mistral-7B LoRA eager -2.0% -> -1.0%, -0.1% since
the planner's eager backward term counts CUDA's product, whose step allocated then reads +0.8% high, the
MLP block's saved tensors being gone at the product's moment; Qwen3-4B LoRA
eager +1.1% -> -1.1%).
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import accumulate
from typing import Iterator

from trainfit.memory.expert_loop_grads import loop_stack_grad_moment_bytes
from trainfit.memory.caching_allocator import ROUND_LARGE, SMALL_SIZE, CachingAllocator, end_case, replay_steps
from trainfit.memory.phases import StepTerms

ADAPTER_TENSORS_PER_LAYER = 14
"""LoRA on the seven projections of a decoder layer: A and B each (small-pool tensors). The seven: ``q_proj``,
``k_proj``, ``v_proj``, ``o_proj`` (``LlamaAttention.__init__``) and ``gate_proj``, ``up_proj``, ``down_proj``
(``LlamaMLP.__init__``), huggingface/transformers @002272831fba584eb30dca9729c1be456836960a:
https://github.com/huggingface/transformers/blob/002272831fba584eb30dca9729c1be456836960a/src/transformers/models/llama/modeling_llama.py;
one ``lora_A`` and one ``lora_B`` ``nn.Linear`` per adapted module (huggingface/peft ``src/peft/tuners/lora/layer.py`` l.259-260
@d787f51bbaa196862733ed53c1b7def75b49ab29, ``update_layer``)."""
STREAM_SHIFT = 48
"""Event keys from ``1 << STREAM_SHIFT`` on are blocks of a side stream's pool (``key >> STREAM_SHIFT``)."""


@dataclass(frozen=True, slots=True)
class SequenceShape:
    """The shapes the sequence needs beyond the byte terms."""

    layer_params: tuple[int, ...]
    """Element counts of one decoder layer's parameter tensors."""
    embedding_params: int
    head_params: tuple[int, ...]
    """Final norm, lm_head (absent when tied) and any other parameter outside the layers."""
    residual_bytes: int
    """tokens x hidden x compute-dtype bytes: one bf16 tensor of the residual stream."""
    logit_elements: int
    """b x s x V (0 for a chunked loss or a scalar head)."""
    input_bytes: int
    """The input ids (and labels) on the GPU."""
    mlp_bytes: int = 0
    """tokens x intermediate x compute-dtype bytes: one bf16 tensor of the MLP's width."""
    optimizer_per_tensor: bool = False
    """torch.optim's for_loop implementation: the step's temporaries are made parameter by parameter."""
    eager_score_bytes: int = 0
    """One bf16 attention-score tensor (b x heads x s x s x 2) under eager attention, else 0."""
    q_bytes: int = 0
    """tokens x heads x head_dim x compute-dtype bytes: the query projection's output (0: unknown)."""
    kv_bytes: int = 0
    """tokens x kv_heads x head_dim x compute-dtype bytes: one key or value projection's output."""
    qk_norm: bool = False
    """An RMSNorm over each head of q and of k before the rotary embedding (Qwen3)."""
    fused_ce_rows: int = 0
    """Rows scored by flash-attn's cross-entropy (``loss.kernel: flash_attn``, ``memory.logits.flash_attn_ce_bytes``):
    the bf16 logits saved, fp32 per-row outputs, no fp32 copies; 0: the eager loss."""
    fused_ce_inplace: bool = False
    """flash-attn's ``inplace_backward``: the gradient is written into the saved logits."""
    fused_ce_compiled: bool = False
    """With ``fused_ce_rows``: the compiled eager loss (``loss.compiled``, ``memory.logits.compiled_ce_bytes``) in
    place of flash-attn's kernel: two fp32 per-row tensors (max, log-sum-exp), both saved with the logits."""
    fused_ce_slice_backward: bool = False
    """With ``fused_ce_compiled``: the loss read a slice of the logits (``loop.loss_input_copy``), so after its
    backward ``slice_backward`` makes a zero-filled gradient of the logits' shape beside the slice's, which it then
    replaces (``memory.logits.compiled_ce_bytes``' ``slice_backward``)."""
    ce_compute_dtype: bool = False
    """The model's own eager loss on the compute-dtype logits without an fp32 copy (``loss.upcast: false``,
    ``memory.logits.compute_dtype_ce_bytes``): the log-softmax writes and saves a logits-sized compute-dtype output, and
    backward's two gradients are compute-dtype, the second read by ``lm_head`` as it is."""
    ce_compute_dtype_bytes: int = 2
    """With ``ce_compute_dtype``: the compute dtype's bytes per logit (4 for an fp32 compute dtype)."""
    ce_shift_copy: bool = False
    """With ``ce_compute_dtype``: the shifted slice's ``.contiguous()`` copies it (more than one sequence per
    micro-batch, ``memory.logits.shifted_slice_copies``), a logits-sized tensor alive until the loss returns."""


@dataclass(frozen=True, slots=True)
class AllocSequence:
    persistent: tuple[int, ...]
    workspace: tuple[int, ...]
    step_events: tuple[tuple[int, int, int], ...]
    first_step_extra: tuple[int, ...]
    first_step_extra_at: int
    workspace_at: tuple[int, ...] = ()
    """Event indices of the first step's first forward and first backward matmul: a fresh process makes
    the cuBLAS workspaces there (``trainfit.memory.caching_allocator``, module docstring)."""


def supported(t: StepTerms) -> bool:
    """Whether ``step_sequence`` models every term of ``t`` (one data-parallel rank of a plain step)."""
    return not (t.fsdp_root_unit or t.fsdp_layer_units or t.fsdp_unsharded_grads or t.fsdp_root_grads
                or t.fsdp_root_embedding_grads or t.fsdp_all_gathered or t.zero2_bucket or t.activation_offload
                or t.offloaded_layers
                or t.in_backward_step or t.inflight_activations or t.grads_other or t.pipeline_buffers
                or t.comm_forward_transient or t.layer_forward_transient or t.zero_ipg_buckets
                or t.zero_step_grads or t.zero_step_cast or t.zero_step_fp32_grad or t.zero_persistent_params
                or t.grads_preallocated or t.grad_buffer or t.gathered_forward or t.gathered_backward or t.offload_staging
                or t.paged_optimizer_states or t.graph_held_inputs or t.ctx_held_inputs
                or t.returned_kv_cache)


def _split(total: float, weights: tuple[int, ...] | list[int]) -> list[int]:
    """``total`` bytes over tensors in proportion to ``weights`` (dropping empty ones)."""
    s = sum(weights)
    if total <= 0 or s <= 0:
        return []
    return [int(total * w / s) for w in weights if int(total * w / s) > 0]


def _chunks(total: float, unit: int) -> list[int]:
    """``total`` bytes as tensors of ``unit`` bytes and one remainder."""
    total = int(total)
    if total <= 0:
        return []
    if unit <= 0:
        return [total]
    n, rest = divmod(total, unit)
    return [unit] * n + ([rest] if rest else [])


def _saved_pieces(total: float, shape: SequenceShape) -> list[int]:
    """One layer's saved bytes as tensors: up to four of the MLP's width (a dense MLP saves its gate
    and up outputs, the activation and the product's factors), under eager attention the fp32 softmax
    output and the bf16 probabilities (score-sized, ``activations``' eager terms), the rest residual-stream
    sized (fp32)."""
    total = int(total)
    sc = shape.eager_score_bytes
    scores = [2 * sc, sc] if sc and total >= 3 * sc else []
    total -= sum(scores)
    m = shape.mlp_bytes
    k = min(4, int(0.6 * total) // m) if m > 0 else 0
    return [m] * k + scores + _chunks(total - k * m, 4 * max(1, shape.residual_bytes))


def _layer_ops(total: float, shape: SequenceShape, *, full: bool) -> _LayerOps | None:
    """A dense decoder layer's forward, op by op, as the trace records it for full training
    (``(+1, slot, bytes)`` made, ``(-1, slot, 0)`` freed; slots never freed are the saved tensors):
    per RMSNorm the fp32 copy (saved), ``pow`` (freed by ``mean``), ``x * rsqrt`` (fp32, freed once cast),
    the bf16 cast and the weighted output (both saved); q, k, v projections, the rotary embedding's
    temporaries (q and k rotated into new tensors, saved; the projections freed), the attention output
    (saved); ``o_proj`` and the residual add; the MLP's gate, up, act(gate) and product (saved), ``down_proj``
    and the second residual add. Slot 0 is the layer's input (the previous residual stream), freed by the
    first residual add. None where ``total`` is not what that layer saves (LoRA, other layouts): the
    caller then falls back to ``_saved_pieces``."""
    r, q, kv, m, sc = shape.residual_bytes, shape.q_bytes, shape.kv_bytes, shape.mlp_bytes, shape.eager_score_bytes
    if not (full and r > 0 and q > 0 and kv > 0 and m > 0):
        return None
    if sc:  # eager: q, repeat_kv(k), the fp32 softmax, the bf16 probabilities, repeat_kv(v), the output's copy
        saved = 2 * (2 * r + r + r) + 4 * q + 3 * sc + 4 * m
    else:  # SDPA: q and k rotated, v, the output
        saved = 2 * (2 * r + r + r) + 2 * q + 2 * kv + 4 * m
    if shape.qk_norm:
        saved += 3 * q + 3 * kv
    extra = int(total) - saved
    if extra < 0 or extra > 0.25 * saved:
        return None
    ops: list[tuple[int, int, int]] = []
    nxt = [1]
    names: dict[str, int] = {}

    def a(n: int, name: str = "") -> int:
        k = nxt[0]
        nxt[0] += 1
        ops.append((1, k, int(n)))
        if name:
            names[name] = k
        return k

    def f(*ks: int) -> None:
        ops.extend((-1, k, 0) for k in ks)

    def norm(p: str, w: int = r) -> int:
        a(2 * w, p + "x32")  # x.to(float32): saved
        f(a(2 * w))  # pow, reduced by mean
        xn = a(2 * w)
        a(w, p + "cast")  # .to(bf16): saved by the weight's mul
        f(xn)
        return a(w, p + "out")  # weight * x: saved as the projections' input (q/k norms: rotary's)

    norm("n1_")
    qp = a(q)
    ops.append((0, 0, 0))  # q_proj's output exists, its matmul runs: the layer's first matmul
    if shape.qk_norm:  # Qwen3: q_norm and k_norm per head on each projection's output (fp32 copy, cast saved)
        qn = norm("qn_", q)
        f(qp)
        qp = qn
    kp = a(kv)
    if shape.qk_norm:
        kn = norm("kn_", kv)
        f(kp)
        kp = kn
    v = a(kv, "v")  # v: saved by SDPA
    rotated = []
    for n, name in ((q, "q_rot"), (kv, "k_rot")):  # rotary: q * cos + rotate_half(q) * sin
        t1 = a(n)
        half = a(n // 2)
        t2 = a(n)
        f(half)
        t3 = a(n)
        f(t1)
        rotated.append(a(n, name))  # the rotated tensor: saved by SDPA (eager: q only)
        f(t2, t3)
    f(qp, kp)
    if sc:
        # transformers' eager_attention_forward: repeat_kv copies k and v to the query heads (saved),
        # q @ k^T, its scaled copy and the masked scores (bf16), softmax in fp32 (saved) and its bf16
        # cast (the probabilities, saved), p @ v and the transposed copy o_proj reads (saved)
        a(q, "k_rep")
        f(rotated[1])
        a(q, "v_rep")
        f(v)
        s1 = a(sc)
        s2 = a(sc)
        f(s1)
        s3 = a(sc)
        f(s2)
        up = a(2 * sc)
        a(2 * sc, "softmax")
        f(up)
        a(sc, "probs")
        f(s3)
        pv = a(q)
        a(q, "attn_out")
        f(pv)
    else:
        a(q, "attn_out")  # attention output: saved (o_proj's input is a view of it)
    for j, n in enumerate(_chunks(extra, r)):  # what this layer saves beyond the dense layout (q/k norms, ...)
        a(n, f"extra{j}")
    o = a(r)
    res = a(r)  # hidden + attention
    f(o)
    f(0)
    norm("n2_")
    for name in ("gate", "up", "act", "prod"):
        a(m, name)  # gate, up, act(gate), act(gate) * up: saved
    d = a(r)
    a(r)  # the layer's output: the next layer's slot 0
    f(d)
    f(res)
    return _LayerOps(tuple(ops), names, _layer_backward_ops(names, shape, start=nxt[0]))


@dataclass(frozen=True, slots=True)
class _LayerOps:
    forward: tuple[tuple[int, int, int], ...]
    names: dict[str, int]
    backward: tuple[tuple[int, int, int], ...]


def _layer_backward_ops(names: dict[str, int], shape: SequenceShape, *, start: int) -> tuple[tuple[int, int, int], ...]:
    """The backward of a ``_layer_ops`` layer, op by op as the trace records it (last op first), in the
    forward's slot numbers (new slots from ``start``). ``(2, 0, 0)``: the next MLP weight's gradient
    appears (down, up, gate); ``(2, 1, 0)``: the next other weight's (o, v, k, q). Slot -1 is the residual
    stream's incoming gradient, freed once the layer's own is summed in; the last slot made is the
    gradient handed to the layer below.

    SwiGLU: the product's gradient, act(gate)'s and up's (the product's goes), up's input gradient,
    gate's. RMSNorm: the weight's and the input's bf16 products, then the fp32 chain of
    ``x * rsqrt`` (eight fp32 temporaries, at most four at once) and the bf16 input gradient. SDPA: the
    output's gradient, dq, dk, dv at once, then the saved inputs go. Eager: the probabilities' gradient
    (bf16), the softmax backward in fp32 (gradient, output, CUDA's ``tmp = grad * output`` made and freed
    inside the call, their bf16 cast), the scores' gradient, then
    dq and repeat_kv(k)'s, summed to k's heads. Rotary backward: the rotated gradient's two halves."""
    r, q, kv, m, sc = shape.residual_bytes, shape.q_bytes, shape.kv_bytes, shape.mlp_bytes, shape.eager_score_bytes
    o = _Ops(start)
    ops, a, f = o.ops, o.a, o.f

    def grad(kind: int) -> None:
        ops.append((2, kind, 0))

    def norm(p: str, g: int, w: int = r) -> int:
        t1, t2 = a(w), a(w)
        f(t1, g, names[p + "cast"])
        return _rms_norm_input_grad(o, t2, x32=names[p + "x32"], w=w)

    # MLP (down_proj's output gradient is the incoming residual gradient itself)
    grad(0)
    d1 = a(m)
    f(names["prod"])
    d2, d3 = a(m), a(m)
    f(d1, names["act"], names["up"])
    grad(0)
    gu = a(r)
    f(d3)
    d4 = a(m)
    f(d2, names["gate"])
    grad(0)
    gg = a(r)
    f(d4, names["n2_out"])
    gsum = a(r)
    f(gu, gg)
    gx = norm("n2_", gsum)
    g_mid = a(r)  # the residual add: this gradient plus the incoming one
    f(gx, -1)
    # attention
    grad(1)
    d_out = a(q)
    if sc:
        f(names["attn_out"])
        dv = a(q)
        dp = a(sc)
        f(names["probs"], names["v_rep"], d_out)
        dp32 = a(2 * sc)
        f(dp)
        ds32 = a(2 * sc)
        f(a(2 * sc))  # CUDA's softmax backward: ``tmp = grad * output`` (fp32), freed once its kernel ran
        f(dp32, names["softmax"])
        ds = a(sc)
        f(ds32)
        dsc = a(sc)
        f(ds)
        dq, dk_rep = a(q), a(q)
        f(names["q_rot"], names["k_rep"], dsc)
        dk = a(kv)
        f(dk_rep)
        dv_kv = a(kv)
        f(dv)
        dv = dv_kv
    else:
        dq, dk, dv = a(q), a(kv), a(kv)
        f(d_out, names["v"], names["attn_out"], names["k_rot"], names["q_rot"])
    for j in range(len([k for k in names if k.startswith("extra")])):
        f(names[f"extra{j}"])
    dk = _rope_input_grad(o, dk, n=kv)
    dq = _rope_input_grad(o, dq, n=q)
    gv = a(r)
    f(dv)
    grad(1)
    if shape.qk_norm:  # each head norm's backward just before its projection's
        dk = norm("kn_", dk, kv)
    gk = a(r)
    f(dk)
    s1 = a(r)
    f(gv, gk)
    grad(1)
    if shape.qk_norm:
        dq = norm("qn_", dq, q)
    gq = a(r)
    f(dq)
    s2 = a(r)
    f(s1, gq, names["n1_out"])
    grad(1)
    gx = norm("n1_", s2)
    a(r)  # the gradient handed to the layer below
    f(gx, g_mid)
    return tuple(ops)


def _final_norm_ops(r: int) -> tuple[tuple[tuple[int, int, int], ...], tuple[tuple[int, int, int], ...]]:
    """The final RMSNorm (trained in full) as ``_layer_ops`` makes a layer's norms: forward from slot 0 (the
    last layer's output, freed once copied) to slot 5, lm_head's saved input; slots 1 and 4 (the fp32 copy
    and the bf16 cast) are saved. Backward from slot -1 (lm_head's input gradient): the bf16 products, the
    fp32 chain, the input gradient (the last slot made), handed to the last layer."""
    fw = ((1, 1, 2 * r), (1, 2, 2 * r), (-1, 2, 0), (1, 3, 2 * r), (1, 4, r), (-1, 3, 0), (-1, 0, 0), (1, 5, r))
    o = _Ops(6)
    a, f = o.a, o.f
    t1, t2 = a(r), a(r)
    f(t1, -1, 4)
    u1 = a(2 * r)
    f(t2)
    u2, u3 = a(2 * r), a(2 * r)
    f(u1, u2)
    u4, u5, u6, u7 = a(2 * r), a(2 * r), a(2 * r), a(2 * r)
    f(u3, u4, u5, 1)
    u8 = a(2 * r)
    f(u6, u7)
    a(r)
    f(u8)
    return fw, tuple(o.ops)


class _Ops:
    """Slot bookkeeping for the op-by-op layer generators."""

    def __init__(self, start: int = 1) -> None:
        self.ops: list[tuple[int, int, int]] = []
        self.nxt = start
        self.names: dict[str, int] = {}

    def a(self, n: int, name: str = "") -> int:
        k = self.nxt
        self.nxt += 1
        self.ops.append((1, k, int(n)))
        if name:
            self.names[name] = k
        return k

    def f(self, *ks: int) -> None:
        self.ops.extend((-1, k, 0) for k in ks)


def _rms_norm_input_grad(o: _Ops, t2: int, *, x32: int, w: int) -> int:
    """RMSNorm's input gradient after the bf16 product ``t2``: the fp32 chain of ``x * rsqrt`` (eight fp32
    temporaries, at most four at once; the saved fp32 input ``x32`` goes) and the bf16 input gradient, which
    it returns (both backward generators)."""
    a, f = o.a, o.f
    u1 = a(2 * w)
    f(t2)
    u2, u3 = a(2 * w), a(2 * w)
    f(u1, u2)
    u4, u5, u6, u7 = a(2 * w), a(2 * w), a(2 * w), a(2 * w)
    f(u3, u4, u5, x32)
    u8 = a(2 * w)
    f(u6, u7)
    gx = a(w)
    f(u8)
    return gx


def _rope_input_grad(o: _Ops, d: int, *, n: int) -> int:
    """Rotary backward of a gradient ``d`` of ``n`` bytes: the rotated gradient's two halves and their
    sum, op by op (``d`` goes); returns the input gradient (both backward generators)."""
    a, f = o.a, o.f
    b1, h = a(n), a(n // 2)
    b2 = a(n)
    f(h)
    b3 = a(n)
    f(b1)
    b4 = a(n)
    f(b2, b3)
    b5 = a(n)
    f(b4)
    b6 = a(n)
    f(b5, d)
    return b6


def _lora_layer_ops(total: float, shape: SequenceShape, *, grad: bool = True) -> _LayerOps | None:
    """A dense decoder layer with PEFT LoRA (fp32 adapters, no dropout) on its seven projections, SDPA, op
    by op as the trace records it. Each wrapped projection: the frozen base's output, the input cast to
    fp32 (saved by ``lora_A``), ``lora_B``'s fp32 output, its scaled copy, the fp32 sum with the base output
    and its cast back to bf16. The norms save their fp32 copy when their input needs a gradient (not in
    the first layer, whose input comes from the frozen embedding); the frozen weights save nothing else.
    ``grad=False``: the checkpointed forward (each tensor goes once read). None where ``total`` is not
    what this layout saves (other targets, bf16 adapters, dropout, eager attention)."""
    r, q, kv, m = shape.residual_bytes, shape.q_bytes, shape.kv_bytes, shape.mlp_bytes
    if not (r > 0 and q > 0 and kv > 0 and m > 0) or shape.eager_score_bytes:
        return None
    F = 2 * r
    dense = 6 * F + 2 * q + 2 * kv + 2 * q + 5 * m  # the casts, SDPA's four, the MLP's three and down's cast
    if shape.qk_norm:
        dense += 2 * q + 2 * kv
    input_grad = True
    extra = int(total) - dense - F
    if extra < 0:
        input_grad, extra = False, int(total) - dense
    if grad and (extra < 0 or extra > 0.05 * dense):
        return None
    o = _Ops()
    a, f = o.a, o.f

    def norm(p: str, saves: bool, w: int = r) -> int:
        x32 = a(2 * w, p + "x32" if saves and grad else "")
        f(a(2 * w))  # pow
        xn = a(2 * w)
        if not (saves and grad):
            f(x32)
        c = a(w)
        f(xn)
        out = a(w)
        f(c)
        return out

    def lora(x: int, i: int, n_out: int, name: str) -> int:
        base = a(n_out)
        cast = a(2 * i, name + "_cast" if grad else "")
        b = a(2 * n_out)
        if not grad:
            f(cast)
        sc = a(2 * n_out)
        f(b)
        sm = a(2 * n_out)
        f(sc, base)
        out = a(n_out)
        f(sm)
        return out

    x = norm("n1_", input_grad)
    qp = lora(x, r, q, "q")
    o.ops.append((0, 0, 0))  # q_proj's base matmul: the layer's first
    if shape.qk_norm:  # q_norm and k_norm on each projection's output: their fp32 copies saved
        qn = norm("qn_", True, q)
        f(qp)
        qp = qn
    kp = lora(x, r, kv, "k")
    if shape.qk_norm:
        kn = norm("kn_", True, kv)
        f(kp)
        kp = kn
    v = lora(x, r, kv, "v")
    o.names["v"] = v
    f(x)
    rot = []
    for n, name in ((q, "q_rot"), (kv, "k_rot")):
        t1, half, t2 = a(n), a(n // 2), a(n)
        f(half)
        t3 = a(n)
        f(t1)
        rot.append(a(n, name if grad else ""))
        f(t2, t3)
    f(qp, kp)
    att = a(q, "attn_out" if grad else "")
    if not grad:
        f(*rot, v)
    for j, n in enumerate(_chunks(extra, r) if grad else []):
        a(n, f"extra{j}")
    op = lora(att, q, r, "o")
    if not grad:
        f(att)
    res = a(r)
    f(op, 0)
    x = norm("n2_", True)
    g = lora(x, r, m, "gate")
    o.names["gate"] = g
    ag = a(m, "act")
    if not grad:
        f(g)
    u = lora(x, r, m, "up")
    o.names["up"] = u
    f(x)
    pr = a(m)
    if not grad:
        f(ag, u)
    d = lora(pr, m, r, "down")
    f(pr)
    a(r)  # the layer's output
    f(d, res)
    if not grad:
        return _LayerOps(tuple(o.ops), {}, ())
    return _LayerOps(tuple(o.ops), o.names, _lora_backward_ops(o.names, shape, start=o.nxt, input_grad=input_grad))


def _lora_backward_ops(names: dict[str, int], shape: SequenceShape, *, start: int,
                       input_grad: bool) -> tuple[tuple[int, int, int], ...]:
    """The backward of a ``_lora_layer_ops`` layer as the trace records it (same conventions as
    ``_layer_backward_ops``; ``(2, 1, 0)`` marks each adapter's two gradients). Per wrapped projection,
    given its output's gradient: ``lora_B``'s fp32 gradient, its bf16 copy and scaled copy, the adapters'
    gradients, the fp32 input gradient through ``lora_A`` (the saved cast goes), its bf16 cast, the base's
    input gradient and their sum."""
    r, q, kv, m = shape.residual_bytes, shape.q_bytes, shape.kv_bytes, shape.mlp_bytes
    o = _Ops(start)
    a, f = o.a, o.f

    def grads() -> None:
        o.ops.extend([(2, 1, 0), (2, 1, 0)])

    def lora(name: str, i: int, n_out: int, gy: int, *, free_gy: bool) -> int:
        a1 = a(2 * n_out)
        if free_gy:
            f(gy)
        a2 = a(n_out)
        a3 = a(2 * n_out)
        f(a1, a3)
        grads()
        dx32 = a(2 * i)
        f(names[name + "_cast"])
        dxb = a(i)
        f(dx32)
        dbase = a(i)
        f(a2)
        dsum = a(i)
        f(dxb, dbase)
        return dsum

    def norm(p: str, g: int, saves: bool, w: int = r) -> int:
        if not saves:  # the input needs no gradient: the chain stops here
            f(g)
            return 0
        t2 = a(w)
        f(g)
        return _rms_norm_input_grad(o, t2, x32=names[p + "x32"], w=w)

    dprod = lora("down", m, r, -1, free_gy=False)
    d_act, d_up = a(m), a(m)
    f(dprod, names["act"], names["up"])
    du = lora("up", r, m, d_up, free_gy=True)
    d_gate = a(m)
    f(d_act, names["gate"])
    dg = lora("gate", r, m, d_gate, free_gy=True)
    s = a(r)
    f(du, dg)
    gx = norm("n2_", s, True)
    g_mid = a(r)
    f(gx, -1)
    d_att = lora("o", q, r, g_mid, free_gy=False)
    dq, dk, dv = a(q), a(kv), a(kv)
    f(d_att, names["v"], names["attn_out"], names["k_rot"], names["q_rot"])
    for j in range(len([k for k in names if k.startswith("extra")])):
        f(names[f"extra{j}"])
    dk = _rope_input_grad(o, dk, n=kv)  # rotary backward
    dq = _rope_input_grad(o, dq, n=q)
    xv = lora("v", r, kv, dv, free_gy=True)
    if shape.qk_norm:  # each head norm's backward just before its projection's
        dk = norm("kn_", dk, True, kv)
    xk = lora("k", r, kv, dk, free_gy=True)
    s1 = a(r)
    f(xv, xk)
    if shape.qk_norm:
        dq = norm("qn_", dq, True, q)
    xq = lora("q", r, q, dq, free_gy=True)
    s2 = a(r)
    f(s1, xq)
    gx = norm("n1_", s2, input_grad)
    a(r)  # the gradient handed to the layer below
    f(*([gx] if gx else []), g_mid)
    return tuple(o.ops)


def _layer_ops_no_grad(shape: SequenceShape) -> list[tuple[int, int, int]]:
    """``_layer_ops``'s layer run without grad (a checkpointed forward), as the trace records it: nothing
    is saved, so each tensor goes once its last reader has run (the norm's fp32 copy once ``x * rsqrt``
    exists, gate once ``act(gate)`` exists, ...). Slot 0 (the input, kept by the checkpoint) is never
    freed; the last slot made is the layer's output."""
    r, q, kv, m, sc = shape.residual_bytes, shape.q_bytes, shape.kv_bytes, shape.mlp_bytes, shape.eager_score_bytes
    ops: list[tuple[int, int, int]] = []
    nxt = [1]

    def a(n: int) -> int:
        k = nxt[0]
        nxt[0] += 1
        ops.append((1, k, int(n)))
        return k

    def f(*ks: int) -> None:
        ops.extend((-1, k, 0) for k in ks)

    def norm(w: int = r) -> int:
        x32 = a(2 * w)
        f(a(2 * w))  # pow
        xn = a(2 * w)
        f(x32)
        c = a(w)
        out = a(w)
        f(c, xn)
        return out

    x = norm()
    qp = a(q)
    ops.append((0, 0, 0))  # the layer's first matmul
    if shape.qk_norm:
        qn = norm(q)
        f(qp)
        qp = qn
    kp = a(kv)
    if shape.qk_norm:
        kn = norm(kv)
        f(kp)
        kp = kn
    v = a(kv)
    f(x)
    rot = []
    for n in (q, kv):
        t1, half, t2 = a(n), a(n // 2), a(n)
        f(half)
        t3 = a(n)
        f(t1)
        rot.append(a(n))
        f(t2, t3)
    f(qp, kp)
    if sc:
        kr = a(q)
        f(rot[1])
        vr = a(q)
        f(v)
        s1, s2 = a(sc), a(sc)
        f(s1)
        s3 = a(sc)
        f(s2)
        up = a(2 * sc)
        sm = a(2 * sc)
        f(up, s3)
        p = a(sc)
        f(sm, rot[0], kr)
        pv = a(q)
        f(p, vr)
        o = a(q)
        f(pv)
    else:
        o = a(q)
        f(rot[0], rot[1], v)
    op = a(r)
    f(o)
    res = a(r)
    f(op)
    x = norm()
    g = a(m)
    ag = a(m)
    f(g)
    u = a(m)
    f(x)
    pr = a(m)
    f(ag, u)
    d = a(r)
    f(pr)
    a(r)  # the layer's output
    f(d, res)
    return ops


class _Events:
    __slots__ = ("ev", "key", "marks")

    def __init__(self) -> None:
        self.ev: list[tuple[int, int, int]] = []
        self.key = 0
        self.marks: list[int] = []

    def mark(self) -> None:
        """A matmul that makes a thread's cuBLAS workspace runs here (the first of forward, of backward)."""
        self.marks.append(len(self.ev))

    def alloc(self, n: int, stream: int = 0) -> int:
        self.key += 1
        key = self.key | stream << STREAM_SHIFT  # a side stream's pool (``trainfit.memory.stream_pools``)
        if n > SMALL_SIZE:  # the small pool's 2 MiB segments never serve the large pool's requests
            self.ev.append((1, key, n))
        return key

    def allocs(self, sizes: list[int]) -> list[tuple[int, int]]:
        return [(self.alloc(n), n) for n in sizes]

    def free(self, key: int) -> None:
        self.ev.append((-1, key, 0))  # a key never allocated (small) is skipped by the replay

    def frees(self, keys: list[tuple[int, int]]) -> None:
        for k, _ in keys:
            self.free(k)


@dataclass(frozen=True, slots=True)
class ReplayInput:
    """What one ``replayed_overhead`` call replayed (``recording``)."""

    terms: StepTerms
    shape: SequenceShape
    workspace: tuple[int, ...]
    expandable: bool

    def sequence(self) -> AllocSequence | None:
        return step_sequence(self.terms, self.shape, workspace=self.workspace)


_RECORD: ContextVar[list[ReplayInput] | None] = ContextVar("trainfit_alloc_sequence_record", default=None)
_PROCESS: ContextVar[tuple[ReplayInput | None, bool] | None] = ContextVar("trainfit_alloc_sequence_process",
                                                                          default=None)


@contextmanager
def recording() -> Iterator[list[ReplayInput]]:
    """Collect what every replay made inside replays (for ``after_case``)."""
    token = _RECORD.set([])
    try:
        yield _RECORD.get()  # type: ignore[misc]
    finally:
        _RECORD.reset(token)


@contextmanager
def after_case(prior: ReplayInput | None, *, warmup_keeps_output: bool = False) -> Iterator[None]:
    """Replays inside model the step as a measuring process ran it, not as a fresh training run.

    ``prior``: the process ran ``prior``'s model first, freed its tensors and emptied the cache: the
    cuBLAS workspaces stay where that model's first step made them, with the segments around them
    (``caching_allocator.end_case``), and this model's steps make none. ``warmup_keeps_output``: the
    first (warm-up) step ran ``out = model(...); out.loss.backward()``, so the output's bf16 logits lived
    through its backward; the later steps drop it first, as the Trainer does. Both are how
    ``benchmarks/gpu_calibrate.py measure`` ran its cases one after another on the H200."""
    token = _PROCESS.set((prior, warmup_keeps_output))
    try:
        yield
    finally:
        _PROCESS.reset(token)


def replayed_overhead(t: StepTerms, shape: SequenceShape, *, workspace: tuple[int, ...] = (),
                      expandable: bool = False) -> int | None:
    """Reserved - allocated at the replayed step's high-water mark, or None where the sequence cannot be
    generated. Cached per shape: ``fit`` and ``search`` plan the same per-GPU terms for many
    configurations (GPU counts, prices, data-parallel sizes)."""
    rec, proc = _RECORD.get(), _PROCESS.get()
    if rec is not None and supported(t):
        rec.append(ReplayInput(t, shape, tuple(workspace), expandable))
    if proc is None:
        return _replayed_overhead_cached(t, shape, workspace=tuple(workspace), expandable=expandable)
    prior, keep = proc
    seq = step_sequence(t, shape, workspace=tuple(workspace))
    if seq is None:
        return None
    a = None
    lazy = True
    if prior is not None:
        lazy = False  # the process's threads made their workspaces in the earlier model's first step
        if expandable == prior.expandable:
            # the earlier model's first step, its tensors freed and the cache emptied: its workspaces stay
            # where it made them, with the segments around them (default) or with the partial pages around
            # them and unmapped holes below and between them (expandable segments: ``empty_cache`` unmaps
            # every whole free page, ``trainfit.memory.expandable_segments``)
            first = _warmup(prior.terms, prior.shape, prior.workspace, keep)
            if first is not None:
                a = end_case(_replay_into(first, expandable=expandable, steps=1, lazy=True))
    warm = _warmup(t, shape, tuple(workspace), keep) or seq
    a = replay_steps(persistent=list(seq.persistent), step_events=list(seq.step_events),
                     first_step_events=list(warm.step_events), first_step_extra=list(warm.first_step_extra),
                     first_step_extra_at=warm.first_step_extra_at, workspace=list(seq.workspace),
                     workspace_at=warm.workspace_at if lazy and seq.workspace else None, expandable=expandable,
                     allocator=a if a is not None else _allocator(expandable))
    # reserved beyond what the repeated step allocates at its peak (a warm-up that kept its output
    # allocated more; the kept blocks' reserved stays)
    steady = replay(seq, expandable=expandable).peak_allocated
    fixed = _chunks(t.ddp_buckets, 25 << 20)
    return a.peak_reserved - steady + sum(-(-n // ROUND_LARGE) * ROUND_LARGE - n for n in fixed)


def _warmup(t: StepTerms, shape: SequenceShape, workspace: tuple[int, ...], keeps_output: bool) -> AllocSequence | None:
    """The first step's sequence; with ``keeps_output`` the output's bf16 logits live through its backward."""
    if keeps_output and shape.logit_elements and not t.kept_output:
        t = replace(t, kept_output=2.0 * shape.logit_elements)
    return step_sequence(t, shape, workspace=workspace)


@lru_cache(maxsize=16384)
def _replayed_overhead_cached(t: StepTerms, shape: SequenceShape, *, workspace: tuple[int, ...] = (),
                              expandable: bool = False) -> int | None:
    # the DDP buckets are made once, before the step, and never freed: they add their own rounding to
    # 2 MiB and nothing else, so one replay serves every data-parallel size of the same per-GPU step
    # (fewer distinct replays in ``fit``); the cuBLAS workspaces are made inside the first step, where
    # they can split a cached block, so they are part of the replay
    core = _replay_overhead(replace(t, ddp_buckets=0.0) if t.ddp_buckets else t, shape, tuple(workspace), expandable)
    if core is None:
        return None
    fixed = _chunks(t.ddp_buckets, 25 << 20)
    return core + sum(-(-n // ROUND_LARGE) * ROUND_LARGE - n for n in fixed)


@lru_cache(maxsize=16384)
def _replay_overhead(t: StepTerms, shape: SequenceShape, workspace: tuple[int, ...], expandable: bool) -> int | None:
    seq = step_sequence(t, shape, workspace=workspace)
    return None if seq is None else replay(seq, expandable=expandable).overhead


def step_sequence(t: StepTerms, shape: SequenceShape, *, workspace: tuple[int, ...] = (),
                  hook=None) -> AllocSequence | None:
    """The allocation sequence of one training step (see the module docstring), or None where a term
    is not modelled (``supported``). ``hook(point, layer, events, grads)``, where given, adds a wrapper's
    own allocations at the step's layer boundaries (FSDP: ``trainfit.memory.stream_pools``): points
    ``forward_start``, ``forward`` (before layer ``layer``), ``forward_end`` (after the last layer),
    ``forward_done`` (after the loss), ``backward`` (before layer
    ``layer``'s backward), ``backward_layers_end``, ``backward_end``, ``zero_grad``; ``grads`` is the list
    of (key, bytes) gradients made so far in this backward (the hook may take its own out of it). At
    ``grads`` (each time autograd makes parameter gradients) it is the new (key, bytes) pairs, and a true
    return means the hook has taken them (DeepSpeed ZeRO: ``trainfit.memory.stream_pools``)."""
    if not supported(t):
        return None
    act = t.activations
    layers = len(act.per_layer)
    lp = shape.layer_params
    r = max(1, shape.residual_bytes)
    fp32_res = 2 * r

    idx = list(range(layers))

    # -- persistent state ------------------------------------------------------------------------------
    weight_numels = [shape.embedding_params] + list(lp) * layers + list(shape.head_params)
    per_numel = t.weights / max(1, sum(weight_numels))
    emb_w = [int(shape.embedding_params * per_numel)]
    layer_wts = [int(n * per_numel) for n in lp]
    head_w = [int(n * per_numel) for n in shape.head_params]
    adapter_each = t.adapter_weights / (ADAPTER_TENSORS_PER_LAYER * max(layers, 1))
    # gradient tensors, per decoder layer (trained in full: the layer's parameter shapes; adapters:
    # the layer's LoRA tensors), the head's and the embedding's
    layer_w = sum(layer_wts)
    per_layer_grads = []
    for g in t.grads_per_layer:
        if g <= 0:
            per_layer_grads.append([])
        elif layer_w and g >= 0.5 * layer_w:
            per_layer_grads.append(_split(g, lp))
        else:
            per_layer_grads.append(_split(g, [1] * ADAPTER_TENSORS_PER_LAYER))
    head_grads = _split(t.grads_head, list(shape.head_params)) if t.grads_head else []
    emb_grads = [int(t.grads_embedding)] if t.grads_embedding > 0 else []
    grads_full = t.grads_total - t.grads_other
    # model.parameters() order: the embedding, the layers, the final norm and head
    all_grads = emb_grads + [x for i in idx for x in per_layer_grads[i]] + head_grads
    persistent = [x for x in emb_w if x > 0]
    for _ in idx:
        persistent += layer_wts
        persistent += [int(adapter_each)] * ADAPTER_TENSORS_PER_LAYER if adapter_each >= 1 else []
    persistent += head_w

    def per_grad(total: float) -> list[int]:
        """``total`` bytes laid out like the gradients (one tensor per trained tensor)."""
        return [int(g * total / grads_full) for g in all_grads] if grads_full > 0 and total > 0 else []

    persistent += per_grad(t.master_weights)
    persistent += _chunks(t.ddp_buckets, 25 << 20)
    if shape.input_bytes:
        persistent.append(shape.input_bytes)
    # torch.optim.AdamW creates exp_avg then exp_avg_sq for each parameter in turn at the first step
    states = [x for g in per_grad(t.optimizer_states / 2) for x in (g, g)]

    e = _Events()

    def run_ops(ops, stream: int, *, grad: bool, keys: dict | None = None) -> tuple[list[tuple[int, int]], int]:  # noqa: ANN001
        """One layer's forward ops: (its saved tensors, its output's key); ``keys`` receives each slot's
        (key, bytes). Without grad (``_layer_ops_no_grad``, a checkpointed forward) slot 0, the input, is
        kept by the checkpoint."""
        keys = {} if keys is None else keys
        keys[0] = (stream, 0)
        order: list[int] = []
        freed: set[int] = set()
        for sign, slot, n in ops:
            if sign > 0:
                keys[slot] = (e.alloc(n), n)
                order.append(slot)
            elif sign < 0:
                if slot == 0 and not grad:
                    continue
                freed.add(slot)
                e.free(keys[slot][0])
            elif first_matmul:
                e.mark()
                first_matmul.clear()
        out = order[-1]
        return [keys[k] for k in order if k not in freed and k != out], keys[out][0]

    def run_backward(ops: _LayerOps, keys: dict, g_in: int, gs: list[int], ) -> int:
        """A ``_layer_ops`` layer's backward (``_layer_backward_ops``): returns the gradient it hands down.
        Its weight gradients appear where the trace makes them: the MLP's three (the largest; down, up,
        gate), then the others last parameter first; the rest (norm weights) at the end."""
        n_mlp = sum(1 for sign, kind, _ in ops.backward if sign == 2 and kind == 0)
        order = sorted(range(len(gs)), key=lambda j: -gs[j])
        mlp_idx = sorted(order[:n_mlp], reverse=True) if len(gs) >= n_mlp else []
        # small ones (norm weights, the small pool's) last: they never reach the replay's large pool
        other = [gs[j] for j in reversed(range(len(gs))) if j not in mlp_idx and gs[j] > SMALL_SIZE]
        other += [gs[j] for j in reversed(range(len(gs))) if j not in mlp_idx and gs[j] <= SMALL_SIZE]
        mlp = [gs[j] for j in mlp_idx]
        bk = dict(keys)
        bk[-1] = (g_in, 0)
        last = g_in
        for sign, slot, n in ops.backward:
            if sign == 1:
                bk[slot] = (e.alloc(n), n)
                last = bk[slot][0]
            elif sign == -1:
                e.free(bk[slot][0])
            else:
                src = mlp if slot == 0 else other
                if src:
                    new_grads_ref[0]([src.pop(0)])
        for g in mlp + other:
            new_grads_ref[0]([g])
        return last

    emb_shared: list[tuple[int, int]] = []  # the layers' shared inputs (cos/sin, eager masks): gone with layer 0

    def forward() -> tuple[list, list, list, list]:
        if hook:
            hook("forward_start", -1, e, None)
        total = act.checkpointed_embedding if t.gradient_checkpointing else act.embedding
        own = total if act.embedding_backward is None else min(total, act.embedding_backward)
        emb = e.allocs(_chunks(own, r))
        emb_shared[:] = e.allocs(_chunks(total - own, r))
        saved: dict[int, list[tuple[int, int]]] = {}
        stream = e.alloc(r) if layer_ops else None  # the embedding's output: layer 0's input
        for i in idx:
            if hook:
                hook("forward", i, e, None)
            ops = layer_ops[i] if layer_ops else None
            if ops is not None and stream is not None:
                if t.layer_checkpointed(i):
                    # the checkpoint keeps the layer's input; anything it keeps beyond that is made here
                    keep = [(stream, r)] + e.allocs(_chunks(act.checkpointed_per_layer[i] - r, r))
                    _, stream = run_ops(no_grad_ops, stream, grad=False)
                else:
                    slot_keys[i] = {}
                    saved_i, stream = run_ops(ops.forward, stream, grad=True, keys=slot_keys[i])
                    keep = saved_i
                saved[i] = keep  # (eager attention's score-sized temporaries are ops of the layer)
                continue
            tmp = e.alloc(fp32_res)
            if t.layer_checkpointed(i):
                keep = e.allocs(_chunks(act.checkpointed_per_layer[i], r))
                # no grad is kept inside a checkpointed forward: each intermediate goes once consumed
                prev = None
                for n in _saved_pieces(act.per_layer[i], shape):
                    k = e.alloc(n)
                    if first_matmul:
                        e.mark()  # the first projection's output is made, then its matmul runs
                        first_matmul.clear()
                    if prev is not None:
                        e.free(prev)
                    prev = k
                if prev is not None:
                    e.free(prev)
                e.free(tmp)
                saved[i] = keep
            else:
                keep = []
                for n in _saved_pieces(act.per_layer[i], shape):
                    keep.append((e.alloc(n), n))
                    if first_matmul:
                        e.mark()
                        first_matmul.clear()
                e.free(tmp)
                saved[i] = keep
            if t.attention_forward_transient and shape.eager_score_bytes:
                e.frees(e.allocs(_chunks(t.attention_forward_transient, shape.eager_score_bytes)))
        if hook:
            hook("forward_end", -1, e, None)
        if stream is not None and final_norm:
            keys: dict = {}
            run_ops(final_norm[0], stream, grad=True, keys=keys)
            head = [keys[1], keys[4], keys[5]]  # the fp32 copy, the cast, lm_head's input
            head_slots.append(keys)
        else:
            head = e.allocs(_chunks(act.head, fp32_res))
            if stream is not None:
                e.free(stream)  # the last layer's output: the final norm has made its own copies
        E = shape.logit_elements
        held: list = []
        if E and shape.fused_ce_rows:  # flash-attn's kernel: per-row losses, lse, z_losses beside the logits
            rows = shape.fused_ce_rows
            bf16 = e.alloc(2 * E)
            if shape.fused_ce_compiled:  # the compiled loss: row max and log-sum-exp, both saved
                stats = [e.alloc(4 * rows), e.alloc(4 * rows)]
            else:
                losses, lse, z = e.alloc(4 * rows), e.alloc(4 * rows), e.alloc(4 * rows)
                e.free(z)  # the caller drops the z-loss and reduces the losses (the sum saves nothing)
                e.free(losses)
                stats = [lse]
            row_bytes = 4 * rows * len(stats)
            # a softcapped model's saved tanh output (the rest of the retained term)
            held = e.allocs(_chunks(t.logits.retained - row_bytes - (0 if t.kept_output else 2 * E), 2 * E))
            if t.kept_output:
                kept_out.append(bf16)
            # the negative size marks a fused loss for backward
            loss = [(bf16, -2 * E)] + [(k, 4 * rows) for k in stats]
        elif E and t.logits.retained and shape.ce_compute_dtype:
            a = shape.ce_compute_dtype_bytes
            bf16 = e.alloc(a * E)
            held = e.allocs(_chunks(t.logits.retained - a * E, a * E))  # a softcapped model's tanh output
            shift = e.alloc(a * E) if shape.ce_shift_copy else None  # .contiguous() on the shifted slice
            lsm = e.alloc(a * E)
            if shift is not None:
                e.free(shift)  # the loss saves only its log-softmax output
            if t.kept_output:
                kept_out.append(bf16)
            else:
                e.free(bf16)
            loss = [(lsm, a * E)]
        elif E and t.logits.retained:
            bf16 = e.alloc(2 * E)
            held = e.allocs(_chunks(t.logits.retained - 4 * E, 2 * E))
            up = e.alloc(4 * E)
            if t.kept_output and t.kept_output_fp32:
                # prime-rl: ``forward`` returns the fp32 copy and drops the bf16 logits before the loss's
                # log-softmax; the copy is kept (``loop.kept_output_dtype: fp32``)
                e.free(bf16)
                lsm = e.alloc(4 * E)
                kept_out.append(up)
            else:
                lsm = e.alloc(4 * E)
                e.free(up)
                if t.kept_output:  # ``out = model(...); out.loss.backward()``: the output holds the bf16 logits
                    kept_out.append(bf16)
                else:
                    e.free(bf16)
            loss = [(lsm, 4 * E)]
        else:  # chunked loss or a scalar head: one chunk's transient
            e.frees(e.allocs(_chunks(t.logits.forward_peak, max(r, int(t.logits.forward_peak)))))
            loss = []
        if hook:
            hook("forward_done", -1, e, None)
        return emb, saved, head, loss + held

    def backward(emb, saved, head, loss, *, accumulate: bool) -> list[tuple[int, int]]:
        E = shape.logit_elements
        grads: list[tuple[int, int]] = []

        def new_grads(sizes: list[int]) -> None:
            made = e.allocs(sizes)
            if hook and hook("grads", -1, e, made):  # the wrapper took them (ZeRO: copied into its bucket)
                return
            if accumulate:  # the new gradient is summed into the held one, then freed
                e.frees(made)
            else:
                grads.extend(made)

        new_grads_ref[0] = new_grads

        if loss and loss[0][1] < 0:  # flash-attn's: the gradient into a new buffer or into the saved logits
            bf16 = loss[0][0]
            gb = bf16 if shape.fused_ce_inplace else e.alloc(2 * E)
            e.frees(loss[1:])  # the lse (and a softcapped model's tanh output)
            if not shape.fused_ce_inplace and not t.kept_output:
                e.free(bf16)  # the node releases its saved logits; the kept output holds them to the end
            if shape.fused_ce_inplace and t.kept_output:
                gb = None  # the kept output's buffer, freed with it after backward
            if shape.fused_ce_slice_backward and gb is not None:
                full = e.alloc(2 * E)  # slice_backward's zero-filled gradient, the slice's copied into it
                e.free(gb)
                gb = full
        elif loss and shape.ce_compute_dtype:  # compute-dtype gradients; lm_head reads the second as it is
            g1 = e.alloc(shape.ce_compute_dtype_bytes * E)
            gb = e.alloc(shape.ce_compute_dtype_bytes * E)
            e.free(g1)
            e.free(loss[0][0])
            e.frees(loss[1:])
        elif loss:
            g1 = e.alloc(4 * E)
            g2 = e.alloc(4 * E)
            e.free(g1)
            e.free(loss[0][0])
            gb = e.alloc(2 * E)
            e.free(g2)
            e.frees(loss[1:])
        else:
            gb = e.alloc(int(t.logits_grad_bf16)) if t.logits_grad_bf16 else None
        new_grads(head_grads)
        head_keys = grads[-len(head_grads):] if head_grads and not accumulate else []
        if first_matmul_bw:  # lm_head's backward is the first matmul of backward (autograd's thread)
            e.mark()
            first_matmul_bw.clear()
        if head_slots:  # lm_head's input gradient, then the final norm's backward
            keys = head_slots.pop()
            dx = e.alloc(r)
            if gb is not None:
                e.free(gb)
            e.free(keys[5][0])
            bk = {**keys, -1: (dx, r)}
            g_stream = dx
            for sign, slot, n in final_norm[1]:
                if sign > 0:
                    bk[slot] = (e.alloc(n), n)
                    g_stream = bk[slot][0]
                else:
                    e.free(bk[slot][0])
        else:
            if gb is not None:
                e.free(gb)
            e.frees(head)
            g_stream = e.alloc(r) if layer_ops else None  # the final norm's input gradient
        for i in reversed(idx):
            if hook:
                hook("backward", i, e, grads)
            ops = layer_ops[i] if layer_ops else None
            if ops is not None and g_stream is not None:
                if t.layer_checkpointed(i):
                    # the recompute runs the layer's forward with grad from its kept input; its output goes
                    slot_keys[i] = {}
                    _, out = run_ops(ops.forward, saved[i][0][0], grad=True, keys=slot_keys[i])
                    e.free(out)
                g_stream = run_backward(ops, slot_keys.pop(i), g_stream, list(per_layer_grads[i]))
                if t.layer_checkpointed(i):
                    e.frees(saved[i])
                continue
            if t.layer_checkpointed(i):
                inner = e.allocs(_saved_pieces(act.per_layer[i], shape))
            else:
                inner = saved[i]
            sc = shape.eager_score_bytes
            if sc and t.layer_backward_transient[i] >= 3 * sc > 3 * shape.mlp_bytes:
                # eager attention's backward, its term's score-sized buffers (the probabilities' gradient
                # and its fp32 copy), then CUDA's fp32 ``grad * output`` of the softmax backward (``_layer_ops``),
                # which the term counts too (``memory.attention.SOFTMAX_BACKWARD_TMP_BYTES_PER_SCORE``)
                tr = e.allocs(_chunks(t.layer_backward_transient[i] - 2 * sc, 2 * sc))
                e.free(e.alloc(2 * sc))
            else:
                stacks = t.expert_stack_grads[i] if t.expert_stack_grads else ()
                moment = loop_stack_grad_moment_bytes(stack_bytes=stacks, stacks_are_leaves=t.expert_stacks_are_leaves)
                tr = e.allocs(_chunks(t.layer_backward_transient[i] - moment, fp32_res))
                if stacks:
                    # loop_v5's expert loop (memory.expert_loop_grads): the stacks' gradient sums (PEFT's merged
                    # stacks; a trained stack's sum is its .grad), then one expert's zero stack, added in place
                    if not t.expert_stacks_are_leaves:
                        tr += e.allocs([int(b) for b in stacks])
                    e.free(e.alloc(int(max(stacks))))
            gs = per_layer_grads[i]
            # the layer's parameter gradients appear as its saved tensors go (last op first)
            n = max(len(gs), len(inner))
            for j in range(n):
                if j < len(gs):
                    new_grads([gs[j]])
                if j < len(inner):
                    e.free(inner[len(inner) - 1 - j][0])
            e.frees(tr)
            if t.layer_checkpointed(i):
                e.frees(saved[i])
        e.frees(emb_shared)
        emb_shared.clear()
        if hook:
            hook("backward_layers_end", -1, e, grads)
        if g_stream is not None:
            e.free(g_stream)  # consumed by the embedding's backward
        new_grads(emb_grads)
        if t.tied_embedding_grad_transient and head_keys and not emb_grads:
            # tied embeddings: lm_head's backward made the shared weight's .grad (the head's largest
            # gradient); the embedding's backward makes its own, AccumulateGrad makes the sum, a new
            # tensor that becomes .grad, and both earlier ones go (seen in the trace's allocation order)
            held = max(head_keys, key=lambda kn: kn[1])
            half = int(t.tied_embedding_grad_transient // 2)
            own, total = e.alloc(half), e.alloc(half)
            e.free(held[0])
            e.free(own)
            grads[grads.index(held)] = (total, half)
        elif t.tied_embedding_grad_transient:
            e.frees(e.allocs(_chunks(t.tied_embedding_grad_transient, max(1, int(t.tied_embedding_grad_transient) // 2))))
        if accumulate and t.accumulation_transient:
            e.frees(e.allocs([int(t.accumulation_transient)]))
        e.frees(emb)
        # the replay drops the output after backward, as the H200 calibration harness's warm-up does; a card's loop
        # that keeps it bound into the optimizer step (loop.keeps_output_through_backward) is held there by the phase
        # walk (memory.phases.StepTerms.kept_output), not by this replay
        while kept_out:
            e.free(kept_out.pop())
        if hook:
            hook("backward_end", -1, e, grads)
        return grads

    full_layers = bool(layer_w) and all(g >= 0.5 * layer_w for g in t.grads_per_layer)
    lora_layers = not full_layers and t.adapter_weights > 0 and not t.grads_head and not t.grads_embedding
    # a layer's ops depend only on what it saves: identical layers (every layer of a dense model) share them
    ops_of: dict[float, _LayerOps | None] = {}
    for x in set(act.per_layer):
        ops_of[x] = _lora_layer_ops(x, shape) if lora_layers else _layer_ops(x, shape, full=full_layers)
    layer_ops = [ops_of[act.per_layer[i]] for i in idx]
    if any(o is None for o in layer_ops):
        layer_ops = []
    if not layer_ops:
        no_grad_ops = []
    elif lora_layers:
        no_grad_ops = _lora_layer_ops(0, shape, grad=False).forward  # type: ignore[union-attr]
    else:
        no_grad_ops = _layer_ops_no_grad(shape)
    slot_keys: dict[int, dict] = {}
    new_grads_ref: list = [None]
    head_slots: list[dict] = []
    # the final norm op by op where the head saves its fp32 copy, its cast and lm_head's input (and rsqrt)
    final_norm = _final_norm_ops(r) if layer_ops and full_layers and 4 * r <= act.head < 4 * r + SMALL_SIZE else ()
    micro = 2 if t.grad_accumulation else 1
    first_matmul, first_matmul_bw = [True], [True]
    kept_out: list[int] = []
    grads: list[tuple[int, int]] = []
    for m in range(micro):
        f = forward()
        got = backward(*f, accumulate=m > 0)
        grads.extend(got)
    at = len(e.ev)
    if t.optimizer_temporaries >= 1 and shape.optimizer_per_tensor and all_grads:
        # for_loop (torch/optim/adam.py ``_single_tensor_adam``): per parameter
        # ``denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)`` makes two tensors of its
        # size, the sqrt freed once divided; the previous parameter's ``denom`` goes when the name is
        # bound to the new one, the last after the loop
        unit = t.optimizer_temporaries / 2 / max(all_grads)
        prev = None
        for g in all_grads:
            root, denom = e.alloc(int(g * unit)), e.alloc(int(g * unit))
            e.free(root)
            if prev is not None:
                e.free(prev)
            prev = denom
        if prev is not None:
            e.free(prev)
    else:  # foreach: one list of temporaries over the parameters, freed together
        e.frees(e.allocs(per_grad(t.optimizer_temporaries) if t.optimizer_temporaries >= 1 else []))
    if hook:
        hook("zero_grad", -1, e, grads)
    e.frees(grads)
    # only the large pool (requests over 1 MiB) is replayed: small tensors (norm weights, LoRA adapters,
    # their gradients and states) live in 2 MiB segments of their own pool and add at most its slack
    large = {k for s_, k, n in e.ev if s_ > 0}
    events = tuple(ev for ev in e.ev if ev[0] > 0 or ev[1] in large)
    dropped = list(accumulate(ev[0] < 0 and ev[1] not in large for ev in e.ev))  # before each raw index, plus one

    def kept(raw: int) -> int:
        """Index in ``events`` of raw index ``raw`` (frees of small tensors are dropped)."""
        return raw - (dropped[raw - 1] if raw > 0 else 0)

    marks = [kept(m) for m in e.marks]
    if workspace and len(marks) < len(workspace):  # no matmul seen (cannot happen for a decoder): up front
        marks = [0] * len(workspace)
    return AllocSequence(tuple(int(x) for x in persistent if x > SMALL_SIZE), tuple(workspace), events,
                         tuple(int(x) for x in states if x > SMALL_SIZE), kept(at), tuple(marks[:len(workspace)]))


@dataclass(frozen=True, slots=True)
class Replayed:
    peak_reserved: int
    peak_allocated: int

    @property
    def overhead(self) -> int:
        """Reserved beyond allocated at the high-water mark."""
        return self.peak_reserved - self.peak_allocated


def replay(seq: AllocSequence, *, expandable: bool = False, steps: int = 2) -> Replayed:
    """Replay ``steps`` steps of ``seq`` in a fresh process."""
    a = _replay_into(seq, expandable=expandable, steps=steps)
    return Replayed(a.peak_reserved, a.peak_allocated)


def _replay_into(seq: AllocSequence, *, expandable: bool, steps: int = 2, lazy: bool = True,
                 allocator: CachingAllocator | None = None) -> CachingAllocator:
    return replay_steps(persistent=list(seq.persistent), step_events=list(seq.step_events),
                        first_step_extra=list(seq.first_step_extra), first_step_extra_at=seq.first_step_extra_at,
                        workspace=list(seq.workspace), steps=steps, expandable=expandable,
                        workspace_at=seq.workspace_at if seq.workspace and lazy else None,
                        allocator=allocator if allocator is not None else _allocator(expandable))


def _allocator(expandable: bool) -> CachingAllocator:
    """A fresh process's allocator; with expandable segments the model that keeps unmapped address space
    and torch's best-fit rule for blocks beside it (``trainfit.memory.expandable_segments``)."""
    if expandable:  # imported only here: a plan without expandable segments does not load it
        from trainfit.memory.expandable_segments import ExpandableAllocator

        return ExpandableAllocator()  # type: ignore[return-value]
    return CachingAllocator()
