"""Measured rates for the step-time model: the calibration file, and the two ways to make one
(``benchmarks/gpu_calibrate.py time`` on a GPU; run records with measured step times).

    cal = load_calibration(find_calibration(None) or "cal.json")
    rates = rates_for(resolve_gpu("h200"), cal)        # default_rates + the file's overrides
    plan = make_plan(card, calibration=cal)

Pure Python: no torch import.
"""

from trainfit.calibration.apply import apply_memory_calibration, assumption_line, rates_for
from trainfit.calibration.build import CalibrateResult, RateChange, calibrate
from trainfit.calibration.file import (
    ENV_VAR, Calibration, DeviceCalibration, calibration_from_dict, calibration_to_dict, default_calibration_path,
    find_calibration, load_calibration, load_found_calibration, make_calibration, save_calibration,
)
from trainfit.calibration.gpu_output import from_gpu_output
from trainfit.calibration.records import RecordFit, RunRecord, fit_records, records_from_data

__all__ = [
    "ENV_VAR", "CalibrateResult", "apply_memory_calibration", "Calibration", "DeviceCalibration", "RateChange", "RecordFit", "RunRecord",
    "assumption_line", "calibrate", "calibration_from_dict", "calibration_to_dict", "default_calibration_path",
    "find_calibration", "fit_records", "from_gpu_output", "load_calibration", "load_found_calibration",
    "make_calibration", "rates_for", "records_from_data", "save_calibration",
]
