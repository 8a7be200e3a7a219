"""Fused attention kernel time (FlashAttention / memory-efficient SDPA).

Work: forward ``4·s·q_dim`` FLOPs per token and layer (``Q·Kᵀ`` and ``P·V``), halved when the
kernel skips the masked half of a causal mask (``inventory.py`` applies it). The backward kernel
recomputes ``S = Q·Kᵀ`` and ``P`` and forms dV, dP, dQ, dK: five products against the forward's
two, so it executes ``2.5 x`` the forward FLOPs (Dao 2023, "FlashAttention-2", §3.2).

Rate: a fraction of the card's sustained matmul rate, by architecture, at long sequences:

=========  =======  ========  ================================================================
arch       forward  backward  source
=========  =======  ========  ================================================================
sm80/86/89  0.80     0.62      FlashAttention-2 paper, Fig. 4-5: A100, head dim 128, causal,
                               ~215 TFLOP/s forward and ~170 backward at 8-16k (of the 268 MAMF)
sm90, 100   0.45     0.34      FlashAttention-3 paper (Shah et al. 2024), Fig. 1-2: FlashAttention-2
                               (what PyTorch SDPA runs) on H100 reaches ~350 / ~270 TFLOP/s of 792
sm120       0.80     0.62      the sm8x row (below)
=========  =======  ========  ================================================================

Consumer Blackwell (compute capability 12.x: RTX 5090, RTX PRO 6000) takes the Ampere / Ada rates, not Hopper's.
FlashAttention-2 falls short on Hopper and datacenter Blackwell because their peak needs wgmma / tcgen05, which its
Ampere ``mma.sync`` kernels do not use; sm_120 has neither instruction (wgmma is an sm_90a-only, "architecture-
accelerated" feature that "cannot be run on later generation devices": https://reviews.llvm.org/D155851, quoting the
PTX ISA, read 2026-12-05; FA4 on sm_120 is "blocked on tcgen05/UMMA absence on consumer Blackwell",
Dao-AILab/flash-attention pull request #2592, read 2026-12-05), so ``mma.sync`` is
its tensor cores' own path, as on sm80/86/89, and it has the ~100 KB shared memory per SM of sm86/89 (the same pull
request), whose kernel configurations the sm8x rates cover. Measured: PyTorch SDPA's FlashAttention backend on an RTX
5090, bf16, head dim 128, 8 heads, 4,096 queries over 8,192 keys, non-causal forward: 186.73 TFLOP/s at a 400 W limit,
89.13 % of the catalog's 209.5 dense rate and 79.5 % of the card's sustained matmul rate (its measured torch.mm
234.98, ``rates._OTHER_MATMUL_FRACTION``): gau-nernst/learn-cuda
07_attention/README.md ("`F.sdpa()` (Flash Attention) | 186.73 | 89.13%", "5090 @ 400W") and 07_attention/main.py
l.30-40, 79, 86-87 (``head_dim = 128``, ``sdpa_kernel([SDPBackend.FLASH_ATTENTION])``, no mask, TFLOP/s from
``4 * bs * nh * lq * lkv * head_dim``) @e83c25699bfb7741426f0ab7094d6bacb0871ddc (2025-08-17); re-measured on torch
2.14 at 187.0 (400 W) and 190.58 (600 W, 90.97 %), 07_attention/README.md @19b2a2d35eb0d35977234079608404fdfa9e300a
("Update 2026/10/03"); read 2026-12-05. That forward sits at the sm8x causal 0.80 of the sustained rate (0.795 at
400 W, 0.811 at 600 W), twice the 0.45 the card
took before (the Hopper figure, unsourced for sm_120); no sm_120 backward is published, so both phases take the sm8x
row whole (no constant of sm_120's own). The Surogate Unsloth RTX 5090 rows moved with it (each entry's note).

Known gap, Blackwell (compute capability 10.x) under Transformer Engine: TE >= 2.0 prefers its cuDNN fused attention
on cc >= 9.0 (``get_attention_backend``, transformer_engine/pytorch/attention.py l.942
@e5cc6c299821e222aee0a7558f88e81c7a9fb134, v2.0), and NVIDIA/cudnn-frontend's SDPA tables measure cuDNN 9.13.1 at bf16,
head dim 128, causal, 16k tokens at 1,332.4 / 1,074.8 TFLOP/s forward / backward on a B200 and 1,702.5 / 1,267.8 on
a GB300 (benchmark/sdpa_benchmark_training/artifacts/sdpa_bf16_benchmark_results_NVIDIA_{B200,GB300}.csv l.23
@0b1577c8c83401237d601d0d0db5210506705396), about 0.76 / 0.62 and 0.93 / 0.70 of the matmul rate, where the Blackwell
NeMo / Megatron-Bridge rows keep the ``auto`` 0.45 / 0.34. Taken, those rates move 72 Blackwell rows: the GB300
rows closer (median 22.7 -> 12.7 %), the B200 and GB200 rows past zero (11.8 -> 19.1 %, 12.2 -> 13.6 %; the
held-out half of all Blackwell rows 12.8 -> 15.1 %). Something else in the B200 / GB200 step is too fast, and the
faster attention would expose it; not taken until that is found. Checked per term on the dense Llama rows against the
same recipes on H100: the host launch term lies under the GPU time on both (so CUDA graphs cannot move them), and
matmuls, attention (at the cuDNN rates above) and memory-bound kernels scale about as the rates do (B200 / H100,
Llama3-8B fp8, Megatron-Bridge 25.11: 2.2 / 2.2 / 2.5 against 2.1 published). A sustained (power-capped) matmul rate
is the one published candidate, and it does not close the GB200 rows (``rates._MAMF_FRACTION``, "Not taken, sustained matmul rates"). The GB200 and GB300 Llama3-70B rows
offload the activations of 40 and 20 of 80 layers to the Grace host (their entries' notes), planned as
``parallel.activation_offload_layers``: at the NVLink-C2C rate the copies hide behind the layers
(``offload.layer_offload_stall_seconds``), so that time does not explain them either.

Blackwell Ultra (B300, GB300; compute capability 10.3): the same tensor-core rate per SM as Blackwell, twice its
exponential unit (``MUFU.EX2``). The rates above, set at Blackwell's, are divided by ``exp_unit_time_factor``: the
kernel's exponential time, half of it exposed, at the card's own unit rate (its docstring: the model gives GB300 /
GB200 forward 1.20, backward 1.09 at head dim 128; NVIDIA's cuDNN benchmark measures 1.12-1.21 forward and
1.08-1.22 backward on the causal Llama-3.1 cases). Only the kernels near those bounds are scaled
(``EXP_BOUND_KERNELS``: auto, cuDNN, FlashAttention-4); FlashAttention-2, the Triton kernel and the windowed layers
are not.

Head dimension: the rates above are at head dim 128. A narrower head halves each tile's matmul work against the
same softmax, masking and Q/O traffic per score, so the kernels run further below the matmul rate. The factor
``head_dim_efficiency`` applies, per architecture, the published ratio of head dim 64 to head dim 128 on the same
kernel at 4k tokens, causal (linear in head dim between 64 and 128; 1 at 128 and above, where no change is claimed;
the 64 value below 64):

=========  =====  =====  ======================================================================================
arch       fwd    bwd    source (TFLOP/s, head dim 64 / 128)
=========  =====  =====  ======================================================================================
sm90       0.89   0.90   Shah et al. 2024, "FlashAttention-3", arXiv:2407.08608 (read 2026-12-02), Fig. 5 causal
                         forward, FlashAttention-2 on H100 SXM5 at 4k: 284 / 319 (16k: 299 / 335); Fig. 6 backward
                         (non-causal, the only one drawn), FlashAttention-2 at 4k: 279 / 310
sm100      0.67   0.67   Dao-AILab/flash-attention pull request #2605 (merged; read 2026-12-02), B200, FA4
                         forward, causal, seqlen 4096 batch 8: 708 / 1062 (2048: 561 / 899); no backward table by
                         head dim: the forward ratio
sm80/86/89 0.90   0.90   Dao 2023, "FlashAttention-2", arXiv:2307.08691, Fig. 4(c) / 4(d), A100 80GB SXM4, causal,
                         forward + backward, FlashAttention-2 at 4k: 156 / 173 (16k: 171 / 189), read from the
                         repository's copy, Dao-AILab/flash-attention assets/flash2_a100_fwd_bwd_benchmark.png
                         @4f285b354796fb17df8636485b9a04df3ebbb7dc (v2.0.0); the forward-only and backward-only
                         figures (Fig. 5, 6) were not read, so both phases take the forward + backward ratio
sm120      0.90   0.90   the sm8x row (its kernels are the sm8x code path, "Consumer Blackwell"); no sm120 head-dim
                         table was read
others     1.00   1.00   not applied
=========  =====  =====  ======================================================================================

Stated kernel (``RunCard.attention_kernel``; ``auto`` keeps the tables above). The fused kernel a run used sets the
rate far more than the architecture does on Hopper and Blackwell: FlashAttention-3 and cuDNN use Hopper's wgmma and
TMA, FlashAttention-4 Blackwell's tcgen05, while FlashAttention-2 runs its Ampere ``mma.sync`` kernels on every later
architecture. Rates as a fraction of the card's sustained matmul rate (H100 SXM / H200 794.5 TFLOP/s, B200 1,746;
``rates.default_rates``), at head dim 128, long sequences:

======  ====  =====  =====  ===========  =====================================================================
kernel  arch  fwd    bwd    hd 64 ratio  source (TFLOP/s, bf16)
======  ====  =====  =====  ===========  =====================================================================
fa2     sm8x  0.80   0.62   0.90         the ``auto`` row (FlashAttention-2 paper)
fa2     sm90  0.45   0.34   0.89 / 0.90  the ``auto`` row (FlashAttention-2 on H100 in the FlashAttention-3
                                         paper)
fa2     sm100 0.20   0.19   1.00         forward: meta-pytorch/tritonbench pull request #171 (closed; read
                                         2026-12-03), ``flash_v2`` on B200, head dim 128, non-causal (the only
                                         one drawn), batch 8 x 16 heads: 353.9 / 361.6 / 330.6 at 4k / 8k /
                                         16k, mean 349; backward: Dao-AILab/flash-attention issue #1589 (read
                                         2026-12-03), flash_attn 2.7.4.post1 on B200,
                                         ``benchmarks/benchmark_flash_attention.py``, non-causal, head dim 64
                                         (the only backward read): 334 at 16k (forward 379 there, so no
                                         head-dim-64 loss is applied). About the H100's FlashAttention-2
                                         figures in absolute terms (370 / 322 non-causal at 16k), a fifth of
                                         the B200's matmul rate
fa3     sm90  0.78   0.71   0.75         Shah et al. 2024, "FlashAttention-3", arXiv:2407.08608 (read
                                         2026-12-03), H100 SXM5 bf16 head dim 128 at 16k: Fig. 5 forward
                                         causal 616 (FlashAttention-2 335 in the same figure); Fig. 6 backward
                                         (non-causal, the only one drawn) 561 (FA2 322). Head dim 64 / 128,
                                         forward non-causal at 4k (Fig. 5's non-causal panels): 476 / 638; the
                                         backward takes the forward's ratio
fa4     sm100 0.81   0.69   0.67         Dao-AILab/flash-attention pull request #2280 (merged 2026-02-27; read
                                         2026-12-03), B200, head dim 128, causal, seqlen 8192 batch 4 x 16
                                         heads: forward 1418.1, backward 1208.6 (the 2-CTA path that pull
                                         request enables); head dim: the ``auto`` sm100 factor (pull request
                                         #2605, FA4 forward)
cudnn   sm90  0.68   0.65   0.67         Shah et al. 2024, the same figures' cuDNN bars: forward causal 539 at
                                         16k (Fig. 5), backward 516 (Fig. 6); head dim 64 / 128 forward
                                         non-causal at 4k: 408 / 609
triton_fa sm8x 0.57  0.25   1.00         FlashAttention in Triton (below). Dao 2023, "FlashAttention-2",
                                         arXiv:2307.08691 (read 2026-12-03), Fig. 4(d), A100 80GB SXM4,
                                         forward + backward, causal, head dim 128, "FlashAttention Triton"
                                         bars: 50 / 61 / 68 / 74 / 78 / 80 TFLOP/s at 512 / 1k / 2k / 4k / 8k
                                         / 16k (FlashAttention-2 in the same panel: 99 / 133 / 155 / 173 /
                                         182 / 189; FlashAttention (CUDA): 55 / 62 / 69 / 76 / 80 / 83);
                                         §4.1: "FlashAttention-2 is around 1.3-1.5x faster than
                                         FlashAttention in Triton in the forward pass and around 2x faster in
                                         the backward pass". Forward: the fa2 sm8x rate / 1.4 (the quoted
                                         range's middle) = 0.57; backward: what makes forward + backward 80
                                         at 16k (3.5 forward-FLOP units in 80 TFLOP/s, the forward at
                                         0.57 x 271 x 16384/16640 = 152, leaves 2.5 units at 67 = 0.25 of
                                         the matmul rate; 2.5x slower than fa2's backward, where the text's
                                         "around 2x" would give 102 fwd+bwd, not the figure's 80). Head dim:
                                         Fig. 4(c) causal head dim 64 gives the kernel 76 at 4k and 80 at
                                         16k, no loss against head dim 128 (74 / 80): 1.00. The
                                         short-sequence factor below reproduces the panel's shape: 54 / 76
                                         at 512 / 4k against the bars' 50 / 74
triton_fa sm90 0.32  0.14   1.00         assumed, no published figure: Fig. 7 (H100 SXM5) draws no Triton
                                         bar. The fa2 sm90 rates times the kernel's A100 ratio to
                                         FlashAttention-2 per phase (0.57 / 0.80 forward, 0.25 / 0.62
                                         backward): both are Ampere mma.sync kernels (this Triton kernel
                                         runs on Hopper without wgmma or TMA, its pinned Triton predating
                                         them), so each keeps its A100 standing. Check on another such
                                         kernel: FlashAttention (CUDA) against FlashAttention-2, causal head
                                         dim 128 at 16k, is 83 / 189 = 0.44 on A100 (Fig. 4(d)) and 137 /
                                         328 = 0.42 on H100 (Fig. 7(d)); the rates above give about 130 TFLOP/s
                                         forward + backward there, just under FlashAttention's 137, as the
                                         kernel's header says of A100 ("slightly slower")
fa1     sm8x  0.35   0.27   1.14         FlashAttention (version 1, CUDA). Dao 2023, "FlashAttention-2",
                                         arXiv:2307.08691, Fig. 4(d), A100 80GB SXM4, forward + backward,
                                         causal, head dim 128, "FlashAttention" bars: 55 / 62 / 69 / 76 / 80
                                         / 83 TFLOP/s at 512 / 1k / 2k / 4k / 8k / 16k against
                                         FlashAttention-2's 99 / 133 / 155 / 173 / 182 / 189 (the triton_fa
                                         row's figures): 83 / 189 = 0.44 of the fa2 sm8x rates. Per phase:
                                         the paper's forward-only and backward-only figures (Fig. 5, 6) were
                                         not read (their bars are drawn only in the paper's images, which
                                         were not available), so both phases take the forward + backward
                                         ratio (0.80 / 0.62 x 0.44). Head dim: Fig. 4(c), causal head dim 64,
                                         the same bars: 58 / 70 / 77 / 87 / 92 / 97; 87 / 76 = 1.14 at 4k
                                         (16k: 97 / 83 = 1.17), faster per FLOP at the narrower head (its
                                         head-dim-128 kernels use smaller blocks: the v1.x README, "Speedup is
                                         less than with the smaller head sizes, since we have to make the
                                         block size smaller in the tiling"); forward + backward only, so both
                                         phases take it. Read from the repository's copy of the figure,
                                         Dao-AILab/flash-attention assets/flash2_a100_fwd_bwd_benchmark.png
                                         @4f285b354796fb17df8636485b9a04df3ebbb7dc (v2.0.0)
fa1     sm90  0.19   0.14   1.10         the same paper's Fig. 7(d), H100 SXM5, causal, head dim 128 at 16k,
                                         forward + backward: FlashAttention 137, FlashAttention-2 328: 0.42
                                         of the fa2 sm90 rates (0.45 / 0.34 x 0.42); head dim: Fig. 7(c),
                                         causal head dim 64: 138 at 4k against 126 at head dim 128 = 1.10
                                         (16k: 156 / 137 = 1.14); assets/flash2_h100_fwd_bwd_benchmark.png
                                         at the same commit
======  ====  =====  =====  ===========  =====================================================================

``triton_fa`` is the Triton FlashAttention (the FlashAttention-1 algorithm) of Dao-AILab/flash-attention
``flash_attn/flash_attn_triton.py`` (@5d079fdd7a20bbd354080a80b20b5c36c93898d4 l.1-37: "*Experimental*",
"Tested with triton==2.0.0.dev20221202", "has only been tested on A100", "Triton forward is generally faster than
CUDA forward, while Triton backward is generally slower than CUDA backward. Overall Triton forward + backward is
slightly slower than CUDA forward + backward"), which llm-foundry copies (from @eff9fe6b, "update imports to use
'triton_pre_mlir'") as ``llmfoundry/models/layers/flash_attn_triton.py`` and runs for ``attn_impl: triton``
(mosaicml/llm-foundry @b2a43a1477a45f40f4086a1c72f851b0ab42d0ac that file l.1-3; ``triton_flash_attn_fn`` in
llmfoundry/models/layers/attention.py l.373-410 @5e85bd62d4ec9e13353ca95877477602ab538e5b), on a fork of that
pre-MLIR Triton patched to run on sm90 (setup.py l.66 @b2a43a14: ``triton-pre-mlir@...@triton_pre_mlir_sm90``).
The paper's "FlashAttention Triton" bars are not this file: the paper credits Phil Tillet's Triton implementation, and
the benchmark script the repository published for its figures (benchmarks/benchmark_flash_attention.py
@60499abcfda1fabd48e1b97341f4f888c66991a3 l.17, 2023-07-28; Dao-AILab/flash-attention issue #390, read 2026-12-03)
imports Triton's ``triton.ops.flash_attention``, the kernel this file starts from (its header: it speeds up the
forward and makes "the backward for d=128 much faster by reducing register spilling"). It is the closest published
measurement of this kernel, and perhaps a slow bound on its head-dim-128 backward; the header's own comparison
(slightly slower than FlashAttention CUDA forward + backward) matches it (80 against FlashAttention's 83 at 16k).
Built only for the Triton of December 2022, it has no Blackwell target: ``kernel_runs_on`` refuses it on compute
capability 10 and above (and under SDPA, which does not dispatch to it).

Pairs not in the table take the ``auto`` rates (the plan says so): no published FlashAttention-2 backward on sm120, no
cuDNN table on B200 at head dim 128 read (pull request #2605's cuDNN-vs-FA4 B200 table was read only at head dim 64),
none for cuDNN on Ampere, none for FlashAttention-1 on Turing (compute capability 7.5: the ``auto`` rates, said
so). FlashAttention-3 builds for Hopper only (the repository's ``hopper/`` package), FlashAttention-4 for Blackwell
(``flash_attn/cute``), the Triton FlashAttention for Ampere and Hopper: ``kernel_runs_on`` refuses the others.
FlashAttention-2 has no Turing or Volta build: Dao-AILab/flash-attention README.md
@4f285b354796fb17df8636485b9a04df3ebbb7dc (v2.0.0) l.59-62, "FlashAttention-2 currently supports: Ampere, Ada, or
Hopper GPUs ... Support for Turing GPUs (T4, RTX 2080) is coming soon, please use FlashAttention 1.x for Turing GPUs
for now", and its kernels check ``is_sm90 || is_sm8x`` ("FlashAttention only supports Ampere GPUs or newer",
csrc/flash_attn/flash_api.cpp l.201 there); PyTorch SDPA's flash backend is that code. FlashAttention-1 (``fa1``)
runs on Turing, Ampere, Ada and Hopper: README.md @6d48e14a6c2f551db96f0badc658a6279a929df3 (v1.0.9) l.72-76,
"Turing, Ampere, Ada, or Hopper GPUs (e.g., H100, A100, RTX 3090, T4, RTX 2080)", "Head dimensions that are
multiples of 8, up to 128 ... Head dim > 64 backward requires A100 or H100"; csrc/flash_attn/fmha_api.cpp there:
``TORCH_CHECK(is_sm90 || is_sm8x || is_sm75)`` (l.211, 369), ``head_size <= 128`` (l.246, 415), and for
``head_size > 64`` the backward's ``TORCH_CHECK(is_sm80 || is_sm90, ...)`` ("requires A100 or H100 GPUs as the
implementation needs a large amount of shared memory", l.416-417), ``is_sm80`` and ``is_sm90`` being compute
capability 8.0 and 9.0 exactly: ``kernel_head_dim_runs`` refuses the rest (a card trains, so its attention runs
the backward).

Short sequences fill fewer tiles and pay the softmax bookkeeping: ``seq / (seq + SEQ_HALF)`` with
``SEQ_HALF = 256`` (the same figures: half the long-sequence rate near 256-512 tokens).

Packed rows (``batch.packed_sample_tokens``): several samples concatenated into one row of ``S`` tokens, with
attention confined to each sample (causal within it). A kernel that skips the blocks outside the samples does
``Σ len_i²`` of work per row instead of ``S²``; per token that is a causal span of ``E[len²] / E[len]`` keys
(``packed_attention_context``), ``mean·(1 + cv²)`` for samples of mean ``mean`` and coefficient of variation
``cv``. Such kernels: FlashAttention's varlen entry point with ``cu_seqlens`` (Dao-AILab/flash-attention
``flash_attn_varlen_func``; transformers ``modeling_flash_attention_utils._flash_attention_forward`` takes it
for packed ``position_ids``, TRL ``padding_free`` / ``DataCollatorWithFlattening``), FlexAttention with a
block mask (torch ``nn/attention/flex_attention.py`` ``BlockMask``: a 128 x 128 block is skipped only when every
element is masked, so blocks straddling a sample boundary are computed whole: for samples not much longer than a
block the kernel does more than ``Σ len_i²``, not counted here; torchtune ``packed=True``), Transformer Engine's fused attention in the ``thd`` layout (cuDNN / flash with
``cu_seqlens``: Megatron-Core ``PackedSeqParams``, NeMo ``packed_sequence``). What they do not change: the
GEMMs and elementwise work (every token still runs), and the activation memory (these kernels keep O(seq)
state per row, packed or not). Kernels that do not skip: eager attention (transformers 5.x builds the
block-causal mask from packed ``position_ids``, ``masking_utils.find_packed_sequence_indices``, and the eager
path materialises all ``S²`` scores: planned as one sequence of ``S``) and SDPA given that boolean mask
(``sdpa_attention_forward`` drops ``is_causal`` when a mask is passed, so PyTorch runs the memory-efficient
kernel over every key block of the row: ``S²`` work, no causal halving). Context parallel (ring or Ulysses)
splits each sample across the ranks (Megatron-Core pads each to a multiple of ``2·cp``, Transformer Engine's
``thd`` ring exchange), so a rank's share of the attention work is ``1/cp`` of the row's per-sample work: the
same ``packed_attention_context`` with the rank's tokens; the ring still passes the rank's whole K and V
block, now behind less attention work (``model_parallel``'s exposure follows).

Sliding-window layers (``ModelSpec.sliding_window`` on the layers in ``sliding_layers``: gpt-oss windows every
other layer to 128 tokens, openai/gpt-oss gpt_oss/torch/model.py @243a1b02 ``sliding_window`` 128 on the even
layers; Megatron-Core the same, ``window_size`` with ``window_attn_skip_freq`` 2 in
megatron/core/transformer/utils.py l.452-461, run by Transformer Engine's cuDNN fused attention with a
``(window, 0)`` mask): a query attends to at most ``W`` keys, so the ideal work per token is about ``W`` keys
instead of the causal ``S/2``. The kernels skip whole tiles only: FlashAttention computes, per query block, the key
blocks from the one holding ``q - W + 1`` to the diagonal (Dao-AILab/flash-attention
@0251105a2fb19d2957484b7f023cd8c115286ced csrc/flash_attn/src/flash_fwd_kernel.h l.90: ``n_block_min =
max(0, (m_block·kBlockM - window_size_left) / kBlockN)`` for local attention; FA3 hopper/block.h l.36-44), and a
partly masked tile costs a whole one. ``windowed_attention_keys`` counts those tiles (square tiles of ``WINDOW_TILE_TOKENS``: FA2's
head-dim-64 forward tile 128 x 128, csrc/flash_attn/src/flash_fwd_launch_template.h l.210; FA3's head-dim-128
causal/local tile 128 x 128, hopper/tile_size.h l.31-33; cuDNN's tiles are not published and are taken the same) and
converts them to causal-equivalent keys per query: ``S/2 · tiles(window) / tiles(causal)``, so that the causal
calibration above (reported causal FLOPs, diagonal tiles included in its rate) prices a windowed tile like a causal
one. gpt-oss at 4,096 tokens: 2 key tiles per 128-query block, 244 causal-equivalent keys per query against 2,048
(12 %; the exact window would be 128).
Its rate: the window's key loop is ``~W`` long however long the row, so the fixed per-query-block work (loading Q,
the softmax rescale, writing O and the log-sum-exp) is amortised over the loop of a causal row of
``2 x keys`` tokens: the windowed part is timed with the short-sequence factor at that length
(``windowed_attention_seq``), not the row's. Eager attention and SDPA given an explicit mask compute every key
block (no skipping): their layers are counted whole, as before.

Checked against cuDNN's own measurements of gpt-oss's attention (2026-12-04; nothing set from it in bf16): NVIDIA/
cudnn-frontend benchmark/sdpa_benchmark_training/results @3929da2ef4c1dba1bb8acb68727b9134f26f40c0 time the windowed
layer (window 128, head dim 64, causal, bf16, non-deterministic backward; no sink column) on GB200 and GB300 (cuDNN
9.22; gpt_oss/gb200/gpt_oss_20260424_100011.csv, gpt_oss/gb300/gpt_oss_20260424_100022.csv) and a 1,024-token window
at gpt-oss's GQA 64 / 8 on an H200 (cuDNN 9.19; h200_919_only_cudnn/gpt_oss_20260227_034819.csv). The plan's windowed
time (tile-counted keys at the key-loop length's rate, the ``auto`` rates on Blackwell and ``cudnn`` on Hopper) over
the measured one, forward / backward: GB200 0.81-0.91 / 1.23-1.35 at 2k-16k (4k: 0.182 / 0.602 ms against 0.210 /
0.465; forward + backward 16% slow), GB300 0.85-0.94 / 1.28-1.45, H200 1.05-1.23 / 0.93-1.09 at 2k-32k (forward +
backward within -4 / +12%). The full-attention layers' rates are at or under the published head-dim-64 kernels'
(above). So the kernels that run gpt-oss's attention are priced about right or slow, and attention is not the
Megatron-Bridge gpt-oss-120b BF16 rows' gap. Re-run on the code of 2026-12-04 after the fp8 windowed table
(``benchmarks/step_times.py`` rows re-planned with every fused, memory-efficient and windowed attention kernel's
seconds doubled, not committed): closing each BF16 row by attention alone would take its attention 1.4-13.4x slower
(H100 2.4-5.7x, GB300 1.4-2.2x, GB200 1.7-3.7x), and the doubling moves the 26.04 rows by 4.9-11.6 points (H100
-22.8% -> -17.9%, GB200 -30.5% -> -19.3%, GB300 -13.0% -> -1.4%) while the MXFP8 rows of the same tables overshoot
(GB200 26.06 +7.7% -> +35.8%, GB300 26.06 +19.9% -> +48.0%) and the verification cards move 0-2.2 points. (First
written at 02fb7cdb, where the same rows read H100 -24.6%, GB200 -32.5%, GB200 / GB300 26.06 +4.0% / +15.6%.)
No measurement of the learnable sink's cost inside cuDNN (Transformer Engine's ``softmax_type`` "learnable") was found;
its forward adds one logit per query row, not modelled. FP8 attention on the windowed layers is another kernel
(``_FP8_WINDOW_ATTENTION_POINTS``).
Which kernel runs the sinks, re-checked 2026-12-05 (null result, nothing changed). Transformer Engine disables
FlashAttention for any ``softmax_type`` other than "vanilla" and keeps its cuDNN FusedAttention and the unfused
PyTorch path (NVIDIA/TransformerEngine transformer_engine/pytorch/attention/dot_product_attention/utils.py l.719-754
@366798ef8a0a00d8f2c1650d11e7e623d7c33e26, v2.14.1); the fused backend takes a learnable softmax from cuDNN 9.13.1 on
(transformer_engine/common/fused_attn/fused_attn.cpp l.460-465 there; l.370-375 at v2.9,
70f536662ae10a62a54f4ed1ba92e3314c5cfd69), with the ``thd`` (packed) layout from cuDNN 9.18, and drops it only in
deterministic mode (utils.py l.1073-1082). The NeMo containers of the scored Megatron-Bridge rows ship cuDNN 9.13.1
(25.11), 9.18.0 (26.02), 9.20.0 (26.04) and 9.21.1 (26.06) (NVIDIA-NeMo/Megatron-Bridge
docs/releases/software-versions.md @067f987df03b8355b03192d88d70f1709fedf51a), and no gpt-oss recipe there sets
deterministic mode (the performance scripts set ``NVTE_ALLOW_NONDETERMINISTIC_ALGO=0`` only under their opt-in
``--deterministic``, scripts/performance/perf_plugins.py l.294 @v0.4.0), so every one of them runs the cuDNN kernel
this module prices; no unfused fallback is hidden in them. The family bias stays (benchmarks/step_times.py on the tree
of 2026-12-05): the 26 gpt-oss-120b BF16 pre-training rows of the Megatron-Bridge tables miss by a median of -22 %
(H100 -21 %, B200 -24 %, B300 -28 %, GB200 -24 %, GB300 -12 %) and its 7 MXFP8 rows by -8 %, while the other families'
BF16 rows of the same tables (18 dense, 2 DeepSeek, 2 Qwen3-235B-A22B, all on GB200 / GB300) sit at medians of +8, +9
and +17 %; but on H100 the Qwen3-30B-A3B FP8 rows miss by -27 % as well, and on B200 / B300 the Qwen3-235B-A22B MXFP8
rows by -25 / -30 %, so only the GB200 / GB300 gap (about 30 points) is the family's alone. The cudnn-frontend gpt-oss
benchmark (benchmark/sdpa_benchmark_training/configs/gpt_oss.py @0c08141252f411a4c9f1ce9fd067c046a2ca2237: window 128,
head dim 64, no sink) still times no sink column, so the sink's own cost in cuDNN remains unpriced. NeMo Automodel's
H100 benchmark rows show the same family gap without Megatron-Core: gpt-oss-20b -17 % with FlexAttention
(examples/llm_benchmark/gpt_oss/gptoss_20b_te_deepep.yaml ``attn: flex``) and gpt-oss-120b -13 % with Transformer
Engine's attention (gptoss_120b_te_deepep.yaml ``attn: te``, both @2861c4143cd335539213b1b6d0c890cb17682444), against
+14 % for Qwen3-30B-A3B in the same table; two different attention kernels missing alike does not point at the
attention kernel.

The transformers models with a ``sliding_window`` (Phi-3, Mistral, Mixtral on every layer; Gemma-3 on its local
layers; ``memory.attention.WINDOW_MASK_FAMILIES``), per ``attn_implementation``, from ``kv_length >= sliding_window``
on (transformers v5.24.0 src/transformers/masking_utils.py l.286-287; below it every path is plain causal):

* ``flash_attention_2`` / ``_3``: no 4-D mask (``flash_attention_mask`` l.621-661); ``_flash_attention_forward``
  passes ``window_size = (sliding_window - 1, sliding_window - 1)`` with ``causal`` once ``key_length >
  sliding_window`` (modeling_flash_attention_utils.py l.687-692), so each query sees ``sliding_window`` keys and the
  kernel skips the key tiles before them: ``windowed_attention_keys`` above. It saves what a causal call saves.
* ``sdpa``: ``sdpa_mask`` builds one bool (b, 1, q, k) mask per forward (l.517-548), shared by the windowed layers;
  ``sdpa_attention_forward`` passes it and so drops ``is_causal`` and SDPA's ``enable_gqa``
  (integrations/sdpa_attention.py l.42-51, 119-148); PyTorch converts the bool mask to the query's dtype in every
  call (``convert_boolean_attn_mask`` in aten/src/ATen/native/transformers/attention.cpp: a new (b, 1, q, k) tensor,
  ``window_mask_bytes_per_element``) and, with a mask, cannot take the flash kernel: the memory-efficient kernel runs every key block of
  the row (``Params::advance_to_block`` shortens ``num_keys`` to the diagonal only for a causal ``custom_mask_type``,
  i.e. ``is_causal``; an ``attn_bias`` skips no key block: pytorch/pytorch aten/src/ATen/native/transformers/cuda/
  mem_eff_attention/kernel_forward.h @4f4bcdbe6ddea60634d2af07a07c2e88dfd39a1e), ``S²`` work
  per windowed layer instead of the causal ``S²/2``. The conversion is memory-bound traffic per windowed layer's
  forward (and its recompute): ``window_mask_forward_bytes``, ``WINDOW_MASK_KERNELS`` launches. Memory:
  ``memory.attention.sdpa_window_masked``.
* ``eager``: the float masks are built at every length and every score computed: unchanged by the window.

Memory-efficient kernel (SDPA handed an explicit mask: transformers' padding mask, ``batch.padding`` mask; its packed
block mask; its sliding-window mask past the window; ``inventory.PassInventory.masked_attention_forward_flops``).
PyTorch's flash backend refuses a mask, so SDPA runs its memory-efficient backend: the CUTLASS kernel taken over from
xformers (pytorch/pytorch aten/src/ATen/native/transformers/cuda/mem_eff_attention/, "Copyright (c) Meta Platforms"),
which the FlashAttention-2 paper benchmarks as "FlashAttention in xformers (the 'cutlass' implementation)": Dao 2023,
arXiv:2307.08691 §4.1 (A100 80GB SXM4, Fig. 4-6 forward + backward, forward, backward, causal and not, head dim 64
and 128): "FlashAttention-2 is around 2x faster than FlashAttention and FlashAttention in xformers". The masked work
is timed at ``MEM_EFFICIENT_TO_FA2_RATE`` = 1/2 of the architecture's FlashAttention-2 rate (the stated ``fa2`` rates
above; the ``auto`` ones where that table has none), forward and backward alike (the text's one figure). Both kernels
are Ampere ``mma.sync`` kernels on every later card, so the ratio is kept on Hopper and Blackwell as the Triton row
above keeps its own (FlashAttention against FlashAttention-2: 0.44 on A100, 0.42 on H100). The short-sequence factor
applies; the stated ``attention_kernel`` does not (SDPA picks this kernel whatever the card states).

Its head dimension enters through its tiles, not through ``head_dim_efficiency`` (a FlashAttention table; the
paper's xformers bars show no loss at head dim 64 against 128). PyTorch builds the forward kernel at three
(queries, keys, largest head dim) shapes on sm80 and later, (64, 64, 64), (64, 128, 128) and (32, 128, 65536), and the
backward at largest head dims 32, 64, 128 and 65536 with 128 x 128 blocks for 128 (a head-dim-96 backward kernel only
on compute capability 8.6 / 8.9) (aten/src/ATen/native/transformers/cuda/mem_eff_attention/kernels/
generate_kernels.py ``FwdKernel.get_all``, ``BwdKernel.get_all`` @045a976cc7fd4af11d46649bd90979d9a97fbc2a; kernels/
cutlassF.h ``dispatch_cutlassF_bf16_sm80`` @5ef5abf4ca22aa6c7821567b88c27dd23372a245); ``launchKernel`` takes the first
in that order whose largest head dim covers the call's (aten/src/ATen/native/transformers/cuda/attention.cu
``_efficient_attention_forward`` @e129513e370e0ed6bdfb1f3b92a421f87815d098: ``value.size(3) > Kernel::kMaxK``). The
products whose contraction runs over the head dim step through it in ``ThreadK`` = 32 columns (Q·Kᵀ; backward also
dO·Vᵀ); those whose output spans it compute one whole tile of it: forward P·V
``GemmShape<kQueriesPerBlock, kKeysPerBlock, ThreadK>`` (mem_eff_attention/kernel_forward.h ``MM1``
@4f4bcdbe6ddea60634d2af07a07c2e88dfd39a1e), backward dV and dK ``GemmShape<kBlockSizeJ, kBlockSizeI, ThreadK>`` and
dQ ``GemmShape<kBlockSizeI, kBlockSizeJ, ThreadK>`` (kernel_backward.h ``MatmulGradV``, ``MatmulGradK``,
``MatmulGradQ`` @5cd01f1744c536d63e75512d134fcf916f1b4184); the warps over the tile's columns past the head dim run
their MMAs on zero-filled operands. ``mem_efficient_tile_factor``: tensor-core work done over work needed, forward
``(k + n) / (2·d)``, backward ``(2·k + 3·n) / (5·d)``, ``k`` the head dim rounded up to 32, ``n`` to the 64-wide tile at
64 and below, else to 128. Phi-3-mini (head dim 96): forward 7/6, backward 6/5; 1 at 64 and 128. fp32 q / k / v run
the same kernel (``fp32_attention_ratio``), so the tile factor applies to them too, in place of the head-dim table.

Pure Python: no torch import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from trainfit.compute.rates import DeviceRates
from trainfit.spec.model import ModelSpec

BACKWARD_FLOPS_FACTOR = 2.5
"""Attention backward FLOPs over the forward's (the recomputed Q·Kᵀ, dV, dP, dQ and dK against Q·Kᵀ and P·V: 5 / 2),
the convention of flash-attention's own benchmark, ``2.5 * f if mode == "bwd"`` (https://github.com/Dao-AILab/flash-attention/blob/0251105a2fb19d2957484b7f023cd8c115286ced/benchmarks/benchmark_flash_attention.py#L30)."""
SEQ_HALF = 256.0
WINDOW_TILE_TOKENS = 128
"""The square key/query tile the windowed count uses (module docstring): FA2's head-dim-64 forward
``Flash_fwd_kernel_traits<Headdim, 128, 128, 4, ...>`` (https://github.com/Dao-AILab/flash-attention/blob/0251105a2fb19d2957484b7f023cd8c115286ced/csrc/flash_attn/src/flash_fwd_launch_template.h#L210)
and FA3's causal/local head-dim-128 tile ``{128, use_blockN_128 ? 128 : 176, ...}`` (hopper/tile_size.h l.31-33 of the
same commit)."""
WINDOW_MASK_READ_BYTES_PER_ELEMENT = 1
"""Bytes per (b, q, k) mask element each masked SDPA call reads converting transformers' bool window mask (module
docstring): torch 2.13's ``scaled_dot_product_attention`` runs one ``aten.where.self(mask, 0, -inf)`` on the bool
mask before choosing a kernel (the op sequence under a ``TorchDispatchMode``: ``scalar_tensor`` x 2, ``where``, then
the attention kernel), reading the 1-B bool and writing the query's dtype (``window_mask_bytes_per_element``: 3 B in
bf16 / fp16, 5 in fp32; the memory side saves the same tensor at the compute dtype,
``memory.attention.sdpa_window_mask_saved_bytes``). Older releases first took ``logical_not`` (one more bool pass, 2
B more: pytorch/pytorch aten/src/ATen/native/transformers/attention.cpp @bc8cb28010a6b27e1817d38e1c1e0ac59b34477e,
``zeros_like`` + ``masked_fill_(attn_mask->logical_not(), -inf)``); not separated here."""


