"""A run record judged again from disk: what ``trainfit compare`` prints. Pure: no torch."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trainfit.errors import CardError
from trainfit.watch.verdict import CPU, CUDA, MEMORY_MARGIN, TIME_MARGIN, Judged, judge, judged_anything, table_lines


@dataclass(frozen=True, kw_only=True, slots=True)
class Comparison:
    path: str
    model: str
    method: str
    gpu: str
    device: str
    memory_margin: float
    time_margin: float
    judged: tuple[Judged, ...]
    verdict: str
    versions: dict[str, Any]
    warnings: tuple[str, ...]
    forecasts: tuple[str, ...]
    overhead_fraction: float | None

    @property
    def off(self) -> bool:
        return self.verdict != "plan held"

    def lines(self) -> list[str]:
        head = (f"{self.path}: {self.model}, {self.method} on {self.gpu} (planned), measured on {self.device}"
                + (f" with torch {self.versions.get('torch')}" if self.versions.get("torch") else ""))
        out = [head, *table_lines(list(self.judged), device=self.device)]
        out.append(f"verdict: {self.verdict} (margins: memory {self.memory_margin:.0%}, time {self.time_margin:.0%}"
                   + ("; time not judged on the CPU: the plan times the GPU it names" if self.device != CUDA else "") + ")")
        out += [f"warning: {w}" for w in self.warnings] + [f"forecast: {f}" for f in self.forecasts]
        for j in self.judged:
            if j.verdict in ("over", "under"):
                out.append(f"  {j.phase}: {j.reason}")
        if self.overhead_fraction is not None:
            out.append(f"watch overhead: {self.overhead_fraction:.2%} of step time")
        return out

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("path", "model", "method", "gpu", "device", "memory_margin", "time_margin",
                                           "verdict", "versions", "overhead_fraction")}
        d["off"] = self.off
        d["warnings"], d["forecasts"] = list(self.warnings), list(self.forecasts)
        d["phases"] = [asdict(j) for j in self.judged]
        return d


def compare_record(path: Path, *, memory_margin: float | None = None, time_margin: float | None = None) -> Comparison:
    """Read ``path`` (a record with ``record.phases``) and judge it. CardError (one line, naming the field) when the
    file is not such a record, when a field the verdict reads is of the wrong kind (``checked_rows``,
    ``checked_watch``), or when no phase holds both a planned and a measured figure (nothing to judge: never
    'plan held')."""
    from trainfit.preflight.record import PHASES_KEY, load_record

    card, rec = load_record(Path(path))
    rows = rec.get(PHASES_KEY)
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) and "phase" in r for r in rows):
        raise CardError(f"compare: '{path}' has no measured phases (record.phases); write one with "
                        f"trainfit.watch(card, record=PATH) or `trainfit record --measured`")
    checked_rows(rows)
    watch = checked_watch(rec.get("watch"))
    versions = rec.get("versions")
    if versions is not None and not isinstance(versions, dict):
        raise CardError(f"compare: record.versions must be a mapping of package names to versions, got"
                        f" {str(versions)[:40]!r}")
    device = watch_device(watch)
    mm = memory_margin if memory_margin is not None else float(watch.get("memory_margin", MEMORY_MARGIN))
    tm = time_margin if time_margin is not None else float(watch.get("time_margin", TIME_MARGIN))
    for flag, value in (("--memory-margin", memory_margin), ("--time-margin", time_margin)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise CardError(f"{flag}: must be a finite fraction >= 0 (0.1 = 10 %), got {value}")
    judged, verdict = judge(rows, device=device, memory_margin=mm, time_margin=tm)
    if not any(judged_anything(j) for j in judged):
        raise CardError(f"compare: no phase in '{path}' holds both a planned and a measured figure on {device}"
                        f" ({', '.join(sorted({j.reason for j in judged}))}); nothing to judge")
    model = card.model if isinstance(card.model, str) else (card.model.id or card.model.path or "inline config")
    return Comparison(path=str(path), model=str(model), method=card.method.value, gpu=card.hardware.gpu, device=device,
                      memory_margin=mm, time_margin=tm, judged=tuple(judged), verdict=verdict,
                      versions=dict(versions or {}), warnings=tuple(watch.get("warnings") or ()),
                      forecasts=tuple(watch.get("forecasts") or ()), overhead_fraction=watch.get("overhead_fraction"))


FIGURES = ("allocated_bytes", "reserved_bytes", "device_bytes", "tensor_bytes", "seconds", "tokens", "steps")
"""The figures of a phase's ``planned`` and ``measured`` mappings (``trainfit.watch.verdict``): each a number >= 0."""


def _figure_ok(value: Any) -> bool:
    return value is None or (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
                             and value >= 0)


def checked_rows(rows: list[dict[str, Any]], *, what: str = "compare") -> None:
    """``record.phases``: each phase named by text, its ``planned`` / ``measured`` mappings of finite figures >= 0
    (a string, a boolean, NaN or a negative figure is refused, never judged or skipped)."""
    for i, row in enumerate(rows):
        name = row.get("phase")
        if not isinstance(name, str) or not name.strip():
            raise CardError(f"{what}: record.phases[{i}].phase must be a phase name like forward, got {str(name)[:40]!r}")
        for part in ("planned", "measured"):
            figures = row.get(part)
            if figures is None:
                continue
            if not isinstance(figures, dict):
                raise CardError(f"{what}: record.phases[{i}].{part} ({name}) must be a mapping of {', '.join(FIGURES)},"
                                f" got {str(figures)[:40]!r}")
            for key in FIGURES:
                if not _figure_ok(figures.get(key)):
                    raise CardError(f"{what}: record.phases[{i}].{part}.{key} ({name}) must be a finite number >= 0"
                                    f" (bytes per GPU, seconds per step or a count), got {figures[key]!r}")


def watch_device(watch: dict[str, Any] | None) -> str:
    """The device a (checked) ``record.watch`` was measured on: absent means cuda, for compare and calibrate alike."""
    return (watch or {}).get("device", CUDA)


def checked_watch(watch: Any, *, what: str = "compare") -> dict[str, Any]:
    """``record.watch``: a mapping (or absent); its device cuda or cpu (absent: cuda), its margins finite fractions
    >= 0, its overhead a fraction, its warnings and forecasts lists of text."""
    if watch is None:
        return {}
    if not isinstance(watch, dict):
        raise CardError(f"{what}: record.watch must be a mapping (device, memory_margin, time_margin, warnings,"
                        f" forecasts), got {str(watch)[:40]!r}")
    device = watch_device(watch)
    if device not in (CUDA, CPU):
        raise CardError(f"{what}: record.watch.device must be '{CUDA}' or '{CPU}', got {device!r}")
    for key in ("memory_margin", "time_margin", "overhead_fraction"):
        value = watch.get(key)
        if value is not None and not _figure_ok(value):
            raise CardError(f"{what}: record.watch.{key} must be a finite fraction >= 0 (0.1 = 10 %), got {value!r}")
    for key in ("warnings", "forecasts"):
        value = watch.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(x, str) for x in value)):
            raise CardError(f"{what}: record.watch.{key} must be a list of text lines, got {str(value)[:40]!r}")
    return watch
