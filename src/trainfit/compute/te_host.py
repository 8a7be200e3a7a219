"""Host seconds of Transformer Engine's Python backward, per linear module call (Megatron-Core's TE layers).

What the per-kernel host rates miss. ``training.pass_seconds`` charges a backward's host at
``rates.host_s_per_backward_kernel`` per kernel: the autograd engine's C++ walk and the launch, fitted on
transformers' modules, whose backward nodes are C++ (``aten`` derivatives). Transformer Engine's linears are
``torch.autograd.Function`` subclasses whose ``backward`` is Python: TE 2.16 ``_Linear.backward`` (l.1311-1333 of
transformer_engine/pytorch/module/linear.py in the ``transformer-engine==2.16.0`` wheel from PyPI) runs
``_linear_backward`` (l.716-1250), which restores
the saved tensors and quantizers, picks the userbuffers / overlap options, calls ``general_gemm`` for dgrad and for
wgrad (each through ``cpp_extensions/gemm.py``'s Python argument handling before ``tex.generic_gemm``), handles
``fuse_wgrad_accumulation`` / ``main_grad`` and the bias gradient, and clears the saved tensors;
``_LayerNormLinear.backward`` (module/layernorm_linear.py l.586) adds the norm's backward and its gradient bookkeeping. The
CPU time of that Python is published per call:

* NVIDIA/TransformerEngine pull request #3523 ("Remove the view() calls from Linear/LNLinear/LNMLP modules",
  https://github.com/NVIDIA/TransformerEngine/pull/3523, opened 2026-09-15, read 2026-12-03), on GB200, CPU time only,
  before -> after that change: ``Linear`` BF16 forward 59.19 -> 51.19 us, forward + backward 311.30 -> 276.50 us;
  ``Linear`` MXFP8 forward 114.51 -> 103.62, forward + backward 440.93 -> 416.92; ``LayerNormLinear`` BF16 forward
  83.48 -> 65.25, forward + backward 397.73 -> 349.00; ``LayerNormLinear`` MXFP8 forward 135.42 -> 121.07, forward +
  backward 518.67 -> 490.49. The "before" figures are taken (the published runs predate the change): backward =
  (forward + backward) - forward: ``Linear`` 252.1 us BF16, 326.4 us MXFP8; ``LayerNormLinear`` 314.3 us BF16,
  383.3 us MXFP8 (``TE_BACKWARD_HOST_S_GRACE``).
* NVIDIA/TransformerEngine issue #2053 ("[PyTorch] High CPU overhead on Grace systems",
  https://github.com/NVIDIA/TransformerEngine/issues/2053, 2025-08-11, read 2026-12-03): CPU time of one forward of a
  BF16 linear (hidden 2048, 8192 tokens), ``torch.nn.Linear``: 37.08 us on GB200, 33.17 us on GH200, 13.48 us on an
  H100 DGX (Intel Xeon Platinum 8480C); TE ``Linear``: 99.66 us on GB200, 90.53 us on GH200 (the same TE / torch ratio
  on both Grace hosts, 2.69 and 2.73). A DGX-class x86 host runs the same Python 13.48 / 37.08 = 0.364 times as long as
  GB200's Grace (``X86_OVER_GRACE_HOST``): the GB200 figures above are scaled by it for every other host.

What is added is each call's excess over what ``training.pass_seconds`` already charges for the call's kernels: the
per-kernel rate times the kernel factor (``COMPILE_KERNEL_FACTOR`` on fused-kernel cards, 1 otherwise) per kernel.
Forward (``te_forward_host_seconds``): the GEMM, and a ``LayerNormLinear``'s norm (``FORWARD_KERNELS_PER_CALL``),
against TE's forward per call (``TE_FORWARD_HOST_S_GRACE``: 59 / 83 us BF16 on Grace, 22 / 30 us scaled to x86).
At the full rate (``HOST_S_PER_FORWARD_KERNEL``, 65 us) the per-kernel charge covers it; under the 0.35 kernel factor
(22.75 us a kernel) a Grace host's calls exceed it, an x86 host's do not.
Backward (``te_backward_host_seconds``): dgrad and wgrad GEMMs, a ``LayerNormLinear`` adds the norm's backward
(``KERNELS_PER_CALL``), against the backward CPU time per call (``TE_BACKWARD_HOST_S_GRACE``). A quantized (fp8) call
is also charged its operand casts' kernels by the inventory (``quantized_extra_kernels``: the card's recipe's
casts), both ways.

Which modules a Megatron-Core layer runs (NVIDIA/Megatron-LM @7094270c6fa1dbc6b2e99072171e3a559ca36d0f,
megatron/core/models/gpt/gpt_layer_specs.py l.106-170 and l.297-322, moe_module_specs.py l.37-79): self-attention
``linear_qkv`` ``TELayerNormColumnParallelLinear`` and ``linear_proj`` ``TERowParallelLinear``; multi-latent attention
``linear_q_down_proj`` / ``linear_kv_down_proj`` ``TEColumnParallelLinear``, ``linear_q_up_proj`` /
``linear_kv_up_proj`` ``TELayerNormColumnParallelLinear`` (with the q/kv norms; DeepSeek-V3 sets them) and
``linear_proj`` (``q_lora_rank`` 0: one ``linear_q_proj`` in place of the q pair); a dense MLP ``linear_fc1``
``TELayerNormColumnParallelLinear`` and ``linear_fc2`` ``TERowParallelLinear``; a MoE layer's routed experts
``TEColumnParallelGroupedLinear`` / ``TERowParallelGroupedLinear`` and its shared experts ``TEColumnParallelLinear`` /
``TERowParallelLinear``. A ``GroupedLinear`` call is priced as one ``Linear`` call plus its per-GEMM Python: TE 2.16 ``_GroupedLinear``
(module/grouped_linear.py l.63-620) splits the input with ``m_splits`` and loops over the ``num_gemms`` local experts in
Python, forward (l.199-252: per-GEMM quantizer and output-list handling) and backward (l.388-566: the output gradient's
split, the dgrad and wgrad lists, per-GEMM ``main_grad`` / weight-gradient bookkeeping), around
``general_grouped_gemm`` (cpp_extensions/gemm.py l.276-420). Measured on a CPU with the compiled library stubbed
(``benchmarks/te_linear_backward_host.py``, 2026-12-03, two runs): forward 39.7-40.6 / 50.6-50.9 / 92.9-93.5 /
143.8-144.1 us and backward 73.1-74.0 / 104.0-115.3 / 203.4-204.1 / 370.5-384.7 us at 1 / 4 / 16 / 32 GEMMs: each
GEMM beyond the first adds 3.35 us forward and 9.8 us backward (``GROUPED_EXTRA_GEMM_HOST_S``, an x86 host; scaled to
Grace by ``X86_OVER_GRACE_HOST``; a third run on a more loaded machine read 3.3 and 11.4). The same script puts ``te.Linear``'s backward at 60-75 us on that CPU (the GEMM
launches stubbed out), against the 91.6 us this module takes for an x86 host with the launches: the two sources
agree. Not priced: the
attention Function's Python backward (``FusedAttnFunc``), ``TENorm``, and the Megatron-side autograd Functions
(all-to-all, permute): no published per-call figure. Priced in the forward: the attention-backend selection TE re-runs
when consecutive layers' attention parameters differ (``te_attention_select_host_seconds``: gpt-oss's alternating
windows). Every term here is the Python of an eager step: a trainer replaying a full-iteration CUDA graph runs none of
it, which no card field says yet (``te_attention_select_host_seconds``).

Checked, not priced (null result, 2026-12-05): a fixed cost per Megatron-Core micro-batch.
ISEEKYAN/verl_megatron_practice grpo_qwen2.5_7b.csv @9976592e899543c776e1a1086cee288079ef5b58 times Qwen2.5-7B GRPO
updates on 8 H100s whose rows differ only in the micro-batch structure (verl
@62549582a71881fe861b09f8375e3aea80ac6754: fixed micro-batches of 2 sequences, ``mini_batch.batch.split``, or
token-budgeted ones of ~14, ``rearrange_micro_batches``, 10,240 tokens: 18 a mini-batch at DP 2, 9 at DP 4). The plan
gives a 2-sequence (1,428-token) TP 4 update micro-batch 24.2 ms forward (host-bound: 10.3 ms device, 24.2 ms host, of
which TE's excess above is 0), 19.3 ms backward (18.5 ms device, 8.9 ms per-kernel host + 10.4 ms of this module's
backward excess), 2.2 ms head and 3.3 ms tensor-parallel traffic: 54 ms with the step's share of the rest (111.6 s /
2,048), against 146.6 ms published (300.2 s / 2,048); a 10k-token micro-batch is device-bound (55 + 115 ms device
against 24 + 19 ms host). Taking the difference as a constant per micro-batch: 92.1 ms at TP 4 ((300.2 - 111.6) s /
2,048) plans the token-budgeted TP 4 row at 80.7 + 288 x 0.0921 = 107.2 s against 102.0 published (the offloaded pair:
90.8 ms, 110.0 s against 124.6); 139.0 ms at TP 2 with recompute (114.8 s against 122.2); 128.7 ms at TP 2 and 128.6
ms at TP 2 x CP 2; the TP 2 x CP 2 log-prob pass 85.4 ms a forward-only 4-sequence micro-batch ((130.4 - 42.9) s /
1,024). So the pairs agree with a constant, but one that grows as TP falls (92 ms at TP 4, 129-139 at TP 2) while the
micro-batch's host work (op count and Python) is the same at both. Nothing cited prices it:

* Host cost per op. Every per-kernel host rate times ``K`` on Megatron-Core + TE passes (training.py
  ``train_step_time`` / ``forward_only_time`` with ``te_layers``), benchmarks/step_times.py rerun: at K = 3 these
  updates read -21.6 % (TP 4, was -62.8) but -39.1 % (TP 2, was -60.2) and the log-prob -47.1 % (was -67.1), and the
  host-bound Megatron-Bridge rows overshoot (the Qwen3-8B 32k SFT verification card +25.9 -> +248 %, the MLPerf v5.0
  GB200 Llama-2-70B LoRA steps +26 -> +156 %); all rows 10.1 -> 10.3 %, beyond 50 % 46 -> 55. Over the 151 rows K
  moves, the fit half reads 14.6 / 15.5 / 15.6 / 11.3 / 17.7 % at K = 1 / 1.25 / 1.5 / 2 / 3 and the held-out half
  15.7 / 16.4 / 16.6 / 16.1 / 16.9 %: no factor holds out, and none is published beyond the TE per-call figures above.
* verl's fused ``linear_cross_entropy`` (verl/utils/kernel/kernels.py, same commit): no per-call cost of that size.
  The forward allocates three fp32 buffers of tokens x ceil(V / TP / 1024) (l.561-567), launches one Triton main loop
  and its epilogues, and all-reduces the tokens x splits maxima and two per-token vectors on the TP group (l.645-677);
  the default backward (``_Split_Dlogits_N``, l.138) takes ``empty_like`` gradients (l.1427: no vocabulary-sized
  zeroing) and loops over ceil(V / TP / 9,504) vocabulary splits (l.1525-1534: 4 at TP 4, 8 at TP 2), one d-logits
  kernel and two or three GEMMs each, on a tokens x 9,504 buffer; every ``triton.autotune`` there holds one config
  (l.153-155, 290, 382, 458, 700-1272), so no new token count is benchmarked. Some 30-40 launches: about 1 ms of host
  at most.
* cuDNN graph rebuilds for the packed (THD) attention: TE quantises a ragged batch's graph key
  (NVIDIA/TransformerEngine v2.2 c55e425ac5751c72bfa656560fc7c65ab7d895e9,
  transformer_engine/common/fused_attn/fused_attn_f16_arbitrary_seqlen.cu l.93-99 and fused_attn/utils.cu l.532-563:
  batch <= 32 -> 32, tokens to the next power of two), so a run builds a handful of graphs, not one a micro-batch
  (with cuDNN >= 9.6; the run's cuDNN is not stated).
* verl's per-micro-batch host syncs (8 pageable copies, three ``preprocess_packed_seqs`` calls with three ``tolist``
  each and one boolean index a sequence, the outputs' ``postprocess``, five ``.item()`` in the loss): even with no
  host-device overlap at all the TP 4 micro-batch would take 24.2 + 10.3 + 19.3 + 18.5 + 5.5 = 78 ms, not 147.

Checked, not priced (null result, 2026-12-05): a host sync per Megatron-Core MoE layer or micro-batch as the reason
the launch-bound MoE rows plan short. Read in code: the flex dispatcher's HybridEP backend without drop-and-pad passes
``num_permuted_tokens=None``, so its dispatch runs with ``non_blocking = num_permuted_tokens is not None`` False and
waits on the host for the received-token count (NVIDIA/Megatron-LM megatron/core/transformer/moe/fused_a2a.py
l.365-367 and token_dispatcher.py ``_HybridEPManager.dispatch`` l.1042-1059 @d7288711ba278d160d2a5a22c099915c9fe1395c,
the Megatron-LM that Megatron-Bridge v0.4.0 pins); DeepEP's returns the per-expert counts as a host list
(fused_a2a.py l.135, ``torch.tensor(num_recv_tokens_per_expert_list)``), and ``TEGroupedMLP.forward``'s
``tokens_per_expert.tolist()`` (experts.py l.344 at core_v0.17.0 9539a12e1b04a68423f57b3eb41d6125161dca24) reads
host data after either dispatcher's wait. Each is the one wait per MoE layer forward already counted
(``moe_time.DISPATCH_FORWARD_SYNCS``); gpt-oss's quick-GEGLU adds a second (``inventory.QUICK_GEGLU_FORWARD_SYNCS``).
What any sync could add is bounded by running every pass with no host-device overlap at all (``host_s + device_s``
in ``training.synced_seconds``, ``benchmarks/step_times.py`` rerun, not committed): Megatron-Bridge's H100 FP8
Qwen3-30B-A3B 16-GPU rows 26.04 / 26.04.01 / 26.06 -27.1 / -26.6 / -27.7% -> -8.6 / -8.0 / -9.4% (2604: forward
host 6.59 s against 3.93 s of device work, backward 3.60 against 8.66), its verification card's pre-training -25.9 ->
-6.6% but the performance item -16.7 -> +12.2% and SFT -41.7 -> -32.1%; 25.11 / 26.02 -64.3 / -65.3% -> -55.9 /
-54.4%; the gpt-oss verification cards 20B SFT -49.0 -> -26.5%, 20B pre-training -44.6 -> -25.6%, 120B SFT -55.6 ->
-46.6%, 120B pre-training -63.9 -> -54.1%; ms-swift's Megatron Qwen3-30B-A3B -53.9 -> -47.4%; NeMo RL v0.3's
Qwen3-30B-A3B update -62.3 -> -53.1% and log-probs -56.7 -> -48.3%; while rows that plan close overshoot
(Megatron-Bridge 25.09 B200 Qwen3-30B-A3B -0.9 -> +26.7%, 26.04 B200 MXFP8 -9.6 -> +12.4%, 26.04 H100 Llama3-70B
+7.4 -> +17.8%, 26.04 H100 Qwen3-235B-A22B -12.8 -> +3.2%; all rows' median 10.3 -> 13.7%). Even that bound leaves
the rows beyond -50% there, and no sync placed inside a layer comes near it (one wait per layer costs a refill and a
round trip, ``synced_seconds``). The compute-bound Blackwell gpt-oss-120b BF16 rows are no host matter either:
26.04 B200 (published 6.28 s, planned 4.61 s: GEMMs 1.59, attention 0.50, memory-bound 0.96 with the recompute, EP
0.28 exposed, data-parallel 0.67, slowest rank 0.57; host 0.77 s hidden; read before the float32 bias loop,
``moe_dispatch.bias_loop_fp32_probs_extra``, which takes it to -23.7%) reads -26.6 -> -19.0% fully serialised;
closing it by one term would take the GEMMs 2.1x, the memory-bound work 2.7x or attention 4.3x slower; tile
quantisation of gpt-oss's 2,880-wide expert outputs costs 2.2% of a 128-column tile (6.3% of a 256-column one).
* A per-micro-batch pass over the rank's parameters (the growth as TP falls): a + b / TP through 92.1 ms at TP 4 and
  129-139 ms at TP 2 gives b = 148-188 ms at TP 1, 65-83 B per parameter per micro-batch at 3.35 TB/s, 6-8 times
  Megatron-Core's fp32 gradient accumulation (10 B), and the forward-only pass has no gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.compute.float8_casts import TRANSFORMER_ENGINE, CastTraffic
from trainfit.spec.enums import LayerKind
from trainfit.spec.model import ModelSpec

TE_BACKWARD_HOST_S_GRACE = {
    ("linear", False): 311.30e-6 - 59.19e-6,
    ("linear", True): 440.93e-6 - 114.51e-6,
    ("layernorm_linear", False): 397.73e-6 - 83.48e-6,
    ("layernorm_linear", True): 518.67e-6 - 135.42e-6,
}
"""CPU seconds of one TE module's backward on GB200's Grace host, by (module, quantized): forward + backward minus
forward, the "before" column of TransformerEngine pull request #3523 (module docstring;
https://github.com/NVIDIA/TransformerEngine/pull/3523, its GB200 table re-read). The quantized row is MXFP8,
the one quantized recipe that table measures; it stands for every fp8 recipe."""
X86_OVER_GRACE_HOST = 13.48 / 37.08
"""How long an x86 DGX host (Intel Xeon Platinum 8480C) takes for the same host Python as GB200's Grace: one
``torch.nn.Linear`` forward's CPU time, 13.48 us on an H100 DGX vs 37.08 us on GB200 (TransformerEngine issue #2053,
https://github.com/NVIDIA/TransformerEngine/issues/2053, its table re-read; module docstring)."""
GRACE_HOST_GPUS = frozenset({"gb200", "gb300"})
"""Catalog GPUs whose host CPU is NVIDIA Grace (the superchip's, NVLink-C2C attached; GB300 NVL72: 36 Grace CPUs for 72
GPUs, https://www.nvidia.com/en-us/data-center/gb300-nvl72/, read 2026-12-03)."""
GROUPED_EXTRA_GEMM_HOST_S = {"forward": 3.35e-6, "backward": 9.8e-6}
"""Host seconds TE 2.16's ``GroupedLinear`` adds per GEMM beyond the first, by pass, on an x86 host: the slope of the
measured per-call CPU time from 1 to 32 GEMMs (module docstring; ``benchmarks/te_linear_backward_host.py``). Measured,
not fitted."""
TE_FORWARD_HOST_S_GRACE = {
    ("linear", False): 59.19e-6,
    ("linear", True): 114.51e-6,
    ("layernorm_linear", False): 83.48e-6,
    ("layernorm_linear", True): 135.42e-6,
}
"""CPU seconds of one TE module's forward on GB200's Grace host, by (module, quantized): the forward column of the
same table (the "before" figures, module docstring; https://github.com/NVIDIA/TransformerEngine/pull/3523)."""
KERNELS_PER_CALL = {"linear": 2, "layernorm_linear": 3}
"""Kernels of one call's backward that the per-kernel backward rate already charges: dgrad and wgrad GEMMs,
and a ``LayerNormLinear``'s norm backward (NVIDIA/TransformerEngine @d0067d0da6cb01811b8072a7d304f0e00344ce2b:
``transformer_engine/pytorch/module/linear.py`` ``general_gemm`` l.1086 and l.1285;
``transformer_engine/pytorch/module/layernorm_linear.py`` l.862, l.1063 and ``tex.layernorm_bwd`` /
``tex.rmsnorm_bwd`` l.1142-1153)."""
FORWARD_KERNELS_PER_CALL = {"linear": 1, "layernorm_linear": 2}
"""Kernels of one call's forward that the per-kernel forward rate already charges: the GEMM, and a
``LayerNormLinear``'s norm (NVIDIA/TransformerEngine @d0067d0da6cb01811b8072a7d304f0e00344ce2b:
``transformer_engine/pytorch/module/linear.py`` ``general_gemm`` l.536;
``transformer_engine/pytorch/module/layernorm_linear.py`` ``apply_normalization`` l.257 and ``general_gemm`` l.410)."""


