"""Measured step times of real runs -> a scale on the matmul rate and on the host cost per kernel.

A run record is what ``trainfit record`` writes (``trainfit.preflight.record``): a run card in
full plus a top-level ``record:`` mapping. Calibration needs one more field there:

``record.step_s`` (required)
    Measured seconds per optimizer step in steady state (after warm-up; the median of several
    steps), for the whole card: every micro-batch of the gradient accumulation, on the card's
    ``hardware.gpu`` x ``gpus_per_node`` x ``nodes``.

``record.phases_s.generation`` (RL records, beside or instead of ``step_s``)
    Measured seconds of the generation phase per step: it calibrates the vLLM engine's host constants
    (``trainfit.calibration.engine``), not the factors below.

Everything else is the card (``model``, ``method``, ``scope``, ``hardware.gpu`` -- a catalog id,
not ``custom`` --, ``parallel``, ``batch``, ``attention``...; sections left out take the card
defaults). A file holds one record, or a YAML/JSON list of them.

The fit, per GPU kind (at least 2 records): factors ``a`` on ``matmul_flops_per_s`` and ``b`` on
``host_s_per_forward_kernel`` and ``host_s_per_backward_kernel`` (one factor for both), applied
to the rates the plan would use otherwise (defaults, or the calibration being extended), that
minimise the median over the records of ``|log(predicted / measured)|`` (ties: the smaller mean,
then the factors nearest 1). Search: a grid of factors 2^-4..2^4 at half-octave steps; compass
searches (8 directions, the step halved from 2^(1/4) down to 2^(1/256), about 0.3 %, within
2^-6..2^6) from the best grid point and from the least-squares fit of the log errors; the better
end wins. The matmul rate stays at most what a calibration file holds (PEAK_TOLERANCE x the datasheet
dense 16-bit peak, ``file._check_range``): a fit that reaches it says "matmul scale hit its bound" in its
notes, naming the records, and keeps the other fitted groups. A factor the
step time does not depend on (the plan's time model does not read that rate) stays 1 and is not
written. Deterministic.

Pure Python: no torch import.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from datetime import date
from typing import Any, Callable

from trainfit.calibration.apply import rates_for
from trainfit.calibration.file import PEAK_TOLERANCE, Calibration, DeviceCalibration
from trainfit.errors import CardError, TrainfitError

RECORD_KEY = "record"
STEP_KEY = "step_s"
MIN_RECORDS = 2
MATMUL_FIELDS = ("matmul_flops_per_s",)
HOST_FIELDS = ("host_s_per_forward_kernel", "host_s_per_backward_kernel")
GRID_LOG2 = tuple(i / 2 for i in range(-8, 9))
STEPS_LOG2 = (0.25, 1 / 16, 1 / 64, 1 / 256)
BOUND_LOG2 = 6.0

Predict = Callable[[Any, Calibration | None], float | None]
"""(run card, calibration) -> predicted seconds per step; default ``make_plan(...).step_seconds``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRecord:
    card: Any
    """The validated RunCard."""
    step_s: float | None
    """Measured seconds per optimizer step (None: the record gives only a generation time)."""
    where: str
    """File (and list index) it came from, for messages."""
    generation_s: float | None = None
    """Measured seconds of the generation phase per step (RL records, ``record.phases_s.generation``)."""


class MedianLogErrors:
    """``median_error_before`` / ``_after`` as fractions, for a fit report holding ``median_log_error_before`` /
    ``_after`` (median ``|log(predicted/measured)|``): the step-time fit's and the engine fit's (``engine.EngineFit``)."""

    __slots__ = ()
    median_log_error_before: float
    median_log_error_after: float

    @property
    def median_error_before(self) -> float:
        """As a fraction: exp(median |log ratio|) - 1."""
        return math.expm1(self.median_log_error_before)

    @property
    def median_error_after(self) -> float:
        return math.expm1(self.median_log_error_after)


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordFit(MedianLogErrors):
    """What the fit found for one GPU kind. Errors are median ``|log(predicted/measured)|``."""

    gpu_id: str
    records: int
    matmul_scale: float
    host_scale: float
    median_log_error_before: float
    median_log_error_after: float
    fitted: tuple[str, ...]
    """The DeviceRates fields written (a factor the step time ignores is not)."""
    notes: tuple[str, ...] = ()


