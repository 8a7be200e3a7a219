"""`fit`: every GPU kind and card count, every open knob; ranked by the goal (``trainfit.objective``).

The spaces (``SFT_FIT_SPACE``, ``RL_SPACE``) are also where ``trainfit.suggest`` draws its changes.
Pure and deterministic: large spaces run on forked workers; the result does not depend on the split.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import time
from dataclasses import dataclass
from typing import Any

from trainfit.errors import TrainfitError
from trainfit.search import DEFAULT_LIMIT, PARALLEL_MIN, SFT_SPACE, Row, SearchResult, _evaluate
from trainfit.spec.dotted import deep_copy

SFT_FIT_SPACE: dict[str, list[Any]] = SFT_SPACE | {
    "parallel.offload": ["none", "optimizer", "params_and_optimizer"],
    "precision.optimizer": ["adamw", "adamw_8bit"],
}
"""What ``fit`` varies for SFT-like methods, plus (micro-batch, accumulation) pairs at the fixed global batch."""
RL_SPACE: dict[str, list[Any]] = {
    "scope": ["full", "lora", "qlora"],
    "parallel.offload": ["none", "params_and_optimizer"],
    "precision.optimizer": ["adamw", "adamw_8bit"],
    "loss.chunked": [False, True],
    "batch.micro_batch_size": [1, 2],
    "rollout.placement": ["colocate", "split"],
    "rollout.tensor_parallel": [1, 2, 4, 8],
    "rollout.gpu_memory_utilization": [0.3, 0.5, 0.7, 0.9],
    "rollout.sleep_level": [0, 1, 2],
    "rollout.cuda_graphs": [True, False],
    "rollout.weight_sync": ["per_parameter", "bucketed", "full_gather"],
}
"""PPO/GRPO knobs: every rollout knob the plan models. ``rollout.gpus`` (split) is half a node; the
engine's tensor parallel stays within its GPUs. Gradient checkpointing stays as the card has it (on
by default): pin it with --set to compare."""
MEMORY_ONLY = ("rollout.weight_sync",)
"""Knobs that change memory but not the step time (the time model syncs as the framework does, and
only the weight-sync phase holds the buffer): the value with the smallest buffer is the only one
planned, since a larger buffer can neither fit where it does not nor make the step faster."""
GPU_COUNTS = (1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64)
"""Card counts ``fit`` tries: every count on one 8-GPU node, then 2, 4 and 8 whole nodes."""


def flat_keys(data: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for k, v in data.items():
        key = f"{prefix}{k}"
        out.add(key)
        if isinstance(v, dict):
            out |= flat_keys(v, key + ".")
    return out


_PRICE_KEYS = ("price_per_gpu_hour", "currency", "price_preset")


def _hardware(gpu: str, count: int, price: Any) -> dict[str, Any]:
    hw: dict[str, Any] = {"gpu": gpu, "gpus_per_node": min(count, 8), "nodes": max(1, count // 8)}
    if price is not None:
        hw.update(price_per_gpu_hour=price.per_gpu_hour, currency=price.currency)
    return hw


def card_price(base: dict[str, Any]) -> tuple[str, Any] | None:
    """(GPU kind, price) the card itself names, for its own GPU kind only; None without one."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.cost import Price, for_gpu, price_preset

    hw = base.get("hardware") or {}
    if not hw.get("price_preset") and hw.get("price_per_gpu_hour") is None:
        return None
    gpu = resolve_gpu(str(hw.get("gpu", "a100-40gb"))).id
    if hw.get("price_preset"):
        return gpu, for_gpu(price_preset(str(hw["price_preset"])), gpu)
    return gpu, Price(per_gpu_hour=float(hw["price_per_gpu_hour"]), currency=str(hw.get("currency") or ""), gpu=gpu)


