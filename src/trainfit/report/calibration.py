"""``trainfit calibrate`` output: what changed per GPU (old rate -> new rate), the fits, the notes."""

from __future__ import annotations

import math
from typing import Any

_UNITS = (("_flops_per_s", 1e12, "TFLOP/s"), ("_bytes_per_s", 1e9, "GB/s"), ("_s", 1e-6, "us"),
          ("_kernel", 1e-6, "us"), ("_kernel_min", 1e-6, "us"), ("_s_per_step", 1e-6, "us"),
          ("_s_per_sequence", 1e-6, "us"))
_KINDS = {"gpu_output": "gpu_calibrate.py time output", "calibration": "calibration file", "run_records": "run records",
          "gpu_raw": "gpu_calibrate.py measure output (records)", "held_out_run_records": "held-out run records",
          "held_out_gpu_raw": "held-out gpu_calibrate.py measure output"}


def rate_text(field: str, value: Any) -> str:
    """A rate in the unit its name carries: TFLOP/s, GB/s (10^9 B/s), microseconds; GEMM points counted."""
    if field == "gemm_points":
        return f"{len(value)} shapes"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    for suffix, scale, unit in _UNITS:
        if field.endswith(suffix):
            return f"{value / scale:.4g} {unit}"
    return f"{value:.4g}"


def change_factor(old: Any, new: Any) -> str:
    if isinstance(old, (int, float)) and isinstance(new, (int, float)) and not isinstance(old, bool) and old:
        return f"x{new / old:.3g}"
    return ""


def calibrate_to_dict(result: Any) -> dict[str, Any]:
    """The ``--json`` object: output path, inputs, changes per GPU (plain numbers), fits, notes."""
    from trainfit.calibration.file import calibration_to_dict

    devices: dict[str, dict[str, Any]] = {}
    for c in result.changes:
        old, new = (len(v) if c.field == "gemm_points" else v for v in (c.old, c.new))
        devices.setdefault(c.gpu_id, {})[c.field + ("_count" if c.field == "gemm_points" else "")] = {"old": old, "new": new}
    return {
        "path": str(result.path),
        "written": result.written,
        "inputs": [{"path": p, "kind": k} for p, k in result.inputs],
        "changes": devices,
        "fits": [{"gpu": f.gpu_id, "records": f.records, "matmul_scale": f.matmul_scale, "host_scale": f.host_scale,
                  "median_error_before": f.median_error_before, "median_error_after": f.median_error_after,
                  "fitted": list(f.fitted), "notes": list(f.notes)} for f in result.fits],
        "engine_fits": [{"gpu": f.gpu_id, "records": f.records, "engine_scale": f.engine_scale,
                         "median_generation_error_before": f.median_error_before,
                         "median_generation_error_after": f.median_error_after, "fitted": list(f.fitted),
                         "notes": list(f.notes)} for f in getattr(result, "engine_fits", ())],
        "engine_held_out": [{"gpu": g, "records": n, "median_generation_error_before": math.expm1(b),
                             "median_generation_error_after": math.expm1(a)}
                            for g, n, b, a in getattr(result, "engine_held_out", ())],
        "memory_fits": [{"gpu": f.gpu_id, "constant": f.field, "layout": f.layout, "before": f.share_before,
                         "after": f.share_after, "fragmentation_share_before": f.share_before,
                         "fragmentation_share_after": f.share_after, "refused": f.refused,
                         "fit_before": _stats(f.fit_before), "fit_after": _stats(f.fit_after),
                         "held_out_before": _stats(f.held_before), "held_out_after": _stats(f.held_after),
                         "residuals": [{"record": w, "log_error": e} for w, e in f.residuals]}
                        for f in getattr(result, "memory_fits", ())],
        "time_held_out": [{"gpu": g, "records": n, "median_error_before": math.expm1(b), "median_error_after": math.expm1(a)}
                          for g, n, b, a in getattr(result, "time_held_out", ())],
        "refused": list(getattr(result, "refused", ())),
        "notes": list(getattr(result, "notes", ())),
        "calibration": calibration_to_dict(result.calibration),
    }


