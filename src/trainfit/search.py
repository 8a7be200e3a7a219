"""Search the knobs a card leaves open: enumerate -> prune -> plan -> rank (pure, deterministic).

A *space* maps dotted card keys (``parallel.strategy``, ``rollout.tensor_parallel``...) to the
values to try. Pinned keys (those the user set) are not varied. Each combination is applied to
the base card, validated and planned; invalid combinations (e.g. a tensor-parallel size that
does not divide the heads) are counted and skipped, never silently ranked.

Ranking: plans that fit first; then fewest GPUs; then shortest step; then lowest cost per hour;
ties broken by the knob settings' text, so the order is deterministic. The Pareto front marks
fitting rows that no other fitting row beats on both step time and cost per step.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import time
from dataclasses import dataclass
from typing import Any

from trainfit.errors import TrainfitError
from trainfit.spec.dotted import updated
from trainfit.spec.enums import Stack

DEFAULT_LIMIT = 200_000
"""Largest space searched without pinning knobs."""


@dataclass(frozen=True, slots=True)
class Row:
    knobs: dict[str, Any]
    fits: bool
    gpus: int
    gpu: str
    peak_device_bytes: float
    headroom_bytes: float
    peak_phase: str
    step_seconds: float | None
    cost_per_hour: float | None
    currency: str | None
    step_unavailable: str | None = None
    """Why the (closest) attempt has no step time (``Plan.step_unavailable``: its rollout engine cannot start)."""
    host_ram_bytes: float = 0.0
    tokens_per_s: float | None = None
    pareto: bool = False
    tokens_per_step: float | None = None
    price_id: str = ""
    billed_gpus: int | None = None
    """GPUs paid for (``Plan.billed_gpus``): ``gpus`` where single GPUs are rented, every GPU of each whole
    instance the row occupies where its price is for an instance; None without a price."""
    billing_note: str = ""
    """"1 of 8 GPUs of p5.48xlarge used: billed for 8" where the row pays for idle GPUs; else empty."""
    run_steps: int | None = None
    """Steps in the run (``fit --steps``, or ``--tokens`` / tokens per step): optimizer steps, RL steps for PPO and
    GRPO (``objective.Goal.steps``); None without a run."""
    run_seconds: float | None = None
    cost_per_run: float | None = None
    """In ``currency``."""
    within_limits: bool = True
    """Keeps ``fit --budget`` and ``--deadline``."""
    rank_currency: str | None = None
    rank_cost: float | None = None
    """The objective's cost (per run with a run length, else per step) in ``rank_currency``; None: unpriced or no rate."""
    rank_cost_per_step: float | None = None
    parallel: tuple[tuple[str, Any], ...] = ()
    """The plan's model-parallel layout: (tensor_parallel, pipeline_parallel, context_parallel,
    context_parallel_kind, expert_parallel, sequence_parallel) as (name, value) pairs."""
    stack: Stack | None = None
    """The software stack the step time stands for (``plan.time.stack_of``: eager, compile or megatron)."""
    floor: bool = False
    """Planned inside ``overheads.replay_floor`` where the allocator replay would run: ``fits``,
    ``peak_device_bytes`` and ``headroom_bytes`` are bounds (see ``_evaluate``), never shown; ``fit``
    replans such a row with the replay before it can rank first in its (GPU kind, count)."""

    @property
    def cost_per_step(self) -> float | None:
        if self.cost_per_hour is None or self.step_seconds is None:
            return None
        return self.cost_per_hour * self.step_seconds / 3600


@dataclass(frozen=True, slots=True)
class SearchResult:
    rows: tuple[Row, ...]
    evaluated: int
    invalid: int
    seconds: float

    @property
    def best(self) -> Row | None:
        return self.rows[0] if self.rows and self.rows[0].fits else None


def knob_text(knobs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(knobs.items()))


def space_size(space: dict[str, list[Any]]) -> int:
    n = 1
    for values in space.values():
        n *= max(1, len(values))
    return n


PARALLEL_MIN = 1_000
"""Spaces at least this large are split over the CPU cores (forked workers inherit the warm caches)."""


PEAK_TIE_BYTES = 1024
"""``Plan.peak`` picks among phases within this much of the largest device figure."""


REFUSALS_KEPT = 2
"""Distinct refusal lines a search keeps: two tell whether every refused combination gave one and the same reason."""


