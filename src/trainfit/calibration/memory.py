"""The memory overhead constant a calibration may set: the fragmentation share.

The plan's reserved figure is ``allocated + rounding + share x (the step's largest transient)``
(``trainfit.memory.overhead``; ``share`` defaults to ``FRAGMENTATION_OF_TRANSIENTS``, fitted on the
H200 fit set). It is an overhead constant, not a mechanism: the caching allocator has no closed
form for it. A calibration's ``fragmentation_share`` for a GPU kind replaces it for plans on that
kind (``apply_fragmentation``); every mechanism term (weights, activations, logits, rounding,
the step's high-water mark) is left as the plan computes it.

Records that measured reserved bytes on CUDA fit it (``fit_fragmentation``): per GPU kind the
share minimising the mean squared ``log(planned reserved / measured reserved)`` of the step peak
(forward, backward, optimizer step) over the fit records. Squared, not absolute: the misses that
matter to a memory plan are the large ones (an out-of-memory), which a median ignores. Search: a
grid over 0..4 in steps of 0.01, refined to 0.0005 around the best point. Deterministic.

Inputs: run records whose ``record.phases`` hold measured ``reserved_bytes`` (``trainfit.watch``
on CUDA), and the raw output of ``benchmarks/gpu_calibrate.py measure`` (one record per training
case; ``trainfit.accuracy.gpu.card_dict`` gives its card).

Pure Python: no torch import.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Any

from trainfit.errors import CardError, TrainfitError

FIELD = "fragmentation_share"
MEMORY_FIELDS = {FIELD: "float"}
"""Calibration fields that are memory constants (not ``DeviceRates`` fields)."""
GRID_MAX = 4.0
GRID_STEP, FINE_STEP = 0.01, 0.0005
TRAIN_PHASES = ("forward", "backward", "optimizer_step")
_RL_TRAIN = {"actor_forward": "forward", "actor_backward": "backward", "actor_optimizer_step": "optimizer_step"}


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryRecord:
    card: Any
    reserved_bytes: float
    """Measured: the step's reserved peak (max over forward, backward, optimizer step)."""
    where: str
    step_s: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ErrorStats:
    """Errors of planned vs measured reserved: ``log(planned / measured)`` per record."""

    n: int
    median_abs: float
    rms: float
    worst: float

    @staticmethod
    def of(errors: list[float]) -> "ErrorStats":
        return ErrorStats(n=len(errors), median_abs=statistics.median(abs(e) for e in errors),
                          rms=math.sqrt(statistics.fmean(e * e for e in errors)), worst=max(errors, key=abs))

    def text(self) -> str:
        return (f"median |err| {math.expm1(self.median_abs):.1%}, rms {math.expm1(self.rms):.1%}, "
                f"worst {math.expm1(self.worst):+.1%} (n={self.n})")


@dataclass(frozen=True, kw_only=True, slots=True)
class FragmentationFit:
    gpu_id: str
    share_before: float
    share_after: float
    fit_before: ErrorStats
    fit_after: ErrorStats
    held_before: ErrorStats | None
    held_after: ErrorStats | None
    residuals: tuple[tuple[str, float], ...]
    """(record, log error after the fit) for every fit record."""

    @property
    def refused(self) -> bool:
        """The held-out records got worse (rms of the log error): the fit is not written."""
        return self.held_after is not None and self.held_before is not None and self.held_after.rms > self.held_before.rms


def default_share() -> float:
    from trainfit.memory.overhead import FRAGMENTATION_OF_TRANSIENTS

    return FRAGMENTATION_OF_TRANSIENTS


def apply_fragmentation(plan: Any, share: float) -> Any:
    """``plan`` with every phase's fragmentation term at ``share`` (instead of the default) and its
    reserved and device figures moved by the difference; load phases (no transient) and phases whose
    reserved comes from replaying the step's allocations through the caching-allocator model
    (``OverheadBytes.replayed``: single-rank SFT since the replay; it has no fitted constant) unchanged."""
    base = default_share()
    if share == base:
        return plan

    def fix(p: Any) -> Any:
        frag = p.overhead.fragmentation
        if not frag or getattr(p.overhead, "replayed", False):
            return p  # no transient, or reserved from the allocator replay (no share in it)
        delta = frag * (share / base - 1.0)
        return replace(p, reserved=p.reserved + delta, device=p.device + delta,
                       overhead=replace(p.overhead, fragmentation=frag + delta))

    groups = tuple(replace(g, phases=tuple(fix(p) for p in g.phases)) for g in plan.groups)
    stages = tuple(tuple(fix(p) for p in st) for st in plan.stage_phases)
    return replace(plan, phases=tuple(fix(p) for p in plan.phases), groups=groups, stage_phases=stages)


def step_reserved(plan: Any) -> float:
    """The plan's reserved peak over the training step's phases (RL: the actor's)."""
    vals = [p.reserved for p in plan.phases if _RL_TRAIN.get(p.phase.value, p.phase.value) in TRAIN_PHASES]
    if not vals:
        raise CardError("calibrate: the plan has no training phase to compare reserved bytes with")
    return max(vals)


