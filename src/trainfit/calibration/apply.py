"""A calibration applied to one GPU kind: the rates a plan's time model divides by.

Pure Python: no torch import.
"""

from __future__ import annotations

from typing import Any

from trainfit.calibration.file import Calibration
from trainfit.catalog.gpus import GpuSpec
from trainfit.compute.rates import ENGINE_HOST_FIELDS, DeviceRates, default_rates  # ENGINE_HOST_FIELDS: re-exported


def rates_for(gpu: GpuSpec, calibration: Calibration | None) -> DeviceRates:
    """``default_rates(gpu)`` with the calibration's overrides for exactly ``gpu.id`` (a file's
    aliases were resolved to catalog ids when it was loaded). CardError when the catalog entry has
    no bf16 peak or bandwidth (``default_rates``)."""
    rates = default_rates(gpu)
    entry = calibration.device(gpu.id) if calibration is not None else None
    if entry is None:
        return rates
    return rates.with_overrides(entry.overrides(), source=f"calibration {calibration_label(calibration)}")


def calibration_label(calibration: Calibration) -> str:
    """Where a calibration came from, for assumptions and sources."""
    return calibration.path or f"(in memory, {calibration.created or 'undated'})"


def applied_values(calibration: Calibration, *, gpu_id: str, card: Any, phases: Any, timing: Any) -> dict[str, Any]:
    """What of the calibration a plan of ``card`` on ``gpu_id`` applies, ``{field: value}``: the time rates when
    the time model ran (``timing`` not None; whether one term reads one rate is not tracked), the engine host
    constants when the step has a generation phase (``sglang_``/``vllm_eager_`` ones for their own engine only),
    ``fragmentation_share`` when a phase's reserved holds the share (not replayed, a transient), and the
    ``reserved_replay_scale`` of the card's own layout when its reserved is replayed."""
    from trainfit.calibration.memory import FIELD, REPLAY_FIELD, layout_of

    entry = calibration.device(gpu_id)
    if entry is None:
        return {}
    timed = timing is not None
    generates = timed and any(getattr(p, "name", None) == "generation" for p in getattr(timing, "phases", ()))
    replayed = [p for p in phases if getattr(p.overhead, "replayed", False)]
    out: dict[str, Any] = {}
    for k, v in entry.rates:
        if k == FIELD:
            use = any(p.overhead.fragmentation and not getattr(p.overhead, "replayed", False) for p in phases)
        elif k == REPLAY_FIELD:
            own = dict(v).get(layout_of(card))
            use = bool(replayed) and own is not None
            v = ((layout_of(card), own),)
        elif k in ENGINE_HOST_FIELDS:
            # only vLLM's and SGLang's steps read them (compute.decode_step); transformers generate (engine hf) passes
            # its own host terms (compute.static_generation: engine_s_per_sequence 0, a v0 step with no frontend) and
            # the Hybrid Engine has its own (compute.hybrid_engine)
            # and of theirs only the ones their step model reads (plan.rl_common.engine_host_fields_read: V0 and V1
            # read different per-sequence and frontend constants), the same rule fit's summary uses
            from trainfit.plan.rl_common import engine_host_fields_read

            use = generates and v is not None and k in engine_host_fields_read(card)
        else:
            use = timed
        if use:
            out[k] = v
    return out


def calibration_use(calibration: Calibration, applied: dict[str, Any]):  # noqa: ANN201
    """``trainfit.plan.result.CalibrationUse`` of a plan."""
    from trainfit.plan.result import CalibrationUse

    return CalibrationUse(path=calibration.path, gpu_ids=calibration.gpu_ids, applied=tuple(sorted(applied.items())))


