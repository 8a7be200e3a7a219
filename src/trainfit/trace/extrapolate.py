"""Reach full depth from two shallow traces (imports torch only in :func:`param_counts`).

Decoder layers repeat with period p (1 for dense models; the length of the repeating
``layer_types`` pattern for hybrids such as Qwen3.5's 3 linear + 1 full attention, or Gemma-2's
sliding/global pair). Every byte live at a phase's peak is either per-model (embedding, lm_head,
logits, the loss) or per-period (weights, grads, optimizer states, saved activations of each
period), so each phase peak is ``a + b * L / p``. The steps at k and k+p layers give ``a`` and ``b``
(both from one trace at k+p where ``trainfit.trace.step.one_trace_supported``, see ``run_depth_pair``).

When this is exact: the peak of each phase is reached at the same structural point of the step at
depth k, k+p and L (e.g. the start of backward, the optimizer's last parameter). It is not exact
when the argmax moves with depth: then the line through the two traces is a lower bound (a
maximum of lines is convex). The traced depths are chosen so that the first and the last period
stay distinct (k >= 2 periods for dense models), and ``tests/trace`` checks byte equality
against full traces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from trainfit.catalog.hf_config import decoder_config
from trainfit.trace.types import PHASES, PhaseTrace, TraceRequest, TraceUnsupported


@dataclass(frozen=True)
class DepthPlan:
    target: int  # depth of the result
    depths: tuple[int, ...]  # depths to trace
    period: int
    extrapolated: bool
    notes: tuple[str, ...] = ()
    window: int = 1  # layers at each end followed on their own line (w periods)


def full_depth(hf_config: dict[str, Any]) -> int:
    from trainfit.trace.hf_build import layer_count_key

    dec = decoder_config(hf_config)
    return int(dec[layer_count_key(dec)])


def layer_period(hf_config: dict[str, Any]) -> int:
    """Smallest p such that ``layer_types`` repeats with period p (1 when absent or uniform)."""
    from trainfit.trace.hf_build import build_hf_config

    dec = decoder_config(hf_config)
    n = full_depth(hf_config)
    types = list(getattr(build_hf_config(hf_config), "layer_types", None) or dec.get("layer_types") or [])
    if not types and dec.get("full_attention_interval"):
        return int(dec["full_attention_interval"])
    types = types[:n]
    # SmolLM3: the NoPE layers (no_rope_layers 0) differ from the rotary ones in their ops, so they join the pattern
    nope = list(getattr(build_hf_config(hf_config), "no_rope_layers", None) or dec.get("no_rope_layers") or [])[:n]
    if nope:
        types = [(types[i] if i < len(types) else "", nope[i]) for i in range(len(nope))]
    for p in range(1, len(types) + 1):
        if all(types[i] == types[i % p] for i in range(len(types))):
            return p
    return 1


def plan_depths(hf_config: dict[str, Any], layers: int | None, *, world_size: int = 1) -> DepthPlan:
    """Which depths to trace for a request (``layers`` given: exactly that depth, no extrapolation).

    The boundary window covers the layers at each end that differ from the middle ones: 1 on one
    rank; 2 with FSDP2, whose backward prefetches the next layer's all-gather, so layer 1 (not
    layer 0) is where the backward peaks. It is rounded up to w whole periods (w = 2 for dense
    models under FSDP, w = 1 for a hybrid's 4-layer period either way); tracing 2w and 2w+1 periods
    keeps both windows apart at both depths.
    """
    full = full_depth(hf_config)
    p = layer_period(hf_config)
    if layers is not None:
        if layers > full:  # a deeper model than the card's, built layer by layer: minutes for a typo
            raise TraceUnsupported(f"trace: --layers {layers} is more than the model's {full} decoder layers;"
                                   f" allowed: 1 to {full} (left out: the full depth)")
        return DepthPlan(layers, (layers,), p, False)
    edge = 2 if world_size > 1 else 1  # layers at each end that differ from the middle ones
    w = -(-edge // p)  # whole periods covering them (one for a hybrid's 4-layer period under FSDP too)
    k = 2 * w * p
    if full <= k + p or (full - k) % p:
        note = () if full <= k + p else (f"{full} layers is not a whole number of {p}-layer periods: traced in full",)
        return DepthPlan(full, (full,), p, False, note)
    return DepthPlan(
        full,
        (k, k + p),
        p,
        True,
        (f"extrapolated from {k} and {k + p} layers ({p}-layer period) to {full}, per region of each phase",),
        window=w * p,
    )


def _line(v0: int, v1: int, steps: int) -> int:
    return v0 + steps * (v1 - v0)


def combine(runs: Sequence[Any], plan: DepthPlan, phases: Sequence[str] = PHASES) -> list[PhaseTrace]:
    """Per-phase results at ``plan.target`` from one run (exact) or two runs (extrapolation).

    Extrapolation follows each region of a phase on its own line (before the layers, the first
    period's layers, the last period's, after the layers, the phase's entry, the optimizer) and
    takes the largest at the target depth: within a phase the live bytes at layer j grow linearly
    in j (activations pile up forward; gradients pile up and activations drain backward), so the
    middle layers never beat both ends, and the argmax may move from one region to another with
    depth (with checkpointing, from the logits at the start of backward to layer 0's end).
    """
    if not plan.extrapolated:
        (r,) = runs
        return [PhaseTrace(n, r.peaks[n], dict(r.breakdowns[n])) for n in phases]
    r0, r1 = runs
    steps = (plan.target - plan.depths[0]) // plan.period
    out = []
    for n in phases:
        best: tuple[int, dict[str, int]] | None = None
        for key in r0.regions[n].keys() & r1.regions[n].keys():
            (b0, d0), (b1, d1) = r0.regions[n][key], r1.regions[n][key]
            val = _line(b0, b1, steps)
            if best is None or val > best[0]:
                best = (val, {c: _line(d0[c], d1[c], steps) for c in d0})
        assert best is not None
        out.append(PhaseTrace(n, best[0], best[1]))
    return out


def param_counts(req: TraceRequest, plan: DepthPlan, runs: Sequence[Any] = ()) -> tuple[int, int]:
    """Exact (total, trainable) at ``plan.target``: from the traced runs' own counts (``DepthRun.params``),
    on the line through the two depths when extrapolated (every period holds the same parameters;
    the embedding, head and any tied weight are the intercept); else from a meta-device build at the
    target (a 64-layer LoRA model takes ~1 s to build, so the runs' counts are preferred)."""
    counts = [getattr(r, "params", None) for r in runs]
    if counts and all(c is not None for c in counts) and tuple(r.depth for r in runs) == plan.depths:
        if not plan.extrapolated:
            return counts[0]
        steps = (plan.target - plan.depths[0]) // plan.period
        (t0, n0), (t1, n1) = counts
        return _line(t0, t1, steps), _line(n0, n1, steps)
    from trainfit.trace.build import build_meta, count_params

    return count_params(build_meta(req, plan.target))
