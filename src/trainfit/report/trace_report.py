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


# -- trace --time: the op inventory -----------------------------------------------------------


def _totals_dict(t: Any) -> dict[str, int]:
    from dataclasses import asdict

    return asdict(t)


def _layers_label(js: tuple[int, ...]) -> str:
    """(0,) -> 'layer 0'; (1, 2, 3) -> 'layers 1-3'; (0, 2, 4) -> 'layers 0,2,4' (x3)."""
    if len(js) == 1:
        return f"layer {js[0]}"
    if js == tuple(range(js[0], js[-1] + 1)):
        return f"layers {js[0]}-{js[-1]} (x{len(js)})"
    shown = ",".join(map(str, js[:6])) + (",..." if len(js) > 6 else "")
    return f"layers {shown} (x{len(js)})"


def ops_to_dict(inv: Any, model: str) -> dict[str, Any]:
    """The op inventory as one JSON object: per-phase totals, per-place rows, per-op-name rows, GEMM
    shapes, and the records with the layer index summed out (``calls`` over all layers)."""
    from dataclasses import asdict, replace

    from trainfit.trace.inventory import gemm_shapes, merge

    flat = merge(replace(r, layer=None) for r in inv.records)
    return {
        "model": model,
        "layers": inv.layers,
        "tokens": inv.tokens,
        "layers_traced": list(inv.layers_traced),
        "extrapolated": inv.extrapolated,
        "seconds": inv.seconds,
        "phases": [{"name": p.phase, **_totals_dict(p.totals), "recompute": _totals_dict(p.recompute)}
                   for p in inv.phases],
        "places": [{"phase": p.phase, "place": p.place, "layer": p.layer, **_totals_dict(p.totals)}
                   for p in inv.places],
        "by_op": [{"phase": o.phase, "op": o.op, "category": o.category, **_totals_dict(o.totals)} for o in inv.by_op],
        "gemm_shapes": [asdict(g) for g in gemm_shapes(inv.records)],
        "records": [{k: v for k, v in asdict(r).items() if k != "layer"} for r in flat],
        "notes": list(inv.notes),
    }


def render_ops(inv: Any, model: str, console: Console, timed: dict[str, Any] | None = None) -> None:
    """``trainfit trace --time``: per-phase totals, per-place totals and the largest GEMM shapes."""
    from trainfit.trace.inventory import gemm_shapes, layer_groups
    from trainfit.units import GB

    def g(x: float) -> str:
        return f"{x / 1e9:,.2f}" if x else "-"

    console.print(
        f"[bold]{model}[/bold]: op inventory of one train step ({inv.tokens:,} tokens, {inv.layers} layers),"
        f" traced on fake CPU tensors in {inv.seconds:.1f} s (layers traced {list(inv.layers_traced)}"
        f"{', extrapolated to full depth' if inv.extrapolated else ''})"
    )
    t = Table(title="Per phase (GFLOP = 1e9 FLOPs, GB = 1e9 B)")
    for c in ("phase", "ops", "kernels", "launches", "GEMMs", "GEMM GFLOP", "attn GFLOP", "attn causal",
              "memory-bound GB", "GEMM GB", "recompute kernels"):
        t.add_column(c, justify="left" if c == "phase" else "right")
    for p in inv.phases:
        s = p.totals
        t.add_row(p.phase, f"{s.ops:,}", f"{s.kernels:,}", f"{s.launches:,}", f"{s.gemms:,}", g(s.gemm_flops),
                  g(s.attention_flops), g(s.attention_flops_causal), f"{s.memory_bytes / GB:,.3f}",
                  f"{s.gemm_bytes / GB:,.3f}", f"{p.recompute.kernels:,}" if p.recompute.kernels else "-")
    console.print(t)
    t = Table(title="Per place, each layer of a group: kernels | GEMM GFLOP | attention GFLOP | memory-bound GB")
    t.add_column("place")
    for p in inv.phases:
        t.add_column(p.phase, justify="right")
    rows: dict[str, dict[str, str]] = {}
    for ph in inv.phases:
        for row in inv.places:
            if row.phase == ph.phase and row.place != "layer":
                rows.setdefault(row.place, {})[ph.phase] = _cell(row.totals, g)
        for js, tot in layer_groups(inv, ph.phase):
            rows.setdefault(_layers_label(js), {})[ph.phase] = _cell(tot, g)
    order = ["embedding", *[k for k in rows if k.startswith("layer")], "head", "optimizer"]
    for k in order:
        if k in rows:
            t.add_row(k, *[rows[k].get(p.phase, "-") for p in inv.phases])
    console.print(t)
    t = Table(title="Largest GEMM shapes (batch x m x n x k)")
    for c in ("shape", "dtype", "GFLOP/call", "forward", "backward", "recompute"):
        t.add_column(c, justify="left" if c in ("shape", "dtype") else "right")
    for s in gemm_shapes(inv.records)[:8]:
        t.add_row(" x ".join(map(str, s.shape)), s.dtype, f"{s.flops / 1e9:,.3f}", str(s.forward or "-"),
                  str(s.backward or "-"), str(s.recompute or "-"))
    console.print(t)
    if timed:
        t = Table(title=f"Seconds on one {timed['gpu']}: the traced ops through the planner's kernel models, and the plan")
        for c in ("phase", "traced ops s", "bound", "GEMM s", "attention s", "memory-bound s", "host s", "plan s"):
            t.add_column(c, justify="left" if c in ("phase", "bound") else "right")
        for p in timed["phases"]:
            plan_s = p["plan_seconds"]
            t.add_row(p["name"], f"{p['seconds']:.4g}", p["bound"], f"{p['gemm_s']:.4g}", f"{p['attention_s']:.4g}",
                      f"{p['memory_s']:.4g}", f"{p['host_s']:.4g}", "-" if plan_s is None else f"{plan_s:.4g}")
        console.print(t)
    for n in inv.notes:
        console.print(f"  - {n}", markup=False)


def _cell(t: Any, g: Any) -> str:
    from trainfit.units import GB

    return f"{t.kernels:,} | {g(t.gemm_flops)} | {g(t.attention_flops)} | {t.memory_bytes / GB:,.3f}"