def _evaluate(
    base: dict[str, Any], keys: list[str], combos: list[tuple], calibration: Any = None, *, floor: bool = False,
    refusals: set[str] | None = None,
) -> tuple[list[Row], int]:
    """Plan each combination (with ``calibration``'s rates); invalid ones (a card the schema refuses)
    are counted, not ranked. ``refusals``: a set that collects their error lines, up to ``REFUSALS_KEPT``
    distinct ones.

    ``floor``: plan inside ``overheads.replay_floor`` (no allocator replay). A row whose plan would have
    replayed is marked ``floor``: its peak is the floor plan's less ``PEAK_TIE_BYTES`` and ``fits`` is
    judged on that, so neither can be above (or, for ``fits``, False where) the replayed plan's;
    every other field is the replayed plan's already (the replay moves reserved bytes only)."""
    from contextlib import nullcontext

    from trainfit.plan import make_plan
    from trainfit.plan.overheads import replay_floor
    from trainfit.plan.time import stack_of
    from trainfit.spec.card import load_card_dict

    rows: list[Row] = []
    invalid = 0
    for combo in combos:
        knobs = dict(zip(keys, combo))
        with replay_floor() if floor else nullcontext() as floored:
            try:
                plan = make_plan(load_card_dict(updated(base, knobs)), calibration=calibration)
            except (TrainfitError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
                invalid += 1
                if refusals is not None and len(refusals) < REFUSALS_KEPT:
                    refusals.add(str(exc))
                continue
        low = bool(floored)
        peak = plan.peak.device - (PEAK_TIE_BYTES if low else 0)
        fits = plan.fits or (low and peak <= plan.capacity_bytes and plan.host_ram_fits
                             and (plan.rollout is None or plan.rollout.engine_fits))
        rows.append(
            Row(
                knobs=knobs,
                fits=fits,
                gpus=plan.card.world_size,
                gpu=plan.gpu.id,
                peak_device_bytes=peak,
                headroom_bytes=plan.capacity_bytes - peak,
                peak_phase=plan.peak.phase.value,
                step_seconds=plan.step_seconds,
                step_unavailable=plan.step_unavailable,
                cost_per_hour=plan.cost_per_hour,
                currency=plan.price.currency if plan.price is not None else None,
                host_ram_bytes=plan.host_ram_bytes,
                tokens_per_s=plan.tokens_per_s,
                tokens_per_step=plan.tokens_per_step,
                price_id=plan.price.id if plan.price is not None else "",
                billed_gpus=plan.billed_gpus, billing_note=plan.billing_note,
                parallel=parallel_of(plan.card.parallel),
                stack=stack_of(plan.card),
                floor=low,
            )
        )
    return rows, invalid


def parallel_of(par: Any) -> tuple[tuple[str, Any], ...]:
    """A card's model-parallel sizes (``ParallelSection``) as (name, value) pairs."""
    return (("tensor_parallel", par.tensor_parallel), ("pipeline_parallel", par.pipeline_parallel),
            ("context_parallel", par.context_parallel), ("context_parallel_kind", par.context_parallel_kind.value),
            ("expert_parallel", par.expert_parallel), ("sequence_parallel", par.sequence_parallel))


def layout_text(parallel: tuple[tuple[str, Any], ...]) -> str:
    """``tp 8 sp, pp 2, cp 2 ulysses, ep 4`` (sizes above 1 only); ``none`` without model parallelism."""
    p = dict(parallel)
    parts = []
    if p.get("tensor_parallel", 1) > 1:
        parts.append(f"tp {p['tensor_parallel']}" + (" sp" if p.get("sequence_parallel") else ""))
    if p.get("pipeline_parallel", 1) > 1:
        parts.append(f"pp {p['pipeline_parallel']}")
    if p.get("context_parallel", 1) > 1:
        parts.append(f"cp {p['context_parallel']} {p.get('context_parallel_kind', 'ring')}")
    if p.get("expert_parallel", 1) > 1:
        parts.append(f"ep {p['expert_parallel']}")
    return ", ".join(parts) or "none"


_WORK: tuple[dict[str, Any], list[str], list[tuple], Any] | None = None


def _worker(bounds: tuple[int, int]) -> tuple[list[Row], int]:
    assert _WORK is not None
    base, keys, combos, calibration = _WORK
    return _evaluate(base, keys, combos[bounds[0]:bounds[1]], calibration)


def search(
    base: dict[str, Any],
    space: dict[str, list[Any]],
    *,
    pinned: frozenset[str] = frozenset(),
    limit: int = DEFAULT_LIMIT,
    workers: int | None = None,
    calibration: Any = None,
) -> SearchResult:
    """Plan every combination of ``space`` applied to the card dict ``base``, each with
    ``calibration`` (a ``trainfit.calibration.Calibration``; None: the default rates).

    Large spaces run on ``workers`` processes (default: every CPU core), forked after the first
    combinations warm the per-shape caches; the result does not depend on how the work is split.
    """
    free = {k: v for k, v in space.items() if k not in pinned}
    size = space_size(free)
    if size > limit:
        raise TrainfitError(
            f"fit: the search space has {size:,} combinations (limit {limit:,}); pin some knobs, e.g. --gpu or --scope"
        )
    keys = sorted(free)
    t0 = time.perf_counter()
    combos = list(itertools.product(*(free[k] for k in keys)))
    n_workers = workers if workers is not None else (os.cpu_count() or 1)
    if n_workers > 1 and len(combos) >= PARALLEL_MIN and "fork" in multiprocessing.get_all_start_methods():
        head = combos[:16]
        rows, invalid = _evaluate(base, keys, head, calibration)  # warm the caches the workers inherit
        global _WORK
        _WORK = (base, keys, combos, calibration)
        step = -(-(len(combos) - len(head)) // n_workers)
        bounds = [(i, min(i + step, len(combos))) for i in range(len(head), len(combos), step)]
        try:
            with multiprocessing.get_context("fork").Pool(n_workers) as pool:
                for part_rows, part_invalid in pool.map(_worker, bounds):
                    rows += part_rows
                    invalid += part_invalid
        finally:
            _WORK = None
    else:
        rows, invalid = _evaluate(base, keys, combos, calibration)
    seconds = time.perf_counter() - t0
    rows.sort(key=_rank_key)
    return SearchResult(rows=tuple(_mark_pareto(rows)), evaluated=len(rows) + invalid, invalid=invalid, seconds=seconds)


def _rank_key(r: Row) -> tuple:
    """Fitting rows: fewest GPUs, fastest, cheapest, most headroom. Rows that do not fit: fewest
    GPUs, then the smallest peak (the closest attempt)."""
    inf = float("inf")
    if not r.fits:
        return (True, r.gpus, r.peak_device_bytes, 0.0, 0.0, knob_text(r.knobs))
    return (
        False,
        r.gpus,
        r.step_seconds if r.step_seconds is not None else inf,
        r.cost_per_hour if r.cost_per_hour is not None else inf,
        -r.headroom_bytes,
        knob_text(r.knobs),
    )


def _mark_pareto(rows: list[Row]) -> list[Row]:
    """Fitting rows not beaten on both step time and cost per step by another fitting row."""
    from dataclasses import replace

    fit = [r for r in rows if r.fits and r.step_seconds is not None]

    def cost(r: Row) -> float:
        return r.cost_per_step if r.cost_per_step is not None else r.gpus * (r.step_seconds or 0.0)

    out = []
    for r in rows:
        if not (r.fits and r.step_seconds is not None):
            out.append(r)
            continue
        beaten = any(
            o is not r and o.step_seconds <= r.step_seconds and cost(o) <= cost(r)
            and (o.step_seconds < r.step_seconds or cost(o) < cost(r))
            for o in fit
        )
        out.append(replace(r, pareto=not beaten))
    return out


SFT_SPACE: dict[str, list[Any]] = {
    "parallel.strategy": ["fsdp", "zero2", "ddp"],
    "parallel.offload": ["none", "optimizer"],
    "parallel.gradient_checkpointing": [True, False],
    "loss.chunked": [False, True],
    "scope": ["full", "lora", "qlora"],
}
"""SFT-like knobs (``search``'s reference space)."""


# `fit` lives in trainfit.fit_search; its names are served from here too, on first use (no import cycle)
_FIT_NAMES = frozenset({
    "_PRICE_KEYS", "GPU_COUNTS", "MEMORY_ONLY", "RL_SPACE", "SFT_FIT_SPACE", "FitResult", "_batch_options", "_hardware",
    "card_price", "fit", "fit_counts", "flat_keys", "replace_knobs", "rl_combos", "sft_combos", "smallest_sync",
})


def __getattr__(name: str) -> Any:
    if name in _FIT_NAMES:
        from trainfit import fit_search

        return getattr(fit_search, name)
    raise AttributeError(f"module 'trainfit.search' has no attribute {name!r}")