def is_record_data(data: Any) -> bool:
    items = data if isinstance(data, list) else [data]
    return bool(items) and all(isinstance(d, dict) and isinstance(d.get(RECORD_KEY), dict) for d in items)


def record_card(item: dict[str, Any], *, where: str) -> Any:
    """The card of one run record (the mapping less ``record:``) as every calibration path reads it: an old
    record's pcie re-derived as ``load_record`` reads it (``preflight.record.migrate_link``), then resolved as
    ``trainfit plan`` resolves it (``spec.card.resolve_card``), so the step-time fit and the reserved-memory fit
    of one record plan the same hardware link. CardError naming ``where``."""
    from trainfit.preflight.record import migrate_link
    from trainfit.spec.card import resolve_card
    from trainfit.spec.dotted import deep_copy

    card_data = deep_copy({k: v for k, v in item.items() if k != RECORD_KEY})
    try:
        migrate_link(card_data, deep_copy(item[RECORD_KEY]))
        return resolve_card(card_data)
    except TrainfitError as exc:
        raise CardError(f"{where}: {exc}") from None


def records_from_data(data: Any, *, where: str) -> list[RunRecord]:
    """One record (a mapping) or a list of them; CardError naming the file and the field."""
    from trainfit.calibration.engine import check_rl, generation_of

    items = data if isinstance(data, list) else [data]
    out = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]" if isinstance(data, list) else where
        if not isinstance(item, dict) or not isinstance(item.get(RECORD_KEY), dict):
            raise CardError(f"{at}: a run record is a run card with a '{RECORD_KEY}:' mapping holding {STEP_KEY}")
        step = item[RECORD_KEY].get(STEP_KEY)
        generation = generation_of(item[RECORD_KEY], at)
        if (step is not None or generation is None) and not _positive_seconds(step):
            raise CardError(f"{at}: {RECORD_KEY}.{STEP_KEY} must be the measured seconds per optimizer step (a positive "
                            f"number), got {step!r}")
        card = record_card(item, where=at)
        if generation is not None:
            check_rl(card, at)
        out.append(RunRecord(card=card, step_s=None if step is None else float(step), where=at, generation_s=generation))
    return out


def measured_elsewhere(measured: Any, *, gpu_id: str, total_bytes: Any = None) -> str | None:
    """Why a record whose measured device (``record.versions.gpu``, torch's device name; a
    ``gpu_calibrate.py measure`` output's ``versions.gpu``) is another catalog GPU than ``gpu_id``, the
    card's, calibrates nothing of ``gpu_id``; None when the name is absent, unknown to the catalog, or may be
    ``gpu_id`` (the catalog's name matching, ``resolve_gpu``, as the GPU script's output is named). Kinds that
    report one device name (``catalog.gpus.gpus_named``: the 48 GB RTX 4090 reports 'NVIDIA GeForce RTX 4090')
    are told apart by ``total_bytes`` (``versions.gpu_total_bytes``) where the record has it; without it any
    kind of the group is the card's."""
    from trainfit.catalog.gpus import gpus_named, resolve_device

    if not isinstance(measured, str) or not measured.strip():
        return None
    group = resolve_device(measured, total_bytes=total_bytes)
    if not group or gpu_id in {g.id for g in group}:
        return None
    ids = "/".join(g.id for g in group)
    memory = f", {float(total_bytes) / 2**30:.1f} GiB" if len(group) < len(gpus_named(measured)) else ""
    return f"measured on '{measured}' ({ids}{memory}), not the card's {gpu_id}: calibrates no {gpu_id} constant (skipped)"


