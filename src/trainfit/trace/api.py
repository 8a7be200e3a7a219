"""Library API of the trace extra: the measured peak of one training step on fake tensors.

Importing this module is cheap (no torch); :func:`trace_step` imports the heavy parts lazily.
Method (GROUND_TRUTH §2, §4, §9): the model is built on meta, materialised as fake ``cpu``
tensors, an untracked optimizer step on zero gradients creates the optimizer states, and the steady-state step
``forward(input_ids, labels=input_ids) -> loss.backward() -> opt.step() -> opt.zero_grad()`` is
tracked phase by phase. Full depth is reached from the steps at k and k+p layers (p = the period of the
layer pattern), extrapolating every phase linearly (see ``trainfit.trace.extrapolate``). For a training step
on one rank or FSDP2 both come from one trace at k+p layers, the k-layer step being that trace with one
middle period cut out (``trainfit.trace.step.run_depth_pair``); else each depth is traced. With
``replay_allocator`` the full-depth step is traced once instead (the replay needs its allocation order).
"""

from __future__ import annotations

import time

from trainfit.trace.collector import collector_paused
from trainfit.trace.types import (  # re-exported: existing importers use trainfit.trace.api
    ATTENTIONS,
    MODES,
    OPTIMIZER_IMPLS,
    PASS_KINDS,
    PASS_PHASES,
    PHASES,
    PRECISIONS,
    SCOPES,
    PhaseTrace,
    Progress,
    TraceRequest,
    TraceResult,
    TraceUnsupported,
)

__all__ = [
    "ATTENTIONS", "MODES", "OPTIMIZER_IMPLS", "PASS_KINDS", "PASS_PHASES", "PHASES", "PRECISIONS", "SCOPES",
    "PhaseTrace", "Progress", "TraceRequest", "TraceResult", "TraceUnsupported", "trace_step",
]


def trace_step(req: TraceRequest, *, progress: Progress | None = None, context_parallel: int = 1,
               context_parallel_kind: str = "ring", expert_parallel: int = 1) -> TraceResult:
    """Trace one steady-state training step of ``req`` and return its per-phase peaks.

    ``context_parallel`` > 1 or ``expert_parallel`` > 1: rank 0 of ``req.world_size`` at full depth through
    ``trainfit.trace.context_parallel`` (``context_parallel_kind`` ring | ulysses) or
    ``trainfit.trace.expert_parallel``; emulations on the fake process group, named in the result's notes.

    Raises:
        TraceUnsupported: the trace extra is missing, or the case cannot be traced (message says why).
    """
    with collector_paused():
        return _trace_step(req, progress, context_parallel, context_parallel_kind, expert_parallel)