def window_mask_bytes_per_element(*, dtype_bytes: float) -> float:
    """Bytes per mask element of one conversion: the bool read and the ``dtype_bytes`` (the query's dtype) write."""
    return WINDOW_MASK_READ_BYTES_PER_ELEMENT + dtype_bytes


WINDOW_MASK_KERNELS = 1
"""The conversion's kernels per masked SDPA call (``where``; torch 2.13)."""
_EFFICIENCY = {"8": (0.80, 0.62), "9": (0.45, 0.34), "10": (0.45, 0.34), "12": (0.80, 0.62)}
BASE_HEAD_DIM = 128
_HEAD_DIM_64 = {"8": (0.90, 0.90), "9": (0.89, 0.90), "10": (0.67, 0.67)}  # (fwd, bwd) at head dim 64 / at 128
_HEAD_DIM_64["12"] = _HEAD_DIM_64["8"]  # sm_120 runs the sm8x code path (module docstring, "Consumer Blackwell")


AUTO_KERNEL = "auto"
# (kernel, major) -> (fwd, bwd, (fwd, bwd) at head dim 64 / at 128): the module docstring's stated-kernel table;
# FlashAttention-2 on Ampere and Hopper is what the default rates above measure (one source for both)
_KERNEL_RATES = {
    ("fa2", "8"): (*_EFFICIENCY["8"], _HEAD_DIM_64["8"]),
    ("fa2", "9"): (*_EFFICIENCY["9"], _HEAD_DIM_64["9"]),
    ("fa2", "10"): (0.20, 0.19, (1.0, 1.0)),
    ("fa3", "9"): (0.78, 0.71, (0.75, 0.75)),
    ("fa4", "10"): (0.81, 0.69, (0.67, 0.67)),
    ("cudnn", "9"): (0.68, 0.65, (0.67, 0.67)),
    ("triton_fa", "8"): (0.57, 0.25, (1.0, 1.0)),
    ("triton_fa", "9"): (0.32, 0.14, (1.0, 1.0)),
    ("fa1", "8"): (0.35, 0.27, (1.14, 1.14)),
    ("fa1", "9"): (0.19, 0.14, (1.10, 1.10)),
}
# architectures by major ("8") or exact compute capability ("7.5"); a kernel not listed runs everywhere this plans
_KERNEL_ARCH = {"fa2": ("8", "9", "10", "11", "12"), "fa3": ("9",), "fa4": ("10",), "triton_fa": ("8", "9"),
                "fa1": ("7.5", "8", "9")}
