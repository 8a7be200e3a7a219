"""Self-contained HTML reports: inline SVG charts drawn here, inline CSS, no script, no network.

``write_plan_html(plan, path)``: per GPU group a stacked bar chart (phases on x, components
stacked, the card's capacity line, headroom or overflow labelled), a table of the same numbers,
the rollout KV capacity against demand (PPO/GRPO), the assumptions and the card.

``write_fit_html(result, path)``: the ranked table of ``trainfit fit`` and a step-time against
cost chart with the Pareto front marked.

The same pieces serve the local web page (``trainfit serve``): ``plan_svg``/``plan_fragment``
and ``fit_svg``/``fit_fragment`` return the SVG and the HTML fragment the page shows. No
arithmetic beyond presentation: every number comes from the plan or the search result.
"""

from __future__ import annotations

import json
import math
import zlib
from html import escape
from pathlib import Path
from typing import Any

from trainfit import __version__
from trainfit.report.fmt import COMPONENT_ORDER
from trainfit.units import GIB

ALLOCATOR_OVERHEAD = "allocator overhead"
"""reserved - allocated: block rounding, fragmentation, the cuBLAS workspace."""
CONTEXT = "CUDA context + NCCL"
"""Device memory outside torch's allocator that every process holds."""

PALETTE = {
    "weights": "#4e79a7",
    "adapter_weights": "#a0cbe8",
    "master_weights": "#2f5d8a",
    "optimizer_states": "#f28e2b",
    "paged_optimizer_states": "#ffbe7d",
    "gradients": "#e15759",
    "activations": "#59a14f",
    "activation_gradients": "#8cd17d",
    "logits": "#b6992d",
    "optimizer_temporaries": "#f1ce63",
    "fsdp_buffers": "#499894",
    "ddp_buckets": "#86bcb6",
    "reference_weights": "#79706e",
    "reward_model_weights": "#bab0ac",
    "critic_state": "#d37295",
    "actor_state": "#fabfd2",
    "logprob_pass": "#b07aa1",
    "reward_pass": "#d4a6c8",
    "value_pass": "#9d7660",
    "generation": "#d7b5a6",
    "rollout_engine": "#8e6bb8",
    "weight_sync_buffer": "#ff9d9a",
    ALLOCATOR_OVERHEAD: "#c9c9c9",
    CONTEXT: "#8f8f8f",
}
_EXTRA = ("#17becf", "#bcbd22", "#7f7f7f", "#9467bd", "#8c564b", "#e377c2")
FONT = "DejaVu Sans, Liberation Sans, Arial, Helvetica, sans-serif"
OK, BAD, CAP = "#1a7f37", "#c62828", "#c62828"


def color(name: str) -> str:
    return PALETTE.get(name) or _EXTRA[zlib.crc32(name.encode()) % len(_EXTRA)]


def _gib(x: float, digits: int = 1) -> str:
    return f"{x / GIB:.{digits}f}"


def _e(x: Any) -> str:
    return escape(str(x), quote=True)


# ---------------------------------------------------------------------------------------------
# The chart model: per group, per phase, the stacked segments (they add up to the device figure)
# ---------------------------------------------------------------------------------------------


def phase_segments(p: Any) -> list[tuple[str, float]]:
    """(label, bytes) stacked bottom-up for one ``PhaseResult``; they add up to ``p.device``.

    Paged optimizer states count only as far as they stay resident on the card; the allocator's
    overhead (reserved - allocated) and the CUDA context and NCCL buffers sit on top.
    """
    from trainfit.plan.overheads import PAGEABLE

    names = [c for c in COMPONENT_ORDER if c in p.components]
    names += sorted(set(p.components) - set(names))
    out: list[tuple[str, float]] = []
    for n in names:
        v = p.paged_resident if n in PAGEABLE else p.components[n]
        if v > 0:
            out.append((n, float(v)))
    over = p.reserved - p.allocated
    if over > 0:
        out.append((ALLOCATOR_OVERHEAD, float(over)))
    ctx = p.overhead.cuda_context + p.overhead.nccl_buffers
    if ctx > 0:
        out.append((CONTEXT, float(ctx)))
    return out


