"""The op inventory of one traced train step: the ground truth for a per-op time model.

Importing this module is cheap (no torch); :func:`trace_ops` imports the heavy parts lazily.
``trace_ops(request)`` runs the memory trace's step (same fake-tensor build, warm-up, and phases:
forward, backward with checkpoint recomputation, optimizer step) under a dispatch mode that records
every aten op (``trainfit.trace.opcount``) and returns an :class:`~trainfit.trace.inventory.OpInventory`.

Full depth as for memory: layers repeat with period p, so the step at L layers is the embedding and
head places of a shallow trace plus L decoder layers, each copied from the shallow trace's layer at
the same end or, for a middle layer, at the same position in the period
(:func:`~trainfit.trace.inventory.extrapolate_layers`). The two shallow traces (k and k+p layers) must
differ by exactly one middle period, op for op (checked on every run). The optimizer step is counted
at full depth directly (its multi-tensor launches are not linear in depth).
"""

from __future__ import annotations

import time

from trainfit.trace.inventory import (  # re-exported: the result types of trace_ops
    CATEGORIES,
    OpInventory,
    OpNameOps,
    OpRecord,
    OpTotals,
    PhaseOps,
    PlaceOps,
)
from trainfit.trace.types import PHASES, Progress, TraceRequest, TraceUnsupported

__all__ = ["CATEGORIES", "OpInventory", "OpNameOps", "OpRecord", "OpTotals", "PhaseOps", "PlaceOps", "trace_ops"]

NOTES = (
    (
        "ops as the Python dispatch key sees them on fake cpu tensors: after autograd and CompositeImplicit"
        " decompositions (linear = t + mm), CompositeExplicit ops (slice_backward) as one op"
    ),
    (
        "CPU kernels stand for their CUDA namesakes: SDPA's _scaled_dot_product_flash_attention_for_cpu(_backward)"
        " for the flash (or cuDNN / efficient) kernels; same shapes and FLOPs"
    ),
    "attention FLOPs as torch.utils.flop_counter (no causal halving); flops_causal counts the unmasked scores",
    (
        "bytes: per op, the distinct tensor bytes read plus written, a lower bound on its HBM traffic (each operand"
        " moved once; gathers count the rows they read)"
    ),
    (
        "launches: 1 per kernel op except multi_tensor_apply ops (foreach / fused AdamW; CUDA >= 12.1 table)"
        " and slice/select_backward (2); flash-attention backward and embedding backward launch more on CUDA"
    ),
)


def trace_ops(req: TraceRequest, *, progress: Progress | None = None) -> OpInventory:
    """Every aten op of the steady-state train step of ``req``, by phase and place, at full depth.

    Raises:
        TraceUnsupported: the trace extra is missing, the request is not a one-rank train step, or
            the model's ops are not linear in depth (trace it at full depth with ``layers``).
    """
    from trainfit.trace.collector import collector_paused

    with collector_paused():
        return _trace_ops(req, progress)


def _trace_ops(req: TraceRequest, progress: Progress | None) -> OpInventory:
    t0 = time.perf_counter()
    if req.pass_kind != "train_step":
        raise TraceUnsupported(f"trace --time: pass_kind '{req.pass_kind}' is not counted yet (train_step only)")
    if req.scope == "qlora":
        raise TraceUnsupported("trace --time: scope qlora's 4-bit GEMMs (bitsandbytes::gemm_4bit) are not counted;"
                               " trace its memory without --time")
    if req.world_size > 1:
        raise TraceUnsupported("trace --time: counts one GPU's step without FSDP for now (world_size 1; "
                               "--gpus 1 --strategy single)")
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        raise TraceUnsupported(f"trace needs the 'trace' extra (torch, transformers, peft): {exc}") from exc
    from trainfit.trace import extrapolate, inventory
    from trainfit.trace.op_runs import count_optimizer, count_step

    report = progress or (lambda label, frac: None)
    plan = extrapolate.plan_depths(req.hf_config, req.layers)
    runs = []
    for i, depth in enumerate(plan.depths):
        lo, hi = i / len(plan.depths), (i + 1) / len(plan.depths)

        def sub(label: str, frac: float, lo: float = lo, hi: float = hi, depth: int = depth) -> None:
            report(f"{label} ({depth} layers)", lo + (hi - lo) * frac * 0.95)

        runs.append(count_step(req, depth, progress=sub))
    notes = list(NOTES)
    if plan.extrapolated:
        r0, r1 = runs
        bad = inventory.linear_check(r0, r1, window=plan.window, period=plan.period)
        if bad:
            raise TraceUnsupported(f"trace --time: ops are not linear in depth ({len(bad)} differ, e.g. {bad[0]});"
                                   f" trace full depth with --layers {plan.target}")
        report(f"optimizer ({plan.target} layers)", 0.97)
        records = inventory.extrapolate_layers(r1, target=plan.target, traced=plan.depths[1], window=plan.window,
                                               period=plan.period)
        records += count_optimizer(req, plan.target)
        notes.insert(0, f"decoder layers copied from a {plan.depths[1]}-layer trace to {plan.target}"
                        f" (checked against {plan.depths[0]} layers: one {plan.period}-layer period apart, op for op);"
                        f" optimizer step counted at {plan.target} layers")
    else:
        (records,) = runs
    if req.optimizer_impl != "fused":
        notes.append("AdamW step counters are CPU tensors on a GPU run (not fused): their ops are category host")
    if req.precision == "fp32_autocast":
        notes.append("autocast follows the CPU autocast op lists, which differ from CUDA's (e.g. CUDA runs"
                     " softmax/log_softmax/pow/rsqrt in fp32 under autocast)")
    report("done", 1.0)
    return inventory.make_inventory(
        records, phases=PHASES, layers=plan.target, tokens=req.micro_batch_size * req.seq_len,
        layers_traced=plan.depths, extrapolated=plan.extrapolated, seconds=time.perf_counter() - t0, notes=notes,
    )