def _positive_seconds(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and value > 0 and not math.isinf(value)


def fit_records(
    records: list[RunRecord], base: Calibration | None, *, predict: Predict | None = None,
) -> tuple[dict[str, dict[str, float]], list[RecordFit]]:
    """Per GPU kind: the fitted rates (``{gpu_id: {field: value}}``, to merge over ``base``) and
    the fit report, over the records that hold a step time. CardError when a kind has fewer than 2."""
    from trainfit.plan import gpu_of

    predict = predict or _plan_step_seconds
    by_gpu: dict[str, list[RunRecord]] = {}
    for r in records:
        if r.step_s is not None:
            by_gpu.setdefault(gpu_of(r.card).id, []).append(r)
    few = {g: len(rs) for g, rs in by_gpu.items() if len(rs) < MIN_RECORDS}
    if few:
        raise CardError("calibrate: the run-record fit needs at least 2 records per GPU kind; "
                        + ", ".join(f"{g} has {n}" for g, n in sorted(few.items())))
    rates, fits = {}, []
    for gpu_id in sorted(by_gpu):
        fitted, report = _fit_one(gpu_of(by_gpu[gpu_id][0].card), by_gpu[gpu_id], base, predict)
        rates[gpu_id] = fitted
        fits.append(report)
    return rates, fits


def _plan_step_seconds(card: Any, calibration: Calibration | None) -> float | None:
    from trainfit.plan import make_plan

    return make_plan(card, calibration=calibration).step_seconds


def _fit_one(gpu: Any, records: list[RunRecord], base: Calibration | None,
             predict: Predict) -> tuple[dict[str, float], RecordFit]:
    start = rates_for(gpu, base)
    base_matmul = {f: getattr(start, f) for f in MATMUL_FIELDS}
    base_host = {f: getattr(start, f) for f in HOST_FIELDS}
    limit = _matmul_limit(gpu)
    x_max = min(BOUND_LOG2, *(math.log2(limit / v) for v in base_matmul.values())) if limit else BOUND_LOG2

    def trial(x: float, y: float) -> dict[str, float]:
        matmul = {f: v * 2**x for f, v in base_matmul.items()}
        if x >= x_max and limit:  # the bound itself: no rounding past the file's limit
            matmul = {f: min(v, limit) for f, v in matmul.items()}
        return {**matmul, **{f: v * 2**y for f, v in base_host.items()}}

    def errors(x: float, y: float) -> list[float]:
        cal = _with_device(base, gpu.id, trial(x, y))
        out = []
        for r in records:
            pred = predict(r.card, cal)
            if pred is None or not pred > 0:
                raise CardError(f"{r.where}: the plan has no step time for this card (gpu '{gpu.id}'); it cannot calibrate")
            out.append(math.log(pred / r.step_s))
        return out

    cache: dict[tuple[float, float], list[float]] = {}

    def signed(x: float, y: float) -> list[float]:
        if (x, y) not in cache:
            cache[(x, y)] = errors(x, y)
        return cache[(x, y)]

    def objective(x: float, y: float) -> tuple[float, float, float]:
        e = [abs(v) for v in signed(x, y)]
        return (statistics.median(e), statistics.fmean(e), abs(x) + abs(y))

    def squares(x: float, y: float) -> tuple[float, float]:
        return (statistics.fmean(v * v for v in signed(x, y)), abs(x) + abs(y))

    free_x = errors(1.0, 0.0) != errors(0.0, 0.0)
    free_y = errors(0.0, 1.0) != errors(0.0, 0.0)
    x, y = _search(objective, squares, free_x=free_x, free_y=free_y, x_max=x_max)
    fields = (MATMUL_FIELDS if free_x else ()) + (HOST_FIELDS if free_y else ())
    notes = tuple(f"{gpu.id} fit: step time does not depend on {', '.join(fs)}: not fitted"
                  for free, fs in ((free_x, MATMUL_FIELDS), (free_y, HOST_FIELDS)) if not free)
    if free_x and limit and x >= x_max:
        notes += (f"{gpu.id} fit: matmul scale hit its bound (x{2**x_max:.3g}: {limit:.3g} FLOP/s, {PEAK_TOLERANCE:g} x "
                  f"the datasheet dense 16-bit peak, the most a calibration file holds); records "
                  f"{', '.join(r.where for r in records)} ran faster than that rate explains",)
    values = trial(x, y)
    report = RecordFit(gpu_id=gpu.id, records=len(records), matmul_scale=2**x, host_scale=2**y,
                       median_log_error_before=objective(0.0, 0.0)[0], median_log_error_after=objective(x, y)[0],
                       fitted=fields, notes=notes)
    return {f: values[f] for f in fields}, report


def _matmul_limit(gpu: Any) -> float | None:
    """The largest ``matmul_flops_per_s`` a calibration file holds for ``gpu`` (``file._check_range``:
    PEAK_TOLERANCE x the datasheet dense 16-bit peak); None without a datasheet peak."""
    peak = gpu.half_dense_flops_per_s
    return peak * PEAK_TOLERANCE if peak else None


def _search(objective: Callable[[float, float], tuple], squares: Callable[[float, float], tuple], *,
            free_x: bool, free_y: bool, x_max: float = BOUND_LOG2) -> tuple[float, float]:
    """Best of two compass searches on the objective (module docstring): one from the best grid
    point, one from the least-squares fit in log space (a smooth start that a median's kinks do not
    stall). The matmul factor stays at most ``2**x_max`` (the calibration file's limit): the grid
    takes ``x_max`` as its top point when it cuts the grid, and the compass does not step past it."""
    xs = tuple(x for x in GRID_LOG2 if x < x_max) + ((x_max,) if x_max < GRID_LOG2[-1] else ())
    xs = xs if free_x else (0.0,)
    ys = GRID_LOG2 if free_y else (0.0,)
    moves = [(dx, dy) for dx in ((-1, 0, 1) if free_x else (0,)) for dy in ((-1, 0, 1) if free_y else (0,))
             if (dx, dy) != (0, 0)]
    grid_best = min(((x, y) for x in xs for y in ys), key=lambda p: objective(*p))
    smooth = _compass(squares, min(((x, y) for x in xs for y in ys), key=lambda p: squares(*p)), moves)
    ends = [_compass(objective, start, moves, x_max=x_max) for start in (grid_best, smooth)]
    return min(ends, key=lambda p: objective(*p))


def _compass(objective: Callable[[float, float], tuple], start: tuple[float, float],
             moves: list[tuple[int, int]], *, x_max: float = BOUND_LOG2) -> tuple[float, float]:
    """Move to the first better neighbour (8 directions) until none is, halving the step (``STEPS_LOG2``);
    a step past ``x_max`` lands on it."""
    best = start
    for step in STEPS_LOG2:
        improved = True
        while improved:
            improved = False
            for dx, dy in moves:
                cand = (min(best[0] + dx * step, x_max), best[1] + dy * step)
                if cand != best and max(map(abs, cand)) <= BOUND_LOG2 and objective(*cand) < objective(*best):
                    best, improved = cand, True
    return best


def _with_device(base: Calibration | None, gpu_id: str, rates: dict[str, float]) -> Calibration:
    """``base`` with ``rates`` laid over its entry for ``gpu_id`` (no validation: the values are
    positive scalings of valid rates)."""
    devices = {d.gpu_id: d for d in (base.devices if base else ())}
    old = devices[gpu_id].values() if gpu_id in devices else {}
    devices[gpu_id] = DeviceCalibration(gpu_id=gpu_id, rates=tuple(sorted({**old, **rates}.items())))
    return Calibration(created=base.created if base else date.today().isoformat(), devices=tuple(devices[g] for g in sorted(devices)),
                       sources=base.sources if base else (), notes=base.notes if base else (),
                       path=base.path if base else None)