KERNEL_ARCH_TEXT = {"fa2": "Ampere, Ada, Hopper and later (compute capability 8.x and above)",
                    "fa3": "Hopper (compute capability 9.x)", "fa4": "Blackwell (compute capability 10.x)",
                    "triton_fa": "Ampere and Hopper (compute capability 8.x, 9.x)",
                    "fa1": "Turing, Ampere, Ada and Hopper (compute capability 7.5, 8.x, 9.x)"}
"""Kernels built for some architectures only (module docstring); the others run everywhere this plans."""
FA1_MAX_HEAD_DIM = 128
"""FlashAttention-1's widest head: ``TORCH_CHECK((head_size % 8 == 0) && (head_size <= 128))`` in forward and backward
(Dao-AILab/flash-attention csrc/flash_attn/fmha_api.cpp l.246, 415 @6d48e14a6c2f551db96f0badc658a6279a929df3, v1.0.9;
its README.md l.75-76: "Head dimensions that are multiples of 8, up to 128")."""
FA1_WIDE_BACKWARD_HEAD_DIM = 64
"""Above this head dim FlashAttention-1's backward runs only on compute capability 8.0 and 9.0 (A100 / H100 class):
``if (head_size > 64) TORCH_CHECK(is_sm80 || is_sm90, "FlashAttention backward for head dim > 64 requires A100 or H100
GPUs as the implementation needs a large amount of shared memory.")`` (csrc/flash_attn/fmha_api.cpp l.416-417
@6d48e14a6c2f551db96f0badc658a6279a929df3, v1.0.9)."""
FA1_WIDE_BACKWARD_CCS = ("8.0", "9.0")
"""``is_sm80`` and ``is_sm90`` of the same file (``dprops->major == 8 && dprops->minor == 0``, ``== 9 && == 0``)."""


