"""A calibration applied to one GPU kind: the rates a plan's time model divides by.

Pure Python: no torch import.
"""

from __future__ import annotations

from trainfit.calibration.file import Calibration
from trainfit.catalog.gpus import GpuSpec
from trainfit.compute.rates import DeviceRates, default_rates

ENGINE_HOST_FIELDS = ("engine_s_per_step", "engine_s_per_sequence", "engine_v0_s_per_sequence", "frontend_s_per_step",
                      "frontend_s_per_sequence", "frontend_cumulative_s_per_sequence", "vllm_eager_s_per_kernel",
                      "sglang_eager_s_per_kernel")
"""The rollout engines' host constants (``compute.decode_step``) a calibration may set: listed in the assumptions."""


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
    return calibration.path or f"(in memory, {calibration.created})"


def assumption_line(calibration: Calibration, gpu_id: str) -> str:
    """``calibration: <path> (<gpu ids>)``, saying when the plan's GPU is not among them."""
    ids = ", ".join(calibration.gpu_ids) or "no GPU"
    line = f"calibration: {calibration_label(calibration)} ({ids})"
    entry = calibration.device(gpu_id)
    if entry is None:
        line += f"; {gpu_id} is not in it: default rates"
    else:
        engine = [(k, v) for k, v in entry.rates if k in ENGINE_HOST_FIELDS and v is not None]
        for label, own in (("vLLM", [kv for kv in engine if not kv[0].startswith("sglang_")]),
                           ("SGLang", [kv for kv in engine if kv[0].startswith("sglang_")])):
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
