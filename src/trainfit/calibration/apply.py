"""A calibration applied to one GPU kind: the rates a plan's time model divides by.

Pure Python: no torch import.
"""

from __future__ import annotations

from trainfit.calibration.file import Calibration
from trainfit.catalog.gpus import GpuSpec
from trainfit.compute.rates import DeviceRates, default_rates


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
    elif "fragmentation_share" in entry.memory_overrides():
        line += f"; fragmentation share {entry.memory_overrides()['fragmentation_share']:.4g} of the step's largest transient"
    return line


def apply_memory_calibration(plan, calibration: Calibration | None):  # noqa: ANN001, ANN201
    """``plan`` with the calibration's memory constants for its GPU (``fragmentation_share``:
    ``trainfit.calibration.memory.apply_fragmentation``); the plan itself when there are none."""
    entry = calibration.device(plan.gpu.id) if calibration is not None else None
    share = entry.memory_overrides().get("fragmentation_share") if entry is not None else None
    if share is None:
        return plan
    from trainfit.calibration.memory import apply_fragmentation

    return apply_fragmentation(plan, share)