def fit_counts(base: dict[str, Any], *, max_gpus: int, pinned: frozenset[str]) -> list[int]:
    """The card counts to try: ``GPU_COUNTS`` up to ``max_gpus``, or the pinned
    ``hardware.gpus_per_node`` x ``hardware.nodes``."""
    hw = base.get("hardware") or {}
    if {"hardware.gpus_per_node", "hardware.nodes"} & pinned:
        per, nodes = int(hw.get("gpus_per_node", 8)), int(hw.get("nodes", 1))
        if nodes > 1 and per != 8:
            raise TrainfitError(f"fit: {nodes} nodes of {per} GPUs; fit lays out whole nodes of 8 beyond one node")
        return [per * nodes]
    counts = [c for c in GPU_COUNTS if c <= max_gpus]
    if not counts:
        raise TrainfitError(f"fit: --max-gpus {max_gpus} leaves no card count to try (counts: {GPU_COUNTS})")
    return counts


def _product(space: dict[str, list[Any]]) -> list[dict[str, Any]]:
    keys = sorted(space)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(space[k] for k in keys))]


def _free(space: dict[str, list[Any]], pinned: frozenset[str]) -> dict[str, list[Any]]:
    return {k: v for k, v in space.items() if k not in pinned}


def sft_combos(count: int, *, pinned: frozenset[str], batches: list[dict[str, int]]) -> list[dict[str, Any]]:
    """Every SFT-like knob setting for ``count`` cards (pins held)."""
    space = _free(SFT_FIT_SPACE, pinned)
    if count == 1 and "parallel.strategy" not in pinned:
        space["parallel.strategy"] = ["single"]
    if "batch" not in pinned:
        space["batch"] = batches
    return _product(space)