def chart_model(plan: Any) -> dict[str, Any]:
    """What the charts and tables draw, as plain JSON-serialisable data (bytes as integers)."""
    from trainfit.plan.overheads import PAGEABLE

    cap = plan.capacity_bytes
    groups = []
    for g in plan.groups or ():
        phases = []
        for p in g.phases:
            spill = sum(max(0.0, p.components.get(k, 0.0) - p.paged_resident) for k in PAGEABLE)
            phases.append({
                "name": p.phase.value,
                "at": p.at,
                "segments": [[n, int(round(v))] for n, v in phase_segments(p)],
                "allocated": int(round(p.allocated)),
                "reserved": int(round(p.reserved)),
                "device": int(round(p.device)),
                "paged_to_host": int(round(spill)),
            })
        peak = max(phases, key=lambda ph: ph["device"])
        groups.append({
            "name": g.name,
            "gpus": g.gpus,
            "phases": phases,
            "peak_phase": peak["name"],
            "peak_device": peak["device"],
            "headroom": cap - peak["device"],
        })
    ro = plan.rollout
    return {
        "title": f"{plan.spec.name} {plan.card.method.value.upper()} / {plan.card.scope.value}"
                 f" on {plan.card.world_size} x {plan.gpu.name}",
        "gpu": plan.gpu.name,
        "world_size": plan.card.world_size,
        "capacity_bytes": cap,
        "fits": plan.fits,
        "worst_group": plan.worst_group,
        "groups": groups,
        "rollout": None if ro is None else {
            "kv_capacity_tokens": int(ro.kv_capacity_tokens),
            "demand_tokens": int(ro.demand_tokens),
            "preempts": bool(ro.preempts),
            "engine_fits": bool(ro.engine_fits),
            "reason": ro.reason,
        },
    }


# ---------------------------------------------------------------------------------------------
# Axes
# ---------------------------------------------------------------------------------------------


def nice_step(span: float, target: int = 6) -> float:
    """A 1/2/5 x 10^k step that cuts ``span`` into about ``target`` intervals."""
    if not span > 0 or not math.isfinite(span):
        return 1.0
    raw = span / target
    k = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * k:
            return m * k
    return 10 * k