def _trace_step(req: TraceRequest, progress: Progress | None, context_parallel: int, context_parallel_kind: str,
                expert_parallel: int) -> TraceResult:
    if context_parallel > 1 or expert_parallel > 1:
        if req.checkpoint_every_n_layers is not None:
            raise TraceUnsupported("trace: checkpoint_every_n_layers is traced without context or expert parallel")
        if req.padding_mask:
            raise TraceUnsupported("trace: padding_mask is traced without context or expert parallel")
        return _trace_cp_ep(req, progress, context_parallel=context_parallel, kind=context_parallel_kind,
                            expert_parallel=expert_parallel)
    t0 = time.perf_counter()
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        raise TraceUnsupported(f"trace needs the 'trace' extra (torch, transformers, peft): {exc}") from exc
    from trainfit.trace import extrapolate
    if req.pass_kind == "train_step":
        from trainfit.trace.step import one_trace_supported, run_depth, run_depth_pair
    elif req.tensor_parallel > 1:  # the DPO step under tensor parallel
        from trainfit.trace.dpo_tensor_parallel import run_depth
    else:
        from trainfit.trace.rl_passes import run_depth

    report = progress or (lambda label, frac: None)
    if req.pipeline_parallel > 1 or req.micro_batches > 1:
        return _trace_stage(req, report, t0)
    full = extrapolate.full_depth(req.hf_config)
    plan = extrapolate.plan_depths(req.hf_config, req.layers, world_size=req.world_size)
    if req.checkpoint_every_n_layers is not None and plan.extrapolated:
        # the shallow depths would cut the every-n-th pattern: trace the whole depth
        plan = extrapolate.DepthPlan(plan.target, (plan.target,), plan.period, False,
                                     ("every n-th layer checkpointed: traced in full",))
    if req.replay_allocator and plan.extrapolated:
        # the replay needs the allocation order of the full-depth step: trace that step alone (its peaks are
        # the exact ones the two shallow traces extrapolate to) instead of the two shallow ones and it
        plan = extrapolate.DepthPlan(plan.target, (plan.target,), plan.period, False)
    runs = []
    one_trace = plan.extrapolated and req.pass_kind == "train_step" and one_trace_supported(req)
    if one_trace:  # both depths from the deeper trace (trainfit.trace.step.run_depth_pair)
        deep = plan.depths[-1]
        runs.extend(run_depth_pair(req, deep, plan.period, window=plan.window,
                                   progress=lambda label, frac: report(f"{label} ({deep} layers)", frac)))
    for i, depth in enumerate(() if one_trace else plan.depths):
        lo, hi = i / len(plan.depths), (i + 1) / len(plan.depths)

        def sub(label: str, frac: float, lo: float = lo, hi: float = hi, depth: int = depth) -> None:
            report(f"{label} ({depth} layers)", lo + (hi - lo) * frac)

        runs.append(run_depth(req, depth, window=plan.window, progress=sub))
    phases = extrapolate.combine(runs, plan, req.phase_names)
    total, trainable = extrapolate.param_counts(req, plan, runs)
    peak = max(phases, key=lambda p: p.peak_bytes)
    notes = list(plan.notes)
    if one_trace:
        k, deep = plan.depths
        notes[0] = (f"extrapolated from one {deep}-layer trace ({plan.period}-layer period) to {plan.target}, per"
                    f" region of each phase; the {k}-layer step is that trace with one middle period cut out")
    if req.pass_kind != "train_step":
        from trainfit.trace.rl_passes import pass_notes

        notes.extend(pass_notes(req))
    elif req.kept_output_dtype == "fp32":
        notes.append("prime-rl's SFT loop: the logits cast to an fp32 copy that stays live through backward, the model"
                     " output (bf16 logits) dropped before torch's CrossEntropyLoss runs on the copy")
    elif req.keep_outputs:
        notes.append(
            "the model output (logits) stays live through backward, as in `out = model(...); out.loss.backward()`"
            " (the HF Trainer drops it first: B*S*V*2 bytes less in bf16)"
        )
    else:
        notes.append("the model output is dropped before backward, as the HF Trainer and TRL do (`loss = model(...).loss`)")
    for r in runs:
        notes.extend(n for n in r.notes if n not in notes)
    if _has_linear_attention(req.hf_config):
        from trainfit.trace.kernels import KERNEL_NOTE

        notes.append(KERNEL_NOTE)
    if req.tensor_parallel > 1:
        dp = req.world_size // req.tensor_parallel
        notes.append(f"per-rank bytes of rank 0 of {req.world_size}: torch tensor parallel {req.tensor_parallel}"
                     + (" + sequence parallel" if req.sequence_parallel else "") + ", loss_parallel"
                     + (f", FSDP2 over {dp} data-parallel ranks" if dp > 1 else "") + " (fake process group)")
    elif req.world_size > 1:
        notes.append(f"per-rank bytes of rank 0 of {req.world_size} (FSDP2, fake process group)")
    if plan.target != full:
        notes.append(f"model truncated to {plan.target} of {full} layers")
    reserved = None
    if req.replay_allocator:  # one full-depth run (above): the allocator's state is not linear in depth
        reserved = runs[0].reserved
        notes.append(f"reserved: the allocation order of the {plan.target}-layer step replayed through a model of the"
                     " CUDA caching allocator (default settings, one stream, two steps; cuBLAS workspaces included)")
    report("done", 1.0)
    return TraceResult(
        peak_bytes=peak.peak_bytes,
        peak_phase=peak.name,
        phases=tuple(phases),
        params_total=total,
        params_trainable=trainable,
        seconds=time.perf_counter() - t0,
        layers_traced=plan.depths[-1:] if one_trace else plan.depths,
        extrapolated=plan.extrapolated,
        notes=tuple(notes),
        reserved_bytes=reserved,
    )