def quantized_extra_kernels(casts: CastTraffic | None) -> dict[str, int]:
    """What a quantized call adds to those, by pass: the operand casts the inventory charges every quantized linear
    under ``casts`` (the card's ``float8_casts.CastTraffic``; None: ``TRANSFORMER_ENGINE``'s per-tensor fp8 casts,
    the input's amax and cast forward, the output gradient's amax and cast and the input's transpose backward;
    ``TE_MXFP8``: one fused quantize each way; ``TE_NVFP4``: amax and quantize each way), which the published
    quantized CPU time includes. The weight's casts, once per step under TE's cache, are left out (a share of a
    kernel per call)."""
    c = casts if casts is not None else TRANSFORMER_ENGINE
    return {"forward": c.input_forward_kernels, "backward": c.backward_kernels}


@dataclass(frozen=True, slots=True)
class TeLinearCalls:
    """TE linear module calls in one pass over a rank's decoder layers."""

    linear: int = 0
    """``Linear``-like calls (``TEColumnParallelLinear``, ``TERowParallelLinear``, the grouped linears)."""
    layernorm_linear: int = 0
    """``LayerNormLinear`` calls (``TELayerNormColumnParallelLinear``)."""
    grouped_extra_gemms: int = 0
    """Over the ``GroupedLinear`` calls, their GEMMs beyond each call's first (local experts - 1 per call)."""