def _fmt_tick(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1000 or abs(v) < 0.01:
        return f"{v:.3g}"
    return f"{v:g}" if v == round(v, 2) else f"{v:.2f}"


# ---------------------------------------------------------------------------------------------
# Plan: stacked bars per GPU group
# ---------------------------------------------------------------------------------------------

_BAR, _GAP, _LEFT, _TOP, _PLOT_H, _XLAB = 44, 22, 62, 56, 300, 112


def plan_svg(model: dict[str, Any]) -> str:
    """One SVG: a panel per GPU group (shared y scale in GiB), the capacity line, the legend."""
    cap = model["capacity_bytes"]
    groups = model["groups"]
    top = max([cap] + [ph["device"] for g in groups for ph in g["phases"]])
    ymax_gib = top / GIB * 1.12 or 1.0
    step = nice_step(ymax_gib)
    ymax_gib = math.ceil(ymax_gib / step) * step

    def y(b: float) -> float:
        return _TOP + _PLOT_H * (1 - (b / GIB) / ymax_gib)

    parts: list[str] = []
    x0 = 0.0
    panel_ws = []
    for gi, g in enumerate(groups):
        n = len(g["phases"])
        xe = _LEFT + n * (_BAR + _GAP) + _GAP  # right end of the plot area
        w = max(xe + 150, 480)
        panel_ws.append(w)
        parts.append(f'<g transform="translate({x0:.0f},0)" class="group" data-group="{_e(g["name"])}">')
        label = "every GPU" if g["name"] == "all" else f'{g["name"]} group'
        over = g["headroom"] < 0
        parts.append(
            f'<text x="{_LEFT}" y="18" font-size="14" font-weight="bold">{_e(label)}: {g["gpus"]} x {_e(model["gpu"])}</text>'
            f'<text x="{_LEFT}" y="36" font-size="12" fill="{BAD if over else OK}">peak {_gib(g["peak_device"])} GiB'
            f' in {_e(g["peak_phase"])}: {"over by " + _gib(-g["headroom"]) if over else "headroom " + _gib(g["headroom"])}'
            f' GiB of {_gib(cap)} GiB</text>'
        )
        # grid and y axis
        t = 0.0
        while t <= ymax_gib + 1e-9:
            yy = _TOP + _PLOT_H * (1 - t / ymax_gib)
            parts.append(
                f'<line x1="{_LEFT}" x2="{xe}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#e6e6e6"/>'
                f'<text x="{_LEFT - 6}" y="{yy + 4:.1f}" font-size="11" text-anchor="end" fill="#555">{_fmt_tick(t)}</text>'
            )
            t += step
        parts.append(
            f'<line x1="{_LEFT}" x2="{_LEFT}" y1="{_TOP}" y2="{_TOP + _PLOT_H}" stroke="#444"/>'
            f'<text transform="translate(16,{_TOP + _PLOT_H / 2:.0f}) rotate(-90)" font-size="12" text-anchor="middle"'
            f' fill="#333">GiB per GPU (device, as nvidia-smi)</text>'
        )
        for i, ph in enumerate(g["phases"]):
            bx = _LEFT + _GAP + i * (_BAR + _GAP)
            base = 0.0
            is_peak = ph["name"] == g["peak_phase"]
            bold = ' font-weight="bold"' if is_peak else ""
            parts.append(f'<g class="bar" data-phase="{_e(ph["name"])}" data-device="{ph["device"]}">')
            for name, b in ph["segments"]:
                y1, y2 = y(base + b), y(base)
                parts.append(
                    f'<rect x="{bx}" y="{y1:.2f}" width="{_BAR}" height="{max(0.0, y2 - y1):.2f}" fill="{color(name)}"'
                    f' stroke="#fff" stroke-width="0.5"><title>{_e(ph["name"])} / {_e(name)}: {_gib(b, 2)} GiB</title></rect>'
                )
                base += b
            top_y = y(ph["device"])
            parts.append(
                f'<text x="{bx + _BAR / 2}" y="{top_y - 4:.1f}" font-size="10" text-anchor="middle"'
                f'{bold}>{_gib(ph["device"])}</text>'
            )
            lx, ly = bx + _BAR / 2, _TOP + _PLOT_H + 12
            parts.append(
                f'<text transform="translate({lx:.1f},{ly}) rotate(-40)" font-size="11" text-anchor="end"'
                f'{bold}>{_e(ph["name"])}{" *" if is_peak else ""}</text>'
            )
            parts.append("</g>")
            if is_peak:
                cx = bx + _BAR + 4
                cy, py = y(cap), top_y
                col = BAD if over else OK
                text = f'over by {_gib(-g["headroom"])} GiB' if over else f'headroom {_gib(g["headroom"])} GiB'
                parts.append(
                    f'<g class="headroom"><line x1="{cx}" x2="{cx}" y1="{cy:.1f}" y2="{py:.1f}" stroke="{col}" stroke-width="2"/>'
                    f'<line x1="{cx - 3}" x2="{cx + 3}" y1="{cy:.1f}" y2="{cy:.1f}" stroke="{col}" stroke-width="2"/>'
                    f'<line x1="{cx - 3}" x2="{cx + 3}" y1="{py:.1f}" y2="{py:.1f}" stroke="{col}" stroke-width="2"/>'
                    f'<text x="{cx + 5}" y="{(cy + py) / 2 + 4:.1f}" font-size="11" font-weight="bold" fill="{col}"'
                    f' paint-order="stroke" stroke="#fff" stroke-width="3">{text}</text></g>'
                )
        cy = y(cap)
        ty = cy + 14 if over else cy - 5  # clear of the headroom/overflow label beside the peak bar
        parts.append(
            f'<line class="capacity" x1="{_LEFT}" x2="{xe}" y1="{cy:.1f}" y2="{cy:.1f}" stroke="{CAP}" stroke-width="2"'
            f' stroke-dasharray="6 4"/><text x="{xe - 2}" y="{ty:.1f}" font-size="11" fill="{CAP}">capacity'
            f' {_gib(cap)} GiB</text>'
            f'<line x1="{_LEFT}" x2="{xe}" y1="{_TOP + _PLOT_H}" y2="{_TOP + _PLOT_H}" stroke="#444"/>'
        )
        parts.append("</g>")
        x0 += w
    # legend: every component drawn, in stacking order
    seen: list[str] = []
    for g in groups:
        for ph in g["phases"]:
            for name, _ in ph["segments"]:
                if name not in seen:
                    seen.append(name)
    order = {n: i for i, n in enumerate(COMPONENT_ORDER + (ALLOCATOR_OVERHEAD, CONTEXT))}
    seen.sort(key=lambda n: order.get(n, len(order)))
    width = max(x0, 560.0)
    per_row = max(1, int(width // 190))
    ly0 = _TOP + _PLOT_H + _XLAB
    legend = []
    for i, name in enumerate(seen):
        lx = _LEFT + (i % per_row) * 190
        ly = ly0 + (i // per_row) * 18
        legend.append(
            f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{color(name)}"/>'
            f'<text x="{lx + 17}" y="{ly}" font-size="11">{_e(name)}</text>'
        )
    height = ly0 + math.ceil(len(seen) / per_row) * 18 + 8
    verdict = "fits" if model["fits"] else "does-not-fit"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plan-chart" data-verdict="{verdict}" width="{width:.0f}"'
        f' height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" font-family="{FONT}" role="img"'
        f' aria-label="GPU memory per phase against the card capacity">'
        + "".join(parts) + "".join(legend) + "</svg>"
    )


def rollout_svg(ro: dict[str, Any]) -> str:
    """Two horizontal bars: the engine's KV-cache capacity against the step's demand (tokens)."""
    cap, dem = ro["kv_capacity_tokens"], ro["demand_tokens"]
    top = max(cap, dem, 1)
    w, left, bar_w = 720, 150, 400
    ok = not ro["preempts"]
    rows = [("KV capacity", cap, "#8e6bb8"), ("demand", dem, OK if ok else BAD)]
    parts = []
    for i, (label, v, col) in enumerate(rows):
        yy = 10 + i * 30
        bw = bar_w * v / top
        parts.append(
            f'<text x="{left - 8}" y="{yy + 15}" font-size="12" text-anchor="end">{label}</text>'
            f'<rect x="{left}" y="{yy}" width="{bw:.1f}" height="20" fill="{col}"/>'
            f'<text x="{left + bw + 6:.1f}" y="{yy + 15}" font-size="12">{v:,} tokens</text>'
        )
    verdict = "no preemption" if ok else "preempts (recomputes or waits)"
    parts.append(f'<text x="{left}" y="88" font-size="12" font-weight="bold" fill="{OK if ok else BAD}">{verdict}</text>')
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="rollout-chart" width="{w}" height="100" viewBox="0 0 {w} 100"'
        f' font-family="{FONT}" role="img" aria-label="rollout KV capacity against demand">' + "".join(parts) + "</svg>"
    )


def _phase_table(model: dict[str, Any], g: dict[str, Any]) -> str:
    phases = g["phases"]
    names: list[str] = []
    for ph in phases:
        for n, _ in ph["segments"]:
            if n not in names:
                names.append(n)
    order = {n: i for i, n in enumerate(COMPONENT_ORDER + (ALLOCATOR_OVERHEAD, CONTEXT))}
    names.sort(key=lambda n: order.get(n, len(order)))
    head = "".join(
        f'<th class="num{" peak" if ph["name"] == g["peak_phase"] else ""}">{_e(ph["name"])}'
        f'{" *" if ph["name"] == g["peak_phase"] else ""}</th>'
        for ph in phases
    )
    rows = []
    for n in names:
        vals = [dict(ph["segments"]).get(n, 0) for ph in phases]
        cells = "".join(f'<td class="num">{_gib(v, 2) if v else "-"}</td>' for v in vals)
        rows.append(f'<tr><td><span class="sw" style="background:{color(n)}"></span>{_e(n)}</td>{cells}</tr>')
    for label, key in (("allocated (torch)", "allocated"), ("reserved (torch)", "reserved"), ("device (nvidia-smi)", "device")):
        cells = "".join(f'<td class="num">{_gib(ph[key], 2)}</td>' for ph in phases)
        rows.append(f'<tr class="total"><td>{label}</td>{cells}</tr>')
    if any(ph["paged_to_host"] for ph in phases):
        cells = "".join(f'<td class="num">{_gib(ph["paged_to_host"], 2) if ph["paged_to_host"] else "-"}</td>' for ph in phases)
        rows.append(f"<tr><td>paged out to host RAM</td>{cells}</tr>")
    cap = model["capacity_bytes"]
    cells = "".join(
        f'<td class="num {"bad" if cap - ph["device"] < 0 else "good"}">{_gib(cap - ph["device"], 2)}</td>' for ph in phases
    )
    rows.append(f'<tr class="total"><td>headroom (capacity {_gib(cap, 2)})</td>{cells}</tr>')
    label = "every GPU" if g["name"] == "all" else f'{g["name"]} group'
    return (
        f'<table class="phases"><caption>{_e(label)}: GiB (2^30 B) per GPU, per phase; * = peak</caption>'
        f"<thead><tr><th>component</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def plan_fragment(data: dict[str, Any], model: dict[str, Any], svg: str | None = None) -> str:
    """The report body (no <html> shell): ``data`` is ``plan_to_dict(plan)``, ``model`` is ``chart_model(plan)``."""
    fits = data["fits"]
    head = data["headroom_bytes"]
    cap = data["gpu_capacity_bytes"]
    peak = data["peak_gpu_bytes"]["device"]
    verdict = "FITS" if fits else "DOES NOT FIT"
    facts = [
        ("peak per GPU (device)", f'{_gib(peak, 2)} GiB in {_e(data["peak_phase"])} ({_e(data["peak_at"])})'),
        ("capacity", f'{_gib(cap, 2)} GiB ({_e(data["gpu"]["name"])})'),
        ("headroom" if head >= 0 else "over by", f"{_gib(abs(head), 2)} GiB"),
        ("GPUs", f'{model.get("world_size", data["world_size"])}'
                 + (" (" + ", ".join(f'{_e(g["name"])} {g["gpus"]}' for g in model["groups"]) + ")" if len(model["groups"]) > 1 else "")
                 + f', strategy {_e(data["strategy"])}'),
        ("parameters", f'{data["model"]["params_total"] / 1e9:.2f} B total, {data["model"]["params_trainable"] / 1e9:.3f} B trainable'),
        ("host RAM (per node)", f'{_gib(data["host_ram_bytes"], 1)} GiB'),
    ]
    ro = data.get("rollout")
    if not fits and head >= 0 and ro and not ro["engine_fits"]:
        facts.insert(0, ("why it does not fit", "the rollout engine cannot start: " + _e(ro["reason"])))
    if data.get("step_seconds"):
        facts.append(("step time (estimate)", f'{data["step_seconds"]:.2f} s'))
    if data.get("cost"):
        c = data["cost"]
        billed = f'; {_e(c["billing_note"])}' if c.get("billing_note") else ""
        facts.append(("cost", f'{c["per_hour"]:.2f} {_e(c["currency"])}/h{billed} ({_e(c["excludes"])})'))
    out = [
        f'<div class="verdict {"good" if fits else "bad"}" id="verdict-box"><span class="badge">{verdict}</span>'
        f' <span class="title">{_e(model["title"])}</span></div>',
        '<dl class="facts">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>",
    ]
    if data.get("warnings"):
        out.append('<div class="warnings"><b>Warnings</b><ul>' + "".join(f"<li>{_e(w)}</li>" for w in data["warnings"]) + "</ul></div>")
    out.append('<h2>Memory per phase</h2><div class="chart">' + (svg or plan_svg(model)) + "</div>")
    out.append(
        '<p class="note">Bars: the worst GPU of each group, stacked by component, as nvidia-smi would show it'
        " (torch's allocated bytes, its reserve, then the CUDA context and NCCL buffers). Dashed line: the card's"
        " memory. Hover a segment for its size.</p>"
    )
    out.append("<h2>The numbers</h2>" + "".join(_phase_table(model, g) for g in model["groups"]))
    ro = data.get("rollout")
    if ro:
        out.append("<h2>Rollout: KV cache capacity against demand</h2>" + rollout_svg(model["rollout"] or {
            "kv_capacity_tokens": ro["kv_capacity_tokens"], "demand_tokens": ro["demand_tokens"], "preempts": ro["preempts"]}))
        rows = [
            ("engine", ro["engine"]),
            ("KV bytes per token", f'{ro["kv_bytes_per_token"]:,}'),
            ("KV capacity (tokens, per engine)", f'{ro["kv_capacity_tokens"]:,}'),
            ("demand (tokens, per engine)", f'{ro["demand_tokens"]:,}'),
            ("concurrency needed / possible", f'{ro["needed_concurrency"]:,} / {ro["max_concurrency"]:,}'),
            ("engine starts", "yes" if ro["engine_fits"] else "no"),
            ("engine device memory", f'{_gib(ro["engine_device_bytes"], 2)} GiB'),
            ("preempts", "yes" if ro["preempts"] else "no"),
        ]
        out.append('<table class="kv">' + "".join(f"<tr><td>{k}</td><td>{_e(v)}</td></tr>" for k, v in rows) + "</table>")
        if ro.get("reason"):
            out.append(f'<p class="note">{_e(ro["reason"])}</p>')
    out.append("<h2>Assumptions</h2><ul class=\"assumptions\">" + "".join(f"<li>{_e(a)}</li>" for a in data["assumptions"]) + "</ul>")
    out.append(
        "<details><summary>The card</summary><pre>" + _e(json.dumps(data["card"], indent=2, default=str)) + "</pre></details>"
    )
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Fit: ranked table and step time against cost
# ---------------------------------------------------------------------------------------------


def fit_rows(result: Any) -> list[dict[str, Any]]:
    """The rows of ``trainfit fit --json`` (a subset of its keys, the same values): ``step_unavailable`` says why a
    row has no step time (its rollout engine cannot start), ``cost_per_step`` is null then."""
    return [
        {
            "gpu": r.gpu, "gpus": r.gpus, "fits": r.fits, "peak_gpu_bytes": round(r.peak_device_bytes),
            "headroom_bytes": round(r.peak_device_bytes + r.headroom_bytes) - round(r.peak_device_bytes), "peak_phase": r.peak_phase,
            "step_seconds": r.step_seconds, "step_unavailable": r.step_unavailable, "cost_per_hour": r.cost_per_hour,
            "currency": r.currency, "billed_gpus": r.billed_gpus, "billing_note": r.billing_note,
            "cost_per_step": r.cost_per_step, "pareto": r.pareto, "knobs": {k: v for k, v in r.knobs.items() if k not in ("hardware.gpu", "gpus")},
            "stack": r.stack.value if r.stack is not None else None,
        }
        for r in result.rows
    ]


def _cost_axis(rows: list[dict[str, Any]]) -> tuple[str, Any]:
    """The y quantity: cost per step when every plotted row has a price in one currency, else GPU-seconds."""
    currencies = {r["currency"] for r in rows}
    if rows and all(r["cost_per_hour"] is not None for r in rows) and len(currencies) == 1:
        cur = currencies.pop()
        return f"cost per step ({cur})", lambda r: r["cost_per_hour"] * r["step_seconds"] / 3600
    return "GPU-seconds per step (no common price)", lambda r: r["gpus"] * r["step_seconds"]


def fit_svg(rows: list[dict[str, Any]]) -> str:
    """Scatter of fitting rows: step seconds (x) against cost per step (y); the Pareto front joined."""
    pts = [r for r in rows if r["fits"] and r["step_seconds"]]
    w, h, left, top, pw, ph = 720, 440, 80, 20, 600, 320
    if not pts:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="fit-chart" width="{w}" height="60" font-family="{FONT}">'
            '<text x="10" y="30" font-size="13">No configuration fits: nothing to place on the time/cost chart.</text></svg>'
        )
    ylabel, yf = _cost_axis(pts)
    xs = [r["step_seconds"] for r in pts]
    ys = [yf(r) for r in pts]

    def axis(vals: list[float]) -> tuple[bool, float, float, float]:
        lo, hi = min(vals), max(vals)
        if lo > 0 and hi / lo > 20:
            return True, 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi)), 10.0
        step = nice_step(hi * 1.1 or 1.0)
        return False, 0.0, (math.ceil(hi * 1.1 / step) * step) or 1.0, step

    xlog, x0, x1, xstep = axis(xs)
    ylog, y0, y1, ystep = axis(ys)

    def sx(v: float) -> float:
        f = (math.log10(v) - math.log10(x0)) / (math.log10(x1) - math.log10(x0)) if xlog else (v - x0) / (x1 - x0)
        return left + pw * f

    def sy(v: float) -> float:
        f = (math.log10(v) - math.log10(y0)) / (math.log10(y1) - math.log10(y0)) if ylog else (v - y0) / (y1 - y0)
        return top + ph * (1 - f)

    def ticks(log: bool, a: float, b: float, step: float) -> list[float]:
        if log:
            return [10 ** k for k in range(round(math.log10(a)), round(math.log10(b)) + 1)]
        return [a + i * step for i in range(int(round((b - a) / step)) + 1)]

    parts = []
    for t in ticks(xlog, x0, x1, xstep):
        X = sx(t)
        parts.append(f'<line x1="{X:.1f}" x2="{X:.1f}" y1="{top}" y2="{top + ph}" stroke="#eee"/>'
                     f'<text x="{X:.1f}" y="{top + ph + 16}" font-size="11" text-anchor="middle" fill="#555">{_fmt_tick(t)}</text>')
    for t in ticks(ylog, y0, y1, ystep):
        Y = sy(t)
        parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{Y:.1f}" y2="{Y:.1f}" stroke="#eee"/>'
                     f'<text x="{left - 6}" y="{Y + 4:.1f}" font-size="11" text-anchor="end" fill="#555">{_fmt_tick(t)}</text>')
    parts.append(
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>'
        f'<text x="{left + pw / 2}" y="{top + ph + 36}" font-size="12" text-anchor="middle">step time, seconds'
        f'{" (log)" if xlog else ""}</text>'
        f'<text transform="translate(18,{top + ph / 2}) rotate(-90)" font-size="12" text-anchor="middle">{_e(ylabel)}'
        f'{" (log)" if ylog else ""}</text>'
    )
    front = sorted((r for r in pts if r["pareto"]), key=lambda r: r["step_seconds"])
    if len(front) > 1:
        d = " ".join(f"{sx(r['step_seconds']):.1f},{sy(yf(r)):.1f}" for r in front)
        parts.append(f'<polyline class="pareto-front" points="{d}" fill="none" stroke="#e8590c" stroke-width="2" stroke-dasharray="5 3"/>')
    labels: dict[tuple[int, int], list[str]] = {}
    for r in sorted(pts, key=lambda r: r["pareto"]):
        X, Y = sx(r["step_seconds"]), sy(yf(r))
        col = "#e8590c" if r["pareto"] else "#6c757d"
        rad = 7 if r["pareto"] else 5
        tip = f'{r["gpus"]} x {r["gpu"]}: {r["step_seconds"]:.2f} s/step, {_fmt_tick(yf(r))} {ylabel}'
        parts.append(
            f'<g class="point{" pareto" if r["pareto"] else ""}"><circle cx="{X:.1f}" cy="{Y:.1f}" r="{rad}" fill="{col}"'
            f' fill-opacity="0.85" stroke="#fff"><title>{_e(tip)}</title></circle></g>'
        )
        labels.setdefault((round(X), round(Y)), []).append(f'{r["gpus"]} x {r["gpu"]}')
    placed: list[tuple[float, float, float, float]] = [(X - 8, X + 8, Y - 8, Y + 8) for X, Y in labels]  # the points
    for (X, Y), names in labels.items():  # points that coincide share one label
        text = ", ".join(names)
        tw = 6.3 * len(text)
        anchor = "end" if X > left + pw * 0.7 else "start"
        x_lo = X - 9 - tw if anchor == "end" else X + 9
        ty = Y - 8
        for cand in (Y - 8, Y + 16, Y - 22, Y + 30):  # first spot clear of the labels already placed
            if not any(x_lo < b[1] and b[0] < x_lo + tw and cand - 12 < b[3] and b[2] < cand + 4 for b in placed):
                ty = cand
                break
        placed.append((x_lo, x_lo + tw, ty - 12, ty + 4))
        dx = -9 if anchor == "end" else 9
        parts.append(f'<text x="{X + dx}" y="{ty}" font-size="11" text-anchor="{anchor}">{_e(text)}</text>')
    ly = top + ph + 58
    parts.append(
        f'<circle cx="{left + 6}" cy="{ly - 4}" r="7" fill="#e8590c"/><text x="{left + 18}" y="{ly}" font-size="11">Pareto'
        f' front (no other fitting row is both faster and cheaper)</text>'
        f'<circle cx="{left + 6}" cy="{ly + 14}" r="5" fill="#6c757d"/><text x="{left + 18}" y="{ly + 18}" font-size="11">'
        "fits, dominated</text>"
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="fit-chart" width="{w}" height="{h}" viewBox="0 0 {w} {h}"'
        f' font-family="{FONT}" role="img" aria-label="step time against cost, Pareto front marked">' + "".join(parts) + "</svg>"
    )


