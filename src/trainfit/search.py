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
from trainfit.spec.dotted import deep_copy, updated

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
    host_ram_bytes: float = 0.0
    tokens_per_s: float | None = None
    pareto: bool = False

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


def _knob_text(knobs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(knobs.items()))


def space_size(space: dict[str, list[Any]]) -> int:
    n = 1
    for values in space.values():
        n *= max(1, len(values))
    return n


PARALLEL_MIN = 1_000
"""Spaces at least this large are split over the CPU cores (forked workers inherit the warm caches)."""


def _evaluate(
    base: dict[str, Any], keys: list[str], combos: list[tuple], calibration: Any = None,
) -> tuple[list[Row], int]:
    """Plan each combination (with ``calibration``'s rates); invalid ones (a card the schema refuses)
    are counted, not ranked."""
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    rows: list[Row] = []
    invalid = 0
    for combo in combos:
        knobs = dict(zip(keys, combo))
        try:
            plan = make_plan(load_card_dict(updated(base, knobs)), calibration=calibration)
        except TrainfitError:
            invalid += 1
            continue
        rows.append(
            Row(
                knobs=knobs,
                fits=plan.fits,
                gpus=plan.card.world_size,
                gpu=plan.gpu.id,
                peak_device_bytes=plan.peak.device,
                headroom_bytes=plan.headroom_bytes,
                peak_phase=plan.peak.phase.value,
                step_seconds=plan.step_seconds,
                cost_per_hour=plan.cost_per_hour,
                currency=plan.price.currency if plan.price is not None else None,
                host_ram_bytes=plan.host_ram_bytes,
                tokens_per_s=plan.tokens_per_s,
            )
        )
    return rows, invalid


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
        return (True, r.gpus, r.peak_device_bytes, 0.0, 0.0, _knob_text(r.knobs))
    return (
        False,
        r.gpus,
        r.step_seconds if r.step_seconds is not None else inf,
        r.cost_per_hour if r.cost_per_hour is not None else inf,
        -r.headroom_bytes,
        _knob_text(r.knobs),
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


# --------------------------------------------------------------------------------------------
# fit: fewest cards per GPU type, then the cheapest/fastest knobs
# --------------------------------------------------------------------------------------------

SFT_SPACE: dict[str, list[Any]] = {
    "parallel.strategy": ["fsdp", "zero2", "ddp"],
    "parallel.offload": ["none", "optimizer"],
    "parallel.gradient_checkpointing": [True, False],
    "loss.chunked": [False, True],
    "scope": ["full", "lora", "qlora"],
}
RL_SPACE: dict[str, list[Any]] = {
    "scope": ["full", "lora", "qlora"],
    "parallel.offload": ["none", "params_and_optimizer"],
    "rollout.placement": ["colocate", "split"],
    "rollout.tensor_parallel": [1, 2, 4, 8],
    "rollout.gpu_memory_utilization": [0.3, 0.5, 0.7, 0.9],
    "rollout.sleep_level": [0, 1],
    "loss.chunked": [False, True],
    "rollout.weight_sync": ["per_parameter", "full_gather"],
    "parallel.gradient_checkpointing": [True, False],
}
GPU_COUNTS = (1, 2, 4, 8, 16, 32, 64)


def flat_keys(data: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for k, v in data.items():
        key = f"{prefix}{k}"
        out.add(key)
        if isinstance(v, dict):
            out |= flat_keys(v, key + ".")
    return out


def _hardware(gpu: str, count: int, price: Any) -> dict[str, Any]:
    hw: dict[str, Any] = {"gpu": gpu, "gpus_per_node": min(count, 8), "nodes": max(1, count // 8)}
    if price is not None:
        hw.update(price_per_gpu_hour=price.per_gpu_hour, currency=price.currency)
    return hw


def fit(
    base: dict[str, Any],
    *,
    gpus: list[str],
    max_gpus: int,
    prices: dict[str, Any] | None = None,
    pinned: frozenset[str] = frozenset(),
    limit: int = DEFAULT_LIMIT,
    progress: Any = None,
    global_batch: int | None = None,
    calibration: Any = None,
) -> SearchResult:
    """For each GPU type, the fewest cards (1, 2, 4, 8, 16...) for which some knob setting fits;
    every evaluated (type, count) best row is returned, ranked, with the Pareto front marked.
    Every candidate is planned with ``calibration`` (None: the default rates)."""
    rl = str(base.get("method", "sft")) in ("ppo", "grpo")
    space = dict(RL_SPACE if rl else SFT_SPACE)
    counts = [c for c in GPU_COUNTS if c <= max_gpus]
    if not counts:
        raise TrainfitError(f"fit: --max-gpus {max_gpus} leaves no card count to try (counts: {GPU_COUNTS})")
    rows: list[Row] = []
    evaluated = invalid = 0
    t0 = time.perf_counter()
    total = len(gpus) * len(counts)
    done = 0
    batches = _batch_options(base, counts, pinned=pinned, rl=rl, global_batch=global_batch)
    for gpu in gpus:
        for count in counts:
            data = deep_copy(base)
            hw = data.setdefault("hardware", {})
            hw.update(_hardware(gpu, count, (prices or {}).get(gpu)))
            sp = dict(space)
            if not rl:
                if not batches.get(count):
                    done += 1
                    continue  # the global batch does not split over this many cards
                sp["batch"] = batches[count]  # (micro-batch, accumulation) pairs at the card's global batch
            if rl:
                sp["rollout.gpus"] = [max(1, min(count, 8) // 2)]
                sp["rollout.tensor_parallel"] = [t for t in space["rollout.tensor_parallel"] if t <= min(count, 8)]
            if count == 1:
                sp["parallel.strategy"] = ["single"]
                sp.pop("rollout.placement", None)
            result = search(data, sp, pinned=pinned, limit=limit, calibration=calibration)
            evaluated += result.evaluated
            invalid += result.invalid
            done += 1
            if progress is not None:
                progress(done / total)
            if result.rows:
                best = result.rows[0]
                rows.append(replace_knobs(best, gpu=gpu, count=count))
            if result.best is not None:
                break  # fewest cards of this type found
    rows.sort(key=_rank_key)
    return SearchResult(tuple(_mark_pareto(rows)), evaluated, invalid, time.perf_counter() - t0)


def _batch_options(
    base: dict[str, Any], counts: list[int], *, pinned: frozenset[str], rl: bool, global_batch: int | None = None
) -> dict[int, list]:
    """For each card count, the (micro-batch, gradient accumulation) pairs that keep the card's
    global batch (micro-batch x accumulation x data-parallel ranks) fixed.

    Raises TrainfitError when no count can keep it (an impossible global batch)."""
    if rl:
        return {}
    b = base.get("batch", {})
    hw = base.get("hardware", {})
    mbs, ga = int(b.get("micro_batch_size", 1)), int(b.get("grad_accum", 1))
    world = int(hw.get("gpus_per_node", 8)) * int(hw.get("nodes", 1))
    strategy = base.get("parallel", {}).get("strategy", "fsdp")
    if global_batch is None:
        global_batch = mbs * ga * (1 if strategy == "single" else world)
    choices = [mbs] if "batch.micro_batch_size" in pinned else [1, 2, 4, 8]
    out: dict[int, list] = {}
    for c in counts:
        pairs = [{"micro_batch_size": m, "grad_accum": global_batch // (m * c)}
                 for m in choices if global_batch % (m * c) == 0]
        out[c] = pairs
    if not any(out.values()):
        raise TrainfitError(
            f"fit: a global batch of {global_batch} sequences (micro-batch {mbs} x accumulation {ga} x {world} GPUs)"
            f" cannot be split over {', '.join(map(str, counts))} GPUs; change batch.grad_accum or --max-gpus"
        )
    return out


def replace_knobs(row: Row, *, gpu: str, count: int) -> Row:
    from dataclasses import replace

    return replace(row, knobs={"hardware.gpu": gpu, "gpus": count, **row.knobs})
