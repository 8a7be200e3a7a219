"""Planned vs measured per phase: the rows a record holds, the verdict, the trend forecast.

Pure (no torch): the watch, ``trainfit compare`` and ``trainfit accept`` all judge a run here, from
plain data, so a record read back from disk gets the same verdict the live run printed.

A record's ``phases`` (one mapping per phase, bytes per GPU and seconds per optimizer step)::

    - phase: forward
      plan_phases: [forward]
      planned:  {allocated_bytes, reserved_bytes, device_bytes, tensor_bytes, seconds}
      measured: {allocated_bytes, reserved_bytes, device_bytes, tensor_bytes, seconds, tokens, steps}

Which measured figure is judged: on CUDA ``reserved`` (what an out-of-memory depends on) against
the plan's reserved, or ``allocated`` against the plan's allocated where the record measured no
reserved figure; on the CPU the tracker's ``tensor_bytes`` against the plan's tensor bytes
(allocated without the cuBLAS workspaces). A planned 0 with measured memory is a miss ('over'),
not a row without a plan. Time is judged on CUDA only: the plan times the GPU it
names, and a CPU run is not that GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MEMORY_MARGIN = 0.10
"""A phase's measured memory may differ from the plan by this fraction before it is 'off' (the
plan's H200 held-out reserved errors reach 9.7%: ``benchmarks/gpu_calibration.md``)."""
TIME_MARGIN = 0.30
"""Same for seconds (the H200 step-time errors reach 28%: ``benchmarks/gpu_calibration.md``)."""
MEMORY_FLOOR_BYTES = 20 * 2**20
"""...and, on CUDA only, never for less than this many bytes: one large segment of the CUDA caching
allocator (``kLargeBuffer``, 20 MiB), the granularity a reserved figure moves by; on a tiny model a
few MiB of small tensors would otherwise read as a large fraction. The CPU tracker counts exact
tensor bytes (no segments), so no floor applies there."""
FORECAST_MIN_STEPS = 4
"""Steps of a growing series before a trend is extrapolated."""
FORECAST_WINDOW = 16
"""The trend is fitted over at most this many most recent steps."""
CUDA, CPU = "cuda", "cpu"


@dataclass(frozen=True, kw_only=True, slots=True)
class Judged:
    """One phase: the judged figures and the verdict (``ok``, ``over``, ``under``, ``unplanned``)."""

    phase: str
    memory_field: str
    planned_memory: float | None
    measured_memory: float | None
    memory_error: float | None
    planned_s: float | None
    measured_s: float | None
    time_error: float | None
    verdict: str
    reason: str


def floor_bytes(device: str) -> float:
    """The smallest difference that can be 'off' on this device kind: one allocator segment on CUDA, 0 on the CPU."""
    return MEMORY_FLOOR_BYTES if device == CUDA else 0.0


def memory_off(measured: float, planned: float, margin: float, *, device: str) -> bool:
    """Measured memory differs from the plan beyond ``margin`` (a fraction) and, on CUDA, one allocator
    segment. A planned 0 is off for any measured bytes past the floor."""
    beyond_margin = planned <= 0 or abs(measured / planned - 1.0) > margin
    return measured != planned and beyond_margin and abs(measured - planned) > floor_bytes(device)


def memory_fields(device: str) -> tuple[str, str]:
    """(measured field, planned field) judged on this device kind."""
    return ("reserved_bytes", "reserved_bytes") if device == CUDA else ("tensor_bytes", "tensor_bytes")


def row_memory_fields(planned: dict[str, Any], measured: dict[str, Any], *, device: str) -> tuple[str, str]:
    """The fields judged for one row: on CUDA ``allocated`` when the record measured no ``reserved`` but
    did measure ``allocated`` (a partial record is judged on what it holds, never passed unjudged)."""
    mfield, pfield = memory_fields(device)
    if (device == CUDA and measured.get(mfield) is None and measured.get("allocated_bytes") is not None
            and planned.get("allocated_bytes") is not None):
        return "allocated_bytes", "allocated_bytes"
    return mfield, pfield


def judged_anything(j: Judged) -> bool:
    """The row was judged on memory or on time (not 'n/a', not 'unplanned')."""
    return j.verdict not in ("n/a", "unplanned")


def _memory_reason(me: float | None, mm: float, pm: float, margin: float, *, device: str, off: bool) -> str:
    """Which rule decided the memory verdict: the margin, the CUDA segment floor, or a planned 0."""
    diff_mib = abs(mm - pm) / 2**20
    if pm <= 0:
        return f"memory {mm / 2**20:.1f} MiB measured where the plan has 0"
    floor = floor_bytes(device)
    if off:
        rule = f"beyond the {margin:.0%} margin" + (f" and one {floor / 2**20:.0f} MiB CUDA allocator segment" if floor else "")
        return f"memory {me:+.1%} ({rule})"
    if abs(me) > margin:
        return (f"memory {me:+.1%} is beyond the {margin:.0%} margin but only {diff_mib:.1f} MiB, within one"
                f" {floor / 2**20:.0f} MiB CUDA allocator segment")
    return f"memory {me:+.1%} within the {margin:.0%} margin"


def _err(measured: float | None, planned: float | None) -> float | None:
    if measured is None or planned is None or not planned > 0:
        return None
    return measured / planned - 1.0