def skipped_of(result: Any) -> list[dict[str, Any]]:
    """``trainfit fit --json``'s ``skipped``: the GPU kinds (``gpus`` null) or card counts left out, with the reason."""
    return [{"gpu": k.gpu, "gpus": k.gpus, "reason": k.reason} for k in getattr(result, "skipped", ())]


def fit_notes(result: Any) -> list[str]:
    """The lines under the fit table: what every row trains per step (``fit_search.basis_note``), how the rows'
    software stacks were chosen, then each skipped kind or count."""
    from trainfit.fit_search import basis_note, stack_note

    basis = [basis_note(result)] if getattr(result, "batch_basis", None) is not None else []
    return basis + [stack_note(getattr(result, "stack", None))] + [
        f"skipped {k.gpu}{'' if k.gpus is None else f' at {k.gpus} cards'}: {k.reason}"
        for k in getattr(result, "skipped", ())]


def fit_ranking_caption(result: Any) -> str:
    """The fit table's caption: the order ``objective.rank_key`` puts the rows in under the result's goal
    (``FitResult.goal``: the objective, a run length, a budget or deadline), in words."""
    from trainfit.objective import Goal, Objective, ranking_text

    goal = getattr(result, "goal", None) or Goal()
    fitting = [r for r in result.rows if r.fits]
    priced = any(r.cost_per_hour is not None for r in fitting)
    limits = goal.budget is not None or goal.deadline_s is not None
    parts = ["Ranked: rows that fit first" + (", those within the budget and deadline before those over them"
                                              if limits else "") + f", by {ranking_text(goal, priced=priced)}"]
    if goal.objective is Objective.COST and priced and any(r.cost_per_hour is None for r in fitting):
        parts.append("rows without a price after the priced ones, by time")
    parts.append("rows that do not fit last, fewest cards first, then the smallest peak")
    return "; ".join(parts) + "; * = Pareto front (time against cost)"