def te_linear_calls(spec: ModelSpec) -> TeLinearCalls:
    """The TE linear calls of one pass over ``spec``'s decoder layers under Megatron-Core's TE layer spec (module
    docstring)."""
    if spec.mla is not None:
        attn_lin, attn_ln = (3, 2) if spec.mla.q_lora_rank > 0 else (3, 1)
    else:
        attn_lin, attn_ln = 1, 1
    moe_layers = spec.num_moe_layers
    dense_layers = spec.num_layers - moe_layers
    shared = 2 if spec.moe is not None and spec.moe.shared_expert_intermediate_size > 0 else 0
    local_experts = spec.moe.num_experts if spec.moe is not None else 1
    return TeLinearCalls(
        linear=spec.num_layers * attn_lin + dense_layers * 1 + moe_layers * (2 + shared),
        layernorm_linear=spec.num_layers * attn_ln + dense_layers * 1,
        grouped_extra_gemms=moe_layers * 2 * max(0, local_experts - 1),
    )


TE_ATTENTION_BACKEND_SELECT_S = 76e-6
"""Host seconds of one Transformer Engine attention-backend selection (``dpa_utils.get_attention_backend``) on an x86
host: 73-79 us measured with the ``transformer-engine==2.16.0`` sources, the compiled library stubbed
(``benchmarks/te_attention_backend_select.py``, 2026-12-03, three runs); the midpoint, scaled to Grace by
``X86_OVER_GRACE_HOST``. Measured, not fitted."""


