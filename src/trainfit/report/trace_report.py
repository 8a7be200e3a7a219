"""Trace results beside the plan: text and JSON. No arithmetic beyond differences for display."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from trainfit.plan import Plan
from trainfit.report.fmt import gib, gib_num


def _planned(plan: Plan) -> dict[str, float]:
    return {p.phase.value: p.tensor_bytes for p in plan.phases}


def trace_to_dict(result: Any, plan: Plan) -> dict[str, Any]:
    planned = _planned(plan)
    phases = []
    for ph in result.phases:
        est = planned.get(ph.name, 0.0)
        phases.append({
            "name": ph.name,
            "traced_bytes": ph.peak_bytes,
            "planned_allocated_bytes": int(round(est)),
            "error": (est - ph.peak_bytes) / ph.peak_bytes if ph.peak_bytes else None,
            "breakdown": dict(ph.breakdown),
        })
    peak_plan = max(planned[p.name] for p in result.phases)
    traced = {p.name for p in result.phases}
    return {
        "model": plan.spec.name,
        "traced_peak_bytes": result.peak_bytes,
        "traced_peak_phase": result.peak_phase,
        "planned_peak_allocated_bytes": int(round(peak_plan)),
        "planned_peak_phase": max((p.name for p in result.phases), key=lambda n: planned[n]),
        "peak_error": (peak_plan - result.peak_bytes) / result.peak_bytes,
        "params_total": result.params_total,
        "params_trainable": result.params_trainable,
        "seconds": result.seconds,
        "layers_traced": list(result.layers_traced),
        "extrapolated": result.extrapolated,
        "phases": phases,
        "replayed_reserved_bytes": getattr(result, "reserved_bytes", None),
        "planned_reserved_bytes": int(round(max(p.reserved for p in plan.phases if p.phase.value in traced))),
        "notes": list(result.notes),
    }


def render_trace(result: Any, plan: Plan, console: Console) -> None:
    d = trace_to_dict(result, plan)
    console.print(
        f"[bold]{d['model']}[/bold]: traced on fake CPU tensors in {d['seconds']:.1f} s"
        f" (layers traced {d['layers_traced']}{', extrapolated to full depth' if d['extrapolated'] else ''})"
    )
    keys = sorted({k for p in d["phases"] for k in p["breakdown"]})
    t = Table(title="Traced peak per phase vs trainfit's allocated estimate (GiB = 2^30 B)")
    for c in ["phase", "traced", "trainfit", "error", *keys]:
        t.add_column(c, justify="right" if c != "phase" else "left")
    for p in d["phases"]:
        err = f"{p['error']:+.2%}" if p["error"] is not None else "-"
        t.add_row(p["name"], gib_num(p["traced_bytes"]), gib_num(p["planned_allocated_bytes"]), err,
                  *[gib_num(p["breakdown"].get(k, 0)) for k in keys])
    console.print(t)
    console.print(
        f"peak: traced {gib(d['traced_peak_bytes'])} in {d['traced_peak_phase']};"
        f" trainfit {gib(d['planned_peak_allocated_bytes'])} in {d['planned_peak_phase']} ({d['peak_error']:+.2%})"
    )
    if d.get("replayed_reserved_bytes") is not None:
        console.print(
            f"reserved (allocation order replayed through the CUDA caching allocator): "
            f"{gib(d['replayed_reserved_bytes'])}; trainfit's reserved estimate {gib(d['planned_reserved_bytes'])}"
        )
    console.print("The trace measures live tensor bytes; the cuBLAS workspaces, allocator rounding, the CUDA context and NCCL buffers are not in it (trainfit's figure here excludes them too).")
    for n in d["notes"]:
        console.print(f"  - {n}", markup=False)
