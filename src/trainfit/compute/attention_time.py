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

Pure Python: no torch import.
"""

from __future__ import annotations

from trainfit.compute.rates import DeviceRates

BACKWARD_FLOPS_FACTOR = 2.5
SEQ_HALF = 256.0
_EFFICIENCY = {"8": (0.80, 0.62), "9": (0.45, 0.34), "10": (0.45, 0.34), "12": (0.45, 0.34)}


def attention_efficiency(*, compute_capability: str | None, seq_len: float, backward: bool) -> float:
    major = (compute_capability or "8.0").split(".")[0]
    fwd, bwd = _EFFICIENCY.get(major, (0.5, 0.4))
    return (bwd if backward else fwd) * seq_len / (seq_len + SEQ_HALF)


def attention_seconds(*, forward_flops: float, seq_len: float, rates: DeviceRates, backward: bool) -> float:
    """Seconds of the fused attention kernels whose forward work is ``forward_flops``."""
    if forward_flops <= 0:
        return 0.0
    work = forward_flops * (BACKWARD_FLOPS_FACTOR if backward else 1.0)
    eff = attention_efficiency(compute_capability=rates.compute_capability, seq_len=seq_len, backward=backward)
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