def te_attention_reselections(spec: ModelSpec) -> int:
    """Calls of Transformer Engine's ``DotProductAttention`` in one forward over ``spec``'s decoder layers that re-run
    its backend selection: TE keeps the backend chosen for one set of attention parameters only, in a module-global
    cache (``_attention_backends``), and selects again whenever a call's parameters differ from the previous call's
    (NVIDIA/TransformerEngine transformer_engine/pytorch/attention/dot_product_attention/dot_product_attention.py
    l.1318-1341 @v2.9 70f536662ae10a62a54f4ed1ba92e3314c5cfd69, l.1567-1590 @v2.16
    4220403e831d29e93868f7793693ea83f6b8b05b). Megatron-Core passes each layer's ``window_size`` (gpt-oss windows every
    other layer, ``window_attn_skip_freq``), so each full-attention layer whose window differs from the attention
    layer before it selects again; the first layer follows the last one of the previous micro-batch (cyclic). Zero
    without windowed layers, or when every attention layer is windowed alike."""
    if not spec.sliding_window or not spec.sliding_layers:
        return 0
    attn = [i for i in range(spec.num_layers) if spec.layer_kind(i) is LayerKind.FULL_ATTENTION]
    if len(attn) < 2:
        return 0
    windowed = set(spec.sliding_layers)
    return sum(1 for prev, cur in zip(attn[-1:] + attn[:-1], attn) if (prev in windowed) != (cur in windowed))


