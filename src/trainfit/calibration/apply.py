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
    if calibration.device(gpu_id) is None:
        line += f"; {gpu_id} is not in it: default rates"
    return line
