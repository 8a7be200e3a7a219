"""Memory-bound work of Transformer Engine's ring (P2P) context-parallel attention, per attention layer.

Transformer Engine runs causal attention under ring context parallel (Megatron-Core's default ``cp_comm_type``
``p2p``) as ``cp`` separate fused-attention calls per layer and pass, one per ring step, on load-balanced chunks: each
rank holds chunks ``r`` and ``2·cp − 1 − r`` of the sequence (``c`` tokens each). Step 0 is the rank's own K and V
under a causal mask; a step whose K/V come from a lower rank (``i <= rank`` in the forward) runs all the rank's
queries against the first half of the received K/V, a step from a higher rank the second half of the queries against
all of it. The attention FLOPs of those calls equal the causal ``1/cp`` share the inventory already counts
(``attention_time``). What they add is glue around each call, all bf16 (``b`` = 2 B), read from
NVIDIA/TransformerEngine transformer_engine/pytorch/attention.py @0fbc76af3733ae997394eaf82b78ff9c0498fe91 (tag
v1.4, ``AttnFuncWithCP``, cuDNN fused-attention branch):

Forward (``AttnFuncWithCP`` from l.491), with ``Q`` the rank's query elements (tokens x its heads x head dim;
also the output's) and ``K`` its key elements (the same for values):

* the first send buffer ``torch.cat((k, v))`` (l.537): ``2K`` read and written, ``4K·b``;
* ``out = torch.empty_like(q).zero_()`` (l.683): ``Q·b`` written;
* a lower step copies the first half of the received K and V, ``kv_inputs[:, :, 0, ...].contiguous()`` (l.592):
  ``K`` read and written, ``2K·b``; a higher step the second half of the queries, ``q[:, 1, ...].contiguous()``
  (l.621): ``Q·b``;
* every step's output is merged into ``out`` (``flash_attn_fwd_out_correction``, l.474-480 and l.700-714, a
  ``torch.compile`` kernel, ``jit_fuser`` in transformer_engine/pytorch/jit.py l.11-13 of the same commit): its
  partial output read, ``out`` read and written, ``3·b`` per element merged: ``3Q·b`` for step 0 and a lower step,
  ``1.5Q·b`` for a higher one (half the queries). The log-sum-exp merges are per token and head, not per head
  dimension: left out (under 1 % of the above at head dim 128).

Backward (from l.736):

* the K/V buffer ``p2p_comm_buffers[0][0].copy_(kv)`` (l.762): ``4K·b``;
* the diagonal step accumulates ``dq.add_`` (``3Q·b``) and ``dkv.add_`` (``6K·b``), after ``torch.cat((dk_, dv_))``
  (l.982, ``4K·b``);
* a lower step: K/V half copy (l.841, ``2K·b``), ``dq.add_`` (l.959, ``3Q·b``), the half-size ``cat`` (``2K·b``) and
  ``dkv[:, :, 0, ...].add_`` (l.1002, ``3K·b``);
* a higher step: ``q``, ``out`` and ``dout`` second halves made contiguous (l.879-884, ``3Q·b``), ``dq[:, 1,
  ...].add_`` (l.967, ``1.5Q·b``), the full ``cat`` (``4K·b``) and ``dkv.add_`` (l.1004, ``6K·b``).

Over the ranks a rank has ``(cp − 1) / 2`` lower and as many higher steps on average (rank ``r`` has ``r`` lower
ones), which the sums below take. The current file keeps the same copies and merges
(transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py
@d0067d0da6cb01811b8072a7d304f0e00344ce2b:
``k_part.contiguous()`` / ``q_part.contiguous()`` l.872-887, ``flash_attn_fwd_out_correction`` l.1993-2012,
``q_part, out_part, dout_part`` l.1178, ``dq.add_`` l.2667-2698).

Kernels per step: forward the copy, the log-sum-exp merge (l.689-695) and the output merge (three); backward the
copies (one for a lower step, three for a higher), the ``cat`` and the two accumulations.

The P2P exchange itself (K/V around the ring, and dK/dV in the backward) is ``model_parallel``'s context term.

All of it is timed as serial memory-bound work. Two departures, both small: the forward issues each step on one of
two alternating streams (l.531-532, "to resolve wave quantization issue"), so a step's half copy (``n·(2K + Q)·b``
over the ``n = (cp − 1)/2`` steps of each kind) may run beside the previous step's attention call (about a tenth of
the glue at cp 32); and later releases accumulate dK and dV in place without the ``cat`` (context_parallel.py
l.2774-2810 @d0067d0), about a tenth of the backward glue on a GQA model at cp 2, counted here as in v1.4.

Checked and not taken (NeMo 24.03 long-sequence Llama-2-7B rows on H100, ``published_train_times_nemo_dgxc_2403_2409.json``,
at -18 to -22 % after this term, with the same container's context-parallel-free 4K / 8K / 16K rows at -13 to -16 %):

* FlashAttention instead of cuDNN under CP: v1.4 keeps cuDNN's ``F16_arbitrary_seqlen`` backend with context
  parallel (attention.py l.2810-2814) and prefers it on sm90 (l.2834-2838), so the rows' cuDNN rates stand.
* A slower causal backward: cuDNN 9.19 on an H200, Llama-3.1 shape, bf16 (NVIDIA/cudnn-frontend
  benchmark/sdpa_benchmark_training/results/h200_919_only_cudnn/llama3.1_20260227_034703.csv
  @df73764adb98b7445b77662ce07b1ea434c8f3ee) runs the causal backward at 579 / 581 TFLOP/s at 16k / 32k against
  612 / 572 without a mask (forward 673 / 688 against 702 / 693): at most 5 % apart, and ring CP turns all but one
  of a rank's ``cp`` calls into unmasked ones, which would make CP rows faster, not slower.
* The P2P exchange: at the rows' layouts each step's K/V (and dK/dV) block moves in under the step's attention call
  (1M tokens, CP 32, TP 8: 67 MB forward, 134 MB backward per step over the 50 GB/s NIC, 1.3 / 2.7 ms, against
  about 2 / 5 ms of attention), so ``model_parallel`` leaves none exposed. Not modelled: the SMs NCCL's send and
  receive kernels hold during that time (no published figure read).

torch's own ring attention (torchtitan's context parallel; not counted here, those rows are not Megatron-Core):
its merges run in fp32 outside the kernel (pytorch/pytorch torch/distributed/tensor/experimental/_attention.py
@0123248a484ffe531edb5098b986c1bac08cd296, a later file than the torch those rows ran: ``_SDPAMerger`` converts each
step's output to fp32 and merges it with four eager ops, a half-query step re-concatenates the whole fp32 output in
``_partial_update``; the backward accumulates dQ, dK, dV in fp32 and concatenates dK/dV every step). Counted by hand
for the Llama-3.1-8B 256K CP 8 row (32K tokens a rank, 134 M query and 34 M key elements a layer): about 34 GB a
layer forward (run twice under full recompute) and 26 GB backward, about 1.1 s a step at the H100's memory rate,
against 44.6 s planned and 59.8 s published: 2 points of that row's -25 %, so not the cause of its miss.

What remains looks like the attention rate itself: taking the non-attention terms as far off as in the 4K row (where
attention is 15 % of the step), the same rows imply cuDNN attention about 1.2x (no CP, 16K) to 1.3x (CP) slower
than the Hopper cuDNN rates of ``attention_time`` (FlashAttention-3 paper figures, mid-2024) in a container of March
2024 (cuDNN 9.0); no cuDNN 9.0 attention rate was found to take.

Pure Python: no torch import.
"""

