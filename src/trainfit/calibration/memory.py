"""The memory overhead constants a calibration may set, and their fit on measured reserved bytes.

Two constants, each for the plans whose reserved figure it is part of:

* ``fragmentation_share`` (per GPU kind): where the plan's reserved is ``allocated + rounding +
  share x (the step's largest transient)`` (``trainfit.memory.overhead``; RL, sharded, offloaded and
  pipelined runs), the share replaces ``FRAGMENTATION_OF_TRANSIENTS`` (``apply_fragmentation``).
* ``reserved_replay_scale`` (per GPU kind and per ``allocator/strategy`` layout, e.g.
  ``default/single``): where the plan's reserved comes from replaying the step's allocation sequence
  through the caching-allocator model (single-rank and DDP SFT: ``OverheadBytes.replayed``), the
  factor on the replay's overhead, reserved - allocated at the step's high-water mark
  (``apply_replay_scale``). The replay has no fitted constant; what it does not model yet (the
  small pool's 2 MiB segments, blocks the planner's coarser sequence splits differently, a
  library's own caching) shows as a residual of measured over planned reserved that is specific to
  the GPU, the allocator mode and the layout: this factor is that residual, learnt from the user's
  own records. Scaling the overhead, not reserved, leaves the allocated figure (the mechanism
  terms, measured within 0.5%) untouched, and a factor, not bytes, carries across model sizes.

Neither touches a mechanism term (weights, activations, logits, rounding, the replayed sequence).

Fit (``fit_memory``): per GPU kind (the share) or per GPU kind and layout (the replay scale), the
value minimising the error of the step's reserved peak (forward, backward, optimizer step) over
the fit records, the error being ``log(planned reserved / measured reserved)``: for the share the
mean square (the large misses matter), for the replay scale the mean absolute value (a record
taken in an unusual state, such as the first step a process runs, is one outlier the fit must not
follow). Search: a grid over 0..4 in steps of 0.01, refined to 0.0005 around the best point.
Deterministic. A fit is refused when it makes the held-out records of its group worse: a larger
median |error| or a larger rms error.

Inputs: run records whose ``record.phases`` hold measured ``reserved_bytes`` (``trainfit.watch``
on CUDA), and the raw output of ``benchmarks/gpu_calibrate.py measure`` (one record per training
case; ``trainfit.accuracy.gpu.card_dict`` gives its card, with ``hardware.allocator:
expandable_segments`` when it was measured under ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``).

Pure Python: no torch import.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Any

from trainfit.errors import CardError, TrainfitError

FIELD = "fragmentation_share"
REPLAY_FIELD = "reserved_replay_scale"
MEMORY_FIELDS = {FIELD: "float", REPLAY_FIELD: "layouts"}
"""Calibration fields that are memory constants (not ``DeviceRates`` fields)."""
GRID_MAX = 4.0
GRID_STEP, FINE_STEP = 0.01, 0.0005
FINE_POINTS = 20
"""The refinement tries ``FINE_POINTS`` fine steps either side of the grid's best point."""
VALUE_MIN, VALUE_MAX = GRID_STEP, GRID_MAX + FINE_POINTS * FINE_STEP
"""What ``_fit_group`` can produce for either constant (0.01 .. 4.01): a calibration file's memory constants are
checked against it (``trainfit.calibration.file``), so a hand-written 50 or 1e-05 is refused, not applied."""
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
    """One fitted memory constant: the fragmentation share of a GPU kind, or the replay scale of a
    GPU kind and layout (``field``, ``layout``). ``share_before`` / ``share_after``: its value."""

    gpu_id: str
    share_before: float
    share_after: float
    fit_before: ErrorStats
    fit_after: ErrorStats
    held_before: ErrorStats | None
    held_after: ErrorStats | None
    residuals: tuple[tuple[str, float], ...]
    """(record, log error after the fit) for every fit record."""
    field: str = FIELD
    layout: str | None = None
    """``allocator/strategy`` of the records (the replay scale's key); None for the share."""

    @property
    def label(self) -> str:
        return "fragmentation share" if self.field == FIELD else f"reserved replay scale ({self.layout})"

    @property
    def refused(self) -> bool:
        """The held-out records got worse (median |error| or rms of the log error): not written."""
        h0, h1 = self.held_before, self.held_after
        return h0 is not None and h1 is not None and (h1.rms > h0.rms or h1.median_abs > h0.median_abs)


MemoryFit = FragmentationFit


def default_share() -> float:
    from trainfit.memory.overhead import FRAGMENTATION_OF_TRANSIENTS

    return FRAGMENTATION_OF_TRANSIENTS


def layout_of(card: Any) -> str:
    """``allocator/strategy`` of a card (``default/single``): the replay scale's key."""
    return f"{card.hardware.allocator.value}/{card.parallel.strategy.value}"