def _major(compute_capability: str | None) -> str:
    return (compute_capability or "8.0").split(".")[0]


def kernel_runs_on(*, kernel: str, compute_capability: str | None) -> bool:
    """Whether ``kernel`` has a build for that architecture (``auto`` and cudnn: every one planned)."""
    archs = _KERNEL_ARCH.get(kernel)
    return (archs is None or compute_capability is None or _major(compute_capability) in archs
            or compute_capability in archs)


def kernel_head_dim_runs(*, kernel: str, compute_capability: str | None, head_dim: int | None,
                         backward: bool = True) -> bool:
    """Whether ``kernel`` runs a head of ``head_dim`` (its backward too, with ``backward``) on that architecture:
    FlashAttention-1 up to ``FA1_MAX_HEAD_DIM``, and its backward above ``FA1_WIDE_BACKWARD_HEAD_DIM`` only on
    ``FA1_WIDE_BACKWARD_CCS``; every other kernel and an unknown head dim or architecture: True."""
    if kernel != "fa1" or not head_dim:
        return True
    if head_dim > FA1_MAX_HEAD_DIM:
        return False
    wide_backward = backward and head_dim > FA1_WIDE_BACKWARD_HEAD_DIM
    return not wide_backward or compute_capability is None or compute_capability in FA1_WIDE_BACKWARD_CCS


def kernel_head_dim_of(spec: ModelSpec) -> int:
    """The widest head the fused attention kernel runs: the query / key head of multi-head latent attention
    (``qk_nope + qk_rope``), else ``head_dim``."""
    return max(spec.head_dim, spec.mla.qk_head_dim if spec.mla else 0)


def kernel_head_dim_text(*, kernel: str, compute_capability: str | None, head_dim: int) -> str:
    """Why ``kernel_head_dim_runs`` refuses (for the refusal line)."""
    if head_dim > FA1_MAX_HEAD_DIM:
        return f"runs head dims up to {FA1_MAX_HEAD_DIM} only; the model's is {head_dim}"
    return (f"trains head dims above {FA1_WIDE_BACKWARD_HEAD_DIM} only on compute capability"
            f" {' / '.join(FA1_WIDE_BACKWARD_CCS)} (A100 / H100: its backward needs their shared memory); the model's"
            f" head dim is {head_dim} on compute capability {compute_capability}")


def kernel_rated(*, kernel: str, compute_capability: str | None) -> bool:
    """Whether the stated-kernel table has the pair (else the ``auto`` rates apply)."""
    return (kernel, _major(compute_capability)) in _KERNEL_RATES


KERNEL_NAMES = {"fa2": "FlashAttention-2", "fa3": "FlashAttention-3", "fa4": "FlashAttention-4", "cudnn": "cuDNN",
                "triton_fa": "FlashAttention in Triton, flash_attn_triton.py", "fa1": "FlashAttention-1, CUDA"}
_ALLOWED_ORDER = ("auto", "fa2", "cudnn", "fa3", "fa4", "triton_fa", "fa1")


def kernels_allowed(*, compute_capability: str | None, head_dim: int | None = None, backward: bool = True) -> list[str]:
    """The ``attention_kernel`` values with a build for that architecture (and, given ``head_dim``, that run the
    model's head there), for the refusals' "allowed there"."""
    return [k for k in _ALLOWED_ORDER
            if kernel_runs_on(kernel=k, compute_capability=compute_capability)
            and kernel_head_dim_runs(kernel=k, compute_capability=compute_capability, head_dim=head_dim,
                                     backward=backward)]


def kernel_rates(*, kernel: str, compute_capability: str | None) -> tuple[float, float]:
    """(forward, backward) fraction of the matmul rate at head dim 128, long sequences, of ``kernel`` on that
    architecture (the ``auto`` rates where the pair has none)."""
    fwd, bwd, _ = _rates(kernel, compute_capability)
    return fwd, bwd


def _rates(kernel: str, compute_capability: str | None) -> tuple[float, float, tuple[float, float]]:
    major = _major(compute_capability)
    stated = _KERNEL_RATES.get((kernel, major)) if kernel != AUTO_KERNEL else None
    if stated:
        return stated
    fwd, bwd = _EFFICIENCY.get(major, (0.5, 0.4))
    return fwd, bwd, _HEAD_DIM_64.get(major, (1.0, 1.0))


def head_dim_efficiency(*, compute_capability: str | None, head_dim: float | None, backward: bool,
                        kernel: str = AUTO_KERNEL) -> float:
    """The head-dim factor on the rate (module docstring tables): 1 at ``BASE_HEAD_DIM`` and above or when unknown
    (``None`` / 0), the published head-dim-64 ratio at 64 and below, linear between."""
    if not head_dim or head_dim >= BASE_HEAD_DIM:
        return 1.0
    fwd, bwd = _rates(kernel, compute_capability)[2]
    at_64 = bwd if backward else fwd
    share = (max(head_dim, 64.0) - 64.0) / (BASE_HEAD_DIM - 64.0)
    return at_64 + (1.0 - at_64) * share


