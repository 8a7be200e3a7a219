"""Measured generation phases of RL runs -> a factor on the vLLM engine's host constants.

An RL run record (``method: ppo`` or ``grpo``) may carry, beside or instead of ``record.step_s``:

``record.phases_s.generation``
    Measured seconds of the generation phase per step (steady state, the median of several steps): what verl
    logs as ``timing_s/gen`` or NeMo RL's ``generation`` timer.

The planned figure it is compared with is the plan's ``generation`` phase (prefill, decode, preemption
recompute of the rollout engines). verl's synchronous ``timing_s/gen`` also covers the weight sync into the
engine and its wake / sleep (``generate_sequences`` runs inside the rollout sharding manager, which loads the
weights and wakes the engine on entry and puts it to sleep on exit: volcengine/verl
``verl/trainer/ppo/ray_trainer.py`` ``_timer("gen")`` and ``verl/workers/sharding_manager/fsdp_vllm.py``
``__enter__``/``__exit__`` @8e7780f5ee2021cc06c248b7cf87cf31200a38fd and
@2c8b2b995f36a7cd159b5a9beb5d5ed37cae0fc1; ``benchmarks/step_times.py`` ``GENERATION_TIMER_SCOPE``), so for a
``preset: verl`` card without ``rollout.async_mode`` the plan's ``weight_sync`` and ``sleep_wake`` phases are added.

The fit, per GPU kind (at least 2 such records): one factor on the engine's fitted host constants together
(``DeviceRates.engine_s_per_sequence``, ``engine_v0_s_per_sequence`` and ``frontend_s_per_step``: the
per-sequence host work of vLLM's V1 core and V0 engine and the V1 in-process frontend's per-step constant,
``compute.decode_step`` "The host constants, per path"; they differ by host CPU and vLLM release), applied to the
rates the plan would use otherwise, minimising the median over the records of ``|log(planned / measured)|`` of
the generation phase (ties: the smaller mean, then the factor nearest 1), by the run-record fit's deterministic
grid and compass search (``records._search``). Only the constants the records' generation depends on are
written (a V1-only set of records leaves the V0 constant alone); with none, nothing is fitted. The measured
per-step constant ``engine_s_per_step`` (a published batch-1 TPOT's residual) and the CPU-measured frontend
per-sequence figures are not scaled; a calibration file may still set them by hand.

Pure Python: no torch import.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainfit.calibration.apply import rates_for
from trainfit.calibration.file import Calibration
from trainfit.calibration.records import MedianLogErrors
from trainfit.errors import CardError

PHASES_KEY = "phases_s"
GENERATION_KEY = "generation"
ENGINE_FIELDS = ("engine_s_per_sequence", "engine_v0_s_per_sequence", "frontend_s_per_step")
"""The DeviceRates fields the one factor scales (module docstring)."""
MIN_RECORDS = 2
VERL_GEN_TIMER_ALSO = ("weight_sync", "sleep_wake")
"""Plan phases verl's synchronous ``timing_s/gen`` also covers (module docstring)."""