from __future__ import annotations

RING_DTYPE_BYTES = 2.0
"""bf16 / fp16 activations (Transformer Engine's CP path takes only those, attention.py l.2706-2712 @v1.4:
https://github.com/NVIDIA/TransformerEngine/blob/0fbc76af3733ae997394eaf82b78ff9c0498fe91/transformer_engine/pytorch/attention.py#L2706-L2712)."""
FORWARD_KERNELS_SETUP = 2.0
"""The forward's kernels before the ring: the first send buffer's ``torch.cat`` and ``out``'s ``zero_`` (l.537,
l.683: https://github.com/NVIDIA/TransformerEngine/blob/0fbc76af3733ae997394eaf82b78ff9c0498fe91/transformer_engine/pytorch/attention.py#L537)."""
FORWARD_KERNELS_DIAGONAL = 2.0
"""Step 0's forward glue: the log-sum-exp and output merges, no half copy (its K/V are the rank's own):
``flash_attn_fwd_softmax_lse_correction`` and ``flash_attn_fwd_out_correction``, l.689-714 of https://github.com/NVIDIA/TransformerEngine/blob/0fbc76af3733ae997394eaf82b78ff9c0498fe91/transformer_engine/pytorch/attention.py"""
FORWARD_KERNELS_PER_STEP = 3.0
"""A later forward step's glue: the half copy (l.592 or l.621) and the two merges (l.689-714): https://github.com/NVIDIA/TransformerEngine/blob/0fbc76af3733ae997394eaf82b78ff9c0498fe91/transformer_engine/pytorch/attention.py"""
BACKWARD_KERNELS_PER_LOWER_STEP = 4.0
"""A lower backward step: the K/V half copy (l.841), ``dq.add_`` (l.959), the ``cat`` of dK and dV (l.982) and
``dkv[:, :, 0, ...].add_`` (l.1002): https://github.com/NVIDIA/TransformerEngine/blob/0fbc76af3733ae997394eaf82b78ff9c0498fe91/transformer_engine/pytorch/attention.py"""
BACKWARD_KERNELS_PER_HIGHER_STEP = 6.0
"""A higher backward step: ``q``, ``out`` and ``dout`` second halves made contiguous (l.879-884), ``dq[:, 1,
...].add_`` (l.967), the ``cat`` (l.982) and ``dkv.add_`` (l.1004): https://github.com/NVIDIA/TransformerEngine/blob/0fbc76af3733ae997394eaf82b78ff9c0498fe91/transformer_engine/pytorch/attention.py"""
BACKWARD_KERNELS_DIAGONAL = 3.0
"""The diagonal backward step: the dQ accumulation, the ``cat`` of dK and dV and the dK/dV accumulation, no copy.
Read against the v1.4 file (l.957-1002, ``AttnFuncWithCP.backward``) this is the last rank's count: there ``dq.copy_``
and ``dkv[:, :, 0, ...].copy_``; a middle rank splits dQ into a ``copy_`` and an ``add_`` of its halves (4 kernels)
and rank 0 splits dK/dV too (5). Kept at 3 (about one kernel a layer short on most ranks): not changed here."""