def te_attention_select_host_seconds(spec: ModelSpec, *, gpu_id: str) -> float:
    """Host seconds one forward over ``spec``'s decoder layers spends in Transformer Engine's attention-backend
    selection (``te_attention_reselections`` x ``TE_ATTENTION_BACKEND_SELECT_S``, on ``gpu_id``'s host): pure Python,
    no kernel, so beyond what the per-kernel rates charge.

    Eager execution only, like every TE host term here (module docstring): under a full-iteration CUDA graph the
    steps after the capture replay the recorded kernels and run none of this Python (Megatron-Core's
    ``FullCudaGraphWrapper.__call__`` calls ``cuda_graph.replay()`` instead of ``forward_backward_func``,
    NVIDIA/Megatron-LM megatron/core/full_cuda_graph.py @ed8706284f9f867a8c1bcc64d31623bea316e286). The Megatron-Bridge
    26.06 and 26.08 rows whose notes record ``cuda_graph_impl`` / scope ``full_iteration`` (gpt-oss-120b among them)
    are still charged it: the card has no field for a trainer's CUDA graphs yet, so this is priced on every card
    whose layers are TE's (``training``'s ``te_layers``) and whose attention windows alternate."""
    return te_attention_reselections(spec) * TE_ATTENTION_BACKEND_SELECT_S * _host_scale(gpu_id)[1]


