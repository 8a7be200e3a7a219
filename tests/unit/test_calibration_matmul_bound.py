"""A run-record fit whose matmul factor would land past the calibration file's limit (PEAK_TOLERANCE x the
datasheet dense 16-bit peak, ``file._check_range``) stops at that limit and says so in the fit's notes,
naming the records; it used to abort the whole calibrate with 'devices.h200.matmul_flops_per_s must be at
most ...', naming a file the user never wrote, and lose the other groups."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trainfit.calibration import fit_records, make_calibration, rates_for, records_from_data
from trainfit.calibration.file import PEAK_TOLERANCE
from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import default_rates

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_calibration_inputs import _record, _synthetic_predict  # noqa: E402


def test_the_matmul_scale_stops_at_the_file_limit_and_the_note_names_the_records():
    peak = resolve_gpu("h200").half_dense_flops_per_s
    limit = peak * PEAK_TOLERANCE
    base = default_rates(resolve_gpu("h200"))
    # records that only a matmul rate past the limit explains
    truth = make_calibration({"h200": {"matmul_flops_per_s": limit}})
    records = []
    for model in ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B"):
        for seq in (256, 8192):
            (r,) = records_from_data(_record(model, seq), where=f"{model}@{seq}")
            fast = _synthetic_predict(r.card, truth) / 2.0  # twice as fast as the limit rate explains
            records.append(type(r)(card=r.card, step_s=fast, where=r.where))
    rates, (fit,) = fit_records(records, None, predict=_synthetic_predict)
    assert rates["h200"]["matmul_flops_per_s"] <= limit
    assert rates["h200"]["matmul_flops_per_s"] == pytest.approx(limit, rel=1e-9)
    assert fit.matmul_scale == pytest.approx(limit / base.matmul_flops_per_s, rel=1e-9)
    make_calibration(rates)  # the file format takes it (was: CardError, must be at most ...)
    (note,) = [n for n in fit.notes if "bound" in n]
    assert note.startswith(f"h200 fit: matmul scale hit its bound (x{limit / base.matmul_flops_per_s:.3g}: "
                           f"{limit:.3g} FLOP/s, {PEAK_TOLERANCE:g} x the datasheet dense 16-bit peak, the most a "
                           "calibration file holds)")
    assert note.endswith("records Qwen/Qwen3-0.6B@256, Qwen/Qwen3-0.6B@8192, Qwen/Qwen3-8B@256, Qwen/Qwen3-8B@8192 "
                         "ran faster than that rate explains")
    assert rates_for(resolve_gpu("h200"), make_calibration(rates)).matmul_flops_per_s <= limit