TENSOR_FLOPS_PER_CLOCK_PER_SM = 8192.0
"""Dense bf16 tensor-core FLOPs per clock per SM on Blackwell (B200; Blackwell Ultra's dense bf16 rate is the same):
Zadouri, Hoehnerbach, Shah, Liu, Thakkar, Dao 2026, "FlashAttention-4", arXiv:2603.05451, its feeds-and-speeds for
B200 (8,192 MMA ops and 16 MUFU exponentials per clock per SM, shared memory 128 B per clock per SM) as quoted at
https://jianyuh.github.io/flashattention/2026/03/06/FA4.html (read 2026-12-03)."""
EXP_PER_CLOCK_PER_SM = {"10.0": 16.0, "10.3": 32.0}
"""``MUFU.EX2`` (the softmax exponential) per clock per SM, by compute capability: 16 on Blackwell (B200 / GB200,
sm_100; unchanged from Hopper: FlashAttention-4, ``TENSOR_FLOPS_PER_CLOCK_PER_SM``), twice that on Blackwell Ultra
(B300 / GB300, sm_103: "doubling SFU throughput over the standard NVIDIA Blackwell architecture" for ``MUFU.EX2``,
NVIDIA technical blog "Making Softmax More Efficient with NVIDIA Blackwell Ultra",
https://developer.nvidia.com/blog/making-softmax-more-efficient-with-nvidia-blackwell-ultra/, read 2026-12-03)."""
EXP_REFERENCE_PER_CLOCK_PER_SM = {"10": 16.0}
"""The exponential rate the architecture's attention rates above were set at (sm_100's: the ``auto`` and stated
Blackwell rates are B200 figures): B200's 16 ``MUFU`` exponentials per clock per SM, the FlashAttention-4 paper's
feeds and speeds (arXiv:2603.05451; its authors' post: the SFU count unchanged from H100 to B200,
https://www.together.ai/blog/flashattention-4)."""
EXP_EXPOSED_FRACTION = 0.5
"""Share of a kernel's exponential time not hidden behind its tensor-core work (``exp_unit_time_factor``)."""


EXP_BOUND_KERNELS = frozenset({AUTO_KERNEL, "cudnn", "fa4"})
"""Kernels whose Blackwell rates sit near the tensor-core and exponential bounds, so a faster exponential unit
shortens them (``exp_unit_time_factor``): the ``auto`` rate (cuDNN / FlashAttention-4 figures) and the two stated
kernels it rests on. FlashAttention-2 on Blackwell (0.20 / 0.19 of the matmul rate, ``_KERNEL_RATES``) and the
Triton kernel run far below both bounds, as the windowed layers do, and are not scaled."""


def exp_unit_time_factor(*, compute_capability: str | None, head_dim: float | None, backward: bool) -> float:
    """Attention kernel time on a card whose exponential unit runs at a different rate than the one its
    architecture's rates were set at, over the time at that reference rate (1.0 where both are the same or either
    is unknown: every card but Blackwell Ultra).

    Per score (one query-key pair) the kernel issues ``m`` tensor-core clocks per SM (forward: ``Q·Kᵀ`` and
    ``P·V``, ``4·d`` FLOPs at head dim ``d``; backward: ``S`` recomputed, ``dP``, ``dV``, ``dQ``, ``dK``, ``10·d``)
    over ``TENSOR_FLOPS_PER_CLOCK_PER_SM``, and one exponential (``P``; the backward recomputes it) at ``1 / e``
    clocks (``EXP_PER_CLOCK_PER_SM``); at head dim 128 on B200 both are 1/16 clock per score. FlashAttention-4's
    authors name the forward's exponential the bottleneck on B200 and the backward's shared-memory traffic
    (https://www.together.ai/blog/flashattention-4, read 2026-12-03); part of the exponential overlaps the matmuls
    (the two-tile ping-pong), the rest waits between ``Q·Kᵀ`` and ``P·V``. Time per score ``∝ m + u / e``, with
    ``u = EXP_EXPOSED_FRACTION`` = 0.5: the least-squares value on the 8 causal Llama-3.1 cases of 4k-32k tokens
    (head dim 128, GQA 64/8, bf16, forward and backward)
    that NVIDIA/cudnn-frontend measured on a GB300 and a GB200 with the same cuDNN 9.22
    (benchmark/sdpa_benchmark_training/results/llama3.1/{gb200,gb300}/llama3.1_2026042410075*.csv
    @fb682ce761a2705e40f9b5d528737a3e0eb33cec): GB300 / GB200 forward 1.21 / 1.18 / 1.12 / 1.20 and backward
    1.09 / 1.08 / 1.14 / 1.22 at 4k / 8k / 16k / 32k, against 1.20 and 1.09 here. Not used for the fit: the same
    files' non-causal Llama-3.1, LTX-2 and Wan2.2 (head dim 128; forward 1.12-1.26 against 1.20, backward 1.05-1.14
    against 1.09), DeepSeek-V3 and Kimi-K2.6 MLA (query/key 192, value 128; forward 1.12-1.25 against 1.17 with the
    exact dimensions, backward 1.07-1.10 up to 8k and 1.15-1.20 at 16k-32k against 1.07, the widest miss) and the
    cuDNN 9.19 pair of runs in results/{gb200,gb300}_919_only_cudnn (forward 1.06-1.26, backward 1.04-1.08). Here
    ``d`` is the query/key head dimension for both products (MLA at 192: 1.14 / 1.06).
    The measured ratio also holds whatever clock difference the two cards' board power (1,400 against 1,200 W)
    makes inside the kernel; none is separated. The windowed layers are not scaled (``exp_bound=False`` in
    ``attention_seconds``): the same benchmark's gpt-oss cases (window 128, head dim 64) run at 100-200 TFLOP/s,
    far below both bounds, and GB300 / GB200 is 1.04-1.07 there, not the 1.33 this factor would give."""
    own = EXP_PER_CLOCK_PER_SM.get(compute_capability or "")
    ref = EXP_REFERENCE_PER_CLOCK_PER_SM.get(_major(compute_capability))
    if not own or not ref or own == ref:
        return 1.0
    d = float(head_dim or BASE_HEAD_DIM)
    m = (10.0 if backward else 4.0) * d / TENSOR_FLOPS_PER_CLOCK_PER_SM
    return (m + EXP_EXPOSED_FRACTION / own) / (m + EXP_EXPOSED_FRACTION / ref)


def attention_efficiency(*, compute_capability: str | None, seq_len: float, backward: bool,
                         head_dim: float | None = None, kernel: str = AUTO_KERNEL, exp_bound: bool = True) -> float:
    fwd, bwd, _ = _rates(kernel, compute_capability)
    hd = head_dim_efficiency(compute_capability=compute_capability, head_dim=head_dim, backward=backward,
                             kernel=kernel)
    exp = (exp_unit_time_factor(compute_capability=compute_capability, head_dim=head_dim, backward=backward)
           if exp_bound and kernel in EXP_BOUND_KERNELS else 1.0)
    return (bwd if backward else fwd) * hd * seq_len / (seq_len + SEQ_HALF) / exp


FP32_ATTENTION_TENSOR_OPS_PER_PRODUCT = 3
"""Tensor-core MMAs per fp32 product in PyTorch's memory-efficient attention kernel on fp32 q / k / v: on compute
capability >= 8.0 its GEMMs are CUTLASS ``OpClassTensorOp`` with ``OpMultiplyAddFastF32`` (pytorch/pytorch
aten/src/ATen/native/transformers/cuda/mem_eff_attention/gemm_kernel_utils.h l.80-92
@a60dd4b0ba5902121c9bd3ed5be874a93fe92fa1, ``DefaultGemmType<ArchTag, float>``), CUTLASS's 3xTF32: each operand
split into a TF32 "big" and "small" part, ``big·big + big·small + small·big``, three TF32 MMAs per product (NVIDIA
CUTLASS examples/27_ampere_3xtf32_fast_accurate_tensorop_gemm)."""

TF32_TO_BF16_TENSOR_RATE = 0.5
"""Dense TF32 tensor-core rate over the dense bf16 one: A100 156 / 312 TFLOP/s (NVIDIA A100 datasheet, the
catalog's a100-80gb source), H100 SXM 494.7 / 989.4 (NVIDIA H100 datasheet: 989 / 1,979 with sparsity). Applied to
every architecture with tensor cores (an assumption where no datasheet was read: the RTX PRO 6000). The same ratio in
the TFLOPS table of stas00/ml-engineering ``compute/accelerator/README.md`` @744d01e18b79512572f64a6bbd8b5f4a725203a7
(tf32 / bf16: A100 SXM 156.0 / 312, H100 SXM 494.5 / 989, B200 1125.0 / 2250, GB200 1250.0 / 2500):
https://github.com/stas00/ml-engineering/blob/744d01e18b79512572f64a6bbd8b5f4a725203a7/compute/accelerator/README.md#L253-L276"""


def fp32_attention_ratio() -> float:
    """The fused attention rate on fp32 q / k / v over the bf16 one, same kernel shape: ``1 / 6``.

    Which kernel runs: transformers v4.49.0's SDPA path hands ``torch.nn.functional.scaled_dot_product_attention``
    q / k / v in the hidden states' dtype (src/transformers/integrations/sdpa_attention.py), fp32 for a model loaded
    in float32 without autocast. PyTorch's flash backend accepts only fp16 / bf16 (and no explicit mask), its
    memory-efficient backend fp16 / fp32 / bf16 on sm80+ (pytorch/pytorch aten/src/ATen/native/transformers/cuda/
    sdp_utils.cpp ``can_use_flash_attention``, ``can_use_mem_efficient_attention``:
    ``greater_than_or_equal_sm80_mem_efficient_dtypes``, read @001f694aef6f922b4fdf6d27d59162d27bf3df58), so fp32
    attention runs the memory-efficient kernel, not the math path (no ``(b, h, s, s)`` scores materialised). Its fp32
    GEMMs issue ``FP32_ATTENTION_TENSOR_OPS_PER_PRODUCT`` TF32 MMAs per product at ``TF32_TO_BF16_TENSOR_RATE`` of
    the bf16 rate: the tensor-core time of each product is ``3 / 0.5 = 6x`` the bf16 kernel's. The kernel's softmax,
    masking and exponentials are not scaled (taken as hidden under the 6x longer MMA loop).

    What it explains (universal-llm-trainer, Llama-3.1-8B QLoRA loaded in float32, 2 x 8,192 tokens with a padding
    mask): with the fp32 base GEMMs, head and residual stream at the datasheet's fp32 peak, the planned
    QLoRA-minus-LoRA difference was 44.2 of the published 46.1 s on A100, 15.7 of 19.7 s on H100 and 14.8 of 18.2 s on
    the RTX Pro 6000; with the measured SGEMM rates (``rates._FP32_MATMUL_FRACTION``: torch.mm fp32, TF32 off) it is
    97 %, 96 % and 101 % of the gap (tests/benchmarks/test_step_times_universal_llm_trainer.py)."""
    return TF32_TO_BF16_TENSOR_RATE / FP32_ATTENTION_TENSOR_OPS_PER_PRODUCT


MEM_EFFICIENT_TO_FA2_RATE = 0.5
"""PyTorch's memory-efficient (xformers CUTLASS) attention kernel's rate over FlashAttention-2's at the same shape: Dao
2023, "FlashAttention-2", arXiv:2307.08691 §4.1, "FlashAttention-2 is around 2x faster than ... FlashAttention in
xformers (the 'cutlass' implementation)" (module docstring)."""
MEM_EFFICIENT_K_STEP = 32
"""Head-dim columns per step of the kernel's contractions over the head dim: ``GemmType::ThreadK`` of its sm80 tensor-op
GEMMs (pytorch/pytorch aten/src/ATen/native/transformers/cuda/mem_eff_attention/gemm_kernel_utils.h
``DefaultGemmType`` @a60dd4b0ba5902121c9bd3ed5be874a93fe92fa1; kernel_forward.h ``MM0`` @4f4bcdbe6ddea60634d2af07a07c2e88dfd39a1e)."""
MEM_EFFICIENT_SMALL_TILE = 64
"""The head-dim tile of the kernels for head dims up to 64: forward (64, 64, 64), backward 64 x 64 blocks (pytorch/pytorch
aten/src/ATen/native/transformers/cuda/mem_eff_attention/kernels/generate_kernels.py
@045a976cc7fd4af11d46649bd90979d9a97fbc2a ``FwdKernel.get_all``, ``BwdKernel.get_all``). Head dims up to 32 too, in
backward as in forward: the smallest backward kernel (``max_k`` 32, l.232 ``[32, 64, 128, 2**16]``, taken first by
``sort_index``'s "smallest maxK", l.168-169) still has ``block_i`` 64 (l.240 ``bi_values = [64]``, 128 added only for
``max_k > 64``, l.245-246) and ``block_j`` 64 (l.250 ``bj = 128 if (preload_mmas and max_k > 64) else 64``), and the
gradient products span the head dim with those blocks, not with ``kMaxK``: ``MatmulGradV`` / ``MatmulGradK``
``GemmShape<kBlockSizeJ, kBlockSizeI, ThreadK>``, ``MatmulGradQ`` ``GemmShape<kBlockSizeI, kBlockSizeJ, ThreadK>``
(kernel_backward.h @5cd01f1744c536d63e75512d134fcf916f1b4184; ``kMaxK`` only bounds the head-dim contractions'
K-loop, ``MakeCustomMma<..., kMaxK>`` in ``MatmulQK`` and ``MatmulDOIVJ``, which ``MEM_EFFICIENT_K_STEP`` prices).
So a head dim of 32 pays a 64-wide tile in dV, dK and dQ: backward factor ``(2·32 + 3·64) / (5·32)`` = 1.6, not 1."""
MEM_EFFICIENT_TILE = 128
"""The head-dim tile above 64: forward (64, 128, 128) with ``kKeysPerBlock`` 128 as P·V's N, backward 128 x 128 blocks
for largest head dim 128; past 128 the (32, 128, 65536) kernel steps through it 128 columns at a time (pytorch/pytorch
aten/src/ATen/native/transformers/cuda/mem_eff_attention/kernels/generate_kernels.py
@045a976cc7fd4af11d46649bd90979d9a97fbc2a)."""