def _host_scale(gpu_id: str) -> tuple[float, float]:
    """(Grace figures' scale, x86 figures' scale) for ``gpu_id``'s host."""
    if gpu_id in GRACE_HOST_GPUS:
        return 1.0, 1.0 / X86_OVER_GRACE_HOST
    return X86_OVER_GRACE_HOST, 1.0


def _call_kernels(*, calls: TeLinearCalls, kernels: dict[str, int], extra_quantized: float,
                  quantized: bool) -> tuple[tuple[str, int, float], ...]:
    """``(kind, calls, kernels per call)`` of the ``Linear`` and ``LayerNormLinear`` calls: ``kernels[kind]``, plus
    ``extra_quantized`` for a quantized call (its casts). One count for the host excess and the kernels inside TE."""
    extra = extra_quantized if quantized else 0.0
    return tuple((kind, n, kernels[kind] + extra)
                 for kind, n in (("linear", calls.linear), ("layernorm_linear", calls.layernorm_linear)))


def _excess_seconds(*, calls: TeLinearCalls, published: dict[tuple[str, bool], float],
                    kernels: dict[str, int], extra_quantized: float, quantized: bool, host_scale: float,
                    host_s_per_kernel: float) -> float:
    """Over the calls, each call's published CPU time (scaled to the host) less ``host_s_per_kernel`` for each of its
    kernels (``_call_kernels``), never below 0."""
    return sum(n * max(0.0, published[(kind, quantized)] * host_scale - k * host_s_per_kernel)
               for kind, n, k in _call_kernels(calls=calls, kernels=kernels, extra_quantized=extra_quantized,
                                               quantized=quantized))