def _stats(s: Any) -> dict[str, Any] | None:
    """ErrorStats as fractions (exp(log error) - 1)."""
    if s is None:
        return None
    return {"records": s.n, "median_abs_error": math.expm1(s.median_abs), "rms_error": math.expm1(s.rms),
            "worst_error": math.expm1(s.worst)}


def render_calibrate(result: Any, console: Any) -> None:
    """Tables of old -> new per GPU, then the fits and the file's notes."""
    from rich.table import Table

    console.print(("wrote " if result.written else "would write ") + str(result.path))
    for path, kind in result.inputs:
        console.print(f"  input {path}: {_KINDS.get(kind, kind)}")
    by_gpu: dict[str, list[Any]] = {}
    for c in result.changes:
        by_gpu.setdefault(c.gpu_id, []).append(c)
    if not by_gpu:
        console.print("no rate changed")
    for gpu_id, changes in by_gpu.items():
        t = Table(title=f"{gpu_id}: rates a plan divides by")
        for col in ("rate", "before", "after", "change"):
            t.add_column(col, justify="left" if col == "rate" else "right")
        for c in changes:
            t.add_row(c.field, rate_text(c.field, c.old), rate_text(c.field, c.new), change_factor(c.old, c.new))
        console.print(t)
    for f in result.fits:
        console.print(f"fit {f.gpu_id}: {f.records} run records; matmul x{f.matmul_scale:.3f}, host per kernel "
                      f"x{f.host_scale:.3f}; median step-time error {f.median_error_before:.1%} -> {f.median_error_after:.1%}"
                      + (" (refused)" if any(r.startswith("step-time") for r in getattr(result, "refused", ())) else ""))
        for n in f.notes:
            console.print(f"  note: {n}")
    for f in getattr(result, "engine_fits", ()):
        console.print(f"engine fit {f.gpu_id}: {f.records} RL records; engine host constants x{f.engine_scale:.3f}"
                      + f"; median generation error {f.median_error_before:.1%} -> {f.median_error_after:.1%}"
                      + (" (refused)" if any(r.startswith("engine host") for r in getattr(result, "refused", ())) else ""))
        if f.fitted:
            console.print(f"  scaled: {', '.join(f.fitted)}")
        for n in f.notes:
            console.print(f"  note: {n}")
    for g, n, b, a in getattr(result, "engine_held_out", ()):
        console.print(f"held-out generation times {g} ({n} records): median error {math.expm1(b):.1%} -> "
                      f"{math.expm1(a):.1%}")
    for f in getattr(result, "memory_fits", ()):
        console.print(f"memory fit {f.gpu_id}: {f.label} {f.share_before:.4g} -> {f.share_after:.4g}"
                      + (" (refused)" if f.refused else ""))
        console.print(f"  fit records, reserved: {f.fit_before.text()} -> {f.fit_after.text()}")
        if f.held_before is not None and f.held_after is not None:
            console.print(f"  held-out records, reserved: {f.held_before.text()} -> {f.held_after.text()}")
        console.print("  residuals after the fit (log planned/measured reserved):")
        for where, e in f.residuals:
            console.print(f"    {math.expm1(e):+7.1%}  {where}")
    for g, n, b, a in getattr(result, "time_held_out", ()):
        console.print(f"held-out step times {g} ({n} records): median error {math.expm1(b):.1%} -> {math.expm1(a):.1%}")
    for r in getattr(result, "refused", ()):
        console.print(f"refused: {r}")
    for n in getattr(result, "notes", ()):
        console.print(f"note: {n}")
    if result.calibration.notes:
        console.print("notes in the file:")
        for n in result.calibration.notes:
            console.print(f"  - {n}")
