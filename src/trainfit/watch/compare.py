"""A run record judged again from disk: what ``trainfit compare`` prints. Pure: no torch."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trainfit.errors import CardError
from trainfit.watch.verdict import CPU, CUDA, MEMORY_MARGIN, TIME_MARGIN, Judged, judge, table_lines


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
    """Read ``path`` (a record with ``record.phases``) and judge it. CardError (one line) when the
    file is not such a record."""
    from trainfit.preflight.record import PHASES_KEY, load_record

    card, rec = load_record(Path(path))
    rows = rec.get(PHASES_KEY)
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "phase" in r for r in rows):
        raise CardError(f"compare: '{path}' has no measured phases (record.phases); write one with "
                        f"trainfit.watch(card, record=PATH) or `trainfit record --measured`")
    watch = rec.get("watch") or {}
    device = watch.get("device", CUDA)
    if device not in (CUDA, CPU):
        raise CardError(f"compare: record.watch.device must be '{CUDA}' or '{CPU}', got {device!r}")
    mm = memory_margin if memory_margin is not None else float(watch.get("memory_margin", MEMORY_MARGIN))
    tm = time_margin if time_margin is not None else float(watch.get("time_margin", TIME_MARGIN))
    judged, verdict = judge(rows, device=device, memory_margin=mm, time_margin=tm)
    model = card.model if isinstance(card.model, str) else (card.model.id or card.model.path or "inline config")
    return Comparison(path=str(path), model=str(model), method=card.method.value, gpu=card.hardware.gpu, device=device,
                      memory_margin=mm, time_margin=tm, judged=tuple(judged), verdict=verdict,
                      versions=dict(rec.get("versions") or {}), warnings=tuple(watch.get("warnings") or ()),
                      forecasts=tuple(watch.get("forecasts") or ()), overhead_fraction=watch.get("overhead_fraction"))