FIT_CAPTION = "Ranked by the search's objective (trainfit fit --objective); * = Pareto front (time against cost)"
"""``fit_fragment``'s caption when it is given no ranking (``fit_ranking_caption`` of the result)."""


def fit_fragment(rows: list[dict[str, Any]], *, evaluated: int, invalid: int, seconds: float, svg: str | None = None,
                 notes: list[str] | tuple[str, ...] = (), step_label: str = "step s", ranking: str | None = None) -> str:
    """The ranked table, the facts line and the chart; ``step_label``: the step column's head ("RL step s" where a
    row's step is an RL step, ``fit_search.FitResult.step_unit``); ``ranking``: the table's caption
    (``fit_ranking_caption``)."""
    body = []
    for i, r in enumerate(rows, 1):
        cost = f'{r["cost_per_hour"]:.2f} {_e(r["currency"])}' if r["cost_per_hour"] is not None else "-"
        if r.get("billing_note"):  # idle GPUs of a whole instance are paid for
            cost += f'<br><small>{_e(r["billing_note"])}</small>'
        knobs = ", ".join(f"{k}={v}" for k, v in sorted(r["knobs"].items()))
        step = f'{r["step_seconds"]:.2f}' if r["step_seconds"] else "n/a" if r.get("step_unavailable") else "-"
        body.append(
            f'<tr class="{"good" if r["fits"] else "bad"}"><td class="num">{i}</td><td>{"*" if r["pareto"] else ""}</td>'
            f'<td>{_e(r["gpu"])}</td><td class="num">{r["gpus"]}</td><td>{"yes" if r["fits"] else "no"}</td>'
            f'<td class="num">{_gib(r["peak_gpu_bytes"], 2)}</td><td class="num">{_gib(r["headroom_bytes"], 2)}</td>'
            f'<td class="num">{step}</td>'
            f'<td class="num">{cost}</td><td>{_e(r.get("stack") or "-")}</td><td>{_e(knobs)}</td></tr>'
        )
    table = (
        f'<table class="fit"><caption>{_e(ranking or FIT_CAPTION)}</caption>'
        "<thead><tr><th>#</th><th></th><th>GPU</th><th>cards</th>"
        f"<th>fits</th><th>peak GiB</th><th>headroom GiB</th><th>{_e(step_label)}</th><th>cost/h</th><th>stack</th>"
        "<th>knobs</th></tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
    )
    return (
        f'<p class="facts-line">{evaluated:,} configurations evaluated ({invalid:,} invalid, skipped) in {seconds:.1f} s.'
        " One row per GPU type and card count searched: its best configuration by the ranking below; a row that does"
        " not fit is that count's closest attempt.</p>"
        + table + "".join(f'\n<p>{_e(n)}</p>' for n in notes)
        + "<h2>Step time against cost</h2>" + (svg or fit_svg(rows))
    )