PredictGeneration = Callable[[Any, Calibration | None], float | None]
"""(run card, calibration) -> planned seconds of the generation phase; default ``planned_generation_s``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class EngineFit(MedianLogErrors):
    """What the engine fit found for one GPU kind. Errors are median ``|log(planned/measured)|`` of the generation."""

    gpu_id: str
    records: int
    engine_scale: float
    median_log_error_before: float
    median_log_error_after: float
    fitted: tuple[str, ...]
    """The DeviceRates fields written (the records' generation depends on them)."""
    notes: tuple[str, ...] = ()


def generation_of(record: dict[str, Any], at: str) -> float | None:
    """``record.phases_s.generation`` checked (None when the record has no ``phases_s``); CardError naming the field."""
    phases = record.get(PHASES_KEY)
    if phases is None:
        return None
    if not isinstance(phases, dict) or set(phases) - {GENERATION_KEY}:
        got = sorted(phases) if isinstance(phases, dict) else repr(phases)
        raise CardError(f"{at}: record.{PHASES_KEY} must be a mapping with '{GENERATION_KEY}' (measured seconds of the "
                        f"generation phase per step), got {got}")
    gen = phases.get(GENERATION_KEY)
    if isinstance(gen, bool) or not isinstance(gen, (int, float)) or not gen > 0 or math.isinf(gen):
        raise CardError(f"{at}: record.{PHASES_KEY}.{GENERATION_KEY} must be the measured seconds of the generation "
                        f"phase per step (a positive number), got {gen!r}")
    return float(gen)


def check_rl(card: Any, at: str) -> None:
    """CardError when a record with a generation time is not an RL card (it has no generation phase)."""
    from trainfit.spec.enums import Method

    if card.method not in (Method.PPO, Method.GRPO):
        raise CardError(f"{at}: record.{PHASES_KEY}.{GENERATION_KEY} is for RL records (method ppo or grpo); this "
                        f"card's method is {card.method.value}, which has no generation phase")


def planned_generation_s(card: Any, calibration: Calibration | None) -> float | None:
    """The plan's generation phase as the framework's timer reports it (module docstring); None without one."""
    from trainfit.plan import make_plan
    from trainfit.spec.enums import AsyncMode

    parts = make_plan(card, calibration=calibration).time_parts or {}
    if "generation" not in parts:
        return None
    also = VERL_GEN_TIMER_ALSO if card.preset == "verl" and card.rollout.async_mode is AsyncMode.NONE else ()
    return parts["generation"] + sum(parts.get(k, 0.0) for k in also)


def fit_engine(records: list[Any], base: Calibration | None, *, predict: PredictGeneration | None = None,
               ) -> tuple[dict[str, dict[str, float]], list[EngineFit], list[str]]:
    """Per GPU kind with at least 2 records holding ``generation_s``: the fitted engine constants
    (``{gpu_id: {field: value}}``, to merge over ``base``), the fit reports and notes (kinds not fitted)."""
    from trainfit.plan import gpu_of

    predict = predict or planned_generation_s
    by_gpu: dict[str, list[Any]] = {}
    for r in records:
        if r.generation_s is not None:
            by_gpu.setdefault(gpu_of(r.card).id, []).append(r)
    rates, fits, notes = {}, [], []
    for gpu_id in sorted(by_gpu):
        rs = by_gpu[gpu_id]
        if len(rs) < MIN_RECORDS:
            notes.append(f"{gpu_id} engine fit: {len(rs)} RL record with a generation time, at least {MIN_RECORDS} "
                         "needed: not fitted")
            continue
        fitted, report = _fit_one(gpu_of(rs[0].card), rs, base, predict)
        if fitted:
            rates[gpu_id] = fitted
        fits.append(report)
    return rates, fits, notes


def _fit_one(gpu: Any, records: list[Any], base: Calibration | None,
             predict: PredictGeneration) -> tuple[dict[str, float], EngineFit]:
    from trainfit.calibration.records import _search, _with_device

    start = rates_for(gpu, base)
    base_values = {f: getattr(start, f) for f in ENGINE_FIELDS}

    def errors(x: float, names: tuple[str, ...]) -> list[float]:
        cal = _with_device(base, gpu.id, {f: base_values[f] * 2**x for f in names})
        out = []
        for r in records:
            pred = predict(r.card, cal)
            if pred is None or not pred > 0:
                raise CardError(f"{r.where}: the plan has no generation phase for this card (gpu '{gpu.id}'); it "
                                "cannot calibrate the engine")
            out.append(math.log(pred / r.generation_s))
        return out

    at_one = errors(0.0, ())
    used = tuple(f for f in ENGINE_FIELDS if errors(1.0, (f,)) != at_one)
    cache: dict[float, list[float]] = {}

    def signed(x: float) -> list[float]:
        if x not in cache:
            cache[x] = errors(x, used)
        return cache[x]

    def objective(x: float, _y: float = 0.0) -> tuple[float, float, float]:
        e = [abs(v) for v in signed(x)]
        return (statistics.median(e), statistics.fmean(e), abs(x))

    def squares(x: float, _y: float = 0.0) -> tuple[float, float]:
        return (statistics.fmean(v * v for v in signed(x)), abs(x))

    x = _search(objective, squares, free_x=True, free_y=False)[0] if used else 0.0
    notes = () if used else ((f"{gpu.id} engine fit: the generation phase does not depend on the engine host "
                              f"constants ({', '.join(ENGINE_FIELDS)}; no vLLM engine?): not fitted"),)
    report = EngineFit(gpu_id=gpu.id, records=len(records), engine_scale=2**x,
                       median_log_error_before=objective(0.0)[0], median_log_error_after=objective(x)[0],
                       fitted=used, notes=notes)
    return {f: base_values[f] * 2**x for f in used}, report


def median_generation_error(records: list[Any], cal: Calibration | None) -> float:
    """Median |log(planned / measured generation seconds)| over the records that hold one (0 when none)."""
    errs = []
    for r in records:
        if r.generation_s is None:
            continue
        pred = planned_generation_s(r.card, cal)
        if pred:
            errs.append(abs(math.log(pred / r.generation_s)))
    return statistics.median(errs) if errs else 0.0