def rl_combos(count: int, *, pinned: frozenset[str], base: dict[str, Any]) -> list[dict[str, Any]]:
    """Every PPO/GRPO knob setting for ``count`` cards (pins held), the memory-only knobs left out:
    the split placement's engine GPUs and the engine's tensor parallel follow the layout."""
    per_node = min(count, 8)
    space = _free({k: v for k, v in RL_SPACE.items() if k not in MEMORY_ONLY}, pinned)
    place = space.pop("rollout.placement", None)
    tps = space.pop("rollout.tensor_parallel", None)
    ro = base.get("rollout") or {}
    placements = place if place is not None else [ro.get("placement", "colocate")]
    out: list[dict[str, Any]] = []
    for placement in placements:
        if placement == "split":
            if per_node < 2:
                continue
            engine = [per_node // 2]
            if "rollout.gpus" in pinned:
                engine = [int(ro.get("gpus", 1))]
        else:
            engine = [None]
        for gpus in engine:
            layout: dict[str, list[Any]] = {}
            if place is not None:
                layout["rollout.placement"] = [placement]
            if gpus is not None and "rollout.gpus" not in pinned:
                layout["rollout.gpus"] = [gpus]
            if tps is not None:
                limit = gpus if gpus is not None else per_node
                layout["rollout.tensor_parallel"] = [t for t in tps if t <= limit] or [1]
            if count == 1 and "parallel.strategy" not in pinned:
                layout["parallel.strategy"] = ["single"]
            out += _product(space | layout)
    return out


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
    goal: Any = None,
    workers: int | None = None,
) -> FitResult:
    """Every GPU kind of ``gpus`` at every card count up to ``max_gpus`` (``GPU_COUNTS``), every
    knob the card leaves open (``pinned`` keys keep the card's value), each combination planned with
    ``calibration``. The result holds the best row of each (kind, count) by ``goal``
    (``trainfit.objective.Goal``; default: cost), ranked; the Pareto front (time against cost) is
    marked within each ranking currency.

    ``prices``: GPU catalog id -> ``Price`` (a price for another kind is refused); the card's own
    price applies to the card's own GPU kind only, unless ``prices`` names one for it.
    """
    from dataclasses import replace

    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.cost import for_gpu
    from trainfit.objective import Goal, annotate, rank_key

    goal = goal or Goal()
    rl = str(base.get("method", "sft")) in ("ppo", "grpo")
    if "hardware.gpu" in pinned:
        gpus = [resolve_gpu(str(base["hardware"]["gpu"])).id]
    own = card_price(base)
    table = dict(prices or {})
    if own is not None and own[0] not in table:
        table[own[0]] = own[1]
    table = {g: for_gpu(p, g) for g, p in table.items()}
    clean = deep_copy(base)
    for key in _PRICE_KEYS:
        (clean.get("hardware") or {}).pop(key, None)
    counts = fit_counts(base, max_gpus=max_gpus, pinned=pinned)
    batches = {} if rl else _batch_options(base, counts, pinned=pinned, global_batch=global_batch)
    t0 = time.perf_counter()
    bases: list[dict[str, Any]] = []
    jobs: list[tuple[int, dict[str, Any]]] = []
    for gpu in gpus:
        for count in counts:
            if not rl and not batches.get(count) and "batch" not in pinned:
                continue  # the global batch does not split over this many cards
            data = deep_copy(clean)
            data.setdefault("hardware", {}).update(_hardware(gpu, count, table.get(gpu)))
            bases.append(data)
            combos = (rl_combos(count, pinned=pinned, base=base) if rl
                      else sft_combos(count, pinned=pinned, batches=batches.get(count, [])))
            jobs += [(len(bases) - 1, c) for c in combos]
    fallback = {"rollout.weight_sync": smallest_sync(clean)} if rl and "rollout.weight_sync" not in pinned else {}
    n = len(jobs)
    if n > limit:
        raise TrainfitError(f"fit: the search space has {n:,} combinations (limit {limit:,}); pin some knobs"
                            " (--set KEY=VALUE), name fewer GPU kinds or lower --max-gpus")
    rows, evaluated, invalid = _run_jobs(bases, jobs, fallback, calibration, workers, progress)
    rows = [replace(r, price_id=table[r.gpu].id) if r.gpu in table else r for r in rows]
    best: dict[tuple[str, int], Row] = {}
    rows, warnings = annotate(rows, goal)
    for r in rows:
        k = (r.gpu, r.gpus)
        if k not in best or rank_key(r, goal) < rank_key(best[k], goal):
            best[k] = r
    ranked = sorted(best.values(), key=lambda r: rank_key(r, goal))
    return FitResult(tuple(_fit_pareto(ranked)), evaluated, invalid, time.perf_counter() - t0,
                     goal=goal, warnings=tuple(warnings))


@dataclass(frozen=True, slots=True)
class FitResult(SearchResult):
    goal: Any = None
    warnings: tuple[str, ...] = ()

    @property
    def best(self) -> Row | None:
        r = self.rows[0] if self.rows else None
        return r if r is not None and r.fits and r.within_limits else None


def smallest_sync(base: dict[str, Any]) -> str:
    """The ``rollout.weight_sync`` value whose trainer-side buffer is smallest for the card's model."""
    from trainfit.methods.rl import _sync_spike
    from trainfit.plan import model_spec_of
    from trainfit.spec.card import load_card_dict
    from trainfit.spec.enums import WeightSync

    spec = model_spec_of(load_card_dict(base))
    return min(RL_SPACE["rollout.weight_sync"], key=lambda v: (_sync_spike(WeightSync(v), spec), v))


def _job_rows(bases, jobs, fallback, calibration) -> tuple[list[Row], int, int]:
    """Plan each job (with the memory-only knobs ``fallback`` set to their best value); consecutive
    jobs on one base with the same keys go through ``_evaluate`` together."""
    rows: list[Row] = []
    invalid = 0
    for (idx, keys), group in itertools.groupby(jobs, key=lambda j: (j[0], tuple(sorted(j[1] | fallback)))):
        combos = [tuple((knobs | fallback)[k] for k in keys) for _, knobs in group]
        got, bad = _evaluate(bases[idx], list(keys), combos, calibration)
        invalid += bad
        hw = bases[idx]["hardware"]
        rows += [replace_knobs(r, gpu=hw["gpu"], count=hw["gpus_per_node"] * hw["nodes"]) for r in got]
    return rows, len(jobs), invalid