# ---------------------------------------------------------------------------------------------
# Pages
# ---------------------------------------------------------------------------------------------

CSS = """
body{font-family:DejaVu Sans,Liberation Sans,Arial,Helvetica,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:20px;margin:0 0 12px}h2{font-size:16px;margin:24px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.verdict{font-size:15px;margin:8px 0}.verdict .badge{display:inline-block;padding:4px 10px;border-radius:4px;color:#fff;font-weight:bold}
.verdict.good .badge{background:#1a7f37}.verdict.bad .badge{background:#c62828}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:2px 16px;font-size:13px;margin:8px 0}
dl.facts dt{color:#555}dl.facts dd{margin:0}
.warnings{background:#fff8e1;border:1px solid #f0c36d;padding:6px 12px;font-size:13px;margin:8px 0}
.warnings ul{margin:4px 0;padding-left:20px}
table{border-collapse:collapse;font-size:12px;margin:8px 0 16px}caption{text-align:left;font-size:12px;color:#555;padding:4px 0}
th,td{border:1px solid #ddd;padding:3px 6px}td.num{white-space:nowrap}table.fit td{white-space:nowrap}table.fit td:last-child{white-space:normal}th{background:#f5f5f5}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr.total td{font-weight:bold;background:#fafafa}td.bad,tr.bad td{color:#c62828}td.good{color:#1a7f37}
.sw{display:inline-block;width:10px;height:10px;margin-right:6px;vertical-align:middle}
.note,.facts-line{font-size:12px;color:#555;max-width:1000px}ul.assumptions{font-size:12px;max-width:1100px}
pre{font-size:11px;background:#f7f7f7;padding:8px;overflow:auto}.chart{overflow-x:auto}
footer{margin-top:24px;font-size:11px;color:#777}
"""


