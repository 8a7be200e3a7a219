"""The GPU kernels of Gated DeltaNet layers, emulated for the fake-tensor trace (needs torch).

On a GPU, transformers runs Qwen3.5's / Qwen3-Next's linear-attention layers with
flash-linear-attention's ``chunk_gated_delta_rule`` and Tri Dao's ``causal_conv1d_fn`` when those
packages are installed (``use_kernel_func_from_hub_with_fallback``: the package first, the torch
reference path only without it, with a warning telling the user to install them). Neither runs on
the CPU, and the torch fallback saves a different set of tensors for backward (fp32 copies padded
to the chunk, five 64x64 matrices per chunk and head, the padded conv output). The trace therefore
replaces both, while it runs, by autograd Functions that allocate what the kernels allocate, in
the same order, with the same lifetimes, and save for backward what the kernels save. Their
outputs are uninitialised: they stand for the kernels' memory only (the trace's tensors are fake).

Sources (read, not run):

* flash-linear-attention, fla-org/flash-linear-attention @ bc3b101dcb713ddc5bd8924b66754eb68b5ccf89:
  ``fla/ops/gated_delta_rule/chunk.py`` (``ChunkGatedDeltaRuleFunction``: ``input_guard`` makes
  q/k/v contiguous, ``l2norm_fwd`` in the kernel, ``save_for_backward(q, q_rstd, k, k_rstd, v, g,
  beta_raw, beta, A, ...)``; ``chunk_gated_delta_rule_fwd`` / ``_bwd``), ``fla/ops/gated_delta_rule/
  chunk_fwd.py`` (A = zeros(B, T, HV, 64) in k's dtype), ``fla/ops/gated_delta_rule/wy_fast.py``
  (w, u; ``prepare_wy_repr_bwd``), ``fla/ops/common/chunk_delta_h.py`` (h: (B, NT, HV, K, V) in k's
  dtype; v_new; dh, dv2), ``fla/ops/common/chunk_o.py`` (o; dq, dk, dw, dg with NK = K / BK partial
  dg), ``fla/ops/utils/cumsum.py`` (fp32 output), ``fla/modules/l2norm.py`` (y like x, fp32 rstd).
* causal-conv1d, Dao-AILab/causal-conv1d @ 0d2252d161f25f7907bbd05985c08ab98d255874:
  ``causal_conv1d/causal_conv1d_interface.py`` (``CausalConv1dFn`` saves x, weight, bias; the SiLU
  is fused and recomputed in backward) and ``causal_conv1d/cpp_functions.py`` (out = empty_like(x);
  backward: dx = empty_like(x), fp32 dweight cast to the weight's dtype).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from trainfit.trace.types import TraceUnsupported

CHUNK = 64
"""fla's chunk size for the gated delta rule (``chunk_size`` default)."""
DQKWG_TILE = 64
"""``chunk_bwd_dqkwg``'s K tile on Ampere/Ada (A100, L40S, RTX 4090; 128 on Hopper, 32 below):
NK = K / 64 partial fp32 dg tensors of (B, T, HV), summed at once (2 MiB at the 27B seed shapes)."""

MODULES = ("transformers.models.qwen3_5.modeling_qwen3_5", "transformers.models.qwen3_5_moe.modeling_qwen3_5_moe",
           "transformers.models.qwen3_next.modeling_qwen3_next")
"""transformers modules whose Gated DeltaNet calls the two kernels by these module-level names."""

KERNEL_NOTE = ("Gated DeltaNet layers run flash-linear-attention's chunk_gated_delta_rule and causal-conv1d's"
               " causal_conv1d_fn (the CUDA kernels transformers picks when both are installed), emulated on the"
               " fake tensors with their saved tensors and buffers; not transformers' torch fallback")