def mem_efficient_tile_factor(*, head_dim: float | None, backward: bool) -> float:
    """Tensor-core work the memory-efficient kernel does over the work the head dim needs (module docstring):
    forward Q·Kᵀ over ``k`` (the head dim rounded up to ``MEM_EFFICIENT_K_STEP``) and P·V over ``n`` (rounded up to the
    kernel's head-dim tile), ``(k + n) / (2·d)``; backward S and dP over ``k``, dV, dQ, dK over ``n``,
    ``(2·k + 3·n) / (5·d)``. 1 when the head dim is not known (None / 0)."""
    if not head_dim:
        return 1.0
    d = float(head_dim)
    k = MEM_EFFICIENT_K_STEP * math.ceil(d / MEM_EFFICIENT_K_STEP)
    n = (MEM_EFFICIENT_SMALL_TILE if d <= MEM_EFFICIENT_SMALL_TILE
         else MEM_EFFICIENT_TILE * math.ceil(d / MEM_EFFICIENT_TILE))
    return (2 * k + 3 * n) / (5 * d) if backward else (k + n) / (2 * d)


_MEM_EFFICIENT_BASE: dict[str, tuple[float, float]] = {}
"""The FlashAttention-2 base ``mem_efficient_attention_seconds`` scales where it is not the architecture's own
FlashAttention-2 rate: none. sm_120 takes the sm8x base as FlashAttention-2 does, on the same mechanism: it has no
wgmma, so PyTorch's memory-efficient (CUTLASS) kernels run their sm80 tensor-op path there (``MEM_EFFICIENT_K_STEP``:
the sm80 GEMMs), as on an RTX 4090 (module docstring, "Consumer Blackwell"). Until 2026-12-05 it kept the H100's
FlashAttention-2 figures (0.45 / 0.34), which no sm_120 measurement supports and which planned the RTX 5090's kernel
36 % slower per matmul FLOP than the RTX 4090's. Open miss (2026-12-05): at the sm8x base the RTX PRO 6000 rows of
universal-llm-trainer that run this kernel (batch.padding mask) are planned faster than they ran (each entry's note);
nothing published times this kernel on sm_120, so the next step is a measurement, not a constant fitted to those
rows. Checked 2026-12-05, a null result on the card-level inputs: the page (docs/gpu_test.md and README.md at the
rows' commit) names no edition and prints no nvidia-smi, so a 300 W Max-Q is not assumed; the card's torch.mm bf16
reports (Workstation 417.98 and 368.43, Server 409.42 and 417.34 TFLOP/s) put its sustained rate within 3 % of the
82.7 % it takes; the page's own words (no padding: the causal flash path) plan the Llama-3.1-8B full row at 4.53 s,
further from 10.9 than the mask's 6.77. The Llama and Phi-3 bf16 rows ran 1.84-2.32x their H100 twins (the same page), about or above both
the sustained matmul ratio (794.5 / 413.7 = 1.92) and the bandwidth ratio (1.87), so no datasheet or torch.mm
figure of the card closes them; the fp32-compute QLoRA rows ran 1.18-1.21x the H100 where the measured fp32 torch.mm
(77.12 against 52.00 TFLOP/s) plans them faster. Each entry's note has its figures."""


def mem_efficient_attention_seconds(*, forward_flops: float, seq_len: float, rates: DeviceRates, backward: bool,
                                    head_dim: float | None = None, fp32: bool = False) -> float:
    """Seconds of PyTorch's memory-efficient SDPA kernel whose forward work is ``forward_flops`` (module docstring):
    the architecture's FlashAttention-2 rate (``kernel_rates`` of ``fa2``) at the short-sequence factor, times
    ``MEM_EFFICIENT_TO_FA2_RATE`` in bf16 / fp16 or ``fp32_attention_ratio`` on fp32 q / k / v (the same kernel in
    3xTF32, whose 6x longer MMA loop that ratio prices), on the work its tiles do (``mem_efficient_tile_factor``)."""
    if forward_flops <= 0:
        return 0.0
    work = (forward_flops * (BACKWARD_FLOPS_FACTOR if backward else 1.0)
            * mem_efficient_tile_factor(head_dim=head_dim, backward=backward))
    fwd, bwd = _MEM_EFFICIENT_BASE.get(_major(rates.compute_capability)) or kernel_rates(
        kernel="fa2", compute_capability=rates.compute_capability)
    eff = (bwd if backward else fwd) * seq_len / (seq_len + SEQ_HALF)
    eff *= fp32_attention_ratio() if fp32 else MEM_EFFICIENT_TO_FA2_RATE
    return work / (rates.matmul_flops_per_s * eff)


def attention_seconds(*, forward_flops: float, seq_len: float, rates: DeviceRates, backward: bool,
                      head_dim: float | None = None, kernel: str = AUTO_KERNEL, exp_bound: bool = True,
                      fp8_recipe: str = "", fp32: bool = False, window_row_tokens: float = 0.0,
                      window_tokens: float = 0.0) -> float:
    """Seconds of the fused attention kernels whose forward work is ``forward_flops`` (``head_dim``: the query/key
    head dimension, ``head_dim_efficiency``; None: the base rate; ``kernel``: the stated kernel, module docstring;
    ``exp_bound``: False for windowed layers, whose kernels the exponential unit does not bound,
    ``exp_unit_time_factor``; it is read only for the ``EXP_BOUND_KERNELS``); ``fp8_recipe`` "mxfp8" / "fp8": fp8
    attention, the rate scaled by ``fp8_attention_ratio``; ``fp32``: fp32 q / k / v on the memory-efficient kernel,
    the rate scaled by ``fp32_attention_ratio``; ``window_row_tokens``: a windowed layer's row length, whose fp8 kernel
    takes ``fp8_window_attention_ratio`` at that length and its window ``window_tokens`` in place of
    ``fp8_attention_ratio``)."""
    if forward_flops <= 0:
        return 0.0
    work = forward_flops * (BACKWARD_FLOPS_FACTOR if backward else 1.0)
    eff = attention_efficiency(compute_capability=rates.compute_capability, seq_len=seq_len, backward=backward,
                               head_dim=head_dim, kernel=kernel, exp_bound=exp_bound)
    if window_row_tokens > 0 and head_dim and head_dim < BASE_HEAD_DIM:  # the windowed table's head dims
        eff *= fp8_window_attention_ratio(compute_capability=rates.compute_capability, recipe=fp8_recipe,
                                          row_tokens=window_row_tokens, backward=backward, head_dim=head_dim,
                                          window_tokens=window_tokens)
    else:
        eff *= fp8_attention_ratio(compute_capability=rates.compute_capability, recipe=fp8_recipe, seq_len=seq_len,
                                   backward=backward, head_dim=head_dim)
    if fp32:
        eff *= fp32_attention_ratio()
    return work / (rates.matmul_flops_per_s * eff)


# fp8 attention (``precision.fp8_attention``: Megatron-Core ``fp8_dot_product_attention`` -> TE ``fp8_dpa``): cuDNN's
# fused attention on quantised Q, K, V (and dO in backward) against its bf16 kernel, same shape, causal (top_left),
# non-deterministic backward, cuDNN backend 9.22.0, measured by NVIDIA/cudnn-frontend
# benchmark/sdpa_benchmark_training/results/ @3929da2ef4c1dba1bb8acb68727b9134f26f40c0: head dim 128 (Llama 3.1, 64 / 8
# heads) llama3.1/gb200/llama3.1_20260424_100750.csv and llama3.1/gb300/llama3.1_20260424_100757.csv, head dim
# 192 / 128 (DeepSeek-V3 MLA) dsv3/gb200/dsv3_20260424_101009.csv and dsv3/gb300/dsv3_20260424_101002.csv (TFLOP/s,
# rows 2-87 of each). Entries (seq_len, forward ratio, backward ratio), the ratio being the data type's TFLOP/s over
# bfloat16's, keyed by (compute capability: GB200 10.0, GB300 10.3; recipe: "mxfp8" MXFP8 attention, "fp8"
# per-tensor scaled; the table's query/key head dim). All 40 entries re-read from the four files (causal ``top_left``
# rows, non-deterministic backward): https://github.com/NVIDIA/cudnn-frontend/tree/3929da2ef4c1dba1bb8acb68727b9134f26f40c0/benchmark/sdpa_benchmark_training/results
_FP8_ATTENTION_POINTS = {
    ("10.0", "mxfp8", 128): ((2048, 1330 / 1097, 745 / 885), (4096, 1685 / 1408, 1054 / 1148),
                             (8192, 1902 / 1574, 1287 / 1332), (16384, 1999 / 1708, 1436 / 1328),
                             (32768, 2046 / 1622, 1425 / 1226)),
    ("10.0", "fp8", 128): ((2048, 1420 / 1097, 831 / 885), (4096, 1805 / 1408, 1178 / 1148),
                           (8192, 2047 / 1574, 1454 / 1332), (16384, 2154 / 1708, 1632 / 1328),
                           (32768, 2197 / 1622, 1687 / 1226)),
    ("10.3", "mxfp8", 128): ((2048, 1751 / 1373, 811 / 967), (4096, 2272 / 1703, 1143 / 1248),
                             (8192, 2570 / 1856, 1404 / 1435), (16384, 2727 / 1915, 1563 / 1507),
                             (32768, 2785 / 1953, 1590 / 1490)),
    ("10.3", "fp8", 128): ((2048, 1954 / 1373, 944 / 967), (4096, 2532 / 1703, 1396 / 1248),
                           (8192, 2897 / 1856, 1781 / 1435), (16384, 3054 / 1915, 2035 / 1507),
                           (32768, 3108 / 1953, 2128 / 1490)),
    ("10.0", "mxfp8", 192): ((2048, 1535 / 1072, 1047 / 846), (4096, 1925 / 1406, 1364 / 1057),
                             (8192, 2219 / 1585, 1494 / 1193), (16384, 2355 / 1678, 1552 / 1134),
                             (32768, 2329 / 1743, 1532 / 1076)),
    ("10.0", "fp8", 192): ((2048, 1659 / 1072, 1312 / 846), (4096, 2095 / 1406, 1692 / 1057),
                           (8192, 2397 / 1585, 1959 / 1193), (16384, 2486 / 1678, 1968 / 1134),
                           (32768, 2447 / 1743, 1857 / 1076)),
    ("10.3", "mxfp8", 192): ((2048, 2069 / 1285, 1158 / 914), (4096, 2517 / 1590, 1522 / 1143),
                             (8192, 2829 / 1825, 1780 / 1291), (16384, 2998 / 1967, 1844 / 1302),
                             (32768, 2959 / 1991, 1863 / 1289)),
    ("10.3", "fp8", 192): ((2048, 2290 / 1285, 1511 / 914), (4096, 2788 / 1590, 1982 / 1143),
                           (8192, 3128 / 1825, 2310 / 1291), (16384, 3305 / 1967, 2459 / 1302),
                           (32768, 3364 / 1991, 2406 / 1289)),
}
"""Measured fp8 / bf16 cuDNN attention rate ratios (comment above). Not applied (ratio 1): other architectures, whose
two passes were not measured apart (the same repository's H200 table times forward + backward together: 1.459 ms fp8
against 1.450 ms bf16 at 4k, cuDNN 9.19, ``results/h200_919_only_cudnn/llama3.1_20260227_034703.csv``), and head dims
below 128 (its gpt-oss table, head dim 64 and a 128-token window, measures the fp8 backward at 41-49 against 182
TFLOP/s bf16 at 4k, a kernel of another kind than the tables above: the windowed layers take it,
``_FP8_WINDOW_ATTENTION_POINTS``)."""


