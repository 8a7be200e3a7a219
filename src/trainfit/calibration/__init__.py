"""Measured rates for the step-time model: the calibration file, and the two ways to make one
(``benchmarks/gpu_calibrate.py time`` on a GPU; run records with measured step times, and RL records with
measured generation phases for the vLLM engine's host constants).

    cal = load_calibration(find_calibration(None) or "cal.json")
    rates = rates_for(resolve_gpu("h200"), cal)        # default_rates + the file's overrides
    plan = make_plan(card, calibration=cal)

Pure Python: no torch import.
"""

from importlib import import_module
from typing import TYPE_CHECKING

_HOME = {
    "apply_memory_calibration": "apply", "assumption_line": "apply", "rates_for": "apply",
    "CalibrateResult": "build", "RateChange": "build", "calibrate": "build",
    "ENV_VAR": "file", "Calibration": "file", "DeviceCalibration": "file", "calibration_from_dict": "file",
    "calibration_to_dict": "file", "default_calibration_path": "file", "find_calibration": "file",
    "load_calibration": "file", "load_found_calibration": "file", "make_calibration": "file",
    "save_calibration": "file",
    "EngineFit": "engine", "fit_engine": "engine",
    "from_gpu_output": "gpu_output",
    "RecordFit": "records", "RunRecord": "records", "fit_records": "records", "records_from_data": "records",
}
"""Each public name's submodule: imported on first use (PEP 562), so a plan loads only ``file`` and
``apply``, not the calibrate command's fitting code (the cold start)."""


def __getattr__(name: str):  # noqa: ANN202 - the attribute's own type
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'trainfit.calibration' has no attribute {name!r}")
    value = getattr(import_module(f"trainfit.calibration.{home}"), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from trainfit.calibration.apply import apply_memory_calibration, assumption_line, rates_for
    from trainfit.calibration.build import CalibrateResult, RateChange, calibrate
    from trainfit.calibration.file import (
        ENV_VAR, Calibration, DeviceCalibration, calibration_from_dict, calibration_to_dict,
        default_calibration_path, find_calibration, load_calibration, load_found_calibration, make_calibration,
        save_calibration,
    )
    from trainfit.calibration.engine import EngineFit, fit_engine
    from trainfit.calibration.gpu_output import from_gpu_output
    from trainfit.calibration.records import RecordFit, RunRecord, fit_records, records_from_data

__all__ = [
    "ENV_VAR", "CalibrateResult", "apply_memory_calibration", "Calibration", "DeviceCalibration", "EngineFit",
    "RateChange", "RecordFit", "RunRecord",
    "assumption_line", "calibrate", "calibration_from_dict", "calibration_to_dict", "default_calibration_path",
    "find_calibration", "fit_engine", "fit_records", "from_gpu_output", "load_calibration", "load_found_calibration",
    "make_calibration", "rates_for", "records_from_data", "save_calibration",
]