def apply_fragmentation(plan: Any, share: float) -> Any:
    """``plan`` with every phase's fragmentation term at ``share`` (instead of the default) and its
    reserved and device figures moved by the difference; load phases (no transient) and phases whose
    reserved comes from replaying the step's allocations through the caching-allocator model
    (``OverheadBytes.replayed``: ``apply_replay_scale``) unchanged."""
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

    return _map_phases(plan, fix)


def replay_overhead(plan: Any) -> float | None:
    """Reserved - allocated at the replayed step's high-water mark (the phases with
    ``OverheadBytes.replayed``); None when the plan has no replayed phase."""
    rep = [p for p in plan.phases if getattr(p.overhead, "replayed", False)]
    if not rep:
        return None
    return max(p.reserved for p in rep) - max(p.allocated for p in rep)


def apply_replay_scale(plan: Any, scale: float) -> Any:
    """``plan`` with the replay's overhead (``replay_overhead``) times ``scale``: every replayed phase's
    reserved and device figures move by ``(scale - 1) x overhead`` (reserved never below the phase's
    allocated); phases whose reserved does not come from the replay unchanged."""
    overhead = replay_overhead(plan)
    if scale == 1.0 or overhead is None:
        return plan
    delta = (scale - 1.0) * overhead

    def fix(p: Any) -> Any:
        if not getattr(p.overhead, "replayed", False):
            return p
        reserved = max(p.reserved + delta, p.allocated)
        moved = reserved - p.reserved
        rounding = min(p.overhead.rounding, reserved - p.allocated)
        return replace(p, reserved=reserved, device=p.device + moved,
                       overhead=replace(p.overhead, rounding=rounding, fragmentation=reserved - p.allocated - rounding))

    return _map_phases(plan, fix)


def _map_phases(plan: Any, fix: Any) -> Any:
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


def records_from_gpu_raw(data: Any, *, where: str, notes: list[str] | None = None) -> list[MemoryRecord]:
    """One record per measured training-step case (log-prob cases and failed cases skipped). A case whose
    phases lack ``reserved`` (a ``--dry-run`` on the CPU writes empty phases) is skipped, with a note
    appended to ``notes`` when given."""
    from trainfit.accuracy.gpu import card_dict, label
    from trainfit.spec.card import load_card_dict

    conf = str(data["versions"].get("alloc_conf") or "")
    if conf not in ("", "default", "expandable_segments:True"):
        raise CardError(f"{where}: measured under PYTORCH_CUDA_ALLOC_CONF={conf}; the plan models the default caching "
                        f"allocator and expandable_segments:True only")
    out = []
    for case in data["cases"]:
        m = case.get("measured")
        if not m or case.get("pass_kind") != "train_step" or not all(p in m.get("phases", {}) for p in TRAIN_PHASES):
            continue
        if not all(isinstance(m["phases"][p], dict) and "reserved" in m["phases"][p] for p in TRAIN_PHASES):
            if notes is not None:
                notes.append(f"{where}: {label(case)}: no reserved bytes in its phases (skipped)")
            continue
        cd = card_dict(case)
        if conf == "expandable_segments:True":
            cd["hardware"]["allocator"] = "expandable_segments"
        try:
            card = load_card_dict(cd)
        except TrainfitError as exc:
            raise CardError(f"{where}: case {label(case)}: {exc}") from None
        out.append(MemoryRecord(card=card, reserved_bytes=float(max(m["phases"][p]["reserved"] for p in TRAIN_PHASES)),
                                where=f"{where}: {label(case)}", step_s=m.get("step_s")))
    return out


def memory_record(card: Any, rec: dict[str, Any], *, where: str) -> MemoryRecord | None:
    """The reserved step peak of a watch record measured on CUDA; None for records without it."""
    rows = rec.get("phases")
    from trainfit.watch.compare import CUDA, checked_watch, watch_device

    if not isinstance(rows, list) or watch_device(checked_watch(rec.get("watch"), what=f"calibrate: {where}")) != CUDA:
        return None
    vals = [r["measured"]["reserved_bytes"] for r in rows if isinstance(r, dict) and r.get("phase") in TRAIN_PHASES
            and isinstance(r.get("measured"), dict) and isinstance(r["measured"].get("reserved_bytes"), (int, float))]
    if not vals:
        return None
    return MemoryRecord(card=card, reserved_bytes=float(max(vals)), where=where, step_s=rec.get("step_s"))


# ------------------------------------------------------------------ the fit