_FP8_WINDOW_ATTENTION_POINTS = {
    ("10.0", "mxfp8"): ((2048, 0.109 / 0.109, 0.237 / 0.642), (4096, 0.210 / 0.210, 0.465 / 2.080),
                        (8192, 0.414 / 0.417, 0.911 / 7.427), (16384, 0.822 / 0.826, 1.818 / 27.940),
                        (32768, 2.634 / 1.637, 3.692 / 108.370)),
    ("10.0", "fp8"): ((2048, 0.109 / 0.101, 0.237 / 0.536), (4096, 0.210 / 0.195, 0.465 / 1.731),
                      (8192, 0.414 / 0.385, 0.911 / 6.176), (16384, 0.822 / 0.766, 1.818 / 23.231),
                      (32768, 2.634 / 1.529, 3.692 / 90.348)),
    ("10.3", "mxfp8"): ((2048, 0.104 / 0.092, 0.227 / 0.581), (4096, 0.202 / 0.175, 0.442 / 1.871),
                        (8192, 0.397 / 0.342, 0.862 / 6.648), (16384, 0.790 / 0.676, 1.712 / 24.996),
                        (32768, 2.530 / 1.345, 3.450 / 96.913)),
    ("10.3", "fp8"): ((2048, 0.104 / 0.086, 0.227 / 0.467), (4096, 0.202 / 0.167, 0.442 / 1.480),
                      (8192, 0.397 / 0.327, 0.862 / 5.189), (16384, 0.790 / 0.650, 1.712 / 19.354),
                      (32768, 2.530 / 1.296, 3.450 / 74.763)),
}
"""Measured fp8 / bf16 rate ratios of cuDNN's sliding-window attention, as (row tokens, forward, backward), each the
bfloat16 kernel's time over the fp8 one's in milliseconds, keyed by (compute capability: GB200 10.0, GB300 10.3;
recipe). NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/configs/gpt_oss.py (window 128, head dim 64,
``top_left`` causal, batch 2, 128 heads) measured with cuDNN backend 9.22.0, non-deterministic backward:
results/gpt_oss/gb200/gpt_oss_20260424_100011.csv and results/gpt_oss/gb300/gpt_oss_20260424_100022.csv (every
bfloat16, fp8 and mxfp8 row, ``time_ms``) @3929da2ef4c1dba1bb8acb68727b9134f26f40c0,
https://github.com/NVIDIA/cudnn-frontend/tree/3929da2ef4c1dba1bb8acb68727b9134f26f40c0/benchmark/sdpa_benchmark_training/results/gpt_oss.
The fp8 forward keeps the window (its time doubles with the row, as bf16's: 1.0-1.2 the bf16 rate up to 16k), the fp8
backward does not: its time grows about 3.6-3.9x per doubling of the row (0.54 / 1.73 / 6.18 / 23.2 / 90.3 ms per-tensor
fp8 on GB200 at 2k-32k), the growth of a causal kernel that runs every key tile under the diagonal, so it falls from
0.36-0.49 of the bf16 windowed rate at 2k to 0.03-0.05 at 32k. Its implied rate on the whole causal triangle
(``4·d·s²/2`` forward FLOPs per head, x 2.5) is 640-980 TFLOP/s on GB200, a causal fp8 kernel's (the head-dim-128
causal table above: 885-1,687). Transformer Engine runs that fused fp8 path for a windowed layer on sm100 with cuDNN
>= 9.21 (below either it disables FusedAttention for fp8 with a sliding window: NVIDIA/TransformerEngine
transformer_engine/pytorch/attention/dot_product_attention/utils.py, the sliding-window filter, @v2.16
4220403e831d29e93868f7793693ea83f6b8b05b), the NeMo 26.06 container's pair (TE 2.16, cuDNN 9.21.1: Megatron-Bridge
docs/releases/software-versions.md @067f987df03b8355b03192d88d70f1709fedf51a). Applied to the windowed layers
(``fp8_window_attention_ratio``) at head dims below 128, the table's, and at the measured window only
(``FP8_WINDOW_MEASURED_TOKENS``); held at the ends of the row lengths.

Version gap: the table is cuDNN backend 9.22.0's (the CSVs' ``cudnn_backend_version`` 92200), the rows it moves ran
the 26.06 container's cuDNN 9.21.1 (26.08's not listed at that commit); that 9.21.1's fp8 windowed backward runs the
whole causal triangle as 9.22.0's does is an assumption (no 9.21.1 timing of it was found). Effect on the rows (the gpt-oss-120b MXFP8 rows with
``fp8_dot_product_attention``, ``benchmarks/step_times.json``; step error without this table, i.e. the fp8
windowed layers at the bf16 windowed rate, -> with it, on the code of 2026-12-04): mbridge-2606-gb300 +11.5 -> +19.9 %,
2608-gb300 +11.1 -> +19.3 %, 2606-gb200 -0.2 -> +7.7 %, 2608-gb200 -1.2 -> +6.7 %, 260601-gb200 -36.9 -> -31.9 %,
260601-gb300 -31.8 -> -26.7 %. When the table came in (02fb7cdb) the same four rows moved +7.3 -> +15.6, +6.8 ->
+15.1, -3.9 -> +4.0 and -4.8 -> +3.0 %; later changes elsewhere moved both sides by about 4 points."""


FP8_WINDOW_MEASURED_TOKENS = 128
"""The one window ``_FP8_WINDOW_ATTENTION_POINTS`` was measured at: NVIDIA/cudnn-frontend
benchmark/sdpa_benchmark_training/configs/gpt_oss.py @3929da2ef4c1dba1bb8acb68727b9134f26f40c0 (gpt-oss's 128-token
sliding window). The table's fp8 backward slowdown is the gap between a kernel that skips the key tiles outside the
window and one that runs every causal tile, so its size depends on the window (a 2,047-token window, Phi-3-mini-4k's,
skips far fewer tiles at 4k): no other window was measured and none is scaled from this one."""


def fp8_window_attention_ratio(*, compute_capability: str | None, recipe: str, row_tokens: float, backward: bool,
                               window_tokens: float, head_dim: float | None = None) -> float:
    """The fp8 windowed-attention kernel's rate over the bf16 windowed kernel's (``_FP8_WINDOW_ATTENTION_POINTS``),
    at the row's length ``row_tokens`` (not the window's key loop: the fp8 backward's work grows with the row), linear
    in log2 of the row between the measured lengths and held at the ends; 1 where nothing was measured (no
    ``recipe``, another architecture, head dim 128 and above or unknown, or a window ``window_tokens`` other than the
    measured ``FP8_WINDOW_MEASURED_TOKENS``: such a layer keeps the bf16 windowed rate, its fp8 cost not modelled)."""
    if not recipe or row_tokens <= 0 or not head_dim or head_dim >= BASE_HEAD_DIM:
        return 1.0
    if window_tokens != FP8_WINDOW_MEASURED_TOKENS:
        return 1.0
    points = _FP8_WINDOW_ATTENTION_POINTS.get((compute_capability or "", recipe))
    if not points:
        return 1.0
    return _log2_interpolate(points, x=row_tokens, col=2 if backward else 1)


def _log2_interpolate(points: tuple[tuple[float, float, float], ...], *, x: float, col: int) -> float:
    """Column ``col`` of ``points`` (sorted by their first entry) linear in log2 of ``x``, held at the ends."""
    lx = math.log2(x)
    if lx <= math.log2(points[0][0]):
        return points[0][col]
    for lo, hi in zip(points, points[1:]):
        if lx <= math.log2(hi[0]):
            t = (lx - math.log2(lo[0])) / (math.log2(hi[0]) - math.log2(lo[0]))
            return lo[col] + (hi[col] - lo[col]) * t
    return points[-1][col]


FP8_ATTENTION_FORWARD_KERNELS = 4
"""Forward cast kernels per fp8 attention call: Q, K and V quantised (one each), the quantised output dequantised."""
FP8_ATTENTION_BACKWARD_KERNELS = 1
"""Backward: the output gradient quantised (cuDNN returns dQ, dK, dV in bf16)."""


FP8_ATTENTION_ELEMENT_BYTES = {"mxfp8": 1.0 + 1.0 / 32, "fp8": 1.0}
"""A quantised attention element with its scale: MXFP8 an E8M0 byte per 32 (``memory.fp8.quantized_element_bytes``),
per-tensor fp8 one fp32 scale per tensor (left out)."""


def fp8_attention_cast_bytes(*, tokens: float, q_dim: float, kv_dim: float, element_bytes: float,
                             calls: float = 1.0) -> tuple[float, float]:
    """(forward, backward) bytes of Transformer Engine's casts around one fp8 attention call per ``calls`` (the
    bf16 activations at 2 B; ``element_bytes``: a quantised element with its scale, ``memory.fp8``). Forward: Q, K, V
    read and written quantised in both row- and column-wise copies (``combine_and_quantize`` sets no usage when a
    tensor serves forward and backward), the kernel's quantised output dequantised to the bf16 output it returns and
    saves; backward: the output gradient read and written quantised in both copies. NVIDIA/TransformerEngine
    transformer_engine/pytorch/attention/dot_product_attention/backends.py l.1390 (Q, K, V), l.1450-1464 (O: the
    MXFP8 backward needs O in bf16), l.1648-1656 (dO), l.1788-1801 (dQ, dK, dV returned in bf16) and utils.py
    l.2675-2730 (the usages) @4220403e831d29e93868f7793693ea83f6b8b05b. The output's width is taken as ``q_dim``."""
    qkv = tokens * (q_dim + 2 * kv_dim)
    out = tokens * q_dim
    fwd = qkv * (2.0 + 2 * element_bytes) + out * (element_bytes + 2.0)
    bwd = out * (2.0 + 2 * element_bytes)
    return fwd * calls, bwd * calls


def fp8_attention_ratio(*, compute_capability: str | None, recipe: str, seq_len: float, backward: bool,
                        head_dim: float | None = None) -> float:
    """The fp8 attention kernel's rate over the bf16 kernel's (``_FP8_ATTENTION_POINTS``: the head-dim-192 table
    from head dim 192 up, the head-dim-128 table from 128 (also when the head dim is not known); 1 below 128), linear
    in log2 of the sequence length between the measured lengths and held at the ends; 1 where nothing was measured
    (no ``recipe``, another architecture)."""
    hd = head_dim or BASE_HEAD_DIM
    if not recipe or seq_len <= 0 or hd < BASE_HEAD_DIM:
        return 1.0
    points = _FP8_ATTENTION_POINTS.get((compute_capability or "", recipe, 192 if hd >= 192 else 128))
    if not points:
        return 1.0
    return _log2_interpolate(points, x=seq_len, col=2 if backward else 1)


def packed_attention_context(*, mean_sample_tokens: float, sample_length_cv: float, row_tokens: float) -> float:
    """Keys each query's causal span covers, on average over a row, when attention runs per packed sample:
    ``Σ len_i² / Σ len_i = E[len²] / E[len] = mean·(1 + cv²)`` (module docstring), at most the row
    (``row_tokens``: samples never exceed it). Used as the attention context of a row of ``row_tokens``
    tokens: the inventory's causal halving then gives ``Σ len_i² / 2`` products per head dimension."""
    if mean_sample_tokens <= 0 or row_tokens <= 0:
        raise ValueError("mean_sample_tokens and row_tokens must be > 0")
    if sample_length_cv < 0:
        raise ValueError("sample_length_cv must be >= 0")
    return min(float(row_tokens), float(mean_sample_tokens) * (1.0 + sample_length_cv ** 2))