# ------------------------------------------------------------------ inputs

def is_gpu_raw(data: Any) -> bool:
    """``benchmarks/gpu_calibrate.py measure`` output: {versions, device, cases: [...]}."""
    return isinstance(data, dict) and isinstance(data.get("cases"), list) and isinstance(data.get("versions"), dict)


def records_from_gpu_raw(data: Any, *, where: str) -> list[MemoryRecord]:
    """One record per measured training-step case (log-prob cases and failed cases skipped)."""
    from trainfit.accuracy.gpu import card_dict, label
    from trainfit.spec.card import load_card_dict

    if (data["versions"].get("alloc_conf") or "") not in ("", "default"):
        raise CardError(f"{where}: measured under PYTORCH_CUDA_ALLOC_CONF={data['versions']['alloc_conf']}; the plan "
                        f"models the default caching allocator only")
    out = []
    for case in data["cases"]:
        m = case.get("measured")
        if not m or case.get("pass_kind") != "train_step" or not all(p in m.get("phases", {}) for p in TRAIN_PHASES):
            continue
        try:
            card = load_card_dict(card_dict(case))
        except TrainfitError as exc:
            raise CardError(f"{where}: case {label(case)}: {exc}") from None
        out.append(MemoryRecord(card=card, reserved_bytes=float(max(m["phases"][p]["reserved"] for p in TRAIN_PHASES)),
                                where=f"{where}: {label(case)}", step_s=m.get("step_s")))
    return out


def memory_record(card: Any, rec: dict[str, Any], *, where: str) -> MemoryRecord | None:
    """The reserved step peak of a watch record measured on CUDA; None for records without it."""
    rows = rec.get("phases")
    if not isinstance(rows, list) or (rec.get("watch") or {}).get("device") != "cuda":
        return None
    vals = [r["measured"]["reserved_bytes"] for r in rows if isinstance(r, dict) and r.get("phase") in TRAIN_PHASES
            and isinstance(r.get("measured"), dict) and isinstance(r["measured"].get("reserved_bytes"), (int, float))]
    if not vals:
        return None
    return MemoryRecord(card=card, reserved_bytes=float(max(vals)), where=where, step_s=rec.get("step_s"))


# ------------------------------------------------------------------ the fit

def fit_fragmentation(records: list[MemoryRecord], held_out: list[MemoryRecord], base: Any) -> list[FragmentationFit]:
    """Per GPU kind of ``records``: the share that minimises the fit records' squared log error,
    with the errors before/after on the fit and the held-out records of that kind."""
    from trainfit.plan import gpu_of, make_plan

    def planned(rs: list[MemoryRecord]) -> list[tuple[MemoryRecord, Any]]:
        # plans without the share of ``base`` (apply_fragmentation sets the share absolutely)
        return [(r, make_plan(r.card)) for r in rs]

    by_gpu: dict[str, list[MemoryRecord]] = {}
    for r in records:
        by_gpu.setdefault(gpu_of(r.card).id, []).append(r)
    fits = []
    for gpu_id, rs in sorted(by_gpu.items()):
        fit_plans = [(r, p) for r, p in planned(rs) if uses_share(p)]
        held_plans = [(r, p) for r, p in planned([r for r in held_out if gpu_of(r.card).id == gpu_id]) if uses_share(p)]
        if not fit_plans:
            continue
        before = _share_of(base, gpu_id)

        def errors(pairs: list[tuple[MemoryRecord, Any]], share: float) -> list[float]:
            return [math.log(step_reserved(apply_fragmentation(p, share)) / r.reserved_bytes) for r, p in pairs]

        def loss(share: float) -> float:
            return statistics.fmean(e * e for e in errors(fit_plans, share))

        grid = [i * GRID_STEP for i in range(1, int(GRID_MAX / GRID_STEP) + 1)]
        best = min(grid, key=lambda s: (loss(s), abs(s - before)))
        fine = [best + i * FINE_STEP for i in range(-20, 21) if best + i * FINE_STEP > 0]
        after = round(min(fine, key=lambda s: (loss(s), abs(s - before))), 4)
        fits.append(FragmentationFit(
            gpu_id=gpu_id, share_before=before, share_after=after,
            fit_before=ErrorStats.of(errors(fit_plans, before)), fit_after=ErrorStats.of(errors(fit_plans, after)),
            held_before=ErrorStats.of(errors(held_plans, before)) if held_plans else None,
            held_after=ErrorStats.of(errors(held_plans, after)) if held_plans else None,
            residuals=tuple((r.where, e) for (r, _), e in zip(fit_plans, errors(fit_plans, after)))))
    return fits


def uses_share(plan: Any) -> bool:
    """Whether the plan's step reserved figure depends on the fragmentation share."""
    return step_reserved(apply_fragmentation(plan, 2 * default_share())) != step_reserved(plan)


def _share_of(cal: Any, gpu_id: str) -> float:
    entry = cal.device(gpu_id) if cal is not None else None
    return float(entry.memory_overrides().get(FIELD, default_share())) if entry is not None else default_share()