def applied_to_dict(applied: tuple[tuple[str, Any], ...] | dict[str, Any]) -> dict[str, Any]:
    """JSON of applied fields: ``gemm_points`` as ``gemm_points_count`` (as calibrate's changes give it), the replay
    scale as ``{layout: factor}``."""
    out: dict[str, Any] = {}
    for k, v in (applied.items() if isinstance(applied, dict) else applied):
        if k == "gemm_points":
            out["gemm_points_count"] = len(v)
        elif k == "reserved_replay_scale":
            out[k] = dict(v)
        else:
            out[k] = v
    return out


def calibration_to_json(use: Any) -> dict[str, Any] | None:
    """A plan's ``calibration`` JSON object: ``path``, ``gpus`` (every kind in the file), ``applied``."""
    if use is None:
        return None
    return {"path": use.path, "gpus": list(use.gpu_ids), "applied": applied_to_dict(use.applied)}


def assumption_line(calibration: Calibration, gpu_id: str, *, applied: dict[str, Any] | None = None,
                    engine: str | None = None) -> str:
    """``calibration: <path> (<gpu ids>)``, saying when the plan's GPU is not among them, then the engine host
    constants and memory constants the plan applied (``applied``; None: every one the file sets for ``gpu_id``).
    ``engine``: the card's rollout engine (``RolloutEngine`` value), which names the engine host constants it applied;
    None: the file's own split (``sglang_`` fields SGLang's, the others vLLM's)."""
    from trainfit.plan.rl_common import ENGINE_LABELS  # one table: the engines whose step reads them (the RL planner's)

    engine_of = getattr(engine, "value", engine)
    ids = ", ".join(calibration.gpu_ids) or "no GPU"
    line = f"calibration: {calibration_label(calibration)} ({ids})"
    if calibration.created is None:  # ``created`` is optional in the file (calibration.file)
        line += "; the file carries no created date"
    entry = calibration.device(gpu_id)
    if entry is None:
        line += f"; {gpu_id} is not in it: default rates"
    else:
        if applied is not None:
            from trainfit.calibration.file import DeviceCalibration

            entry = DeviceCalibration(gpu_id=gpu_id, rates=tuple(sorted(applied.items())))
        host = [(k, v) for k, v in entry.rates if k in ENGINE_HOST_FIELDS and v is not None]
        groups = (((ENGINE_LABELS.get(str(engine_of), str(engine_of)), host),) if engine_of is not None else
                  (("vLLM", [kv for kv in host if not kv[0].startswith("sglang_")]),
                   ("SGLang", [kv for kv in host if kv[0].startswith("sglang_")])))
        for label, own in groups:
            if own:
                line += f"; {label} engine host " + ", ".join(f"{k} {v * 1e6:.4g} us" for k, v in own)
        mem = entry.memory_overrides()
        if "fragmentation_share" in mem:
            line += f"; fragmentation share {mem['fragmentation_share']:.4g} of the step's largest transient"
        if "reserved_replay_scale" in mem:
            line += "; replayed reserved overhead x" + ", x".join(f"{v:.4g} ({k})" for k, v in mem["reserved_replay_scale"])
    return line


def apply_memory_calibration(plan, calibration: Calibration | None):  # noqa: ANN001, ANN201
    """``plan`` with the calibration's memory constants for its GPU (``trainfit.calibration.memory``):
    ``fragmentation_share`` on the phases whose reserved uses the share (``apply_fragmentation``),
    ``reserved_replay_scale`` of the card's ``allocator/strategy`` on the phases whose reserved comes
    from the allocator replay (``apply_replay_scale``); the plan itself when there are none."""
    entry = calibration.device(plan.gpu.id) if calibration is not None else None
    mem = entry.memory_overrides() if entry is not None else {}
    if not mem:
        return plan
    from trainfit.calibration.memory import apply_fragmentation, apply_replay_scale, layout_of

    if "fragmentation_share" in mem:
        plan = apply_fragmentation(plan, mem["fragmentation_share"])
    scale = dict(mem.get("reserved_replay_scale", ())).get(layout_of(plan.card))
    if scale is not None:
        plan = apply_replay_scale(plan, scale)
    return plan