@lru_cache(maxsize=512)
def _causal_tiles(seq_tokens: int, window_tokens: int | None, tile_tokens: int) -> int:
    """Query x key tiles a causal kernel computes over one row of ``seq_tokens``: query block ``i`` runs key blocks
    from the one holding its first query's earliest key (``i·tile - window + 1``; 0 without a window) to ``i``."""
    blocks = -(-seq_tokens // tile_tokens)
    total = 0
    for i in range(blocks):
        first = 0 if window_tokens is None else max(0, (i * tile_tokens - window_tokens + 1) // tile_tokens)
        total += i - first + 1
    return total


def windowed_attention_keys(*, window_tokens: int, context_tokens: float,
                            tile_tokens: int = WINDOW_TILE_TOKENS) -> float:
    """Causal-equivalent keys per query of a sliding-window layer (module docstring): ``context/2`` (the causal
    count the inventory uses for a full layer) scaled by the tiles the kernel runs with the window over those
    without it. Equals ``context/2`` when the window covers the row."""
    if window_tokens < 1 or tile_tokens < 1:
        raise ValueError("window_tokens and tile_tokens must be >= 1")
    seq = max(1, round(context_tokens))
    if window_tokens >= seq:
        return context_tokens / 2.0
    ratio = _causal_tiles(seq, window_tokens, tile_tokens) / _causal_tiles(seq, None, tile_tokens)
    return context_tokens / 2.0 * ratio


def legacy_sdpa_copy_work(*, q_dim: int, kv_dim: int, num_heads: int, num_kv_heads: int, repeats_kv: bool,
                          contiguous: bool, dtype_bytes: int = 2) -> tuple[float, int]:
    """Bytes per token and kernels per full-attention layer that a pinned transformers release's SDPA path runs in the
    forward beyond v5's (``memory.attention.legacy_sdpa``: ``HF_SDPA_GQA_SINCE``, ``HF_SDPA_CONTIGUOUS``), each a
    memory-bound copy that reads and writes its tensor once: ``repeat_kv``'s ``reshape`` of the expanded k and v
    (reads kv, writes the heads-wide copy; an ``expand`` view for one KV head unless made contiguous), and under
    ``.contiguous()`` q, k and v (k and v only when not already repeated) and the kernel's head-major output
    (``attn_output.transpose(1, 2).contiguous()``). The recompute of a checkpointed layer runs them again. Backward:
    nothing counted: the gradient of ``repeat_kv`` sums the heads-wide dK/dV back to the KV heads, which v5's
    ``enable_gqa`` kernel does inside (flash-attention's ``mha_bwd`` allocates ``dk_expanded``/``dv_expanded`` and sums
    them over the groups), and ``.contiguous()``'s gradient passes through."""
    repeated = repeats_kv and num_kv_heads < num_heads and (num_kv_heads > 1 or contiguous)
    per_token, kernels = 0.0, 0
    if repeated:
        per_token += 2.0 * dtype_bytes * (kv_dim + q_dim)
        kernels += 2
    if contiguous:
        per_token += 2.0 * dtype_bytes * 2 * q_dim  # q and the output
        kernels += 2
        if not repeated:
            per_token += 2.0 * dtype_bytes * 2 * kv_dim
            kernels += 2
    return per_token, kernels


def window_mask_forward_bytes(*, micro_batch_size: float, seq_len: float, dtype_bytes: float = 2.0) -> float:
    """Bytes one masked SDPA call (a sliding-window layer past its window under ``sdpa``) moves converting the bool
    (b, 1, s, s) mask to the query's dtype of ``dtype_bytes`` (the compute dtype: 2 in bf16 / fp16, 4 in fp32;
    ``window_mask_bytes_per_element``, module docstring)."""
    return window_mask_bytes_per_element(dtype_bytes=dtype_bytes) * micro_batch_size * seq_len * seq_len


def mask_bias_read_bytes(*, micro_batch_size: float, heads: float, seq_len: float, dtype_bytes: float = 2.0) -> float:
    """Bytes one masked SDPA call's memory-efficient kernel reads of its mask, forward or backward alike: every
    (query block, key block) tile of every head loads its bias tile from global memory before adding it to the scores
    (pytorch/pytorch aten/src/ATen/native/transformers/cuda/mem_eff_attention/kernel_forward.h ``MM0::BiasLoader::load``
    per key block @4f4bcdbe6ddea60634d2af07a07c2e88dfd39a1e; kernel_backward.h ``MatmulQK::BiasLoader``, the tile that
    recomputes P, @5cd01f1744c536d63e75512d134fcf916f1b4184), and the (b, 1, q, k) mask reaches it expanded over the
    heads with a zero head stride (attention.cu ``get_bias_4d_view`` @e129513e370e0ed6bdfb1f3b92a421f87815d098), so each
    head reads the whole mask: ``b · heads · q · k`` elements of the query's dtype (``dtype_bytes``). The grid runs a
    batch row's heads before the next row (``blockIdx.z`` the batch), so every head after the first re-reads a row's mask
    (``q · k · dtype_bytes``): the inventory lists those reads as a ``ChainedRead`` of that working set, which
    ``training.l2_chained_bytes`` prices at the L2 rate where it fits (at 8,192 tokens in bf16 128 MiB, more than any
    catalog card keeps there: device memory). Not credited: the heads whose blocks are resident at the same moment
    (about two on an H100 at those shapes) sharing a tile through L2 even when the mask does not fit, so at long rows an
    upper figure of the kernel's device-memory traffic."""
    return micro_batch_size * heads * seq_len * seq_len * dtype_bytes


def windowed_attention_seq(*, keys_per_query: float) -> float:
    """The causal row length whose mean key loop matches a windowed layer's (``2 x keys``), for the short-sequence
    factor of ``attention_efficiency`` (module docstring)."""
    return 2.0 * keys_per_query


@dataclass(frozen=True, slots=True)
class SinkScoreWork:
    """Memory-bound work of eager attention with a learned sink column, per score element (``b · heads · s²``) of one
    layer: bytes moved, of them those on PyTorch's non-vectorised loops (``inventory.PassInventory.strided_bytes``),
    and kernels per layer (``sink_eager_score_work``)."""

    forward_bytes: float
    forward_strided_bytes: float
    forward_kernels: float
    backward_bytes: float
    backward_strided_bytes: float
    backward_kernels: float


def sink_eager_score_work(*, seq_len: float, dtype_bytes: float = 2.0) -> SinkScoreWork:
    """The score-sized ops of gpt-oss's eager attention (``ModelSpec.attention_sinks``), in place of the plain eager
    path's ``EAGER_SCORE_*`` (scale, mask, fp32 softmax and its cast back). transformers 5.24.0
    transformers/models/gpt_oss/modeling_gpt_oss.py ``eager_attention_forward`` (l.227-255) runs, on the scores S
    (``b·H·s·s``) and the sink-extended logits S' (``b·H·s·(s+1)``, ``r = (s+1)/s`` of S), in the model's dtype:

    ===========================================  =====================  ========================================
    forward op                                   bytes per element of S  loop
    ===========================================  =====================  ========================================
    ``* scaling``                                2 + 2                   vectorised
    ``+ attention_mask`` ((b,1,s,s) broadcast)   2 + 2                   non-vectorised (broadcast operand)
    ``torch.cat([S, sinks.expand(..)], -1)``     2 + 2r                  ``CatArrayBatchedCopy`` (generic)
    ``.max(dim=-1)``                             2r                      reduction
    ``S' - max`` (the max broadcast)             2r + 2r                 non-vectorised (broadcast operand)
    ``F.softmax(S', dtype=bf16)``                2r + 2r                 softmax kernel
    ``probs[..., :-1]``, dropout(p=0), ``.to``   0                       views / no-ops
    ===========================================  =====================  ========================================

    The cat's sink input is an ``expand`` (stride 0), not contiguous, so ``cat_out_cuda`` takes ``parallel_cat`` with
    per-input strides and launches the generic ``CatArrayBatchedCopy``, not the vectorised ``_contig`` /
    ``_alignedK_contig`` / ``_vectorized`` kernels that need every input contiguous (pytorch/pytorch
    aten/src/ATen/native/cuda/Shape.cu @017943b70f6920c395e3b6dac100e2cd7ecfa92a, ``cat_out_cuda`` and
    ``parallel_cat``'s ``HANDLE_CASE``; "if a or b is strided, torch calls CatArrayBatchedCopy which is slower",
    https://github.com/NVIDIA/TensorRT-LLM/pull/8044); its bytes are counted with the strided ones.
    Backward (autograd's formulas, pytorch/pytorch tools/autograd/derivatives.yaml
    @d327a787782618826890c323f8d7e51f3d28ec13): the slice's ``slice_backward`` (a zero fill of S', 2r, and a copy of
    the gradient into its strided slice, 2 + 2: fill + copy kernels), ``_softmax_backward_data`` (reads the output and
    the gradient, writes one: 6r), the subtraction's gradient of the max (``neg`` 4r, ``sum`` over the row 2r), the
    max's ``value_selecting_reduction_backward`` (``new_zeros`` 2r, ``scatter`` 4r as the fake-tensor trace counts it),
    the sum of the two gradients of S' (6r), the cat's gradient a view and the mask add's the identity, and the
    scale's ``mul`` on the strided slice of that gradient (2 + 2, non-vectorised). So forward 22 B (12 on the
    non-vectorised loops) and 6 kernels, backward 34 B (8) and 9 kernels per element of S at r = 1, against the plain
    path's 16 forward and 20 + ``BACKWARD_BYTES_FACTOR`` x 16 backward. Checked against ``trainfit trace --time`` of
    openai/gpt-oss-20b (LoRA, 2,048 tokens): the score-sized ops of a layer match these per-op bytes.

    Not priced (a known gap, H200 profile of the same step, benchmarks/results/gpu_raw/heldout4.json): the kernels
    on S' run well below what their bytes at the streaming or the non-vectorised rate give: the generic cat moved about
    0.65 TB/s, the softmax over rows of ``s + 1`` elements about 0.73 TB/s, and ``P·V`` on the sliced probabilities
    (row stride ``s + 1``, not 16-byte aligned) ran on CUTLASS's ``align1`` SM75 kernel at about 78 TFLOP/s; no
    published rate for those kernels on this card was found, so they keep the rates here.

    Re-checked 2026-12-05 (null result, nothing changed), what pricing them would do. Per kernel, that profile (torch
    2.11.0, transformers 5.24.0, one H200, 24 layers, 2,048 tokens, checkpointing: 24 forward + 24 recompute calls)
    against the plan's rates (``hbm_bytes_per_s`` 4.32 TB/s, the non-vectorised loop at
    ``training.STRIDED_BANDWIDTH_SHARE`` of it, ``gemm.gemm_seconds``): the sink cat 1.61 ms a call (0.67 TB/s; 144
    calls and 79.0 ms in all, 96 of them the small rotary cats) against 0.54 ms planned, +51 ms; the forward softmax
    (``cunn_SoftMaxForwardReg``, 48 calls, 70.2 ms) 1.46 ms against 0.25 ms, +58 ms; ``P·V`` on the ``align1`` kernel
    (48 calls, 21.0 ms) 0.44 ms against 0.13 ms (260 TFLOP/s planned), +15 ms; the softmax backward (24 calls,
    17.9 ms, 2.16 TB/s) 0.75 ms against 0.37 ms, +9 ms. Together 133 ms of the row's 178 ms shortfall (planned 0.405 s,
    measured 0.583 s, of which the GPU was busy 0.571 s). A diagnostic plan with exactly those seconds added as forward
    and backward bytes (not committed) reads 0.495 s, -30.5 % -> -15.1 %: the kernels are most of the miss, but their
    rates here would be read off this row's own profile, and the row is in the held-out half
    (``benchmarks/step_times.py`` ``half_of``), so no rate is set from it. Published figures for the generic cat are
    for other cards and element sizes: vLLM pull request #34917 (https://github.com/vllm-project/vllm/pull/34917, B300,
    ``torch.cat`` of a non-contiguous bf16 input, 8,192 tokens: 3,101.8 us against 355.2 us for a vectorised kernel,
    about 0.8 TB/s) and #29710 (https://github.com/vllm-project/vllm/pull/29710, an fp8 cat with an expanded input,
    3.16 -> 1.61 ms by a broadcast copy; card not stated): the same order as the 0.67 TB/s here, not a Hopper rate.
    No published measurement of PyTorch's softmax on unaligned rows of 2,049 elements, or of cuBLAS's ``align1``
    fallback for a 4,098-byte leading dimension, on Hopper was found. The set's deepseek-ai/DeepSeek-V2-Lite row
    (LoRA, SDPA, 4,096 tokens, -34.1 %) is not this mechanism: it has no sink and no eager attention; after its GEMMs,
    its profile's largest entries are device-to-device memcpys (398 calls, 55.9 ms) and copy kernels, not followed
    here."""
    r = (seq_len + 1.0) / seq_len
    e = dtype_bytes / 2.0  # the table's 2-byte elements at the model's dtype
    scale, mask, cat = 4.0, 4.0, 2.0 + 2.0 * r
    row_max, shift, softmax = 2.0 * r, 4.0 * r, 4.0 * r
    fill, copy, softmax_bwd, neg, row_sum = 2.0 * r, 4.0, 6.0 * r, 4.0 * r, 2.0 * r
    zeros, scatter, grad_add, scale_bwd = 2.0 * r, 4.0 * r, 6.0 * r, 4.0
    return SinkScoreWork(
        forward_bytes=e * (scale + mask + cat + row_max + shift + softmax),
        forward_strided_bytes=e * (mask + cat + shift),
        forward_kernels=6.0,
        backward_bytes=e * (fill + copy + softmax_bwd + neg + row_sum + zeros + scatter + grad_add + scale_bwd),
        backward_strided_bytes=e * (copy + scale_bwd),
        backward_kernels=9.0,
    )