def te_forward_kernels(*, calls: TeLinearCalls, quantized: bool, casts: CastTraffic | None = None) -> float:
    """Kernels of one forward pass that the inventory charges to TE's linear modules and that run inside their
    autograd Functions (``_Linear.forward``, ``_LayerNormLinear.forward``, ``_GroupedLinear.forward``): the GEMM, a
    ``LayerNormLinear``'s norm (``FORWARD_KERNELS_PER_CALL``) and a quantized call's casts
    (``quantized_extra_kernels(casts)``), per call (``_call_kernels``, the count ``te_forward_host_seconds`` reads).
    A grouped call's GEMMs are one kernel in the inventory (``moe_time.expert_gemm_kernels``), as here."""
    extra = quantized_extra_kernels(casts)["forward"] if quantized else 0
    return sum(n * k for _, n, k in _call_kernels(calls=calls, kernels=FORWARD_KERNELS_PER_CALL,
                                                  extra_quantized=extra, quantized=quantized))


def te_forward_host_seconds(*, calls: TeLinearCalls, quantized: bool, gpu_id: str,
                            host_s_per_forward_kernel: float, casts: CastTraffic | None = None) -> float:
    """Host seconds TE's Python forward adds to one forward pass beyond what the per-kernel rate charges (module
    docstring): per call, the published forward CPU time (Grace, or scaled to an x86 host) less
    ``host_s_per_forward_kernel`` for each of its kernels (``FORWARD_KERNELS_PER_CALL``; a quantized call's casts,
    ``quantized_extra_kernels(casts)``, ``casts`` the card's cast traffic as the inventory charges it), never below 0;
    plus the grouped linears' per-GEMM loop (``GROUPED_EXTRA_GEMM_HOST_S``). ``host_s_per_forward_kernel``: what
    ``training.pass_seconds`` charges a forward kernel, the rate times the kernel factor."""
    host, x86 = _host_scale(gpu_id)
    return calls.grouped_extra_gemms * GROUPED_EXTRA_GEMM_HOST_S["forward"] * x86 + _excess_seconds(
        calls=calls, published=TE_FORWARD_HOST_S_GRACE, kernels=FORWARD_KERNELS_PER_CALL,
        extra_quantized=quantized_extra_kernels(casts)["forward"], quantized=quantized, host_scale=host,
        host_s_per_kernel=host_s_per_forward_kernel)


