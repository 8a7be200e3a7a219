"""The plan as one JSON-serialisable object (schema: docs/plan-json.md). No arithmetic here."""

from __future__ import annotations

from typing import Any

from trainfit import __version__
from trainfit.plan.result import Plan

SCHEMA_VERSION = 1


def _calibration(plan: Plan) -> dict[str, Any] | None:
    from trainfit.calibration.apply import calibration_to_json

    return calibration_to_json(plan.calibration)


def _b(x: float) -> int:
    return int(round(x))


def is_byte_key(key: str) -> bool:
    """A key that names a byte figure (``*_bytes``, ``bytes_*``, ``bytes``): written as an integer."""
    return key == "bytes" or key.endswith("_bytes") or key.startswith("bytes_")


def _terms(terms) -> dict[str, Any]:
    """A timed phase's terms: seconds stay floats, byte figures (the optimizer's ``bytes_moved``) become integers."""
    return {k: _b(v) if is_byte_key(k) and v is not None else v for k, v in terms.items()}


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    spec, gpu, peak = plan.spec, plan.gpu, plan.peak
    return {
        "schema_version": SCHEMA_VERSION,
        "trainfit_version": __version__,
        "model": {
            "name": spec.name,
            "family": spec.family,
            "source": spec.source,
            "verified": spec.verified,
            "assumed_shape": spec.assumed_shape,
            "params_total": plan.params_total,
            "params_trainable": plan.params_trainable,
            "params_without_embedding": plan.params_without_embedding,
        },
        "method": plan.card.method.value,
        "scope": plan.card.scope.value,
        "gpu": {"id": gpu.id, "name": gpu.name, "memory_bytes": gpu.memory_bytes, "source": gpu.source},
        "world_size": plan.card.world_size,
        "train_world_size": plan.sharding.world_size,
        "strategy": plan.sharding.strategy.value,
        "peak_gpu_bytes": {"allocated": _b(peak.allocated), "reserved": _b(peak.reserved), "device": _b(peak.device)},
        "peak_phase": peak.phase.value,
        "peak_at": peak.at,
        "worst_rank": None if plan.worst_rank is None else {
            "tp": plan.worst_rank.tp, "pp": plan.worst_rank.pp, "cp": plan.worst_rank.cp,
            "ep": plan.worst_rank.ep, "dp": plan.worst_rank.dp},
        "stage_peak_device_bytes": [_b(v) for v in plan.stage_peaks],
        "fits": plan.fits,
        "gpu_capacity_bytes": plan.capacity_bytes,
        "gpu_capacity_basis": plan.capacity_basis,
        "headroom_bytes": plan.capacity_bytes - _b(peak.device),  # exactly capacity - the peak printed above
        "host_ram_bytes": _b(plan.host_ram_bytes),
        "host_ram": {k: _b(v) for k, v in plan.host_ram.items()},
        "phases": [
            {
                "name": p.phase.value,
                "at": p.at,
                "gpu_bytes": {"allocated": _b(p.allocated), "reserved": _b(p.reserved), "device": _b(p.device)},
                "components": {k: _b(v) for k, v in p.components.items()},
                "seconds": _time_of(plan, p.phase.value, "seconds"),
                "bound": _time_of(plan, p.phase.value, "bound"),
                "overhead": {
                    "allocator_rounding": _b(p.overhead.rounding),
                    "fragmentation": _b(p.overhead.fragmentation),
                    "stream_pools": _b(p.overhead.stream_pools),
                    "cublas_workspace": _b(p.overhead.cublas_workspace),
                    "cuda_context": _b(p.overhead.cuda_context),
                    "nccl_buffers": _b(p.overhead.nccl_buffers),
                },
            }
            for p in plan.phases
        ],
        "roles": [{"name": r.name, "trained": r.trained, "placement": r.placement, "gpus": r.gpus, "model": r.model}
                  for r in plan.roles],
        "rollout": None if plan.rollout is None else {
            "engine": plan.rollout.engine,
            "kv_bytes_per_token": _b(plan.rollout.kv_bytes_per_token),
            "kv_capacity_tokens": plan.rollout.kv_capacity_tokens,
            "demand_tokens": plan.rollout.demand_tokens,
            "needed_concurrency": plan.rollout.needed_concurrency,
            "max_concurrency": plan.rollout.max_concurrency,
            "preempts": plan.rollout.preempts,
            "reason": plan.rollout.reason,
            "engine_fits": plan.rollout.engine_fits,
            "engine_device_bytes": _b(plan.rollout.engine_device_bytes),
        },
        "groups": [{"name": g.name, "gpus": g.gpus, "peak_device_bytes": _b(max(p.device for p in g.phases)),
                    "phases": [p.phase.value for p in g.phases]} for g in plan.groups],
        "step_seconds": plan.step_seconds,
        "step_unavailable": plan.step_unavailable,
        "step_time_parts": plan.time_parts,
        "time": None if plan.step_seconds is None else {
            "step_seconds": plan.step_seconds,
            "tokens_per_step": plan.tokens_per_step,
            "tokens_per_second": plan.tokens_per_s,
            "phases": [{"name": t.name, "seconds": t.seconds, "bound": t.bound, "terms": _terms(t.terms)}
                       for t in plan.time_phases],
        },
        "cost": None if plan.price is None else {
            "per_hour": plan.cost_per_hour,
            "currency": plan.price.currency,
            "per_gpu_hour": plan.price.per_gpu_hour,
            "gpus_per_instance": plan.price.gpus_per_instance,
            "billed_gpus": plan.billed_gpus,
            "billing_note": plan.billing_note,
            "excludes": _excludes(),
        },
        "checkpoint": _checkpoint(plan),
        "calibration": _calibration(plan),
        "assumptions": list(plan.assumptions),
        "warnings": list(plan.warnings),
        "card": plan.card.model_dump(mode="json"),
    }


def _time_of(plan, name: str, field: str):
    """The timed phase of the same name (seconds on the slowest GPU, dominant bound), or None."""
    for t in plan.time_phases:
        if t.name == name:
            return getattr(t, field)
    return None


def _excludes() -> str:
    from trainfit.compute.cost import EXCLUDES

    return EXCLUDES


def _checkpoint(plan: Plan) -> dict[str, Any]:
    from trainfit.preflight.checkpoint import checkpoint_sizes

    c = checkpoint_sizes(plan.card, plan)
    return {
        "full_state_bytes": _b(c.full_state_bytes),
        "weights_only_bytes": _b(c.weights_only_bytes),
        "adapter_only_bytes": _b(c.adapter_only_bytes),
        "per_checkpoint_bytes": _b(c.per_checkpoint_bytes(plan.card)),
        "keep": plan.card.checkpoint.keep,
        "note": c.note,
    }


def suggestions_to_dict(fixes) -> dict[str, Any] | None:
    """Changes that make a failing plan fit (None when it fits)."""
    if fixes is None:
        return None

    def one(s) -> dict[str, Any]:
        return {
            "changes": s.changes,
            "knob_names": s.names,
            "saving_bytes": _b(s.saving_bytes),
            "peak_device_bytes": _b(s.peak_device_bytes),
            "step_seconds": s.step_seconds,
            "delta_seconds": s.delta_seconds,
        }

    singles, pairs = fixes
    return {"single": [one(s) for s in singles], "pairs": [one(s) for s in pairs]}