class _ChunkGatedDeltaRule(torch.autograd.Function):
    """``fla.ops.gated_delta_rule.chunk.ChunkGatedDeltaRuleFunction`` with ``use_qk_l2norm_in_kernel``,
    no initial state and no varlen (transformers' training call; the fp32 final state when a cache asks)."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                beta: torch.Tensor, output_final_state: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        q, k, v, g, beta = (t.contiguous() for t in (q, k, v, g, beta))  # input_guard
        B, T, H, K = q.shape
        HV, V = v.shape[2], v.shape[3]
        NT = -(-T // CHUNK)
        qn, q_rstd = torch.empty_like(q), q.new_empty((B, T, H), dtype=torch.float32)  # l2norm_fwd(q)
        kn, k_rstd = torch.empty_like(k), k.new_empty((B, T, H), dtype=torch.float32)  # l2norm_fwd(k)
        g_cum = torch.empty_like(g, dtype=torch.float32)  # chunk_local_cumsum
        A = kn.new_zeros((B, T, HV, CHUNK))  # fused kkt + solve_tril
        w, u = kn.new_empty((B, T, HV, K)), torch.empty_like(v)  # recompute_w_u_fwd
        h = kn.new_empty((B, NT, HV, K, V))  # chunk_gated_delta_rule_fwd_h
        final = kn.new_zeros((B, HV, K, V), dtype=torch.float32) if output_final_state else None
        v_new = torch.empty_like(u)
        o = torch.empty_like(v_new)  # chunk_fwd_o
        del w, u, h, v_new
        ctx.save_for_backward(qn, q_rstd, kn, k_rstd, v, g_cum, beta, A)
        if final is not None:
            ctx.mark_non_differentiable(final)
        return o.to(qn.dtype), final

    @staticmethod
    def backward(ctx: Any, do: torch.Tensor, dht: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
        qn, _q_rstd, kn, _k_rstd, v, g, beta, _A = ctx.saved_tensors
        do = do.contiguous()
        B, T, H, K = qn.shape
        HV, V = v.shape[2], v.shape[3]
        NT = -(-T // CHUNK)
        w, u = kn.new_empty((B, T, HV, K)), torch.empty_like(v)  # recompute_w_u_fwd
        h, v_new = kn.new_empty((B, NT, HV, K, V)), torch.empty_like(u)  # chunk_gated_delta_rule_fwd_h
        dv = torch.empty_like(do)  # chunk_bwd_dv_local
        dh, dv = qn.new_empty((B, NT, HV, K, V)), torch.empty_like(dv)  # chunk_gated_delta_rule_bwd_dhu
        dq, dk = qn.new_empty((B, T, HV, K)), kn.new_empty((B, T, HV, K))  # chunk_bwd_dqkwg
        dg = torch.empty((max(1, -(-K // DQKWG_TILE)), *g.shape), dtype=torch.float32)
        dw = torch.empty_like(w)
        if H != HV:
            dq = dq.view(B, T, H, HV // H, K).sum(3)
            dk = dk.view(B, T, H, HV // H, K).sum(3)
        dg = dg.sum(0)
        dk2, dv = kn.new_empty((B, T, HV, K)), torch.empty_like(v)  # prepare_wy_repr_bwd
        dg2, db = torch.empty_like(g), torch.empty_like(beta)
        if H != HV:
            dk2 = dk2.view(B, T, H, HV // H, K).sum(3)
        dk.add_(dk2)
        dg.add_(dg2)
        dg = torch.empty_like(dg)  # chunk_local_cumsum(dg, reverse=True): a new fp32 tensor
        del w, u, h, v_new, dh, dw, dk2, dg2
        dq = torch.empty_like(qn)  # l2norm_bwd(q, q_rstd, dq)
        dk = torch.empty_like(kn)  # l2norm_bwd(k, k_rstd, dk)
        return dq, dk, dv, dg, db, None


def chunk_gated_delta_rule(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, g: torch.Tensor,
                           beta: torch.Tensor, scale: float | None = None, initial_state: torch.Tensor | None = None,
                           output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False,
                           cu_seqlens: torch.Tensor | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """fla's ``chunk_gated_delta_rule`` signature; the training call only (see the class)."""
    if initial_state is not None or cu_seqlens is not None or not use_qk_l2norm_in_kernel:
        raise TraceUnsupported("trace: the emulated chunk_gated_delta_rule covers the training call only (no initial"
                               " state, no packed sequences, q/k L2-normalised in the kernel)")
    return _ChunkGatedDeltaRule.apply(query, key, value, g, beta, bool(output_final_state))


class _CausalConv1d(torch.autograd.Function):
    """``causal_conv1d.causal_conv1d_interface.CausalConv1dFn`` without states or ``seq_idx``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        if x.stride(2) != 1 and x.stride(1) != 1:
            x = x.contiguous()
        out = torch.empty_like(x)
        ctx.save_for_backward(x, weight, bias)
        return out

    @staticmethod
    def backward(ctx: Any, dout: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight, bias = ctx.saved_tensors
        if dout.stride(2) != 1 and dout.stride(1) != 1:
            dout = dout.contiguous()
        dx = torch.empty_like(x)
        dweight = torch.zeros_like(weight, dtype=torch.float32).type_as(weight)
        dbias = None if bias is None else torch.zeros_like(bias, dtype=torch.float32).type_as(bias)
        return dx, dweight, dbias


def causal_conv1d_fn(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                     seq_idx: torch.Tensor | None = None, initial_states: torch.Tensor | None = None,
                     return_final_states: bool = False, final_states_out: torch.Tensor | None = None,
                     activation: str | None = None, **kwargs: Any) -> torch.Tensor:
    """causal-conv1d's ``causal_conv1d_fn`` signature; the training call only (SiLU fused)."""
    if seq_idx is not None or initial_states is not None or return_final_states or activation not in ("silu", "swish"):
        raise TraceUnsupported("trace: the emulated causal_conv1d_fn covers the training call only (SiLU, no states,"
                               " no packed sequences)")
    return _CausalConv1d.apply(x, weight, bias)


@contextmanager
def linear_attention_kernels() -> Iterator[None]:
    """While active, transformers' Gated DeltaNet layers call the emulated GPU kernels above instead of
    its torch fallback: the module-level names are replaced in every module of ``MODULES`` that is
    loaded (building the model loads its own) and restored on exit."""
    undo: list[tuple[Any, str, Any]] = []
    for name in MODULES:
        mod = sys.modules.get(name)
        if mod is None:
            continue
        for attr, fake in (("torch_chunk_gated_delta_rule", chunk_gated_delta_rule), ("causal_conv1d_fn", causal_conv1d_fn)):
            if hasattr(mod, attr):
                undo.append((mod, attr, getattr(mod, attr)))
                setattr(mod, attr, fake)
    try:
        yield
    finally:
        for mod, attr, orig in reversed(undo):
            setattr(mod, attr, orig)
