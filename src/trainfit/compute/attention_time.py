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