def page(title: str, body: str, *, script: str = "", extra_css: str = "") -> str:
    """A whole HTML document: inline CSS (and inline script, when given); nothing fetched."""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{_e(title)}</title><style>{CSS}{extra_css}</style></head><body>\n{body}\n"
        f"<footer>trainfit {__version__}. GiB = 2^30 bytes. Figures are a model of the run, not a measurement.</footer>"
        + (f"<script>{script}</script>" if script else "") + "</body></html>\n"
    )


def plan_html(plan: Any) -> str:
    from trainfit.report.json_report import plan_to_dict

    data = plan_to_dict(plan)
    model = chart_model(plan)
    return page(f"trainfit plan: {model['title']}", f"<h1>trainfit plan</h1>\n{plan_fragment(data, model)}")


def write_plan_html(plan: Any, path: str | Path) -> Path:
    """Write the plan report as one self-contained HTML file; returns the path. Written as ``trainfit plan --html``
    writes (``fsio.write_text_atomic``): a bad path or a full disk is one ``OutputError`` line and no half report."""
    from trainfit.fsio import write_text_atomic

    return write_text_atomic(Path(path), plan_html(plan), what="path")


def fit_step_label(result: Any) -> str:
    """The fit table's step column head for ``result`` (``fit_search.FitResult.step_unit``): "RL step s" where a
    row's step is an RL step (PPO / GRPO), else "step s"."""
    from trainfit.objective import StepUnit

    rl = getattr(result, "step_unit", StepUnit.OPTIMIZER_STEP) is StepUnit.RL_STEP
    return "RL step s" if rl else "step s"


def fit_html(result: Any, *, title: str = "trainfit fit") -> str:
    rows = fit_rows(result)
    body = f"<h1>{_e(title)}</h1>\n" + fit_fragment(rows, evaluated=result.evaluated, invalid=result.invalid,
                                                    seconds=result.seconds, notes=fit_notes(result),
                                                    step_label=fit_step_label(result),
                                                    ranking=fit_ranking_caption(result))
    return page(title, body)


def write_fit_html(result: Any, path: str | Path, title: str = "trainfit fit") -> Path:
    """Write the fit report (ranked table, time/cost chart with the Pareto front) as one HTML file, as
    ``write_plan_html`` does (atomic; one ``OutputError`` line on a bad path)."""
    from trainfit.fsio import write_text_atomic

    return write_text_atomic(Path(path), fit_html(result, title=title), what="path")