def te_backward_host_seconds(*, calls: TeLinearCalls, quantized: bool, gpu_id: str,
                             host_s_per_backward_kernel: float, casts: CastTraffic | None = None) -> float:
    """Host seconds TE's Python backward adds to one backward pass beyond what the per-kernel rate charges (module
    docstring): per call, the published backward CPU time (Grace, or scaled to an x86 host) less
    ``host_s_per_backward_kernel`` for each of its kernels (``KERNELS_PER_CALL``; a quantized call's casts,
    ``quantized_extra_kernels(casts)``, ``casts`` the card's cast traffic as the inventory charges it), never below
    0; plus the grouped linears' per-GEMM loop. ``host_s_per_backward_kernel``: what ``training.pass_seconds`` charges a backward kernel,
    the rate times the kernel factor."""
    host, x86 = _host_scale(gpu_id)
    return calls.grouped_extra_gemms * GROUPED_EXTRA_GEMM_HOST_S["backward"] * x86 + _excess_seconds(
        calls=calls, published=TE_BACKWARD_HOST_S_GRACE, kernels=KERNELS_PER_CALL,
        extra_quantized=quantized_extra_kernels(casts)["backward"], quantized=quantized, host_scale=host,
        host_s_per_kernel=host_s_per_backward_kernel)