def ring_merge_bytes(*, query_elements: float, kv_elements: float, context_parallel: int,
                     dtype_bytes: float = RING_DTYPE_BYTES) -> tuple[float, float]:
    """(forward, backward) bytes of Transformer Engine's ring-attention glue for one causal attention layer on one
    rank (module docstring). ``query_elements``: the rank's query elements (its tokens x its heads x head dim);
    ``kv_elements``: its key elements (tokens x its KV heads x head dim); ``context_parallel``: ring size (1: none)."""
    if context_parallel <= 1:
        return 0.0, 0.0
    if query_elements < 0 or kv_elements < 0:
        raise ValueError("query_elements and kv_elements must be >= 0")
    q, k, half = float(query_elements), float(kv_elements), (context_parallel - 1) / 2.0
    fwd = (4 * k + q + 3 * q) + half * (2 * k + 3 * q) + half * (q + 1.5 * q)
    bwd = (4 * k + 3 * q + 4 * k + 6 * k) + half * (2 * k + 3 * q + 2 * k + 3 * k) + half * (
        3 * q + 1.5 * q + 4 * k + 6 * k)
    return fwd * dtype_bytes, bwd * dtype_bytes


def ring_merge_kernels(*, context_parallel: int) -> tuple[float, float]:
    """(forward, backward) kernels of the same glue per layer (module docstring). Forward: ``cat`` and ``zero_``,
    step 0's two merges, then a half copy and two merges on each of the other ``cp − 1`` steps: ``3·cp + 1``.
    Backward: the K/V buffer copy, the diagonal step's three, then 4 per lower and 6 per higher step, ``(cp − 1)/2``
    of each on average."""
    if context_parallel <= 1:
        return 0.0, 0.0
    half = (context_parallel - 1) / 2.0
    fwd = FORWARD_KERNELS_SETUP + FORWARD_KERNELS_DIAGONAL + FORWARD_KERNELS_PER_STEP * (context_parallel - 1)
    per_pair = BACKWARD_KERNELS_PER_LOWER_STEP + BACKWARD_KERNELS_PER_HIGHER_STEP
    bwd = 1.0 + BACKWARD_KERNELS_DIAGONAL + half * per_pair
    return fwd, bwd