def _has_linear_attention(hf_config: dict) -> bool:
    from trainfit.catalog.hf_config import decoder_config

    dec = decoder_config(hf_config)
    return "linear_attention" in (dec.get("layer_types") or ()) or bool(dec.get("full_attention_interval"))


def _trace_stage(req: TraceRequest, report: Progress, t0: float) -> TraceResult:
    """One pipeline stage (or one rank's micro-batches) under its schedule (``trainfit.trace.pipeline``)."""
    from trainfit.trace.build import count_params
    from trainfit.trace.pipeline import build_stage, trace_stage

    peaks, bds, order = trace_stage(req, report)
    phases = tuple(PhaseTrace(n, peaks[n], bds[n]) for n in PHASES)
    peak = max(phases, key=lambda p: p.peak_bytes)
    total, trainable = count_params(build_stage(req))
    sched = " ".join(f"{k}{i}" for k, i in order)
    notes = (f"pipeline stage {req.pipeline_stage} of {req.pipeline_parallel}, {req.micro_batches} micro-batches in"
             f" Megatron-Core's 1F1B order ({sched}); the stage keeps its received input and its output until their"
             " backward (torch.distributed.pipelining); each phase's peak is the largest of its occurrences",
             "the model output is dropped before backward, as the HF Trainer and TRL do (`loss = model(...).loss`)")
    return TraceResult(peak_bytes=peak.peak_bytes, peak_phase=peak.name, phases=phases, params_total=total,
                       params_trainable=trainable, seconds=time.perf_counter() - t0,
                       layers_traced=(_stage_depth(req),), extrapolated=False, notes=notes)


def _stage_depth(req: TraceRequest) -> int:
    from trainfit.trace.pipeline import stage_depth

    return stage_depth(req)


_EMULATION = {
    "ring": "method: an emulation of torch's ring attention (torch.distributed.tensor.experimental._context_parallel:"
            " its _templated_ring_attention forward and backward, driven by the trace's own dispatch because"
            " context_parallel() has no CPU SDPA handler)",
    "ulysses": "method: an emulation of verl's Ulysses all-to-all (verl/utils/ulysses.py SeqAllToAll around the"
               " attention; SDPA in place of flash attention)",
    "ep": "method: an emulation of a balanced, dropless expert-parallel all-to-all token dispatch and combine"
          " (torchtitan / Megatron-Core dispatcher pattern) around transformers' grouped experts; real routing is"
          " not balanced, so a hot expert's rank holds more",
}


def _trace_cp_ep(req: TraceRequest, progress: Progress | None, *, context_parallel: int, kind: str,
                 expert_parallel: int) -> TraceResult:
    """Context or expert parallel: rank 0 through its tracer, the emulation named first in the notes."""
    import dataclasses

    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        raise TraceUnsupported(f"trace needs the 'trace' extra (torch, transformers, peft): {exc}") from exc
    if context_parallel > 1 and expert_parallel > 1:
        raise TraceUnsupported("trace: context and expert parallel are traced one at a time")
    if context_parallel > 1:
        from trainfit.trace.context_parallel import trace_context_parallel

        result = trace_context_parallel(req, context_parallel=context_parallel, kind=kind, progress=progress)
        method = _EMULATION.get(kind, "")
    else:
        from trainfit.trace.expert_parallel import trace_expert_parallel

        result = trace_expert_parallel(req, expert_parallel=expert_parallel, progress=progress)
        method = _EMULATION["ep"]
    return dataclasses.replace(result, notes=(method, *result.notes))