_FIT_WORK: tuple | None = None


def _fit_worker(bounds: tuple[int, int]) -> tuple[list[Row], int, int]:
    assert _FIT_WORK is not None
    bases, jobs, fallback, calibration = _FIT_WORK
    return _job_rows(bases, jobs[bounds[0]:bounds[1]], fallback, calibration)


def _unlimited_memory() -> bool:
    """False under an address-space limit (the web API's planning child), where forked workers are
    not started: the search runs in the process itself."""
    try:
        import resource

        return resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY
    except (ImportError, OSError, ValueError):
        return True


def _run_jobs(bases, jobs, fallback, calibration, workers, progress) -> tuple[list[Row], int, int]:
    """Every job planned, over the CPU cores for large spaces (forked after a warm-up); the result
    does not depend on the split."""
    global _FIT_WORK
    n_workers = workers if workers is not None else (os.cpu_count() or 1) if _unlimited_memory() else 1
    if n_workers > 1 and len(jobs) >= PARALLEL_MIN and "fork" in multiprocessing.get_all_start_methods():
        head = min(16, len(jobs))
        rows, evaluated, invalid = _job_rows(bases, jobs[:head], fallback, calibration)
        _FIT_WORK = (bases, jobs, fallback, calibration)
        step = -(-(len(jobs) - head) // (4 * n_workers))
        bounds = [(i, min(i + step, len(jobs))) for i in range(head, len(jobs), step)]
        try:
            with multiprocessing.get_context("fork").Pool(n_workers) as pool:
                for done, (r, e, i) in enumerate(pool.imap(_fit_worker, bounds), 1):
                    rows += r
                    evaluated += e
                    invalid += i
                    if progress is not None:
                        progress(done / len(bounds))
        finally:
            _FIT_WORK = None
        return rows, evaluated, invalid
    rows, evaluated, invalid = _job_rows(bases, jobs, fallback, calibration)
    if progress is not None:
        progress(1.0)
    return rows, evaluated, invalid


def _fit_pareto(rows: list[Row]) -> list[Row]:
    """Fitting rows within the limits that no other such row (same ranking currency) beats on both
    step time and cost per step; unpriced rows compare GPU-seconds per step."""
    from dataclasses import replace

    def cost(r: Row) -> tuple[str, float]:
        if r.rank_cost_per_step is not None:
            return ("=" + (r.rank_currency or ""), r.rank_cost_per_step)
        if r.cost_per_step is not None:
            return (r.currency or "", r.cost_per_step)
        return ("gpu-s", r.gpus * (r.step_seconds or 0.0))

    ok = [r for r in rows if r.fits and r.within_limits and r.step_seconds is not None]
    out = []
    for r in rows:
        if r not in ok:
            out.append(r)
            continue
        g, c = cost(r)
        beaten = any(
            o is not r and cost(o)[0] == g and o.step_seconds <= r.step_seconds and cost(o)[1] <= c
            and (o.step_seconds < r.step_seconds or cost(o)[1] < c)
            for o in ok
        )
        out.append(replace(r, pareto=not beaten))
    return out


def _batch_options(
    base: dict[str, Any], counts: list[int], *, pinned: frozenset[str], global_batch: int | None = None
) -> dict[int, list]:
    """For each card count, the (micro-batch, gradient accumulation) pairs that keep the card's
    global batch (micro-batch x accumulation x data-parallel ranks) fixed.

    Raises TrainfitError when no count can keep it (an impossible global batch)."""
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
        if "batch.grad_accum" in pinned:
            pairs = [p for p in pairs if p["grad_accum"] == ga]
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