def fit_memory(records: list[MemoryRecord], held_out: list[MemoryRecord], base: Any) -> tuple[list[FragmentationFit], list[str]]:
    """Every memory constant ``records`` can fit (module docstring), each with the errors before and
    after on its fit records and on the held-out records of its group; and notes on records that
    fit nothing. Records are planned without any calibration (each constant is set absolutely)."""
    from trainfit.plan import gpu_of, make_plan

    def groups(rs: list[MemoryRecord]) -> dict[tuple[str, str, str | None], list[tuple[MemoryRecord, Any]]]:
        out: dict[tuple[str, str, str | None], list[tuple[MemoryRecord, Any]]] = {}
        for r in rs:
            plan = make_plan(r.card)
            if replay_overhead(plan) is not None and _train_replayed(plan):
                key = (gpu_of(r.card).id, REPLAY_FIELD, layout_of(r.card))
            elif uses_share(plan):
                key = (gpu_of(r.card).id, FIELD, None)
            else:
                continue
            out.setdefault(key, []).append((r, plan))
        return out

    fit_groups, held_groups = groups(records), groups(held_out)
    fits = [_fit_group(gpu_id, field, layout, pairs, held_groups.get((gpu_id, field, layout), []), base)
            for (gpu_id, field, layout), pairs in sorted(fit_groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or ""))]
    used = {r.where for pairs in fit_groups.values() for r, _ in pairs}
    unused = [r.where for r in records if r.where not in used]
    notes = [(f"reserved-memory records: {len(unused)} of {len(records)} have no fitted constant in their planned "
              f"reserved (e.g. {unused[0]}): not fitted")] if unused else []
    return fits, notes


def fit_fragmentation(records: list[MemoryRecord], held_out: list[MemoryRecord], base: Any) -> list[FragmentationFit]:
    """``fit_memory``'s fits (the notes dropped)."""
    return fit_memory(records, held_out, base)[0]


def _fit_group(gpu_id: str, field: str, layout: str | None, fit_plans: list[tuple[MemoryRecord, Any]],
               held_plans: list[tuple[MemoryRecord, Any]], base: Any) -> FragmentationFit:
    if field == FIELD:
        before = _share_of(base, gpu_id)
        apply, per_record = apply_fragmentation, (lambda e: e * e)
    else:
        before = _replay_scale_of(base, gpu_id, layout or "")
        apply, per_record = apply_replay_scale, abs

    def errors(pairs: list[tuple[MemoryRecord, Any]], value: float) -> list[float]:
        return [math.log(step_reserved(apply(p, value)) / r.reserved_bytes) for r, p in pairs]

    def loss(value: float) -> float:
        return statistics.fmean(per_record(e) for e in errors(fit_plans, value))

    lo = GRID_STEP  # both constants are positive (a calibration file holds positive numbers only)
    grid = [lo + i * GRID_STEP for i in range(int((GRID_MAX - lo) / GRID_STEP) + 1)]
    best = min(grid, key=lambda v: (loss(v), abs(v - before)))
    fine = [best + i * FINE_STEP for i in range(-FINE_POINTS, FINE_POINTS + 1) if best + i * FINE_STEP >= lo]
    after = round(min(fine, key=lambda v: (loss(v), abs(v - before))), 4)
    return FragmentationFit(
        gpu_id=gpu_id, share_before=before, share_after=after, field=field, layout=layout,
        fit_before=ErrorStats.of(errors(fit_plans, before)), fit_after=ErrorStats.of(errors(fit_plans, after)),
        held_before=ErrorStats.of(errors(held_plans, before)) if held_plans else None,
        held_after=ErrorStats.of(errors(held_plans, after)) if held_plans else None,
        residuals=tuple((r.where, e) for (r, _), e in zip(fit_plans, errors(fit_plans, after))))


def _train_replayed(plan: Any) -> bool:
    return any(getattr(p.overhead, "replayed", False) for p in plan.phases
               if _RL_TRAIN.get(p.phase.value, p.phase.value) in TRAIN_PHASES)


def uses_share(plan: Any) -> bool:
    """Whether the plan's step reserved figure depends on the fragmentation share."""
    return step_reserved(apply_fragmentation(plan, 2 * default_share())) != step_reserved(plan)


def _share_of(cal: Any, gpu_id: str) -> float:
    entry = cal.device(gpu_id) if cal is not None else None
    return float(entry.memory_overrides().get(FIELD, default_share())) if entry is not None else default_share()


def _replay_scale_of(cal: Any, gpu_id: str, layout: str) -> float:
    return float(replay_scales(cal, gpu_id).get(layout, 1.0))


def replay_scales(cal: Any, gpu_id: str) -> dict[str, float]:
    """``layout -> factor`` of the calibration's ``reserved_replay_scale`` for ``gpu_id`` ({} when none)."""
    entry = cal.device(gpu_id) if cal is not None else None
    return dict(entry.memory_overrides().get(REPLAY_FIELD, ())) if entry is not None else {}