def judge_row(row: dict[str, Any], *, device: str, memory_margin: float = MEMORY_MARGIN,
              time_margin: float = TIME_MARGIN) -> Judged:
    """The verdict of one ``phases`` entry (module docstring)."""
    planned, measured = row.get("planned") or {}, row.get("measured") or {}
    mfield, pfield = row_memory_fields(planned, measured, device=device)
    pm, mm = planned.get(pfield), measured.get(mfield)
    ps, ms = planned.get("seconds"), measured.get("seconds")
    me = _err(mm, pm)
    te = _err(ms, ps) if device == CUDA else None
    reasons = []
    verdict = "ok"
    memory_judged = mm is not None and pm is not None  # a planned 0 is judged too (its error is not a number)
    if memory_judged:
        off = memory_off(mm, pm, memory_margin, device=device)
        if off:
            verdict = "over" if mm > pm else "under"
        reasons.append(_memory_reason(me, mm, pm, memory_margin, device=device, off=off))
    elif mm is None and (planned.get(pfield) is not None) and ms is not None and device == CUDA:
        reasons.append("memory not measured")
    if te is not None:
        if abs(te) > time_margin:
            verdict = verdict if verdict != "ok" else ("over" if te > 0 else "under")
            reasons.append(f"time {te:+.1%} (beyond the {time_margin:.0%} margin)")
        else:
            reasons.append(f"time {te:+.1%} within the {time_margin:.0%} margin")
    if not memory_judged and te is None:
        if mm is None and ms is None:
            verdict = "n/a"
            reasons.append("not measured")
        elif mm is None and device != CUDA:  # a time row, or a watch without the memory tracker
            verdict = "n/a"
            reasons.append("time only, and time is not judged on the CPU")
        else:
            verdict = "unplanned"
            reasons.append("the plan has no figure for it")
    return Judged(phase=row["phase"], memory_field=mfield, planned_memory=pm, measured_memory=mm, memory_error=me,
                  planned_s=ps, measured_s=ms, time_error=te, verdict=verdict, reason="; ".join(reasons) or "within margins")


def judge(rows: list[dict[str, Any]], *, device: str, memory_margin: float = MEMORY_MARGIN,
          time_margin: float = TIME_MARGIN) -> tuple[list[Judged], str]:
    """Every row judged, and the run's verdict: ``plan held`` or ``plan off: <phases>``."""
    judged = [judge_row(r, device=device, memory_margin=memory_margin, time_margin=time_margin) for r in rows]
    off = [j.phase for j in judged if j.verdict in ("over", "under")]
    return judged, ("plan held" if not off else "plan off: " + ", ".join(off))


@dataclass(frozen=True, kw_only=True, slots=True)
class Forecast:
    """A growing series that will reach the capacity if it keeps its recent trend."""

    quantity: str
    phase: str
    current: float
    slope_per_step: float
    capacity: float
    steps_left: float
    at_step: int

    def text(self) -> str:
        return (f"{self.quantity} of {self.phase} grows {self.slope_per_step / 2**20:+.1f} MiB/step over the last steps; "
                f"at this rate it reaches the capacity {self.capacity / 2**30:.1f} GiB in about {self.steps_left:.0f} "
                f"steps (step {self.at_step}); now {self.current / 2**30:.2f} GiB")


def trend(values: list[float]) -> float:
    """Least-squares slope per step of the last ``FORECAST_WINDOW`` values (0 with fewer than 2)."""
    ys = values[-FORECAST_WINDOW:]
    n = len(ys)
    if n < 2:
        return 0.0
    mx = (n - 1) / 2
    my = sum(ys) / n
    sxx = sum((i - mx) ** 2 for i in range(n))
    return sum((i - mx) * (y - my) for i, y in enumerate(ys)) / sxx


def forecast(values: list[float], *, quantity: str, phase: str, step: int, capacity: float,
             horizon_steps: float, skip_first: bool = True) -> Forecast | None:
    """A Forecast when the series keeps growing (each of its last ``FORECAST_MIN_STEPS - 1`` steps
    above the one before, the run's first step left out (``skip_first``: ``values`` starts with it;
    False when the caller left it out): optimizer states appear in it; a slope of at
    least 0.1% of the capacity per 100 steps, so noise is not a trend) and would cross ``capacity``
    within ``horizon_steps``; None otherwise (or when it has already crossed: that is a measurement)."""
    values = values[1:] if skip_first else values
    if len(values) < FORECAST_MIN_STEPS or not capacity > 0:
        return None
    recent = values[-FORECAST_MIN_STEPS:]
    if not all(b > a for a, b in zip(recent, recent[1:])):
        return None
    slope, current = trend(values), values[-1]
    if slope <= capacity * 1e-5 or current >= capacity:
        return None
    left = (capacity - current) / slope
    if left > horizon_steps or math.isinf(left):
        return None
    return Forecast(quantity=quantity, phase=phase, current=current, slope_per_step=slope, capacity=capacity,
                    steps_left=left, at_step=step + math.ceil(left))


def table_lines(judged: list[Judged], *, device: str) -> list[str]:
    """Plain-text table: phase, planned and measured memory (MiB/GiB) and time (s), errors, verdict."""
    what = "reserved" if device == CUDA else "tensors"
    head = f"{'phase':<15} {'plan ' + what:>14} {'measured':>10} {'err':>8} {'plan s':>9} {'measured s':>11} {'err':>8}  verdict"
    out = [head]
    for j in judged:
        out.append(f"{j.phase:<15} {_gib(j.planned_memory):>14} {_gib(j.measured_memory):>10} {_pct(j.memory_error):>8} "
                   f"{_sec(j.planned_s):>9} {_sec(j.measured_s):>11} {_pct(j.time_error):>8}  {j.verdict}")
    return out


def _gib(v: float | None) -> str:
    """GiB (2^30) from 1 GiB up, MiB (2^20) below."""
    if v is None:
        return "-"
    return f"{v / 2**30:.2f} GiB" if v >= 2**30 else f"{v / 2**20:.1f} MiB"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.1%}"


def _sec(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"
