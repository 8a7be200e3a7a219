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
sm90+       0.45     0.34      FlashAttention-3 paper (Shah et al. 2024), Fig. 1-2: FlashAttention-2
                               (what PyTorch SDPA runs) on H100 reaches ~350 / ~270 TFLOP/s of 792
=========  =======  ========  ================================================================

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
others     1.00   1.00   not applied: no head-dim table for A100-class (sm80/86/89) or sm120 cards was read
=========  =====  =====  ======================================================================================

Stated kernel (``RunCard.attention_kernel``; ``auto`` keeps the tables above). The fused kernel a run used sets the
rate far more than the architecture does on Hopper and Blackwell: FlashAttention-3 and cuDNN use Hopper's wgmma and
TMA, FlashAttention-4 Blackwell's tcgen05, while FlashAttention-2 runs its Ampere ``mma.sync`` kernels on every later
architecture. Rates as a fraction of the card's sustained matmul rate (H100 SXM / H200 794.5 TFLOP/s, B200 1,746;
``rates.default_rates``), at head dim 128, long sequences:

======  ====  =====  =====  ===========  =====================================================================
kernel  arch  fwd    bwd    hd 64 ratio  source (TFLOP/s, bf16)
======  ====  =====  =====  ===========  =====================================================================
fa2     sm8x  0.80   0.62   1.00         the ``auto`` row (FlashAttention-2 paper)
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

Pairs not in the table take the ``auto`` rates (the plan says so): no published FlashAttention-2 table on sm120, no
cuDNN table on B200 at head dim 128 read (pull request #2605's cuDNN-vs-FA4 B200 table was read only at head dim 64),
none for cuDNN on Ampere. FlashAttention-3 builds for Hopper only (the repository's ``hopper/`` package),
FlashAttention-4 for Blackwell (``flash_attn/cute``), the Triton FlashAttention for Ampere and Hopper:
``kernel_runs_on`` refuses the others.

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

Pure Python: no torch import.
"""

from __future__ import annotations

from functools import lru_cache

from trainfit.compute.rates import DeviceRates

BACKWARD_FLOPS_FACTOR = 2.5
SEQ_HALF = 256.0
WINDOW_TILE_TOKENS = 128
_EFFICIENCY = {"8": (0.80, 0.62), "9": (0.45, 0.34), "10": (0.45, 0.34), "12": (0.45, 0.34)}
BASE_HEAD_DIM = 128
_HEAD_DIM_64 = {"9": (0.89, 0.90), "10": (0.67, 0.67)}  # (fwd, bwd) at head dim 64 / at 128


AUTO_KERNEL = "auto"
# (kernel, major) -> (fwd, bwd, (fwd, bwd) at head dim 64 / at 128): the module docstring's stated-kernel table;
# FlashAttention-2 on Ampere and Hopper is what the default rates above measure (one source for both)
_KERNEL_RATES = {
    ("fa2", "8"): (*_EFFICIENCY["8"], _HEAD_DIM_64.get("8", (1.0, 1.0))),
    ("fa2", "9"): (*_EFFICIENCY["9"], _HEAD_DIM_64["9"]),
    ("fa2", "10"): (0.20, 0.19, (1.0, 1.0)),
    ("fa3", "9"): (0.78, 0.71, (0.75, 0.75)),
    ("fa4", "10"): (0.81, 0.69, (0.67, 0.67)),
    ("cudnn", "9"): (0.68, 0.65, (0.67, 0.67)),
    ("triton_fa", "8"): (0.57, 0.25, (1.0, 1.0)),
    ("triton_fa", "9"): (0.32, 0.14, (1.0, 1.0)),
}
_KERNEL_ARCH = {"fa3": ("9",), "fa4": ("10",), "triton_fa": ("8", "9")}
KERNEL_ARCH_TEXT = {"fa3": "Hopper (compute capability 9.x)", "fa4": "Blackwell (compute capability 10.x)",
                    "triton_fa": "Ampere and Hopper (compute capability 8.x, 9.x)"}
"""Kernels built for some architectures only (module docstring); the others run everywhere this plans."""


def _major(compute_capability: str | None) -> str:
    return (compute_capability or "8.0").split(".")[0]


def kernel_runs_on(*, kernel: str, compute_capability: str | None) -> bool:
    """Whether ``kernel`` has a build for that architecture (``auto``, fa2 and cudnn: every one planned)."""
    archs = _KERNEL_ARCH.get(kernel)
    return archs is None or compute_capability is None or _major(compute_capability) in archs


def kernel_rated(*, kernel: str, compute_capability: str | None) -> bool:
    """Whether the stated-kernel table has the pair (else the ``auto`` rates apply)."""
    return (kernel, _major(compute_capability)) in _KERNEL_RATES


KERNEL_NAMES = {"fa2": "FlashAttention-2", "fa3": "FlashAttention-3", "fa4": "FlashAttention-4", "cudnn": "cuDNN",
                "triton_fa": "FlashAttention in Triton, flash_attn_triton.py"}


def kernels_allowed(*, compute_capability: str | None) -> list[str]:
    """The ``attention_kernel`` values with a build for that architecture (for the refusals' "allowed there")."""
    return ["auto", "fa2", "cudnn"] + [k for k in _KERNEL_ARCH if kernel_runs_on(kernel=k,
                                                                                 compute_capability=compute_capability)]


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


def attention_efficiency(*, compute_capability: str | None, seq_len: float, backward: bool,
                         head_dim: float | None = None, kernel: str = AUTO_KERNEL) -> float:
    fwd, bwd, _ = _rates(kernel, compute_capability)
    hd = head_dim_efficiency(compute_capability=compute_capability, head_dim=head_dim, backward=backward,
                             kernel=kernel)
    return (bwd if backward else fwd) * hd * seq_len / (seq_len + SEQ_HALF)


def attention_seconds(*, forward_flops: float, seq_len: float, rates: DeviceRates, backward: bool,
                      head_dim: float | None = None, kernel: str = AUTO_KERNEL) -> float:
    """Seconds of the fused attention kernels whose forward work is ``forward_flops`` (``head_dim``: the query/key
    head dimension, ``head_dim_efficiency``; None: the base rate; ``kernel``: the stated kernel, module docstring)."""
    if forward_flops <= 0:
        return 0.0
    work = forward_flops * (BACKWARD_FLOPS_FACTOR if backward else 1.0)
    eff = attention_efficiency(compute_capability=rates.compute_capability, seq_len=seq_len, backward=backward,
                               head_dim=head_dim, kernel=kernel)
    return work / (rates.matmul_flops_per_s * eff)


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


def windowed_attention_seq(*, keys_per_query: float) -> float:
    """The causal row length whose mean key loop matches a windowed layer's (``2 x keys``), for the short-sequence
    factor of ``attention_efficiency`` (module docstring)."""
    return 2.0 * keys_per_query
